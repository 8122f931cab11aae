"""The explore notebook's view (``notebooks/explore.ipynb``): a run picker and a sentence box
that redraw the model's outputs, its first-word distribution and its stack-action heat map
in place, without re-running the notebook::

    view = Explorer(find_runs(root / "results/runs"), run_dir, sentence, Settings(k=5))
    view.controls()            # display the run picker, the sentence box and a status line
    view.section("best")       # display a section: "run", "best", "decoded" or "actions"
    view.sentence_box.value = "the newt does giggle ."   # every section is redrawn

With ipywidgets (the ``lab`` extra) each section is an ``ipywidgets.Output`` whose outputs
are replaced, from the kernel, on every change: JupyterLab shows them live, and a headless
papermill run records them in the widget state and as plain text. Without ipywidgets (or
with ``interactive=False``) there are no controls and each section is displayed once, as
ordinary outputs.
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path

from fruit import explore
from fruit.errors import FruitError, check_integer

SECTIONS = ("run", "best", "decoded", "actions")


@dataclass
class Settings:
    """The explore notebook's parameters other than the run and the sentence."""

    marker: str | None = None  # None: the task's transformation marker unless typed
    k: int = 5  # outputs of the beam search / first words shown
    samples: int = 5  # sampled outputs
    max_tokens: int = 50
    device: str = "auto"
    data_dir: Path | None = None  # None: the data_dir of the run's config.json
    root: Path | None = None  # a relative data_dir in config.json is taken from here
    output_dir: Path | None = None  # None: nothing written; else checked here, written by save

    def __post_init__(self):
        """Checked as the command line checks its options: one line naming the parameter
        and its range (``fruit.explore``'s bounds keep every answer to seconds)."""
        from fruit.device import check_device

        self.k = check_integer("k", self.k, 1, explore.MAX_K)
        self.samples = check_integer("samples", self.samples, 0, explore.MAX_SAMPLES)
        self.max_tokens = check_integer("max_tokens", self.max_tokens, 1, explore.MAX_OUTPUT_TOKENS)
        self.device = check_device(self.device)
        if self.data_dir is not None and not Path(self.data_dir).is_dir():
            raise FruitError(f"data_dir {self.data_dir} is not a folder")
        if self.output_dir is not None:  # before any work: a file there is said at once
            from fruit.io import check_folder

            check_folder(self.output_dir, "output_dir")


@dataclass
class Shown:
    """Everything the sections show for one (run, sentence)."""

    run: explore.LoadedRun
    source: list[str]
    best: object  # pandas.DataFrame: output, p(y | x), finished
    first: object  # pandas.DataFrame: first word, p(y_1 | x)
    decoded: object  # pandas.DataFrame: kind, output, probability
    heat_map: bytes  # PNG


def find_runs(results_dir: str | Path) -> list[Path]:
    """Every trained run folder (one holding best.pt) under ``results_dir``, sorted."""
    return sorted(p.parent for p in Path(results_dir).glob("**/best.pt"))


def gen_sentence(run: explore.LoadedRun, data_dir: Path | None = None) -> str:
    """The first source sentence of the run's generalization set (marker left off)."""
    from fruit.tasks import read_tsv

    gen = Path(data_dir or run.config["data_dir"]) / run.config["task"] / "gen.tsv"
    if not gen.is_file():
        raise FruitError(f"{gen} is missing: type a sentence instead")
    tokens = read_tsv(gen)[0][0]
    markers = (run.task.identity_marker, run.task.transform_marker)
    return " ".join(tokens[:-1] if tokens and tokens[-1] in markers else tokens)


def compute(run: explore.LoadedRun, sentence: str, settings: Settings) -> Shown:
    """Beam search, first words, greedy/sampled outputs and the stack actions over the
    source and the greedy output. Raises FruitError for words outside the vocabulary."""
    import pandas as pd

    source = run.source(sentence, settings.marker)
    best = pd.DataFrame(
        explore.best_outputs(run, source, k=settings.k, max_tokens=settings.max_tokens),
        columns=["output", "p(y | x)", "finished"],
    ).assign(output=lambda f: f.output.str.join(" "))
    first = pd.DataFrame(
        explore.first_words(run, source, k=settings.k), columns=["first word", "p(y_1 | x)"]
    )
    decoded = pd.DataFrame(
        explore.decoded(run, source, samples=settings.samples, max_tokens=settings.max_tokens)
    )
    greedy = decoded.loc[decoded.kind == "greedy", "output"].iloc[0].split()
    actions = explore.stack_actions(run, source + greedy)
    c = run.config
    figure = explore.stack_action_figure(actions, title=f"{c['architecture']} on {c['task']}")
    return Shown(run, source, best, first, decoded, explore.figure_png(figure))


