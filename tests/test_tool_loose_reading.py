"""The readers read what models write, which is looser than their templates (DESIGN: constraining exactly,
reading generously): a template's whitespace and newlines written as any run or left out, calls with no
separator between them, a JSON call object's keys in any order with ``arguments`` given as a JSON string.
The cases are the shapes of vLLM's own tool-parser tests (hermes, qwen3_xml / qwen3_coder, deepseek_v3,
deepseek_v31) and of the outputs its parsers read; each is read from the token ids the model would write,
whole and streamed with every chunking (the same calls and content), and never when the markers are
spelled with ordinary tokens.
"""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import FAMILIES, stream_chunks, vocab
from test_hostile_tools import spelled_ids

from thinkgate.structured_output import Parser
from thinkgate.structured_output.tools import get_tool_format
from thinkgate.structured_output.tools.request import normalize_tool_request

TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "q": {"type": "string"},
                                     "days": {"type": "integer"}}}}}
         for name in ("get_weather", "search", "final_answer")]

DS_CALLS = "<｜tool▁calls▁begin｜>{}<｜tool▁calls▁end｜>"
V3 = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{}\n```json\n{}\n```<｜tool▁call▁end｜>"
V31 = "<｜tool▁call▁begin｜>{}<｜tool▁sep｜>{}<｜tool▁call▁end｜>"

# (format, output, content, [(name, arguments)])
CASES = [
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "NYC"}}</tool_call>',
     None, [("get_weather", {"city": "NYC"})]),
    ("hermes", 'Sure, let me check the weather.<tool_call>{"name": "get_weather", "arguments": {"city": "NYC"}}'
               "</tool_call>", "Sure, let me check the weather.", [("get_weather", {"city": "NYC"})]),
    ("hermes", '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
               '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>',
     None, [("search", {"q": "cats"}), ("search", {"q": "dogs"})]),
    ("hermes", '<tool_call>\n{"name":"get_weather","arguments":{"city":"Paris","days":2}}\n</tool_call>',
     None, [("get_weather", {"city": "Paris", "days": 2})]),
    ("hermes", '<tool_call>\n{"arguments": {"q": "x"}, "name": "search"}\n</tool_call>', None, [("search", {"q": "x"})]),
    ("hermes", '<tool_call>\n{"name": "search", "arguments": "{\\"q\\": \\"max_connections\\"}"}\n</tool_call>',
     None, [("search", {"q": "max_connections"})]),
    ("hermes", '<tool_call>  {"name": "search",\n"arguments": {"q":\n"SF"}}  </tool_call>', None, [("search", {"q": "SF"})]),
    ("hermes", '<tool_call>\n{"name": "search", "arguments": "hello"}\n</tool_call>',
     '<tool_call>\n{"name": "search", "arguments": "hello"}\n</tool_call>', []),
    ("qwen3_6", "<tool_call><function=get_weather><parameter=city>Tokyo</parameter></function></tool_call>",
     None, [("get_weather", {"city": "Tokyo"})]),
    ("qwen3_6", "<tool_call>\n<function=get_weather>\n<parameter=city>\nTokyo\n</parameter>\n<parameter=days>\n3\n"
                "</parameter>\n</function>\n</tool_call>", None, [("get_weather", {"city": "Tokyo", "days": 3})]),
    ("qwen3_coder", "<tool_call><function=get_weather><parameter=city>Tokyo</parameter><parameter=days>3</parameter>"
                    "</function></tool_call><tool_call><function=search><parameter=q>a b</parameter></function>"
                    "</tool_call>", None, [("get_weather", {"city": "Tokyo", "days": 3}), ("search", {"q": "a b"})]),
    ("qwen3_coder", "<tool_call>\n<function=search>\n<parameter=q>\n    indented\n</parameter>\n</function>\n</tool_call>",
     None, [("search", {"q": "    indented"})]),
    ("deepseek_v3", DS_CALLS.format(V3.format("get_weather", '{"city": "Tokyo"}') + V3.format("search", '{"q": "x"}')),
     None, [("get_weather", {"city": "Tokyo"}), ("search", {"q": "x"})]),
    ("deepseek_v3", "Let me check." + DS_CALLS.format(V3.format("get_weather", '{"city": "Tokyo"}')),
     "Let me check.", [("get_weather", {"city": "Tokyo"})]),
    ("deepseek_v31", DS_CALLS.format(V31.format("get_weather", '{"city": "Tokyo"}') + V31.format("search", '{"q": "x"}')),
     None, [("get_weather", {"city": "Tokyo"}), ("search", {"q": "x"})]),
    ("deepseek_v31", DS_CALLS.format(V31.format("get_weather", '{"city": "A"}') + "\n\n"
                                     + V31.format("search", '{"q": "B"}')),
     None, [("get_weather", {"city": "A"}), ("search", {"q": "B"})]),
    ("llama3_json", '{"name": "get_weather", "parameters": {"city": "A"}};{"name":"search","parameters":{"q":"B"}}',
     None, [("get_weather", {"city": "A"}), ("search", {"q": "B"})]),
    ("glm47", "<tool_call>search\n<arg_key>q</arg_key>\n<arg_value>x</arg_value>\n</tool_call>",
     None, [("search", {"q": "x"})]),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


