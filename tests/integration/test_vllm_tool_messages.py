"""vLLM's serving path with thinkgate's tool plugin gives the messages thinkgate's own Parser gives.

For every renderer of ``template_render.py`` but harmony's (vLLM serves gpt-oss through its own harmony
path), the calls are written as the model's chat template writes them, with the corpus's tools and
arguments (``tests/data/tools/corpus.json``), after the family's thinking; some outputs are then
changed (text after the calls, a character deleted, which often breaks a call: it must stay content, or
cut short). vLLM's composed serving ``Parser`` (``--reasoning-parser thinkgate_<family>
--tool-call-parser thinkgate_<format>``) parses each whole (``parse``) and streamed (``parse_delta`` token
by token, in random chunks, in one chunk), for ``tool_choice`` auto, required and a named function; every
answer must equal ``Parser(vocabulary, family, format).request(...).parse(ids)``: reasoning, content,
each call's name and arguments, and each streamed call's first delta carries its id, type and name.
Real vocabularies: Qwen3.6 (hermes, qwen3_coder, qwen3_5, qwen3_6), DeepSeek V4 (deepseek_v3, _v31,
_v32, _v4), Magistral (mistral); the other formats on the synthetic vocabularies (the Qwen3.6 table plus
the family's markers).
"""

from __future__ import annotations

import random
import zlib

import pytest
from support import EXAMPLES, FAMILIES, TOOLS, detokenizer, vocab
from template_render import RENDERERS
from tool_serving import cases, chat_request, ours, ours_streamed, parser_cls, streamed, tokenizer, whole

import thinkgate.engines.vllm.reasoning_parsers  # noqa: F401  (registers thinkgate_<family>)
from thinkgate.structured_output.tools import get_tool_format
import thinkgate.engines.vllm.tool_parsers  # noqa: F401  (registers thinkgate_<format>)

RENDERED = [r for r, x in RENDERERS.items() if x.format != "openai"]
REAL = {"qwen3_6", "deepseek_v4", "magistral"}
NAMED = {"type": "function", "function": {"name": "get_weather"}}
WHOLE_OUTPUT = {"xlam"}
"""Formats whose constrained output is the list of calls alone (text after it is refused by the grammar)."""
@pytest.mark.parametrize("tool_choice", ["auto", "required", "named"])
@pytest.mark.parametrize("renderer", RENDERED)
def test_vllm_serving_with_the_plugin_equals_our_parser(renderer: str, tool_choice: str) -> None:
    fmt = RENDERERS[renderer].format
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    tok = tokenizer(fam.vocab)
    reasoning = None if fam.parser is None else f"thinkgate_{fam.parser}"
    cls = parser_cls(tok, f"thinkgate_{fmt}", reasoning)
    choice = NAMED if tool_choice == "named" else tool_choice
    prompt = v.encode(fam.prompt)
    kwargs = fam.kwargs or None
    rng = random.Random(renderer)
    fmt_markers = set(get_tool_format(fmt).markers)
    n = 10 if fam.vocab in REAL else 5
    called = 0
    for text, change in cases(renderer, n, seed=zlib.crc32(f"{renderer}/{tool_choice}".encode()),
                              first="get_weather" if tool_choice == "named" else None):
        ids = v.encode(text)
        want = ours(renderer, ids, choice, read_undeclared=True)  # the plugin's default: vLLM's behaviour
        called += bool(want.calls)
        request = chat_request(TOOLS, choice)
        got = whole(cls, tok, request, prompt, ids, v.decode(ids), kwargs)
        assert got == want, (change, text)
        chunkings = {"token": range(len(ids)), "random": [rng.randint(1, len(ids)) for _ in range(len(ids) // 3)],
                     "one": []}
        for how, cuts in chunkings.items():
            got = streamed(cls, tok, request, prompt, ids, cuts, detokenizer(v), kwargs)
            want_stream = ours_streamed(renderer, ids, choice, cuts, read_undeclared=True)
            # a control token of the vocabulary that is not the format's (the corpus's "<tool_call>" in a value,
            # on a vocabulary built on Qwen3.6's) makes the output one the grammar would not let through
            foreign = any(m in text[len(fam.thinking):] for m in v.special_tokens if m not in fmt_markers)
            # xLAM's calls are its whole output: under a constraint nothing follows the list, so "after" is an
            # output the grammar does not let through (its stream has sent the calls when the text comes)
            after_ok = change == "after" and fmt not in WHOLE_OUTPUT
            if tool_choice == "auto" or ((change == "none" or after_ok) and not foreign):  # decided at end / well formed
                assert want_stream == want, (how, change, text)
            assert got == want_stream, (how, change, text)
    assert called >= 2, "too few outputs with calls to mean anything"


def test_mistral_ids_from_mistral_common_read_the_same() -> None:
    """Magistral's calls as mistral-common's own encoder writes the ids (not re-encoded text)."""
    from template_render import render_ids

    fam = FAMILIES["mistral"]
    v = vocab(fam.vocab)
    tok = tokenizer(fam.vocab)
    cls = parser_cls(tok, "thinkgate_mistral", "thinkgate_mistral")
    calls = [("get_weather", EXAMPLES["get_weather"][0])]
    ids = v.encode(fam.thinking) + render_ids("mistral", calls, v)
    want = ours("mistral", ids, "auto", read_undeclared=True)
    assert [c[0] for c in want.calls] == ["get_weather"]
    request = chat_request(TOOLS)
    assert whole(cls, tok, request, v.encode(fam.prompt), ids, v.decode(ids), None) == want
    assert streamed(cls, tok, request, v.encode(fam.prompt), ids, range(len(ids)), detokenizer(v), None) == want
