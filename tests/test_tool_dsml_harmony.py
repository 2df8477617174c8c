"""DSML (deepseek_v32, deepseek_v4) and harmony (openai) calls exactly as the models' own code writes them.

Every expected text below is written by hand from the model's own encoder or chat template:

- DeepSeek-V3.2, ``encoding/encoding_dsv32.py``
  (https://huggingface.co/deepseek-ai/DeepSeek-V3.2/blob/main/encoding/encoding_dsv32.py):
  ``tool_call_template = '<{dsml_token}invoke name="{name}">\\n{arguments}\\n</{dsml_token}invoke>'``,
  ``tool_calls_template = "<{dsml_token}function_calls>\\n{tool_calls}\\n</{dsml_token}function_calls>"``
  (calls joined by ``"\\n"``, the block written after ``"\\n\\n"``), and ``encode_arguments_to_dsml``:
  ``'<{dsml_token}parameter name="{key}" string="{is_str}">{value}</{dsml_token}parameter>'`` per argument,
  joined by ``"\\n"``, ``is_str = "true" if isinstance(v, str) else "false"``, ``value = v if isinstance(v,
  str) else json.dumps(v, ensure_ascii=False)``, the key as it is (no escaping). No arguments: ``"\\n".join([])``
  is empty, so the invoke holds a blank line.
- DeepSeek-V4, ``encoding/encoding_dsv4.py`` (the same templates, block name ``tool_calls``; read at
  https://github.com/sfxnz/DeepSeek-V4-Flash-Vision-Exp-vLLM-2x-DGX-Spark/blob/main/encoding/encoding_dsv4.py).
  ``｜DSML｜`` is one control token of the DeepSeek V4 vocabulary.
- gpt-oss, ``chat_template.jinja`` (https://huggingface.co/openai/gpt-oss-120b/blob/main/chat_template.jinja,
  read at https://github.com/ggml-org/llama.cpp/blob/master/models/templates/openai-gpt-oss-120b.jinja):
  ``"<|start|>assistant to=" + "functions." + name + "<|channel|>commentary " + "json" + "<|message|>" +
  arguments + "<|call|>"``; the generation prompt ends with ``<|start|>assistant``.
- the harmony guide (https://github.com/openai/harmony/blob/main/docs/format.md, "Receiving tool calls"):
  ``<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{...}<|call|>``,
  "the recipient might be defined in the role or channel section of the header", ``<|constrain|>`` is what
  the model "might also specify", and the preamble example writes ``to=functions.generate_file<|constrain|>json``
  without a space. gpt-oss also calls functions from the analysis channel (openvinotoolkit/model_server#3786,
  jundot/omlx#2216).

Each stream passes the StructuredOutputManager token by token (each token also allowed by that step's
bitmask) and a stop token ends it; the reader gives the calls back exactly, from token ids
(``read_ids``) and from text (``read``).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from support import FAMILIES, assert_rejected_at, finish, run_stream, vocab

from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader


def _fn(name: str, properties: dict[str, Any], required: tuple[str, ...] = (), **extra: Any) -> dict[str, Any]:
    params: dict[str, Any] = {"type": "object", "properties": properties, **extra}
    if required:
        params["required"] = list(required)
    return {"type": "function", "function": {"name": name, "parameters": params}}


GET_TIME = _fn("get_time", {})
REFRESH = _fn("refresh", {"force": {"type": "boolean"}})  # optional parameters only
WEATHER = _fn("get_weather", {"location": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
              ("location",))
SET_FIELD = _fn("set_field", {
    "value": {"description": "anything"},                           # no type
    "maybe": {"type": ["string", "null"]},                          # nullable string
    "choice": {"enum": ["auto", 1, None]},                          # enum of mixed values
    "fixed": {"const": "v1"},                                       # const string
    "either": {"anyOf": [{"type": "string"}, {"type": "integer"}]},  # union with string
    "n": {"type": "integer"},
}, ("value",))
VEHICLE = _fn("register_vehicle", {"año_vehiculo": {"type": "integer"}, "Content-Type": {"type": "string"},
                                   'say "hi"': {"type": "string"}, "x.y-z": {}}, ("año_vehiculo",))
TOOLS = [GET_TIME, REFRESH, WEATHER, SET_FIELD, VEHICLE]
DS = {"deepseek_v32": "function_calls", "deepseek_v4": "tool_calls"}


# -- DSML, written as DeepSeek's encoder writes it (by hand) ----------------------------------------

def dsml_block(fmt: str, *invokes: str) -> str:
    """tc_content: "\\n\\n" + tool_calls_template, the invokes joined by "\\n"."""
    name = DS[fmt]
    return f"\n\n<｜DSML｜{name}>\n" + "\n".join(invokes) + f"\n</｜DSML｜{name}>"


NO_ARGS = '<｜DSML｜invoke name="get_time">\n\n</｜DSML｜invoke>'
REFRESH_NO_ARGS = '<｜DSML｜invoke name="refresh">\n\n</｜DSML｜invoke>'
WEATHER_PARIS = ('<｜DSML｜invoke name="get_weather">\n'
                 '<｜DSML｜parameter name="location" string="true">Paris</｜DSML｜parameter>\n'
                 '<｜DSML｜parameter name="unit" string="true">c</｜DSML｜parameter>\n'
                 "</｜DSML｜invoke>")
# SET_FIELD with a str, a None, an int, a str, a str that looks like a number, an int
SET_STRINGS = ('<｜DSML｜invoke name="set_field">\n'
               '<｜DSML｜parameter name="value" string="true">hello, world</｜DSML｜parameter>\n'
               '<｜DSML｜parameter name="maybe" string="false">null</｜DSML｜parameter>\n'
               '<｜DSML｜parameter name="choice" string="false">1</｜DSML｜parameter>\n'
               '<｜DSML｜parameter name="fixed" string="true">v1</｜DSML｜parameter>\n'
               '<｜DSML｜parameter name="either" string="true">42</｜DSML｜parameter>\n'
               '<｜DSML｜parameter name="n" string="false">7</｜DSML｜parameter>\n'
               "</｜DSML｜invoke>")
SET_STRINGS_ARGS = {"value": "hello, world", "maybe": None, "choice": 1, "fixed": "v1", "either": "42", "n": 7}
# the other side of each union: a JSON object for the untyped one (json.dumps, "</" unescaped), a str
# for the nullable one, a str for the enum, an int for the union
SET_OTHERS = ('<｜DSML｜invoke name="set_field">\n'
              '<｜DSML｜parameter name="value" string="false">{"html": "<b>x</b>", "n": [1, 2.5]}'
              '</｜DSML｜parameter>\n'
              '<｜DSML｜parameter name="maybe" string="true">maybe so</｜DSML｜parameter>\n'
              '<｜DSML｜parameter name="choice" string="true">auto</｜DSML｜parameter>\n'
              '<｜DSML｜parameter name="either" string="false">42</｜DSML｜parameter>\n'
              "</｜DSML｜invoke>")
SET_OTHERS_ARGS = {"value": {"html": "<b>x</b>", "n": [1, 2.5]}, "maybe": "maybe so", "choice": "auto", "either": 42}
VEHICLE_CALL = ('<｜DSML｜invoke name="register_vehicle">\n'
                '<｜DSML｜parameter name="año_vehiculo" string="false">2019</｜DSML｜parameter>\n'
                '<｜DSML｜parameter name="Content-Type" string="true">text/plain</｜DSML｜parameter>\n'
                '<｜DSML｜parameter name="say "hi"" string="true">hi</｜DSML｜parameter>\n'
                '<｜DSML｜parameter name="x.y-z" string="false">true</｜DSML｜parameter>\n'
                "</｜DSML｜invoke>")
VEHICLE_ARGS = {"año_vehiculo": 2019, "Content-Type": "text/plain", 'say "hi"': "hi", "x.y-z": True}

CALLS = {  # invoke -> (name, arguments)
    NO_ARGS: ("get_time", {}), REFRESH_NO_ARGS: ("refresh", {}),
    WEATHER_PARIS: ("get_weather", {"location": "Paris", "unit": "c"}),
    SET_STRINGS: ("set_field", SET_STRINGS_ARGS), SET_OTHERS: ("set_field", SET_OTHERS_ARGS),
    VEHICLE_CALL: ("register_vehicle", VEHICLE_ARGS),
}


def read_both(fmt: str, tools, choice, output: str, **kw: Any):
    """The reader's calls from token ids and from text (they must agree), and the content."""
    v = vocab(FAMILIES[fmt].vocab)
    reader = get_tool_reader(fmt, tools, choice, **kw)
    by_ids = reader.read_ids(v.encode(output), v)
    by_text = reader.read(output)
    got = [(c.name, json.loads(c.arguments)) for c in by_ids.calls]
    assert got == [(c.name, json.loads(c.arguments)) for c in by_text.calls]
    assert by_ids.content == by_text.content
    return got, by_ids.content


