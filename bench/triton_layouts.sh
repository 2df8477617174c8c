#!/usr/bin/env bash
# The bitmask kernel's store layouts under each Triton version that engines ship, without a GPU:
# installs Triton 3.3.1, 3.5.1 and 3.6.0 side by side (pip install --target /tmp/triton-X, no deps,
# no CUDA torch) and runs tests/test_kernel_store_layout.py under each (PYTHONPATH puts that Triton
# first), then under the installed one. Exit status: non-zero when any version fails.
#   bash bench/triton_layouts.sh [VERSION ...]      (default: 3.3.1 3.5.1 3.6.0)
set -uo pipefail
cd "$(dirname "$0")/.."
py=python
if [ -x .venv/bin/python ]; then py=.venv/bin/python; fi
versions=("$@")
if [ ${#versions[@]} -eq 0 ]; then versions=(3.3.1 3.5.1 3.6.0); fi
status=0
for v in "${versions[@]}" installed; do
  path=""
  if [ "$v" != installed ]; then
    path="${TMPDIR:-/tmp}/triton-$v"
    if [ ! -d "$path/triton" ]; then
      "$py" -m pip install -q --no-deps --target "$path" "triton==$v" || { echo "triton $v: install failed"; status=1; continue; }
    fi
  fi
  got=$(PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" "$py" -c "import triton; print(triton.__version__)")
  echo "== Triton $got ($v)"
  PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" "$py" -m pytest -q -p no:cacheprovider \
    tests/test_kernel_store_layout.py 2>&1 | tail -n 3 || status=1
  # what the check read, for one case (bf16, 64 rows): each store's tile and layout, the PTX store forms
  PYTHONPATH="$path${PYTHONPATH:+:$PYTHONPATH}" "$py" -c '
import re, sys; sys.path.insert(0, "tests")
from test_kernel_store_layout import compile_for_sm90, store_layouts
asm = compile_for_sm90("bf16", 64, True)
for shape, layout in store_layouts(asm["ttgir"]):
    print("  store", "x".join(map(str, shape)), "sizePerThread", layout["sizePerThread"], "threadsPerWarp",
          layout["threadsPerWarp"], "order", layout["order"])
print("  ptx", sorted(set(re.findall(r"st\.global[.\w]*", asm["ptx"]))))' || status=1
done
exit $status
