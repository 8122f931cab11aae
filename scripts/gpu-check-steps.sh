#!/usr/bin/env bash
# The GPU check of the graph-captured training step (issue 47; docs/cluster.md, "The
# training step as CUDA graphs"), for a lent GPU machine with PyTorch and no network,
# from the repository root:
#
#   FRUIT_COMMIT=<commit> OUT=<folder> [STAGES="tests alone fill smoke"] scripts/gpu-check-steps.sh
#
# Carry .whl (scripts/carry-wheels.sh) for `fruit run --profile smoke` and the CUDA tests
# that import the sweep. Stages, each under its own time limit (they add up to 10.5
# minutes, more than a call's 10: run STAGES="tests alone" (6.2 min at most), then
# STAGES="fill smoke" (4.3) at once, while the machine is still warm):
#   tests  the CUDA tests of the steps: real graphs against the eager step (records of
#          five architectures bit for bit, the learning rate changing mid-run), a replay
#          that never waits for the device, and paused-and-resumed runs with graphs
#          equal to uninterrupted ones (must-show c)
#   alone  one run alone of each of the fifteen architectures, today's step (plain) and
#          the graphs, in one call (must-show a): $OUT/alone/gpu.txt
#   fill   Tf+Nd, LSTM+Nd and Tf with graphs, 16 runs sharing the card under MPS
#          (must-show b): $OUT/fill/gpu.txt
#   smoke  fruit run --profile smoke with graphs (FRUIT_STEP=graphs), 3 runs at a time
#          (must-show d)
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the results}"
STAGES=${STAGES:-"tests alone fill smoke"}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=lib
stage() { echo "=== $(date -u +%T) $1"; }
failures=0  # each stage goes on after a failure; the exit status says whether any failed
trap 'failures=$((failures + 1))' ERR
wants() { [[ " $STAGES " == *" $1 "* ]]; }
for s in $STAGES; do
    case $s in tests | alone | fill | smoke) ;; *) echo "gpu-check-steps: unknown stage '$s' in STAGES; valid: tests alone fill smoke" >&2; exit 2 ;; esac
done

stage "machine"
nvidia-smi -L
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0))'
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi

if wants tests; then
    stage "the CUDA tests of the steps (must-show c)"
    timeout -k 5 170 python3 -m pytest -q -m gpu -p no:cacheprovider --timeout 120 \
        tests/test_training_steps.py
fi

if wants alone; then
    stage "one run alone, today's step (plain) and the graphs, fifteen architectures (must-show a)"
    # the must-show architectures first, in case the budget cuts the list
    timeout -k 5 200 python3 benchmarks/gpu.py --out "$OUT/alone" --runs 1 --seconds 2 \
        --step plain --step graphs --cycle 16 --budget-seconds 190 \
        --arch Tf+Nd --arch LSTM+Nd --arch RNN+Nd --arch Tf+Sup --arch LSTM+Sup --arch Tf \
        --arch LSTM --arch Tf+Nd+Nd --arch Tf+Sup+Sup --arch RNN --arch RNN+Sup \
        --arch RNN+Sup+R --arch RNN+Nd+R --arch LSTM+Sup+R --arch LSTM+Nd+R
fi

if wants fill; then
    stage "16 runs with graphs sharing the card under MPS (must-show b)"
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d; then
        timeout -k 5 170 python3 benchmarks/gpu.py --out "$OUT/fill" --runs 16 --seconds 3 \
            --step graphs --cycle 16 --budget-seconds 160 --arch Tf+Nd --arch LSTM+Nd --arch Tf
        echo quit | nvidia-cuda-mps-control
    fi
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
fi

if wants smoke; then
    stage "fruit run --profile smoke with graphs, 3 runs sharing the GPU (must-show d)"
    rm -rf /tmp/smoke
    FRUIT_STEP=graphs timeout -k 5 90 python3 -m fruit run --profile smoke --results /tmp/smoke/results \
        --data-dir /tmp/smoke/data --runs-per-gpu 3 --no-dashboard
    echo "fruit run exit $?"
    grep -h '"step"' /tmp/smoke/results/runs/smoke/*/*/*/config.json | sort | uniq -c
    cat /tmp/smoke/results/runs/smoke/*/*/*/warnings.log 2>/dev/null | head -5
fi
stage "done: $failures command(s) failed"
[ "$failures" -eq 0 ]