@pytest.mark.parametrize("fmt", list(DS))
@pytest.mark.parametrize("invokes", [
    [NO_ARGS], [REFRESH_NO_ARGS], [NO_ARGS, WEATHER_PARIS, REFRESH_NO_ARGS], [SET_STRINGS], [SET_OTHERS],
    [VEHICLE_CALL, NO_ARGS],
], ids=["no-args", "optional-only-no-args", "mixed", "untyped-strings", "untyped-json", "names"])
def test_dsml_required_as_the_encoder_writes(fmt: str, invokes: list[str]) -> None:
    fam = FAMILIES[fmt]
    c = build_tool_constraint(TOOLS, "required", format=fmt)
    out = dsml_block(fmt, *invokes)
    finish(fam, c, fam.thinking + out)
    got, content = read_both(fmt, TOOLS, "required", out)
    assert got == [CALLS[i] for i in invokes] and content is None


@pytest.mark.parametrize("fmt", list(DS))
def test_dsml_named_auto_and_strict(fmt: str) -> None:
    fam = FAMILIES[fmt]
    named = {"type": "function", "function": {"name": "get_time"}}
    out = dsml_block(fmt, NO_ARGS)
    finish(fam, build_tool_constraint(TOOLS, named, format=fmt), fam.thinking + out)
    assert read_both(fmt, TOOLS, named, out) == ([("get_time", {})], None)
    # auto: no constraint; the reader still reads what the encoder writes, typed by the schema
    assert build_tool_constraint(TOOLS, "auto", format=fmt) is None
    text = "Let me check." + dsml_block(fmt, NO_ARGS, SET_STRINGS, SET_OTHERS, VEHICLE_CALL)
    assert read_both(fmt, TOOLS, "auto", text) == (
        [CALLS[NO_ARGS], CALLS[SET_STRINGS], CALLS[SET_OTHERS], CALLS[VEHICLE_CALL]], "Let me check.")
    # auto with strict tools (strictness "parameter"): free text, then calls that must be valid
    strict = build_tool_constraint(TOOLS, "auto", format=fmt, strictness="parameter")
    finish(fam, strict, fam.thinking + text)
    assert read_both(fmt, TOOLS, "auto", text, strictness="parameter")[0] == [
        CALLS[NO_ARGS], CALLS[SET_STRINGS], CALLS[SET_OTHERS], CALLS[VEHICLE_CALL]]
    # a tool declared strict on its own, with parallel calls off
    one = [{**GET_TIME, "function": {**GET_TIME["function"], "strict": True}}]
    c = build_tool_constraint(one, "auto", format=fmt, parallel_tool_calls=False)
    finish(fam, c, fam.thinking + "Sure." + dsml_block(fmt, NO_ARGS))