@functools.lru_cache(maxsize=None)
def parser(fmt: str) -> Parser:
    return Parser(vocab(FAMILIES[fmt].vocab), None, fmt)


def read(fmt: str, ids: list[int]) -> tuple[str | None, list[tuple[str, dict]]]:
    r = parser(fmt).request(tools=TOOLS).parse(ids)
    return r.content, [(c.name, json.loads(c.arguments)) for c in r.tool_calls]


@pytest.mark.parametrize(("fmt", "text", "content", "calls"), CASES, ids=IDS)
def test_what_models_write_is_read_from_its_token_ids(fmt: str, text: str, content: str | None, calls: list) -> None:
    assert read(fmt, parser(fmt).vocabulary.encode(text)) == (content, calls)


@pytest.mark.parametrize(("fmt", "text", "content", "calls"), CASES, ids=IDS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_the_stream_reads_the_same_for_every_chunking(fmt: str, text: str, content: str | None, calls: list,
                                                       data: st.DataObject) -> None:
    ids = parser(fmt).vocabulary.encode(text)
    cuts = data.draw(st.lists(st.integers(1, max(1, len(ids) - 1)), max_size=8))
    whole = parser(fmt).request(tools=TOOLS).parse(ids)
    deltas, _ = stream_chunks(parser(fmt).request(tools=TOOLS), ids, cuts, give_text=False)
    got_content = "".join(d.get("content", "") for d in deltas if d)
    got_calls = [(c["function"]["name"], c["function"]["arguments"]) for d in deltas if d
                 for c in d.get("tool_calls", [])]
    assert got_content == (whole.content or "")
    assert got_calls == [(c.name, c.arguments) for c in whole.tool_calls]


@pytest.mark.parametrize(("fmt", "text", "content", "calls"), [c for c in CASES if c[0] != "llama3_json"],
                         ids=[i for i, c in zip(IDS, CASES) if c[0] != "llama3_json"])
def test_markers_spelled_with_ordinary_tokens_never_open_a_call(fmt: str, text: str, content: str | None,
                                                                calls: list) -> None:
    ids = spelled_ids(parser(fmt).vocabulary, text)
    got_content, got_calls = read(fmt, ids)
    assert got_calls == [] and got_content == text.strip()


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_6", "deepseek_v3", "deepseek_v31"])
def test_the_constraint_still_writes_the_template_exactly(fmt: str) -> None:
    req = normalize_tool_request(TOOLS, "required")
    spec = json.dumps(get_tool_format(fmt).structural_tag(req))
    literal = {"hermes": '\\n{\\"name\\": \\"', "qwen3_6": "<parameter=city>\\n", "deepseek_v3": "\\n```json\\n",
               "deepseek_v31": '"separator": ""'}[fmt]
    assert literal in spec


UNDECLARED = [
    ("hermes", '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>'),
    ("qwen3_6", "<tool_call>\n<function=lookup_stock>\n<parameter=ticker>\nACME\n</parameter>\n</function>\n</tool_call>"),
    ("deepseek_v3", DS_CALLS.format(V3.format("lookup_stock", '{"ticker": "ACME"}'))),
    ("deepseek_v31", DS_CALLS.format(V31.format("lookup_stock", '{"ticker": "ACME"}'))),
    ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.lookup_stock:0<|tool_call_argument_begin|>"
                '{"ticker": "ACME"}<|tool_call_end|><|tool_calls_section_end|>'),
]


@pytest.mark.parametrize(("fmt", "text"), UNDECLARED, ids=[u[0] for u in UNDECLARED])
def test_calls_to_undeclared_tools_are_read_only_when_asked(fmt: str, text: str) -> None:
    p = parser(fmt)
    ids = p.vocabulary.encode(text)
    for tools in (None, TOOLS[:1]):
        assert p.request(tools=tools).parse(ids).tool_calls == ()
        got = p.request(tools=tools, read_undeclared=True).parse(ids)
        assert [c.name for c in got.tool_calls] == [text.split("function=")[-1].split(">")[0] if "function=" in text
                                                    else ("final_answer" if fmt == "hermes" else "lookup_stock")]
        assert got.content is None
        deltas, _ = stream_chunks(p.request(tools=tools, read_undeclared=True), ids, [3, 7], give_text=False)
        assert [c["function"]["name"] for d in deltas if d for c in d.get("tool_calls", [])] == \
            [c.name for c in got.tool_calls]
    # a named choice, allowed_tools or "none" keeps to the declared tools
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert p.request(tools=TOOLS, tool_choice="none", read_undeclared=True).parse(ids).tool_calls == ()
    assert p.request(tools=TOOLS, tool_choice=named, read_undeclared=True).parse(ids).tool_calls == ()
