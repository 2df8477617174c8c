"""Kimi K3's XTML tool format (``kimi_k3``): its constraint, its whole and streaming readers, hostile outputs.

The facts, from vLLM 0.34 (``tool_parsers/kimi_k3_tool_parser.py``, ``structural_tag_registry``'s
``get_kimi_k3_structural_tag``, ``reasoning/kimi_k3_reasoning_parser.py``; its tests
``tests/tool_parsers/test_kimi_k3_tool_parser.py`` and ``test_kimi_k3_named_tool_choice.py``) and K3's own
encoder (``encoding_k3.py``): after the thinking the model writes ``<|open|>response<|sep|>`` (left out when
the generation prefix holds it), its answer, ``<|close|>response<|sep|>``, then, with calls, a ``tools``
channel of ``<|open|>call tool="NAME" index="1"<|sep|>`` elements whose ``argument`` elements say the
value's type (``string``: raw text, never unescaped; any other: JSON), and ``<|close|>message<|sep|>`` before
its stop token. Attribute values escape ``&`` and ``"``. The response channel is the content; the message's
close never reaches it (whole or streamed, however the deltas cut it).

Vocabulary: ``thinkgate.testing.vocabularies``' synthetic ``kimi_k3`` (the Qwen3.6 table plus ``<|open|>``, ``<|close|>``,
``<|sep|>`` and the stop token ``<|end_of_msg|>`` as control tokens).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import FAMILIES, assert_rejected_at, finish, stream_chunks, vocab

from thinkgate.reasoning.vocabulary import load_vocabulary
from thinkgate.structured_output import Parser
from thinkgate.structured_output.tools import (MarkedDecoder, MarkedText, build_tool_constraint, get_tool_format,
                                               get_tool_reader)
from thinkgate.structured_output.tools.xtml_args import split_by_type

O, C, S = "<|open|>", "<|close|>", "<|sep|>"
RESP_OPEN, RESP_CLOSE, MSG_CLOSE = f"{O}response{S}", f"{C}response{S}", f"{C}message{S}"
TOOLS_OPEN, TOOLS_CLOSE = f"{O}tools{S}", f"{C}tools{S}"
FAM = FAMILIES["kimi_k3"]
V = vocab(FAM.vocab)


def _fn(name: str, props: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, "required": list(required)}}}


TOOLS = [
    _fn("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}}, ("city",)),
    _fn("search", {"q": {"type": "string"}, "filters": {"type": "object"}, "tags": {"type": "array"},
                   "exact": {"type": "boolean"}, "limit": {"type": ["integer", "null"]}}),
    _fn("ping", {}),
]


def arg(key: str, kind: str, value: str) -> str:
    return f'{O}argument key="{key}" type="{kind}"{S}{value}{C}argument{S}'


def call(name: str, *args: str, index: int = 1) -> str:
    return f'{O}call tool="{name}" index="{index}"{S}' + "".join(args) + f"{C}call{S}"


def turn(*calls: str, content: str = "", opening: bool = True) -> str:
    """An assistant turn after the thinking, as K3's encoder writes it (``opening``: the response channel's
    opening is in the output, i.e. thinking on)."""
    tools = TOOLS_OPEN + "".join(calls) + TOOLS_CLOSE if calls else ""
    return (RESP_OPEN if opening else "") + content + RESP_CLOSE + tools + MSG_CLOSE


def read(text: str, tools=TOOLS, choice: Any = "auto", **kw: Any):
    """The whole reader on the text's ids (markers only at control tokens)."""
    return get_tool_reader("kimi_k3", tools, choice, **kw).read_ids(V.encode(text), V)


def calls_of(result) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in result.calls]


def streamed(ids: list[int], cuts: list[int], tools=TOOLS, choice: Any = "auto", **kw: Any):
    """The streaming reader fed ``ids`` cut at ``cuts``: (content, calls)."""
    stream = get_tool_reader("kimi_k3", tools, choice, **kw).stream(V)
    dec = MarkedDecoder(V)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ids)}), len(ids)]
    content, calls = "", []
    for a, b in zip(bounds, bounds[1:]):
        d = stream.feed(dec.feed(ids[a:b], final=b == len(ids)))
        content, calls = content + d.content, calls + list(d.calls)
    d = stream.finish()
    return content + d.content, calls + list(d.calls)


