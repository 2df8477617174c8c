"""The json_lists group: JSON call objects inside optional markers (``marked_json.py``) and the aliases of the
group (granite4 -> hermes, granite_toolcall_parser -> qwen3_coder).

Expectations are facts read in vLLM's tests for these parsers (vllm-project/vllm
tests/tool_parsers/test_{phi4mini,jamba,granite,granite4,granite_20b_fc,internlm2,xlam}_tool_parser.py: the
model outputs and the calls vLLM expects from them), rewritten here, with our content convention (stripped,
None when empty). Where we read more than vLLM 0.34 does, the case says so (``better``); the differential
against vLLM's own parsers is tests/integration/test_vllm_diff_json_lists.py. Template renderings are in the
conformance matrix (test_tool_conformance.py) and test_tool_formats.py.
"""

from __future__ import annotations

import json
import random
from typing import Any

import pytest
from support import FAMILIES, vocab

from thinkgate.structured_output.tools import (MarkedDecoder, build_tool_constraint, get_tool_format,
                                               get_tool_reader, list_tool_formats)


def _tool(name: str, props: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object",
                                                                          "properties": props or {}}}}


TOOLS = [_tool("get_weather", {"city": {"type": "string"}, "state": {"type": "string"},
                               "unit": {"type": "string"}}),
         _tool("get_time", {"timezone": {"type": "string"}}), _tool("refresh"), _tool("test_function"),
         _tool("get_current_weather", {"city": {"type": "string"}, "state": {"type": "string"},
                                       "unit": {"type": "string"}}),
         _tool("find_bbox"), _tool("get_stock_price")]

TYPES = {"string_field": "hello", "int_field": 42, "float_field": 3.14, "bool_field": True, "null_field": None,
         "array_field": ["a", "b", "c"], "object_field": {"nested": "value"}, "empty_array": [], "empty_object": {}}
ESCAPES = {"quoted": 'He said "hello"', "path": "C:\\Users\\file.txt", "newline": "line1\nline2",
           "unicode": "emoji: 🎉"}
TYPES_JSON = json.dumps(TYPES, indent=2)
ESCAPES_JSON = json.dumps(ESCAPES, indent=2, ensure_ascii=False)
TOKYO = {"city": "Tokyo"}
PARIS_TIME = {"timezone": "Asia/Tokyo"}
DALLAS = {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}
ORLANDO = {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}

