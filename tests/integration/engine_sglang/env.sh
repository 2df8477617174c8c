#!/bin/bash
# Makes an offline-capable CPU venv holding SGLang 0.5.23's Python package for thinkgate's SGLang
# integration tests, without a CUDA torch and without sglang-kernel / flashinfer builds.
#
#   bash tests/integration/engine_sglang/env.sh [VENV_DIR]      (default: .venv-sglang)
#
# The venv sees the system site-packages (torch 2.13 CPU, xgrammar, transformers, numpy, pytest and
# the offline vocabularies come from there: nothing of SGLang's own pins, torch==2.14.1 and
# xgrammar==0.2.7 among them, is installed). SGLang's wheel goes in with --no-deps, then only the
# small pure-Python packages that its grammar-backend modules (sglang.srt.constrained.*,
# sglang.srt.sampling.sampling_batch_info, sglang.srt.plugins, sglang.srt.arg_groups.choices) import,
# each --no-deps at the version SGLang pins where it pins one. thinkgate goes in last, --no-deps, so
# no pin moves. What does not import this way (sglang.srt.speculative.spec_utils needs torchvision,
# the model runner needs sgl-kernel) is not used by the tests.
set -euo pipefail
V=${1:-.venv-sglang}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
python3 -m venv --system-site-packages "$V"
PIP="$V/bin/pip"
"$PIP" install -q --no-deps sglang==0.5.23
"$PIP" install -q --no-deps psutil pybase64 starlette msgspec pyzmq dill partial_json_parser distro httpx \
  aiohttp multidict yarl propcache aiohappyeyeballs aiosignal frozenlist "openai==2.8.0"
"$PIP" install -q --no-deps --no-build-isolation -e "$ROOT"
# checked from outside the repository: its top-level kernels/ folder would shadow the HF "kernels" package
PY="$(cd "$V" && pwd)/bin/python"
(cd / && "$PY" -c '
import torch, sglang.srt.constrained.base_grammar_backend, sglang.srt.sampling.sampling_batch_info
from importlib.metadata import version as v
assert "+cu" not in torch.__version__, torch.__version__
print("sglang", v("sglang"), "torch", torch.__version__, "xgrammar", v("xgrammar"), "transformers", v("transformers"))
')
