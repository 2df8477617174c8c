"""Argument key orders: the orders each model's chat template can write, through the manager token by
token and back through the reader.

The expected texts are written by hand from the templates:

- Gemma 4, https://huggingface.co/google/gemma-4-E2B-it/blob/main/chat_template.jinja: a call is
  ``'<|tool_call>call:' + name + '{'``, then ``for key, value in arguments | dictsort`` the pieces
  ``key:`` + ``format_argument(value, escape_keys=False)`` joined by ``,``, then ``'}<tool_call|>'``.
  ``format_argument`` writes a string as ``'<|"|>' + s + '<|"|>'`` (no escaping), a boolean as
  ``true`` / ``false``, a mapping as ``{`` + its items, again through ``dictsort``, unquoted keys,
  ``,``-joined + ``}``, a sequence as ``[`` + items + ``]``, anything else with ``{{ argument }}``
  (Python's ``str``: ``420.5``, ``2``; ``None`` in the first revision, ``null`` in later ones, which
  test ``argument is none``). Jinja's ``dictsort`` is case-insensitive by default and stable, so
  ``Date`` sorts between ``cabin`` and ``destination``. A model that writes its caller's order (the
  schema's) writes it at every level too; a call that mixes the two orders is rejected.
- Qwen3 (hermes), https://huggingface.co/Qwen/Qwen3-8B/blob/main/tokenizer_config.json:
  ``'<tool_call>\\n{"name": "' + name + '", "arguments": ' + (arguments | tojson) + '}\\n</tool_call>'``;
  transformers binds ``tojson`` to ``json.dumps(x, ensure_ascii=False, sort_keys=False)``
  (src/transformers/utils/chat_template_utils.py), so the keys come in the caller's order, never sorted.

Vocabularies: Gemma 4's synthetic one (``thinkgate/testing/vocabularies.py``: the Qwen3.6 table plus Gemma's markers as
control tokens), Qwen3.6 for hermes.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import FAMILIES, assert_rejected_at, finish, vocab

from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader
from thinkgate.structured_output.tools.args import GemmaArgs
from thinkgate.structured_output.tools.order import Member, dictsort_keys, members_in_orders
from thinkgate.structured_output.tools.syntax import const

GEMMA = FAMILIES["gemma4"]
HERMES = FAMILIES["hermes"]
Q = '<|"|>'

BOOK = {"type": "function", "function": {
    "name": "book_flight", "description": "Book a flight.",
    "parameters": {
        "type": "object",
        "properties": {
            "origin": {"type": "string"},
            "destination": {"type": "string"},
            "Date": {"type": "string"},
            "passengers": {"type": "integer"},
            "cabin": {"enum": ["economy", "business"]},
            "flexible": {"type": "boolean"},
            "max_price": {"type": ["number", "null"]},
            "traveller": {"type": "object",
                          "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
                                         "email": {"type": "string"}},
                          "required": ["name", "age"]},
            "stops": {"type": "array",
                      "items": {"type": "object", "properties": {"city": {"type": "string"},
                                                                 "airport": {"type": "string"}},
                                "required": ["city"]}},
        },
        "required": ["origin", "destination", "passengers", "traveller"],
    }}}

CONST = {"type": "function", "function": {
    "name": "place", "parameters": {"type": "object", "properties": {
        "point": {"const": {"y": 1, "x": 2}}, "label": {"type": "string"}}, "required": ["point"]}}}

# the arguments as the caller holds them (schema order)
ARGS: dict[str, Any] = {
    "origin": "Zürich", "destination": "Lisbon", "Date": "2026-12-24", "passengers": 2, "cabin": "economy",
    "flexible": False, "max_price": 420.5,
    "traveller": {"name": "Ana", "age": 34, "email": "ana@example.org"},
    "stops": [{"city": "Paris", "airport": "CDG"}, {"city": "Madrid"}],
}

# Gemma 4's template, by hand: every level through dictsort
GEMMA_SORTED = (
    "<|tool_call>call:book_flight{"
    f"cabin:{Q}economy{Q},Date:{Q}2026-12-24{Q},destination:{Q}Lisbon{Q},flexible:false,max_price:420.5,"
    f"origin:{Q}Zürich{Q},passengers:2,"
    f"stops:[{{airport:{Q}CDG{Q},city:{Q}Paris{Q}}},{{city:{Q}Madrid{Q}}}],"
    f"traveller:{{age:34,email:{Q}ana@example.org{Q},name:{Q}Ana{Q}}}"
    "}<tool_call|>")
# the same call in the schema's (the caller's) order at every level
GEMMA_SCHEMA = (
    "<|tool_call>call:book_flight{"
    f"origin:{Q}Zürich{Q},destination:{Q}Lisbon{Q},Date:{Q}2026-12-24{Q},passengers:2,cabin:{Q}economy{Q},"
    f"flexible:false,max_price:420.5,traveller:{{name:{Q}Ana{Q},age:34,email:{Q}ana@example.org{Q}}},"
    f"stops:[{{city:{Q}Paris{Q},airport:{Q}CDG{Q}}},{{city:{Q}Madrid{Q}}}]"
    "}<tool_call|>")
# sorted outside, schema order inside: no template writes that (a call is in one order throughout)
GEMMA_MIXED_HEAD = (
    "<|tool_call>call:book_flight{"
    f"cabin:{Q}economy{Q},Date:{Q}2026-12-24{Q},destination:{Q}Lisbon{Q},flexible:false,max_price:420.5,"
    f"origin:{Q}Zürich{Q},passengers:2,stops:[{{city:{Q}Paris{Q}")
# the first template revision: None rendered by {{ argument }}; the minimum of required keys, sorted
GEMMA_NONE = (f"<|tool_call>call:book_flight{{destination:{Q}Lisbon{Q},max_price:None,origin:{Q}Oslo{Q},"
              f"passengers:1,traveller:{{age:40,name:{Q}Bo{Q}}}}}<tool_call|>")
NONE_ARGS = {"destination": "Lisbon", "max_price": None, "origin": "Oslo", "passengers": 1,
             "traveller": {"age": 40, "name": "Bo"}}
GEMMA_CONST = f"<|tool_call>call:place{{label:{Q}home{Q},point:{{x:2,y:1}}}}<tool_call|>"


def _gemma_constraint(mode: str, tools=(BOOK,), **kw):
    choice: Any = {"required": "required", "auto": "auto",
                   "named": {"type": "function", "function": {"name": tools[0]["function"]["name"]}}}[mode]
    c = build_tool_constraint(list(tools), choice, format="gemma4", **kw)
    assert c is not None
    return c, choice


def _read(fam, tools, choice, call_text: str, **kw):
    """The reader's calls, from the text and from the token ids (the same)."""
    reader = get_tool_reader(fam.fmt, list(tools), choice, **kw)
    by_text = reader.read(call_text)
    by_ids = reader.read_ids(vocab(fam.vocab).encode(call_text), vocab(fam.vocab))
    assert [(c.name, c.arguments) for c in by_ids.calls] == [(c.name, c.arguments) for c in by_text.calls]
    assert by_text.content is None and by_ids.content is None
    return by_text.calls


