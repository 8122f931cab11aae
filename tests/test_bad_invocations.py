"""A corpus of bad invocations: `fruit data`, `train`, `run`,
`report` and the notebooks with bad options, bad files and bad folders.

Each must exit non-zero with one short line naming the problem (asserted on the message),
print no traceback, and leave no file behind: the temporary folder it may touch is the
same before and after (paths, sizes, modification times). The commands run in-process
(``fruit.cli.main``); the notebooks through papermill (slow-marked: a kernel each).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch
from test_reporting_fakes import write_run

from fruit import training
from fruit.cli import main as cli_main
from fruit.tasks import get_task
from fruit.tasks.splits import write_task

QF = "question-formation"
REPO = Path(__file__).resolve().parents[1]
SIZES = ["--train-size", "120", "--dev-size", "20", "--test-size", "20", "--gen-size", "20"]


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> dict[str, Path]:
    """Good data and one finished run, made once; each case copies what it needs."""
    root = tmp_path_factory.mktemp("made")
    torch.set_num_threads(1)
    task = get_task(QF)
    write_task(
        root / "data",
        task,
        task.generate(seed=1, sizes={"train": 120, "dev": 20, "test": 20, "gen": 20}),
    )
    config = training.RunConfig(
        task=QF, architecture="Tf", d=8, train_size=120, dev_size=20, test_size=20, gen_size=20,
        checkpoint_every=60, max_epochs=1, batch_tokens=256, learning_rate=1e-3, seed=0,
        data_dir=str(root / "data"), device="cpu",
    )  # fmt: skip
    training.train_run(config, root / "finished")
    return {"data": root / "data", "finished": root / "finished"}


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size if p.is_file() else 0, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
    }


# ---------------------------------------------------------------- what a case may set up


def data_copy(made, tmp: Path, edit=None, split="train") -> Path:
    target = tmp / "bad-data"
    shutil.copytree(made["data"], target)
    if edit is not None:
        path = target / QF / f"{split}.tsv"
        path.write_bytes(edit(path.read_bytes()))
    return target


def line_edit(number: int, change):
    def edit(data: bytes) -> bytes:
        lines = data.decode().splitlines(keepends=True)
        lines[number - 1] = change(lines[number - 1])
        return "".join(lines).encode()

    return edit


def finished_copy(made, tmp: Path, damage=None) -> Path:
    target = tmp / "run"
    shutil.copytree(made["finished"], target)
    if damage:
        damage(target)
    return target


def official_source(made, tmp: Path, edit=None) -> Path:
    """A --from folder with dev/test/gen of question formation (train is generated)."""
    source = tmp / "published"
    (source / QF).mkdir(parents=True)
    for split in ("dev", "test", "gen"):
        shutil.copy(made["data"] / QF / f"{split}.tsv", source / QF / f"{split}.tsv")
    if edit:
        path = source / QF / "test.tsv"
        path.write_bytes(edit(path.read_bytes()))
    return source


def results(tmp: Path, **edits) -> Path:
    full = {"test": 0.9, "hierarchical": 0.5, "linear": 0.25, "log_ratio": 0.69}
    partial = {"test": None, "hierarchical": 0.6, "linear": 0.3, "log_ratio": 0.69}
    root = tmp / "res"
    run = write_run(root, "quick", QF, "Tf", 0, full, partial)
    for name, value in edits.items():
        if isinstance(value, bytes):
            (run / name).write_bytes(value)
        else:
            record = json.loads((run / "metrics.json").read_text())
            record[name] = value
            (run / "metrics.json").write_text(json.dumps(record))
    return root


def a_file(tmp: Path) -> Path:
    (tmp / "a-file").write_text("not a folder\n")
    return tmp / "a-file"


def someones_folder(made, tmp: Path, config: dict | None = None) -> Path:
    """A folder of someone's own files named as a run's are (no config.json), or with a
    config.json of something else."""
    folder = tmp / "mine"
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
        return folder
    for name, text in (("log.csv", "my,own,notes\n"), ("best.pt", "keep"), ("notes.txt", "x")):
        (folder / name).write_text(text)
    return folder


def a_lone_train_notebook(tmp: Path) -> Path:
    """A copy of train.ipynb in a folder without report.ipynb."""
    (tmp / "lone").mkdir()
    (tmp / "lone" / "train.ipynb").write_bytes((REPO / "notebooks/train.ipynb").read_bytes())
    return tmp / "lone" / "train.ipynb"


def bad_toml(tmp: Path) -> Path:
    (tmp / "mine.toml").write_text("name = 'mine'\ntasks = [\n")
    return tmp / "mine.toml"


def profile_file(text: str | bytes, name: str = "mine.toml"):
    """A case's own profile file (a minimal valid profile plus ``text``)."""
    base = 'name = "mine"\ntasks = ["question-formation"]\narchitectures = ["Tf"]\n'

    def make(tmp: Path) -> Path:
        path = tmp / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(base + text)
        return path

    return make


