"""Array length bounds in the tool grammars (``tools/syntax.py``'s ``repeated`` and ``item_bounds``): an array rule
admits exactly the texts with ``minItems`` to ``maxItems`` items, on random bounds and random texts; then end to end,
in the formats whose own grammar writes arrays (Python literals, Gemma, MiniMax M3's elements, XML values), the
shortest call the search finds for a strict tool holds ``minItems`` items where the readers would refuse fewer."""

from __future__ import annotations

import json
import random

import jsonschema
import pytest
import xgrammar as xgr

from support import vocab

from thinkgate.structured_output.compilation.compiler import Compiler
from thinkgate.structured_output.compilation.xgrammar_adapter import control_token_bytes
from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader
from thinkgate.structured_output.tools.syntax import MAX_ITEMS_BOUND, const, item_bounds, regex, repeated, seq
from thinkgate.testing.vocabularies import FORMAT_VOCABULARY

_INFO = xgr.TokenizerInfo([bytes([b]) for b in range(256)] + [control_token_bytes(256)], stop_token_ids=[256])
_COMPILER = xgr.GrammarCompiler(_INFO, max_threads=1, cache_enabled=False)


def _accepts(compiled: xgr.CompiledGrammar, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled)
    if not all(m.accept_token(b) for b in text.encode()):
        return False
    mask = xgr.allocate_token_bitmask(1, _INFO.vocab_size)
    m.fill_next_token_bitmask(mask)
    return bool((int(mask[0, 256 >> 5]) >> (256 & 31)) & 1)


@pytest.mark.parametrize("sep", [",", ", ", ""])
def test_repeated_admits_exactly_the_bounded_counts(sep):
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for _ in range(6):
        lo = rng.randrange(0, 5)
        hi = rng.choice([None, lo, lo + rng.randrange(0, 4)])
        fmt = seq(const("["), repeated(regex("[0-9]"), sep, lo, hi), const("]"))
        compiled = _COMPILER.compile_grammar(
            xgr.Grammar.from_structural_tag(json.dumps({"type": "structural_tag", "format": fmt})))
        for n in range(0, 9):
            text = "[" + sep.join(rng.choice("0123456789") for _ in range(n)) + "]"
            assert _accepts(compiled, text) == (lo <= n and (hi is None or n <= hi)), (seed, lo, hi, text)


def test_item_bounds_reads_integers_only_and_caps():
    assert item_bounds({"minItems": 2, "maxItems": 3}) == (2, 3)
    assert item_bounds({"minItems": True, "maxItems": "4"}) == (0, None)
    assert item_bounds({"minItems": 3, "maxItems": 2}) == (3, None)  # an empty range: the check refuses it
    assert item_bounds({"minItems": 10_000, "maxItems": 10_000}) == (MAX_ITEMS_BOUND, None)
    assert item_bounds({}) == (0, None)


_TOOLS = [{"type": "function", "function": {"name": "annotate", "strict": True, "parameters": {
    "type": "object", "properties": {"span": {"type": "array", "items": {"type": "integer", "minimum": 0},
                                              "minItems": 2, "maxItems": 2},
                                     "labels": {"type": "array", "items": {"type": "string"}, "minItems": 3}},
    "required": ["span", "labels"], "additionalProperties": False}}}]


@pytest.mark.parametrize("fmt", ["pythonic", "lfm2", "gemma4", "functiongemma", "minimax_m3", "qwen3_coder"])
def test_the_shortest_call_a_grammar_admits_keeps_min_items(fmt):
    """The search's shortest call (an upper bound of the shortest the grammar admits) holds 2 and 3 items and the
    reader validates it: with ``minItems`` not enforced, the search finds ``[0]`` and ``[""]``."""
    from thinkgate.structured_output.step.reserve import Shortest

    v = vocab(FORMAT_VOCABULARY[fmt])
    c = build_tool_constraint(_TOOLS, "required", format=fmt, parallel_tool_calls=False, vocabulary=v,
                              key_order="schema")
    comp = Compiler(v, num_threads=1)
    try:
        found = Shortest(v).complete(comp.compile(c), (), 400)
    finally:
        comp.close()
    assert found
    text = v.decode([t for t in found if t not in v.stop_token_ids])
    calls = get_tool_reader(fmt, _TOOLS, "required", parallel_tool_calls=False, vocabulary=v).read(text).calls
    assert len(calls) == 1, text
    args = json.loads(calls[0].arguments)
    jsonschema.validate(args, _TOOLS[0]["function"]["parameters"])
    assert len(args["span"]) == 2 and len(args["labels"]) == 3, text
