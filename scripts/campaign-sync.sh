#!/usr/bin/env bash
# Copy a campaign clone's records of one (task, architecture) pair into this checkout and
# stage them for a commit (docs/campaign.md, "Carrying paused runs to the next machine"):
#
#   scripts/campaign-sync.sh CLONE PROFILE TASK/ARCHITECTURE [--carry]
#
# - a finished run (metrics.json): config.json, log.csv and metrics.json; resume files
#   committed while it was paused leave the index and the disk here;
# - with --carry, an unfinished run with a checkpoint: config.json, log.csv and its
#   resume files (checkpoint.pt, best.pt, paused.json; git ignores them, so `add -f`),
#   and its warnings.log (what a resume elsewhere must not lose: the finished run's
#   metrics.json repeats it, so it leaves with the resume files);
#   only once the step has ended and its runs are paused, so that the files agree;
# - the pair's selection.json and the profile's plan.json, when the clone has them.
#
# Only that pair's folder is touched: other pairs' records here (with fields added by
# `python -m fruit.backfill`, say) are left alone. Nothing is committed.
set -euo pipefail
usage="usage: scripts/campaign-sync.sh CLONE PROFILE TASK/ARCHITECTURE [--carry]"
clone=${1:?$usage} profile=${2:?$usage} pair=${3:?$usage} carry=${4:-}
[ -z "$carry" ] || [ "$carry" = --carry ] || { echo "$usage" >&2; exit 2; }
# CLONE as the user gave it: relative to where they stand, not to this checkout
[ -d "$clone" ] || { echo "campaign-sync: no folder $clone (the campaign clone)" >&2; exit 2; }
clone=$(cd "$clone" && pwd -P)
cd "$(dirname "$0")/.."
from="$clone/results/runs/$profile/$pair"
to="results/runs/$profile/$pair"
[ -d "$from" ] || { echo "campaign-sync: no folder $from" >&2; exit 2; }
# a profile whose records git ignores here (smoke's): nothing could be staged
if git check-ignore -q "$to/final-0/config.json"; then
    echo "campaign-sync: results/runs/$profile is ignored by git here (.gitignore), so its records are not committed; copy them by hand if you want them" >&2
    exit 2
fi
[ "$(cd "$from" && pwd -P)" != "$(mkdir -p "$to" && cd "$to" && pwd -P)" ] ||
    { echo "campaign-sync: $clone is this checkout" >&2; exit 2; }
resume=(checkpoint.pt best.pt paused.json warnings.log)
finished=0 carried=0
for run in "$from"/*/; do
    name=$(basename "$run")
    [ -f "$run/config.json" ] || continue
    if [ -f "$run/metrics.json" ]; then
        mkdir -p "$to/$name"
        cp "$run"/{config.json,log.csv,metrics.json} "$to/$name/"
        for f in "${resume[@]}"; do
            git rm -q --cached --ignore-unmatch "$to/$name/$f"
            rm -f "$to/$name/$f"
        done
        git add "$to/$name"
        finished=$((finished + 1))
    elif [ -n "$carry" ] && [ -f "$run/checkpoint.pt" ]; then
        mkdir -p "$to/$name"
        cp "$run"/{config.json,log.csv} "$to/$name/"
        for f in "${resume[@]}"; do
            [ -f "$run/$f" ] && cp "$run/$f" "$to/$name/" && git add -f "$to/$name/$f"
        done
        git add "$to/$name"
        carried=$((carried + 1))
    fi
done
for f in "$pair/selection.json" plan.json; do
    if [ -f "$clone/results/runs/$profile/$f" ]; then
        cp "$clone/results/runs/$profile/$f" "results/runs/$profile/$f"
        git add "results/runs/$profile/$f"
    fi
done
echo "campaign-sync: $pair: $finished finished run(s) copied, $carried unfinished carried; review with git status, then commit"
