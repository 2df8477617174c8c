"""The tool formats served for SGLang 0.5.23's names that vLLM 0.34 has no parser of: ``iquest_q1`` (thinkgate's
``iquest_q1`` format) and ``trinity`` (hermes' syntax).

The expected results are what SGLang's own detectors (``sglang/srt/function_call/iquest_q1_detector.py``,
``trinity_detector.py``) give on the same outputs, whole and streamed in chunks of 1-5 characters, run in
SGLang's venv; where thinkgate reads differently on purpose, the case says so. The constraint round trip,
streaming = whole at every chunking and the hostile matrix run for ``iquest_q1`` through the shared matrices
(``support.FAMILIES``); this file holds the facts of SGLang's detectors.
"""

from __future__ import annotations

import json
import random

import pytest
from support import FAMILIES, request_for, stream_chunks, vocab
from template_render import render

from thinkgate.engines.sglang.tool_names import thinkgate_tool_format
from thinkgate.structured_output import Parser
from thinkgate.structured_output.tools import get_tool_format, get_tool_reader

LOOKUP = [
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}, "enabled": {"type": "boolean"},
        "tags": {"type": "array"}}}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]


def read(fmt: str, text: str):
    r = get_tool_reader(fmt, LOOKUP).read(text)
    return r.content, [(c.name, json.loads(c.arguments)) for c in r.calls]


def read_ids(fmt: str, ids: list[int]):
    r = get_tool_reader(fmt, LOOKUP).read_ids(ids, vocab(FAMILIES[fmt].vocab if fmt in FAMILIES else "qwen3_6"))
    return r.content, [(c.name, json.loads(c.arguments)) for c in r.calls]


def streamed(fmt: str, ids: list[int], cuts) -> tuple[str, list[tuple[str, dict]]]:
    """Content and calls of a stream of the family's request view (no reasoning parser) cut at ``cuts``."""
    deltas, _ = stream_chunks(request_for(fmt, None, tools=LOOKUP, tool_choice="auto"), ids, cuts, False)
    content = "".join(d.get("content") or "" for d in deltas if d)
    calls: dict[int, list] = {}
    for d in deltas:
        for tc in (d or {}).get("tool_calls") or ():
            entry = calls.setdefault(tc["index"], ["", ""])
            entry[0] += tc.get("function", {}).get("name") or ""
            entry[1] += tc.get("function", {}).get("arguments") or ""
    return content, [(n, json.loads(a)) for _, (n, a) in sorted(calls.items())]


def test_sglang_names_resolve_to_these_formats() -> None:
    assert thinkgate_tool_format("iquest_q1") == "iquest_q1"
    assert thinkgate_tool_format("trinity") == get_tool_format("hermes").name


# -- IQuest-Q1: SGLang's IQuestQ1Detector facts

IQUEST_FACTS = [
    # text before and after a call; arguments typed by the schema
    ("Before <iquest_tool_call>lookup<arg_key>query</arg_key><arg_value>123</arg_value><arg_key>limit</arg_key>"
     "<arg_value>3</arg_value></iquest_tool_call> after", "Before  after", [("lookup", {"query": "123", "limit": 3})]),
    # a string keeps its text as written (quotes, spaces, newline); other values are JSON; calls back to back
    ('<iquest_tool_call>lookup<arg_key>query</arg_key><arg_value>  "123"\n</arg_value><arg_key>enabled</arg_key>'
     "<arg_value>true</arg_value><arg_key>tags</arg_key><arg_value>[1, null]</arg_value></iquest_tool_call>"
     "<iquest_tool_call>ping</iquest_tool_call>", None,
     [("lookup", {"query": '  "123"\n', "enabled": True, "tags": [1, None]}), ("ping", {})]),
    # newlines around the pieces (the template writes none): read
    ("<iquest_tool_call>lookup\n<arg_key>query</arg_key>\n<arg_value>a</arg_value>\n</iquest_tool_call>", None,
     [("lookup", {"query": "a"})]),
    # a value that is no JSON of its declared type is kept as its text
    ("<iquest_tool_call>lookup<arg_key>limit</arg_key><arg_value>notanint</arg_value></iquest_tool_call>", None,
     [("lookup", {"limit": "notanint"})]),
]
IQUEST_CONTENT = [
    "<iquest_tool_call>lookup junk<arg_key>query</arg_key><arg_value>a</arg_value>trailing</iquest_tool_call>",
    "<iquest_tool_call></iquest_tool_call>x",                                       # no name
    "cut <iquest_tool_call>lookup<arg_key>query</arg_key><arg_value>a",             # cut by max_tokens
    # SGLang drops a call to an undeclared tool (and its text); here it stays content (declared tools only)
    "<iquest_tool_call>unknown_tool<arg_key>q</arg_key><arg_value>1</arg_value></iquest_tool_call>",
]


