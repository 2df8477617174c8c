"""XML-parameter formats: every value as each family's chat template writes it, through the manager.

One tool whose parameters cover the value kinds (a string that looks like a number, integer, number with
an exponent, boolean, nullable, array, object, no type, a mixed enum, const, anyOf, names outside
``[A-Za-z_][A-Za-z0-9_.-]*``). Its call, written by hand below as each chat template renders it, passes
the StructuredOutputManager token by token (every token also allowed by that step's bitmask) in the
required, named and auto-with-a-strict-tool modes, and reads back exactly (name and typed arguments),
from text and from token ids, in those modes and in plain auto (no constraint). A value in another
generation's spelling is rejected.

The templates (value rule of each, read for these facts):

- Qwen3-Coder: ``args_value if args_value is string else args_value | string`` (Python's ``str``:
  ``True``, ``None``, ``['a', 1]``, ``{'k': False}``). llama.cpp ``models/templates/Qwen3-Coder.jinja``
  (a copy of Qwen/Qwen3-Coder-30B-A3B-Instruct's), https://github.com/ggml-org/llama.cpp/blob/master/models/templates/Qwen3-Coder.jinja
- Qwen3.5: ``args_value | tojson | safe if args_value is mapping or (args_value is sequence and
  args_value is not string) else args_value | string`` (``True``, ``None``, JSON containers).
  https://huggingface.co/Qwen/Qwen3.5-9B/blob/main/chat_template.jinja (the line as quoted in
  vllm-project/vllm#38885 and Accio-Lab/Dressage#37)
- Qwen3.6: ``args_value | string if args_value is string else args_value | tojson | safe`` (JSON).
  https://huggingface.co/Qwen/Qwen3.6-35B-A3B/blob/main/chat_template.jinja
- GLM-4.5 / 4.6: ``<arg_key>{{ k }}</arg_key>\\n<arg_value>{{ v | tojson(ensure_ascii=False) if v is
  not string else v }}</arg_value>``, https://huggingface.co/zai-org/GLM-4.5/blob/main/chat_template.jinja
  (llama.cpp ``models/templates/glm_4_5.jinja``); GLM-4.7: the same without the newlines,
  https://huggingface.co/zai-org/GLM-4.7/blob/main/chat_template.jinja
- MiniMax M2: ``<parameter name="' + k + '">`` ``v | tojson if v is not string else v`` ``</parameter>``,
  llama.cpp ``models/templates/unsloth-MiniMax-M2.jinja``,
  https://huggingface.co/MiniMaxAI/MiniMax-M2/blob/main/chat_template.jinja

``tojson`` is transformers' (``json.dumps``, separators ``", "`` / ``": "``). Vocabularies: Qwen3.6 for
the Qwen formats; the synthetic GLM and MiniMax vocabularies of ``thinkgate/testing/vocabularies.py`` otherwise.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from typing import Any

import pytest
from support import FAMILIES, Family, finish, run_stream, vocab

from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader

PROPS: dict[str, Any] = {
    "label": {"type": "string"},
    "count": {"type": "integer"},
    "ratio": {"type": "number"},
    "enabled": {"type": "boolean"},
    "note": {"type": ["string", "null"]},
    "tags": {"type": "array", "items": {"type": "string"}},
    "options": {"type": "object", "properties": {"fast": {"type": "boolean"}, "level": {"type": "integer"}},
                "required": ["fast"]},
    "anything": {},
    "meta": {"description": "no type"},
    "mode": {"enum": ["eco", 2, None]},
    "unit": {"const": "kg"},
    "size": {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["small", "large"]}]},
    "first name": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    "code": {"type": "string"},
    "año_vehiculo": {"type": "integer"},
    "Content-Type": {"type": "string"},
}
VEHICLE = {"type": "function", "function": {"name": "register_vehicle", "description": "Register a vehicle",
                                            "parameters": {"type": "object", "properties": PROPS,
                                                           "required": ["label", "count", "año_vehiculo"]}}}
PING = {"type": "function", "function": {"name": "ping", "parameters": {"type": "object", "properties": {}}}}
ARGS: dict[str, Any] = {
    "label": "007", "count": 3, "ratio": 1e-05, "enabled": True, "note": None, "tags": ["a b", "it's"],
    "options": {"fast": False, "level": 2}, "anything": "hello world", "meta": [1, None], "mode": 2, "unit": "kg",
    "size": "large", "first name": "Ana María", "code": "[1, 2]", "año_vehiculo": 2019,
    "Content-Type": "application/json",
}

# -- the call, by hand, as each template writes it --------------------------------------------------

QWEN3_CODER = (
    "<tool_call>\n<function=register_vehicle>\n"
    "<parameter=label>\n007\n</parameter>\n"
    "<parameter=count>\n3\n</parameter>\n"
    "<parameter=ratio>\n1e-05\n</parameter>\n"
    "<parameter=enabled>\nTrue\n</parameter>\n"
    "<parameter=note>\nNone\n</parameter>\n"
    "<parameter=tags>\n['a b', \"it's\"]\n</parameter>\n"
    "<parameter=options>\n{'fast': False, 'level': 2}\n</parameter>\n"
    "<parameter=anything>\nhello world\n</parameter>\n"
    "<parameter=meta>\n[1, None]\n</parameter>\n"
    "<parameter=mode>\n2\n</parameter>\n"
    "<parameter=unit>\nkg\n</parameter>\n"
    "<parameter=size>\nlarge\n</parameter>\n"
    "<parameter=first name>\nAna María\n</parameter>\n"
    "<parameter=code>\n[1, 2]\n</parameter>\n"
    "<parameter=año_vehiculo>\n2019\n</parameter>\n"
    "<parameter=Content-Type>\napplication/json\n</parameter>\n"
    "</function>\n</tool_call>")

QWEN3_5 = (
    "<tool_call>\n<function=register_vehicle>\n"
    "<parameter=label>\n007\n</parameter>\n"
    "<parameter=count>\n3\n</parameter>\n"
    "<parameter=ratio>\n1e-05\n</parameter>\n"
    "<parameter=enabled>\nTrue\n</parameter>\n"
    "<parameter=note>\nNone\n</parameter>\n"
    "<parameter=tags>\n[\"a b\", \"it's\"]\n</parameter>\n"
    "<parameter=options>\n{\"fast\": false, \"level\": 2}\n</parameter>\n"
    "<parameter=anything>\nhello world\n</parameter>\n"
    "<parameter=meta>\n[1, null]\n</parameter>\n"
    "<parameter=mode>\n2\n</parameter>\n"
    "<parameter=unit>\nkg\n</parameter>\n"
    "<parameter=size>\nlarge\n</parameter>\n"
    "<parameter=first name>\nAna María\n</parameter>\n"
    "<parameter=code>\n[1, 2]\n</parameter>\n"
    "<parameter=año_vehiculo>\n2019\n</parameter>\n"
    "<parameter=Content-Type>\napplication/json\n</parameter>\n"
    "</function>\n</tool_call>")

QWEN3_6 = (
    "<tool_call>\n<function=register_vehicle>\n"
    "<parameter=label>\n007\n</parameter>\n"
    "<parameter=count>\n3\n</parameter>\n"
    "<parameter=ratio>\n1e-05\n</parameter>\n"
    "<parameter=enabled>\ntrue\n</parameter>\n"
    "<parameter=note>\nnull\n</parameter>\n"
    "<parameter=tags>\n[\"a b\", \"it's\"]\n</parameter>\n"
    "<parameter=options>\n{\"fast\": false, \"level\": 2}\n</parameter>\n"
    "<parameter=anything>\nhello world\n</parameter>\n"
    "<parameter=meta>\n[1, null]\n</parameter>\n"
    "<parameter=mode>\n2\n</parameter>\n"
    "<parameter=unit>\nkg\n</parameter>\n"
    "<parameter=size>\nlarge\n</parameter>\n"
    "<parameter=first name>\nAna María\n</parameter>\n"
    "<parameter=code>\n[1, 2]\n</parameter>\n"
    "<parameter=año_vehiculo>\n2019\n</parameter>\n"
    "<parameter=Content-Type>\napplication/json\n</parameter>\n"
    "</function>\n</tool_call>")

GLM47 = (
    "<tool_call>register_vehicle"
    "<arg_key>label</arg_key><arg_value>007</arg_value>"
    "<arg_key>count</arg_key><arg_value>3</arg_value>"
    "<arg_key>ratio</arg_key><arg_value>1e-05</arg_value>"
    "<arg_key>enabled</arg_key><arg_value>true</arg_value>"
    "<arg_key>note</arg_key><arg_value>null</arg_value>"
    "<arg_key>tags</arg_key><arg_value>[\"a b\", \"it's\"]</arg_value>"
    "<arg_key>options</arg_key><arg_value>{\"fast\": false, \"level\": 2}</arg_value>"
    "<arg_key>anything</arg_key><arg_value>hello world</arg_value>"
    "<arg_key>meta</arg_key><arg_value>[1, null]</arg_value>"
    "<arg_key>mode</arg_key><arg_value>2</arg_value>"
    "<arg_key>unit</arg_key><arg_value>kg</arg_value>"
    "<arg_key>size</arg_key><arg_value>large</arg_value>"
    "<arg_key>first name</arg_key><arg_value>Ana María</arg_value>"
    "<arg_key>code</arg_key><arg_value>[1, 2]</arg_value>"
    "<arg_key>año_vehiculo</arg_key><arg_value>2019</arg_value>"
    "<arg_key>Content-Type</arg_key><arg_value>application/json</arg_value>"
    "</tool_call>")

GLM45 = (
    "<tool_call>register_vehicle\n"
    "<arg_key>label</arg_key>\n<arg_value>007</arg_value>\n"
    "<arg_key>count</arg_key>\n<arg_value>3</arg_value>\n"
    "<arg_key>ratio</arg_key>\n<arg_value>1e-05</arg_value>\n"
    "<arg_key>enabled</arg_key>\n<arg_value>true</arg_value>\n"
    "<arg_key>note</arg_key>\n<arg_value>null</arg_value>\n"
    "<arg_key>tags</arg_key>\n<arg_value>[\"a b\", \"it's\"]</arg_value>\n"
    "<arg_key>options</arg_key>\n<arg_value>{\"fast\": false, \"level\": 2}</arg_value>\n"
    "<arg_key>anything</arg_key>\n<arg_value>hello world</arg_value>\n"
    "<arg_key>meta</arg_key>\n<arg_value>[1, null]</arg_value>\n"
    "<arg_key>mode</arg_key>\n<arg_value>2</arg_value>\n"
    "<arg_key>unit</arg_key>\n<arg_value>kg</arg_value>\n"
    "<arg_key>size</arg_key>\n<arg_value>large</arg_value>\n"
    "<arg_key>first name</arg_key>\n<arg_value>Ana María</arg_value>\n"
    "<arg_key>code</arg_key>\n<arg_value>[1, 2]</arg_value>\n"
    "<arg_key>año_vehiculo</arg_key>\n<arg_value>2019</arg_value>\n"
    "<arg_key>Content-Type</arg_key>\n<arg_value>application/json</arg_value>\n"
    "</tool_call>")

MINIMAX_M2 = (
    "<minimax:tool_call>\n<invoke name=\"register_vehicle\">\n"
    "<parameter name=\"label\">007</parameter>\n"
    "<parameter name=\"count\">3</parameter>\n"
    "<parameter name=\"ratio\">1e-05</parameter>\n"
    "<parameter name=\"enabled\">true</parameter>\n"
    "<parameter name=\"note\">null</parameter>\n"
    "<parameter name=\"tags\">[\"a b\", \"it's\"]</parameter>\n"
    "<parameter name=\"options\">{\"fast\": false, \"level\": 2}</parameter>\n"
    "<parameter name=\"anything\">hello world</parameter>\n"
    "<parameter name=\"meta\">[1, null]</parameter>\n"
    "<parameter name=\"mode\">2</parameter>\n"
    "<parameter name=\"unit\">kg</parameter>\n"
    "<parameter name=\"size\">large</parameter>\n"
    "<parameter name=\"first name\">Ana María</parameter>\n"
    "<parameter name=\"code\">[1, 2]</parameter>\n"
    "<parameter name=\"año_vehiculo\">2019</parameter>\n"
    "<parameter name=\"Content-Type\">application/json</parameter>\n"
    "</invoke>\n</minimax:tool_call>")

CALLS = {"qwen3_coder": QWEN3_CODER, "qwen3_5": QWEN3_5, "qwen3_6": QWEN3_6, "glm47": GLM47, "glm45": GLM45,
         "minimax_m2": MINIMAX_M2}
FORMATS = list(CALLS)
# the family (vocabulary, reasoning parser, prompt, thinking) each format is driven with
FAMILY_OF = {"qwen3_coder": "qwen3_coder", "qwen3_5": "qwen3_coder", "qwen3_6": "qwen3_coder", "glm47": "glm47",
             "glm45": "glm45", "minimax_m2": "minimax_m2"}


def family(fmt: str) -> Family:
    return dataclasses.replace(FAMILIES[FAMILY_OF[fmt]], fmt=fmt)


def strict(tool: dict[str, Any]) -> dict[str, Any]:
    t = copy.deepcopy(tool)
    t["function"]["strict"] = True
    return t


MODES: dict[str, tuple[Any, bool]] = {
    # mode -> (tool_choice, the vehicle tool says strict: true)
    "required": ("required", False),
    "named": ({"type": "function", "function": {"name": "register_vehicle"}}, False),
    "auto": ("auto", False),
    "auto-strict": ("auto", True),
}


def request(mode: str) -> tuple[list[dict[str, Any]], Any]:
    choice, is_strict = MODES[mode]
    return [PING, strict(VEHICLE) if is_strict else VEHICLE], choice


@functools.lru_cache(maxsize=None)
def constraint(fmt: str, mode: str):
    tools, choice = request(mode)
    return build_tool_constraint(tools, choice, format=fmt)


def check_read(fmt: str, mode: str, text: str) -> None:
    tools, choice = request(mode)
    reader = get_tool_reader(fmt, tools, choice)
    v = vocab(family(fmt).vocab)
    for got in (reader.read(text), reader.read_ids(v.encode(text), v)):
        assert [(c.name, json.loads(c.arguments)) for c in got.calls] == [("register_vehicle", ARGS)]
        assert got.content is None


# --------------------------------------------------------------------------------------------------

def test_the_renderings_agree_with_the_arguments() -> None:
    """The hand-written texts hold every argument once, in the schema's order (a typo shows here)."""
    for fmt, text in CALLS.items():
        pos = 0
        for k in PROPS:
            i = text.find(k, pos)
            assert i > pos, (fmt, k)
            pos = i


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("fmt", FORMATS)
def test_call_as_the_template_writes_it_is_accepted_and_read_back_typed(fmt: str, mode: str) -> None:
    fam = family(fmt)
    c = constraint(fmt, mode)
    if mode == "auto":
        assert c is None  # no constraint: the reader alone types the values by the schema
    else:
        finish(fam, c, fam.thinking + CALLS[fmt])
    check_read(fmt, mode, CALLS[fmt])


