"""``fruit data``: generating, taking the published files, comparing."""

from __future__ import annotations

import json
import shutil
import time

import pytest

from fruit.cli import main
from fruit.errors import FruitError
from fruit.tasks import PAPER_TASKS, get_task, read_tsv
from fruit.tasks import official as official_module
from fruit.tasks.official import git_blob_id, import_official

SMALL = ["--train-size", "300", "--dev-size", "20", "--test-size", "50", "--gen-size", "40"]
FILES = ("train.tsv", "dev.tsv", "test.tsv", "gen.tsv", "gen.linear.tsv")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_generate_writes_the_layout_and_is_seeded(tmp_path, capsys):
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert run(capsys, "data", "--task", "passivization", "--out", str(a), *SMALL)[0] == 0
    assert run(capsys, "data", "--task", "passivization", "--out", str(b), *SMALL)[0] == 0
    assert (
        run(capsys, "data", "--task", "passivization", "--out", str(c), "--seed", "2", *SMALL)[0]
        == 0
    )
    folder = a / "passivization"
    assert sorted(p.name for p in folder.iterdir()) == sorted([*FILES, "data.json"])
    record = json.loads((folder / "data.json").read_text())  # what a sweep checks
    assert record == {"task": "passivization", "seed": 1, "source": "generated",
                      "sizes": {"train": 300, "dev": 20, "test": 50, "gen": 40}}  # fmt: skip
    for name in FILES:
        assert (a / "passivization" / name).read_bytes() == (
            b / "passivization" / name
        ).read_bytes()
    assert (a / "passivization" / "train.tsv").read_bytes() != (
        c / "passivization" / "train.tsv"
    ).read_bytes()
    sizes = {name: len(read_tsv(folder / name)) for name in FILES}
    assert sizes == {
        "train.tsv": 300,
        "dev.tsv": 20,
        "test.tsv": 50,
        "gen.tsv": 40,
        "gen.linear.tsv": 40,
    }
    task = get_task("passivization")
    gen, linear = read_tsv(folder / "gen.tsv"), read_tsv(folder / "gen.linear.tsv")
    for (source, target), (source2, wrong) in zip(gen, linear):
        assert source == source2 and wrong == task.linear(source[:-1]) and wrong != target
    train = {" ".join(s) for s, _ in read_tsv(folder / "train.tsv")}
    assert train.isdisjoint(" ".join(s) for s, _ in read_tsv(folder / "test.tsv"))
    assert train.isdisjoint(" ".join(s) for s, _ in gen)


def test_unknown_task_is_a_one_line_error(tmp_path, capsys):
    code, _, err = run(capsys, "data", "--task", "nope", "--out", str(tmp_path / "x"))
    assert code == 2
    assert err.count("\n") == 1 and "unknown task 'nope'" in err and "passivization" in err
    assert not (tmp_path / "x").exists()


def test_official_from_a_local_folder_fixes_german_and_generates_train(
    datasets_dir, tmp_path, capsys
):
    slug = "passivization-in-german"
    out = tmp_path / "out"
    code, out_text, _ = run(
        capsys, "data", "--official", "--from", str(datasets_dir), "--task", slug,
        "--out", str(out), "--train-size", "400",
    )  # fmt: skip
    assert code == 0
    for split, changed in (("dev", 29), ("test", 290), ("gen", 816)):
        assert f"{split}: German passive fix changed {changed} lines" in out_text
        ours, theirs = (
            read_tsv(out / slug / f"{split}.tsv"),
            read_tsv(datasets_dir / slug / f"{split}.tsv"),
        )
        assert [s for s, _ in ours] == [s for s, _ in theirs]
        assert sum(a != b for (_, a), (_, b) in zip(ours, theirs)) == changed
    task = get_task(slug)
    train = read_tsv(out / slug / "train.tsv")
    assert len(train) == 400
    published = {
        " ".join(s[:-1])
        for split in ("dev", "test", "gen")
        for s, _ in read_tsv(datasets_dir / slug / f"{split}.tsv")
    }
    assert not any(" ".join(s[:-1]) in published for s, _ in train)
    assert all(task.target(s) == t for s, t in train)
    linear = read_tsv(out / slug / "gen.linear.tsv")
    assert linear[0][1] == task.linear(linear[0][0][:-1])


def _copy_task(datasets_dir, tmp_path, slug):
    src = tmp_path / "src"
    (src / slug).mkdir(parents=True)
    for split in ("dev", "test", "gen"):
        shutil.copy(datasets_dir / slug / f"{split}.tsv", src / slug / f"{split}.tsv")
    return src


