"""JSON-schema keyword support (structured_output/compilation/schema_support.py).

1. Every keyword of group 1 (GRAMMAR_ENFORCED) really is enforced by xgrammar's grammar, built the
   way the compiler builds it: a valid instance is accepted, a violating one rejected. An xgrammar that
   drops one fails here.
2. For every keyword the issue named, an output that breaks it is not accepted as valid through the
   manager, driven token by token over the Qwen3.6 vocabulary: the mask stops it (group 1), the
   termination reports ``error`` naming the keyword (group 2), or ``add_request`` raises (group 3);
   a valid output still terminates ``terminated``.

Most schemas are the shapes of the JSON-Schema-Test-Suite (json-schema-org/JSON-Schema-Test-Suite,
tests/draft2020-12/<keyword>.json), written here by hand.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from xgrammar.testing import _is_grammar_accept_string

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.structured_output import Compiler, Constraint, RequestStatus, StructuredOutputManager
from thinkgate.structured_output.compilation import schema_support as ss

CLOSED = ("<|im_start|>system\nYou answer in JSON.<|im_end|>\n<|im_start|>user\nWho?<|im_end|>\n"
          "<|im_start|>assistant\n<think>\n\n</think>\n\n")


@pytest.fixture(scope="module")
def compiler(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=2)
    yield c
    c.close()


@pytest.fixture(scope="module")
def parser(qwen_vocab):
    return get_reasoning_parser("qwen3")(qwen_vocab)


# ------------------------------------------------------------------------------------------------
# 1. group 1: the grammar enforces it (schema, valid instances, violating instances)

GROUP1 = {
    "type": ({"type": "integer"}, ["1"], ["1.5", '"a"']),
    "enum": ({"enum": [1, "a", None]}, ["1", '"a"', "null"], ["2", '"b"']),
    "const": ({"const": {"a": 1}}, ['{"a":1}'], ['{"a":2}']),
    "properties": ({"type": "object", "properties": {"a": {"type": "integer"}}}, ['{"a":1}'], ['{"a":"x"}']),
    "additionalProperties": ({"type": "object", "additionalProperties": {"type": "integer"}},
                             ['{"b":1}'], ['{"b":"x"}']),
    "required": ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                 ['{"a":1}'], ["{}"]),
    "minProperties": ({"type": "object", "minProperties": 1, "additionalProperties": {"type": "integer"}},
                      ['{"a":1}'], ["{}"]),
    "maxProperties": ({"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer"}},
                      ['{"a":1}'], ['{"a":1,"b":2}']),
    "propertyNames": ({"type": "object", "propertyNames": {"maxLength": 3}, "additionalProperties": True},
                      ['{"ab":1}'], ['{"abcd":1}']),
    "items": ({"type": "array", "items": {"type": "integer"}}, ["[1,2]"], ['["a"]']),
    "prefixItems": ({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": False},
                    ['[1,"a"]'], ['["a",1]', '[1,"a",3]']),
    "minItems": ({"type": "array", "items": {"type": "integer"}, "minItems": 2}, ["[1,2]"], ["[1]"]),
    "maxItems": ({"type": "array", "items": {"type": "integer"}, "maxItems": 1}, ["[1]"], ["[1,2]"]),
    "minLength": ({"type": "string", "minLength": 2}, ['"ab"'], ['"a"']),
    "maxLength": ({"type": ["string", "null"], "maxLength": 2}, ['"ab"', "null"], ['"abc"']),
    "pattern": ({"type": "string", "pattern": "^a[0-9]+$"}, ['"a12"'], ['"b1"', '"a"']),
    "format": ({"type": "string", "format": "date"}, ['"2020-01-02"'], ['"2020-1-2"']),
    "minimum": ({"type": "number", "minimum": 1.5}, ["1.5", "2"], ["1.4", "-3"]),
    "maximum": ({"type": "integer", "maximum": 3}, ["3"], ["4", "30"]),
    "exclusiveMinimum": ({"type": "integer", "exclusiveMinimum": 3}, ["4"], ["3"]),
    "exclusiveMaximum": ({"type": "number", "exclusiveMaximum": 1.5}, ["1.4"], ["1.5"]),
    "multipleOf": ({"type": "integer", "multipleOf": 3}, ["6", "-3"], ["7"]),
    "anyOf": ({"anyOf": [{"type": "integer"}, {"type": "string"}]}, ["1", '"a"'], ["null"]),
    "allOf": ({"allOf": [{"type": "integer", "minimum": 2}]}, ["3"], ["1", '"a"']),
    "$ref": ({"type": "object", "properties": {"c": {"type": "array", "items": {"$ref": "#"}}}},
             ['{"c":[{"c":[]}]}'], ['{"c":[1]}']),
    "$defs": ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}, ["1"], ['"x"']),
    "definitions": ({"definitions": {"n": {"type": "integer"}}, "$ref": "#/definitions/n"}, ["1"], ['"x"']),
}
FORMATS = {
    "email": ('"a@b.co"', '"nope"'), "date": ('"2020-01-02"', '"2020-1-2"'),
    "date-time": ('"2020-01-02T03:04:05Z"', '"2020-01-02"'), "time": ('"03:04:05Z"', '"3pm"'),
    "uuid": ('"123e4567-e89b-12d3-a456-426614174000"', '"123"'), "ipv4": ('"1.2.3.4"', '"1.2.3"'),
    "ipv6": ('"::1"', '"zz"'), "uri": ('"http://a.b/c"', '"not a uri"'), "hostname": ('"a.b"', '"a b"'),
    "duration": ('"P1D"', '"1 day"'),
}


def test_group1_cases_cover_the_group():
    assert set(GROUP1) == set(ss.GRAMMAR_ENFORCED)
    assert set(FORMATS) == set(ss.GRAMMAR_FORMATS)


def test_groups_are_disjoint_and_documented():
    groups = [ss.GRAMMAR_ENFORCED, ss.OUTPUT_CHECKED, ss.ANNOTATIONS]
    for i, a in enumerate(groups):
        for b in groups[i + 1:]:
            assert not a & b
    for kw in ss.GRAMMAR_ENFORCED | ss.OUTPUT_CHECKED | ss.ANNOTATIONS:
        assert f"``{kw}``" in ss.__doc__, kw


def _grammar(compiler, schema):
    grammar, _ = compiler.validate(Constraint.json_schema(schema))
    return grammar


@pytest.mark.parametrize("keyword", sorted(GROUP1))
def test_grammar_enforces_group1_keyword(compiler, keyword):
    schema, good, bad = GROUP1[keyword]
    assert ss.find_unenforced(schema) == []  # classified as group 1
    grammar = _grammar(compiler, schema)
    for x in good:
        assert _is_grammar_accept_string(grammar, x), (keyword, x)
    for x in bad:
        assert not _is_grammar_accept_string(grammar, x), (keyword, x)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_grammar_enforces_format(compiler, fmt):
    schema = {"type": "string", "format": fmt}
    assert ss.find_unenforced(schema) == []
    good, bad = FORMATS[fmt]
    grammar = _grammar(compiler, schema)
    assert _is_grammar_accept_string(grammar, good)
    assert not _is_grammar_accept_string(grammar, bad)


# a group-1 keyword where the converter drops it (measured): group 2
@pytest.mark.parametrize("schema,keyword", [
    ({"minLength": 3}, "minLength"),                                    # no type
    ({"type": "string", "pattern": "^[a-z]+$", "minLength": 3}, "minLength"),  # next to pattern
    ({"type": "string", "format": "email", "maxLength": 5}, "maxLength"),      # next to format
    ({"type": "number", "multipleOf": 0.5}, "multipleOf"),
    ({"type": "string", "const": 1}, "const"),
    ({"type": "string", "enum": ["a", 1]}, "enum"),
    ({"type": "integer", "anyOf": [{"minimum": 5}, {"maximum": 0}]}, "anyOf"),
    ({"type": "object", "properties": {"zz": {"type": "integer"}}, "propertyNames": {"maxLength": 1},
      "additionalProperties": True}, "propertyNames"),
    ({"type": "string", "format": "regex"}, "format"),
])
def test_unenforced_group1_keyword_is_group2(schema, keyword):
    assert (keyword, "#") in ss.find_unenforced(schema)


# ------------------------------------------------------------------------------------------------
# 2. through the manager, token by token

def _rows(batch):
    if batch is None:
        return {}
    idx = batch.logits_indices.tolist()
    return {i: batch.bitmask[r].numpy().copy() for r, i in enumerate(idx)}


def _allows(row: np.ndarray, t: int) -> bool:
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


def _manager(qwen_vocab, compiler, parser, **kw):
    kw.setdefault("max_num_seqs", 8)
    return StructuredOutputManager(qwen_vocab, parser, compiler=compiler, **kw)


def _drive(mgr, vocab, rid, text, drafts=0):
    """Feed ``text`` then ``<|im_end|>``: ("masked", position) when a row disallows the next token,
    else the last AcceptResult."""
    ids = vocab.encode(text) + [vocab.token_id("<|im_end|>")]
    i, res = 0, None
    while i < len(ids):
        proposal = ids[i:i + drafts]  # drafts for positions i.., row len(proposal): the bonus
        rows = _rows(mgr.grammar_bitmask([(rid, proposal)] if drafts else [rid]))
        n = 0
        for j in range(len(proposal) + 1):
            if i + j >= len(ids) or j not in rows:  # no row after a stop token
                break
            if not _allows(rows[j], ids[i + j]):
                if n == 0:
                    return ("masked", i + j)
                break
            n += 1
        res = mgr.accept_tokens(rid, ids[i:i + n])
        if res.status == "error":
            return res
        i += n
    return res


def _ready(mgr, rid):
    import time
    t0 = time.monotonic()
    while not mgr.is_compiled(rid):
        assert time.monotonic() - t0 < 30
        time.sleep(0.002)


def _error(mgr, rid):
    """The ERROR message of ``rid`` once its compile settled (an invalid constraint is found off the
    caller's thread, so add_request returns and the request goes to ERROR)."""
    _ready(mgr, rid)
    assert mgr.status(rid) == "error", mgr.status(rid)
    return mgr.error(rid)


# (schema, violating output, valid output or None, the keyword the error names)
GROUP2 = {
    "uniqueItems": ({"uniqueItems": True}, "[1, 1]", "[1, 2]", "uniqueItems"),
    "not": ({"not": {"type": "integer"}}, "1", '"foo"', "not"),
    "if_then": ({"if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}, "else": {"multipleOf": 2}},
                "-100", "-1", "minimum"),
    "if_else": ({"if": {"exclusiveMaximum": 0}, "then": {"minimum": -10}, "else": {"multipleOf": 2}},
                "3", "4", "multipleOf"),
    "allOf": ({"allOf": [{"properties": {"bar": {"type": "integer"}}, "required": ["bar"]},
                         {"properties": {"foo": {"type": "string"}}, "required": ["foo"]}]},
              '{"foo": "baz"}', '{"foo": "baz", "bar": 2}', "required"),
    "allOf_conflict": ({"allOf": [{"type": "integer"}, {"type": "string"}]}, "1", None, "type"),
    "contains": ({"type": "array", "items": {"type": "integer"}, "contains": {"minimum": 5}},
                 "[2, 3, 4]", "[3, 4, 5]", "contains"),
    "minContains": ({"type": "array", "items": {"type": "integer"}, "contains": {"const": 1}, "minContains": 2}, "[1, 2]", "[1, 1]",
                    "minContains"),
    "dependentRequired": ({"type": "object", "properties": {"foo": {}, "bar": {}},
                           "dependentRequired": {"bar": ["foo"]}}, '{"bar": 2}', '{"foo": 1, "bar": 2}',
                          "dependentRequired"),
    "dependentSchemas": ({"type": "object", "properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}},
                          "dependentSchemas": {"bar": {"required": ["foo"]}}}, '{"bar": 2}',
                         '{"foo": 1, "bar": 2}', "required"),
    "dependencies": ({"type": "object", "properties": {"foo": {"type": "integer"}, "bar": {"type": "integer"}},
                      "dependencies": {"bar": ["foo"]}}, '{"bar": 2}', '{"foo": 1, "bar": 2}', "dependencies"),
    "pattern_lookahead": ({"type": "string", "pattern": "^(?!x).*$"}, '"xb"', '"ab"', "pattern"),
    "oneOf": ({"oneOf": [{"type": "integer"}, {"minimum": 2}]}, "3", "1", "oneOf"),
    "required_not_in_properties": ({"type": "object", "properties": {"a": {"type": "integer"}},
                                    "required": ["z"], "additionalProperties": True},
                                   '{"a": 1}', '{"a": 1, "z": 1}', "required"),
    "ref_siblings": ({"$defs": {"reffed": {"type": "array"}},
                      "properties": {"foo": {"$ref": "#/$defs/reffed", "maxItems": 2}}},
                     '{"foo": [1, 2, 3]}', '{"foo": [1, 2]}', "maxItems"),
    "patternProperties": ({"type": "object", "patternProperties": {"^f": {"type": "integer"}},
                           "additionalProperties": {"type": "string"}}, None, None, "patternProperties"),
    "unevaluatedProperties": ({"type": "object", "allOf": [{"properties": {"foo": {"type": "string"}}}],
                               "unevaluatedProperties": False}, None, None, "unevaluatedProperties"),
}


@pytest.mark.parametrize("case", sorted(GROUP2))
def test_group2_violation_errors_at_termination(qwen_vocab, compiler, parser, case):
    schema, bad, good, keyword = GROUP2[case]
    assert ss.find_unenforced(schema)  # needs the output check
    c = Constraint.json_schema(schema)
    assert c.schema_check is not None
    if bad is None:
        return
    v = qwen_vocab
    prompt = v.encode(CLOSED)
    with _manager(v, compiler, parser) as mgr:
        mgr.add_request("bad", c, prompt)
        if good is not None:
            mgr.add_request("good", c, prompt)
        _ready(mgr, "bad")
        res = _drive(mgr, v, "bad", bad)
        if isinstance(res, tuple):  # the grammar itself stopped it: fine too (group 1 at work)
            return
        assert res.status == "error", res
        assert repr(keyword) in res.message and "#" in res.message, res.message
        assert mgr.status("bad") is RequestStatus.ERROR and mgr.error("bad") == res.message
        if good is not None:  # nothing else moves: another request of the same constraint finishes
            _ready(mgr, "good")
            res = _drive(mgr, v, "good", good)
            assert not isinstance(res, tuple), f"valid output masked at {res}"
            assert res.status == "terminated", res.message
            assert mgr.status("good") is RequestStatus.TERMINATED


def test_group2_output_check_with_drafts(qwen_vocab, compiler, parser):
    """Rows with drafts accept and roll back tokens on the matcher: the recorded output stays exact."""
    v = qwen_vocab
    schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
    with _manager(v, compiler, parser, num_speculative_tokens=3) as mgr:
        for rid in ("a", "b"):
            mgr.add_request(rid, Constraint.json_schema(schema), v.encode(CLOSED))
            _ready(mgr, rid)
        assert _drive(mgr, v, "a", "[10, 20, 30, 40]", drafts=3).status == "terminated"
        res = _drive(mgr, v, "b", "[10, 20, 30, 10]", drafts=3)
        assert res.status == "error" and "'uniqueItems'" in res.message and "(output $)" in res.message


@pytest.mark.parametrize("schema,bad,good", [
    ({"type": "object", "properties": {"n": {"type": "integer", "minimum": 3}}, "required": ["n"]},
     '{"n": 2}', '{"n": 3}'),
    ({"type": "string", "pattern": "^a[0-9]+$"}, '"b1"', '"a1"'),
    ({"type": "array", "items": {"type": "integer"}, "maxItems": 2}, "[1, 2, 3]", "[1, 2]"),
    ({"enum": ["yes", "no"]}, '"maybe"', '"no"'),
])
def test_group1_violation_is_masked(qwen_vocab, compiler, parser, schema, bad, good):
    v = qwen_vocab
    c = Constraint.json_schema(schema)
    assert c.schema_check is None  # pays nothing
    with _manager(v, compiler, parser) as mgr:
        mgr.add_request("bad", c, v.encode(CLOSED))
        mgr.add_request("good", c, v.encode(CLOSED))
        _ready(mgr, "bad")
        _ready(mgr, "good")
        assert _drive(mgr, v, "bad", bad)[0] == "masked"
        res = _drive(mgr, v, "good", good)
        assert res.status == "terminated" and type(mgr._requests["good"].matcher) is not ss.RecordingMatcher


# ------------------------------------------------------------------------------------------------
# 3. rejected at add_request

ALWAYS = {
    "external_ref": ({"$ref": "http://example.com/schema.json"}, "external $ref"),
    "external_ref_nested": ({"type": "object", "properties": {"a": {"$ref": "other.json#/x"}}}, "#/properties/a"),
    "type_empty": ({"type": []}, "'type' at #"),
    "unresolved_ref": ({"$defs": {"a": {"type": "integer"}}, "$ref": "#/$defs/b"}, "does not resolve"),
    "unresolved_anchor": ({"$ref": "#nowhere"}, "does not resolve"),
    "required_strict": ({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["z"]},
                        "'z'"),
    "required_addl_false": ({"type": "object", "properties": {"a": {}}, "required": ["z"],
                             "additionalProperties": False}, "'required' at #"),
    "pattern_backreference": ({"type": "string", "pattern": "^(a)\\1$"}, "backreference"),
    "pattern_lookbehind": ({"type": "string", "pattern": "^a(?<=a)b$"}, "lookbehind"),
}


@pytest.mark.parametrize("case", sorted(ALWAYS))
@pytest.mark.parametrize("unsupported", ["check", "reject"])
def test_always_rejected_at_add_request(qwen_vocab, compiler, parser, case, unsupported):
    schema, words = ALWAYS[case]
    with _manager(qwen_vocab, compiler, parser) as mgr:
        mgr.add_request("r", Constraint.json_schema(schema, unsupported=unsupported))
        message = _error(mgr, "r")
        assert words in message, message


@pytest.mark.parametrize("case", sorted(GROUP2))
def test_reject_mode_rejects_group2(qwen_vocab, compiler, parser, case):
    schema = GROUP2[case][0]
    keyword, path = ss.find_unenforced(schema)[0]
    with _manager(qwen_vocab, compiler, parser) as mgr:
        mgr.add_request("r", Constraint.json_schema(schema, unsupported="reject"))
        mgr.add_request("ok", Constraint.json_schema(GROUP1["required"][0], unsupported="reject"))
        assert f"{keyword!r} at {path}" in _error(mgr, "r")
        _ready(mgr, "ok")
        assert mgr.error("ok") is None


def test_reject_mode_is_part_of_the_key():
    a = Constraint.json_schema({"uniqueItems": True})
    b = Constraint.json_schema({"uniqueItems": True}, unsupported="reject")
    assert a.key != b.key
    with pytest.raises(ValueError, match="unsupported"):
        Constraint.json_schema({}, unsupported="ignore")


def test_deep_schema_is_a_value_error_not_recursion(qwen_vocab, compiler, parser):
    deep: dict = {"type": "integer"}
    for _ in range(ss.MAX_SCHEMA_DEPTH + 5):
        deep = {"type": "array", "items": deep}
    with _manager(qwen_vocab, compiler, parser) as mgr:
        mgr.add_request("r", Constraint.json_schema(deep))
        assert "nested deeper" in _error(mgr, "r")
    text = '{"not":' * 100_000 + "{}" + "}" * 100_000
    with pytest.raises(ValueError, match="nested deeper"):
        Constraint.json_schema(text)
    # walking a wide, deep-but-allowed schema is iterative: no RecursionError at any recursion limit
    ok: dict = {"type": "integer"}
    for _ in range(ss.MAX_SCHEMA_DEPTH - 1):
        ok = {"type": "array", "items": ok}
    assert ss.find_unenforced(ok) == []


def test_unknown_format_checked_by_format_checker():
    check = ss.schema_check(json.dumps({"type": "object", "properties": {"a%20/b": {"type": "string",
                                                                                   "format": "regex"}}}))
    assert check.keywords == (("format", "#/properties/a%20~1b"),)
    assert "'format'" in check.problem('{"a%20/b": "("}')
    assert check.problem('{"a%20/b": "a+"}') is None


def test_output_check_message_names_keyword_and_paths():
    check = ss.schema_check(json.dumps({"type": "object", "properties": {
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}))
    msg = check.problem('{"tags": ["a", "a"]}')
    assert "'uniqueItems' at #/properties/tags/uniqueItems" in msg and "$.tags" in msg
    assert check.problem('{"tags": ["a", "b"]}') is None
    assert "not JSON" in check.problem('{"tags": [')