# a value in another spelling (another generation's, or outside the schema): (format, the
# parameter's opening, the wrong value written in place of the right one)
WRONG = [
    ("qwen3_coder", "<parameter=enabled>\n", "true"),
    ("qwen3_coder", "<parameter=options>\n", "{'fast': false}"),   # a Python repr holding JSON's false
    ("qwen3_coder", "<parameter=options>\n", '{"fast": False}'),   # JSON holding Python's False
    ("qwen3_coder", "<parameter=tags>\n", "[\"a b\", 'it']"),        # a list that mixes the two quotes' rules
    ("qwen3_5", "<parameter=enabled>\n", "true"),
    ("qwen3_5", "<parameter=tags>\n", "['a b', \"it's\"]"),
    ("qwen3_6", "<parameter=enabled>\n", "True"),
    ("qwen3_6", "<parameter=count>\n", "3.5"),
    ("qwen3_6", "<parameter=mode>\n", "None"),
    ("glm47", "<arg_key>enabled</arg_key><arg_value>", "True"),
    ("glm45", "<arg_key>options</arg_key>\n<arg_value>", "{'fast': False}"),
    ("minimax_m2", '<parameter name="enabled">', "None"),
    ("minimax_m2", '<parameter name="size">', "medium"),
]
CLOSE = {"glm47": "</arg_value>", "glm45": "</arg_value>", "minimax_m2": "</parameter>"}


