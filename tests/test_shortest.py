"""The shortest completion from a grammar state (structured_output/step/shortest.py): exact on small grammars and
a tiny vocabulary (compared with a brute-force search over every viable token sequence), and always a real
completion (accepted, then a stop token allowed) on a real vocabulary, from the start and mid-output.
"""

from __future__ import annotations

import json
import re
import random

import pytest
import torch

from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.structured_output.compilation.compiler import Compiler
from thinkgate.structured_output.compilation.constraints import Constraint
from thinkgate.structured_output.step.reserve import Shortest
from thinkgate.structured_output.compilation.schema_support import new_matcher
from thinkgate.structured_output.step.shortest import ShortestCompletion, short_candidates
from thinkgate.testing.workload import REGEXES, SCHEMAS

_SINGLE = list(' {}[]":,-.0123abcdxyz()tuefalsn')
_MULTI = ['{"', '"}', '":', '""', "true", "ab", "false", "null", "))"]


def tiny_vocabulary() -> Vocabulary:
    """A 41-token vocabulary: single characters, a few multi-character tokens, one stop token."""
    pieces = [s.encode() for s in _SINGLE + _MULTI] + [b"<|end|>"]
    stop = len(pieces) - 1
    return Vocabulary("tiny", pieces, {"<|end|>": stop}, [stop])


@pytest.fixture(scope="module")
def tiny():
    vocab = tiny_vocabulary()
    comp = Compiler(vocab, num_threads=1)
    yield vocab, comp
    comp.close()


def _stop_allowed(m, vocab, row) -> bool:
    m.fill_next_token_bitmask(row, 0)
    r = row.numpy()[0]
    return any((int(r[t >> 5]) >> (t & 31)) & 1 for t in vocab.stop_token_ids)


def _mask_ids(m, vocab, row) -> list[int]:
    m.fill_next_token_bitmask(row, 0)
    r = row.numpy()[0]
    return [t for t in range(vocab.vocab_size) if (int(r[t >> 5]) >> (t & 31)) & 1 and t not in vocab.stop_token_ids]


def brute_force(m, vocab, max_len: int) -> int | None:
    """Fewest tokens (the stop token included) completing the output from ``m``'s state: every token
    sequence the rows allow (what a masked model can write; xgrammar's row can be narrower than
    ``accept_token``: after ``(((x`` it leaves out ``))``), shortest first, no merging, no cut."""
    row = torch.zeros((1, (vocab.logits_width + 31) // 32), dtype=torch.int32)
    if _stop_allowed(m, vocab, row):
        return 1
    level: list[tuple[int, ...]] = [()]
    for depth in range(1, max_len):
        nxt = []
        for path in level:
            for t in path:
                assert m.accept_token(t)
            for t in _mask_ids(m, vocab, row):
                if m.accept_token(t):
                    done = _stop_allowed(m, vocab, row)
                    m.rollback(1)
                    if done:
                        m.rollback(len(path))
                        return depth + 1
                    nxt.append((*path, t))
            if path:
                m.rollback(len(path))
        level = nxt
        assert len(level) < 400_000, "brute force grew too large for this case"
    return None


CASES = [
    (Constraint.regex(r"(ab|c)+d"), ""),
    (Constraint.regex(r"(ab|c)+d"), "ab"),
    (Constraint.regex(r"a{3}b?"), "a"),
    (Constraint.regex(r"x(yz|y)*"), "xy"),
    (Constraint.grammar('root ::= "x" | "(" root ")"'), ""),
    (Constraint.grammar('root ::= "x" | "(" root ")"'), "((("),
    (Constraint.grammar('root ::= "x" | "(" root ")"'), "((x"),
    (Constraint.choice(["true", "ab1", "dddd"]), ""),
    (Constraint.choice(["abab", "cab"]), ""),
    (Constraint.json_schema({"type": "array", "items": {"type": "boolean"}, "minItems": 2}, any_whitespace=False), ""),
    (Constraint.json_schema({"type": "array", "items": {"type": "boolean"}, "minItems": 2}, any_whitespace=False), "[fa"),
    (Constraint.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                            any_whitespace=False), ""),
    (Constraint.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                            any_whitespace=False), '{"a": 12'),
    (Constraint.json_schema({"type": "object", "properties": {"b": {"type": "string"}}, "required": ["b"]},
                            any_whitespace=False), '{"b": "xyz'),
    (Constraint.json_schema({"enum": ["ab", 3, None]}), ""),
]


@pytest.mark.parametrize("constraint,prefix", CASES, ids=[f"{c.kind}-{i}" for i, (c, _) in enumerate(CASES)])
def test_shortest_is_exact_on_small_grammars(tiny, constraint, prefix):
    vocab, comp = tiny
    m = new_matcher(comp.compile(constraint))
    for t in [_SINGLE.index(c) for c in prefix]:
        assert m.accept_token(t), prefix
    found = Shortest(vocab).find(m, None, 40)
    assert found is not None
    # a real completion: accepted token by token, ends with a stop token, the matcher back where it was
    for t in found:
        assert m.accept_token(t)
    assert m.is_terminated()
    m.rollback(len(found))
    assert len(found) == brute_force(m, vocab, len(found) + 1), vocab.decode(found)


