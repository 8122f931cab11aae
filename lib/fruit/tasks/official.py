"""The published data files: download (pinned commits) or local copies, checked and fixed.

The sources are listed in docs/tasks.md §2.3: raw GitHub files at the
commits the paper's authors pinned; append ``.train``, ``.dev``, ``.test`` or
``.gen`` to a base URL. Every downloaded file is checked against its git blob id.
German passivization gets the fix of docs/tasks.md §9 in every split.
"""

from __future__ import annotations

import hashlib
import os
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from fruit.errors import FruitError
from fruit.tasks import get_task
from fruit.tasks.base import SPLITS, Example, Task
from fruit.tasks.mueller.passives import fix_german_passive
from fruit.tasks.splits import generate_train, write_task
from fruit.tasks.tsv import check_sources, parse_tsv

_MCCOY = "https://github.com/tommccoy1/rnn-hierarchical-biases/raw/f34a87c4fe804cb288d0527daa9c251def0ae24e/data/"
_MUELLER = "https://github.com/sebschu/multilingual-transformations/raw/e848833f2df7674022ef02e2b649482d23ade7a7/data/"
URL_BASES = {
    "question-formation": _MCCOY + "question",
    "question-formation-in-german": _MUELLER
    + "question_have-can_withquest_de/question_have_can.de",
    "tense-reinflection-with-do": _MCCOY + "tense_aux",
    "passivization": _MUELLER + "passiv_en_nps/passiv_en_nps",
    "question-formation-with-have": _MUELLER + "question_have-havent_en/question_have",
    "tense-reinflection": _MCCOY + "tense",
    "passivization-in-german": _MUELLER + "passiv_de_nps/passiv_de_nps",
}

# git blob ids of the upstream files (docs/tasks.md §2.3), in the order train, dev, test, gen.
BLOB_IDS = {
    "question-formation": (
        "a3e63ea441226643b6fa7341ba8af22721019331",
        "052004271fbf01dd0f02ad339d0d85fef77ddfc8",
        "9d999b4c135aeabde906df81bce08d96b07f2bf4",
        "adf8cd0b3fc13e92ed12f6bc536024374c1f7156",
    ),
    "question-formation-in-german": (
        "7a24a9e667644083a0b04376b6dbb0ad3e801818",
        "c0bcb811db30fd74e69c70eb4ee4c8358dd19011",
        "6e5f69d4b162900bc049f561c1eb5ec075e4d322",
        "10f732118824e84570a674750ce51c254eaec768",
    ),
    "tense-reinflection-with-do": (
        "cc2b86fbaa1257759d59faf39cc0cd5b6fd57201",
        "ddb3dcb9669965ef88415b2d00f0f983a3e5089d",
        "1b5e3d393035dff2a15256aca651573a4d6344ab",
        "e60036151e4abdbd25f5addd82bdd131f0da6d75",
    ),
    "passivization": (
        "78eb857c738feba287f8873fb3bd66f2e955f31c",
        "333f5de1be03ae6440f14c6b96931e3e06278fa2",
        "4eba5f86315a1e4bfafc29add3936baadde739e4",
        "1755fa366373e7e38909c1c4a4ece99b141d0751",
    ),
    "question-formation-with-have": (
        "99eb13b7d9a1f146d0777c9a5bf012807f4ec8b7",
        "ddabe739c007b3ce430a04c5cd96c01fe593dc36",
        "597d30c484504cd4f0fa2377e9f27797e1cb1f6a",
        "d79aba2e4f6ed2a292809d664321ba86089df12f",
    ),
    "tense-reinflection": (
        "01a299dac719710f91bff6346f3218b4063d98e6",
        "1bf83b37ca8beaae30bcd767baef7a1adad877cf",
        "f60aa32f94adf4dfc39fb481e036f7d1fe77b4c4",
        "23d0870c1bde430a65a2191e3661e1373f7966b2",
    ),
    "passivization-in-german": (
        "455bd6d7e3145457d7ae60bfab50186ae52a8f02",
        "0aa0e224bc0e95f344db8c32e1ce737e6f9106a4",
        "c55ea08be6316b833b2af49390e66a6e213c7e61",
        "f8880e0986981caa0dca5016bd05021043bf9620",
    ),
}


def url(slug: str, split: str) -> str:
    return f"{URL_BASES[slug]}.{split}"


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class DownloadError(FruitError):
    """A published file could not be downloaded (its caller says what to do instead)."""