@pytest.mark.parametrize("fmt", list(DS))
def test_dsml_unenforced_tool_takes_any_parameters(fmt: str) -> None:
    """strictness "function": the tool is checked, its arguments are not: any names, values written
    as the encoder writes them."""
    fam = FAMILIES[fmt]
    c = build_tool_constraint([GET_TIME], "auto", format=fmt, strictness="function")
    loose = ('<｜DSML｜invoke name="get_time">\n'
             '<｜DSML｜parameter name="tz" string="true">Europe/Paris</｜DSML｜parameter>\n'
             '<｜DSML｜parameter name="año" string="false">[1, {"a": null}]</｜DSML｜parameter>\n'
             "</｜DSML｜invoke>")
    for inv, args in [(NO_ARGS, {}), (loose, {"tz": "Europe/Paris", "año": [1, {"a": None}]})]:
        out = dsml_block(fmt, inv)
        finish(fam, c, fam.thinking + out)
        assert read_both(fmt, [GET_TIME], "auto", out, strictness="function") == ([("get_time", args)], None)


@pytest.mark.parametrize("fmt", list(DS))
def test_dsml_rejects_what_the_encoder_never_writes(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c = build_tool_constraint(TOOLS, "required", format=fmt)
    pre = fam.thinking + f"\n\n<｜DSML｜{DS[fmt]}>\n"
    # a JSON string where the encoder writes string="true" with the raw text
    head = pre + '<｜DSML｜invoke name="set_field">\n<｜DSML｜parameter name="value" string="false">'
    assert_rejected_at(fam, c, head, '"hello"')
    # string="true" for an integer parameter
    head = (pre + '<｜DSML｜invoke name="set_field">\n'
            '<｜DSML｜parameter name="value" string="true">x</｜DSML｜parameter>\n')
    assert_rejected_at(fam, c, head + '<｜DSML｜parameter name="n" string="', 'true">7')
    # a required parameter missing: the blank line is not a call of get_weather
    assert_rejected_at(fam, c, pre + '<｜DSML｜invoke name="get_weather">\n', "\n</｜DSML｜invoke>")
    # a value outside the enum of a string parameter
    unit = 'name="unit" string="true">'
    head = pre + WEATHER_PARIS[:WEATHER_PARIS.index(unit) + len(unit)]
    assert_rejected_at(fam, c, head, "k")


@pytest.mark.parametrize("fmt", list(DS))
def test_dsml_blank_line_of_a_call_without_arguments(fmt: str) -> None:
    """The encoder's blank line is required for a tool without parameters; for a tool whose parameters
    are all optional the constraint also takes the invoke without it (documented: a linear grammar
    cannot tell "no optional parameter" from "no blank line")."""
    fam = FAMILIES[fmt]
    c = build_tool_constraint(TOOLS, "required", format=fmt)
    pre = fam.thinking + f"\n\n<｜DSML｜{DS[fmt]}>\n"
    assert_rejected_at(fam, c, pre + '<｜DSML｜invoke name="get_time">\n', "</｜DSML｜invoke>")
    assert_rejected_at(fam, c, pre + '<｜DSML｜invoke name="get_time">\n\n', "\n</｜DSML｜invoke>")
    finish(fam, c, fam.thinking + dsml_block(fmt, '<｜DSML｜invoke name="refresh">\n</｜DSML｜invoke>'))


def test_dsml_json_value_holding_the_closing_tag_text() -> None:
    """A JSON value may hold the closing tag's text written with ordinary tokens (the real closing tag's
    ｜DSML｜ is a control token): the constraint takes it and read_ids gives the value back whole."""
    fmt = "deepseek_v4"
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    c = build_tool_constraint(TOOLS, "required", format=fmt)
    value = {"note": "ends with </｜DSML｜parameter> here"}
    inner = json.dumps(value, ensure_ascii=False)
    pre = (f"\n\n<｜DSML｜tool_calls>\n" '<｜DSML｜invoke name="set_field">\n'
           '<｜DSML｜parameter name="value" string="false">')
    post = "</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>"
    spelled = [t for ch in inner for t in v.encode(ch)]
    assert v.special_tokens["｜DSML｜"] not in spelled
    ids = v.encode(pre) + spelled + v.encode(post)
    assert run_stream(fam, c, v.encode(fam.thinking) + ids + [min(v.stop_token_ids)]) is None
    got = get_tool_reader(fmt, TOOLS, "required").read_ids(ids, v)
    assert [(x.name, json.loads(x.arguments)) for x in got.calls] == [("set_field", {"value": value})]


def test_dsml_parameter_names() -> None:
    """Any declared name is written as it is; one holding the DSML marker cannot be (a ValueError naming
    the tool and the parameter)."""
    bad = _fn("probe", {"a｜DSML｜b": {"type": "string"}})
    for fmt in DS:
        with pytest.raises(ValueError, match=r"tool 'probe': parameter name 'a｜DSML｜b' cannot be written in DSML"):
            build_tool_constraint([bad], "required", format=fmt)
    # the reader matches a declared name whole, quotes included, and an undeclared one up to string=
    text = dsml_block("deepseek_v4", VEHICLE_CALL.replace('name="x.y-z"', 'name="extra key"'))
    got, _ = read_both("deepseek_v4", [VEHICLE], "auto", text)
    assert got == [("register_vehicle", {**{k: v for k, v in VEHICLE_ARGS.items() if k != "x.y-z"},
                                         "extra key": True})]


def test_dsml_reader_types_values_by_the_schema() -> None:
    """Where the model's string attribute contradicts the schema, the value is typed by the schema;
    where it agrees, the value is exactly what was written. A name written twice is not a call."""
    fmt = "deepseek_v4"
    inv = ('<｜DSML｜invoke name="set_field">\n'
           '<｜DSML｜parameter name="value" string="true">[1]</｜DSML｜parameter>\n'
           '<｜DSML｜parameter name="n" string="true">7</｜DSML｜parameter>\n'
           '<｜DSML｜parameter name="maybe" string="false">plain words</｜DSML｜parameter>\n'
           "</｜DSML｜invoke>")
    got, _ = read_both(fmt, TOOLS, "auto", dsml_block(fmt, inv))
    assert got == [("set_field", {"value": "[1]", "n": 7, "maybe": "plain words"})]
    twice = inv.replace('name="n"', 'name="value"')
    got, content = read_both(fmt, TOOLS, "auto", dsml_block(fmt, twice))
    assert got == [] and content is not None and 'name="value"' in content
    # an invoke without the blank line (the constraint admits it for optional-only tools) reads as no arguments
    bare = '<｜DSML｜invoke name="refresh">\n</｜DSML｜invoke>'
    assert read_both(fmt, TOOLS, "auto", dsml_block(fmt, bare))[0] == [("refresh", {})]


# -- harmony, every header the model writes -------------------------------------------------------

HARMONY_TOOLS = [WEATHER, GET_TIME]
THINK = "<|channel|>analysis<|message|>Need to use function get_weather.<|end|>"
ARGS = '{"location":"San Francisco"}'
HEADERS = {
    # the chat template (recipient in the role, plain " json")
    "template": " to=functions.get_weather<|channel|>commentary json<|message|>",
    # the harmony guide (recipient after the channel, " <|constrain|>json")
    "guide": "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>",
    # the guide's preamble example (no space before <|constrain|>)
    "guide-glued": "<|channel|>commentary to=functions.get_weather<|constrain|>json<|message|>",
    "role-constrain": " to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>",
    "channel-json": "<|channel|>commentary to=functions.get_weather json<|message|>",
    "no-type-role": " to=functions.get_weather<|channel|>commentary<|message|>",
    "no-type-channel": "<|channel|>commentary to=functions.get_weather<|message|>",
    "analysis-channel": "<|channel|>analysis to=functions.get_weather <|constrain|>json<|message|>",
}


@pytest.mark.parametrize("header", list(HEADERS))
@pytest.mark.parametrize("choice", ["required", "named", "auto-strict"])
def test_harmony_call_headers(header: str, choice: str) -> None:
    fam = FAMILIES["openai"]
    tool_choice: Any = {"type": "function", "function": {"name": "get_weather"}} if choice == "named" else \
        "auto" if choice == "auto-strict" else "required"
    kw = {"strictness": "parameter"} if choice == "auto-strict" else {}
    c = build_tool_constraint(HARMONY_TOOLS, tool_choice, format="openai", **kw)
    # after the prompt's "<|start|>assistant": the analysis message, then the call message
    out = THINK + "<|start|>assistant" + HEADERS[header] + ARGS
    finish(fam, c, out)  # finish ends it with <|call|> (harmony's stop token)
    got = read_both("openai", HARMONY_TOOLS, tool_choice, out + "<|call|>", **kw)
    assert got == ([("get_weather", {"location": "San Francisco"})], None)
    # the call as the first message of the turn
    first = HEADERS[header] + ARGS
    finish(fam, c, first)
    assert read_both("openai", HARMONY_TOOLS, tool_choice, "<|start|>assistant" + first, **kw)[0] == [
        ("get_weather", {"location": "San Francisco"})]


def test_harmony_headers_reject_other_recipients_and_types() -> None:
    fam = FAMILIES["openai"]
    c = build_tool_constraint(HARMONY_TOOLS, "required", format="openai")
    base = THINK + "<|start|>assistant"
    assert_rejected_at(fam, c, base + " to=functions.get_weather<|channel|>commentary ", "yaml<|message|>")
    assert_rejected_at(fam, c, base + "<|channel|>commentary to=functions.", "lookup_stock")
    assert_rejected_at(fam, c, base + " to=functions.get_weather<|channel|>", "final")
    # a final answer is not a call
    assert_rejected_at(fam, c, base + "<|channel|>", "final<|message|>")


def test_harmony_no_argument_call_and_builtin_headers() -> None:
    fam = FAMILIES["openai"]
    c = build_tool_constraint(HARMONY_TOOLS, "required", format="openai")
    out = "<|channel|>commentary to=functions.get_time json<|message|>{}"
    finish(fam, c, out)
    assert read_both("openai", HARMONY_TOOLS, "required", out + "<|call|>")[0] == [("get_time", {})]
    search = {"type": "web_search_preview", "name": "browser.search",
              "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}
    c = build_tool_constraint([WEATHER, search], {"type": "web_search_preview"}, format="openai")
    for head in ["<|channel|>analysis to=browser.search code<|message|>",
                 " to=browser.search<|channel|>commentary code<|message|>",
                 "<|channel|>analysis to=browser.search<|constrain|>code<|message|>"]:
        out = THINK + "<|start|>assistant" + head + '{"query": "weather Oslo"}'
        finish(fam, c, out)
        got = get_tool_reader("openai", [WEATHER, search]).read(out + "<|call|>")
        assert [(x.name, json.loads(x.arguments)) for x in got.calls] == [("browser.search", {"query": "weather Oslo"})]
