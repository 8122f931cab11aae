#!/usr/bin/env bash
# The verdict of `make reproduce`: the fresh tables of a profile against the committed ones.
#
#   scripts/reproduce-verdict.sh PROFILE REPRO [PYTHON]
#
# Byte for byte first; else equal in every number (only the list of code commits in the
# captions differs: both sides compared with that list, and nothing else, blanked out);
# else the fresh runs against the committed ones, statistically
# (python -m fruit.reporting.reproduction). Run from the repository root.
set -euo pipefail
profile=${1:?usage: scripts/reproduce-verdict.sh PROFILE REPRO [PYTHON]}
repro=${2:?usage: scripts/reproduce-verdict.sh PROFILE REPRO [PYTHON]}
python=${3:-python3}
committed=results/tables/$profile fresh=$repro/results/tables/$profile

# The two folders equal once each caption's "; code <sha>[+dirty], <sha>..." is blanked.
same_but_commits() {
    local scratch sha='[0-9a-f]{7,40}(\+dirty)?'
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' RETURN
    cp -r "$1" "$scratch/a" && cp -r "$2" "$scratch/b"
    find "$scratch" -type f -exec sed -E -i "s/; code $sha(, $sha)*/; code (commits)/g" {} +
    diff -r -q "$scratch/a" "$scratch/b" >/dev/null
}
[ -d "$committed" ] || exit 0  # nothing committed to compare with
if diff -r -q "$committed" "$fresh" >/dev/null; then
    echo "reproduced: $fresh equals the committed $committed byte for byte"
elif same_but_commits "$committed" "$fresh"; then
    echo "reproduced: $fresh equals the committed $committed in every number (only the code commit named in the captions differs)"
else
    echo "not byte-identical to the committed $committed (expected on another kind of CPU), so compared statistically:"
    "$python" -m fruit.reporting.reproduction results/runs "$repro/results/runs" "$profile"
fi