def file_where_a_task_folder_goes(m, t: Path) -> list[str]:
    (t / "out").mkdir()
    (t / "out" / QF).write_text("not a folder\n")
    return data()(m, t)


def a_folder(tmp: Path, name: str) -> Path:
    (tmp / name).mkdir()
    return tmp / name


SMALL_DATA = "[data]\ntrain = 120\ndev = 20\ntest = 20\ngen = 20\n"
FIXED = SMALL_DATA + "[final]\nbatch_tokens = 512\nlearning_rate = 0.001\n"  # no search
SPACE_NAME = (
    'name = "my run"\ntasks = ["question-formation"]\narchitectures = ["Tf"]\n' + FIXED
).encode()
BACKSLASH_NAME = (
    'name = "a\\\\b"\ntasks = ["question-formation"]\narchitectures = ["Tf"]\n' + SMALL_DATA
).encode()


def compare_folders(m, t: Path, ours_lines: int, theirs_lines: int) -> list[str]:
    """--compare OURS --published THEIRS with that many test lines each."""
    lines = (m["data"] / QF / "test.tsv").read_text().splitlines(keepends=True)
    for name, count in (("ours", ours_lines), ("theirs", theirs_lines)):
        (t / name / QF).mkdir(parents=True)
        (t / name / QF / "test.tsv").write_text("".join(lines[:count]))
    return ["data", "--task", QF, "--compare", str(t / "ours"), "--published", str(t / "theirs")]


UTF16 = lambda data: data.decode().encode("utf-16")  # noqa: E731
CR_ONLY = lambda data: data.replace(b"\n", b"\r")  # noqa: E731
NO_MARKER = line_edit(4, lambda t: t.replace(" decl\t", "\t").replace(" quest\t", "\t"))
NBSP = line_edit(2, lambda t: t.replace(" ", "\u00a0", 1))
ZEBRA = line_edit(3, lambda t: "qzxv " + t)


# ---------------------------------------------------------------- the corpus

# (id, argv built from (made, tmp), message). Arguments are lists or callables.
TRAIN = [
    "train",
    "--task",
    QF,
    "--architecture",
    "Tf",
    "--d",
    "8",
    "--device",
    "cpu",
    "--no-progress",
]


def train(*extra, data=lambda m, t: m["data"]):
    return lambda m, t: [
        *TRAIN,
        "--data-dir",
        str(data(m, t)),
        "--output-dir",
        str(t / "results"),
        *SIZES,
        *map(str, extra),
    ]


def train_in(run_dir, *extra):
    return lambda m, t: [*TRAIN, "--data-dir", str(m["data"]), "--run-dir", str(run_dir(m, t)), *SIZES,
                         "--checkpoint-every", "60", "--max-epochs", "1", "--batch-tokens", "256",
                         "--learning-rate", "1e-3", "--seed", "0", *map(str, extra)]  # fmt: skip


def data(*extra):
    small = ["--train-size", "50", "--dev-size", "5", "--test-size", "5", "--gen-size", "5"]
    return lambda m, t: ["data", "--task", QF, "--out", str(t / "out"), *small, *map(str, extra)]


def official(edit=None):
    return lambda m, t: ["data", "--official", "--task", QF, "--out", str(t / "out"),
                         "--train-size", "200", "--from", str(official_source(m, t, edit))]  # fmt: skip


def report(*extra, **edits):
    return lambda m, t: ["report", "--results", str(results(t, **edits)), "--profile", "quick",
                         "--out", str(t / "tables"), "--figures", str(t / "figures"), *map(str, extra)]  # fmt: skip


def run(*extra):
    return lambda m, t: ["run", "--profile", "smoke", "--results", str(t / "results"),
                         "--figures", str(t / "figures"), "--data-dir", str(t / "data"), *map(str, extra)]  # fmt: skip