def fetch(address: str) -> bytes:
    """The bytes at a URL; a DownloadError (one line) if it cannot be had."""
    try:
        with urllib.request.urlopen(address, timeout=60) as response:
            return response.read()
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", None) or e
        raise DownloadError(f"cannot download {address}: {reason}") from None


def check_examples(task: Task, examples: list[Example], name: str) -> None:
    """Every source ends in one of the task's markers (``name:line`` in the error)."""
    check_sources(examples, (task.identity_marker, task.transform_marker), name)


def fix(task: Task, examples: list[Example]) -> tuple[list[Example], int]:
    """The German passivization fix (docs/tasks.md §9); other tasks unchanged. Returns the
    examples and how many lines changed."""
    if task.slug != "passivization-in-german":
        return examples, 0
    fixed = [(source, fix_german_passive(source, target)) for source, target in examples]
    return fixed, sum(a[1] != b[1] for a, b in zip(examples, fixed))


def _raw_files(
    slug: str, from_dir: Path | None, fetcher, with_train: bool, offline_hint: str
) -> dict[str, tuple[bytes | None, str]]:
    """split -> (bytes or None if absent or not wanted, name for errors)."""
    files = {}
    for split, blob in zip(SPLITS, BLOB_IDS[slug]):
        if split == "train" and not with_train:
            files[split] = (None, "train (generated)")
            continue
        if from_dir is not None:
            path = from_dir / slug / f"{split}.tsv"
            if split == "train" and not path.exists():
                files[split] = (None, str(path))
                continue
            try:
                files[split] = (path.read_bytes(), str(path))
            except FileNotFoundError:
                raise FruitError(f"{path}: file not found (expected {slug}/{split}.tsv)") from None
            except OSError as e:
                raise FruitError(f"{path}: cannot read ({e.strerror})") from None
        else:
            address = url(slug, split)
            try:
                data = fetcher(address)
            except DownloadError as e:
                raise FruitError(f"{e} (no network? {offline_hint})") from None
            if git_blob_id(data) != blob:
                raise FruitError(
                    f"{address}: expected the file with git blob id {blob}, got "
                    f"{git_blob_id(data)} (not the pinned upstream file)"
                )
            files[split] = (data, address)
    return files


def import_official(
    out: str | os.PathLike,
    slugs,
    from_dir: str | os.PathLike | None = None,
    seed: int = 1,
    train_size: int = 100_000,
    fetcher: Callable[[str], bytes] = fetch,
    log: Callable[[str], None] = print,
    published_train: bool = True,
    offline_hint: str = "use --from DIR with local copies",
) -> None:
    """Take the published files (downloaded, or from ``from_dir/<task>/<split>.tsv``),
    check every line, fix German passivization, and write the data layout to ``out``.

    All input files are read and checked before anything is written. Where ``from_dir``
    has no train.tsv, or with ``published_train=False`` (the profiles' ``[data] source =
    "published"``: the same data offline and online), the train split is generated,
    avoiding every dev/test/gen sentence. ``offline_hint`` ends the error of a failed
    download: what the caller's user can give instead.
    """
    from_dir = Path(from_dir) if from_dir is not None else None
    raw = {}
    for slug in slugs:  # first pass: read and check everything
        task = get_task(slug)
        raw[slug] = _raw_files(slug, from_dir, fetcher, published_train, offline_hint)
        for data, name in raw[slug].values():
            if data is not None:
                examples = parse_tsv(data, name)
                if not examples:  # else found only when a run needs the split
                    raise FruitError(
                        f"{name}: no examples (an empty file); expected the "
                        "published split, one SOURCE<TAB>TARGET line each"
                    )
                check_examples(task, examples, name)
    for slug in slugs:  # second pass: fix, complete and write, one task at a time
        task = get_task(slug)
        splits = {}
        for split, (data, name) in raw[slug].items():
            if data is None:
                continue
            splits[split], changed = fix(task, parse_tsv(data, name))
            if changed:
                log(f"{slug}/{split}: German passive fix changed {changed} lines")
        if "train" not in splits:
            exclude = {" ".join(s[:-1]) for split in splits.values() for s, _ in split}
            log(f"{slug}: no train.tsv; generating {train_size} lines (seed {seed})")
            splits["train"] = generate_train(task, seed, train_size, exclude)
        folder = write_task(out, task, splits)
        del raw[slug]
        log(f"{slug}: wrote {folder}")
