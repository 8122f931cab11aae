#!/usr/bin/env bash
# The one-call GPU check (docs/cluster.md, "The prepared GPU check"), for a lent GPU
# machine with PyTorch and no network, from the repository root:
#
#   FRUIT_COMMIT=<commit> OUT=<folder> scripts/gpu-check.sh
#
# Carry .rau (scripts/carry-rau.sh) for ours against the authors', and .whl (the wheels of
# dask, distributed, papermill, ipykernel and what they need that the machine lacks) for
# the CUDA tests that import the sweep and for `fruit run --profile smoke`. Each stage has
# its own time limit, so that one stuck stage does not cost the others; all output goes
# to $OUT/log.txt, the benchmark figures to $OUT/{one,fill,mps}/gpu.{txt,json} and
# $OUT/exact/gpu.txt. About 7 minutes (6 min without the MPS stage, timed on the H200);
# its stages' limits add up to 11.
set -uo pipefail
cd "$(dirname "$0")/.."
: "${OUT:?set OUT to the folder for the results}"
mkdir -p "$OUT"
exec > >(tee -a "$OUT/log.txt") 2>&1
export PYTHONUNBUFFERED=1 PYTHONPATH=lib:.rau/site
stage() { echo "=== $(date -u +%T) $1"; }
failures=0  # each stage goes on after a failure; the exit status says whether any failed
trap 'failures=$((failures + 1))' ERR

stage "machine"
nvidia-smi -L
python3 -c 'import sys, torch; print(sys.version.split()[0], torch.__version__, torch.cuda.get_device_name(0))'
nproc
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi

stage "one run of each architecture alone, then ours against the authors' (must-show a)"
timeout -k 5 200 python3 benchmarks/gpu.py --out "$OUT/one" --runs 1 --seconds 3 \
    --authors-seconds 6 --budget-seconds 180 --rau-src .rau/src

stage "GPU filled with K runs of one architecture (must-show b)"
timeout -k 5 130 python3 benchmarks/gpu.py --out "$OUT/fill" --runs 8,16 --seconds 3 \
    --budget-seconds 120 --arch Tf --arch Tf+Sup --arch Tf+Nd --arch LSTM --arch LSTM+Nd

stage "the same with NVIDIA's Multi-Process Service running"
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
if nvidia-cuda-mps-control -d; then
    timeout -k 5 110 python3 benchmarks/gpu.py --out "$OUT/mps" --runs 8,16 --seconds 3 \
        --budget-seconds 100 --arch Tf --arch Tf+Nd --arch LSTM
    echo quit | nvidia-cuda-mps-control
fi
unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY

stage "the CUDA tests (must-show c)"
timeout -k 5 95 python3 -m pytest -q -m gpu -p no:cacheprovider \
    --timeout 80 tests/test_stacks.py tests/test_stacks_step.py tests/test_models.py \
    tests/test_models_sup_pass.py tests/test_models_nd_pass.py tests/test_kernels_dropout.py \
    tests/test_training.py tests/test_gpu_sharing.py

stage "the CPU's exact masks kept on CUDA (FRUIT_COUNTER_DROPOUT=1 FRUIT_FUSED_ATTENTION=0)"
FRUIT_COUNTER_DROPOUT=1 FRUIT_FUSED_ATTENTION=0 timeout -k 5 40 python3 benchmarks/gpu.py \
    --out "$OUT/exact" --runs 1 --seconds 3 --budget-seconds 35 --arch Tf --arch Tf+Nd
rm -f "$OUT/exact/gpu.json"  # the device tool returns at most 8 files; gpu.txt says it all

stage "fruit run --profile smoke, 3 runs sharing the GPU (must-show d)"
rm -rf /tmp/smoke
timeout -k 5 90 python3 -m fruit run --profile smoke --results /tmp/smoke/results \
    --data-dir /tmp/smoke/data --runs-per-gpu 3 --no-dashboard
echo "fruit run exit $?"
ls /tmp/smoke/results/tables/smoke 2>/dev/null
stage "done: $failures command(s) failed"
[ "$failures" -eq 0 ]
