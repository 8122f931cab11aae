"""scripts/campaign-sync.sh: one pair's records from a campaign clone into a checkout.

Run on a scratch git repository holding a copy of the script and this repository's
.gitignore (the script works on the checkout it lies in); the oracle is git's index
afterwards, file by file.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PAIR = "results/runs/p/question-formation/Tf"


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout


def write_run(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)


@pytest.fixture
def checkout(tmp_path):
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "checkout"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(REPO / "scripts" / "campaign-sync.sh", repo / "scripts")
    shutil.copy(REPO / ".gitignore", repo)
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "t@example.org")
    git(repo, "config", "user.name", "t")
    # trial 0 was carried paused in an earlier step; another pair is not to be touched
    write_run(repo / PAIR / "search-0", {"config.json": "c0", "log.csv": "l0 old",
                                          "checkpoint.pt": "ck", "best.pt": "b", "paused.json": "p"})  # fmt: skip
    write_run(repo / "results/runs/p/question-formation/Tf+Nd/search-0",
              {"config.json": "x", "log.csv": "x", "metrics.json": "backfilled"})  # fmt: skip
    git(repo, "add", "-A")
    git(repo, "add", "-f", f"{PAIR}/search-0")
    git(repo, "commit", "-qm", "start")
    clone = tmp_path / "clone"
    write_run(clone / PAIR / "search-0", {"config.json": "c0", "log.csv": "l0 new", "metrics.json": "m0",
                                           "train.ipynb": "{}", "runner.log": "r"})  # fmt: skip
    write_run(clone / PAIR / "search-1", {"config.json": "c1", "log.csv": "l1", "checkpoint.pt": "ck1",
                                           "best.pt": "b1", "paused.json": "p1",
                                           "warnings.log": "resumed by commit x"})  # fmt: skip
    write_run(
        clone / PAIR / "search-2", {"config.json": "c2", "log.csv": "l2"}
    )  # no checkpoint yet
    write_run(clone / "results/runs/p/question-formation/Tf+Nd/search-0",
              {"config.json": "x", "log.csv": "x", "metrics.json": "not backfilled"})  # fmt: skip
    (clone / "results/runs/p/plan.json").write_text("plan")
    return repo, clone


def sync(repo: Path, clone: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(repo / "scripts" / "campaign-sync.sh"), str(clone), "p",
                           "question-formation/Tf", *extra], capture_output=True, text=True)  # fmt: skip


def staged(repo: Path) -> dict[str, str]:
    lines = git(repo, "status", "--porcelain", "--untracked-files=no").splitlines()
    return {line[3:]: line[:2].strip() for line in lines}


def test_finished_runs_come_in_and_their_resume_files_go_out(checkout):
    repo, clone = checkout
    done = sync(repo, clone)
    assert done.returncode == 0, done.stderr
    assert "1 finished run(s) copied, 0 unfinished carried" in done.stdout
    assert staged(repo) == {
        f"{PAIR}/search-0/checkpoint.pt": "D",
        f"{PAIR}/search-0/best.pt": "D",
        f"{PAIR}/search-0/paused.json": "D",
        f"{PAIR}/search-0/log.csv": "M",
        f"{PAIR}/search-0/metrics.json": "A",
        "results/runs/p/plan.json": "A",
    }
    assert not (repo / PAIR / "search-0" / "checkpoint.pt").exists()
    assert (repo / PAIR / "search-0" / "log.csv").read_text() == "l0 new"
    assert not (repo / PAIR / "search-1").exists()  # unfinished: only with --carry
    assert (
        "backfilled"
        == (repo / "results/runs/p/question-formation/Tf+Nd/search-0/metrics.json").read_text()
    )


def test_carry_adds_paused_runs_resume_files_despite_gitignore(checkout):
    repo, clone = checkout
    assert sync(repo, clone, "--carry").returncode == 0
    got = staged(repo)
    # warnings.log too: the finished run's metrics.json takes its warnings from it
    for name in (
        "config.json",
        "log.csv",
        "checkpoint.pt",
        "best.pt",
        "paused.json",
        "warnings.log",
    ):
        assert got[f"{PAIR}/search-1/{name}"] == "A"
    assert not any("search-2" in path for path in got)  # nothing to resume from yet


def test_bad_arguments_are_refused_with_the_usage(checkout):
    repo, clone = checkout
    assert "usage: scripts/campaign-sync.sh" in sync(repo, clone, "--carrry").stderr
    missing = subprocess.run(["bash", str(repo / "scripts" / "campaign-sync.sh"), str(clone), "p",
                              "question-formation/LSTM"], capture_output=True, text=True)  # fmt: skip
    assert missing.returncode == 2 and "no folder" in missing.stderr


def test_a_relative_clone_path_is_read_from_where_the_user_stands(checkout, tmp_path):
    repo, clone = checkout
    done = subprocess.run(["bash", str(repo / "scripts" / "campaign-sync.sh"), "clone", "p",
                           "question-formation/Tf"], capture_output=True, text=True,
                          cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert staged(repo)[f"{PAIR}/search-0/metrics.json"] == "A"
    elsewhere = subprocess.run(["bash", str(repo / "scripts" / "campaign-sync.sh"), "clone", "p",
                                "question-formation/Tf"], capture_output=True, text=True,
                               cwd=repo)  # fmt: skip
    assert elsewhere.returncode == 2 and "no folder clone" in elsewhere.stderr


def test_a_profile_git_ignores_ends_in_one_line(checkout):
    repo, clone = checkout
    write_run(clone / "results/runs/smoke/question-formation/Tf/final-0",
              {"config.json": "c", "log.csv": "l", "metrics.json": "m"})  # fmt: skip
    done = subprocess.run(["bash", str(repo / "scripts" / "campaign-sync.sh"), str(clone),
                           "smoke", "question-formation/Tf"], capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and "ignored by git" in done.stderr
    assert "hint:" not in done.stderr and not (repo / "results/runs/smoke").exists()
