"""Argument keys in the caller's order: every format whose template keeps the order of the arguments dict
takes a call's top-level keys in any order, and the key check (``tools/key_check.py``) enforces each key
once and the required ones when the output ends.

The templates keep the caller's order (transformers' ``tojson`` is ``json.dumps(..., sort_keys=False)``;
the XML templates iterate ``arguments.items()``; DeepSeek's encoder and harmony's renderer iterate the
dict), so ``{"url": ..., "method": ...}`` for a schema that declares ``method`` first is a call a model
writes. Texts come from ``tests/template_render.py``; vocabularies are the families' (``support.py``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import pickle
from typing import Any

import pytest
from support import FAMILIES, add_ready_request, finish, run_stream, vocab
from template_render import render

from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader, get_tool_format
from thinkgate.structured_output.tools.key_check import KeysCheck

HTTP = {"type": "function", "function": {"name": "http_request", "parameters": {
    "type": "object",
    "properties": {"method": {"type": "string", "enum": ["GET", "POST"]}, "url": {"type": "string"},
                   "Content-Type": {"type": "string"}, "retries": {"type": "integer"},
                   "headers": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                               "required": ["a"]}},
    "required": ["method", "url"]}}}
CALLER = {"url": "https://example.com/", "retries": 2, "method": "GET", "headers": {"a": "x", "b": "y"}}

# renderer -> family (format, vocabulary, reasoning parser): one per argument syntax
RENDERERS = {"hermes": "hermes", "mistral": "mistral", "qwen3_6": "qwen3_6", "qwen3_coder": "qwen3_coder",
             "glm47": "glm47", "deepseek_v4": "deepseek_v4", "openai": "openai", "kimi_k2": "kimi_k2",
             "minimax_m3": "minimax_m3"}


def _fam(renderer: str):
    return FAMILIES[RENDERERS[renderer]]


def _body(renderer: str, args: dict[str, Any]) -> str:
    return render(renderer, [("http_request", args)])


def _reader_ids(fam, text: str) -> list[int]:
    v = vocab(fam.vocab)
    return v.encode(fam.thinking + text) if fam.fmt == "openai" else v.encode(text)


def _finish_status(fam, constraint, text: str) -> tuple[str, str]:
    """Feed the call token by token (each allowed by the mask), then a stop token: its result."""
    v = vocab(fam.vocab)
    ids = v.encode(fam.thinking + text)
    assert run_stream(fam, constraint, ids) is None, "rejected before the stop token"
    mgr, rid = add_ready_request(fam, constraint)
    try:
        res = mgr.accept_tokens(rid, ids)
        assert res.status == "ok", res.message
        res = mgr.accept_tokens(rid, [min(v.stop_token_ids)])
        return res.status, res.message or ""
    finally:
        mgr.remove_request(rid)


@pytest.mark.parametrize("renderer", list(RENDERERS))
def test_the_callers_order_is_accepted_and_read_back_as_written(renderer: str):
    fam = _fam(renderer)
    c = build_tool_constraint([HTTP], "required", format=fam.fmt)
    text = _body(renderer, CALLER)
    finish(fam, c, fam.thinking + text)
    got = get_tool_reader(fam.fmt, [HTTP], "required").read_ids(_reader_ids(fam, text), vocab(fam.vocab))
    assert [json.loads(x.arguments) for x in got.calls] == [CALLER]
    assert list(json.loads(got.calls[0].arguments)) == list(CALLER)


@pytest.mark.parametrize("renderer", ["hermes", "qwen3_6", "deepseek_v4", "openai"])
def test_a_key_written_twice_ends_the_request_in_error_naming_it(renderer: str):
    fam = _fam(renderer)
    c = build_tool_constraint([HTTP], "required", format=fam.fmt)
    twice = _body(renderer, {"url": "u", "method": "GET", "retries": 1})
    # the same call with retries written again (after url: the renderers keep dict order, so splice)
    again = _body(renderer, {"url": "u", "method": "GET", "retries": 1, "retries_": 2}).replace("retries_", "retries")
    assert again.count("retries") == 2 and twice.count("retries") == 1
    status, msg = _finish_status(fam, c, again)
    assert status == "error" and "'retries'" in msg and "more than once" in msg and "http_request" in msg
    # the reader does not return it as a call either (a reader keeps it as content)
    got = get_tool_reader(fam.fmt, [HTTP], "required").read_ids(_reader_ids(fam, again), vocab(fam.vocab))
    assert not got.calls


@pytest.mark.parametrize("renderer", ["hermes", "qwen3_coder", "glm47", "deepseek_v4", "openai", "minimax_m3"])
def test_a_missing_required_key_ends_the_request_in_error_naming_it(renderer: str):
    fam = _fam(renderer)
    c = build_tool_constraint([HTTP], "required", format=fam.fmt)
    status, msg = _finish_status(fam, c, _body(renderer, {"retries": 3, "url": "u"}))
    assert status == "error" and "'method'" in msg and "required" in msg


def test_a_valid_call_in_any_order_terminates():
    fam = _fam("hermes")
    c = build_tool_constraint([HTTP], "required", format="hermes")
    assert _finish_status(fam, c, _body("hermes", {"retries": 3, "method": "POST", "url": "u"})) == ("terminated", "")


@pytest.mark.parametrize("renderer", ["hermes", "openai", "minimax_m3"])
def test_json_arguments_take_nested_objects_in_the_callers_order_too(renderer: str):
    """JSON arguments (and MiniMax M3's nested elements) are the caller's dicts at every level: a nested object
    in another order is accepted and read back as written; its required key left out, or a nested key twice,
    fails at the stop token."""
    fam = _fam(renderer)
    c = build_tool_constraint([HTTP], "required", format=fam.fmt)
    args = {"url": "u", "method": "GET", "headers": {"b": "y", "a": "x"}}
    text = _body(renderer, args)
    finish(fam, c, fam.thinking + text)
    got = get_tool_reader(fam.fmt, [HTTP], "required").read_ids(_reader_ids(fam, text), vocab(fam.vocab))
    assert [list(json.loads(x.arguments)["headers"]) for x in got.calls] == [["b", "a"]]
    status, msg = _finish_status(fam, c, _body(renderer, {"url": "u", "method": "GET", "headers": {"b": "y"}}))
    assert status == "error" and "'a' is a required property" in msg and "headers" in msg, msg
    twice = _body(renderer, {"url": "u", "method": "GET", "headers": {"a": "x", "a_": "z"}}).replace("a_", "a")
    status, msg = _finish_status(fam, c, twice)
    assert status == "error" and "'headers.a'" in msg and "more than once" in msg, msg


def test_a_json_value_nested_in_an_xml_parameter_keeps_its_exact_grammar():
    """XML parameters are relaxed at the top level only: a JSON object inside one keeps the schema's
    order, rejected at the token that breaks it."""
    fam = _fam("qwen3_6")
    c = build_tool_constraint([HTTP], "required", format="qwen3_6")
    v = vocab(fam.vocab)
    for bad in ({"url": "u", "method": "GET", "headers": {"b": "y", "a": "x"}},
                {"url": "u", "method": "GET", "headers": {"b": "y"}}):
        text = fam.thinking + _body("qwen3_6", bad)
        ids = v.encode(text)
        k = run_stream(fam, c, ids)
        assert k is not None, bad
        assert len(v.decode(ids[:k])) > text.index("<parameter=headers>"), "rejected before the nested object"


def test_a_tool_of_one_property_keeps_its_exact_grammar_and_no_check():
    one = {"type": "function", "function": {"name": "ping", "parameters": {
        "type": "object", "properties": {"host": {"type": "string"}}, "required": ["host"]}}}
    for fmt in ("hermes", "qwen3_6", "deepseek_v4", "openai"):
        c = build_tool_constraint([one], "required", format=fmt)
        assert c.schema_check is None and '"any_order"' not in c.spec
    fam = _fam("hermes")
    c = build_tool_constraint([one], "required", format="hermes")
    head = fam.thinking + '<tool_call>\n{"name": "ping", "arguments": {"host": "a"'
    from support import assert_rejected_at
    assert_rejected_at(fam, c, head, ', "host": "b"}}')
    c = build_tool_constraint([one, HTTP], "required", format="hermes")
    assert isinstance(c.schema_check, KeysCheck)


def test_schema_order_only_without_caller_order():
    """The baseline (``caller_order=False``, what ``bench tools --props`` compares against): schema order,
    no check."""
    fmt = get_tool_format("hermes")
    base = dataclasses.replace(fmt, args=dataclasses.replace(fmt.args, caller_order=False))
    from thinkgate.structured_output.tools.request import normalize_tool_request
    c = base.constraint(normalize_tool_request([HTTP], "required"))
    assert c is not None and c.schema_check is None
    fam = _fam("hermes")
    v = vocab(fam.vocab)
    assert run_stream(fam, c, v.encode(fam.thinking + _body("hermes", CALLER))) is not None
    finish(fam, c, fam.thinking + _body("hermes", {"method": "GET", "url": "u", "retries": 2}))


def test_auto_with_a_strict_tool_checks_its_calls_too():
    strict = copy.deepcopy(HTTP)
    strict["function"]["strict"] = True
    fam = _fam("qwen3_6")
    c = build_tool_constraint([strict], "auto", format="qwen3_6")
    text = "Fetching it." + _body("qwen3_6", {"url": "u", "method": "GET", "url_": "v"}).replace("url_", "url")
    status, msg = _finish_status(fam, c, text)
    assert status == "error" and "'url'" in msg
    assert _finish_status(fam, c, "No call needed.") == ("terminated", "")


def test_the_check_pickles_and_is_part_of_the_cache_key():
    c = build_tool_constraint([HTTP], "required", format="hermes")
    check = c.schema_check
    again = pickle.loads(pickle.dumps(check))
    assert isinstance(again, KeysCheck) and again.spec == check.spec
    assert "keys_check" in c.key
    c2 = pickle.loads(pickle.dumps(c))
    assert c2.key == c.key and isinstance(c2.schema_check, KeysCheck)


def test_a_spinning_request_fails_alone():
    """Hostile: a call repeating a key many times is accepted token by token (the grammar repeats) and
    fails at its stop token; a benign request beside it in the same manager terminates."""
    fam = _fam("hermes")
    c = build_tool_constraint([HTTP], "required", format="hermes")
    v = vocab(fam.vocab)
    body = '<tool_call>\n{"name": "http_request", "arguments": {"method": "GET", "url": "u"' + ', "retries": 1' * 200 \
        + "}}\n</tool_call>"
    good = _body("hermes", {"url": "u", "method": "GET"})
    mgr, bad_rid = add_ready_request(fam, c)
    _, ok_rid = add_ready_request(fam, c)
    try:
        stop = min(v.stop_token_ids)
        assert mgr.accept_tokens(bad_rid, v.encode(fam.thinking + body)).status == "ok"
        assert mgr.accept_tokens(ok_rid, v.encode(fam.thinking + good)).status == "ok"
        res = mgr.accept_tokens(bad_rid, [stop])
        assert res.status == "error" and "'retries'" in res.message
        assert mgr.accept_tokens(ok_rid, [stop]).status == "terminated"
    finally:
        mgr.remove_request(bad_rid)
        mgr.remove_request(ok_rid)


@pytest.mark.parametrize("spec", ["not json", '{"format": "nope", "checked": [], "tools": []}',
                                  '{"format": "hermes", "checked": ["a"], "tools": [[1]]}', "[]"])
def test_a_malformed_key_check_is_refused_when_the_constraint_is_made(spec: str):
    from thinkgate.structured_output import Constraint
    with pytest.raises(ValueError, match="invalid tool key check"):
        Constraint.structural_tag({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}},
                                  keys_check=spec)


@pytest.mark.parametrize("renderer", ["hermes", "qwen3_6", "deepseek_v4"])
def test_key_order_schema_is_exact_token_by_token(renderer: str):
    """``key_order="schema"``: the caller's order is masked at its first key out of order, and a call
    that leaves a required key out cannot end (rejected at the token that would end it, not at the
    stop token); the schema's order passes whole."""
    fam = _fam(renderer)
    c = build_tool_constraint([HTTP], "required", format=fam.fmt, key_order="schema")
    assert c != build_tool_constraint([HTTP], "required", format=fam.fmt)  # another grammar, another cache key
    v = vocab(fam.vocab)
    in_order = {"method": "GET", "url": "https://example.com/", "retries": 2, "headers": {"a": "x", "b": "y"}}
    finish(fam, c, fam.thinking + _body(renderer, in_order))
    for args in (CALLER, {"method": "GET"}):
        ids = v.encode(fam.thinking + _body(renderer, args))
        rejected = run_stream(fam, c, ids)  # checks each token against its row: rejected means masked out
        assert rejected is not None, f"{renderer}: {args} passed under key_order='schema'"


def test_key_order_is_checked():
    with pytest.raises(ValueError, match="key_order"):
        build_tool_constraint([HTTP], "required", format="hermes", key_order="sorted")
