"""The tool formats of SGLang 0.5.23's names that vLLM 0.34 has no parser of (issue 20 item 4): ``gigachat35``
(GigaChat 3.5's GCML) and ``spark25`` (Spark-X2.5's XML-KV calls).

The expected results are the facts of SGLang's own detectors (``sglang/srt/function_call/gigachat35_detector.py``,
``spark25_detector.py``, run on these outputs: which text is a call, its arguments, what stays content), written
as our own cases in the layout each model writes (``template_render.py``: GigaChat 3.5's chat template; Spark's
documented wire format). Where thinkgate answers otherwise, the case says so and why (docs/tools.md, "SGLang-only
names"). The shared matrices run both formats too (``support.FAMILIES``).
"""

from __future__ import annotations

import json
import random

import pytest
from support import FAMILIES, finish, request_for, stream_chunks, vocab
from template_render import render

from thinkgate.engines.sglang.tool_names import thinkgate_tool_format
from thinkgate.structured_output.tools import build_tool_constraint, get_tool_format, get_tool_reader

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "location": {"type": "string"}, "days": {"type": "integer"}, "ratio": {"type": "number"},
        "flag": {"type": "boolean"}, "tags": {"type": "array", "items": {}}, "meta": {"type": "object"},
        "note": {"type": ["string", "null"]}}, "required": ["location"]}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}},
]
TYPED = {"location": "Москва", "days": 3, "ratio": 2.5, "flag": True, "tags": ["a", 1, None],
         "meta": {"k": {"n": None, "deep": [{"x": "y"}]}}, "note": None}
FORMATS = ("gigachat35", "spark25")


def read(fmt: str, text: str):
    r = get_tool_reader(fmt, TOOLS).read(text)
    return r.content, [(c.name, json.loads(c.arguments)) for c in r.calls]


def gcml(*invokes: str) -> str:
    return "<｜GCML｜tool_calls>\n" + "\n".join(invokes) + "\n</｜GCML｜tool_calls>"


def invoke(name: str, *params: tuple[str, str, bool]) -> str:
    body = "".join(f'<｜GCML｜parameter name="{k}" string="{str(s).lower()}">{v}</｜GCML｜parameter>\n'
                   for k, v, s in params)
    return f'<｜GCML｜invoke name="{name}">\n{body}</｜GCML｜invoke>'


def spark(name: str, *pairs: tuple[str, str]) -> str:
    return f"<tool_call>{name}\n" + "".join(f"<arg_key>{k}</arg_key><arg_value>{v}</arg_value>\n"
                                            for k, v in pairs) + "</tool_call>"


def test_sglang_names_are_served_by_these_formats() -> None:
    for name in FORMATS:
        assert thinkgate_tool_format(name) == name == get_tool_format(name).name


# -- GigaChat 3.5 (GCML)


def test_gigachat35_call_after_content_typed_by_its_string_attribute() -> None:
    text = "Hi.\n\n" + gcml(invoke("get_weather", ("location", "Москва", True), ("days", "3", False)))
    assert read("gigachat35", text) == ("Hi.", [("get_weather", {"location": "Москва", "days": 3})])


def test_gigachat35_parallel_invokes_nested_json_and_empty_arguments() -> None:
    text = render("gigachat35", [("get_weather", TYPED), ("now", {})], "Checking.")
    assert '<｜GCML｜invoke name="now">\n</｜GCML｜invoke>' in text  # the template writes no blank line
    assert read("gigachat35", text) == ("Checking.", [("get_weather", TYPED), ("now", {})])


@pytest.mark.parametrize("body", ["", "\n", "\n\n"])
def test_gigachat35_no_arguments_with_or_without_a_blank_line(body: str) -> None:
    """SGLang reads {} for each (its regex skips whatever the invoke holds); DSML's blank line reads too."""
    text = '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="now">' + body + "</｜GCML｜invoke>\n</｜GCML｜tool_calls>"
    assert read("gigachat35", text) == (None, [("now", {})])


def test_gigachat35_compact_block_without_newlines() -> None:
    """vLLM's later gigachat35 tests write the tags back to back; SGLang reads them."""
    text = ('<｜GCML｜tool_calls><｜GCML｜invoke name="get_weather"><｜GCML｜parameter name="location" string="true">'
            'Tokyo</｜GCML｜parameter><｜GCML｜parameter name="days" string="false">2</｜GCML｜parameter>'
            "</｜GCML｜invoke></｜GCML｜tool_calls>")
    assert read("gigachat35", text) == (None, [("get_weather", {"location": "Tokyo", "days": 2})])


def test_gigachat35_values_follow_the_schema_where_the_attribute_disagrees() -> None:
    """string="true" over an integer parameter is that integer here (SGLang keeps the text "3": a deliberate
    difference, the schema says the type); string="false" text that is no JSON stays text where the schema
    admits strings (SGLang: the same)."""
    text = gcml(invoke("get_weather", ("location", "a b", False), ("days", "3", True), ("note", "null", False)))
    assert read("gigachat35", text) == (None, [("get_weather", {"location": "a b", "days": 3, "note": None})])