def describe(shown: Shown) -> str:
    """The "run" section: which run, how it did, the source as the model reads it."""
    run, c = shown.run, shown.run.config
    lines = [
        str(run.path),
        f"{c['task']}, {c['architecture']}, d={c['d']}, {c.get('num_parameters')} parameters",
    ]
    if run.metrics:
        m = run.metrics
        lines.append(
            f"status: {m['status']} | full accuracy: {_scores(m.get('full'))} | "
            f"partial accuracy: {_scores(m.get('partial'))}"
        )
    lines.append("source: " + " ".join(shown.source))
    lines.append(f"in the task's grammar: {run.task.accepts(shown.source[:-1])}")
    return "\n".join(lines)


def _scores(scores: dict | None) -> str:
    """{"test": 0.91, "hierarchical": 0.42, ...} as "test 0.91, hierarchical 0.42, ..."."""
    if not isinstance(scores, dict):
        return str(scores)
    return ", ".join(
        f"{k.replace('_', ' ')} {v:.3g}" for k, v in scores.items() if isinstance(v, (int, float))
    )


def section_objects(shown: Shown, name: str) -> list:
    """What a section displays: strings (printed) and objects with a rich display."""
    from IPython.display import Image

    if name == "run":
        return [describe(shown)]
    if name == "best":
        return [shown.best, shown.first]
    if name == "decoded":
        return [shown.decoded]
    if name == "actions":
        return [Image(shown.heat_map)]
    raise FruitError(f"unknown section {name!r}; valid choices: {', '.join(SECTIONS)}")


def _output(obj) -> dict:
    """One nbformat output (as an Output widget holds them) for a string or an object."""
    if isinstance(obj, str):
        return {"output_type": "stream", "name": "stdout", "text": obj + "\n"}
    from IPython import get_ipython
    from IPython.core.formatters import DisplayFormatter

    shell = get_ipython()  # the kernel's formatters (e.g. pandas' HTML) where there is one
    data, metadata = (shell.display_formatter if shell else DisplayFormatter()).format(obj)
    return {"output_type": "display_data", "data": data, "metadata": metadata}


def plain_text(outputs) -> str:
    """The text of a section's outputs (what a viewer without widget support shows)."""
    return "\n".join(
        o["text"].rstrip("\n") if o["output_type"] == "stream" else o["data"]["text/plain"]
        for o in outputs
    )