CUDA = torch.cuda.is_available()
CORPUS = [
    # fruit data
    ("data-unknown-task", lambda m, t: ["data", "--task", "nope", "--out", str(t / "out")], "unknown task 'nope'; valid choices:"),
    ("data-train-size-0", data("--train-size", 0), "--train-size must be an integer from 1 to 1,000,000, not 0"),
    ("data-dev-size-negative", data("--dev-size", -5), "--dev-size must be an integer from 1 to 1,000,000, not -5"),
    ("data-gen-size-huge", data("--gen-size", 2_000_000), "--gen-size must be an integer from 1 to 1,000,000, not 2000000"),
    ("data-train-size-huge", data("--train-size", 10**12), "--train-size must be an integer from 1 to 1,000,000"),
    ("data-seed-negative", data("--seed", -1), "--seed must be an integer from 0 to"),
    ("data-from-without-official", lambda m, t: ["data", "--from", str(t), "--out", str(t / "out")], "--from DIR goes with --official"),
    ("data-published-without-compare", lambda m, t: ["data", "--published", str(t), "--out", str(t / "out")], "--published DIR goes with --compare DIR"),
    ("data-official-missing-folder", lambda m, t: ["data", "--official", "--task", QF, "--from", str(t / "nothing"), "--out", str(t / "out")], "nothing does not exist"),
    ("data-official-utf16", official(UTF16), "test.tsv: the file is UTF-16 or UTF-32 text; save it as UTF-8"),
    ("data-official-no-marker", official(NO_MARKER), "test.tsv:4: expected a source ending in the marker"),
    ("data-official-nbsp", official(NBSP), "test.tsv:2: the character U+00A0 (NO-BREAK SPACE)"),
    ("data-official-cr-line-ends", official(CR_ONLY), "(old Mac line ends? use LF or CRLF)"),
    ("data-official-empty-file", official(lambda data: b""), "test.tsv: no examples (an empty file)"),
    ("data-compare-nothing", lambda m, t: ["data", "--compare", str(a_folder(t, "nothing"))], "no <task>/test.tsv found to compare"),
    ("data-out-is-a-file", lambda m, t: ["data", "--task", QF, "--out", str(a_file(t))], "is a file, not a folder"),
    # fruit train
    ("train-unknown-task", lambda m, t: ["train", "--task", "nope", "--architecture", "Tf", "--output-dir", str(t)], "unknown task 'nope'; valid choices:"),
    ("train-unknown-architecture", lambda m, t: ["train", "--task", QF, "--architecture", "GRU", "--output-dir", str(t)], "unknown architecture 'GRU'; valid choices:"),
    ("train-unknown-profile", train("--profile", "nope"), "unknown profile 'nope'; valid choices:"),
    ("train-profile-not-toml", lambda m, t: [*train()(m, t), "--profile", str(bad_toml(t))], "not valid TOML"),
    ("train-learning-rate-inf", train("--learning-rate", "inf"), "learning_rate must be a finite number above 0, not inf"),
    ("train-learning-rate-nan", train("--learning-rate", "nan"), "learning_rate must be a finite number above 0, not nan"),
    ("train-learning-rate-0", train("--learning-rate", 0), "learning_rate must be a finite number above 0, not 0.0"),
    ("train-learning-rate-negative", train("--learning-rate", -0.1), "learning_rate must be a finite number above 0, not -0.1"),
    ("train-batch-tokens-0", train("--batch-tokens", 0), "batch_tokens must be an integer >= 1, not 0"),
    ("train-batch-tokens-below-longest", train("--batch-tokens", 5), "batch_tokens 5 is below the longest train example"),
    ("train-train-size-0", train("--train-size", 0), "train_size must be an integer from 1 to 1,000,000, not 0"),
    ("train-train-size-huge", train("--train-size", 5_000_000), "train_size must be an integer from 1 to 1,000,000, not 5000000"),
    ("train-train-size-beyond-the-file", train("--train-size", 500), "train.tsv has 120 examples but this run needs 500"),
    ("train-dev-size-0", train("--dev-size", 0), "dev_size must be an integer from 1 to 1,000,000, not 0"),
    ("train-max-epochs-0", train("--max-epochs", 0), "max_epochs must be an integer >= 1, not 0"),
    ("train-checkpoint-every-0", train("--checkpoint-every", 0), "checkpoint_every must be an integer >= 1, not 0"),
    ("train-num-samples-negative", train("--num-samples", -3), "num_samples must be an integer >= 0, not -3"),
    ("train-seed-negative", train("--seed", -1), "seed must be an integer from 0 to"),
    ("train-index-negative", train("--index", -1), "index must be an integer >= 0, not -1"),
    ("train-d-0", train("--d", 0), "d must be an integer from 1 to 4,096, not 0"),
    ("train-d-huge", train("--d", 100_000), "d must be an integer from 1 to 4,096, not 100000"),
    ("train-target-params-0", train("--target-params", 0), "target_params must be an integer from 1 to"),
    ("train-parameter-seed-negative", train("--parameter-seed", -5), "parameter_seed must be an integer from 0 to"),
    ("train-sampling-seed-huge", train("--sampling-seed", 2**64), "sampling_seed must be an integer from 0 to"),
    ("train-device-unknown", train("--device", "tpu"), "unknown device 'tpu'; valid choices: auto, cpu, cuda, cuda:N, mps"),
    pytest.param("train-device-cuda", train("--device", "cuda"), "CUDA is not available on this machine; valid choices here: auto, cpu", marks=pytest.mark.skipif(CUDA, reason="this machine has CUDA")),
    ("train-data-dir-missing", train(data=lambda m, t: t / "nothing"), "does not exist; add --generate-data"),
    ("train-data-utf16", train(data=lambda m, t: data_copy(m, t, UTF16)), "train.tsv: the file is UTF-16 or UTF-32 text"),
    ("train-data-no-marker", train(data=lambda m, t: data_copy(m, t, NO_MARKER)), "train.tsv:4: expected a source ending in the marker 'decl' or 'quest'"),
    ("train-data-unknown-test-token", train(data=lambda m, t: data_copy(m, t, ZEBRA, "test")), "test.tsv:3: the source token 'qzxv' is not in the vocabulary"),
    ("train-data-cr-line-ends", train(data=lambda m, t: data_copy(m, t, CR_ONLY, "dev")), "dev.tsv:1: the character U+000D"),
    ("train-data-nbsp", train(data=lambda m, t: data_copy(m, t, NBSP, "gen")), "gen.tsv:2: the character U+00A0 (NO-BREAK SPACE)"),
    ("train-finished-other-learning-rate", train_in(finished_copy, "--learning-rate", 0.5), "holds a finished run with other settings (learning_rate: 0.001 there, 0.5 here)"),
    ("train-finished-other-architecture", lambda m, t: [a if a != "Tf" else "LSTM" for a in train_in(finished_copy)(m, t)], 'architecture: "Tf" there, "LSTM" here'),
    ("train-finished-damaged-config", train_in(lambda m, t: finished_copy(m, t, lambda r: (r / "config.json").write_text("{"))), "config.json is damaged (not valid JSON"),
    ("train-finished-damaged-metrics", train_in(lambda m, t: finished_copy(m, t, lambda r: (r / "metrics.json").write_text("[]"))), "metrics.json is damaged (an array, not a JSON object)"),
    ("train-run-dir-is-a-file", train_in(lambda m, t: a_file(t)), "is a file, not a folder"),
    ("train-run-dir-someones-files", train_in(someones_folder), "holds files but no config.json (best.pt, log.csv, notes.txt), so it is not a run folder"),
    ("train-run-dir-someones-config", train_in(lambda m, t: someones_folder(m, t, {"my": "settings"})), "more); use another run folder"),
    ("train-output-dir-is-a-file", lambda m, t: [*train()(m, t), "--output-dir", str(a_file(t))], "is a file, not a folder"),
    # fruit report
    ("report-no-results", lambda m, t: ["report", "--results", str(t / "nothing"), "--out", str(t / "tables")], "nothing is not a folder: give the folder that holds"),
    ("report-unknown-profile", lambda m, t: [*report()(m, t), "--profile", "nope"], "no runs of profile 'nope' under"),
    ("report-profile-outside", lambda m, t: [*report()(m, t), "--profile", "../res"], "bad profile name '../res'"),
    ("report-expected-runs-0", report("--expected-runs", 0), "--expected-runs must be an integer >= 1"),
    ("report-expected-runs-negative", report("--expected-runs", -2), "--expected-runs must be an integer >= 1"),
    ("report-misplaced-architecture", report(architecture="Tf+Nd"), "holds architecture 'Tf+Nd' (folder: 'Tf')"),
    ("report-misplaced-profile", report(profile="smoke"), "holds profile 'smoke' (folder: 'quick')"),
    ("report-misplaced-index", report(index=4), "holds index 4 (folder: 0)"),
    ("report-damaged-metrics", report(**{"metrics.json": b'{"status": "comp'}), "metrics.json is damaged (not valid JSON"),
    ("report-damaged-config", report(**{"config.json": b"\x00\x01"}), "config.json is damaged (not valid JSON"),
    ("report-bad-status", report(status="great"), "status 'great' is not 'complete' or 'diverged'"),
    ("report-out-is-a-file", lambda m, t: [*report()(m, t), "--out", str(a_file(t))], "is a file, not a folder"),
    ("report-out-in-the-records", lambda m, t: [*report()(m, t), "--out", str(t / "res" / "runs" / "quick")], "lies inside the run records"),
    ("report-figures-in-a-run", lambda m, t: [*report()(m, t), "--figures", str(t / "res" / "runs" / "quick" / QF / "Tf" / "final-0")], "lies inside the run records"),
    # fruit run (refused before any cluster starts)
    ("run-unknown-profile", run("--profile", "nope"), "unknown profile 'nope'"),
    ("run-profile-not-toml", lambda m, t: [*run()(m, t), "--profile", str(bad_toml(t))], "not valid TOML"),
    ("run-workers-0", run("--workers", 0), "--workers must be a positive integer, not 0"),
    ("run-retries-negative", run("--retries", -1), "--retries must be 0 or more, not -1"),
    ("run-time-limit-not-a-duration", run("--time-limit", "soon"), "--time-limit 'soon' is not a duration"),
    ("run-time-limit-0", run("--time-limit", "0"), "--time-limit must be positive"),
    ("run-time-limit-negative", run("--time-limit", "-5m"), "--time-limit '-5m' is not a duration"),
    ("run-workers-negative", run("--workers", "-2"), "--workers must be a positive integer, not -2"),
    ("run-published-missing", lambda m, t: [*run()(m, t), "--published", str(t / "nothing")], "is not a folder"),
    ("run-task-not-in-profile", run("--task", "passivization"), "task 'passivization' is not in profile smoke; its tasks: question-formation"),
    ("run-architecture-not-in-profile", run("--architecture", "GRU"), "architecture 'GRU' is not in profile smoke; its architectures: "),
    ("run-scheduler-and-cluster", run("--scheduler", "tcp://127.0.0.1:1", "--cluster", "slurm"), "--scheduler (a running Dask cluster) and --cluster (one started here) exclude each other"),
    ("run-scheduler-and-cluster-dry-run", run("--scheduler", "tcp://127.0.0.1:1", "--cluster", "slurm", "--dry-run"), "exclude each other; give one of them"),
    ("run-figures-is-a-file-dry-run", lambda m, t: [*run("--dry-run")(m, t), "--figures", str(a_file(t))], "is a file, not a folder"),
    ("run-figures-in-the-records", lambda m, t: [*run()(m, t), "--figures", str(t / "results" / "runs" / "figs")], "lies inside the run records"),
    ("run-notebook-without-report", lambda m, t: [*run()(m, t), "--notebook", str(a_lone_train_notebook(t))], "no report.ipynb beside it for the reports after the runs; put one there (notebooks/report.ipynb) or add --skip-reports"),
    ("run-walltime-too-short", run("--cluster", "pbs", "--walltime", "90"), "walltime '90' is 90 s, too short for a job to train"),
    ("run-walltime-not-one-dry-run", run("--cluster", "slurm", "--walltime", "abc", "--dry-run"), "--walltime 'abc' is not a walltime"),
    ("run-memory-not-an-amount-dry-run", run("--cluster", "pbs", "--memory", "lots", "--dry-run"), "--memory 'lots' is not an amount of memory; give e.g. 16GB"),
    ("run-memory-zero", run("--cluster", "slurm", "--memory", "0GB"), "--memory '0GB' is not an amount of memory"),
]  # fmt: skip


