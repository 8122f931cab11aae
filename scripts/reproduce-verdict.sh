#!/usr/bin/env bash
# The verdict of `make reproduce`: the fresh tables of a profile against the committed ones.
#
#   scripts/reproduce-verdict.sh PROFILE REPRO [PYTHON]
#
# Byte for byte first; else equal in every number (only the list of code commits in the
# captions differs: both sides compared with that list, and nothing else, blanked out);
# else the fresh runs against the committed ones, statistically
# (python -m fruit.reporting.reproduction). REPRO may be relative to where it is called.
set -euo pipefail
usage="usage: scripts/reproduce-verdict.sh PROFILE REPRO [PYTHON]"
[ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
profile=$1 python=${3:-python3}
if [ ! -d "$2" ]; then
    echo "reproduce-verdict: $2 is not a folder: give the folder make reproduce trained into" >&2
    exit 2
fi
repro=$(cd "$2" && pwd -P)
case $python in */*) python=$(cd "$(dirname "$python")" && pwd -P)/$(basename "$python") ;; esac
cd "$(dirname "$0")/.."  # the committed tables and records are the repository's
committed=results/tables/$profile fresh=$repro/results/tables/$profile

# The two folders equal once each caption's "; code <sha>[+dirty], <sha>..." is blanked
# (and the marks of backfilled rows);
# else the names of the files that still differ (or are on one side only), on stdout.
same_but_commits() {
    local scratch sha='[0-9a-f]{7,40}(\+dirty)?'
    scratch=$(mktemp -d)
    trap 'rm -rf "$scratch"' RETURN
    cp -r "$1" "$scratch/a" && cp -r "$2" "$scratch/b"
    # provenance, not numbers: the commits in captions, and the marks of rows backfilled
    # after a run (by-subject.md's "†" and its sentence; the records say how)
    find "$scratch" -type f -exec sed -E -i \
        -e "s/; code $sha(, $sha)*/; code (commits)/g" \
        -e "s/ Rows marked † were computed after the run [^:]*: the run's code predates recording them\.//" \
        -e "s/^\| ((\*\*)?[a-z]+-[0-9]+(\*\*)?) † \|/| \1 |/" {} +
    local files differing
    files=$( (cd "$scratch/a" && find . -type f) && (cd "$scratch/b" && find . -type f) )
    differing=$(printf '%s\n' "$files" | sort -u | while read -r f; do
        cmp -s "$scratch/a/$f" "$scratch/b/$f" || printf '%s\n' "${f#./}"
    done)
    [ -z "$differing" ] || { printf '%s\n' "$differing"; return 1; }
}
if [ ! -d "$committed" ]; then
    echo "no committed tables of profile $profile ($committed): nothing to compare; the fresh tables are in $fresh"
    exit 0
fi
if [ ! -d "$fresh" ]; then
    echo "reproduce-verdict: no fresh tables of profile $profile in $fresh: the reproduction did not finish" >&2
    exit 2
fi
if diff -r -q "$committed" "$fresh" >/dev/null; then
    echo "reproduced: $fresh equals the committed $committed byte for byte"
elif differing=$(same_but_commits "$committed" "$fresh"); then
    echo "reproduced: $fresh equals the committed $committed in every number (only provenance differs: the code commits named in the captions, rows marked as backfilled)"
else
    # a CPU of another kind rounds differently; records made by older code can lack a field
    # a newer table shows (by-subject.md before the breakdown was recorded): name the files
    set -- $differing
    verb=differs; [ $# -eq 1 ] || verb=differ
    echo "not byte-identical to the committed $committed: $(echo "$@" | sed 's/ /, /g') $verb beyond the commits named in the captions, so compared statistically:"
    "$python" -m fruit.reporting.reproduction results/runs "$repro/results/runs" "$profile"
fi
