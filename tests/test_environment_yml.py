"""environment.yml (conda) installs what pyproject.toml's dependencies and its dev and lab
extras name, so `conda env create` gives an environment in which `make test` and
`make lab` work as they do after `make venv`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
# pip name -> the conda-forge package(s) that provide it
CONDA_NAMES = {"torch": ["pytorch"], "dask": ["dask", "distributed", "bokeh"]}
EXTRAS = ("dev", "lab")


def _name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.-]+", requirement)[0].lower()


def _conda_packages() -> set[str]:
    names = set()
    for line in (REPO / "environment.yml").read_text().splitlines():
        m = re.match(r"\s+- ([A-Za-z0-9_.-]+)(?:[<>=\s#]|$)", line)
        if m:
            names.add(m[1].lower())
    return names


def test_environment_yml_installs_every_dependency_of_pyproject():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    wanted = [r for r in project["dependencies"] if "python_version <" not in r]
    for extra in EXTRAS:
        wanted += project["optional-dependencies"][extra]
    have = _conda_packages()
    missing = sorted(
        {c for r in wanted for c in CONDA_NAMES.get(_name(r), [_name(r)]) if c not in have}
    )
    assert not missing, f"environment.yml lacks {missing}, which pyproject.toml names"


def test_environment_yml_allows_the_pythons_pyproject_allows():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    (line,) = [x for x in (REPO / "environment.yml").read_text().splitlines() if "- python" in x]
    assert line.strip() == f"- python{project['requires-python']}", (
        line,
        project["requires-python"],
    )