CORPUS += [
    ("run-device-unknown", run("--device", "tpu"), "unknown device 'tpu'"),
    pytest.param("run-device-cuda", run("--device", "cuda"), "CUDA is not available on this machine", marks=pytest.mark.skipif(CUDA, reason="this machine has CUDA")),
    ("run-workers-thousands", run("--workers", 100_000), "--workers must be an integer from 1 to"),
    ("run-results-is-a-file", lambda m, t: [*run()(m, t), "--results", str(a_file(t))], "is not a folder"),
    ("run-dry-run-results-is-a-file", lambda m, t: [*run()(m, t), "--results", str(a_file(t)), "--dry-run"], "' is not a folder"),
]  # fmt: skip


# inputs a probe of the CLI found (each once a traceback, a silent fallback or files left)
CORPUS += [
    ("data-compare-too-few-published", lambda m, t: compare_folders(m, t, 10, 1), "that needs at least 2 published lines"),
    ("data-task-folder-is-a-file", file_where_a_task_folder_goes, "question-formation is a file, not a folder"),
    ("run-profile-search-lr-not-a-list", lambda m, t: [*run()(m, t), "--profile", str(profile_file(SMALL_DATA + "[search]\ntrials = 1\nlearning_rate = 0.001\n")(t)), "--dry-run"], "search.learning_rate must be [low, high]"),
    ("run-profile-search-b-not-a-list", lambda m, t: [*run()(m, t), "--profile", str(profile_file(SMALL_DATA + "[search]\ntrials = 1\nbatch_tokens = 512\n")(t)), "--dry-run"], "search.batch_tokens must be [low, high]"),
    ("run-profile-not-utf8", lambda m, t: [*run()(m, t), "--profile", str(profile_file(b'name = "p\xff"\n')(t)), "--dry-run"], "is not UTF-8 text"),
    ("run-profile-is-a-folder", lambda m, t: [*run()(m, t), "--profile", str(a_folder(t, "dir.toml"))], "is a folder, not a .toml file"),
    ("run-profile-reduced-a-string", lambda m, t: [*run()(m, t), "--profile", str(profile_file('reduced = "false"\n' + FIXED)(t)), "--dry-run"], "reduced must be true or false, not 'false'"),
    ("run-profile-name-space", lambda m, t: [*run()(m, t), "--profile", str(profile_file(SPACE_NAME)(t)), "--dry-run"], "profile name 'my run' may use only letters, digits and + @ , . _ -"),
    ("run-profile-name-backslash", lambda m, t: [*run()(m, t), "--profile", str(profile_file(BACKSLASH_NAME)(t)), "--dry-run"], "bad profile name 'a\\\\b'"),
    ("run-scheduler-not-an-address", run("--scheduler", "garbage"), "--scheduler 'garbage' is not a Dask address"),
    ("train-model-option-not-an-integer", lambda m, t: [*train("--architecture", "Tf+Sup")(m, t), "--profile", str(profile_file(FIXED + '[training]\nmodel_options = { sup_size = "abc" }\n')(t))], "training.model_options: sup_size must be a positive integer, got 'abc'"),
    ("train-model-option-init-scale", lambda m, t: [*train()(m, t), "--profile", str(profile_file(FIXED + '[training]\nmodel_options = { init_scale = "abc" }\n')(t))], "training.model_options: init_scale must be a positive number"),
    ("report-accuracy-above-1", report(full={"test": 1e308, "hierarchical": 0.5, "linear": 0.2, "log_ratio": 0.1}), "full.test = 1e+308 is not an accuracy (outside [0, 1])"),
    ("run-notebook-missing", run("--notebook", "/nonexistent/train.ipynb"), "--notebook '/nonexistent/train.ipynb': no such notebook file"),
    ("run-profile-data-seed-negative", lambda m, t: [*run()(m, t), "--profile", str(profile_file(FIXED.replace("[data]", "[data]\nseed = -5"))(t)), "--dry-run"], "data.seed must be at least 0, not -5"),
    ("data-official-empty-line", official(lambda b: b + b"\n"), "test.tsv:21: an empty line"),
    ("data-official-long-line", official(lambda b: b"x" * 100_000 + b"\tx\n" + b), "... (100,000 characters)"),
    ("data-compare-empty-split", lambda m, t: compare_folders(m, t, 0, 10)[:-2], "test.tsv: no examples to compare"),
    ("run-profile-clip-norm-negative", lambda m, t: [*run()(m, t), "--profile", str(profile_file(FIXED + "[training]\nclip_norm = -1\n")(t)), "--dry-run"], "training.clip_norm must be a finite number above 0, not -1"),
    ("run-profile-patience-a-string", lambda m, t: [*run()(m, t), "--profile", str(profile_file(FIXED + '[training]\nearly_stop_patience = "3"\n')(t)), "--dry-run"], "training.early_stop_patience must be an integer"),
    ("run-profile-model-option-unknown", lambda m, t: [*run()(m, t), "--profile", str(profile_file(FIXED + "[training]\nmodel_options = { sup_sise = 5 }\n")(t)), "--dry-run"], "training.model_options: unknown model option 'sup_sise'; valid choices: dropout"),
    ("run-profile-model-option-zero", lambda m, t: [*run()(m, t), "--profile", str(profile_file(FIXED + "[training]\nmodel_options = { nd_size = 0 }\n")(t)), "--dry-run"], "training.model_options: nd_size must be a positive integer, got 0"),
    ("sizes-target-below-any-model", lambda m, t: ["sizes", "--task", QF, "--target", "1000"], "the smallest Tf+Nd+Nd has"),
    ("sizes-data-dir-not-a-folder", lambda m, t: ["sizes", "--task", QF, "--data-dir", str(a_file(t))], "is not a folder"),
    ("sizes-empty-train", lambda m, t: ["sizes", "--task", QF, "--data-dir", str(data_copy(m, t, lambda b: b""))], "no examples, so no vocabulary"),
]  # fmt: skip