def test_gigachat35_text_after_the_block_is_content() -> None:
    """SGLang drops it (its content is the text before the block); a reader never drops model output."""
    text = gcml(invoke("now")) + "\n\nDone."
    assert read("gigachat35", text) == ("Done.", [("now", {})])


@pytest.mark.parametrize("text", [
    'text <｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_weathe',  # cut by max_tokens
    '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_weather">\n<｜GCML｜parameter name="location" string="true">'
    "Paris</｜GCML｜invoke>\n</｜GCML｜tool_calls>",  # a parameter never closed
    "<｜GCML｜tool_calls>\n</｜GCML｜tool_calls>",  # no invoke
])
def test_gigachat35_cut_or_malformed_block_stays_content(text: str) -> None:
    assert read("gigachat35", text) == (text.strip(), [])


@pytest.mark.parametrize("stop", ["<|message_sep|>", "</s>"])
def test_gigachat35_turn_end_tokens_are_not_content(stop: str) -> None:
    """SGLang strips a trailing <|message_sep|> or </s> from the content; both end GigaChat 3.5's turn (its
    template closes a message with </s>, or <|message_sep|> when a function result follows)."""
    fam = FAMILIES["gigachat35"]
    v = vocab(fam.vocab)
    got = request_for("gigachat35", fam.parser, tools=TOOLS).parse(v.encode(fam.thinking + "Answer." + stop))
    assert (got.content, got.tool_calls, got.finish_reason) == ("Answer.", (), "stop")


def test_gigachat35_call_to_an_undeclared_tool_stays_content() -> None:
    text = gcml(invoke("unknown_fn", ("a", "1", False)))
    assert read("gigachat35", text) == (text, [])


def test_gigachat35_parameter_name_holding_the_marker_is_a_clear_error() -> None:
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "a｜GCML｜b": {"type": "string"}}, "required": ["a｜GCML｜b"]}}}
    with pytest.raises(ValueError, match="tool 'f': parameter name 'a｜GCML｜b' cannot be written in GCML"):
        build_tool_constraint([tool], "required", format="gigachat35")


# -- Spark-X2.5


def test_spark25_call_after_content_and_text_between_and_after_calls() -> None:
    text = "Sure.\n" + spark("get_weather", ("location", "Paris"), ("days", "3")) + "\n" + spark("now") + "\ndone"
    assert read("spark25", text) == ("Sure.\n\ndone", [("get_weather", {"location": "Paris", "days": 3}),
                                                      ("now", {})])


def test_spark25_values_typed_by_the_schema() -> None:
    text = render("spark25", [("get_weather", TYPED)])
    assert read("spark25", text) == (None, [("get_weather", TYPED)])
    # as SGLang converts them: a float written for an integer stays that float, "null" under a nullable type is null
    text = spark("get_weather", ("location", "x"), ("days", "3.0"), ("note", "null"), ("flag", "false"))
    assert read("spark25", text) == (None, [("get_weather", {"location": "x", "days": 3.0, "note": None,
                                                              "flag": False})])


def test_spark25_a_string_parameter_keeps_its_text() -> None:
    """"007" stays "007" (SGLang: the same); "null" under a string-only parameter is the text "null" (SGLang
    returns None there whatever the type: a deliberate difference, the schema admits no null)."""
    text = spark("get_weather", ("location", "007"), ("note", "007"))
    assert read("spark25", text) == (None, [("get_weather", {"location": "007", "note": "007"})])
    assert read("spark25", spark("get_weather", ("location", "null"))) == (None, [("get_weather",
                                                                                    {"location": "null"})])


def test_spark25_undeclared_parameters_and_booleans_as_digits_read_as_json() -> None:
    """An undeclared parameter is typed as every XML format types it (the tool's additionalProperties: any JSON),
    and a boolean written 1 is that number, left to the schema check (SGLang: "42" and True)."""
    text = spark("get_weather", ("location", "x"), ("extra", "42"), ("flag", "1"))
    assert read("spark25", text) == (None, [("get_weather", {"location": "x", "extra": 42, "flag": 1})])


@pytest.mark.parametrize("text", [
    "<tool_call>get_weather<arg_key>location</arg_key><arg_value>B</arg_value><arg_key>days</arg_key>"
    "<arg_value>2</arg_value></tool_call>",                          # SGLang's own tests: no newlines
    "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>B</arg_value>\n<arg_key>days</arg_key>\n"
    "<arg_value>2</arg_value>\n</tool_call>",                        # GLM-4.5's newline inside a pair (SGLang: {})
])
def test_spark25_layouts_beside_the_documented_one(text: str) -> None:
    assert read("spark25", text) == (None, [("get_weather", {"location": "B", "days": 2})])


@pytest.mark.parametrize("text", [
    "x<tool_call></tool_call>y",                                     # no name (SGLang: content)
    "x <tool_call>get_weather\n<arg_key>location</arg_key><arg_val",  # cut by max_tokens
    "<tool_call>get_weather\n<arg_key>location</arg_key><arg_value>B</tool_call>",  # value never closed
])
def test_spark25_cut_or_malformed_call_stays_content(text: str) -> None:
    assert read("spark25", text) == (text, [])


