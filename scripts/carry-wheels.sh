#!/usr/bin/env bash
# Build .whl/ (git-ignored through .git/info/exclude): the wheels, for Python 3.12 on
# x86-64 Linux, of what `fruit run` and the sweep's tests need beyond what the lent GPU
# machine's image holds (dask, distributed, dask-jobqueue, papermill, ipykernel, nbformat,
# nbclient and their needs), so that scripts/gpu-check.sh can install them there without
# network. About 18 MB.
#
#   scripts/carry-wheels.sh
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux_2_5_x86_64 \
    --platform manylinux1_x86_64 -d "$tmp" \
    "dask[distributed]" dask-jobqueue papermill ipykernel nbformat nbclient \
    2> >(grep -v "is ignored: it is neither" >&2)
# already on the machine (docs/cluster.md, "The prepared GPU check"): keep its versions
present=" attrs certifi charset-normalizer click cloudpickle fsspec idna jinja2 markupsafe
msgpack packaging psutil pygments python-dateutil pyyaml requests sortedcontainers toolz
tqdm typing-extensions urllib3 zipp "
rm -rf .whl && mkdir .whl
for wheel in "$tmp"/*.whl; do
    name=$(basename "$wheel" | cut -d- -f1 | tr 'A-Z_' 'a-z-')
    printf '%s\n' $present | grep -qx "$name" || cp "$wheel" .whl/
done
exclude="$(git rev-parse --git-dir)/info/exclude"
mkdir -p "$(dirname "$exclude")"
grep -qx '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >>"$exclude"
echo "carry-wheels: .whl/ ready ($(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1)); carry it"