def assert_stream_is_whole(text: str, ids: list[int] | None = None, **kw: Any) -> None:
    ids = V.encode(text) if ids is None else ids
    whole = get_tool_reader("kimi_k3", TOOLS, **kw).read_ids(ids, V)
    rng = random.Random(len(ids))
    for cuts in ([], list(range(len(ids))), *(rng.sample(range(len(ids) + 1), min(len(ids), 6)) for _ in range(4))):
        content, calls = streamed(ids, cuts, **kw)
        assert content == (whole.content or ""), cuts
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole.calls], cuts


# -- the readers: what vLLM's facts say ------------------------------------------------------------------

def test_every_value_type_reads_as_the_encoder_wrote_it() -> None:
    """``type="string"``: the raw text, entities and all (never unescaped); the other types: JSON, compact
    or spaced. Attribute values are unescaped (``&quot;`` then ``&amp;``)."""
    raw = 'He said "hi" & <b>bye</b> &amp; \n  two lines  '
    text = turn(call("search", arg("q", "string", raw), arg("filters", "object", '{"a":[1,{"b":null}]}'),
                     arg("tags", "array", '["x", 2]'), arg("exact", "boolean", "true"), arg("limit", "null", "null")),
                call("get_weather", arg("city", "string", ""), arg("days", "number", "3"), index=2))
    got = read(text)
    assert got.content is None
    assert calls_of(got) == [("search", {"q": raw, "filters": {"a": [1, {"b": None}]}, "tags": ["x", 2],
                                         "exact": True, "limit": None}),
                             ("get_weather", {"city": "", "days": 3})]
    assert got.calls[0].id != got.calls[1].id and got.calls[0].id.startswith("chatcmpl-tool-")  # K3 writes no id
    odd = _fn("f", {'a"b&c': {"type": "number"}})
    assert calls_of(read(turn(call("f", arg("a&quot;b&amp;c", "number", "2.5"))), [odd])) == [("f", {'a"b&c': 2.5})]


def test_the_response_channel_is_the_content() -> None:
    calls = (call("ping"),)
    for text in (turn(*calls, content="Let me check."), turn(*calls, content="Let me check.", opening=False)):
        got = read(text)
        assert got.content == "Let me check." and calls_of(got) == [("ping", {})]
    assert read(turn(*calls)).content is None
    # vLLM's test: a turn ending in the message's close, with no response close, is its text
    assert read(f"Hello{MSG_CLOSE}").content == "Hello"
    assert read(turn(content="Just an answer.")).content == "Just an answer."


def test_the_message_close_never_leaks_into_the_stream() -> None:
    """vLLM's test_streaming_content_holds_split_message_close, on ids: every chunking gives "Hello"."""
    ids = V.encode(f"Hello{MSG_CLOSE}")
    for step in (1, 2, 3, 7):
        content, calls = streamed(ids, list(range(0, len(ids), step)))
        assert (content, calls) == ("Hello", [])


def test_openings_read_as_models_write_them() -> None:
    """Attributes in any order and spacing, ``index`` left out, ``type`` left out (a string), as vLLM reads
    them; the grammar writes the encoder's order only."""
    text = turn(f'{O}call index="1"  tool="get_weather" {S}{O}argument  type="number" key="days"{S}2{C}argument{S}'
                f'{O}argument key="city"{S}Oslo{C}argument{S}{C}call{S}',
                f'{O}call tool="ping"{S}{C}call{S}')
    assert calls_of(read(text)) == [("get_weather", {"days": 2, "city": "Oslo"}), ("ping", {})]
    assert_stream_is_whole(text)


