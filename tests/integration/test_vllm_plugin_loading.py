"""How vLLM 0.34 loads the plugin (``--reasoning-parser-plugin``), names it, and fails on a wrong model.

``vllm serve`` calls ``ReasoningParserManager.import_reasoning_parser(value)`` (vLLM's ``import_plugin``:
a module path, or else a file path loaded as a module of its file's name), then checks the
``--reasoning-parser`` name against ``list_registered()``, then builds the composed parser once with
the tokenizer (``ParserManager.get_parser(..., tokenizer=)``) so a parser that cannot work with the
model fails at startup.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import thinkgate.engines.vllm.reasoning_parsers as plugin
from thinkgate.reasoning import list_reasoning_parsers

ROOT = Path(__file__).resolve().parents[2]


def test_every_family_is_registered_under_its_thinkgate_name():
    from vllm.reasoning import ReasoningParserManager

    names = set(ReasoningParserManager.list_registered())
    want = {f"thinkgate_{f}" for f in list_reasoning_parsers()}
    assert want <= names, sorted(want - names)
    assert set(plugin.REGISTERED) == want
    for name in want:  # each resolves to its own class, whose family is the name's
        cls = ReasoningParserManager.get_reasoning_parser(name)
        assert cls.family == name.removeprefix("thinkgate_") and cls.engine_based_streaming


@pytest.mark.parametrize("how", ["module", "file"])
def test_vllm_imports_the_plugin_as_serve_does(how):
    """A fresh interpreter, as ``vllm serve`` starts: the plugin given by module path or by file path."""
    value = "thinkgate.engines.vllm.reasoning_parsers" if how == "module" else str(ROOT / "thinkgate" / "engines" / "vllm" / "reasoning_parsers.py")
    code = (
        "import sys\n"
        "from vllm.reasoning import ReasoningParserManager as M\n"
        f"M.import_reasoning_parser({value!r})\n"
        "names = M.list_registered()\n"
        "assert 'thinkgate_qwen3' in names and 'thinkgate_deepseek_v4' in names, names\n"
        "print(sum(n.startswith('thinkgate_') for n in names))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) == len(list_reasoning_parsers())


def test_a_model_without_the_markers_fails_at_startup_naming_them(vllm_tokenizers):
    """thinkgate_mistral on DeepSeek V4's tokenizer: vLLM's startup check raises, naming the flag, and
    the cause is thinkgate's message naming the parser and the missing marker."""
    from vllm.parser.parser_manager import ParserManager

    tok, _ = vllm_tokenizers["deepseek_v4"]
    with pytest.raises(TypeError) as e:
        ParserManager.get_parser(reasoning_parser_name="thinkgate_mistral", tokenizer=tok, model_name="ds")
    assert "--reasoning-parser thinkgate_mistral" in str(e.value)
    assert "[THINK]" in str(e.value.__cause__) and "mistral" in str(e.value.__cause__)


def test_per_request_objects_share_the_per_model_parser(vllm_tokenizers):
    """vLLM builds a parser per request (engine core and server): the vocabulary and the family's
    parser are built once per tokenizer, so a request costs a small object, not a 248k-token table."""
    tok, vocab = vllm_tokenizers["qwen3_6"]
    cls = plugin.REGISTERED["thinkgate_qwen3"]
    a, b = cls(tok), cls(tok, chat_template_kwargs={"enable_thinking": False})
    assert a.parser is b.parser and a.parser.vocabulary.token_bytes == vocab.token_bytes
    prompt = vocab.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert a.is_reasoning_end(prompt) is False and b.is_reasoning_end(prompt) is True  # per-request kwargs


def test_thinkgate_without_vllm_never_imports_the_plugin():
    """The rest of thinkgate imports nothing of vLLM: loading every family and the manager in a fresh
    interpreter leaves ``vllm`` out of ``sys.modules``."""
    code = (
        "import sys\n"
        "from thinkgate.reasoning import get_reasoning_parser, list_reasoning_parsers\n"
        "import thinkgate.structured_output\n"
        "[get_reasoning_parser(n) for n in list_reasoning_parsers()]\n"
        "print('vllm' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[-1] == "False"


def test_vllms_mistral_tokenizer_is_read_from_its_tekken_file(tmp_path):
    """vLLM serves Mistral models with its ``MistralTokenizer`` (mistral-common); its ``get_vocab``
    pieces lose the bytes of partial UTF-8 tokens (1,437 ids of tekken_240911), so the plugin reads the
    tekken file itself: the same bytes for every id as thinkgate's ``tekken`` vocabulary. That file
    predates ``[THINK]``: ``thinkgate_mistral`` then fails naming it."""
    import shutil

    import mistral_common
    from vllm.tokenizers.mistral import MistralTokenizer

    from thinkgate.reasoning import load_vocabulary

    shutil.copy(Path(mistral_common.__file__).parent / "data" / "tekken_240911.json", tmp_path / "tekken.json")
    tok = MistralTokenizer.from_pretrained(str(tmp_path))
    v = plugin.vocabulary_of(tok)
    assert v is plugin.vocabulary_of(tok)  # once per tokenizer
    assert v.token_bytes == load_vocabulary("tekken").token_bytes
    with pytest.raises(ValueError, match=r"mistral.*\[THINK\]"):
        plugin.REGISTERED["thinkgate_mistral"](tok)
