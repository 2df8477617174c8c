"""The pythonic group: pythonic, llama4_pythonic, olmo3, lfm2 (Python call syntax), functiongemma, gigachat3,
apertus, and llama4_json (an alias of llama3_json).

Expected results come from vLLM's own tests for these parsers (tests/tool_parsers/test_<name>_tool_parser.py
in vllm-project/vllm, read for their inputs and outputs; the cases below are written anew) and from the
chat templates (``template_render.py``); the integration differential runs vLLM 0.34's parsers themselves
(tests/integration/test_vllm_diff_pythonic.py).
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from support import FAMILIES, assert_rejected_at, finish, vocab
from template_render import render

from thinkgate.testing.vocabularies import synthetic_vocabulary
from thinkgate.structured_output.tools import (MarkedDecoder, build_tool_constraint, get_tool_format, get_tool_reader,
                                               list_tool_formats)

GROUP = ("pythonic", "llama4_pythonic", "olmo3", "lfm2", "functiongemma", "gigachat3", "apertus")


def fn(name: str, props: dict[str, Any] | None = None, required: tuple[str, ...] = ()) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": props or {}}
    if required:
        params["required"] = list(required)
    return {"type": "function", "function": {"name": name, "parameters": params}}


WEATHER = fn("get_weather", {"city": {"type": "string"},
                             "metric": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, ("city",))
REGISTER = fn("register_user", {"name": {"type": "string"}, "age": {"type": "integer"},
                                "address": {"type": "object", "properties": {"city": {"type": "string"},
                                                                            "state": {"type": "string"}}},
                                "role": {"type": ["string", "null"]}, "passed_test": {"type": "boolean"},
                                "aliases": {"type": "array", "items": {"type": "string"}}}, ("name",))
NOARGS = fn("get_time")
TOOLS = [WEATHER, REGISTER, NOARGS]


def calls_of(fmt: str, text: str, tools=TOOLS, choice: Any = "auto",
             **kw: Any) -> tuple[str | None, list[tuple[str, Any]]]:
    got = get_tool_reader(fmt, tools, choice, **kw).read(text)
    return got.content, [(c.name, json.loads(c.arguments)) for c in got.calls]


# --------------------------------------------------------------------------------------------------
# registration


def test_every_name_of_the_group_is_a_format_and_a_vllm_plugin_name() -> None:
    names = set(list_tool_formats(aliases=True))
    assert set(GROUP) | {"llama4_json"} <= names
    assert get_tool_format("llama4_json") is get_tool_format("llama3_json")
    pytest.importorskip("vllm", reason="the vLLM plugin registers in the vLLM environment (integration tests)")
    from thinkgate.engines.vllm.tool_parsers import register_vllm_tool_parsers
    registered = register_vllm_tool_parsers([*GROUP, "llama4_json"])
    assert set(registered) == {f"thinkgate_{n}" for n in [*GROUP, "llama4_json"]}


# --------------------------------------------------------------------------------------------------
# whole reader: facts of vLLM's tests (pythonic, llama4_pythonic, olmo3, lfm2, functiongemma, gigachat3, apertus)

MORE_TYPES = ("register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, "
              "passed_test=True, aliases=['John', 'Johnny'])")
MORE_TYPES_ARGS = {"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"}, "role": None,
                   "passed_test": True, "aliases": ["John", "Johnny"]}


@pytest.mark.parametrize(("text", "expected"), [
    ("[get_weather(city='San Francisco', metric='celsius')]",
     [("get_weather", {"city": "San Francisco", "metric": "celsius"})]),
    (f"[{MORE_TYPES}]", [("register_user", MORE_TYPES_ARGS)]),
    ("[get_time()]", [("get_time", {})]),
    ("[register_user(name='x', address={})]", [("register_user", {"name": "x", "address": {}})]),
    ("[register_user(name='x', aliases=[])]", [("register_user", {"name": "x", "aliases": []})]),
    (r"""[get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')]""",
     [("get_weather", {"city": "Martha's Vineyard", "metric": '"cool units"'})]),
    (f"[get_weather(city='San Francisco', metric='celsius'), {MORE_TYPES}]",
     [("get_weather", {"city": "San Francisco", "metric": "celsius"}), ("register_user", MORE_TYPES_ARGS)]),
    ("[get_weather(city=\"Paris\", metric=null), get_time()]", [("get_weather", {"city": "Paris", "metric": None}),
                                                             ("get_time", {})]),
    ("[register_user(name='n', age=-3, aliases=('a', 'b'))]", [("register_user", {"name": "n", "age": -3,
                                                                                 "aliases": ["a", "b"]})]),
])
def test_pythonic_reads_vllms_cases(text: str, expected: list[tuple[str, Any]]) -> None:
    for fmt in ("pythonic", "llama4_pythonic"):
        assert calls_of(fmt, text) == (None, expected)


