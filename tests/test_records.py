"""Records that can be trusted: a run folder is bound to its settings, a report
checks every record against its place, damaged records are named or mended, and every
input is checked before work starts (TSV policy, markers, vocabulary, ranges, device).

The oracles are independent of the code under test: an uninterrupted run of the same
settings, brute-force maxima over the data files, the bytes of the files themselves.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
from pathlib import Path

import pytest
import torch
from test_reporting_fakes import write_run

from fruit import training
from fruit.cli import main as cli_main
from fruit.errors import FruitError
from fruit.reporting.runs import load_runs
from fruit.tasks import get_task, read_tsv
from fruit.tasks.splits import write_task
from fruit.tasks.tsv import parse_tsv

QF = "question-formation"


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("data")
    task = get_task(QF)
    write_task(
        root, task, task.generate(seed=1, sizes={"train": 120, "dev": 20, "test": 20, "gen": 20})
    )
    return root


def tiny(data_dir, **overrides) -> training.RunConfig:
    settings = dict(
        task=QF, architecture="Tf", profile="smoke", seed=7, d=8, learning_rate=1e-3,
        batch_tokens=256, train_size=120, dev_size=20, test_size=20, gen_size=20,
        checkpoint_every=60, max_epochs=1, data_dir=str(data_dir), device="cpu",
    )  # fmt: skip
    settings.update(overrides)
    return training.RunConfig(**settings)


def without_timing(metrics: dict) -> dict:
    return {
        k: v
        for k, v in metrics.items()
        if k not in ("train_seconds", "evaluation_seconds", "warnings")
    }


def copy_data(data_dir: Path, into: Path) -> Path:
    """A private copy of the data folder that a test may damage."""
    for path in (data_dir / QF).iterdir():
        (into / QF).mkdir(parents=True, exist_ok=True)
        (into / QF / path.name).write_bytes(path.read_bytes())
    return into


@pytest.fixture(scope="module")
def finished(data_dir, tmp_path_factory) -> tuple[Path, dict]:
    """One finished tiny run: its folder and metrics (the uninterrupted oracle)."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    torch.set_num_threads(1)  # as in the tests (module fixtures come before autouse ones)
    return run_dir, training.train_run(tiny(data_dir), run_dir)


def clone(run_dir: Path, into: Path) -> Path:
    into.mkdir(parents=True)
    for path in run_dir.iterdir():
        (into / path.name).write_bytes(path.read_bytes())
    return into


# ---------------------------------------------------------------- run folders bound to settings


@pytest.mark.parametrize(
    "change, named",
    [
        ({"learning_rate": 0.5}, "learning_rate: 0.001 there, 0.5 here"),
        ({"architecture": "LSTM"}, 'architecture: "Tf" there, "LSTM" here'),
        ({"batch_tokens": 300}, "batch_tokens: 256 there, 300 here"),
        ({"seed": 8}, "seed: 7 there, 8 here"),
        ({"train_size": 100}, "train_size: 120 there, 100 here"),
    ],
)
def test_a_finished_folder_refuses_other_settings(finished, data_dir, change, named):
    run_dir, metrics = finished
    assert training.train_run(tiny(data_dir), run_dir) == metrics  # same settings: as before
    with pytest.raises(FruitError, match="holds a finished run with other settings") as e:
        training.train_run(tiny(data_dir, **change), run_dir)
    assert named in str(e.value)


def test_a_finished_folder_without_config_json_is_checked_against_its_metrics(
    finished, data_dir, tmp_path
):
    run_dir = clone(finished[0], tmp_path / "run")
    (run_dir / "config.json").unlink()
    assert training.train_run(tiny(data_dir), run_dir) == finished[1]
    with pytest.raises(FruitError, match="seed: 7 there, 9 here"):
        training.train_run(tiny(data_dir, seed=9), run_dir)