def test_spark25_call_to_an_undeclared_tool_stays_content() -> None:
    text = spark("unknown_fn", ("a", "1"))
    assert read("spark25", text) == (text, [])


# -- both: hostile marker text, streaming = whole, the constraint round trip


HOSTILE = {
    "gigachat35": 'x <｜GCML｜tool_calls> <｜GCML｜invoke name="now"> </｜GCML｜parameter> y',
    "spark25": "x <tool_call>now</tool_call> <arg_value> </arg_value> y",
}


@pytest.mark.parametrize("fmt", FORMATS)
def test_marker_text_inside_an_argument_never_opens_a_call(fmt: str) -> None:
    """The markers' characters written as ordinary tokens, inside a string value and in the content before a
    call: one call, its value exactly that text, the content exactly that text."""
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    hostile = HOSTILE[fmt]
    spelled = [t for ch in hostile for t in v.encode(ch)]  # a character at a time: no control token
    assert v.decode(spelled) == hostile and not set(spelled) & v.special_token_ids
    marker = "<｜GCML｜parameter" if fmt == "gigachat35" else "<arg_value>"
    call = render(fmt, [("get_weather", {"location": "PLACEHOLDER"})])
    before, after = call.split("PLACEHOLDER")
    ids = spelled + v.encode("\n\n" + before) + spelled + v.encode(after)
    assert marker in v.decode(ids)
    r = get_tool_reader(fmt, TOOLS).read_ids(ids, v)
    assert r.content == hostile
    assert [(c.name, json.loads(c.arguments)) for c in r.calls] == [("get_weather", {"location": hostile})]


def _whole_and_streams(fmt: str, ids: list[int], **kw):
    fam = FAMILIES[fmt]
    whole = request_for(fmt, fam.parser, tools=TOOLS, **kw).parse(ids)
    rng = random.Random(fmt)
    chunkings = [range(len(ids)), range(0, len(ids), 3), range(0, len(ids), 7)]
    chunkings += [sorted(rng.sample(range(1, len(ids)), 8)) for _ in range(4)]
    for cuts in chunkings:
        deltas, _ = stream_chunks(request_for(fmt, fam.parser, tools=TOOLS, **kw), ids, cuts, give_text=False)
        yield whole, [d for d in deltas if d]


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_chunking_joins_to_the_whole_parse(fmt: str) -> None:
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    text = fam.thinking + render(fmt, [("get_weather", TYPED), ("now", {})], "Let me check.")
    ids = v.encode(text)
    for whole, deltas in _whole_and_streams(fmt, ids):
        assert whole.content == "Let me check." and [c.name for c in whole.tool_calls] == ["get_weather", "now"]
        assert [json.loads(c.arguments) for c in whole.tool_calls] == [TYPED, {}]
        assert "".join(d.get("reasoning") or d.get("reasoning_content") or "" for d in deltas) == whole.reasoning
        assert "".join(d.get("content") or "" for d in deltas) == whole.content
        calls: dict[int, dict[str, str]] = {}
        for d in deltas:
            for tc in d.get("tool_calls") or ():
                c = calls.setdefault(tc["index"], {"name": "", "arguments": ""})
                c["name"] += tc.get("function", {}).get("name") or ""
                c["arguments"] += tc.get("function", {}).get("arguments") or ""
        assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == [
            (c.name, json.loads(c.arguments)) for c in whole.tool_calls]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_cut_call_streams_as_the_whole_parse_reads_it(fmt: str) -> None:
    """Output cut by max_tokens inside the second call: the first call is a call, the cut one content, on
    every chunking."""
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    full = render(fmt, [("now", {}), ("get_weather", {"location": "Paris", "days": 2})])
    text = fam.thinking + full[:full.index("Paris") + 3]
    ids = v.encode(text)
    for whole, deltas in _whole_and_streams(fmt, ids):
        assert [c.name for c in whole.tool_calls] == (["now"] if fmt == "spark25" else [])
        assert "Par" in (whole.content or "")
        assert "".join(d.get("content") or "" for d in deltas) == whole.content
        named = [tc["function"]["name"] for d in deltas for tc in d.get("tool_calls") or () if "id" in tc]
        assert named == [c.name for c in whole.tool_calls]


@pytest.mark.parametrize("fmt", FORMATS)
def test_required_calls_as_the_model_writes_them_pass_the_grammar_and_read_back(fmt: str) -> None:
    """The rendered calls (typed, nested, null, empty arguments) pass the required constraint token by token on
    the family's vocabulary, and the reader returns exactly them."""
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    calls = [("get_weather", TYPED), ("now", {})]
    text = render(fmt, calls)
    c = build_tool_constraint(TOOLS, "required", format=fmt, vocabulary=v)
    finish(fam, c, fam.thinking + text)
    got = request_for(fmt, fam.parser, tools=TOOLS, tool_choice="required").parse(v.encode(fam.thinking + text))
    assert [(x.name, json.loads(x.arguments)) for x in got.tool_calls] == calls and not got.content