# --------------------------------------------------------------------------------------------------
# Gemma 4: sorted (as its template writes) and the schema's order, at every level

def test_dictsort_is_jinja_default_case_insensitive_and_stable():
    assert dictsort_keys(["origin", "destination", "Date", "cabin", "_x", "tags", "Tags"]) == \
        ["_x", "cabin", "Date", "destination", "origin", "tags", "Tags"]
    assert dictsort_keys(["Tags", "tags"]) == ["Tags", "tags"]


@pytest.mark.parametrize("text", [GEMMA_SORTED, GEMMA_SCHEMA], ids=["sorted", "schema"])
@pytest.mark.parametrize("mode", ["required", "named"])
def test_gemma4_keys_sorted_or_in_schema_order_are_accepted_and_read_back_exactly(mode, text):
    c, choice = _gemma_constraint(mode)
    finish(GEMMA, c, GEMMA.thinking + text)
    calls = _read(GEMMA, [BOOK], choice, text)
    assert [c.name for c in calls] == ["book_flight"]
    got = json.loads(calls[0].arguments)
    assert got == ARGS
    # exactly as written: the keys in the order of the text, the values typed (int, float, bool)
    assert list(got) == (list(ARGS) if text is GEMMA_SCHEMA else dictsort_keys(ARGS))
    inner_sorted = text is GEMMA_SORTED
    assert list(got["traveller"]) == (["age", "email", "name"] if inner_sorted else ["name", "age", "email"])
    assert list(got["stops"][0]) == (["airport", "city"] if inner_sorted else ["city", "airport"])
    assert type(got["passengers"]) is int and type(got["max_price"]) is float and got["flexible"] is False