# the second probe (issue 34): accepted and then a traceback, a misleading answer, or an
# option silently doing nothing
CORPUS += [
    ("train-device-cpu-index", train("--device", "cpu:7"), "device 'cpu:7': the CPU has no numbered devices; use cpu"),
    ("run-device-cpu-index", run("--device", "cpu:7"), "device 'cpu:7': the CPU has no numbered devices"),
    ("train-data-dir-is-a-file", train(data=lambda m, t: a_file(t)), "a-file is a file, not a folder; give the folder that holds question-formation/train.tsv"),
    ("train-generate-data-dir-is-a-file", lambda m, t: [*train(data=lambda m, t: a_file(t))(m, t), "--generate-data"], "a-file is a file, not a folder"),
    ("run-data-dir-is-a-file", lambda m, t: [*run()(m, t), "--data-dir", str(a_file(t))], "is a file, not a folder"),
    ("run-time-limit-1s", run("--time-limit", "1s"), "--time-limit '1s' is too short"),
    # under a minute, no final run could start once the searches are recorded: refused
    ("run-time-limit-45s", run("--time-limit", "45s"), "--time-limit '45s' is too short for a run to start under it"),
    # options naming a file or folder, checked before any work (issue 45)
    ("run-notebook-not-a-notebook", lambda m, t: [*run()(m, t), "--notebook", str(a_file(t))], "a-file: not a Jupyter notebook (JSONDecodeError)"),
    ("report-results-is-a-file", lambda m, t: ["report", "--results", str(a_file(t)), "--profile", "quick"], "a-file is a file, not a folder"),
    ("data-from-is-a-file", lambda m, t: ["data", "--official", "--task", QF, "--out", str(t / "out"), "--from", str(a_file(t))], "a-file is a file, not a folder"),
    ("data-compare-is-absent", lambda m, t: ["data", "--compare", str(t / "nowhere")], "nowhere does not exist"),
    ("run-jobs-without-cluster", run("--jobs", 3), "--jobs sizes the batch jobs of --cluster slurm|pbs|sge and does nothing without it"),
    ("run-gpus-memory-without-cluster", run("--gpus", 2, "--memory", "16GB"), "--memory --gpus size the batch jobs"),
    ("run-workers-with-scheduler", run("--scheduler", "tcp://127.0.0.1:1", "--workers", 2), "--workers sizes the LocalCluster on this machine and does nothing with --scheduler"),
    ("train-dev-size-near-the-cap", train("--dev-size", 990_000), "dev_size 990,000 is too large: the dev set is validated at every checkpoint"),
    ("run-dev-size-near-the-cap", lambda m, t: [*run()(m, t), "--profile", str(profile_file(FIXED.replace("dev = 20", "dev = 990_000"))(t)), "--dry-run"], "dev_size 990,000 is too large"),
    ("run-profile-without-final", lambda m, t: [*run()(m, t), "--profile", str(profile_file(SMALL_DATA + "[search]\ntrials = 1\n")(t)), "--dry-run"], "[final] is missing: give runs = <final runs per pair>"),
    ("run-published-generated-profile", lambda m, t: [*run()(m, t), "--published", str(a_folder(t, "published"))], 'profile smoke generates its data ([data] source = "generated")'),
]  # fmt: skip