def test_fruit_train_on_a_finished_folder_with_another_architecture(finished, data_dir, capsys):
    run_dir, _ = finished
    argv = [
        "train", "--task", QF, "--architecture", "LSTM", "--d", "8", "--run-dir", str(run_dir),
        "--data-dir", str(data_dir), "--train-size", "120", "--dev-size", "20",
        "--test-size", "20", "--gen-size", "20", "--checkpoint-every", "60",
        "--max-epochs", "1", "--seed", "7", "--learning-rate", "1e-3", "--batch-tokens", "256",
        "--device", "cpu", "--no-progress",
    ]  # fmt: skip
    assert cli_main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and 'architecture: "Tf" there, "LSTM" here' in err
    assert cli_main([a if a != "LSTM" else "Tf" for a in argv]) == 0  # its own settings
    assert json.loads(capsys.readouterr().out) == finished[1]


# ---------------------------------------------------------------- damaged records


@pytest.mark.parametrize(
    "damage",
    [
        lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),  # truncated
        lambda p: p.write_bytes(b"not a checkpoint"),
        lambda p: torch.save({"model": {}}, p),  # a torch file without a training state
    ],
    ids=["truncated", "garbage", "wrong-content"],
)
def test_a_damaged_checkpoint_restarts_the_run_with_a_recorded_warning(
    finished, data_dir, tmp_path, capsys, damage
):
    run_dir = clone(finished[0], tmp_path / "run")
    (run_dir / "metrics.json").unlink()  # an unfinished run whose checkpoint is damaged
    damage(run_dir / "checkpoint.pt")
    metrics = training.train_run(tiny(data_dir), run_dir)
    assert without_timing(metrics) == without_timing(finished[1])  # as if never interrupted
    assert "checkpoint.pt could not be restored" in metrics["warnings"][0]
    assert (run_dir / "warnings.log").read_text().splitlines() == metrics["warnings"]
    assert (run_dir / "checkpoint.pt.damaged").is_file()
    assert "fruit: warning:" in capsys.readouterr().err


def test_a_damaged_config_json(finished, data_dir, tmp_path):
    unfinished = clone(finished[0], tmp_path / "unfinished")
    (unfinished / "metrics.json").unlink()
    (unfinished / "config.json").write_text('{"task": "question-form')
    metrics = training.train_run(tiny(data_dir), unfinished)
    assert without_timing(metrics) == without_timing(finished[1])
    assert "config.json could not be read" in metrics["warnings"][0]
    # a finished run's config.json cannot be re-made: named, with what to do
    done = clone(finished[0], tmp_path / "finished")
    (done / "config.json").write_bytes(b"\xff\xfe")
    for attempt in (
        lambda: training.train_run(tiny(data_dir), done),
        lambda: training.open_run(tiny(data_dir), done),  # the train notebook's way
    ):
        with pytest.raises(FruitError, match="config.json is damaged .*restore it, or delete"):
            attempt()


def test_damaged_metrics_json_is_named(finished, data_dir, tmp_path):
    run_dir = clone(finished[0], tmp_path / "run")
    (run_dir / "metrics.json").write_text("[1, 2]")
    with pytest.raises(
        FruitError, match=r"metrics.json is damaged \(an array, not a JSON object\)"
    ):
        training.train_run(tiny(data_dir), run_dir)


# ---------------------------------------------------------------- fruit report trusts no folder name


def fake(tmp_path, folder_index=0, **edits) -> Path:
    """A run folder quick/question-formation/Tf/final-<folder_index>, its metrics.json
    then edited."""
    full = {"test": 0.9, "hierarchical": 0.5, "linear": 0.25, "log_ratio": 0.69}
    partial = {"test": None, "hierarchical": 0.6, "linear": 0.3, "log_ratio": 0.69}
    run = write_run(tmp_path, "quick", QF, "Tf", folder_index, full, partial)
    if edits:
        record = json.loads((run / "metrics.json").read_text())
        record.update(edits)
        (run / "metrics.json").write_text(json.dumps(record))
    return run


