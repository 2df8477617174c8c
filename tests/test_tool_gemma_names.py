"""Gemma 4: declared parameter names outside ``[A-Za-z_][A-Za-z0-9_]*``, written as the template writes them.

Gemma 4's chat template (https://huggingface.co/google/gemma-4-E2B-it/blob/main/chat_template.jinja)
writes a call's arguments as ``key:`` + ``format_argument(value, escape_keys=False)`` at every level: the
key as it is, unquoted, with no escape. So ``Content-Type:<|"|>application/json<|"|>``, ``user.email:``,
``año_vehiculo:2019``, ``2fa_code:``, ``display name:`` are what a model writes for those declared names.
The constraint writes each declared name literally; the reader takes the longest declared name at a
key's position. A name the syntax cannot hold is refused with a ``ValueError`` naming the tool, the
name and the reason (``gemma_name_problem``).

Vocabulary: Gemma 4's synthetic one (``thinkgate/testing/vocabularies.py``: the Qwen3.6 table plus Gemma's markers).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import FAMILIES, assert_rejected_at, finish, vocab

from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader
from thinkgate.structured_output.tools.args import gemma_name_problem
from thinkgate.structured_output.tools.order import dictsort_keys

GEMMA = FAMILIES["gemma4"]
Q = '<|"|>'

NAMES = {"type": "function", "function": {
    "name": "send", "parameters": {
        "type": "object",
        "properties": {
            "Content-Type": {"type": "string", "enum": ["application/json", "text/plain"]},
            "user.email": {"type": "string"},
            "año_vehiculo": {"type": "integer"},
            "2fa_code": {"type": "string"},
            "display name": {"type": "string"},
            "headers": {"type": "object", "properties": {"X-Request-ID": {"type": "string"},
                                                         "time:zone": {"type": "string"},
                                                         "}": {"type": "boolean"}},
                        "required": ["X-Request-ID"]},
        },
        "required": ["Content-Type", "user.email"],
    }}}

ARGS: dict[str, Any] = {"Content-Type": "application/json", "user.email": "ana@example.com", "año_vehiculo": 2019,
                        "2fa_code": "012345", "display name": "Ana S.",
                        "headers": {"X-Request-ID": "7f3c", "time:zone": "UTC", "}": True}}


def gemma_value(v: Any) -> str:
    """``format_argument(v, escape_keys=False)`` of the template, keys through ``dictsort``."""
    if isinstance(v, str):
        return Q + v + Q
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{gemma_value(v[k])}" for k in dictsort_keys(v)) + "}"
    return json.dumps(v)


def gemma_call(name: str, args: dict[str, Any]) -> str:
    return "<|tool_call>call:" + name + gemma_value(args) + "<tool_call|>"


def _read(tools, choice, text: str) -> list[tuple[str, Any]]:
    v = vocab(GEMMA.vocab)
    reader = get_tool_reader("gemma4", tools, choice)
    out = []
    for got in (reader.read(text), reader.read_ids(v.encode(text), v)):
        assert got.content is None
        out.append([(c.name, json.loads(c.arguments)) for c in got.calls])
    assert out[0] == out[1]
    return out[0]


def test_the_rendering_writes_names_raw():
    text = gemma_call("send", ARGS)
    assert f"Content-Type:{Q}application/json{Q}" in text and "año_vehiculo:2019" in text
    assert f"display name:{Q}Ana S.{Q}" in text and "time:zone:" in text and "}:true" in text


@pytest.mark.parametrize("mode", ["required", "named"])
def test_names_outside_identifiers_are_accepted_and_read_back(mode: str):
    choice: Any = "required" if mode == "required" else {"type": "function", "function": {"name": "send"}}
    c = build_tool_constraint([NAMES], choice, format="gemma4")
    text = gemma_call("send", ARGS)
    finish(GEMMA, c, GEMMA.thinking + text)
    [(name, got)] = _read([NAMES], choice, text)
    assert name == "send" and got == ARGS
    assert list(got) == dictsort_keys(ARGS)  # as written


def test_names_in_the_schema_order_too():
    c = build_tool_constraint([NAMES], "required", format="gemma4")
    h = ARGS["headers"]
    text = (f"<|tool_call>call:send{{Content-Type:{Q}application/json{Q},user.email:{Q}ana@example.com{Q},"
            f"año_vehiculo:2019,2fa_code:{Q}012345{Q},display name:{Q}Ana S.{Q},"
            f"headers:{{X-Request-ID:{Q}{h['X-Request-ID']}{Q},time:zone:{Q}UTC{Q},}}:true}}}}<tool_call|>")
    finish(GEMMA, c, GEMMA.thinking + text)
    assert _read([NAMES], "required", text) == [("send", ARGS)]


def test_a_name_spelled_otherwise_is_rejected_at_its_first_wrong_token():
    c = build_tool_constraint([NAMES], "required", format="gemma4")
    good = GEMMA.thinking + "<|tool_call>call:send{Content"
    assert_rejected_at(GEMMA, c, good, "_Type:")


def test_the_longest_declared_name_is_read_when_one_holds_another():
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}, "a:b": {"type": "integer"}, "a.b": {"type": "integer"}}}}}
    c = build_tool_constraint([tool], "required", format="gemma4")
    text = "<|tool_call>call:f{a:1,a.b:3,a:b:2}<tool_call|>"
    finish(GEMMA, c, GEMMA.thinking + text)
    assert _read([tool], "required", text) == [("f", {"a": 1, "a.b": 3, "a:b": 2})]


def test_an_undeclared_key_of_an_untyped_value_still_reads():
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "user.meta": {}}}}}
    text = f"<|tool_call>call:f{{user.meta:{{k:1,v:{Q}x{Q}}}}}<tool_call|>"
    finish(GEMMA, build_tool_constraint([tool], "required", format="gemma4"), GEMMA.thinking + text)
    assert _read([tool], "required", text) == [("f", {"user.meta": {"k": 1, "v": "x"}})]


@pytest.mark.parametrize("name,why", [
    ('x<|"|>y', "control token"),
    ("a<tool_call|>", "control token"),
    ("a:1,b", "':' followed by ',' or '{'"),
    ("k:{j", "':' followed by ',' or '{'"),
])
def test_a_name_the_syntax_cannot_hold_is_refused_naming_it_and_why(name: str, why: str):
    tool = {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {
        "ok": {"type": "string"}, "nested": {"type": "object", "properties": {name: {"type": "string"}}}}}}}
    with pytest.raises(ValueError) as e:
        build_tool_constraint([tool], "required", format="gemma4")
    msg = str(e.value)
    assert "'g'" in msg and repr(name) in msg and why in msg
    # a const object's keys too
    tool = {"type": "function", "function": {"name": "g", "parameters": {"type": "object", "properties": {
        "p": {"const": {name: 1}}}}}}
    with pytest.raises(ValueError, match="cannot be written in the gemma format"):
        build_tool_constraint([tool], "required", format="gemma4")


@pytest.mark.parametrize("name", ["Content-Type", "user.email", "año", "2fa", "display name", "a:b", "}", "",
                                  "a,b", "{x}", "a:b}"])
def test_names_the_syntax_holds(name: str):
    assert gemma_name_problem(name, ('<|"|>', "<tool_call|>")) is None


def test_a_refused_tool_leaves_other_requests_alone():
    bad = {"type": "function", "function": {"name": "bad", "parameters": {"type": "object", "properties": {
        "a:1,b": {"type": "string"}}}}}
    with pytest.raises(ValueError):
        build_tool_constraint([NAMES, bad], "required", format="gemma4")
    c = build_tool_constraint([NAMES], "required", format="gemma4")
    finish(GEMMA, c, GEMMA.thinking + gemma_call("send", ARGS))


def test_an_unenforced_tool_takes_its_declared_names_too():
    """``strict: false`` under ``required``: the arguments are any object, whose keys may also be the
    declared names (as XML formats do); the auto reader reads them without a constraint."""
    loose = json.loads(json.dumps(NAMES))
    loose["function"]["strict"] = False
    c = build_tool_constraint([loose], "required", format="gemma4")
    text = gemma_call("send", ARGS)
    finish(GEMMA, c, GEMMA.thinking + text)
    assert _read([loose], "required", text) == [("send", ARGS)]
    assert _read([NAMES], "auto", text) == [("send", ARGS)]
