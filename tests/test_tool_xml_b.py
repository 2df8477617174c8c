"""The xml_b tool formats (issue 20 item 2): ling3, poolside_v1, deepseek_v41, dots, ripple, plamo3, k2_horizon,
cohere_command3 / cohere_command4.

The expected results are the facts of vLLM 0.34's own tests for these parsers
(``tests/tool_parsers/test_<name>_tool_parser.py``: which text is a call, its arguments typed by the schema,
what stays content), written as our own cases in the layout each model's template writes (the renderers of
``template_render.py``). The constraint round trip, streaming = whole and the hostile cases run for these
formats through the shared matrices (``test_tool_conformance.py``, ``test_parser_stream.py``,
``test_tool_formats.py``, ``test_hostile_tools.py``), which take every family of ``support.FAMILIES``; the
differential against vLLM's parsers is ``tests/integration/test_vllm_tool_parity.py``.
"""

from __future__ import annotations

import json

import pytest
from support import FAMILIES, stream_chunks, request_for, vocab
from template_render import render

from thinkgate.structured_output.tools import get_tool_format, get_tool_reader
from thinkgate.structured_output.tools.request import normalize_tool_request

LOOKUP = [
    {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}, "limit": {"type": "integer"}, "enabled": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}},
]


def read(fmt: str, tools, text: str):
    r = get_tool_reader(fmt, tools).read(text)
    return r.content, [(c.name, json.loads(c.arguments)) for c in r.calls]


# -- names that are another format's syntax


@pytest.mark.parametrize(("name", "same_as"), [("ling3", "glm47"), ("poolside_v1", "glm45"),
                                               ("deepseek_v4_1", "deepseek_v41")])
def test_alias_names_are_the_format_whose_syntax_they_write(name: str, same_as: str) -> None:
    """vLLM 0.34: ling3's parser is GLM-4.7's (structural tag glm_4_7); poolside_v1's is a GLM-4.5 parser."""
    assert get_tool_format(name) is get_tool_format(same_as)


# -- K2 Horizon (tool_call_format "xml", its default)


def test_k2_horizon_group_of_calls_typed_by_the_schema() -> None:
    text = render("k2_horizon", [("lookup", {"query": "123", "limit": 3}), ("ping", {})], "Before ") + " after."
    assert read("k2_horizon", LOOKUP, text) == ("Before  after.", [("lookup", {"query": "123", "limit": 3}),
                                                                  ("ping", {})])


@pytest.mark.parametrize("text", ["<ifm|tool_calls><ifm|tool_call>ping",
                                  "<ifm|tool_calls><ifm|tool_call>ping</ifm|tool_call>",
                                  "<ifm|tool_calls>junk</ifm|tool_calls>"])
def test_k2_horizon_incomplete_or_malformed_group_is_content(text: str) -> None:
    assert read("k2_horizon", LOOKUP, text) == (text, [])


def test_k2_horizon_whitespace_around_the_group_is_no_content() -> None:
    text = " \n" + render("k2_horizon", [("ping", {})]) + "\t "
    assert read("k2_horizon", LOOKUP, text) == (None, [("ping", {})])


# -- dots


def test_dots_values_typed_by_the_schema_through_a_ref() -> None:
    tool = {"type": "function", "function": {"name": "set_location", "parameters": {
        "type": "object", "properties": {"location": {"$ref": "#/$defs/Location"}, "days": {"type": "integer"},
                                         "include_weather": {"type": "boolean"}},
        "$defs": {"Location": {"type": "object", "properties": {"city": {"type": "string"}}}}}}}
    args = {"location": {"city": "Shanghai"}, "days": 3, "include_weather": True}
    assert read("dots", [tool], render("dots", [("set_location", args)], "ok")) == ("ok", [("set_location", args)])


def test_dots_invokes_of_one_block_and_of_two_blocks() -> None:
    tools = [{"type": "function", "function": {"name": "search", "parameters": {
                 "type": "object", "properties": {"query": {"type": "string"}}}}},
             {"type": "function", "function": {"name": "open", "parameters": {
                 "type": "object", "properties": {"id": {"type": "integer"}}}}}]
    text = render("dots", [("search", {"query": "chairs"}), ("open", {"id": 7})]) + render("dots", [
        ("search", {"query": "tables"})])
    assert read("dots", tools, text) == (None, [("search", {"query": "chairs"}), ("open", {"id": 7}),
                                                ("search", {"query": "tables"})])


def test_dots_call_to_an_undeclared_tool_stays_content() -> None:
    text = render("dots", [("ghost", {"query": "chairs"})])
    assert read("dots", LOOKUP, text) == (text, [])


# -- poolside_v1 (GLM-4.5's layout)


