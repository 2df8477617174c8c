"""The minimax_m3 tool format: MiniMax M3's calls, every tag after its namespace token ``]<]minimax[>[``.

The expected results are the facts of vLLM 0.34's own test of the parser
(``tests/tool_parsers/test_minimax_m3_tool_parser.py``: the nested ``create_order`` call, its values typed by
the schema, two invokes in one block, a cut or malformed block), written as our own cases, plus the layouts
vLLM's parser reads beside the template (whitespace between elements, ``name='N'``, ``name=N``). Where
thinkgate answers otherwise (a repeated element, a cut block) the case says so; the differences are listed in
``docs/vllm_tool_differences.md``. The shared matrices (``test_tool_conformance.py``, ``test_parser_stream.py``,
``test_tool_formats.py``) run the family too; the differential against vLLM's parser is
``tests/integration/test_vllm_tool_differential.py``.
"""

from __future__ import annotations

import functools
import json
import time
from typing import Any

import pytest
from support import FAMILIES, M3, assert_rejected_at, finish, request_for, stream_chunks, vocab
from template_render import render

from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader

FAM = FAMILIES["minimax_m3"]
V = vocab(FAM.vocab)


def _fn(name: str, props: dict[str, Any], **kw: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props,
                                                                          **kw}}}


# vLLM's test tool (sample_tools), its schema as written there
ORDER = _fn("create_order", {
    "user_id": {"type": "integer"}, "urgent": {"type": "boolean"}, "note": {"type": "string"},
    "shipping": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}},
    "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"},
                                                                          "qty": {"type": "integer"}}}},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    "duplicate_demo": {"type": "object"}})
CONFIG = _fn("set_config", {"key": {"type": "string"}, "value": {}}, required=["key", "value"])
PROFILE = _fn("update_profile", {"nickname": {"type": ["string", "null"]}, "age": {"type": "integer"},
                                 "score": {"type": "number"}, "ok": {"type": "boolean"},
                                 "filter": {"anyOf": [{"type": "object", "properties": {"id": {"type": "integer"}}},
                                                      {"type": "object", "properties": {"name": {"type": "string"}}}]}})
TOOLS = [ORDER, CONFIG, PROFILE]


def el(name: str, body: str) -> str:
    return f"{M3}<{name}>{body}{M3}</{name}>"


def invoke(name: str, body: str) -> str:
    return f'{M3}<invoke name="{name}">{body}{M3}</invoke>'


def block(*invokes: str, sep: str = "\n") -> str:
    return f"{M3}<tool_call>\n" + sep.join(invokes) + f"\n{M3}</tool_call>"


ORDER_BODY = (el("user_id", "42") + el("urgent", "true") + el("note", "Please leave at front desk.")
              + el("shipping", el("city", "Singapore") + el("zip", "018956"))
              + el("items", el("item", el("sku", "book-001") + el("qty", "2"))
                   + el("item", el("sku", "pen-007") + el("qty", "5")))
              + el("metadata", el("source", "mobile") + el("campaign", "may-launch")))
ORDER_ARGS = {"user_id": 42, "urgent": True, "note": "Please leave at front desk.",
              "shipping": {"city": "Singapore", "zip": 18956},
              "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 5}],
              "metadata": {"source": "mobile", "campaign": "may-launch"}}


def read(text: str, tools: list[dict[str, Any]] = TOOLS, choice: Any = "auto") -> tuple[str | None, list]:
    r = get_tool_reader("minimax_m3", tools, choice).read(text)
    return r.content, [(c.name, json.loads(c.arguments)) for c in r.calls]


def read_ids(text: str, tools: list[dict[str, Any]] = TOOLS) -> tuple[str | None, list]:
    r = get_tool_reader("minimax_m3", tools).read_ids(V.encode(text), V)
    return r.content, [(c.name, json.loads(c.arguments)) for c in r.calls]


# -- vLLM's test facts


def test_the_nested_order_call_is_typed_by_the_schema() -> None:
    """test_non_streaming_nested_tool_call: integers (``018956`` as 18956), a boolean, a nested object, a list
    of objects as <item> elements, an object of undeclared string members; the text before the block is
    content."""
    text = "I will create it.\n" + block(invoke("create_order", ORDER_BODY))
    assert read(text) == read_ids(text) == ("I will create it.", [("create_order", ORDER_ARGS)])