@pytest.mark.parametrize(
    "damage, expected",
    [
        (lambda text: text.replace("\t", " ", 1), ":1: expected 'SOURCE<TAB>TARGET'"),
        (lambda text: text.replace(" decl\t", " DECL\t", 1), "expected a source ending in the marker 'decl' or 'passiv'"),
        (lambda text: text.replace(" ", "  ", 1), ":1: expected the source as tokens separated by single spaces"),
    ],
)  # fmt: skip
def test_official_rejects_a_malformed_line_and_writes_nothing(
    datasets_dir, tmp_path, capsys, damage, expected
):
    slug = "passivization"
    src = _copy_task(datasets_dir, tmp_path, slug)
    path = src / slug / "test.tsv"
    path.write_text(damage(path.read_text("utf-8")), "utf-8")
    out = tmp_path / "out"
    code, _, err = run(
        capsys, "data", "--official", "--from", str(src), "--task", slug, "--out", str(out)
    )
    assert code == 2
    assert err.count("\n") == 1 and str(path) in err and expected in err
    assert "Traceback" not in err
    assert not out.exists()


def test_official_missing_file_names_it_and_writes_nothing(datasets_dir, tmp_path, capsys):
    src = _copy_task(datasets_dir, tmp_path, "passivization")
    (src / "passivization" / "gen.tsv").unlink()
    out = tmp_path / "out"
    code, _, err = run(
        capsys,
        "data",
        "--official",
        "--from",
        str(src),
        "--task",
        "passivization",
        "--out",
        str(out),
    )
    assert code == 2 and err.count("\n") == 1
    assert str(src / "passivization" / "gen.tsv") in err and "file not found" in err
    assert not out.exists()


def test_download_builds_pinned_urls_and_checks_blob_ids(datasets_dir, tmp_path, monkeypatch):
    slug = "passivization"
    assert official_module.url(slug, "gen") == (
        "https://github.com/sebschu/multilingual-transformations/raw/"
        "e848833f2df7674022ef02e2b649482d23ade7a7/data/passiv_en_nps/passiv_en_nps.gen"
    )
    # The published copies have the pinned blob ids (docs/tasks.md §2.3).
    for split, blob in zip(("dev", "test", "gen"), official_module.BLOB_IDS[slug][1:]):
        assert git_blob_id((datasets_dir / slug / f"{split}.tsv").read_bytes()) == blob
    # Serve the files through file:// URLs laid out like upstream, with a made-up train file.
    served = tmp_path / "served"
    served.mkdir()
    for split in ("dev", "test", "gen"):
        shutil.copy(datasets_dir / slug / f"{split}.tsv", served / f"passiv_en_nps.{split}")
    train = "the yak amused the newt . decl\tthe yak amused the newt .\n"
    (served / "passiv_en_nps.train").write_text(train)
    monkeypatch.setitem(official_module.URL_BASES, slug, (served / "passiv_en_nps").as_uri())
    with pytest.raises(FruitError, match="passiv_en_nps.train: expected the file with git blob id"):
        import_official(tmp_path / "out", [slug], log=lambda _: None)
    assert not (tmp_path / "out").exists()
    blobs = official_module.BLOB_IDS[slug]
    monkeypatch.setitem(official_module.BLOB_IDS, slug, (git_blob_id(train.encode()), *blobs[1:]))
    import_official(tmp_path / "out", [slug], log=lambda _: None)
    assert (tmp_path / "out" / slug / "train.tsv").read_text() == train
    assert (tmp_path / "out" / slug / "gen.tsv").read_bytes() == (
        datasets_dir / slug / "gen.tsv"
    ).read_bytes()
    # a profile's published data takes dev/test/gen only: train is generated, as offline
    (served / "passiv_en_nps.train").unlink()
    import_official(
        tmp_path / "out2", [slug], train_size=1000, log=lambda _: None, published_train=False
    )
    generated = (tmp_path / "out2" / slug / "train.tsv").read_text().splitlines()
    assert len(generated) == 1000 and train.strip() not in generated


def test_download_failure_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(official_module.URL_BASES, "passivization", (tmp_path / "absent").as_uri())
    code, _, err = run(
        capsys, "data", "--official", "--task", "passivization", "--out", str(tmp_path / "o")
    )
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("fruit: error: cannot download file://") and "--from" in err
    assert not (tmp_path / "o").exists()


def test_a_profiles_download_failure_names_fruit_runs_option(tmp_path, monkeypatch):
    # `fruit run` has no --from: its data step says what it takes instead
    from fruit.training.data import prepare_data

    monkeypatch.delenv("FRUIT_DATASETS", raising=False)
    monkeypatch.setitem(official_module.URL_BASES, "passivization", (tmp_path / "absent").as_uri())
    sizes = {"train": 100, "dev": 10, "test": 10, "gen": 10}
    with pytest.raises(FruitError, match=r"cannot download file://.*--published DIR") as caught:
        prepare_data(tmp_path / "data", "passivization", 1, sizes, "published", None)
    assert "--from" not in str(caught.value)
    assert not any((tmp_path / "data").rglob("*.tsv"))


def test_a_bad_fruit_datasets_is_named_before_any_folder_is_made(tmp_path, monkeypatch):
    from fruit.training.data import prepare_data

    monkeypatch.setenv("FRUIT_DATASETS", str(tmp_path / "nowhere"))
    sizes = {"train": 100, "dev": 10, "test": 10, "gen": 10}
    with pytest.raises(FruitError, match="FRUIT_DATASETS=.*nowhere' is not a folder"):
        prepare_data(tmp_path / "a" / "b", "passivization", 1, sizes, "published", None)
    assert not (tmp_path / "a").exists()