@pytest.mark.parametrize("fmt,opening,wrong", WRONG)
def test_a_value_in_another_spelling_is_rejected(fmt: str, opening: str, wrong: str) -> None:
    fam = family(fmt)
    c = constraint(fmt, "required")
    text = CALLS[fmt]
    cut = text.index(opening) + len(opening)
    end = text.index(CLOSE.get(fmt, "\n</parameter>"), cut)
    v = vocab(fam.vocab)
    good = fam.thinking + text[:cut]
    ids = v.encode(good) + v.encode(wrong + text[end:])
    k = run_stream(fam, c, ids)
    assert k is not None, f"{fmt}: {wrong!r} accepted"
    assert k >= len(v.encode(good)), f"{fmt}: rejected before the value: {v.decode(ids[:k])[-60:]!r}"


# Qwen3-Coder's template revisions: the original writes a container with ``| string`` (Python's repr),
# vLLM's example Qwen3-Coder template (examples/tool_chat_template_qwen3coder.jinja) with ``tojson``
QWEN3_CODER_JSON_CONTAINERS = (QWEN3_CODER
                               .replace("['a b', \"it's\"]", '["a b", "it\'s"]')
                               .replace("{'fast': False, 'level': 2}", '{"fast": false, "level": 2}')
                               .replace("<parameter=meta>\n[1, None]", "<parameter=meta>\n[1, null]"))