@pytest.mark.parametrize(("text", "content", "calls"), IQUEST_FACTS)
def test_iquest_q1_reads_what_sglang_reads(text: str, content: str | None, calls) -> None:
    assert read("iquest_q1", text) == (content, calls)


@pytest.mark.parametrize("text", IQUEST_CONTENT)
def test_iquest_q1_malformed_or_cut_calls_are_content(text: str) -> None:
    assert read("iquest_q1", text) == (text, [])


@pytest.mark.parametrize(("text", "content", "calls"), IQUEST_FACTS[:2])
def test_iquest_q1_any_chunking_of_the_stream_is_the_whole_read(text: str, content: str | None, calls) -> None:
    ids = vocab("iquest").encode(text)
    assert read_ids("iquest_q1", ids) == (content, calls)
    rng = random.Random(7)
    for cuts in [range(len(ids)), [], *[sorted(rng.sample(range(1, len(ids)), 6)) for _ in range(4)]]:
        assert streamed("iquest_q1", ids, cuts) == (content or "", calls)


def test_iquest_q1_renders_as_the_template_and_reads_back() -> None:
    calls = [("lookup", {"query": "a b", "limit": 2, "tags": ["x", {"k": None}]}), ("ping", {})]
    text = render("iquest_q1", calls, "Let me look.")
    assert text.startswith("Let me look.<iquest_tool_call>lookup<arg_key>query</arg_key><arg_value>a b</arg_value>")
    assert read("iquest_q1", text) == ("Let me look.", calls)


@pytest.mark.parametrize("inside", ["</iquest_tool_call> hostile", "<iquest_tool_call>ping</iquest_tool_call>",
                                    "</arg_value><arg_key>limit</arg_key><arg_value>9"])
def test_iquest_q1_marker_text_inside_a_value_is_the_value(inside: str) -> None:
    """Marker text spelled with ordinary tokens inside a string value neither closes the call nor opens another
    (SGLang reads the first "</iquest_tool_call>" text as the end and leaves the whole call as content)."""
    v = vocab("iquest")
    head = v.encode("<iquest_tool_call>lookup<arg_key>query</arg_key><arg_value>")
    spelled = [t for ch in inside for t in v.encode(ch)]
    assert not set(spelled) & v.special_token_ids
    ids = head + spelled + v.encode("</arg_value></iquest_tool_call>")
    assert read_ids("iquest_q1", ids) == (None, [("lookup", {"query": inside})])
    assert streamed("iquest_q1", ids, range(len(ids))) == ("", [("lookup", {"query": inside})])


def test_iquest_q1_with_its_reasoning_family() -> None:
    """The prompt opens the thought; the call follows the thinking (Parser: iquest_q1 reasoning + format)."""
    v = vocab("iquest")
    p = Parser(v, "iquest_q1", "iquest_q1")
    out = "I should look.</think>" + render("iquest_q1", [("lookup", {"query": "x"})], "Sure.")
    r = p.request(prompt_token_ids=v.encode("<|iquest_assistant|><think>"), tools=LOOKUP).parse(v.encode(out))
    assert (r.reasoning, r.content) == ("I should look.", "Sure.")
    assert [(c.name, json.loads(c.arguments)) for c in r.tool_calls] == [("lookup", {"query": "x"})]


# -- Trinity: SGLang's TrinityDetector is Qwen25Detector (hermes' <tool_call> JSON) after dropping <think> tags