def test_a_long_token_beats_the_shortest_text(tiny):
    """"true" is one token: it wins over the shorter text "ab1" (two tokens), so the search is on tokens."""
    vocab, comp = tiny
    m = new_matcher(comp.compile(Constraint.choice(["true", "ab1"])))
    found = Shortest(vocab).find(m, None, 10)
    assert vocab.decode(found[:-1]) == "true" and len(found) == 2


def test_too_short_a_limit_finds_nothing(tiny):
    vocab, comp = tiny
    m = new_matcher(comp.compile(Constraint.regex(r"abcdabcd")))
    sc = ShortestCompletion(2, vocab.stop_token_ids, short_candidates(vocab.token_bytes, vocab.vocab_size), vocab)
    assert sc.find(m, 5) is None
    assert len(sc.find(m, 9)) == 7  # ab c d ab c d <stop>


@pytest.fixture(scope="module")
def qwen():
    from thinkgate.reasoning.vocabulary import load_vocabulary

    vocab = load_vocabulary("qwen3_6")
    comp = Compiler(vocab, num_threads=1)
    yield vocab, comp, Shortest(vocab)
    comp.close()


def _check_real(vocab, m, found):
    for t in found:
        assert m.accept_token(t), (found, vocab.decode(found))
    assert m.is_terminated()
    m.rollback(len(found))


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_real_vocabulary_completion_is_valid_from_every_prefix(qwen, i):
    """Qwen3.6 (byte tier): from the start and from prefixes of an example, the completion is accepted,
    ends the output, and the whole output is a JSON value of the schema."""
    import jsonschema

    vocab, comp, sh = qwen
    schema, gen = SCHEMAS[i]
    compiled = comp.compile(Constraint.json_schema(schema))
    ids = vocab.encode(json.dumps(gen(random.Random(i)), separators=(",", ":")))
    for k in sorted({0, 1, len(ids) // 3, len(ids) // 2, len(ids) - 1}):
        m = new_matcher(compiled)
        bm = sh.byte_matcher(compiled)
        if not all(m.accept_token(t) for t in ids[:k]):
            continue  # the example breaks a bound the grammar keeps (whitespace): not a state to test
        assert bm.feed_tokens(ids[:k], vocab.token_bytes)
        found = sh.find(m, bm, 400)
        assert found is not None, (k, vocab.decode(ids[:k]))
        _check_real(vocab, m, found)
        out = vocab.decode(ids[:k] + found[:-1])
        jsonschema.validate(json.loads(out), schema)


def test_real_vocabulary_regexes(qwen):

    vocab, comp, sh = qwen
    for rx in REGEXES:
        rx = rx[0] if isinstance(rx, tuple) else rx
        compiled = comp.compile(Constraint.regex(rx))
        m = new_matcher(compiled)
        found = sh.find(m, sh.byte_matcher(compiled), 400)
        assert found is not None, rx
        _check_real(vocab, m, found)
        assert re.fullmatch(rx, vocab.decode(found[:-1])), (rx, vocab.decode(found[:-1]))


# The byte tier's text from a state, against the shortest text worked out by hand from the schema (each a sum of
# the fixed punctuation, keys and the shortest literal of every value still required).
_BY_HAND = [
    # the start: '{"name":"","age":0,"email":""}'
    (SCHEMAS[0][0], "", 30),
    # mid-array: '":1}],"express":true}' (qty >= 1, no more items, the shortest boolean)
    (SCHEMAS[2][0], '{"order_id": "AB-2033", "items": [{"sku": "pen", "qty', 21),
    # three required objects with five-character strings: '[{"x":"aaaaa"},{"x":"aaaaa"},{"x":"aaaaa"}]'
    ({"type": "array", "items": {"type": "object", "properties": {"x": {"type": "string", "minLength": 5}},
                                 "required": ["x"]}, "minItems": 3}, "", 43),
    # a pattern that needs its exact class: '"00000"}'
    ({"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}}, "required": ["zip"]},
     '{"zip": ', 8),
]


@pytest.mark.parametrize("schema, prefix, shortest", _BY_HAND)
def test_byte_tier_finds_the_shortest_text(qwen, schema, prefix, shortest):
    """Free-text states (a string's characters, optional whitespace) neither crowd the search's levels nor
    lengthen its answer: the text found is as short as the hand-worked minimum."""
    vocab, comp, sh = qwen
    compiled = comp.compile(Constraint.json_schema(schema))
    m = new_matcher(compiled)
    ids = vocab.encode(prefix)
    assert all(m.accept_token(t) for t in ids)
    bm = sh.byte_matcher(compiled)
    assert bm.feed_bytes(prefix.encode())
    found = sh.find(m, bm, 400)
    assert found is not None
    _check_real(vocab, m, found)
    text = vocab.decode(found[:-1])
    json.loads(prefix + text)
    assert len(text.encode()) == shortest, text


# Regexes whose way out of a free-text run is a byte no candidate names: the search tries, once per state, the
# printable ASCII bytes that change the state (the shortest text by hand beside each).
_REGEX_BY_HAND = [
    (r"[a-z]+@[a-z]+\.(com|org)", "a@a.com"),
    (r"[a-z]*Q", "Q"),
    (r"x[^<]*<end>", "x<end>"),
    (r"[A-Za-z_][A-Za-z0-9_]*=[0-9]+;", "A=0;"),
]


@pytest.mark.parametrize("rx, shortest", _REGEX_BY_HAND)
def test_byte_tier_leaves_free_text_by_any_ascii_byte(qwen, rx, shortest):
    vocab, comp, sh = qwen
    compiled = comp.compile(Constraint.regex(rx))
    m = new_matcher(compiled)
    found = sh.find(m, sh.byte_matcher(compiled), 400)
    assert found is not None, rx
    _check_real(vocab, m, found)
    text = vocab.decode(found[:-1])
    assert re.fullmatch(rx, text)
    assert len(text) == len(shortest), text


def test_byte_tier_closes_raw_text_and_tells_two_raw_values_apart(qwen):
    """A structural tag whose free-text values are ended by a literal (the XML formats' raw string parameters):
    every byte is allowed inside, so the way out is the closer that follows in the tag, tried whole. The two
    values' states have the same innermost parser items (one regex rule) and are told apart by the state their
    rule started in (xgrammar shares the rule of ``raw`` then ``</``): merged, the second value would be lost.
    Shortest text by hand: '<a></a>\\n<b></b>'."""
    vocab, comp, sh = qwen
    raw = {"type": "regex", "pattern": "[^<]*(<[^/<][^<]*)*"}
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "<a>"}, raw, {"type": "const_string", "value": "</"},
        {"type": "const_string", "value": "a>\n<b>"}, raw, {"type": "const_string", "value": "</"},
        {"type": "const_string", "value": "b>"}]}}
    compiled = comp.compile(Constraint.structural_tag(tag))
    m = new_matcher(compiled)
    found = sh.find(m, sh.byte_matcher(compiled), 400)
    assert found is not None
    _check_real(vocab, m, found)
    assert vocab.decode(found[:-1]) == "<a></a>\n<b></b>"