def test_gemma4_auto_with_a_strict_tool_accepts_sorted_keys():
    strict = json.loads(json.dumps(BOOK))
    strict["function"]["strict"] = True
    c, choice = _gemma_constraint("auto", tools=(strict,))
    out = "Booking it." + GEMMA_SORTED
    finish(GEMMA, c, GEMMA.thinking + out)
    res = get_tool_reader("gemma4", [strict], choice).read_ids(vocab(GEMMA.vocab).encode(out), vocab(GEMMA.vocab))
    assert res.content == "Booking it." and [json.loads(c.arguments) for c in res.calls] == [ARGS]


def test_gemma4_null_as_the_template_revisions_write_it():
    c, choice = _gemma_constraint("required")
    for text in (GEMMA_NONE, GEMMA_NONE.replace("max_price:None", "max_price:null")):
        finish(GEMMA, c, GEMMA.thinking + text)
        calls = _read(GEMMA, [BOOK], choice, text)
        assert json.loads(calls[0].arguments) == NONE_ARGS
        assert list(json.loads(calls[0].arguments)) == list(NONE_ARGS)


def test_gemma4_const_object_in_either_order():
    c, choice = _gemma_constraint("required", tools=(CONST,))
    schema_order = f"<|tool_call>call:place{{point:{{y:1,x:2}},label:{Q}home{Q}}}<tool_call|>"
    for text in (GEMMA_CONST, schema_order):
        finish(GEMMA, c, GEMMA.thinking + text)
        assert [json.loads(x.arguments) for x in _read(GEMMA, [CONST], choice, text)] == \
            [{"point": {"x": 2, "y": 1}, "label": "home"}]
    head = GEMMA.thinking + "<|tool_call>call:place{point:{"
    assert_rejected_at(GEMMA, c, head + "x:2,", "z:1}}<tool_call|>")


# -- orders that are neither: rejected at the first key out of both orders
CALL = GEMMA.thinking + "<|tool_call>call:book_flight{"


@pytest.mark.parametrize("good,bad", [
    # schema order starts with origin; sorted order cannot start with it (cabin, Date, destination first)
    (f"origin:{Q}Zürich{Q},", f"Date:{Q}2026-12-24{Q},"),
    # sorted order starts with cabin; then Date or destination, never origin
    (f"cabin:{Q}economy{Q},", f"origin:{Q}Zürich{Q},"),
    # nested: sorted is age, email, name; schema is name, age, email
    # (after age, name: sorted ends there, and schema order cannot start with age)
    (f"destination:{Q}Lisbon{Q},origin:{Q}O{Q},passengers:1,traveller:{{age:3,name:{Q}A{Q}", f",email:{Q}e{Q}}}}}"),
    # sorted at the top, then a nested object in the schema's order (sorted: airport before city)
    (GEMMA_MIXED_HEAD[len("<|tool_call>call:book_flight{"):], f",airport:{Q}CDG{Q}}}]"),
], ids=["schema-then-other", "sorted-then-other", "nested", "mixed"])
def test_gemma4_an_order_that_is_neither_is_rejected(good, bad):
    c, _ = _gemma_constraint("required")
    assert_rejected_at(GEMMA, c, CALL + good, bad)