@pytest.mark.parametrize(
    "edits, named",
    [
        ({"architecture": "Tf+Nd"}, "architecture 'Tf+Nd' (folder: 'Tf')"),
        ({"profile": "smoke"}, "profile 'smoke' (folder: 'quick')"),
        ({"task": "passivization"}, "task 'passivization' (folder: 'question-formation')"),
        ({"index": 3}, "index 3 (folder: 0)"),
        ({"phase": "search"}, "phase 'search' (folder: 'final')"),
    ],
)
def test_report_refuses_a_record_in_another_runs_place(tmp_path, edits, named):
    fake(tmp_path, folder_index=1)
    run = fake(tmp_path, **edits)
    with pytest.raises(FruitError, match="not where it belongs") as e:
        load_runs(tmp_path, "quick")
    assert str(run / "metrics.json") in str(e.value) and named in str(e.value)


@pytest.mark.parametrize(
    "name, content, named",
    [
        ("metrics.json", b'{"status": "compl', "metrics.json is damaged (not valid JSON"),
        ("metrics.json", b"\xff\xfe{}", "metrics.json is damaged (not valid JSON"),
        ("metrics.json", b"null", "metrics.json is damaged (null, not a JSON object)"),
        ("metrics.json", b'{"status": "won", "full": null}', "status 'won' is not"),
        ("metrics.json", b'{"status": "complete", "full": [1]}', "'full' is not a table"),
        ("config.json", b'{"provenance": ', "config.json is damaged (not valid JSON"),
    ],
)
def test_report_names_a_malformed_record(tmp_path, capsys, name, content, named):
    run = fake(tmp_path)
    (run / name).write_bytes(content)
    with pytest.raises(FruitError) as e:
        load_runs(tmp_path, "quick")
    assert str(run / name) in str(e.value) and named in str(e.value)
    out = tmp_path / "tables"
    argv = ["report", "--results", str(tmp_path), "--profile", "quick", "--out", str(out)]
    assert cli_main([*argv, "--no-figures", "--no-paper"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and named in err and not out.exists()


# ---------------------------------------------------------------- one TSV policy


def test_a_utf8_bom_and_crlf_line_ends_read_as_plain_lf_utf8(data_dir):
    plain = (data_dir / QF / "train.tsv").read_bytes()
    expected = read_tsv(data_dir / QF / "train.tsv")
    crlf = plain.replace(b"\n", b"\r\n")
    for variant in (codecs.BOM_UTF8 + plain, crlf, codecs.BOM_UTF8 + crlf, plain.rstrip(b"\n")):
        assert parse_tsv(variant, "train.tsv") == expected
    assert all("\ufeff" not in t for s, _ in parse_tsv(codecs.BOM_UTF8 + plain, "x") for t in s)


@pytest.mark.parametrize(
    "content, named",
    [
        ("a b decl\tb a\n".encode("utf-16"), "f.tsv: the file is UTF-16 or UTF-32 text"),
        (b"a b decl\tx\n\xe9 decl\tx\n", "f.tsv:2: expected UTF-8 text"),
        ("a b decl\tx\na\u00a0b decl\tx\n".encode(), "f.tsv:2: the character U+00A0 (NO-BREAK SPACE) at column 2"),
        ("a\u200bb decl\tx\n".encode(), "f.tsv:1: the character U+200B (ZERO WIDTH SPACE)"),
        ("a b decl\tx\n\ufeffc decl\tx\n".encode(), "f.tsv:2: the character U+FEFF"),
        (b"a b decl\tx\rc d decl\tx\r", "(old Mac line ends? use LF or CRLF)"),
        (b"a b decl\tx\n\nc decl\tx\n", "f.tsv:2: an empty line (expected 'SOURCE<TAB>TARGET')"),
    ],
)  # fmt: skip
def test_the_tsv_policy_refuses_what_would_change_tokens(content, named):
    with pytest.raises(FruitError) as e:
        parse_tsv(content, "f.tsv")
    assert named in str(e.value)


# ---------------------------------------------------------------- data checked before training


def damage_line(path: Path, line: int, edit) -> None:
    lines = path.read_text().splitlines(keepends=True)
    lines[line - 1] = edit(lines[line - 1])
    path.write_text("".join(lines))


@pytest.mark.parametrize(
    "split, line, edit, named",
    [
        ("test", 3, lambda t: "qzxv " + t, "test.tsv:3: the source token 'qzxv' is not in the vocabulary"),
        ("gen", 20, lambda t: t.replace("\t", "\tqzxv "), "gen.tsv:20: the target token 'qzxv'"),
        ("gen.linear", 2, lambda t: t.replace("\t", "\tqzxv "), "gen.linear.tsv:2: the target token 'qzxv'"),
        ("train", 5, lambda t: t.replace(" decl\t", "\t").replace(" quest\t", "\t"), "train.tsv:5: expected a source ending in the marker"),
        ("dev", 1, lambda t: t.replace(" decl\t", " DECL\t").replace(" quest\t", " QUEST\t"), "dev.tsv:1: expected a source ending in the marker"),
    ],
)  # fmt: skip
def test_bad_data_stops_a_run_before_anything_is_written(
    data_dir, tmp_path, split, line, edit, named
):
    data = copy_data(data_dir, tmp_path / "data")
    damage_line(data / QF / f"{split}.tsv", line, edit)
    with pytest.raises(FruitError) as e:
        training.open_run(tiny(data), tmp_path / "run")
    assert named in str(e.value) and str(data / QF) in str(e.value)
    assert not (tmp_path / "run").exists()
    # a sweep checks a user's folder once, before any run starts
    sizes = {"train": 120, "dev": 20, "test": 20, "gen": 20}
    with pytest.raises(FruitError, match=named.split(":")[0]):
        training.prepare_data(data, QF, seed=1, sizes=sizes)


def test_batch_tokens_below_the_longest_example_is_refused(data_dir, tmp_path):
    train, dev = (
        read_tsv(data_dir / QF / "train.tsv")[:120],
        read_tsv(data_dir / QF / "dev.tsv")[:20],
    )
    longest = max(len(x) + len(y) for x, y in train + dev)  # the oracle: the files themselves
    with pytest.raises(FruitError, match=f"it must be at least {longest}$"):
        training.open_run(tiny(data_dir, batch_tokens=longest - 1), tmp_path / "run")
    assert not (tmp_path / "run").exists()
    training.open_run(
        tiny(data_dir, batch_tokens=longest), tmp_path / "run"
    )  # the smallest valid B


@pytest.mark.parametrize(
    "field, value, named",
    [
        ("learning_rate", float("inf"), "learning_rate must be a finite number above 0, not inf"),
        ("learning_rate", float("nan"), "learning_rate must be a finite number above 0, not nan"),
        ("learning_rate", 0.0, "learning_rate must be a finite number above 0, not 0.0"),
        ("batch_tokens", 0, "batch_tokens must be an integer >= 1, not 0"),
        ("num_samples", -1, "num_samples must be an integer >= 0, not -1"),
        ("train_size", 5_000_000, "train_size must be an integer from 1 to 1,000,000"),
        ("dev_size", 0, "dev_size must be an integer from 1 to 1,000,000, not 0"),
        ("max_epochs", -2, "max_epochs must be an integer >= 1"),
        ("seed", -1, "seed must be an integer from 0 to"),
        ("index", -1, "index must be an integer >= 0"),
        ("d", 100_000, "d must be an integer from 1 to 4,096"),
        ("lr_factor", 1.0, "lr_factor must be a finite number above 0 and below 1"),
        ("clip_norm", float("inf"), "clip_norm must be a finite number above 0"),
        ("device", "tpu", "unknown device 'tpu'; valid choices: auto, cpu, cuda, cuda:N, mps"),
    ],
)  # fmt: skip
def test_every_setting_has_its_range(data_dir, field, value, named):
    with pytest.raises(FruitError) as e:
        training.resolve_config(tiny(data_dir, **{field: value}))
    assert named in str(e.value)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_cpu_only_machine_is_refused_up_front(data_dir, tmp_path):
    from fruit.device import check_device

    with pytest.raises(
        FruitError, match="CUDA is not available on this machine; valid choices here: auto, cpu"
    ):
        training.resolve_config(tiny(data_dir, device="cuda"))
    assert check_device("cuda:1", syntax_only=True) == "cuda:1"  # runs on other machines


def test_parameters_are_converted_strictly():
    make = training.RunConfig.from_parameters
    base = {"task": QF, "architecture": "Tf"}
    c = make({**base, "index": "3", "learning_rate": "1e-3", "partial_on_test": "False"})
    assert (c.index, c.learning_rate, c.partial_on_test) == (3, 1e-3, False)
    for key, value, named in [
        ("index", "abc", "index must be an integer, not 'abc'"),
        ("index", 1.5, "index must be an integer, not 1.5"),
        ("learning_rate", "fast", "learning_rate must be a number, not 'fast'"),
        ("partial_on_test", "maybe", "partial_on_test must be true or false"),
        ("model_options", "x", "model_options must be a table of options"),
    ]:
        with pytest.raises(FruitError, match=named):
            make({**base, key: value})


def test_a_sweep_refuses_a_finished_run_of_another_profile(tmp_path):
    from fruit.experiments.planning.plan import check_metrics_match, search_specs
    from fruit.profiles import load_profile

    spec = search_specs(load_profile("smoke"), QF, "Tf")[0]
    record = {k: getattr(spec, k) for k in ("task", "architecture", "phase", "index", "seed")}
    check_metrics_match(spec, {**record, "profile": "smoke"}, tmp_path)
    with pytest.raises(FruitError, match="profile differ"):
        check_metrics_match(spec, {**record, "profile": "quick"}, tmp_path)


def test_unchanged_dataclass_fields_round_trip(data_dir):
    # the record a finished folder is compared with is the config's own fields
    c = training.resolve_config(tiny(data_dir))
    record = training.config.settings_record(c)
    fields = {f.name for f in dataclasses.fields(c)} - {"resolved"}  # not a setting
    assert set(record) == fields | {"trial"}


def test_a_folder_of_foreign_files_is_refused_naming_the_first_few(tmp_path):
    """A run folder without config.json may hold what fruit's own sweep wrote there
    (runner.log, executed notebooks, warnings.log, an interrupted write); anything else
    makes it someone's folder, refused in one line naming three files and how many more."""
    from fruit.io import EXECUTED_NOTEBOOK, RUNNER_LOG, WARNINGS_LOG
    from fruit.training.resume import refuse_foreign_folder

    ours = [RUNNER_LOG, EXECUTED_NOTEBOOK, "train.attempt-1.ipynb", WARNINGS_LOG, ".log.csv.x.tmp"]
    for name in ours:
        (tmp_path / name).write_text("")
    refuse_foreign_folder(tmp_path)  # only fruit's own files: a run folder
    for name in ("a.txt", "b.txt", "c.txt", "d.txt", "e.txt"):
        (tmp_path / name).write_text("")
    with pytest.raises(FruitError) as e:
        refuse_foreign_folder(tmp_path)
    message = str(e.value)
    assert "(a.txt, b.txt, c.txt, and 2 more)" in message and "\n" not in message
    for name in ours:
        assert name not in message
    (tmp_path / "e.txt").unlink()  # four are named in full, not "and 1 more"
    with pytest.raises(FruitError, match=r"\(a\.txt, b\.txt, c\.txt, d\.txt\)"):
        refuse_foreign_folder(tmp_path)