# Corpus tools (tests/data/tools/corpus.json) whose start search once found nothing: arrays with minItems, arrays of
# arrays, and a raw string value last in its call. Shortest text by hand: the required arguments' shortest values, the optional ones left out.
_CROWDED = [
    ("hermes", "send_email", {"to": [""], "subject": "", "body": ""}),
    ("hermes", "matrix_op", {"op": "add", "a": [], "b": []}),
    ("qwen3_6", "matrix_op", {"op": "add", "a": [], "b": []}),
    ("deepseek_v4", "matrix_op", {"op": "add", "a": [], "b": []}),
    ("deepseek_v4", "compare_products", {"product_ids": [1, 1]}),
    # the last parameter's raw value: its closer runs on into the call's end and the section's
    ("dots", "annotate", {"doc_id": "", "span": [0, 0], "label": ""}),
    ("minimax_m2", "submit_form", {"fields": {}, "form_id": ""}),
]


@pytest.mark.parametrize("fmt, name, arguments", _CROWDED, ids=[f"{f}-{n}" for f, n, _ in _CROWDED])
def test_byte_tier_completes_nested_arrays_in_a_tool_call(fmt, name, arguments):
    """The values of two properties (one string rule) must not merge, and the elements of an array of arrays
    (many contexts, few grammar positions) must not crowd the path that closes the array out of the beam, and the
    last parameter's raw value is closed by the call's end: the search finds the call with each argument's
    shortest value, and the format's own reader reads it back."""
    from support import BY_NAME

    from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader
    from thinkgate.testing.vocabularies import format_vocabulary

    vocab = format_vocabulary(fmt)
    tool = dict(BY_NAME[name], function=dict(BY_NAME[name]["function"], strict=True))
    choice = {"type": "function", "function": {"name": name}}
    constraint = build_tool_constraint([tool], choice, format=fmt, parallel_tool_calls=False, vocabulary=vocab,
                                       key_order="schema")
    comp = Compiler(vocab, num_threads=1)
    try:
        found = Shortest(vocab).complete(comp.compile(constraint), (), 400)
    finally:
        comp.close()
    assert found, (fmt, name)
    text = vocab.decode([t for t in found if t not in vocab.stop_token_ids])
    calls = get_tool_reader(fmt, [tool], choice, parallel_tool_calls=False, vocabulary=vocab).read(text).calls
    assert [c.name for c in calls] == [name], text
    assert json.loads(calls[0].arguments) == arguments, text
