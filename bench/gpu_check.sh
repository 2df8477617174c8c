#!/usr/bin/env bash
# GPU check for the bitmask kernels (issue 3): one script, under two minutes on one GPU.
#   1. tests/test_kernels.py and the tiny benchmark test, with the Triton kernel compiled for the GPU
#      (no TRITON_INTERPRET; tests/conftest.py sets it only when there is no CUDA device);
#   2. `python -m bench kernels` on CUDA: our CPU path, xgrammar's CPU kernel and fill_, plus our
#      Triton kernel, xgrammar's Triton kernel, GPU fill_ and the fraction of the memory floor;
#      float32 on both vocabularies, then bfloat16 on 248,320.
# Output: the console, and under $OUT (the device runner's output folder) or bench-results/.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -f .venv/bin/activate ]; then . .venv/bin/activate; fi
unset TRITON_INTERPRET
out="${OUT:-bench-results}"
mkdir -p "$out"
status=0

python - <<'PY' || exit 2
import torch
assert torch.cuda.is_available(), "no CUDA device: this script checks the GPU kernels"
print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__, "| cuda", torch.version.cuda)
PY

echo "== tests (Triton compiled on CUDA)"
timeout 40 python -m pytest -q -p no:cacheprovider tests/test_kernels.py tests/test_bench_kernels.py \
  2>&1 | tee "$out/gpu_check_tests.txt" || status=1

echo "== python -m bench kernels (float32)"
timeout 55 python -m bench kernels --rounds 1 --repeat 10 --out "$out/kernels_gpu.jsonl" \
  2>&1 | tee "$out/gpu_check_bench.txt" || status=1

echo "== python -m bench kernels (bfloat16, 248320)"
timeout 25 python -m bench kernels --rounds 1 --repeat 10 --dtype bfloat16 --vocabs 248320 \
  --out "$out/kernels_gpu.jsonl" 2>&1 | tee -a "$out/gpu_check_bench.txt" || status=1

exit $status