class Explorer:
    """The run picker, the sentence box and the sections they redraw (see module doc)."""

    def __init__(
        self,
        runs: list[Path],
        run_dir: str | Path,
        sentence: str = "",
        settings: Settings | None = None,
        interactive: bool = True,
    ):
        self.settings = settings or Settings()
        self.runs = [Path(r) for r in runs]
        if Path(run_dir) not in self.runs:
            self.runs.insert(0, Path(run_dir))
        self._loaded: dict[Path, explore.LoadedRun] = {}
        run = self.load(Path(run_dir))
        sentence = sentence or gen_sentence(run, self.data_dir(run.path))
        self.shown = compute(run, sentence, self.settings)
        self.sections: dict[str, object] = {}  # name -> Output widget (interactive only)
        self._switching = False
        self.widgets = _ipywidgets() if interactive else None
        if self.widgets is not None:
            self._build(Path(run_dir), sentence)

    # -- the model side ---------------------------------------------------------------------

    def load(self, run_dir: Path) -> explore.LoadedRun:
        if run_dir not in self._loaded:
            self._loaded[run_dir] = explore.load_run(
                run_dir, device=self.settings.device, data_dir=self.data_dir(run_dir)
            )
        return self._loaded[run_dir]

    def data_dir(self, run_dir: Path) -> Path | None:
        """The run's data folder: the one given, else its config.json's, where a relative
        one (`fruit train --data-dir data/smoke` records it so) counts from ``root``."""
        if self.settings.data_dir is not None or self.settings.root is None:
            return self.settings.data_dir
        try:
            config = json.loads((Path(run_dir) / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):  # no run folder, or a damaged record: load_run says so
            return None
        recorded = Path(config.get("data_dir") or ".") if isinstance(config, dict) else Path()
        return None if recorded.is_absolute() else self.settings.root / recorded

    def show(self, run_dir: Path, sentence: str) -> None:
        """Recompute for (run, sentence) and redraw; a bad sentence leaves the sections as
        they were and says why in the status line."""
        try:
            run = self.load(run_dir)
            self.shown = compute(run, sentence, self.settings)
        except FruitError as e:
            self._status(str(e), error=True)
            return
        self._redraw()

    def save(self, folder: Path) -> list[Path]:
        """The shown outputs (outputs.csv) and heat map (stack-actions.png) into ``folder``."""
        from fruit.io import atomic_write_text

        folder.mkdir(parents=True, exist_ok=True)
        (folder / "stack-actions.png").write_bytes(self.shown.heat_map)
        atomic_write_text(folder / "outputs.csv", self.shown.decoded.to_csv(index=False))
        return [folder / "stack-actions.png", folder / "outputs.csv"]

    # -- the notebook side ------------------------------------------------------------------

    def controls(self) -> None:
        """Display the run picker, the sentence box and the status line (nothing without
        ipywidgets)."""
        from IPython.display import display

        if self.widgets is None:
            print("(no sentence box: ipywidgets is not installed -- `make lab` installs it --")
            print(" or interactive is False; set `sentence` in the parameters and re-run)")
            return
        display(self.widgets.VBox([self.run_picker, self.sentence_box, self.status]))

    def section(self, name: str) -> None:
        """Display one section: a live Output widget, or its outputs once."""
        from IPython.display import display

        if self.widgets is None:
            for obj in section_objects(self.shown, name):
                if isinstance(obj, str):
                    print(obj)
                else:
                    display(obj)
            return
        if name not in self.sections:
            raise FruitError(f"unknown section {name!r}; valid choices: {', '.join(SECTIONS)}")
        display(self.sections[name])

    def _build(self, run_dir: Path, sentence: str) -> None:
        w = self.widgets
        self.run_picker = w.Dropdown(
            options=[(run_label(r), r) for r in self.runs],
            value=run_dir,
            description="run",
            layout=w.Layout(width="95%"),
        )
        self.sentence_box = w.Text(
            value=sentence,
            description="sentence",
            continuous_update=False,  # redraw on Enter or when the box loses focus
            layout=w.Layout(width="95%"),
        )
        self.status = w.HTML()
        section = _section_widget(w)
        self.sections = {name: section() for name in SECTIONS}
        self._redraw()
        self.sentence_box.observe(self._on_sentence, names="value")
        self.run_picker.observe(self._on_run, names="value")

    def _redraw(self) -> None:
        for name, out in self.sections.items():
            out.outputs = tuple(_output(o) for o in section_objects(self.shown, name))
        self._status("source: " + " ".join(self.shown.source))

    def _on_sentence(self, change) -> None:
        if not self._switching:
            self.show(self.run_picker.value, change["new"])

    def _on_run(self, change) -> None:
        """Another run: keep the sentence if the run's vocabulary has its words, else take
        the first sentence of the run's generalization set."""
        try:
            run = self.load(change["new"])
            sentence = self.sentence_box.value
            try:
                run.source(sentence, self.settings.marker)
            except FruitError:
                sentence = gen_sentence(run, self.data_dir(run.path))
        except FruitError as e:
            self._status(str(e), error=True)
            return
        self._switching = True  # one redraw, not one for the sentence and one for the run
        try:
            self.sentence_box.value = sentence
        finally:
            self._switching = False
        self.show(change["new"], sentence)

    def _status(self, text: str, error: bool = False) -> None:
        if self.widgets is None:
            return
        colour = "#b00020" if error else "inherit"
        self.status.value = f'<span style="color:{colour}">{html.escape(text, quote=False)}</span>'


def _ipywidgets():
    """The ipywidgets module, or None when it is not installed."""
    try:
        import ipywidgets
    except ImportError:
        return None
    return ipywidgets


def _section_widget(widgets):
    """An Output widget whose plain-text form (for viewers without widget support, e.g. a
    papermill record read as text) is its outputs' text rather than "Output()"."""

    class Section(widgets.Output):
        def _repr_mimebundle_(self, **kwargs):
            data = super()._repr_mimebundle_(**kwargs)
            data["text/plain"] = plain_text(self.outputs)
            return data

    return Section


def run_label(run_dir: Path) -> str:
    """A run folder as <profile>/<task>/<architecture>/<phase>-<i> (its last four parts)."""
    return "/".join(Path(run_dir).parts[-4:])