@pytest.mark.parametrize("mode", list(MODES))
def test_qwen3_coder_takes_containers_as_either_revision_writes_them(mode: str) -> None:
    """Both revisions' spellings of arrays and objects are accepted and read back to the same JSON."""
    assert QWEN3_CODER_JSON_CONTAINERS.count("[\"a b\"") == 1 and '"fast": false' in QWEN3_CODER_JSON_CONTAINERS
    fam = family("qwen3_coder")
    c = constraint("qwen3_coder", mode)
    if c is not None:
        finish(fam, c, fam.thinking + QWEN3_CODER_JSON_CONTAINERS)
    check_read("qwen3_coder", mode, QWEN3_CODER_JSON_CONTAINERS)


def test_qwen3_coder_json_container_reads_json_escapes() -> None:
    """A JSON string nested in a parameter writes ``</`` as ``<\\/`` (the constraint excludes ``</``):
    read as JSON, not as a Python literal, it is ``</``."""
    from thinkgate.structured_output.tools.xml_values import read_value
    assert read_value('["<\\/b>", "x"]', {"type": "array"}, {}, "python") == ["</b>", "x"]
    assert read_value("['<b>', None]", {"type": "array"}, {}, "python") == ["<b>", None]
    assert read_value('{"k": [true, null]}', {"type": "object"}, {}, "python") == {"k": [True, None]}


