"""The plugin called the way vLLM's own unit tests call a reasoning parser (tests/reasoning/test_*.py):
``extract_reasoning(output)`` on a fresh parser, ``is_reasoning_end(output_ids)``, then
``extract_content_ids(output_ids)`` on the same object. Calling ``is_reasoning_end`` (on a prompt or an
output) must not change what ``extract_content_ids`` returns, and an empty opened thinking is ``""``
as vLLM's DeepSeek-R1 split gives. Cases: the facts of vLLM's test_deepseekr1_reasoning_parser.py
(output, reasoning, content, is_reasoning_end), checked against vLLM 0.34's own parser too.
"""

from __future__ import annotations

import pytest

import thinkgate.engines.vllm.reasoning_parsers as plugin

# (output, whole reasoning, content, is_reasoning_end(output ids)) -- vLLM's deepseek_r1 test facts
R1_CASES = [
    ("This is a reasoning section</think>This is the rest", "This is a reasoning section", "This is the rest", True),
    ("This is a reasoning section</think>", "This is a reasoning section", None, True),
    ("This is content", "This is content", None, False),
    ("This\nThat</think>This is the rest\nThat", "This\nThat", "This is the rest\nThat", True),
    ("</think>This is the rest", "", "This is the rest", True),
    ("<think>This is a reasoning section</think>This is the rest", "This is a reasoning section", "This is the rest",
     True),
    ("<think>This is a reasoning section", "This is a reasoning section", None, False),
    ("", "", None, False),
    ("\n<think>This is a reasoning section</think>\nThis is the rest", "This is a reasoning section",
     "\nThis is the rest", True),
]
TEXT_BEFORE_START = {"\n<think>This is a reasoning section</think>\nThis is the rest": "\nThis is a reasoning section"}
"""vLLM drops what precedes a <think> the model writes; thinkgate keeps it as reasoning (the request
was thinking from its first token: docs/reasoning-differences.md, text-before-start-marker)."""


@pytest.mark.parametrize("case", R1_CASES, ids=[repr(c[0])[:40] for c in R1_CASES])
@pytest.mark.parametrize("name", ["deepseek_r1", "step5"])
def test_called_as_vllms_unit_tests_call_it(name, case, vllm_tokenizers):
    from vllm.reasoning import ReasoningParserManager

    output, reasoning, content, ended = case
    tok, vocab = vllm_tokenizers["deepseek_v4"]
    ids = vocab.encode(output)
    for cls in (plugin.REGISTERED[plugin.vllm_name(name)], ReasoningParserManager.get_reasoning_parser(name)):
        p = cls(tok)
        r, c = p.extract_reasoning(output, None)
        ours = cls is plugin.REGISTERED[plugin.vllm_name(name)]
        assert (r, c) == ((TEXT_BEFORE_START.get(output, reasoning) if ours else reasoning), content), cls
        assert p.is_reasoning_end(ids) is ended, cls
        want = vocab.encode(content) if content is not None else []
        assert p.extract_content_ids(ids) == want, cls


def test_is_reasoning_end_on_the_prompt_leaves_the_serving_prompt_alone(vllm_tokenizers):
    tok, vocab = vllm_tokenizers["deepseek_v4"]
    p = plugin.REGISTERED["thinkgate_deepseek_r1"](tok)
    p.set_prompt_token_ids(vocab.encode("<｜User｜>hi<｜Assistant｜><think>\n"))
    assert p.is_reasoning_end(vocab.encode("<｜User｜>hi<｜Assistant｜></think>"))  # the gate's own prompt
    out = vocab.encode("r</think>c")
    assert p.extract_content_ids(out) == vocab.encode("c")  # still read from the serving prompt's state
    assert p.extract_reasoning("r</think>c", None) == ("r", "c")