WRITE_FILE = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"content": {"type": "string"}, "mode": {"type": "integer"}},
    "required": ["content"]}}}]


def test_poolside_string_value_keeps_its_whitespace_and_numbers_are_read_stripped() -> None:
    body = "    def f():\n        return 1\n"
    text = ("<tool_call>write_file\n<arg_key>content</arg_key>\n<arg_value>" + body + "</arg_value>\n"
            "<arg_key>mode</arg_key>\n<arg_value> 420 </arg_value>\n</tool_call>")
    assert read("poolside_v1", WRITE_FILE, text) == (None, [("write_file", {"content": body, "mode": 420})])


def test_poolside_call_without_a_name_is_content() -> None:
    assert read("poolside_v1", WRITE_FILE, "<tool_call>   </tool_call>") == ("<tool_call>   </tool_call>", [])


# -- ripple


def test_ripple_calls_framed_by_newlines() -> None:
    calls = [("lookup", {"query": "Paris"}), ("ping", {})]
    assert read("ripple", LOOKUP, render("ripple", calls, "Sure.")) == ("Sure.", calls)


def test_ripple_markers_are_text_so_a_vocabulary_without_them_takes_the_constraint() -> None:
    """Ripple's <tool_call> is plain text: DeepSeek V4's table (no such token) takes its constraint."""
    from thinkgate.structured_output.tools import build_tool_constraint
    v = vocab("deepseek_v4")
    assert "<tool_call>" not in v.special_tokens
    assert build_tool_constraint(LOOKUP, "auto", format="ripple", vocabulary=v,
                                 strictness="parameter") is not None


# -- DeepSeek V4.1


def test_deepseek_v41_reads_the_spaced_tags_and_not_v4s() -> None:
    args = {"query": "x", "limit": 2}
    v41 = render("deepseek_v41", [("lookup", args)], "Hi")
    assert read("deepseek_v41", LOOKUP, v41) == ("Hi", [("lookup", args)])
    v4 = render("deepseek_v4", [("lookup", args)], "Hi")
    assert read("deepseek_v41", LOOKUP, v4) == (v4, [])
    assert read("deepseek_v4", LOOKUP, v41) == (v41, [])


# -- PLaMo 3


def test_plamo3_calls_back_to_back_in_one_block() -> None:
    calls = [("lookup", {"query": "a", "enabled": False}), ("ping", {})]
    assert read("plamo3", LOOKUP, render("plamo3", calls, "Hi")) == ("Hi", calls)


def test_plamo3_stream_token_by_token_is_the_whole_parse() -> None:
    """Every PLaMo marker ends with the token ":plamo|>", so a block cannot be decided at the first one (the
    stream holds it to the block's whole end literal)."""
    fam = FAMILIES["plamo3"]
    v = vocab(fam.vocab)
    ids = v.encode(render("plamo3", [("get_weather", {"location": "Paris"}), ("get_time", {"tz": "UTC"})], "Hi"))
    whole = request_for("plamo3", None, tool_choice="auto").parse(ids)
    assert [c.name for c in whole.tool_calls] == ["get_weather", "get_time"] and whole.content == "Hi"
    deltas, _ = stream_chunks(request_for("plamo3", None, tool_choice="auto"), ids, range(len(ids)), False)
    content = "".join(d.get("content") or "" for d in deltas if d)
    calls = [tc for d in deltas if d for tc in d.get("tool_calls") or ()]
    assert content == "Hi"
    assert [tc["function"]["name"] for tc in calls if "id" in tc] == ["get_weather", "get_time"]


def test_plamo3_marker_pieces_spelled_as_text_are_not_a_call() -> None:
    """The same characters in ordinary tokens (each piece of a marker encoded alone is text) read as content."""
    fam = FAMILIES["plamo3"]
    v = vocab(fam.vocab)
    text = render("plamo3", [("ping", {})])
    ids = [t for ch in text for t in v.encode(ch)]  # one character at a time: no control token
    assert not any(t in v.special_token_ids for t in ids)
    r = get_tool_reader("plamo3", LOOKUP).read_ids(ids, v)
    assert r.calls == () and r.content == text


# -- layouts vLLM's tests read that the templates do not write (newlines left out, keys reordered, compact JSON):
# the reader reads them as vLLM 0.34's parsers do (checked on those parsers); the constraint stays the template's