# (format, model output, expected calls, expected content)
CASES: list[tuple[str, str, list[tuple[str, dict[str, Any]]], str | None]] = [
    # phi4_mini_json (test_phi4mini_tool_parser.py)
    ("phi4_mini_json", "This is a regular response without any tool calls.", [],
     "This is a regular response without any tool calls."),
    ("phi4_mini_json", 'functools[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
     [("get_weather", TOKYO)], None),
    ("phi4_mini_json", 'functools[\n  {"name": "get_weather", "arguments": {"city": "Tokyo"}},\n  {"name": "get_time", '
     '"arguments": {"timezone": "Asia/Tokyo"}}\n]', [("get_weather", TOKYO), ("get_time", PARIS_TIME)], None),
    # better: vLLM's non-greedy functools\[(.*?)\] stops at the first "]" (its test is an xfail)
    ("phi4_mini_json", 'functools[{\n  "name": "test_function",\n  "arguments": ' + TYPES_JSON + "\n}]",
     [("test_function", TYPES)], None),
    ("phi4_mini_json", 'functools[{"name": "refresh", "arguments": {}}]', [("refresh", {})], None),
    ("phi4_mini_json", 'functools[{"name": "refresh", "parameters": {}}]', [("refresh", {})], None),
    ("phi4_mini_json", 'Let me check the weather for you.\nfunctools[{"name": "get_weather", "arguments": '
     '{"city": "Tokyo"}}]\nWould you like to know more?', [("get_weather", TOKYO)],
     "Let me check the weather for you.\n\nWould you like to know more?"),
    ("phi4_mini_json", 'functools[{\n  "name": "test_function",\n  "arguments": ' + ESCAPES_JSON + "\n}]",
     [("test_function", ESCAPES)], None),
    *[("phi4_mini_json", bad, [], bad) for bad in [
        'functools[{"name": "func", "arguments": {', 'functools[{"name": "func", "arguments": "not a dict"}]',
        'functools{"name": "func"}', 'functools[{"name": "func"}]', "functools[] This is just text",
        "functools[ This is just text ]"]],
    # jamba (test_jamba_tool_parser.py)
    ("jamba", "This is a test", [], "This is a test"),
    ("jamba", ' <tool_calls>[\n    {"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", '
     '"unit": "fahrenheit"}}\n]</tool_calls>', [("get_current_weather", DALLAS)], None),
    ("jamba", ' Sure! let me call the tool for you.<tool_calls>[\n    {"name": "get_current_weather", "arguments": '
     '{"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}\n]</tool_calls>', [("get_current_weather", DALLAS)],
     "Sure! let me call the tool for you."),
    ("jamba", ' <tool_calls>[\n    {"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", '
     '"unit": "fahrenheit"}},\n    {"name": "get_current_weather", "arguments": {"city": "Orlando", "state": "FL", '
     '"unit": "fahrenheit"}}\n]</tool_calls>', [("get_current_weather", DALLAS), ("get_current_weather", ORLANDO)],
     None),
    ("jamba", '<tool_calls>[{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX"}}]'
     '</tool_calls>', [("get_current_weather", {"city": "Dallas", "state": "TX"})], None),
    # granite (test_granite_tool_parser.py)
    ("granite", "This is a regular response without any tool calls.", [],
     "This is a regular response without any tool calls."),
    ("granite", '<|tool_call|> [{"name": "get_weather", "arguments": {"city": "Tokyo"}}]',
     [("get_weather", TOKYO)], None),
    ("granite", '<|tool_call|> [\n  {"name": "get_weather", "arguments": {"city": "Tokyo"}},\n  {"name": "get_time", '
     '"arguments": {"timezone": "Asia/Tokyo"}}\n]', [("get_weather", TOKYO), ("get_time", PARIS_TIME)], None),
    ("granite", '<tool_call> [{\n  "name": "test_function",\n  "arguments": ' + TYPES_JSON + "\n}]",
     [("test_function", TYPES)], None),
    ("granite", '<|tool_call|> [{"name": "refresh", "arguments": {}}]', [("refresh", {})], None),
    ("granite", 'Let me check the weather for you.\n<|tool_call|> [{"name": "get_weather", "arguments": '
     '{"city": "Tokyo"}}]\nI\'ll get that information.', [("get_weather", TOKYO)],
     "Let me check the weather for you.\n\nI'll get that information."),
    ("granite", '<tool_call> [{\n  "name": "test_function",\n  "arguments": ' + ESCAPES_JSON + "\n}]",
     [("test_function", ESCAPES)], None),
    ("granite", '<|tool_call|> [{"arguments": {"city": "Tokyo"}, "name": "get_weather"}, '
     '{"arguments": {"timezone": "Asia/Tokyo"}, "name": "get_time"}]',
     [("get_weather", TOKYO), ("get_time", PARIS_TIME)], None),
    *[("granite", bad, [], bad) for bad in [
        '<|tool_call|> [{"name": "func", "arguments": {', '<|tool_call|> {"name": "func", "arguments": {}}',
        '[{"name": "func", "arguments": "not a dict"}]', 'Some text [{"name": "func"}]']],
    # granite_20b_fc (test_granite_20b_fc_tool_parser.py; the template's <function_call> {...} per call)
    ("granite-20b-fc", '<function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}',
     [("get_weather", TOKYO)], None),
    ("granite-20b-fc", '<function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}\n<function_call> '
     '{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}', [("get_weather", TOKYO), ("get_time", PARIS_TIME)],
     None),
    ("granite-20b-fc", '<function_call>{"name": "refresh", "arguments": {}}', [("refresh", {})], None),
    ("granite-20b-fc", 'Sure.<function_call> {"name": "get_weather", "arguments": {"city": "Tokyo"}}',
     [("get_weather", TOKYO)], "Sure."),
    # internlm (test_internlm2_tool_parser.py: one call per output; "parameters" or "arguments")
    ("internlm", "How can I help you today?", [], "How can I help you today?"),
    ("internlm", '<|action_start|><|plugin|>\n{"name": "get_current_weather", "parameters": {"city": "Dallas", '
     '"state": "TX", "unit": "fahrenheit"}}<|action_end|>', [("get_current_weather", DALLAS)], None),
    ("internlm", 'I will call the tool.<|action_start|><|plugin|>{"name": "get_current_weather", "arguments": '
     '{"city": "Dallas"}}<|action_end|>', [("get_current_weather", {"city": "Dallas"})], "I will call the tool."),
    # better: two calls (vLLM's split into exactly two parts raises on a second marker)
    ("internlm", '<|action_start|><|plugin|>\n{"name": "refresh", "arguments": {}}<|action_end|>'
     '<|action_start|><|plugin|>\n{"name": "get_time", "arguments": {"timezone": "Asia/Tokyo"}}<|action_end|>',
     [("refresh", {}), ("get_time", PARIS_TIME)], None),
    # xlam (test_xlam_tool_parser.py: the output is the list; arguments may be a JSON string)
    ("xlam", "This is a test", [], "This is a test"),
    ("xlam", '[{"name": "get_current_weather", "arguments": {"city": "Dallas", "state": "TX", "unit": "fahrenheit"}}, '
     '{"name": "get_current_weather", "arguments": {"city": "Orlando", "state": "FL", "unit": "fahrenheit"}}]',
     [("get_current_weather", DALLAS), ("get_current_weather", ORLANDO)], None),
    ("xlam", '[{"name": "get_current_weather", "arguments": "{\\"city\\": \\"Dallas\\"}"}]',
     [("get_current_weather", {"city": "Dallas"})], None),
    ("xlam", 'I think [{"name": "get_time", "arguments": {}}]', [], 'I think [{"name": "get_time", "arguments": {}}]'),
    # granite4 = hermes (Granite 4.0's template: <tool_call>\n{...}\n</tool_call>)
    ("granite4", 'Here goes the call:\n<tool_call>\n{"name": "find_bbox", "arguments": {"coordinates": '
     '[[23.54, 43.1], [-12.2, 54.3], [4, 5]], "coordinate_type": "latlong"}}\n</tool_call>',
     [("find_bbox", {"coordinates": [[23.54, 43.1], [-12.2, 54.3], [4, 5]], "coordinate_type": "latlong"})],
     "Here goes the call:"),
]


