"""The xml_a group of vLLM 0.34 tool-parser names as thinkgate tool formats (issue 20, item 2).

Names and what they are (``formats.py``, block ``xml_a``):

- aliases: ``ernie45`` of ``hermes`` (JSON in ``<tool_call>`` lines), ``step3p5`` and ``step5`` of ``qwen3_6``
  (vLLM runs its Qwen3 XML engine for both), ``zaya_xml`` of ``zaya`` (vLLM's own alias);
- declarative formats: ``seed_oss``, ``zaya``, ``mimo``, ``longcat``, ``hunyuan_a13b``, ``hy_v3``, ``hy_v4``,
  ``step3``, ``minicpm5`` (plain text, no control tokens: a text trigger).

The whole-reader cases are written from the facts of vLLM's tests for these parsers
(vllm-project/vllm tests/tool_parsers/test_<name>*_tool_parser.py: the model outputs and the calls
vLLM expects), our own strings and expectations. Layouts vLLM reads beside the template's that the shared
lenient reader (branch ``loose``) reads are cases too; the one it does not is listed with
``xfail(strict=True)``. The template round trip (calls the model's template writes are accepted token by
token and read back), the hostile-input and the stream-equals-whole properties run for these formats in the shared suites
(``test_tool_conformance.py``, ``test_hostile_tools.py``, ``test_tool_formats.py``, ``test_parser_stream.py``),
which pick up every format, renderer and family.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import FAMILIES, vocab
from template_render import RENDERERS, render

from thinkgate.structured_output.tools import (MarkedDecoder, build_tool_constraint, get_tool_format, get_tool_reader,
                                               list_tool_formats)


def _tool(tool_name: str, **props: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool_name, "parameters": {"type": "object", "properties": props}}}


S, I = {"type": "string"}, {"type": "integer"}
WEATHER = _tool("get_weather", location=S, unit=S, city=S, date=S)
CURRENT = _tool("get_current_weather", city=S, state=S, unit={"type": "string", "enum": ["fahrenheit", "celsius"]})
AREA = _tool("calculate_area", shape=S, dimensions={"type": "object"}, precision=I)
DATE = _tool("get_current_date")
USER = _tool("register_user", name=S, age=I, address={"type": "object"}, role={"type": ["string", "null"]},
             passed_test={"type": "boolean"}, aliases={"type": "array", "items": S})
A, B = _tool("a", x=I), _tool("b", x=I)
TOOLS = [WEATHER, CURRENT, AREA, DATE, USER, A, B]

XML_A = ("seed_oss", "zaya", "mimo", "longcat", "hunyuan_a13b", "hy_v3", "hy_v4", "step3", "minicpm5")
ALIASES = {"ernie45": "hermes", "step3p5": "qwen3_6", "step5": "qwen3_6", "zaya_xml": "zaya"}


def read(fmt: str, text: str) -> tuple[str | None, list[tuple[str, Any]]]:
    got = get_tool_reader(fmt, TOOLS).read(text)
    return got.content, [(c.name, json.loads(c.arguments)) for c in got.calls]


def test_every_name_of_the_group_is_registered_and_aliases_share_their_format() -> None:
    names = set(list_tool_formats(aliases=True))
    assert set(XML_A) | set(ALIASES) <= names
    for alias, fmt in ALIASES.items():
        assert get_tool_format(alias) is get_tool_format(fmt)


# -- whole reader, cases from vLLM's tests ------------------------------------------------------------

BARCELONA = ("get_weather", {"location": "Barcelona, Spain"})
DALLAS = ("get_current_weather", {"city": "Dallas", "state": "TX", "unit": "fahrenheit"})
Q_DALLAS = ("<tool_call>\n<function=get_current_weather>\n<parameter=city>\nDallas\n</parameter>\n<parameter=state>\nTX\n"
            "</parameter>\n<parameter=unit>\nfahrenheit\n</parameter>\n</function>\n</tool_call>")
HY3_BEIJING = ("<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
               "<arg_key>date</arg_key>\n<arg_value>2026-03-30</arg_value>\n</tool_call>\n")

CASES: list[tuple[str, str, str | None, list[tuple[str, Any]]]] = [
    # (format, model output, content, calls)
    ("seed_oss", "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n"
                 "</function>\n</seed:tool_call>", None, [BARCELONA]),
    ("seed_oss", "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Barcelona, Spain</parameter>\n"
                 "<parameter=unit>celsius</parameter>\n</function>\n</seed:tool_call>",
     None, [("get_weather", {"location": "Barcelona, Spain", "unit": "celsius"})]),
    ("step3p5", Q_DALLAS, None, [DALLAS]),
    ("step3p5", "Sure! Let me check the weather for you." + Q_DALLAS, "Sure! Let me check the weather for you.",
     [DALLAS]),
    ("step3p5", Q_DALLAS + "\n" + Q_DALLAS.replace("Dallas", "Orlando").replace("TX", "FL"), None,
     [DALLAS, ("get_current_weather", {"city": "Orlando", "state": "FL", "unit": "fahrenheit"})]),
    ("step5", "<tool_call>\n<function=calculate_area>\n<parameter=shape>\nrectangle\n</parameter>\n<parameter=dimensions>\n"
              '{"width": 10, \n "height": 20}\n</parameter>\n<parameter=precision>\n2\n</parameter>\n</function>\n</tool_call>',
     None, [("calculate_area", {"shape": "rectangle", "dimensions": {"width": 10, "height": 20}, "precision": 2})]),
    ("ernie45", '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Beijing"}}\n</tool_call>\n'
                '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Guangzhou", "unit": "c"}}\n</tool_call>\n',
     None, [("get_weather", {"location": "Beijing"}), ("get_weather", {"location": "Guangzhou", "unit": "c"})]),
    ("hunyuan_a13b", '<tool_calls>[{"name": "get_weather", "arguments": {"city": "San Francisco", "unit": "celsius"}}]'
                     "</tool_calls>", None, [("get_weather", {"city": "San Francisco", "unit": "celsius"})]),
    ("hunyuan_a13b", '<tool_calls>[{"name": "get_weather", "arguments": {"city": "San Francisco"}}, {"name": '
                     '"register_user", "arguments": {"name": "John Doe", "age": 37, "address": {"city": "San Francisco", '
                     '"state": "CA"}, "role": null, "passed_test": true, "aliases": ["John", "Johnny"]}}]</tool_calls>',
     None, [("get_weather", {"city": "San Francisco"}),
            ("register_user", {"name": "John Doe", "age": 37, "address": {"city": "San Francisco", "state": "CA"},
                               "role": None, "passed_test": True, "aliases": ["John", "Johnny"]})]),
    ("hunyuan_a13b", 'I will call the tool now. <tool_calls>[{"name": "get_weather", "arguments": {"city": "Boston"}}]'
                     "</tool_calls>", "I will call the tool now.", [("get_weather", {"city": "Boston"})]),
    ("hunyuan_a13b", '<tool_calls>[{"name": "get_weather", "arguments": {"city": "北京"}}]</tool_calls>', None,
     [("get_weather", {"city": "北京"})]),
    ("hunyuan_a13b", '<tool_calls>[{"name": "a", "arguments": {}}, {"name": "b", "arguments": {"x": 42}}]</tool_calls>',
     None, [("a", {}), ("b", {"x": 42})]),
    # vLLM drops text after the calls; thinkgate keeps it as content (the parity harness's text-after-calls)
    ("hunyuan_a13b", '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Seattle"}}]</tool_calls>\nThank you!',
     "Thank you!", [("get_weather", {"city": "Seattle"})]),
    ("hy_v3", "<tool_calls>\n<tool_call>get_current_date<tool_sep>\n</tool_call>\n</tool_calls>", None,
     [("get_current_date", {})]),
    ("hy_v3", "<tool_calls>\n" + HY3_BEIJING + "</tool_calls>", None,
     [("get_weather", {"city": "Beijing", "date": "2026-03-30"})]),
    ("hy_v3", "Checking.<tool_calls>\n<tool_call>get_current_date<tool_sep>\n</tool_call>\n</tool_calls>", "Checking.",
     [("get_current_date", {})]),
    ("hy_v3", "<tool_calls>\n" + HY3_BEIJING + HY3_BEIJING.replace("Beijing", "Hangzhou") + "</tool_calls>", None,
     [("get_weather", {"city": "Beijing", "date": "2026-03-30"}), ("get_weather", {"city": "Hangzhou", "date": "2026-03-30"})]),
    ("hy_v4", "<tool_calls><tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing</arg_value></tool_call>"
              "<tool_call>get_current_date</tool_call></tool_calls>", None,
     [("get_weather", {"city": "Beijing"}), ("get_current_date", {})]),
    ("step3", '<｜tool_calls_begin｜>\n<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="calculate_area">\n'
              '<steptml:parameter name="shape">    if x:\n</steptml:parameter>\n<steptml:parameter name="precision"> 4 '
              '</steptml:parameter>\n<steptml:parameter name="dimensions">{"nested": "value"}</steptml:parameter>\n'
              "</steptml:invoke><｜tool_call_end｜>\n<｜tool_calls_end｜>", None,
     # a string value keeps its whitespace, a typed one is read past it (vLLM's TestStep3ParameterWhitespace)
     [("calculate_area", {"shape": "    if x:\n", "precision": 4, "dimensions": {"nested": "value"}})]),
    ("mimo", "Here is the result:\n<tool_call><function=get_weather><parameter=location>pwd && ls</parameter>"
             "<parameter=unit>line1\nline2</parameter></function></tool_call>", "Here is the result:",
     [("get_weather", {"location": "pwd && ls", "unit": "line1\nline2"})]),
    ("longcat", '<longcat_tool_call>\n{"name": "get_weather", "arguments": {"city": "绿色"}}\n</longcat_tool_call>', None,
     [("get_weather", {"city": "绿色"})]),
    ("minicpm5", '<function name="get_weather"><param name="city">北京</param></function>\n'
                 '<function name="register_user"><param name="aliases">[7,8,9]</param><param name="passed_test">false'
                 "</param></function>\n", None,
     [("get_weather", {"city": "北京"}), ("register_user", {"aliases": [7, 8, 9], "passed_test": False})]),
    ("minicpm5", '<function name="get_current_date"></function>\n', None, [("get_current_date", {})]),
    # vLLM drops all content beside MiniCPM5's calls; thinkgate keeps it
    ("minicpm5", 'Intro before.\n<function name="get_weather"><param name="city">上海</param><param name="date">'
                 "2024-06-27</param></function>\nOutro after.\n", "Intro before.\n\nOutro after.",
     [("get_weather", {"city": "上海", "date": "2024-06-27"})]),
    ("minicpm5", '<function name="nope"><param name="x">1</param></function>\n', '<function name="nope"><param '
                 'name="x">1</param></function>', []),
    ("zaya_xml", "Plan first.\n<zyphra_tool_call>\n<function=get_weather>\n<parameter=city>\nzaya cache\n</parameter>\n"
                 "</function>\n</zyphra_tool_call>", "Plan first.", [("get_weather", {"city": "zaya cache"})]),
]

# layouts vLLM's parser reads beside the template's, read by the shared lenient reader (whitespace in a
# literal matches any run, also none; a JSON call object read by its keys)
CASES += [
    ("hy_v3", "<tool_calls><tool_call>get_current_date<tool_sep></tool_call></tool_calls>", None,
     [("get_current_date", {})]),
    ("longcat", '<longcat_tool_call>\n{"name":"get_weather","arguments":{"city":"x"}}\n</longcat_tool_call>', None,
     [("get_weather", {"city": "x"})]),
    ("hunyuan_a13b", '<tool_calls>[{"name":"get_weather","arguments":{"city":"x"}}]</tool_calls>', None,
     [("get_weather", {"city": "x"})]),
    ("ernie45", '<tool_call>{"arguments": {"location": "Beijing"}, "name": "get_weather"}</tool_call>', None,
     [("get_weather", {"location": "Beijing"})]),
]

# a layout vLLM reads that thinkgate leaves as content: MiMo-V2-Flash's newlines between the tags (the
# lenient reader relaxes whitespace where the literal has some, and MiMo-V2.6's compact literal, the
# syntax vLLM's own structural tag for ``mimo`` writes, has none between its tags)
LENIENT: list[tuple[str, str, str | None, list[tuple[str, Any]]]] = [
    ("mimo", "<tool_call>\n<function=get_weather>\n<parameter=location>pwd && ls</parameter>\n</function>\n</tool_call>",
     None, [("get_weather", {"location": "pwd && ls"})]),
]


@pytest.mark.parametrize(("fmt", "text", "content", "want"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_whole_reader_reads_the_outputs_of_vllms_tests(fmt: str, text: str, content: str | None,
                                                       want: list[tuple[str, Any]]) -> None:
    assert read(fmt, text) == (content, want)


@pytest.mark.parametrize(("fmt", "text", "content", "want"), [
    pytest.param(*c, marks=pytest.mark.xfail(strict=True, reason="MiMo-V2-Flash layout: no whitespace in the literal"))
    for c in LENIENT], ids=[f"{c[0]}-{i}" for i, c in enumerate(LENIENT)])
def test_layout_variants_vllm_reads(fmt: str, text: str, content: str | None, want: list[tuple[str, Any]]) -> None:
    assert read(fmt, text) == (content, want)


@pytest.mark.parametrize("fmt", XML_A)
def test_text_that_breaks_the_syntax_stays_content(fmt: str) -> None:
    """A call cut short, or to an undeclared tool, is content (never an exception)."""
    text = render(fmt, [("get_weather", {"city": "Paris"})], "Hi")
    for broken in (text[:-5], text.replace("get_weather", "nope")):
        got = get_tool_reader(fmt, TOOLS).read(broken)
        assert got.calls == () and got.content == broken.strip()


# -- streaming = whole, for random chunkings of the template's ids -------------------------------------

@pytest.mark.parametrize("renderer", [r for r, x in RENDERERS.items() if x.format in XML_A or r == "step3p5"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_stream_joins_to_the_whole_parse(renderer: str, data: st.DataObject) -> None:
    fmt = RENDERERS[renderer].format
    v = vocab(FAMILIES[fmt].vocab)
    calls = [("get_weather", {"city": "Zürich", "date": "a ]}, {b"}), ("calculate_area", {"precision": 3})]
    ids = v.encode(render(renderer, calls, data.draw(st.sampled_from(["", "Let me check."]))))
    reader = get_tool_reader(fmt, TOOLS)
    whole = reader.read_ids(ids, v)
    assert [(c.name, json.loads(c.arguments)) for c in whole.calls] == calls
    cuts = sorted(data.draw(st.sets(st.integers(1, max(1, len(ids) - 1)), max_size=12)))
    stream, dec = reader.stream(v), MarkedDecoder(v)
    content, streamed = [], []
    for a, b in zip([0, *cuts], [*cuts, len(ids)]):
        d = stream.feed(dec.feed(ids[a:b], final=b == len(ids)))
        content.append(d.content)
        streamed.extend(d.calls)
    d = stream.finish()
    content.append(d.content)
    streamed.extend(d.calls)
    assert ("".join(content) or None) == whole.content
    assert [(c.name, c.arguments) for c in streamed] == [(c.name, c.arguments) for c in whole.calls]


# -- the constraint --------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", [f for f in XML_A if f != "minicpm5"])
def test_required_constraint_names_the_family_markers_as_tokens(fmt: str) -> None:
    """The constraint's call markers are tokens of the family's vocabulary (never text a value could spell)."""
    v = vocab(FAMILIES[fmt].vocab)
    c = build_tool_constraint([WEATHER], "required", format=fmt, vocabulary=v)
    trigger = get_tool_format(fmt).section[0] if get_tool_format(fmt).section else render(fmt, [("f", {})])
    marker = next(m for m in sorted(v.special_tokens, key=len, reverse=True) if trigger.startswith(m))
    assert json.dumps({"type": "token", "token": marker}, ensure_ascii=False, separators=(",", ":")) in c.spec


def test_minicpm5_calls_are_text_and_its_constraint_writes_them_as_text() -> None:
    """MiniCPM5's syntax has no control token: its trigger is text, and free text under ``auto`` with a
    strict tool can only start a call with it."""
    c = build_tool_constraint([{**WEATHER, "function": {**WEATHER["function"], "strict": True}}], "auto",
                              format="minicpm5")
    assert '"triggers":["<function name=\\""]' in c.spec and '"type":"token"' not in c.spec
