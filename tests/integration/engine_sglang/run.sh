#!/bin/bash
# Builds the SGLang 0.5.23 environment if missing and runs thinkgate's SGLang integration tests in it.
#
#   bash tests/integration/engine_sglang/run.sh [pytest args]
#
# Environment (optional): THINKGATE_SGLANG_DIR=.venv-sglang, where the venv goes (ignored by git);
# built once by env.sh beside this script (CPU torch from the system, the SGLang wheel --no-deps, the
# few pure-Python packages its grammar-backend modules import); thinkgate goes in --no-deps, so no
# pin moves.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
cd "$ROOT"
DIR="${THINKGATE_SGLANG_DIR:-.venv-sglang}"
[ -x "$DIR/bin/python" ] || bash "$ROOT/tests/integration/engine_sglang/env.sh" "$DIR"
PYTHON="$(cd "$DIR" && pwd)/bin/python"
(cd / && "$PYTHON" -c 'import sglang.srt.constrained.base_grammar_backend' 2>/dev/null) \
  || { echo "$DIR cannot import sglang's grammar backend modules" >&2; exit 2; }
# thinkgate from this checkout, installed again when its packaging (packages, entry points, extensions)
# changed since the last install into this venv
STAMP="$(cat pyproject.toml setup.py | sha256sum | cut -c1-16)"
if ! "$PYTHON" -I -c 'import thinkgate, os, sys; sys.exit(os.path.dirname(os.path.dirname(thinkgate.__file__)) != sys.argv[1])' "$ROOT" 2>/dev/null \
   || [ "$(cat "$DIR/.thinkgate-install" 2>/dev/null)" != "$STAMP" ]; then
  "$PYTHON" -m pip install -q --no-deps --no-build-isolation -e . && echo "$STAMP" > "$DIR/.thinkgate-install"
fi
exec "$PYTHON" -m pytest -q -p no:warnings tests/integration/engine_sglang "$@"