@pytest.mark.parametrize("text", [
    "How can I help you today?",
    "Sure: [get_time()]",            # the list must be the whole output
    "[get_time()] and more",
    "[]",                             # no call
    "[get_weather(city=x)]",          # a variable is no literal
    "[get_weather('Paris')]",         # positional arguments
    "[get_weather(city=b'x')]",       # bytes
    "[get_weather(city='a' + 'b')]",  # an expression
    "[get_weather(city='unterminated)]",
    "[" * 5000 + "]" * 5000,
    "[f(a=" + "[" * 300 + "]" * 300 + ")]",
])
def test_pythonic_text_that_is_no_call_list_stays_content(text: str) -> None:
    assert calls_of("pythonic", text) == (text.strip(), [])


def test_llama4_pythonic_reads_calls_between_python_tags() -> None:
    text = "<|python_start|>[get_weather(city=\"Vancouver\"), get_time()]<|python_end|>"
    assert calls_of("llama4_pythonic", text) == (None, [("get_weather", {"city": "Vancouver"}), ("get_time", {})])
    assert calls_of("pythonic", text)[1] == []  # Llama 3.2's pythonic has no such tags


def test_olmo3_reads_lines_in_function_calls_tags_and_bare_lines() -> None:
    text = ("<function_calls>\nget_weather(city='Paris', metric=null)\nregister_user(name='n', passed_test=true, "
            "aliases=[\"a\"])\n</function_calls>")
    expected = [("get_weather", {"city": "Paris", "metric": None}),
                ("register_user", {"name": "n", "passed_test": True, "aliases": ["a"]})]
    assert calls_of("olmo3", text) == (None, expected)
    assert calls_of("olmo3", "get_weather(city='Paris', metric=null)\n\nget_time()") == (
        None, [("get_weather", {"city": "Paris", "metric": None}), ("get_time", {})])
    assert calls_of("olmo3", "I will check.\n<function_calls>\nget_time()\n</function_calls>") == (
        "I will check.", [("get_time", {})])
    assert calls_of("olmo3", "The weather is fine.") == ("The weather is fine.", [])


def test_lfm2_reads_the_block_between_its_tokens_and_keeps_the_text_around() -> None:
    text = 'I will check.<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>Checking now.'
    assert calls_of("lfm2", text) == ("I will check.Checking now.", [("get_weather", {"city": "Paris"})])
    # an output cut before the end token: the rest is the block (as vLLM reads it)
    assert calls_of("lfm2", "<|tool_call_start|>[get_time()]") == (None, [("get_time", {})])
    # an empty list is no call
    assert calls_of("lfm2", "<|tool_call_start|>[]<|tool_call_end|>") == ("<|tool_call_start|>[]<|tool_call_end|>", [])
    assert calls_of("lfm2", "[get_time()]") == ("[get_time()]", [])  # no block: text


def test_functiongemma_apertus_gigachat3_read_their_syntax() -> None:
    assert calls_of("functiongemma", "<start_function_call>call:get_weather{city:<escape>Paris, FR<escape>,"
                                     "metric:<escape>celsius<escape>}<end_function_call>") == (
        None, [("get_weather", {"city": "Paris, FR", "metric": "celsius"})])
    assert calls_of("apertus", 'Let me see. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"get_time": {}}]'
                               "<|tools_suffix|>") == (
        "Let me see.", [("get_weather", {"city": "Paris"}), ("get_time", {})])
    body = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})
    for text in ("I'll check that for you.<|message_sep|>\n\nfunction call<|role_sep|>\n" + body,
                 "I'll check that for you.<|function_call|>" + body):
        assert calls_of("gigachat3", text) == ("I'll check that for you.", [("get_weather", {"city": "Paris"})])
    assert calls_of("llama4_json", '{"name": "get_weather", "parameters": {"city": "Paris"}}') == (
        None, [("get_weather", {"city": "Paris"})])