@pytest.mark.parametrize("fmt", FORMATS)
def test_strings_stay_strings_when_they_look_like_other_values(fmt: str) -> None:
    """A string parameter's raw text is its value, whatever it spells; the schema decides."""
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
        "s": {"type": "string"}, "n": {"type": "number"}}}}}]
    spell = {"qwen3_coder": "<tool_call>\n<function=f>\n<parameter=s>\n{s}\n</parameter>\n<parameter=n>\n{n}\n"
                            "</parameter>\n</function>\n</tool_call>",
             "glm47": "<tool_call>f<arg_key>s</arg_key><arg_value>{s}</arg_value><arg_key>n</arg_key>"
                      "<arg_value>{n}</arg_value></tool_call>",
             "glm45": "<tool_call>f\n<arg_key>s</arg_key>\n<arg_value>{s}</arg_value>\n<arg_key>n</arg_key>\n"
                      "<arg_value>{n}</arg_value>\n</tool_call>",
             "minimax_m2": '<minimax:tool_call>\n<invoke name="f">\n<parameter name="s">{s}</parameter>\n'
                           '<parameter name="n">{n}</parameter>\n</invoke>\n</minimax:tool_call>'}
    pattern = spell.get(fmt, spell["qwen3_coder"])
    for s in ("42", "true", "null", "[1, 2]", '{"a": 1}', "None", "True"):
        text = pattern.replace("{s}", s).replace("{n}", "-2.5")
        for choice in ("auto", "required"):
            got = get_tool_reader(fmt, tools, choice).read(text)
            assert [json.loads(c.arguments) for c in got.calls] == [{"s": s, "n": -2.5}], (fmt, s, choice)