def test_a_repeated_element_is_no_call() -> None:
    """vLLM collects ``<tag>a</tag><tag>b</tag>`` into ``{"tag": ["a", "b"]}``; thinkgate keeps the key twice,
    so the request's rules refuse the call, as for every format (a documented difference)."""
    text = block(invoke("create_order", el("duplicate_demo", el("tag", "a") + el("tag", "b"))))
    assert read(text) == (text, [])


def test_invokes_of_one_block_are_calls_in_order() -> None:
    text = block(invoke("create_order", el("user_id", "1")), invoke("create_order", el("user_id", "2")))
    assert read(text) == read_ids(text) == (None, [("create_order", {"user_id": 1}), ("create_order", {"user_id": 2})])


@pytest.mark.parametrize("text", [
    "plain response",
    f"plain {M3}<tool_ca",                                                      # a cut opening
    f"plain {M3}<tool_call>\n" + invoke("create_order", el("user_id", "1"))     # cut inside the second invoke
    + f'\n{M3}<invoke name="create_order">{M3}<user_id>2',
    f"{M3}<tool_call>\n{M3}</user_id> after error",                             # a closing tag where a call goes
])
def test_plain_cut_or_malformed_text_is_content(text: str) -> None:
    """vLLM keeps the first complete invoke of a cut block and drops the namespace token of a malformed one;
    thinkgate keeps a block that does not read as content, as written (cut-output / vllm-strips-markers)."""
    assert read(text) == read_ids(text) == (text, [])


@pytest.mark.parametrize("body", [
    el("shipping", "Paris" + el("city", "Paris")),          # text beside elements
    f"{M3}<user_id>42",                                     # an unterminated element
    el("note", "a") + "stray text",                          # text where an element or the invoke's end goes
    el("user_id", "4<mm:think>2"),                          # a control token of the vocabulary inside a value
    el("items", f"{M3}<invoke>1{M3}</invoke>"),              # the call's own tag where an argument goes
    f"{M3}<user_id>42{M3}</invoke>",                         # closed by the call's end
    f"{M3}user_id>42{M3}</user_id>",                         # the namespace token outside a tag
])
def test_malformed_arguments_make_the_block_content(body: str) -> None:
    text = block(invoke("create_order", body))
    assert read_ids(text) == (text, [])


# -- looser than the template, as vLLM's parser reads it


@pytest.mark.parametrize("opening", ['name="create_order"', "name='create_order'", "name=create_order"])
def test_invoke_names_quoted_either_way_or_not_at_all(opening: str) -> None:
    text = f"{M3}<tool_call>\n{M3}<invoke {opening}>{el('user_id', '7')}{M3}</invoke>\n{M3}</tool_call>"
    assert read(text) == read_ids(text) == (None, [("create_order", {"user_id": 7})])


def test_whitespace_between_elements_and_around_the_block() -> None:
    """The layout of the parser's docstring: a newline after every tag but inside leaves (leaves keep theirs)."""
    body = ("\n" + el("user_id", "42") + "\n" + f"{M3}<shipping>\n  " + el("city", " Singapore ") + "\n"
            + f"{M3}</shipping>\n" + el("items", "\n" + el("item", "\n" + el("sku", "b") + "\n") + "\n") + "\n")
    text = f"Sure.{M3}<tool_call>" + invoke("create_order", body) + f"  {M3}</tool_call>\n"
    assert read(text) == read_ids(text) == ("Sure.", [("create_order", {
        "user_id": 42, "shipping": {"city": " Singapore "}, "items": [{"sku": "b"}]})])


@pytest.mark.parametrize(("name", "text", "value"), [
    ("items", "", []), ("shipping", "", {}), ("shipping", "\n", {}), ("note", "", ""), ("metadata", "", {}),
    ("user_id", " 42 ", 42), ("user_id", "+5", 5), ("urgent", "TRUE", True), ("note", "007", "007"),
    ("shipping", '{"city": "Oslo"}', {"city": "Oslo"}),    # an object written inline as JSON
])
def test_leaves_typed_by_the_schema(name: str, text: str, value: Any) -> None:
    assert read(block(invoke("create_order", el(name, text))))[1] == [("create_order", {name: value})]


@pytest.mark.parametrize(("body", "value"), [
    ("3", 3), ("prod", "prod"), ("-0.25", -0.25), ("true", True), ("", ""),
    (el("item", "x") + el("item", "y"), ["x", "y"]),         # a value without a schema: <item>s are a list
    (el("beta", "true") + el("n", el("item", "1")), {"beta": True, "n": [1]}),
])
def test_a_value_without_a_schema_is_typed_as_the_template_writes_it(body: str, value: Any) -> None:
    text = block(invoke("set_config", el("key", "k") + el("value", body)))
    assert read(text)[1] == [("set_config", {"key": "k", "value": value})]