@pytest.mark.parametrize(("fmt", "text"), [
    ("poolside_v1", "<tool_call>lookup<arg_key>query</arg_key><arg_value>Paris</arg_value></tool_call>"),
    ("dots", '<dots_function_call><invoke name="lookup"><parameter name="query">Paris</parameter></invoke>'
             "</dots_function_call>"),
    ("ripple", '<tool_call>\n{"arguments": {"query": "Paris"}, "name": "lookup"}\n</tool_call>'),
    ("cohere_command3", '<|START_ACTION|>[{"tool_call_id":"0","tool_name":"lookup","parameters":{"query":"Paris"}}]'
                        "<|END_ACTION|>"),
])
def test_layouts_vllm_reads_beside_the_templates(fmt: str, text: str) -> None:
    assert read(fmt, LOOKUP, text) == (None, [("lookup", {"query": "Paris"})])


V41_UNDER_V4_NAME = ('\n\n<｜DSML｜ tool_calls>\n<｜DSML｜ invoke name="lookup">\n<｜DSML｜ parameter name="query" '
                     'string="true">Paris</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ tool_calls>')


@pytest.mark.parametrize("close", ["</｜DSML｜ tool_calls>", "</｜DSML｜ calls>"])
def test_deepseek_v41_block_under_v4s_name(close: str) -> None:
    """vLLM 0.34's deepseek_v41 (and its own tests) also open a block with V4's name in V4.1's spacing
    (``<｜DSML｜ tool_calls>``): the reader takes it, closed with either name; V4's unspaced tags stay content."""
    text = V41_UNDER_V4_NAME.replace("</｜DSML｜ tool_calls>", close)
    assert read("deepseek_v41", LOOKUP, text) == (None, [("lookup", {"query": "Paris"})])
    assert read("deepseek_v41", LOOKUP, "Hi " + text + " bye") == ("Hi \n\n bye", [("lookup", {"query": "Paris"})])


def test_deepseek_v41_block_under_v4s_name_streamed_token_by_token() -> None:
    """Streamed in any chunking, the block under V4's name gives the whole read's call and content (the live
    reader of a constrained request takes the second spelling too)."""
    fam = FAMILIES["deepseek_v41"]
    v = vocab(fam.vocab)
    ids = v.encode("Hi" + V41_UNDER_V4_NAME + "\nbye")
    whole = request_for("deepseek_v41", None, tools=LOOKUP, tool_choice="auto").parse(ids)
    assert [(c.name, json.loads(c.arguments)) for c in whole.tool_calls] == [("lookup", {"query": "Paris"})]
    for choice, cuts in [("auto", range(len(ids))), ("auto", []), ("auto", range(0, len(ids), 3)),
                         ("required", range(len(ids)))]:  # required: the call's arguments go out as written
        deltas, _ = stream_chunks(request_for("deepseek_v41", None, tools=LOOKUP, tool_choice=choice), ids, cuts,
                                  False)
        calls = [tc for d in deltas if d for tc in d.get("tool_calls") or ()]
        assert [tc["function"]["name"] for tc in calls if "id" in tc] == ["lookup"]
        assert json.loads("".join(tc["function"].get("arguments") or "" for tc in calls)) == {"query": "Paris"}
        assert "".join(d.get("content") or "" for d in deltas if d) == whole.content


def test_deepseek_v41_mismatched_or_unspaced_openings_stay_content() -> None:
    """Only the two spaced openings read: V4's own (unspaced) block and a block that never closes are content."""
    v4 = V41_UNDER_V4_NAME.replace("｜DSML｜ ", "｜DSML｜")
    assert read("deepseek_v41", LOOKUP, v4) == (v4.strip(), [])
    cut = V41_UNDER_V4_NAME[:V41_UNDER_V4_NAME.rindex("</｜DSML｜ invoke>")]
    assert read("deepseek_v41", LOOKUP, cut) == (cut.strip(), [])


def test_deepseek_v41_constraint_writes_the_templates_calls_only() -> None:
    """The second spelling is read, never written: the required constraint spells "<｜DSML｜ calls>"."""
    fam = FAMILIES["deepseek_v41"]
    tag = json.dumps(get_tool_format("deepseek_v41").structural_tag(
        normalize_tool_request(LOOKUP, "required"), vocabulary=vocab(fam.vocab)), ensure_ascii=False)
    assert " calls>" in tag and "tool_calls" not in tag


# -- Cohere Command (cohere_command3, cohere_command4: one action syntax, cohere_melody's renderers for both)


def test_cohere_action_block_calls_with_the_ids_the_model_wrote() -> None:
    """cohere_melody (vLLM's Cohere parser) returns each call with its tool_call_id as the id."""
    text = render("cohere_command3", [("lookup", {"query": "Paris", "limit": 3}), ("ping", {})])
    for name in ("cohere_command3", "cohere_command4"):
        r = get_tool_reader(name, LOOKUP).read(text)
        assert [(c.id, c.name, json.loads(c.arguments)) for c in r.calls] == [
            ("0", "lookup", {"query": "Paris", "limit": 3}), ("1", "ping", {})]
        assert r.content is None
