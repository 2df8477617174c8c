"""Tool-request normalisation, errors, strictness, the JSON-schema form of the calls, no mutation."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from thinkgate.testing.vocabularies import format_vocabulary
from thinkgate.structured_output.tools import (build_tool_constraint, get_tool_format, get_tool_reader,
                                               list_tool_formats, normalize_tool_request, tool_calls_json_schema)
from thinkgate.structured_output.tools.template import ResponseTemplateFormat

CORPUS = json.loads((Path(__file__).parent / "data" / "tools" / "corpus.json").read_text(encoding="utf-8"))
# the base corpus (the real-world "shapes" entries are test_tool_conformance.py's)
BASE = [e for e in CORPUS["tools"] if "shapes" not in e]
TOOLS: list[dict[str, Any]] = [e["tool"] for e in BASE]


def fn(name: str, params: dict[str, Any] | None = None, strict: bool | None = None) -> dict[str, Any]:
    f: dict[str, Any] = {"name": name}
    if params is not None:
        f["parameters"] = params
    if strict is not None:
        f["strict"] = strict
    return {"type": "function", "function": f}


OBJ = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
SEARCH = {"type": "web_search_preview", "name": "browser.search",
          "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}


# -- errors -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("tools, choice, match", [
    ([fn("a", OBJ)], {"type": "function", "function": {"name": "b"}}, r"names function 'b'.*not in tools.*a"),
    ([fn("a", OBJ), fn("a", OBJ)], "auto", r"duplicate tool name 'a'"),
    ([], "required", r"'required' but there are no tools"),
    (None, "required", r"'required' but there are no tools"),
    ([SEARCH], "required", r"every available tool is builtin \(web_search_preview\)"),
    ([fn("a", OBJ)], "sometimes", r"unknown tool_choice 'sometimes'"),
    ([fn("a", OBJ)], {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "zz"}}]}}, r"allowed_tools names function 'zz'"),
    ([fn("a", OBJ)], {"type": "allowed_tools", "allowed_tools": {"mode": "often", "tools": []}}, r"mode must be"),
    ([fn("a", {"type": "array"})], "auto", r"parameters must be a schema of type 'object'"),
    ([{"type": "function", "function": {"parameters": OBJ}}], "auto", r"no function name"),
    ([fn("a", OBJ, strict="yes")], "auto", r"strict must be a boolean"),  # type: ignore[arg-type]
    ({"a": 1}, "auto", r"tools must be a list"),
    ([fn("a", OBJ)], {"type": "web_search_preview"}, r"matches 0 tools"),
    ([fn('get"x', OBJ)], "auto", r"tool name 'get\"x' is not valid"),
    ([fn("a b", OBJ)], "auto", r"tool name 'a b' is not valid"),
])
def test_bad_requests(tools: Any, choice: Any, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        normalize_tool_request(tools, choice)
    with pytest.raises(ValueError, match=match):
        build_tool_constraint(tools, choice, format="hermes")


def test_unknown_format_lists_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown tool format 'hermez'; known: .*hermes.*qwen3_coder"):
        build_tool_constraint([fn("a", OBJ)], "required", format="hermez")
    with pytest.raises(ValueError, match=r"unknown tool format"):
        get_tool_reader("nope", [fn("a", OBJ)])
    assert {"hermes", "qwen3_coder", "llama3_json", "mistral", "deepseek_v3", "deepseek_v31", "deepseek_v32",
            "deepseek_v4", "kimi_k2", "glm47", "glm45", "minimax_m2", "gemma4", "openai", "json"} <= set(list_tool_formats())
    assert {"qwen3", "qwen3_xml", "harmony"} <= set(list_tool_formats(aliases=True))


def test_unknown_strictness_and_parallel() -> None:
    with pytest.raises(ValueError, match=r"unknown strictness 'max'; known: auto, function, parameter"):
        normalize_tool_request([fn("a", OBJ)], "auto", strictness="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"parallel_tool_calls must be a boolean"):
        normalize_tool_request([fn("a", OBJ)], "auto", parallel_tool_calls="no")  # type: ignore[arg-type]


def test_max_whitespace_is_checked() -> None:
    with pytest.raises(ValueError, match=r"max_whitespace must be a positive integer or None, got 0"):
        build_tool_constraint([fn("a", OBJ)], "required", format="hermes", max_whitespace=0)
    c = build_tool_constraint([fn("a", OBJ)], "required", format="hermes", max_whitespace=None)
    assert c is not None and "max_whitespace_cnt" not in c.spec


def test_conflicting_defs() -> None:
    a = fn("a", {"type": "object", "properties": {"m": {"$ref": "#/$defs/M"}},
                 "$defs": {"M": {"type": "integer"}}})
    b = fn("b", {"type": "object", "properties": {"m": {"$ref": "#/$defs/M"}},
                 "$defs": {"M": {"type": "string"}}})
    with pytest.raises(ValueError, match=r"conflicting \$defs 'M': tools 'a' and 'b' define it differently"):
        build_tool_constraint([a, b], "required", format="json")
    same = fn("c", {"type": "object", "properties": {"m": {"$ref": "#/$defs/M"}}, "$defs": {"M": {"type": "integer"}}})
    assert build_tool_constraint([a, same], "required", format="json") is not None


def test_builtin_tools_only_where_the_format_has_a_syntax() -> None:
    with pytest.raises(ValueError, match=r"no syntax for builtin tools"):
        build_tool_constraint([fn("a", OBJ), SEARCH], {"type": "web_search_preview"}, format="hermes")
    assert build_tool_constraint([fn("a", OBJ), SEARCH], {"type": "web_search_preview"}, format="openai") is not None


# -- modes and strictness ---------------------------------------------------------------------------

def test_modes() -> None:
    tools = [fn("a", OBJ), fn("b", OBJ, strict=True), fn("c", OBJ, strict=False)]
    r = normalize_tool_request(tools, "none")
    assert r.mode == "none" and r.tools == () and not r.constrained
    r = normalize_tool_request(tools, "auto")
    assert r.mode == "auto" and r.constrained  # b is strict
    assert [t.enforce for t in r.tools] == [False, True, False]
    r = normalize_tool_request([fn("a", OBJ)], "auto")
    assert not r.constrained
    assert build_tool_constraint([fn("a", OBJ)], "auto", format="hermes") is None
    assert build_tool_constraint([fn("a", OBJ)], "none", format="hermes") is None
    r = normalize_tool_request(tools, "required")
    assert r.constrained and [t.enforce for t in r.tools] == [True, True, False]
    r = normalize_tool_request(tools, {"type": "function", "function": {"name": "c"}})
    assert r.mode == "named" and [t.name for t in r.tools] == ["c"] and r.max_calls == 1
    r = normalize_tool_request(tools, {"type": "function", "name": "a"})  # Responses-API shape
    assert r.mode == "named" and r.tools[0].name == "a"
    r = normalize_tool_request(tools, {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [
        {"type": "function", "function": {"name": "c"}}, {"type": "function", "name": "a"}]}})
    assert r.mode == "required" and [t.name for t in r.tools] == ["c", "a"] and len(r.all_tools) == 3
    r = normalize_tool_request(tools, "required", parallel_tool_calls=False)
    assert r.max_calls == 1


def test_strictness_levels() -> None:
    tools = [fn("a", OBJ), fn("c", OBJ, strict=False)]
    r = normalize_tool_request(tools, "auto", strictness="function")
    assert r.constrained and [t.enforce for t in r.tools] == [False, False]
    r = normalize_tool_request(tools, "auto", strictness="parameter")
    assert r.constrained and [t.enforce for t in r.tools] == [True, True]
    r = normalize_tool_request(tools, "none", strictness="function")
    assert r.constrained and r.tools == ()
    # none + strictness: free text in which a call cannot start
    c = build_tool_constraint(tools, "none", format="hermes", strictness="function")
    assert c is not None and '"any_tokens"' in c.spec and "<tool_call>" in c.spec
    # a tool without parameters is never enforced (there is nothing to enforce)
    r = normalize_tool_request([fn("p")], "required")
    assert r.tools[0].schema == {"type": "object"} and not r.tools[0].enforce


# -- the JSON-schema form ---------------------------------------------------------------------------

def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_json_calls_schema_over_the_corpus() -> None:
    r = normalize_tool_request(TOOLS, "required", parallel_tool_calls=True)
    schema = tool_calls_json_schema(r)
    assert schema["type"] == "array" and schema["minItems"] == 1 and "maxItems" not in schema
    assert {"Money", "Account", "Point", "Address", "LineItem"} <= set(schema["$defs"])
    val = _validator(schema)
    calls = [{"name": e["tool"]["function"]["name"], "parameters": ex} for e in BASE for ex in e["examples"]]
    assert not list(val.iter_errors(calls))
    assert list(val.iter_errors([{"name": "get_weather", "parameters": {"unit": "celsius"}}]))  # missing location
    assert list(val.iter_errors([{"name": "nope", "parameters": {}}]))
    assert list(val.iter_errors([]))
    one = _validator(tool_calls_json_schema(normalize_tool_request(TOOLS, "required", parallel_tool_calls=False)))
    assert not list(one.iter_errors(calls[:1])) and list(one.iter_errors(calls[:2]))


def test_json_format_constraint_and_reader() -> None:
    tools = TOOLS[:5]
    c = build_tool_constraint(tools, {"type": "function", "function": {"name": "get_time"}}, format="json")
    assert c is not None and c.kind == "json_schema"
    schema = json.loads(c.spec)
    assert schema["maxItems"] == 1 and schema["items"]["properties"]["name"] == {"const": "get_time"}
    # key order of the caller's schemas survives (the declared order is the order to write)
    props = list(schema["items"]["properties"]["parameters"]["properties"])
    assert props == list(tools[1]["function"]["parameters"]["properties"])
    assert build_tool_constraint(tools, "auto", format="json", strictness="parameter") is None
    out = json.dumps([{"name": "get_time", "parameters": {"tz": "Europe/Paris"}}])
    got = get_tool_reader("json", tools, "required").read(out)
    assert got.content is None and [(x.name, json.loads(x.arguments)) for x in got.calls] == [
        ("get_time", {"tz": "Europe/Paris"})]
    assert get_tool_reader("json", tools).read("plain text").content == "plain text"


def test_root_refs_are_rejected_clearly() -> None:
    t = fn("r", {"type": "object", "properties": {"self": {"$ref": "#"}}})
    with pytest.raises(ValueError, match=r"points into the tool's own root"):
        build_tool_constraint([t], "required", format="json")


# -- no mutation ------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", list_tool_formats())
def test_callers_tools_are_never_mutated(fmt: str) -> None:
    tools = copy.deepcopy(TOOLS)
    before = copy.deepcopy(tools)
    # a template-reading format (hf) takes its syntax from its model's vocabulary
    v = format_vocabulary(fmt) if isinstance(get_tool_format(fmt), ResponseTemplateFormat) else None
    for choice in ("required", "auto", {"type": "function", "function": {"name": "transfer_funds"}}):
        build_tool_constraint(tools, choice, format=fmt, parallel_tool_calls=False, strictness="parameter",
                              vocabulary=v)
    assert tools == before
    # and what we keep is ours: changing the caller's objects later changes nothing we hold
    r = normalize_tool_request(tools, "required")
    tools[7]["function"]["parameters"]["$defs"]["Money"]["type"] = "string"
    assert r.tool("transfer_funds").parameters["$defs"]["Money"]["type"] == "object"  # type: ignore[union-attr]


def test_constraints_are_deterministic_cache_keys() -> None:
    a = build_tool_constraint(TOOLS[:8], "required", format="qwen3_coder")
    b = build_tool_constraint(copy.deepcopy(TOOLS[:8]), "required", format="qwen3_coder")
    assert a is not None and a == b and a.key == b.key
    c = build_tool_constraint(TOOLS[:8], "required", format="qwen3_coder", parallel_tool_calls=False)
    assert c is not None and c.key != a.key