def test_the_requests_rules_apply_to_a_call_list() -> None:
    text = "[get_weather(city='Paris'), get_time()]"
    content, calls = calls_of("pythonic", text, parallel_tool_calls=False)
    assert calls == [("get_weather", {"city": "Paris"})] and content == "get_time()"
    assert calls_of("pythonic", text, choice="none") == (text, [])
    strict = [{**WEATHER, "function": {**WEATHER["function"], "strict": True}}, NOARGS]
    assert calls_of("pythonic", "[get_weather(city=3)]", tools=strict) == ("[get_weather(city=3)]", [])


# --------------------------------------------------------------------------------------------------
# the template's calls round-trip through the constraint (token by token) and the reader


CALLS = [("get_weather", {"city": "Zürich", "metric": "celsius"}), ("register_user", MORE_TYPES_ARGS)]


def test_template_calls_are_written_as_the_templates_write_them() -> None:
    assert render("olmo3", [("f", {"a": "x", "b": None, "c": True, "d": [1, "y"]}), ("g", {})]) == (
        "<function_calls>\nf(a='x', b=null, c=true, d=[1, \"y\"])\ng()\n</function_calls>")
    assert render("llama4_pythonic", [("f", {"a": "x", "b": 2})]) == '[f(a="x", b=2)]'
    assert render("apertus", [("f", {"a": 1})], "Hi") == 'Hi<|tools_prefix|>[{"f": {"a": 1}}]<|tools_suffix|>'
    assert render("functiongemma", [("f", {"b": True, "A": "s"})]) == (
        "<start_function_call>call:f{A:<escape>s<escape>,b:true}<end_function_call>")


@pytest.mark.parametrize("fmt", ["pythonic", "llama4_pythonic", "olmo3", "lfm2"])
def test_required_calls_pass_the_grammar_and_read_back(fmt: str) -> None:
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    calls = [("get_weather", {"city": "Zurich", "metric": "celsius"}), ("register_user", MORE_TYPES_ARGS)]
    if fmt == "olmo3":
        calls[1] = ("register_user", {**MORE_TYPES_ARGS, "name": "John"})
    text = render(fmt, calls)
    c = build_tool_constraint(TOOLS, "required", format=fmt)
    finish(fam, c, text)
    got = get_tool_reader(fmt, TOOLS, "required").read_ids(v.encode(text), v)
    assert [(x.name, json.loads(x.arguments)) for x in got.calls] == calls and got.content is None


