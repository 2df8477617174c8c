"""A JSON value inside a tool call drops its ``excludes`` only where no JSON text of its schema could hold them
(``tools/syntax.json_fmt``): a schema that admits no string, and excluded strings with a character only a
string could hold. The dropped exclusion must change no mask."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import xgrammar as xgr

from thinkgate.structured_output import Constraint
from thinkgate.structured_output.compilation.compiler import Compiler
from thinkgate.structured_output.tools.syntax import json_fmt

NO_STRINGS = [
    {"type": "integer", "minimum": 1, "maximum": 20},
    {"type": "number"},
    {"type": "boolean"},
    {"type": ["integer", "null"]},
    {"enum": [1, 2.5, True, None]},
    {"const": 3},
    {"type": "array", "items": {"type": "integer"}, "minItems": 1},
    {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
    {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
    {"type": "string", "anyOf": [{"type": "integer"}, {"type": "null"}]},  # the intersection holds no string
    {"$ref": "#/$defs/n", "$defs": {"n": {"type": "number"}}},
    {"type": "array", "prefixItems": [{"type": "integer"}], "items": {"type": "boolean"}},
]
MAY_HOLD_STRINGS = [
    {},
    True,
    {"type": "string"},
    {"type": "object", "properties": {"a": {"type": "integer"}}},  # keys are strings
    {"type": "array"},  # items of any type
    {"type": "array", "items": {"type": "string"}},
    {"type": ["integer", "string"]},
    {"anyOf": [{"type": "integer"}, {"type": "string"}]},
    {"enum": [1, "a"]},
    {"enum": [[1]]},
    {"$ref": "#/$defs/s", "$defs": {"s": {"type": "string"}}},
    {"$ref": "#/$defs/missing"},
    {"allOf": [{"minimum": 1}]},
    {"type": "integer", "not": {"type": "string"}, "oneOf": "not a list"},
]


@pytest.mark.parametrize("schema", NO_STRINGS)
def test_a_schema_without_strings_drops_excludes_a_string_alone_could_hold(schema):
    assert "excludes" not in json_fmt(schema, max_whitespace=4, excludes=["</"])
    # a digit string could be spelled by a number: kept
    assert json_fmt(schema, max_whitespace=4, excludes=["12"])["excludes"] == ["12"]


@pytest.mark.parametrize("schema", MAY_HOLD_STRINGS)
def test_a_schema_that_may_hold_strings_keeps_its_excludes(schema):
    assert json_fmt(schema, max_whitespace=4, excludes=["</"])["excludes"] == ["</"]


@pytest.fixture(scope="module")
def compiler(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=1)
    yield c
    c.close()


def _rows(compiled, vocab, text: str) -> list[bytes]:
    m = xgr.GrammarMatcher(compiled.grammar)
    bm = torch.empty((1, (vocab.logits_width + 31) // 32), dtype=torch.int32)
    rows = []
    for t in vocab.encode(text):
        m.fill_next_token_bitmask(bm, 0)
        rows.append(bm.numpy().tobytes())
        assert m.accept_token(t), text
    m.fill_next_token_bitmask(bm, 0)
    rows.append(bm.numpy().tobytes())
    return rows


def _value(schema, rnd: random.Random, depth: int = 0) -> str:
    s = schema
    if "$ref" in s:
        s = s["$defs"][s["$ref"].rsplit("/", 1)[1]]
    if "anyOf" in s:
        return _value(rnd.choice(s["anyOf"]), rnd, depth)
    if "enum" in s:
        return json.dumps(rnd.choice(s["enum"]))
    if "const" in s:
        return json.dumps(s["const"])
    t = s["type"] if isinstance(s["type"], str) else rnd.choice(s["type"])
    if t == "integer":
        return str(rnd.randint(s.get("minimum", -99), s.get("maximum", 99)))
    if t == "number":
        return rnd.choice(["-1.5", "2e3", "0.25", "7"])
    if t == "boolean":
        return rnd.choice(["true", "false"])
    if t == "null":
        return "null"
    heads = [_value(p, rnd, depth + 1) for p in s.get("prefixItems", [])]
    n = rnd.randint(max(0, s.get("minItems", 0) - len(heads)), 3)
    return "[" + ", ".join(heads + [_value(s["items"], rnd, depth + 1) for _ in range(n)]) + "]"


@pytest.mark.parametrize("schema", NO_STRINGS)
def test_dropping_the_excludes_changes_no_mask(qwen_vocab, compiler, schema):
    """Masks along random values of the schema, with the exclusion (forced) and without, on Qwen3.6."""
    with_ex = {**json_fmt(schema, max_whitespace=4), "excludes": ["</"]}
    without = json_fmt(schema, max_whitespace=4, excludes=["</"])
    assert "excludes" not in without
    close = {"type": "const_string", "value": "\n</p>"}
    tags = [Constraint.structural_tag({"type": "sequence", "elements": [f, close]}) for f in (with_ex, without)]
    a, b = (compiler.compile(t) for t in tags)
    rnd = random.Random(np.random.SeedSequence().entropy)
    for _ in range(3):
        text = _value(schema, rnd) + "\n</p>"
        assert _rows(a, qwen_vocab, text) == _rows(b, qwen_vocab, text), text
