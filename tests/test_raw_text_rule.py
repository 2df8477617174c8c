"""String length bounds in the tool grammars. The raw-text rule of an XML / DSML / Gemma string value
(``tools/syntax.py``'s ``raw_text``), checked on random strings against its definition: a value never
holds its closing tag, and with ``minLength`` it holds at least that many characters; every value with no ``<``
among its first ``minLength`` characters is admitted (a ``<`` there costs one more character, docs/limits.md).
Python-quoted strings (``py_values.quoted``) against Python's own ``repr``. Then end to end: a strict tool's
``minLength`` holds in the grammars of the formats that write strings raw or quoted, where the readers would
refuse a shorter value."""

from __future__ import annotations

import json
import random

import pytest
import xgrammar as xgr

from support import vocab

from thinkgate.structured_output.compilation.compiler import Compiler
from thinkgate.structured_output.compilation.schema_support import new_matcher
from thinkgate.structured_output.tools import build_tool_constraint
from thinkgate.structured_output.tools.py_values import quoted
from thinkgate.structured_output.compilation.xgrammar_adapter import CONTROL_MARK, control_token_bytes
from thinkgate.structured_output.tools.syntax import raw_text, structural_tag
from thinkgate.testing.vocabularies import FORMAT_VOCABULARY

_INFO = xgr.TokenizerInfo([bytes([b]) for b in range(256)] + [control_token_bytes(256)], stop_token_ids=[256])
_COMPILER = xgr.GrammarCompiler(_INFO, max_threads=1, cache_enabled=False)


def _accepts(compiled: xgr.CompiledGrammar, text: str) -> bool:
    """``text`` is accepted and may end there: the stop token's bit is set in the next mask (its text is private
    bytes: xgrammar 0.2.9 also allows a stop token where its text would complete the output)."""
    m = xgr.GrammarMatcher(compiled)
    if not all(m.accept_token(b) for b in text.encode()):
        return False
    mask = xgr.allocate_token_bitmask(1, _INFO.vocab_size)
    m.fill_next_token_bitmask(mask)
    return bool((int(mask[0, 256 >> 5]) >> (256 & 31)) & 1)


@pytest.mark.parametrize("forbidden", ["</p>", "<|\"|>", "</x>\n", "<"])
@pytest.mark.parametrize("min_length", [0, 1, 3, 7])
def test_raw_text_rule_on_random_strings(forbidden, min_length):
    fmt = raw_text(forbidden, min_length)
    for f in fmt.get("elements", [fmt]):  # the compiler's resolution adds the control mark (xgrammar_adapter)
        if f["type"] == "any_text":
            f["excludes"].append(CONTROL_MARK)
    compiled = _COMPILER.compile_grammar(xgr.Grammar.from_structural_tag(json.dumps(structural_tag(fmt))))
    alphabet = sorted(set(forbidden)) + ["a", " "]
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    for _ in range(400):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
        if rng.random() < 0.3:  # plant the forbidden text, or a piece of it
            i = rng.randrange(len(text) + 1)
            text = text[:i] + forbidden[:rng.randrange(1, len(forbidden) + 1)] + text[i:]
        ok = _accepts(compiled, text)
        valid = forbidden not in text and len(text) >= min_length
        assert not ok or valid, (seed, text)  # never a value the reader would refuse
        if valid and forbidden[0] not in text[:min_length]:
            assert ok, (seed, text)


_TOOL = [{"type": "function", "function": {"name": "note", "strict": True, "parameters": {
    "type": "object", "properties": {"title": {"type": "string", "minLength": 3}},
    "required": ["title"], "additionalProperties": False}}}]


@pytest.mark.parametrize("fmt, opening, closing", [
    ("qwen3_6", "<tool_call>\n<function=note>\n<parameter=title>\n", "\n</parameter>\n</function>\n</tool_call>"),
    ("glm45", "<tool_call>note\n<arg_key>title</arg_key>\n<arg_value>", "</arg_value>\n</tool_call>"),
    ("deepseek_v4", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="note">\n<｜DSML｜parameter name="title" string="true">',
     "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"),
])
def test_a_strict_tools_min_length_holds_in_raw_values(fmt, opening, closing):
    v = vocab(FORMAT_VOCABULARY[fmt])
    c = build_tool_constraint(_TOOL, "required", format=fmt, parallel_tool_calls=False, vocabulary=v)
    comp = Compiler(v, num_threads=1)
    try:
        compiled = comp.compile(c)
    finally:
        comp.close()
    stop = min(v.stop_token_ids)

    def ends(value: str) -> bool:
        m = new_matcher(compiled)
        return all(m.accept_token(t) for t in v.encode(opening + value + closing)) and m.accept_token(stop)

    assert ends("abc") and ends("a<b>c") and ends("a b c d")
    assert not ends("ab") and not ends("") and not ends("<b")