@pytest.mark.parametrize(("body", "args"), [
    (el("nickname", "null") + el("age", "30"), {"nickname": None, "age": 30}),
    (el("nickname", "Zé") + el("score", "1e3") + el("ok", "false"), {"nickname": "Zé", "score": 1000.0, "ok": False}),
    (el("filter", el("id", "3")), {"filter": {"id": 3}}),
    (el("filter", el("name", "3")), {"filter": {"name": "3"}}),   # the alternative that declares the member
])
def test_nullable_numbers_and_alternatives(body: str, args: dict[str, Any]) -> None:
    assert read(block(invoke("update_profile", body))) == (None, [("update_profile", args)])


# -- the template's text: the renderer's calls read back


def test_the_templates_calls_read_back_and_nulls_are_left_out() -> None:
    calls = [("create_order", ORDER_ARGS), ("update_profile", {"nickname": None, "age": 30})]
    text = render("minimax_m3", calls, "Ok.")
    assert f"{M3}<invoke name=\"update_profile\">{M3}<age>30{M3}</age>{M3}</invoke>\n" in text  # no nickname
    assert read(text) == ("Ok.", [("create_order", ORDER_ARGS), ("update_profile", {"age": 30})])


# -- streaming


@pytest.mark.parametrize("choice", ["auto", "required"])
def test_the_stream_reads_what_the_whole_output_reads(choice: str) -> None:
    """One token per delta and three chunks, unconstrained and under the constraint (calls then stream as they
    are written: the first call's name at once, the arguments of each invoke whole at the block's end)."""
    text = FAM.thinking + "I will create it.\n" + block(invoke("create_order", ORDER_BODY),
                                                        invoke("create_order", el("user_id", "2")))
    ids = V.encode(text)
    whole = request_for("minimax_m3", "minimax_m3", tools=TOOLS, tool_choice=choice).parse(ids)
    assert [(c.name, json.loads(c.arguments)) for c in whole.tool_calls] == [
        ("create_order", ORDER_ARGS), ("create_order", {"user_id": 2})]
    assert whole.reasoning == "I should call a tool." and whole.content == "I will create it."
    for cuts in (range(len(ids)), (5, 17, 120)):
        deltas, end = stream_chunks(request_for("minimax_m3", "minimax_m3", tools=TOOLS, tool_choice=choice), ids,
                                    cuts, False)
        calls: dict[int, list[str]] = {}
        for d in deltas:
            for tc in (d or {}).get("tool_calls", ()):
                c = calls.setdefault(tc["index"], ["", ""])
                c[0] += tc["function"].get("name") or ""
                c[1] += tc["function"].get("arguments") or ""
        assert [(n, a) for n, a in calls.values()] == [(c.name, c.arguments) for c in whole.tool_calls]
        assert "".join((d or {}).get("content", "") for d in deltas) == "I will create it."
        assert end.finish_reason == "tool_calls"


# -- the constraint (the template's text token by token; an exact grammar)


@functools.cache
def required() -> Any:
    """The ``required`` constraint of ORDER and CONFIG (compiled once: the manager's cache keeps it)."""
    return build_tool_constraint([ORDER, CONFIG], "required", format="minimax_m3")


def test_required_takes_the_templates_calls_and_nothing_between_elements() -> None:
    c = required()
    calls = [("create_order", ORDER_ARGS), ("set_config", {"key": "flags", "value": {"beta": True, "n": [1, 2]}})]
    finish(FAM, c, FAM.thinking + render("minimax_m3", calls))
    head = FAM.thinking + f'{M3}<tool_call>\n{M3}<invoke name="create_order">' + el("user_id", "1")
    assert_rejected_at(FAM, c, head, "\n" + el("note", "x"))                  # no whitespace between elements
    assert_rejected_at(FAM, c, head + f"{M3}<urgent>", "x")                    # "x" is no boolean
    assert_rejected_at(FAM, c, head + f"{M3}<note>x{M3}</note", "s>")          # a declared name closes as written