@pytest.mark.parametrize("good,bad", [
    # schema order without passengers: cabin comes where passengers must
    (f"origin:{Q}Zürich{Q},destination:{Q}Lisbon{Q},Date:{Q}x{Q},", f"cabin:{Q}economy{Q}"),
    # sorted order without passengers: stops where passengers must
    (f"destination:{Q}Lisbon{Q},origin:{Q}Zürich{Q},", "stops:[]"),
    # sorted order without traveller (the last one): the object cannot close
    (f"destination:{Q}Lisbon{Q},origin:{Q}Zürich{Q},passengers:2,stops:[]", "}<tool_call|>"),
    # schema order without traveller: stops where traveller must
    (f"origin:{Q}Zürich{Q},destination:{Q}Lisbon{Q},passengers:2,max_price:1,", "stops:[]"),
    # nested, sorted, without name
    (f"destination:{Q}L{Q},origin:{Q}O{Q},passengers:1,traveller:{{age:3,email:{Q}e{Q}", "}}<tool_call|>"),
], ids=["schema", "sorted", "sorted-last", "schema-late", "nested-sorted"])
def test_gemma4_a_missing_required_key_is_rejected_in_either_order(good, bad):
    c, _ = _gemma_constraint("required")
    assert_rejected_at(GEMMA, c, CALL + good, bad)


def test_gemma4_without_required_keys_any_subset_in_either_order():
    tool = {"type": "function", "function": {"name": "opts", "parameters": {"type": "object", "properties": {
        "c": {"type": "integer"}, "a": {"type": "integer"}, "b": {"type": "integer"}}}}}
    c, choice = _gemma_constraint("required", tools=(tool,))
    ok = {"{}": {}, "{c:1}": {"c": 1}, "{a:1}": {"a": 1}, "{b:1}": {"b": 1}, "{c:1,a:2}": {"c": 1, "a": 2},
          "{c:1,b:2}": {"c": 1, "b": 2}, "{a:1,b:2}": {"a": 1, "b": 2}, "{a:1,c:3}": {"a": 1, "c": 3},
          "{c:1,a:2,b:3}": {"c": 1, "a": 2, "b": 3}, "{a:1,b:2,c:3}": {"a": 1, "b": 2, "c": 3}}
    for body, expected in ok.items():
        text = f"<|tool_call>call:opts{body}<tool_call|>"
        finish(GEMMA, c, GEMMA.thinking + text)
        args = _read(GEMMA, [tool], choice, text)[0].arguments
        assert json.loads(args) == expected and list(json.loads(args)) == list(expected)
    # b before a (neither order), a trailing comma, a doubled comma, a repeated key
    for good, bad in (("{b:1,", "a:2}"), ("{c:1,", "}<tool_call|>"), ("{c:1,", ",a:2}"), ("{a:1,b:2,", "a:3}")):
        assert_rejected_at(GEMMA, c, GEMMA.thinking + "<|tool_call>call:opts" + good, bad)


def test_object_bodies_grow_linearly_with_the_properties():
    def size(n: int, required: bool) -> int:
        ms = [Member(f"k{i:02d}", const(f"k{i:02d}:V"), required and i % 2 == 0) for i in range(n, 0, -1)]
        return len(json.dumps(members_in_orders(ms, ("schema", "sorted"), ",")))

    for req in (True, False):
        assert size(40, req) < 2.2 * size(20, req) and size(20, req) < 2.3 * size(10, req)
    # one order when the orders coincide
    ms = [Member(k, const(k), False) for k in ("a", "b")]
    assert members_in_orders(ms, ("schema", "sorted"), ",") == members_in_orders(ms, ("schema",), ",")
    with pytest.raises(ValueError, match="unknown key order"):
        members_in_orders(ms, ("random",), ",")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="key_orders must be"):
        GemmaArgs(key_orders=("random",))  # type: ignore[arg-type]


