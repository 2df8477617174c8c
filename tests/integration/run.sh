#!/bin/bash
# The one integration command: builds the vLLM 0.34 environment if missing and runs thinkgate's vLLM
# integration tests in it, then does the same for SGLang 0.5.23 (engine_sglang/run.sh: its own venv,
# .venv-sglang). Exit status: non-zero if either part failed.
#
#   bash tests/integration/run.sh [pytest args, passed to both]
#
#   THINKGATE_ENGINES="vllm sglang"      which engines to run (default both)
#
# Environment (all optional):
#   THINKGATE_VLLM_VENV=/path/to/venv  use an existing venv that holds vLLM 0.34 (e.g. /work/venv-vllm)
#                                      without changing it: an overlay venv (.venv-vllm) sees its
#                                      packages through a .pth line and holds only thinkgate (-e .),
#                                      pytest and build tools, so that venv's pins and its own
#                                      thinkgate install stay as they are
#   THINKGATE_VLLM_ENV_SCRIPT=...      the script that builds a vLLM venv
#                                      (default tests/integration/env_vllm.sh)
#   THINKGATE_VLLM_DIR=.venv-vllm      where the venv (or the overlay) goes (ignored by git)
# Without THINKGATE_VLLM_VENV the script builds $THINKGATE_VLLM_DIR with the env script (CPU torch,
# the vLLM 0.34 wheel, its pins), once; thinkgate goes into it with --no-deps, so no pin moves.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
ENGINES="${THINKGATE_ENGINES:-vllm sglang}"
if [[ " $ENGINES " != *" vllm "* ]]; then
  [[ " $ENGINES " == *" sglang "* ]] || { echo "THINKGATE_ENGINES=$ENGINES names neither vllm nor sglang" >&2; exit 2; }
  exec bash "$ROOT/tests/integration/engine_sglang/run.sh" "$@"
fi
DIR="${THINKGATE_VLLM_DIR:-.venv-vllm}"
BASE="${THINKGATE_VLLM_VENV:-}"
SCRIPT="${THINKGATE_VLLM_ENV_SCRIPT:-$ROOT/tests/integration/env_vllm.sh}"

if [ -n "$BASE" ]; then
  [ -x "$BASE/bin/python" ] || { echo "THINKGATE_VLLM_VENV=$BASE has no bin/python" >&2; exit 2; }
  SITE="$("$BASE/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  if [ ! -x "$DIR/bin/python" ]; then
    PY="$("$BASE/bin/python" -c 'import sys; print(sys._base_executable)')"
    "$PY" -m venv "$DIR"
  fi
  OWN="$("$DIR/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$SITE" > "$OWN/_thinkgate_vllm_base.pth"
elif [ ! -x "$DIR/bin/python" ]; then
  [ -f "$SCRIPT" ] || { echo "no vLLM env script at $SCRIPT (set THINKGATE_VLLM_ENV_SCRIPT or THINKGATE_VLLM_VENV)" >&2; exit 2; }
  bash "$SCRIPT" "$DIR"
fi

PYTHON="$DIR/bin/python"
"$PYTHON" -c 'import vllm' 2>/dev/null || { echo "$DIR cannot import vllm" >&2; exit 2; }
# test tools and the build backend only where missing (never an upgrade of what vLLM pinned)
"$PYTHON" -c 'import pytest, pytest_benchmark, hypothesis, jsonschema' 2>/dev/null \
  || "$PYTHON" -m pip install -q "pytest>=8" "pytest-benchmark>=4" "hypothesis>=6" "jsonschema>=4"
# vLLM 0.34's Cohere parsers (cohere_command3 / 4) import cohere-melody, which its wheel does not pull in
"$PYTHON" -c 'import cohere_melody' 2>/dev/null || "$PYTHON" -m pip install -q --no-deps "cohere-melody==0.15.3"
"$PYTHON" -c 'import setuptools, wheel, sys; sys.exit(int(setuptools.__version__.split(".")[0]) < 68)' 2>/dev/null \
  || "$PYTHON" -m pip install -q "setuptools>=68" wheel
# thinkgate from this checkout, installed again when its packaging (packages, entry points, extensions)
# changed since the last install into this venv
STAMP="$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)"
if ! "$PYTHON" -I -c 'import thinkgate, os, sys; sys.exit(os.path.dirname(os.path.dirname(thinkgate.__file__)) != sys.argv[1])' "$ROOT" 2>/dev/null \
   || [ "$(cat "$DIR/.thinkgate-install" 2>/dev/null)" != "$STAMP" ]; then
  "$PYTHON" -m pip install -q --no-deps --no-build-isolation -e . && echo "$STAMP" > "$DIR/.thinkgate-install"
fi
"$PYTHON" -I -c 'import vllm, xgrammar, torch, thinkgate.reasoning as thinkgate; from importlib.metadata import version as v; print("vllm", vllm.__version__, "xgrammar", v("xgrammar"), "torch", torch.__version__, "thinkgate from", thinkgate.__file__)'
rc=0
if [[ " $ENGINES " == *" vllm "* ]]; then
  "$PYTHON" -m pytest -q tests/integration --ignore=tests/integration/engine_sglang "$@" || rc=$?
fi
if [[ " $ENGINES " == *" sglang "* ]]; then
  bash "$ROOT/tests/integration/engine_sglang/run.sh" "$@" || rc=$(( rc ? rc : $? ))
fi
exit "$rc"