@pytest.mark.parametrize("bad", [
    f'{O}call index="1"{S}{C}call{S}',                            # no tool
    f'{O}call tool="ping" tool="ping"{S}{C}call{S}',              # an attribute twice
    f'{O}calltool="ping"{S}{C}call{S}',                           # no space after the tag's word
    f'{O}call tool="nope" index="1"{S}{C}call{S}',                # an undeclared tool
    call("get_weather", arg("days", "number", "three")),          # not JSON, and no string admitted
])
def test_a_call_that_does_not_read_is_content(bad: str) -> None:
    text = turn(bad, content="Hi")
    got = read(text)
    assert got.calls == () and got.content == "Hi" + TOOLS_OPEN + bad + TOOLS_CLOSE
    assert_stream_is_whole(text)


# -- hostile outputs ---------------------------------------------------------------------------------------

def spelled(text: str) -> list[int]:
    """``text`` with every control token's text written with ordinary tokens."""
    ids: list[int] = []
    cut = text.replace(O, "\0<|op\0en|>\0").replace(C, "\0<|clo\0se|>\0").replace(S, "\0<|se\0p|>\0")
    for piece in cut.split("\0"):
        ids += V.encode(piece) if piece else []
    assert V.decode(ids) == text and not set(ids) & V.special_token_ids
    return ids


def test_marker_text_spelled_with_ordinary_tokens_is_text() -> None:
    """No control token, no call and no channel: the whole text is the content (``read(text)``, which trusts
    the text, reads the call)."""
    text = turn(call("ping"), content="Hi")
    got = get_tool_reader("kimi_k3", TOOLS).read_ids(spelled(text), V)
    assert got.calls == () and got.content == text
    assert calls_of(get_tool_reader("kimi_k3", TOOLS).read(text)) == [("ping", {})]
    # the tools channel's opening real, the call's markers spelled: the block does not read
    half = V.encode(RESP_CLOSE + TOOLS_OPEN) + spelled(call("ping")) + V.encode(TOOLS_CLOSE)
    got = get_tool_reader("kimi_k3", TOOLS).read_ids(half, V)
    assert got.calls == () and got.content == TOOLS_OPEN + call("ping") + TOOLS_CLOSE
    assert_stream_is_whole("", half)
    assert_stream_is_whole("", spelled(text))


def test_an_unterminated_call_is_content() -> None:
    """Cut inside a call (no ``<|close|>call<|sep|>``), or without the channel's close: the call's text is
    content, whole and streamed (vLLM drops it); the wrappers after an unclosed channel stay with it."""
    open_call = f'{O}call tool="get_weather" index="1"{S}' + arg("city", "string", "Paris")
    for tail in (open_call, open_call + f"{C}call{S}", open_call + f"{C}call{S}{MSG_CLOSE}"):
        text = RESP_OPEN + "Hi" + RESP_CLOSE + TOOLS_OPEN + tail
        got = read(text)
        assert got.calls == () and got.content == "Hi" + TOOLS_OPEN + tail
        assert_stream_is_whole(text)


def test_a_wrapper_inside_the_tools_channel_is_not_cut() -> None:
    """A control-token wrapper written inside a value is not cut out to make the call read: the call holds
    a control token, so it is content (the grammar never writes one there)."""
    text = turn(call("get_weather", arg("city", "string", f"Pa{MSG_CLOSE}ris")), content="Hi")
    got = read(text)
    assert got.calls == () and MSG_CLOSE in (got.content or "")
    assert_stream_is_whole(text)


PIECES = st.sampled_from([
    "Hi ", "ok", "\n", RESP_OPEN, RESP_CLOSE, MSG_CLOSE, TOOLS_OPEN, TOOLS_CLOSE, O, C, S, "response", "tools",
    call("ping"), call("get_weather", arg("city", "string", "Zürich 北京")), f'{O}call tool="ping"',
    arg("days", "number", "4"), f"{C}call{S}", f"{C}think{S}",
])


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(parts=st.lists(PIECES, max_size=10), data=st.data())
def test_stream_equals_whole_for_any_output_and_chunking(parts: list[str], data: st.DataObject) -> None:
    ids = V.encode("".join(parts))
    whole = get_tool_reader("kimi_k3", TOOLS).read_ids(ids, V)
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=12))
    content, calls = streamed(ids, cuts)
    assert content == (whole.content or "")
    assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole.calls]