@pytest.mark.parametrize("bounds", [(0, None), (1, None), (3, 3), (2, 6)])
def test_python_quoted_strings_count_characters_as_python_reads_them(bounds):
    """``py_values.quoted``: a string's ``repr`` (escapes included, each one character) is admitted exactly when
    its length is within the bounds."""
    lo, hi = bounds
    for quote in ("'", '"'):
        compiled = _COMPILER.compile_grammar(xgr.Grammar.from_regex(quoted(quote, lo, hi)))
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        for _ in range(300):
            s = "".join(rng.choice("ab \n\\'\"é\t") for _ in range(rng.randrange(9)))
            text = repr(s)
            if text[0] != quote:
                continue
            assert _accepts(compiled, text) == (lo <= len(s) and (hi is None or len(s) <= hi)), (seed, text)


_BOUNDED = [{"type": "function", "function": {"name": "note", "strict": True, "parameters": {
    "type": "object", "properties": {"title": {"type": "string", "minLength": 3, "maxLength": 8},
                                     "n": {"type": "integer"}},
    "required": ["title", "n"], "additionalProperties": False}}}]


@pytest.mark.parametrize("fmt", ["pythonic", "olmo3", "gemma4", "functiongemma", "kimi_k3", "minimax_m3", "glm47",
                                 "qwen3_coder", "gigachat35"])
def test_the_shortest_call_a_grammar_admits_keeps_min_length(fmt):
    """The shortest output the search finds (the reservation's forced answer, an upper bound of the shortest the
    grammar admits) holds a title of at least minLength characters, and the format's reader takes it: the grammar
    refuses a shorter string (the search would find the empty one otherwise)."""
    import jsonschema

    from thinkgate.structured_output.step.reserve import Shortest
    from thinkgate.structured_output.tools import get_tool_reader

    v = vocab(FORMAT_VOCABULARY[fmt])
    c = build_tool_constraint(_BOUNDED, "required", format=fmt, parallel_tool_calls=False, vocabulary=v,
                              key_order="schema")
    comp = Compiler(v, num_threads=1)
    try:
        found = Shortest(v).complete(comp.compile(c), (), 400)
    finally:
        comp.close()
    assert found
    text = v.decode([t for t in found if t not in v.stop_token_ids])
    calls = get_tool_reader(fmt, _BOUNDED, "required", parallel_tool_calls=False, vocabulary=v).read(text).calls
    assert len(calls) == 1, text
    args = json.loads(calls[0].arguments)
    jsonschema.validate(args, _BOUNDED[0]["function"]["parameters"])  # 3 to 8 characters


@pytest.mark.parametrize("pattern", [r"^[A-Z]{3}$", r"^[A-Za-z]+/[A-Za-z_]+$", r"^[0-9*/, -]+$", r"^(ab|c)+\d?$"])
def test_python_quoted_strings_follow_an_anchored_pattern(pattern):
    """``py_values.quoted_pattern``: a string's ``repr`` is admitted exactly when the string matches the pattern
    (random strings over the pattern's characters and the ones it refuses, fresh seed)."""
    import re

    from thinkgate.structured_output.tools.py_values import quoted_pattern

    for quote in ("'", '"'):
        rx = quoted_pattern(quote, pattern)
        assert rx is not None
        compiled = _COMPILER.compile_grammar(xgr.Grammar.from_regex(rx))
        seed = random.randrange(1 << 30)
        rng = random.Random(seed)
        seen = {True: 0, False: 0}
        for _ in range(400):
            s = "".join(rng.choice("ABCZabcz09/_*, -'\"\\é") for _ in range(rng.randrange(7)))
            if rng.random() < 0.3:  # a string the pattern takes, built from its own pieces
                s = rng.choice(["ABC", "Europe/Paris", "*/5 1,2 -", "abcc4", "cab"])
            text = repr(s) if repr(s)[0] == quote else quote + s + quote
            want = re.fullmatch(pattern[1:-1], s, re.ASCII) is not None
            seen[want] += 1
            assert _accepts(compiled, text) == want, (seed, pattern, s)
        assert seen[True] and seen[False]


@pytest.mark.parametrize("pattern", [r"[A-Z]+", r"^.*$", r"^[^a]+$", r"^\s+$", r"^(a|'b)$", r"^(?P<x>a)$", r"^a\$",
                                     r"^[\u0000-\uffff]$", 7, None])
def test_a_pattern_python_would_escape_or_xgrammar_cannot_read_stays_unenforced(pattern):
    from thinkgate.structured_output.tools.py_values import quoted_pattern

    assert quoted_pattern("'", pattern) is None
