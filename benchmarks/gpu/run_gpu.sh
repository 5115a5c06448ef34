#!/usr/bin/env bash
# The one prepared GPU run of issue 15, for a task that is lent a GPU (H100 or H200 with
# Python, PyTorch and Triton; no tilesolve dependencies, no network). Run from the repository
# root; everything it makes goes to $OUT (default ./gpu-out):
#   1. the kernel against the numpy reference, fp16 and bf16 (tests/test_gpu_kernel.py), and
#      the harness end to end on the tiny plan;
#   2. the sweep of benchmarks/gpu/plan_h200.json (3 shapes x 96 configurations, compiled in
#      parallel), then autotune over the model's top-3 against autotune over all, within a
#      time budget (default 300 s; rerun with RESUME=<the CSV brought back> to go on).
# Then, here: benchmarks/gpu/analyze.py and tilesolve-cli calibrate on the CSV (README).
set -uo pipefail
OUT=${OUT:-gpu-out}
BUDGET=${BUDGET:-300}
PLAN=${PLAN:-benchmarks/gpu/plan_h200.json}
mkdir -p "$OUT"
if [ -n "${RESUME:-}" ]; then
  cp "$RESUME" "$OUT/measurements.csv"
  [ -f "$RESUME.autotune.json" ] && cp "$RESUME.autotune.json" "$OUT/measurements.csv.autotune.json"
fi
{
  python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__, torch.cuda.get_device_name())'
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
} 2>&1 | tee "$OUT/environment.txt"
timeout 240 python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/test_gpu_kernel.py 2>&1 | tail -15 | tee "$OUT/kernel_tests.txt"
timeout $((BUDGET + 120)) python3 benchmarks/gpu/sweep.py "$PLAN" --out "$OUT/measurements.csv" \
  --time-budget "$BUDGET" 2>&1 | tee "$OUT/sweep.log"
echo "sweep exit ${PIPESTATUS[0]}"