# -- the constraint -----------------------------------------------------------------------------------------

THINK = FAM.thinking


@functools.lru_cache(maxsize=None)
def constraint(choice: str, parallel: bool = True, names: tuple[str, ...] = ("get_weather", "search", "ping")):
    """The constraint of ``choice`` over the tools ``names`` (``auto``: each one ``strict``); a named choice
    names ``get_weather``. Compiled once per test module (the manager caches it)."""
    tc: Any = {"type": "function", "function": {"name": "get_weather"}} if choice == "named" else choice
    tools = [t for t in TOOLS if t["function"]["name"] in names]
    if choice == "auto":
        tools = [dict(t, function=dict(t["function"], strict=True)) for t in tools]
    return build_tool_constraint(tools, tc, format="kimi_k3", parallel_tool_calls=parallel)


def test_required_writes_the_turn_as_the_encoder_does() -> None:
    c = constraint("required")
    two = turn(call("search", arg("q", "string", "a <b> & c"), arg("limit", "null", "null"),
                    arg("filters", "object", '{"k": [1, "x"]}')), call("ping", index=2))
    finish(FAM, c, THINK + two)
    finish(FAM, c, THINK + two[:-len(MSG_CLOSE)])  # the message's close is optional
    finish(FAM, c, THINK + turn(call("ping"), opening=False))  # the prefix held the response's opening
    # the response's opening written straight from the thinking ends it (the reasoning parser drops it): the
    # grammar starts after it
    finish(FAM, c, "Plan." + turn(call("ping")))
    # the type attribute follows the schema: an integer is not written as a string
    head = THINK + RESP_OPEN + RESP_CLOSE + TOOLS_OPEN + f'{O}call tool="get_weather" index="1"{S}'
    assert_rejected_at(FAM, c, head + f'{O}argument key="days" type="', "string")
    # no call is no answer: the response closed, the tools channel must come
    assert_rejected_at(FAM, c, THINK + RESP_OPEN + RESP_CLOSE, MSG_CLOSE)


def test_named_and_parallel_off_write_one_call() -> None:
    c = constraint("named")
    one = turn(call("get_weather", arg("city", "string", "Oslo")))
    finish(FAM, c, THINK + one)
    head = THINK + RESP_OPEN + RESP_CLOSE + TOOLS_OPEN + f'{O}call tool="'
    assert_rejected_at(FAM, c, head, "ping")
    got = get_tool_reader("kimi_k3", TOOLS, {"type": "function", "function": {"name": "get_weather"}}).read_ids(
        V.encode(one), V)
    assert calls_of(got) == [("get_weather", {"city": "Oslo"})]
    c1 = constraint("required", parallel=False, names=("get_weather", "ping"))
    first = RESP_OPEN + RESP_CLOSE + TOOLS_OPEN + call("ping")
    assert_rejected_at(FAM, c1, THINK + first, call("ping", index=2))
    finish(FAM, c1, THINK + first + TOOLS_CLOSE)


def test_auto_with_strict_tools_and_thinking_off() -> None:
    c = constraint("auto", names=("get_weather", "ping"))
    finish(FAM, c, THINK + turn(call("get_weather", arg("city", "string", "Oslo")), content="Sure."))
    finish(FAM, c, THINK + turn(content="No call needed."))
    finish(FAM, c, THINK + "Text, then the stop token.")
    # a strict tool's argument of the wrong type is masked
    head = THINK + turn(call("get_weather", arg("city", "string", "x"))).split(f'{O}argument')[0]
    assert_rejected_at(FAM, c, head + f'{O}argument key="days" type="number"{S}', "\"3\"")
    # control tokens other than the syntax's never in free text
    assert_rejected_at(FAM, c, THINK + "Sure.", f"{O}think{S}")
    # thinking off: the prompt ends with the response channel's opening, the output is its body
    off = dataclasses.replace(FAM, prompt=FAM.prompt[:-len(f"{O}think{S}")] + RESP_OPEN, kwargs={"thinking": False})
    finish(off, c, turn(call("ping"), content="Calling.", opening=False))


