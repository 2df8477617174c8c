"""Rebuild ``corpus.json`` here from a local clone of https://github.com/guidance-ai/jsonschemabench
(MaskBench's ``maskbench/data/*.json``: real schemas, each with test instances).

    python tests/data/jsonschemas/make_corpus.py /path/to/jsonschemabench [per_kind]

Takes, per kind (the file-name prefix: ``Github``, ``Glaiveai2K``, ``Kubernetes``, ``Snowplow``,
``WashingtonPost``, ``JsonSchemaStore``, ``BFCL``, ``JME``), the first ``per_kind`` files in name order
(default 16) whose schema is at most 6,000 characters, has a valid test instance, is accepted by
thinkgate (``Constraint.json_schema`` and its keyword check) and xgrammar, and whose first valid
instance the compiled grammar accepts on the Qwen3.6 vocabulary, both compact and indented. Not run
by tests; the corpus it writes is.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

KINDS = ("Github", "Glaiveai2K", "Kubernetes", "Snowplow", "WashingtonPost", "JsonSchemaStore", "BFCL", "JME")


def main() -> int:
    import xgrammar as xgr

    from thinkgate.reasoning.vocabulary import load_vocabulary
    from thinkgate.structured_output.constraints import Constraint
    from thinkgate.structured_output.xgrammar_adapter import build_tokenizer_info

    repo = Path(sys.argv[1])
    per_kind = int(sys.argv[2]) if len(sys.argv) > 2 else 16
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    names = subprocess.run(["git", "-C", str(repo), "ls-tree", "--name-only", "HEAD", "maskbench/data/"],
                           capture_output=True, text=True, check=True).stdout.split()
    vocab = load_vocabulary("qwen3_6")
    compiler = xgr.GrammarCompiler(build_tokenizer_info(vocab), cache_enabled=False)
    out: list[dict] = []
    for kind in KINDS:
        taken = 0
        for name in sorted(n for n in names if Path(n).name.startswith(kind)):
            if taken >= per_kind:
                break
            text = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{name}"], capture_output=True,
                                  text=True, check=True).stdout
            entry = json.loads(text)
            schema = entry.get("schema")
            valid = [t["data"] for t in entry.get("tests", []) if t.get("valid")]
            if not isinstance(schema, dict) or not valid or len(json.dumps(schema)) > 6000:
                continue
            try:
                c = Constraint.json_schema(schema)
                _ = c.schema_check
                cg = compiler.compile_grammar(xgr.Grammar.from_json_schema(json.dumps(schema), any_whitespace=True))
            except Exception:  # noqa: BLE001 - not in the corpus
                continue
            ok = True
            for indent in (None, 2):
                m = xgr.GrammarMatcher(cg)
                ids = vocab.encode(json.dumps(valid[0], indent=indent, ensure_ascii=False))
                if not all(m.accept_token(t) for t in ids) or not m.accept_token(min(vocab.stop_token_ids)):
                    ok = False
                    break
            if not ok:
                continue
            out.append({"kind": kind, "source": name, "schema": schema, "instance": valid[0]})
            taken += 1
    doc = {"description": "Real JSON schemas, each with a valid instance, for python -m bench jsonws and the "
                          "whitespace-bound tests (see make_corpus.py for the selection).",
           "source": f"https://github.com/guidance-ai/jsonschemabench at {commit}, maskbench/data/",
           "schemas": out}
    Path(__file__).with_name("corpus.json").write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n",
                                                       encoding="utf-8")
    print(f"{len(out)} schemas")
    return 0


if __name__ == "__main__":
    sys.exit(main())