def test_undeclared_members_close_with_any_name_and_read_back_as_the_grammar_took_them() -> None:
    """A grammar cannot tie an undeclared element's closing name to its opening one: the reader takes the
    closing tag as closing the element, whatever name it spells, so what the grammar admits reads back."""
    c = required()
    body = el("metadata", f"{M3}<source>mobile{M3}</sorce>")
    text = block(invoke("create_order", body))
    finish(FAM, c, FAM.thinking + text)
    assert read_ids(text) == (None, [("create_order", {"metadata": {"source": "mobile"}})])
    head = FAM.thinking + f'{M3}<tool_call>\n{M3}<invoke name="create_order">{M3}<metadata>{M3}<invoke'
    assert_rejected_at(FAM, c, head, ">")                                        # a structural name: never


def test_schema_key_order_enforces_the_required_members_token_by_token() -> None:
    tool = _fn("f", {"a": {"type": "string"}, "b": {"type": "integer"}}, required=["a", "b"])
    c = build_tool_constraint([tool], "required", format="minimax_m3", key_order="schema")
    finish(FAM, c, FAM.thinking + render("minimax_m3", [("f", {"a": "x", "b": 1})]))
    head = FAM.thinking + f'{M3}<tool_call>\n{M3}<invoke name="f">' + el("a", "x") + f"{M3}<"
    assert_rejected_at(FAM, c, head, "/invoke>")                                 # "b" is required


@pytest.mark.parametrize(("props", "bad"), [
    ({"invoke": {"type": "string"}}, "invoke"), ({"tool_call": {"type": "string"}}, "tool_call"),
    ({"a>b": {"type": "string"}}, "a>b"), ({"/x": {"type": "string"}}, "/x"), ({" ": {"type": "string"}}, " "),
    ({"o": {"type": "object", "properties": {"invoke": {"type": "integer"}}}}, "invoke"),
    ({"o": {"type": "array", "items": {"type": "object", "properties": {"mm:think": {}}}}}, "mm:think"),
])
def test_a_name_the_syntax_cannot_write_is_a_clear_error(props: dict[str, Any], bad: str) -> None:
    with pytest.raises(ValueError, match=f"'f'.*{bad!r}".replace("(", r"\(")):
        build_tool_constraint([_fn("f", props)], "required", format="minimax_m3")


# -- hostile input


@pytest.mark.parametrize("closed", [False, True])
def test_elements_nested_5000_deep_are_content_not_a_crash(closed: bool) -> None:
    depth = 5000
    body = f"{M3}<a>" * depth + ("x" + f"{M3}</a>" * depth if closed else "")
    text = block(invoke("set_config", el("value", body)))
    t0 = time.perf_counter()
    assert read_ids(text) == (text, [])
    assert time.perf_counter() - t0 < 5


def test_a_run_of_openings_costs_what_it_reads() -> None:
    text = (f"{M3}<tool_call>\n" + f'{M3}<invoke name="create_order">') * 3000
    t0 = time.perf_counter()
    assert read_ids(text) == (text, [])
    assert time.perf_counter() - t0 < 5


def test_the_namespace_token_spelled_with_ordinary_tokens_is_text() -> None:
    """From token ids the namespace marker counts only where the model wrote its token: spelled out in a value
    it is the value's text, and a whole block spelled out is content."""
    spelled = [t for ch in M3 for t in V.encode(ch)]
    assert not set(spelled) & V.special_token_ids
    head = V.encode(f'{M3}<tool_call>\n{M3}<invoke name="create_order">{M3}<note>a')
    tail = V.encode(f"</b>{M3}</note>{M3}</invoke>\n{M3}</tool_call>")
    r = get_tool_reader("minimax_m3", TOOLS).read_ids(head + spelled + tail, V)
    assert [(c.name, json.loads(c.arguments)) for c in r.calls] == [("create_order", {"note": f"a{M3}</b>"})]
    text = block(invoke("create_order", el("user_id", "1")))
    ids = [t for ch in text for t in V.encode(ch)]
    r = get_tool_reader("minimax_m3", TOOLS).read_ids(ids, V)
    assert r.calls == () and r.content == text


def test_the_stream_over_a_run_of_openings_is_linear_and_content() -> None:
    """Every tag starts with the trigger (the namespace token): a run of blocks that never end, one token per
    delta, stays content and costs what it reads."""
    text = (f"{M3}<tool_call>\n" + f'{M3}<invoke name="create_order">{M3}<note>x') * 1000
    ids = V.encode(text)
    t0 = time.perf_counter()
    deltas, end = stream_chunks(request_for("minimax_m3", None, tools=TOOLS), ids, range(len(ids)), False)
    assert "".join((d or {}).get("content", "") for d in deltas) == text and end.finish_reason == "stop"
    assert time.perf_counter() - t0 < 5