def test_requests_the_format_cannot_write_are_clear_errors() -> None:
    bad = [_fn("f", {f"a{S}b": {"type": "string"}})]
    with pytest.raises(ValueError, match=r"parameter name 'a<\|sep\|>b' cannot be written in XTML"):
        build_tool_constraint(bad, "required", format="kimi_k3")
    with pytest.raises(ValueError, match=r"has no control token '<\|open\|>'"):
        build_tool_constraint(TOOLS, "required", format="kimi_k3", vocabulary=load_vocabulary("qwen3_6"))
    with pytest.raises(ValueError, match=r"no single token for the marker '<\|open\|>'"):
        Parser(load_vocabulary("qwen3_6"), None, "kimi_k3")


# -- the pieces --------------------------------------------------------------------------------------------

def test_split_by_type_names_each_json_type_of_a_schema() -> None:
    assert split_by_type({"type": ["integer", "null"]}, {}) == [("number", {"type": "integer"}),
                                                                ("null", {"type": "null"})]
    assert [t for t, _ in split_by_type({}, {})] == ["number", "boolean", "null", "object", "array"]
    assert split_by_type({"enum": [1, True, "x"]}, {}) == [("number", {"enum": [1]}), ("boolean", {"enum": [True]})]
    assert split_by_type({"anyOf": [{"$ref": "#/$defs/n"}, {"type": "array"}]}, {"$defs": {"n": {"type": "number"}}}) \
        == [("number", {"type": "number"}), ("array", {"type": "array"})]
    assert split_by_type({"properties": {"a": {}}}, {}) == [("object", {"properties": {"a": {}}})]


def test_marked_text_without_moves_the_control_tokens() -> None:
    src = MarkedText.from_ids(V.encode(f"ab{RESP_CLOSE}cd{O}x"), V)
    cut = src.without([(2, 2 + len(RESP_CLOSE))])
    assert cut.text == f"abcd{O}x" and cut.marker_at(4, O) and not cut.marker_at(0, O)
    assert MarkedText.trusted(f"a{S}b").without([(1, 1 + len(S))]).text == "ab"


def test_the_format_keeps_its_markers_and_describes_the_channels() -> None:
    fmt = get_tool_format("kimi_k3")
    assert fmt.required_markers == (O, C, S)
    assert fmt.channels.drop == (RESP_OPEN, RESP_CLOSE, MSG_CLOSE)


# -- with the reasoning parser -------------------------------------------------------------------------------

def test_reasoning_then_channels_whole_and_streamed() -> None:
    """Thinking closed, thinking ended by the response channel's opening itself (vLLM reads that as no
    think channel: the marker is dropped), and thinking off: the same content and call."""
    p = Parser(V, "kimi_k3", "kimi_k3")
    body = turn(call("get_weather", arg("city", "string", "Zürich")), content="Checking.")
    prompt_on = V.encode(FAM.prompt)
    prompt_off = V.encode(FAM.prompt[:-len(f"{O}think{S}")] + RESP_OPEN)
    for prompt, kw, text, reasoning in (
            (prompt_on, None, "Plan." + C + "think" + S + body, "Plan."),
            (prompt_on, None, "Plan." + body, "Plan."),
            (prompt_off, {"thinking": False}, body[len(RESP_OPEN):], None)):
        ids = V.encode(text)
        whole = p.request(tools=TOOLS, prompt_token_ids=prompt, chat_template_kwargs=kw).parse(ids)
        assert (whole.reasoning, whole.content) == (reasoning, "Checking.")
        assert [(c.name, json.loads(c.arguments)) for c in whole.tool_calls] == [("get_weather", {"city": "Zürich"})]
        req = p.request(tools=TOOLS, prompt_token_ids=prompt, chat_template_kwargs=kw)
        deltas, end = stream_chunks(req, ids, range(0, len(ids), 2), False)
        assert "".join(d.get("content", "") for d in deltas if d) == whole.content
        assert [c["function"]["name"] for d in deltas if d for c in d.get("tool_calls", [])] == ["get_weather"]
