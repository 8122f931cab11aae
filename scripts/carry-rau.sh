#!/usr/bin/env bash
# Build .rau/ (git-ignored through .git/info/exclude): the authors' rau at the commit the
# paper pins, and its pure-Python dependencies installed into .rau/site, so that a machine
# without network (the lent GPU machine) can run benchmarks/gpu.py --rau-src .rau/src with
# PYTHONPATH=lib:.rau/site. rau is never a dependency of this project; this only makes it
# available to the benchmarks that compare against it.
#
#   scripts/carry-rau.sh RAU_GIT_DIR     # a clone (or bare mirror) of github.com/bdusell/rau
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: scripts/carry-rau.sh RAU_GIT_DIR (a clone of github.com/bdusell/rau)" >&2; exit 2; }
[ -d "$1" ] || { echo "carry-rau: no folder $1 (a clone of github.com/bdusell/rau)" >&2; exit 2; }
src=$(cd "$1" && pwd -P)  # as the user gave it: relative to where they stand
cd "$(dirname "$0")/.."
commit=4ff0c04
git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null ||
    { echo "carry-rau: $src has no commit $commit; fetch rau's full history first" >&2; exit 2; }
rm -rf .rau && mkdir -p .rau/wheels
git -C "$src" archive "$commit" src | tar -x -C .rau/
python=${PYTHON:-.venv/bin/python}
"$python" -m pip download -q --no-deps -d .rau/wheels humanfriendly==10.0 \
    torch-semiring-einsum==1.2.0 pynvml nvidia-ml-py
"$python" -m pip install -q --no-index --no-deps --target .rau/site .rau/wheels/*.whl
exclude="$(git rev-parse --git-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.rau/' "$exclude" 2>/dev/null || echo '/.rau/' >>"$exclude"
echo "carry-rau: .rau/ ready ($(du -sh .rau | cut -f1)); carry it and use PYTHONPATH=lib:.rau/site ... --rau-src .rau/src"