def test_the_corpus_is_large_enough():
    assert len(CORPUS) >= 50


@pytest.mark.parametrize("name, argv, message", CORPUS)
def test_a_bad_invocation_says_what_is_wrong_in_one_line(
    made, tmp_path, monkeypatch, capsys, name, argv, message
):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.chdir(home)  # relative defaults (data/, results/, figures/) would land here
    args = argv(made, tmp_path)  # sets up the files the case needs
    before = snapshot(tmp_path)
    code = cli_main(args)
    out, err = capsys.readouterr()
    assert code != 0, out + err
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fruit: error: "), err
    assert message in lines[0], err
    assert snapshot(tmp_path) == before, "the command left files behind"


# ---------------------------------------------------------------- the notebooks (papermill)

NOTEBOOK_CASES = [
    ("train.ipynb", {"learning_rate": float("inf")}, "learning_rate must be a finite number above 0, not inf"),
    ("train.ipynb", {"index": "abc"}, "index must be an integer, not 'abc'"),
    ("train.ipynb", {"device": "tpu"}, "unknown device 'tpu'"),
    ("train.ipynb", {"num_samples": -1}, "num_samples must be an integer >= 0, not -1"),
    ("train.ipynb", {"threads": 0}, "threads must be an integer >= 1, not 0"),
    ("tables.ipynb", {"expected_runs": 0}, "expected_runs must be an integer >= 1"),
    ("tables.ipynb", {"profile": "../res"}, "bad profile name '../res'"),
    ("tables.ipynb", {"profile": "quick", "misplaced": True}, "holds architecture 'Tf+Nd' (folder: 'Tf')"),
    ("figures.ipynb", {"expected_runs": "5"}, "expected_runs must be an integer >= 1"),
    ("figures.ipynb", {"profile": "nope.toml"}, "nope.toml' does not exist"),
    ("figures.ipynb", {"expected_runs": -2}, "expected_runs must be an integer >= 1"),
    ("data.ipynb", {"task": "nope"}, "unknown task 'nope'; valid choices: passivization"),
    ("data.ipynb", {"examples_per_split": -1}, "examples_per_split must be an integer >= 0"),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("notebook, parameters, message", NOTEBOOK_CASES)
def test_a_notebook_with_a_bad_parameter_fails_in_one_line(tmp_path, notebook, parameters, message):
    import papermill
    from papermill.exceptions import PapermillExecutionError

    home = tmp_path / "home"
    home.mkdir()
    parameters = dict(parameters)
    if notebook in ("tables.ipynb", "figures.ipynb"):
        root = results(
            tmp_path, **({"architecture": "Tf+Nd"} if parameters.pop("misplaced", False) else {})
        )
        parameters.update(results_dir=str(root), output_dir=str(tmp_path / "tables"), paper=False)
    else:
        parameters.update(output_dir=str(tmp_path / "results"), data_dir=str(tmp_path / "data"))
    executed = tmp_path / "executed.ipynb"
    before = snapshot(tmp_path)
    with pytest.raises(PapermillExecutionError) as e:
        papermill.execute_notebook(
            str(REPO / "notebooks" / notebook), str(executed), parameters=parameters,
            progress_bar=False, cwd=str(home), kernel_name="python3",
        )  # fmt: skip
    assert e.value.ename == "FruitError" and message in e.value.evalue
    shown = str(e.value)
    assert "Traceback" not in shown and len(shown.strip().splitlines()) <= 4, shown
    after = snapshot(tmp_path)
    after.pop(executed.name)  # the executed copy is the one file asked for
    assert after == before
    assert os.listdir(home) == []


@pytest.mark.parametrize(
    "argv, message",
    [
        (["data", "--compare", ""], "fruit data: error: --compare is empty"),  # an unset variable
        (["data", "--out="], "fruit data: error: --out is empty"),
        (["run", "--scheduler", "", "--dry-run"], "fruit run: error: --scheduler is empty"),
        (["train", "--seed", "abc"], "fruit train: error: argument --seed: invalid int value"),
    ],
)
def test_an_empty_or_mistyped_option_is_one_line_too(tmp_path, monkeypatch, capsys, argv, message):
    # argparse's own errors, and "" (which would mean "this folder" or "no scheduler"), are
    # refused before anything runs, in one line instead of after the usage block
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli_main(argv)
    out, err = capsys.readouterr()
    assert e.value.code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(message), err
    assert list(tmp_path.iterdir()) == []