TRINITY_FACTS = [
    ('Before <tool_call>\n{"name": "lookup", "arguments": {"query": "123", "limit": 3}}\n</tool_call> after',
     "Before  after", [("lookup", {"query": "123", "limit": 3})]),  # SGLang whole: "Before" (drops the tail)
    ('<tool_call>\n{"name": "lookup", "arguments": {"query": "a"}}\n</tool_call>\n<tool_call>\n{"name": "ping", '
     '"arguments": {}}\n</tool_call>', None, [("lookup", {"query": "a"}), ("ping", {})]),
    # compact JSON without the newlines (SGLang: content): read, as hermes reads what models write
    ('<tool_call>{"name":"lookup","arguments":{"limit":5,"enabled":true}}</tool_call>', None,
     [("lookup", {"limit": 5, "enabled": True})]),
]


@pytest.mark.parametrize(("text", "content", "calls"), TRINITY_FACTS)
def test_trinity_reads_hermes_calls(text: str, content: str | None, calls) -> None:
    assert read(thinkgate_tool_format("trinity"), text) == (content, calls)


def test_trinity_call_from_the_thinking_with_qwen3_reasoning() -> None:
    """A call written inside the thinking (what TrinityDetector strips <think> tags for): with a reasoning parser
    whose <tool_call> ends the thinking, the thinking is the reasoning and the call is read. The "</think>" the
    model writes after the call stays content here (SGLang drops the tags from the text)."""
    v = vocab("qwen3_6")
    p = Parser(v, "qwen3", thinkgate_tool_format("trinity"))
    out = '<think>I will call.<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call></think>Done.'
    r = p.request(prompt_token_ids=v.encode("<|im_start|>assistant\n"), tools=LOOKUP).parse(v.encode(out))
    assert (r.reasoning, r.content, [c.name for c in r.tool_calls]) == ("I will call.", "</think>Done.", ["ping"])


def test_trinity_think_tags_inside_arguments_are_kept() -> None:
    """SGLang drops "<think>" / "</think>" from the whole text, arguments included ("</think> x" becomes " x");
    here an argument keeps the text the model wrote (spelled with ordinary tokens)."""
    v = vocab("qwen3_6")
    inside = "</think> <tool_call> x"
    ids = (v.encode('<tool_call>\n{"name": "lookup", "arguments": {"query": "') + [t for ch in inside for t in v.encode(ch)]
           + v.encode('"}}\n</tool_call>'))
    r = get_tool_reader(thinkgate_tool_format("trinity"), LOOKUP).read_ids(ids, v)
    assert [(c.name, json.loads(c.arguments)) for c in r.calls] == [("lookup", {"query": inside})]


def test_iquest_q1_argument_tags_read_as_text_where_the_vocabulary_lacks_them() -> None:
    """Whether IQuest's tokenizer holds <arg_key> / <arg_value> as tokens is not known offline: they are optional
    markers, matched as tokens where they are ones and as text elsewhere; the call tokens are required."""
    from support import with_specials
    from thinkgate.reasoning import load_vocabulary
    v = with_specials(load_vocabulary("qwen3_6"), ["<iquest_tool_call>", "</iquest_tool_call>"], "qwen3_6+iquest_calls")
    assert v.token_id("<arg_key>") is None
    ids = v.encode("Hi<iquest_tool_call>lookup<arg_key>query</arg_key><arg_value>a</arg_value></iquest_tool_call>")
    r = get_tool_reader("iquest_q1", LOOKUP).read_ids(ids, v)
    assert (r.content, [(c.name, json.loads(c.arguments)) for c in r.calls]) == ("Hi", [("lookup", {"query": "a"})])
    assert Parser(v, None, "iquest_q1").tool_format.name == "iquest_q1"  # the format takes this vocabulary
    from thinkgate.structured_output.tools.request import normalize_tool_request
    tag = get_tool_format("iquest_q1").structural_tag(normalize_tool_request(LOOKUP, "required"), vocabulary=v)
    assert "<arg_key>" in json.dumps(tag)  # the grammar spells the tags, as text here
