#!/bin/bash
# Makes an offline-capable CPU venv holding SGLang 0.5.23's Python package for thinkgate's SGLang
# integration tests, without a CUDA torch and without sglang-kernel / flashinfer builds.
#
#   bash tests/integration/engine_sglang/env.sh [VENV_DIR]      (default: .venv-sglang)
#
# The venv is self-contained (no system site-packages), so it builds the same on a fresh machine: torch
# first at the CPU build (nothing may pull a CUDA build), the build tools (setuptools >= 68 and wheel,
# for the editable install without build isolation), then thinkgate with its test extras (xgrammar,
# transformers, triton, numpy, the offline vocabularies, pytest), then SGLang's wheel with --no-deps and
# only the packages its grammar-backend modules (sglang.srt.constrained.*,
# sglang.srt.sampling.sampling_batch_info, sglang.srt.plugins, sglang.srt.arg_groups.choices) import,
# at the version SGLang pins where it pins one. None of SGLang's own pins (torch==2.14.1,
# xgrammar==0.2.7, sgl-kernel, flashinfer) is installed. What does not import this way
# (sglang.srt.speculative.spec_utils needs torchvision, the model runner needs sgl-kernel) is not used
# by the tests.
set -euo pipefail
V=${1:-.venv-sglang}
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
python3 -m venv "$V"
PIP="$V/bin/pip"
"$PIP" install -q torch==2.13.0
"$PIP" install -q "setuptools>=68" wheel
"$PIP" install -q --no-build-isolation -e "$ROOT[test]"
"$PIP" install -q --no-deps sglang==0.5.23
"$PIP" install -q psutil pybase64 starlette msgspec pyzmq dill partial_json_parser distro httpx \
  aiohttp orjson IPython traitlets "openai==2.8.0"
# checked from outside the repository: its top-level kernels/ folder would shadow the HF "kernels" package
PY="$(cd "$V" && pwd)/bin/python"
(cd / && "$PY" -c '
import torch, sglang.srt.constrained.base_grammar_backend, sglang.srt.sampling.sampling_batch_info
from importlib.metadata import version as v
assert "+cu" not in torch.__version__, torch.__version__
print("sglang", v("sglang"), "torch", torch.__version__, "xgrammar", v("xgrammar"), "transformers", v("transformers"))
')