def test_compare_prints_the_table(tmp_path, capsys, datasets_dir):
    # The published files compared with themselves: every row agrees.
    code, out, _ = run(capsys, "data", "--compare", str(datasets_dir), "--task", "passivization")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == [
        "task",
        "split",
        "statistic",
        "generated",
        "published",
        "diff",
        "tol",
        "ok",
    ]
    test_rows = [line.split() for line in lines[2:] if line.split()[1] == "test"]
    assert [r[2] for r in test_rows] == ["marker", "subject_rc", "subject_pp", "median_length"]
    assert all(r[-1] == "yes" for r in test_rows)
    assert "train~test" not in out  # no train.tsv there: no row, no legend
    # With --published the whole distributions too: a split against itself is within noise.
    code, out, _ = run(
        capsys,
        "data",
        "--compare",
        str(datasets_dir),
        "--published",
        str(datasets_dir),
        "--task",
        "passivization",
    )
    assert code == 0
    distances = [line.split() for line in out.splitlines() if line.startswith("passivization")]
    distances = [r for r in distances if r[2] in ("token", "bigram", "length")]
    assert [(r[1], r[2]) for r in distances] == [
        (split, feature) for split in ("test", "gen") for feature in ("token", "bigram", "length")
    ]
    # (plus a little: gen's lengths hardly vary, so its halves are 0.0002 apart)
    assert all(float(r[3]) <= 1.5 * float(r[4]) + 0.005 for r in distances)
    code, _, err = run(capsys, "data", "--compare", str(tmp_path))
    assert code == 2 and "no <task>/test.tsv" in err


@pytest.mark.slow
def test_all_seven_tasks_at_paper_size_in_under_five_minutes(tmp_path, capsys):
    start = time.perf_counter()
    code, out, _ = run(capsys, "data", "--task", "all", "--out", str(tmp_path))
    seconds = time.perf_counter() - start
    print(out)
    assert code == 0
    assert seconds < 300, f"{seconds:.0f} s"
    for slug in PAPER_TASKS:
        task = get_task(slug)
        splits = {
            split: read_tsv(tmp_path / slug / f"{split}.tsv")
            for split in ("train", "dev", "test", "gen")
        }
        assert [len(v) for v in splits.values()] == [100_000, 1_000, 10_000, 10_000]
        for split in ("train", "dev", "test"):
            for source, target in splits[split]:
                if source[-1] == task.transform_marker:
                    assert task.linear(source[:-1]) == target, (slug, split, source)
        assert all(
            s[-1] == task.transform_marker and task.linear(s[:-1]) != t for s, t in splits["gen"]
        )
        train = {" ".join(s) for s, _ in splits["train"]}
        assert train.isdisjoint(" ".join(s) for s, _ in splits["test"])
        assert train.isdisjoint(" ".join(s) for s, _ in splits["gen"])
    code, table, _ = run(capsys, "data", "--compare", str(tmp_path))
    print(table)
    assert code == 0


def test_each_task_says_what_it_generates_before_it_starts(capsys, tmp_path):
    code, out, _ = run(
        capsys, "data", "--task", "question-formation", "--out", str(tmp_path),
        "--train-size", "1500", "--dev-size", "10", "--test-size", "10", "--gen-size", "10",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "question-formation: generating train 1,500, dev 10, test 10, gen 10 ..."
    assert lines[1].startswith("question-formation: wrote ")


def test_a_folder_with_splits_is_not_overwritten_without_force(tmp_path, capsys):
    out = tmp_path / "data"
    mine = out / "passivization" / "train.tsv"
    mine.parent.mkdir(parents=True)
    mine.write_text("my own file\n")
    code, _, err = run(capsys, "data", "--task", "passivization", "--out", str(out), *SMALL)
    assert code == 2 and "already holds train.tsv" in err and "--force" in err
    assert mine.read_text() == "my own file\n"  # untouched, nothing else written
    assert sorted(p.name for p in mine.parent.iterdir()) == ["train.tsv"]
    code, _, _ = run(
        capsys, "data", "--task", "passivization", "--out", str(out), "--force", *SMALL
    )
    assert code == 0 and len(read_tsv(mine)) == 300


def test_a_sweep_checks_the_data_json_fruit_data_wrote(tmp_path, capsys):
    """A folder made by `fruit data` with another seed is refused by a run that needs its
    profile's seed, instead of being trained on under that seed's name."""
    from fruit.errors import FruitError
    from fruit.training.data import prepare_data

    out = tmp_path / "data"
    argv = ["--train-size", "1000", *SMALL[2:]]  # a run's generated train has >= 1000 lines
    assert run(capsys, "data", "--task", "passivization", "--out", str(out), *argv)[0] == 0
    sizes = {"train": 1000, "dev": 20, "test": 50, "gen": 40}
    assert prepare_data(out, "passivization", 1, sizes) == "found"  # the same seed: used
    with pytest.raises(FruitError, match="holds data made with"):
        prepare_data(out, "passivization", 12345, sizes)