def _calls(result) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in result.calls]


@pytest.mark.parametrize(("fmt", "text", "calls", "content"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_reads_what_vllm_tests_expect(fmt: str, text: str, calls, content) -> None:
    got = get_tool_reader(fmt, TOOLS, "auto").read(text)
    assert _calls(got) == calls
    assert got.content == content


def _ids(fmt: str, text: str) -> tuple[Any, list[int]]:
    v = vocab(FAMILIES[get_tool_format(fmt).name].vocab)
    return v, v.encode(text)


@pytest.mark.parametrize(("fmt", "text", "calls", "content"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_ids_read_as_text_and_streaming_equals_whole(fmt: str, text: str, calls, content) -> None:
    """From the family's vocabulary's ids (markers as control tokens): the same reading; every chunking of
    the ids streams to the whole reading (content, calls, and the fragments joined per call), held or with
    the calls sent as they are written (``stream_arguments``)."""
    v, ids = _ids(fmt, text)
    reader = get_tool_reader(fmt, TOOLS, "auto")
    whole = reader.read_ids(ids, v)
    assert _calls(whole) == calls and whole.content == content
    rnd = random.Random(hash(text) & 0xFFFF)
    for trial in range(6):
        cuts = sorted(rnd.sample(range(1, len(ids)), min(len(ids) - 1, rnd.randint(0, 12)))) if len(ids) > 1 else []
        if trial == 0:
            cuts = list(range(1, len(ids)))  # one token at a time
        # odd trials: as a constrained request's stream (calls go out from their names on)
        st, dec = reader.stream(v, stream_arguments=bool(trial % 2)), MarkedDecoder(v)
        out, got_calls, frags = [], [], {}
        bounds = [0, *cuts, len(ids)]
        for k, (a, b) in enumerate(zip(bounds, bounds[1:])):
            d = st.feed(dec.feed(ids[a:b], final=k == len(bounds) - 2))
            out.append(d.content)
            got_calls += d.calls
            for f in d.fragments:
                frags.setdefault(f.index, [f.name, ""])[1] += f.arguments
        d = st.finish()
        out.append(d.content)
        got_calls += d.calls
        for f in d.fragments:
            frags.setdefault(f.index, [f.name, ""])[1] += f.arguments
        assert ("".join(out) or None) == whole.content
        assert [(c.name, c.arguments) for c in got_calls] == [(c.name, c.arguments) for c in whole.calls]
        assert [tuple(frags[i]) for i in sorted(frags)] == [(c.name, c.arguments) for c in whole.calls]


def test_the_group_is_registered_with_its_aliases() -> None:
    names = set(list_tool_formats(aliases=True))
    assert {"phi4_mini_json", "xlam", "internlm", "jamba", "granite-20b-fc", "granite", "granite4",
            "granite_toolcall_parser"} <= names
    assert get_tool_format("granite4") is get_tool_format("hermes")
    assert get_tool_format("granite_toolcall_parser") is get_tool_format("qwen3_coder")
    assert get_tool_format("granite-20b-fc") is get_tool_format("granite_20b_fc")


@pytest.mark.parametrize("fmt", ["phi4_mini_json", "jamba", "granite", "granite_20b_fc", "internlm"])
def test_marker_text_inside_arguments_never_opens_a_call(fmt: str) -> None:
    """A string argument that spells the family's opening marker with ordinary tokens is an argument: read
    from ids, only the outer call is read, its argument intact."""
    f = get_tool_format(fmt)
    fam = FAMILIES[f.name]
    v = vocab(fam.vocab)
    opener = f.open.strip() or f.open
    args = {"city": f"{opener}[{{\"name\": \"refresh\", \"arguments\": {{}}}}]"}
    body = fam.block([("get_weather", args)])
    # the marker inside the argument as ordinary tokens: encode it apart from the outer syntax
    inner = json.dumps(args["city"], ensure_ascii=False)
    i = body.index(inner)
    ids = v.encode(body[:i]) + [t for ch in inner for t in v.encode(ch)] + v.encode(body[i + len(inner):])
    got = get_tool_reader(fmt, TOOLS, "auto").read_ids(ids, v)
    assert _calls(got) == [("get_weather", args)] and got.content is None


def test_hostile_requests_fail_alone() -> None:
    with pytest.raises(ValueError):
        build_tool_constraint([{"type": "function", "function": {"name": 7}}], "required", format="jamba")
    with pytest.raises(ValueError):
        build_tool_constraint(TOOLS, "required", format="granite", max_whitespace=0)
    # a vocabulary without the family's control token: a clear error naming it
    with pytest.raises(ValueError, match="<tool_calls>"):
        build_tool_constraint(TOOLS, "required", format="jamba", vocabulary=vocab("qwen3_6"))


def test_constraint_writes_the_template_and_refuses_other_text() -> None:
    """The required constraint of each JSON-list format admits the compact and the pretty-printed list
    (granite's template uses indent=4) and nothing before the marker; spot checks of what the JSON
    schema of calls must refuse are in test_tool_formats.py (wrong name, missing argument)."""
    c = build_tool_constraint(TOOLS[:2], "required", format="granite")
    # the pretty-printing cap, enforced beside the grammar (tools/json_text.py)
    assert '"<|tool_call|>"' in c.spec and c.whitespace_bound == 33 and "{0,33}" not in c.spec
    spec = build_tool_constraint(TOOLS[:2], "required", format="phi4_mini_json", parallel_tool_calls=False).spec
    assert '"functools["' in spec and '"star"' not in spec
    assert build_tool_constraint(TOOLS[:2], "auto", format="xlam", strictness="parameter") is not None
