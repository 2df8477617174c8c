#!/usr/bin/env bash
# GPU check for the bitmask kernels (issues 3 and 21): one script, under three minutes on one GPU.
#   1. the kernel tests with the Triton kernel compiled for the GPU (no TRITON_INTERPRET; tests/conftest.py
#      sets it only when there is no CUDA device): tests/test_kernels_cuda.py (the exactness sweep, CUDA-graph
#      capture, no host sync, no allocation, the unchecked entry point), the Triton cases of
#      tests/test_kernels.py, the sm_90 store-layout check and the tiny benchmark tests;
#   2. `python -m bench kernels --device cuda`: the full GPU table (float32 / bfloat16 / float16, widths
#      129,280 and 248,320, batches 1 to 1,024, 99.9% / 50% / 0.1% of ids blocked): ours (checked and
#      unchecked), the copy + apply path, fill_, xgrammar's Triton and CUDA kernels, the fraction of the floor.
# xgrammar's CUDA kernel is built by nvcc on its first import; that build runs in the background while the
# tests run. Output: the console, and under $OUT (the device runner's output folder) or bench-results/.
set -uo pipefail
cd "$(dirname "$0")/.."
if [ -f .venv/bin/activate ]; then . .venv/bin/activate; fi
unset TRITON_INTERPRET
export PYTHONUNBUFFERED=1
out="${OUT:-bench-results}"
mkdir -p "$out"
status=0
start=$SECONDS

python - <<'PY' || exit 2
import torch, triton
assert torch.cuda.is_available(), "no CUDA device: this script checks the GPU kernels"
print("device:", torch.cuda.get_device_name(0), "| torch", torch.__version__, "| cuda", torch.version.cuda,
      "| triton", triton.__version__)
PY

timeout 170 python -c "import xgrammar.kernels.apply_token_bitmask_inplace_cuda" >"$out/xgr_cuda_build.txt" 2>&1 &
build=$!

echo "== tests (Triton compiled on CUDA)"
timeout 150 python -m pytest -q -s -p no:cacheprovider tests/test_kernels_cuda.py tests/test_kernel_store_layout.py \
  tests/test_bench_kernels.py 2>&1 | tee "$out/gpu_check_tests.txt" | grep -v "^seed=" || status=1
timeout 60 python -m pytest -q -p no:cacheprovider tests/test_kernels.py -k "triton or cuda" \
  2>&1 | tee -a "$out/gpu_check_tests.txt" | tail -n 3 || status=1
echo "(tests done at $((SECONDS - start)) s)"

wait $build || echo "xgrammar's CUDA kernel did not build (see $out/xgr_cuda_build.txt); its column stays empty"
echo "== python -m bench kernels --device cuda (at $((SECONDS - start)) s)"
timeout 150 python -m bench kernels --device cuda --batches 1,16,64,256,1024 --vocabs 129280,248320 \
  --out "$out/kernels_gpu.jsonl" 2>&1 | tee "$out/gpu_check_bench.txt" || status=1
echo "(done in $((SECONDS - start)) s)"
exit $status