def test_gemma4_nesting_does_not_multiply_the_orders():
    def nested(depth: int) -> dict[str, Any]:
        s: dict[str, Any] = {"type": "integer"}
        for _ in range(depth):  # keys in reverse order at every level: the two orders differ everywhere
            s = {"type": "object", "properties": {"b": s, "a": {"type": "integer"}}, "required": ["b", "a"]}
        return {"type": "function", "function": {"name": "deep", "parameters": s}}

    def size(depth: int) -> int:
        c = build_tool_constraint([nested(depth)], "required", format="gemma4")
        return len(c.spec)

    assert size(12) < 2.5 * size(6)  # one or per object would make it 64x
    c, choice = _gemma_constraint("required", tools=(nested(3),))
    sorted_text = "<|tool_call>call:deep{a:1,b:{a:2,b:{a:3,b:0}}}<tool_call|>"
    schema_text = "<|tool_call>call:deep{b:{b:{b:0,a:3},a:2},a:1}<tool_call|>"
    for text in (sorted_text, schema_text):
        finish(GEMMA, c, GEMMA.thinking + text)
        assert json.loads(_read(GEMMA, [nested(3)], choice, text)[0].arguments) == {"a": 1, "b": {"a": 2, "b": {"a": 3, "b": 0}}}
    assert_rejected_at(GEMMA, c, GEMMA.thinking + "<|tool_call>call:deep{a:1,b:{a:2,b:{", "b:0,a:3}}}<tool_call|>")


# --------------------------------------------------------------------------------------------------
# hermes (Qwen3): tojson keeps the caller's order, any order of the top-level keys

HERMES_SCHEMA = ('<tool_call>\n{"name": "book_flight", "arguments": {"origin": "Zürich", "destination": "Lisbon", '
                 '"Date": "2026-12-24", "passengers": 2, "cabin": "economy", "flexible": false, "max_price": 420.5, '
                 '"traveller": {"name": "Ana", "age": 34, "email": "ana@example.org"}, '
                 '"stops": [{"city": "Paris", "airport": "CDG"}, {"city": "Madrid"}]}}\n</tool_call>')


def test_hermes_schema_order_accepted_and_read_back_exactly():
    c = build_tool_constraint([BOOK], "required", format="hermes")
    finish(HERMES, c, HERMES.thinking + HERMES_SCHEMA)
    calls = _read(HERMES, [BOOK], "required", HERMES_SCHEMA)
    assert calls[0].arguments == json.dumps(ARGS, ensure_ascii=False)


def test_hermes_keys_in_any_order_at_every_level():
    """The caller's dicts may be in any order (tests/test_tool_caller_order.py), nested ones too: sorted
    keys at every level are one such order, read back as written; an undeclared key is still rejected
    at its token."""
    c = build_tool_constraint([BOOK], "required", format="hermes")

    def sort_all(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: sort_all(v[k]) for k in dictsort_keys(v)}
        return [sort_all(x) for x in v] if isinstance(v, list) else v

    text = ('<tool_call>\n{"name": "book_flight", "arguments": ' + json.dumps(sort_all(ARGS), ensure_ascii=False)
            + "}\n</tool_call>")
    finish(HERMES, c, HERMES.thinking + text)
    got = json.loads(_read(HERMES, [BOOK], "required", text)[0].arguments)
    assert got == ARGS and list(got) == dictsort_keys(ARGS) and list(got["traveller"]) == ["age", "email", "name"]
    head = HERMES.thinking + '<tool_call>\n{"name": "book_flight", "arguments": {"'
    assert_rejected_at(HERMES, c, head, 'cabins": "economy"', offset=1)
