"""What may precede forced tool calls, through the matcher the manager uses (``schema_support.new_matcher``).

- A JSON-call format (hermes) has its whitespace bound beside the grammar (``tools/json_text.py``): any
  whitespace up to the bound, spaces too, and the call's own whitespace after its marker starts a new gap
  (no dead end after a full leading run).
- The others (qwen3_6) write ``call_format.LEAD_WHITESPACE`` into the grammar: up to four newlines, tabs or
  carriage returns, no space (a bounded run that may hold one costs xgrammar a list of the space-led tokens per
  state).
"""

from __future__ import annotations

import pytest

from thinkgate.structured_output.compilation.compiler import Compiler
from thinkgate.structured_output.compilation.schema_support import new_matcher
from thinkgate.structured_output.tools import build_tool_constraint

TOOL = {"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}}
CALLS = {
    "hermes": ["<tool_call>", '\n{"name": "f", "arguments": {"q": "x"}}\n', "</tool_call>"],
    "qwen3_6": ["<tool_call>", "\n<function=f>\n<parameter=q>\nx\n</parameter>\n</function>\n", "</tool_call>"],
}


@pytest.fixture(scope="module")
def compiler(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=1)
    yield c
    c.close()


def _tokens(vocab, pieces: list[str]) -> list[int]:
    out: list[int] = []
    for p in pieces:
        out += [vocab.token_id(p)] if p in ("<tool_call>", "</tool_call>") else vocab.encode(p)
    return out


@pytest.mark.parametrize("fmt, lead, ok", [
    ("hermes", "", True), ("hermes", "\n\n", True), ("hermes", " ", True), ("hermes", "\n  \t", True),
    ("hermes", "\n\n\n\n\n", False),
    ("qwen3_6", "", True), ("qwen3_6", "\n\n", True), ("qwen3_6", "\t\r\n\n", True), ("qwen3_6", " ", False),
    ("qwen3_6", "\n ", False), ("qwen3_6", "\n\n\n\n\n", False),
])
def test_lead_whitespace_before_a_forced_call(qwen_vocab, compiler, fmt, lead, ok):
    v = qwen_vocab
    for choice in ("required", {"type": "function", "function": {"name": "f"}}):
        c = compiler.compile(build_tool_constraint([TOOL], choice, format=fmt))
        assert (c.whitespace is not None) == (fmt == "hermes")
        m = new_matcher(c)
        tokens = [t for ch in lead for t in v.encode(ch)] + _tokens(v, CALLS[fmt])
        taken = all(m.accept_token(t) for t in tokens)
        assert taken == ok, (fmt, choice, lead)
        if ok:
            assert m.accept_token(v.token_id("<|im_end|>")) and m.is_terminated()