@pytest.mark.parametrize("fmt,name,bad", [
    ("qwen3_coder", "a>b", ">"), ("qwen3_6", "x>", ">"), ("minimax_m2", 'say "hi"', '"'),
    ("glm47", "k</arg_key>v", "</arg_key>"), ("glm45", "<arg_value>", "<arg_value>"),
])
def test_a_name_the_syntax_cannot_write_is_a_clear_error(fmt: str, name: str, bad: str) -> None:
    tools = [{"type": "function", "function": {"name": "lookup", "parameters": {
        "type": "object", "properties": {name: {"type": "string"}}, "required": [name]}}}]
    with pytest.raises(ValueError) as e:
        build_tool_constraint(tools, "required", format=fmt)
    assert "'lookup'" in str(e.value) and repr(name) in str(e.value) and repr(bad) in str(e.value)


@pytest.mark.parametrize("fmt", ["qwen3_coder", "glm47", "minimax_m2"])
def test_declared_names_outside_the_key_pattern_pass_an_unenforced_constraint(fmt: str) -> None:
    """A tool with ``strict: false`` under ``required``: the constraint only checks that the arguments
    are parameters (any name, raw text); a declared name such as ``first name`` is one of them, and the
    reader still types the values by the schema."""
    loose = copy.deepcopy(VEHICLE)
    loose["function"]["strict"] = False
    c = build_tool_constraint([PING, loose], "required", format=fmt)
    fam = family(fmt)
    finish(fam, c, fam.thinking + CALLS[fmt])
    got = get_tool_reader(fmt, [PING, loose], "required").read(CALLS[fmt])
    assert [(x.name, json.loads(x.arguments)) for x in got.calls] == [("register_vehicle", ARGS)]


@pytest.mark.parametrize("text,schema,style,value", [
    ("007", {"type": "string"}, "json", "007"),
    ("7", {}, "json", 7),                                   # no type: a literal comes back typed
    ("hello", {}, "python", "hello"),
    ('"quoted"', {}, "json", '"quoted"'),                   # a JSON string is text here: str values are raw
    ("True", {"type": "boolean"}, "python", True),
    ("True", {"type": "boolean"}, "py_scalars", True),
    ("None", {"type": ["string", "null"]}, "py_scalars", None),
    ("None", {"type": ["string", "null"]}, "json", "None"),  # JSON has no None: the string
    ("null", {"anyOf": [{"type": "string"}, {"type": "null"}]}, "json", None),
    ("[1, 'a', None]", {"type": "array"}, "python", [1, "a", None]),
    ("{'k': {'n': 1.5}}", {"type": "object"}, "python", {"k": {"n": 1.5}}),
    ("{'a': (1, 2)}", {"type": "object"}, "python", "{'a': (1, 2)}"),  # a tuple is no JSON value
    ("abc", {"type": "integer"}, "json", "abc"),            # no literal: the text (the policy judges it)
    ("2", {"enum": ["eco", 2, None]}, "json", 2),
    ("eco", {"enum": ["eco", 2, None]}, "python", "eco"),
    ("3", {"anyOf": [{"type": "integer"}, {"type": "string", "enum": ["small"]}]}, "json", 3),
    ("small", {"$ref": "#/$defs/S"}, "json", "small"),
])
def test_reader_types_a_value_by_its_schema(text: str, schema: Any, style: str, value: Any) -> None:
    from thinkgate.structured_output.tools.xml_values import read_value
    defs = {"$defs": {"S": {"type": "string"}}}
    got = read_value(text, schema, defs, style)  # type: ignore[arg-type]
    assert got == value and type(got) is type(value)