@pytest.mark.parametrize("fmt", ["pythonic", "lfm2"])
def test_the_grammar_takes_values_by_their_schema(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c = build_tool_constraint(TOOLS, "required", format=fmt)
    pre = fam.section[0]
    # an integer is no string; a required keyword cannot be left out; an enum holds its values only
    assert_rejected_at(fam, c, pre + "register_user(name='x', age=", "'3'")
    assert_rejected_at(fam, c, pre + "register_user(", "age=3)")
    assert_rejected_at(fam, c, pre + "get_weather(city='x', metric=", "'kelvin'", offset=1)


def test_a_control_token_never_sits_inside_a_string_and_marker_text_stays_text() -> None:
    fam = FAMILIES["lfm2"]
    v = synthetic_vocabulary("lfm2")
    c = build_tool_constraint(TOOLS, "required", format="lfm2")
    end = v.special_tokens["<|tool_call_end|>"]
    assert_rejected_at(fam, c, '<|tool_call_start|>[get_weather(city="', "", bad_ids=[end])
    # the marker's characters written with ordinary tokens are a string's text
    base = vocab("qwen3_6")
    text_ids = (v.encode('<|tool_call_start|>[get_weather(city="') + base.encode("<|tool_") + base.encode("call_end|>")
                + v.encode('")]<|tool_call_end|>'))
    got = get_tool_reader("lfm2", TOOLS, "required").read_ids(text_ids, v)
    assert [(x.name, json.loads(x.arguments)) for x in got.calls] == [("get_weather", {"city": "<|tool_call_end|>"})]
    # and marker text in free text opens no call when read from ids
    ids = base.encode("<|tool_call_start|>") + v.encode('[get_time()]<|tool_call_end|>')
    assert get_tool_reader("lfm2", TOOLS).read_ids(ids, v).calls == ()


# --------------------------------------------------------------------------------------------------
# hostile requests: a clear ValueError for that request alone


@pytest.mark.parametrize("fmt", ["pythonic", "llama4_pythonic", "olmo3", "lfm2"])
@pytest.mark.parametrize(("tool", "why"), [
    (fn("get-weather", {"a": {"type": "string"}}), "not a Python name"),
    (fn("f", {"class": {"type": "string"}}), "cannot be written as a Python keyword"),
    (fn("f", {"Content-Type": {"type": "string"}}), "cannot be written as a Python keyword"),
    (fn("f", {"a": {"enum": [float("inf")]}}), "has no literal"),
])
def test_a_tool_no_call_can_write_is_a_value_error(fmt: str, tool: dict[str, Any], why: str) -> None:
    with pytest.raises(ValueError, match=why):
        build_tool_constraint([tool], "required", format=fmt)


def test_a_vocabulary_without_the_markers_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="no control token"):
        build_tool_constraint(TOOLS, "required", format="lfm2", vocabulary=vocab("qwen3_6"))
    with pytest.raises(ValueError, match="none of its syntaxes"):
        build_tool_constraint(TOOLS, "required", format="gigachat3", vocabulary=vocab("qwen3_6"))


# --------------------------------------------------------------------------------------------------
# streaming: every chunking gives the whole reader's result


STREAM_CASES = {
    "pythonic": f"[get_weather(city='San Francisco', metric='celsius'), {MORE_TYPES}]",
    "llama4_pythonic": '<|python_start|>[get_weather(city="Paris")]<|python_end|>',
    "olmo3": "Checking.\n<function_calls>\nget_weather(city='Paris')\nget_time()\n</function_calls>",
    "lfm2": 'Hi.<|tool_call_start|>[get_weather(city="Paris"), get_time()]<|tool_call_end|>Done.',
    "functiongemma": "<start_function_call>call:get_weather{city:<escape>Paris<escape>}<end_function_call>",
    "gigachat3": 'Ok.<|function_call|>{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "apertus": 'Ok. <|tools_prefix|>[{"get_weather": {"city": "Paris"}}, {"get_time": {}}]<|tools_suffix|>',
}


@pytest.mark.parametrize("fmt", GROUP)
def test_streaming_equals_the_whole_reader_for_random_chunkings(fmt: str) -> None:
    v = vocab(FAMILIES[fmt].vocab)
    ids = v.encode(STREAM_CASES[fmt])
    reader = get_tool_reader(fmt, TOOLS, "auto")
    whole = reader.read_ids(ids, v)
    assert whole.calls, "the case must hold calls"
    rng = random.Random(fmt)
    for _ in range(12):
        cuts = sorted(rng.sample(range(1, len(ids)), k=min(len(ids) - 1, rng.randint(1, 6))))
        stream, dec = reader.stream(v), MarkedDecoder(v)
        content, calls, frags = "", [], []
        for a, b in zip([0, *cuts], [*cuts, len(ids)]):
            d = stream.feed(dec.feed(ids[a:b]))
            content, calls, frags = content + d.content, calls + list(d.calls), frags + list(d.fragments)
        d = stream.finish()
        content, calls, frags = content + d.content, calls + list(d.calls), frags + list(d.fragments)
        assert (content.strip() or None) == whole.content
        assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole.calls]
        firsts = [f for f in frags if f.name is not None]
        assert [f.index for f in firsts] == list(range(len(whole.calls)))
        for i, c in enumerate(whole.calls):
            assert "".join(f.arguments for f in frags if f.index == i) == c.arguments
