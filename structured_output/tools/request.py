"""Request normalisation: an OpenAI-shaped tool request -> a :class:`ToolRequest`.

Accepted shapes (Chat Completions, plus the flat Responses-API forms):

- ``tools``: a list of ``{"type": "function", "function": {"name", "description"?, "parameters"?,
  "strict"?}}`` (or flat ``{"type": "function", "name": ..., "parameters": ...}``), and builtin tools
  ``{"type": <other>, "name"?, "parameters"?}`` (server-side tools such as ``web_search_preview``; only
  the ``openai`` harmony format has a syntax for them, the other formats ignore them);
- ``tool_choice``: ``"none"`` | ``"auto"`` (also ``None``) | ``"required"`` |
  ``{"type": "function", "function": {"name": N}}`` (or ``{"type": "function", "name": N}``) |
  ``{"type": "allowed_tools", "allowed_tools": {"mode": "auto" | "required", "tools": [refs]}}`` |
  ``{"type": <builtin type>}`` (force one builtin tool);
- ``parallel_tool_calls``: bool (default True);
- ``strictness``: ``"auto"`` | ``"function"`` | ``"parameter"`` (see :class:`ToolRequest`).

The caller's objects are never mutated: every schema is deep-copied here, once.
Bad requests raise ``ValueError`` naming the cause.
"""

from __future__ import annotations

import dataclasses

import copy
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["ToolSpec", "ToolRequest", "ToolChoiceMode", "Strictness", "KeyOrder", "with_key_order", "normalize_tool_request",
           "STRICTNESS_LEVELS", "tool_calls_json_schema", "MAX_TOOL_SCHEMA_DEPTH"]

ToolChoiceMode = Literal["none", "auto", "required", "named"]
Strictness = Literal["auto", "function", "parameter"]
KeyOrder = Literal["any", "schema"]
STRICTNESS_LEVELS: tuple[str, ...] = ("auto", "function", "parameter")

ANY_OBJECT: dict[str, Any] = {"type": "object"}

MAX_TOOL_SCHEMA_DEPTH = 128
"""The deepest nesting of JSON objects / arrays a tool's ``parameters`` schema may have (the schema
object itself is level 1; ``{"type": "object", "properties": {"a": {...}}}`` takes two levels per
property level). A deeper schema is a ``ValueError`` naming this limit."""


def _nesting_depth(value: Any, limit: int) -> int:
    """The container nesting depth of a JSON-like value, walked iteratively; stops past ``limit``
    (returns ``limit + 1``). Cycles count as too deep."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, Mapping):
            children = v.values()
        elif isinstance(v, (list, tuple)):
            children = v
        else:
            continue
        if d > limit:
            return limit + 1
        deepest = max(deepest, d)
        stack.extend((c, d + 1) for c in children)
    return deepest
_NAME = re.compile(r"[A-Za-z0-9_\-.:]{1,128}")
"""Tool names: OpenAI's letters, digits, ``_`` and ``-``, plus ``.`` and ``:`` for namespaced and builtin
names (``browser.search``); nothing that could break out of a call's syntax (quotes, ``<``, spaces)."""


@dataclass(frozen=True)
class ToolSpec:
    """One tool as the constraint builders and readers see it.

    ``parameters`` is a private deep copy of the caller's schema (``{"type": "object"}`` when it gave
    none). ``enforce`` says whether the constraint checks the arguments against ``parameters``; when
    false the arguments are only required to be well-formed (any JSON object, or any parameters for
    XML formats). ``builtin`` marks a server-side tool (harmony only)."""

    name: str
    parameters: dict[str, Any]
    strict: bool | None
    enforce: bool
    builtin: bool = False
    builtin_type: str | None = None
    any_key_order: bool = True
    """Whether the format may admit the arguments' keys in any order where its template keeps the
    caller's order (see ``build_tool_constraint``'s ``key_order``); False keeps the schema's order."""

    @property
    def schema(self) -> dict[str, Any]:
        """The schema the constraint applies to the arguments."""
        return self.parameters if self.enforce else ANY_OBJECT


@dataclass(frozen=True)
class ToolRequest:
    """A normalised tool request.

    ``tools`` are the tools a call may name (after ``tool_choice`` filtering: a named choice leaves one,
    ``allowed_tools`` leaves its subset, ``"none"`` leaves none); ``all_tools`` are every declared
    tool (readers use them). ``mode`` is ``"none"``, ``"auto"``, ``"required"`` (at least one call) or
    ``"named"`` (exactly one call of ``tools[0]``). ``parallel`` is False when at most one call may be
    made.

    Strictness decides when a constraint is built and which arguments it checks:

    - a constraint is built for ``required`` and ``named`` always; for ``auto`` when strictness is
      ``"function"`` or ``"parameter"`` or some allowed tool says ``strict: true`` (then calls, if the
      model makes any, must be valid; free text is allowed otherwise); for ``none`` when strictness is
      ``"function"`` or ``"parameter"`` (then the model may not start a call at all);
    - a tool's arguments are checked against its schema when strictness is ``"parameter"``, when the
      tool says ``strict: true``, or when the request forces a call (required / named) and the tool does
      not say ``strict: false``. Otherwise they only have to be a well-formed object.
    """

    tools: tuple[ToolSpec, ...]
    all_tools: tuple[ToolSpec, ...]
    mode: ToolChoiceMode
    parallel: bool
    strictness: Strictness
    read_undeclared: bool = False
    """Readers also read calls to tools the request did not declare (any name, any JSON object as
    arguments: ``tool_table.py``), as vLLM's parsers do; only in ``auto`` mode without ``allowed_tools``."""

    @property
    def constrained(self) -> bool:
        """Whether this request gets a constraint at all."""
        if self.mode in ("required", "named"):
            return True
        if self.strictness in ("function", "parameter"):
            return True
        return self.mode == "auto" and any(t.strict is True for t in self.tools)

    @property
    def function_tools(self) -> tuple[ToolSpec, ...]:
        return tuple(t for t in self.tools if not t.builtin)

    @property
    def max_calls(self) -> int | None:
        """1 when at most one call may be made, else None (unbounded)."""
        return 1 if (self.mode == "named" or not self.parallel) else None

    def tool(self, name: str) -> ToolSpec | None:
        for t in self.all_tools:
            if t.name == name:
                return t
        return None


def _fail(msg: str) -> ValueError:
    return ValueError(f"invalid tool request: {msg}")


def _parse_tool(raw: Any, index: int) -> tuple[str, dict[str, Any] | None, bool | None, bool, str | None]:
    """-> (name, parameters copy or None, strict, builtin, builtin_type)."""
    if not isinstance(raw, Mapping):
        raise _fail(f"tools[{index}] must be an object, got {type(raw).__name__}")
    ttype = raw.get("type", "function")
    if not isinstance(ttype, str) or not ttype:
        raise _fail(f"tools[{index}].type must be a non-empty string")
    if ttype == "function":
        fn = raw.get("function", raw)  # nested (Chat Completions) or flat (Responses)
        if not isinstance(fn, Mapping):
            raise _fail(f"tools[{index}].function must be an object")
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            raise _fail(f"tools[{index}] has no function name")
        params = fn.get("parameters")
        strict = fn.get("strict", raw.get("strict"))
        builtin, btype = False, None
    else:
        name = raw.get("name") or ttype
        if not isinstance(name, str):
            raise _fail(f"tools[{index}].name must be a string")
        params = raw.get("parameters")
        strict, builtin, btype = None, True, ttype
    if not _NAME.fullmatch(name):
        raise _fail(f"tool name {name!r} is not valid: use letters, digits, '_', '-', '.', ':' (at most 128)")
    if strict is not None and not isinstance(strict, bool):
        raise _fail(f"tool {name!r}: strict must be a boolean, got {strict!r}")
    if params is not None:
        if not isinstance(params, Mapping):
            raise _fail(f"tool {name!r}: parameters must be a JSON schema object, got {type(params).__name__}")
        if params.get("type", "object") != "object":
            raise _fail(f"tool {name!r}: parameters must be a schema of type 'object', got {params.get('type')!r}")
        if _nesting_depth(params, MAX_TOOL_SCHEMA_DEPTH) > MAX_TOOL_SCHEMA_DEPTH:
            raise _fail(f"tool {name!r}: parameters nest deeper than {MAX_TOOL_SCHEMA_DEPTH} levels of JSON "
                        f"objects / arrays (MAX_TOOL_SCHEMA_DEPTH)")
        try:
            params = copy.deepcopy(dict(params))
            json.dumps(params)
        except (TypeError, ValueError) as e:
            raise _fail(f"tool {name!r}: parameters are not JSON-serialisable ({e})") from e
    return name, params, strict, builtin, btype


def _choice_name(choice: Mapping[str, Any]) -> str:
    fn = choice.get("function")
    name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
    if not isinstance(name, str) or not name:
        raise _fail(f"tool_choice {dict(choice)!r} names no function")
    return name


def normalize_tool_request(
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None = "auto",
    *,
    parallel_tool_calls: bool = True,
    strictness: Strictness = "auto",
    read_undeclared: bool = False,
) -> ToolRequest:
    """Validate and normalise an OpenAI-shaped tool request (see the module docstring).

    Raises ``ValueError`` for: tools that are not a list of tool objects, a function without a name,
    duplicate tool names, parameters that are not an object schema, an unknown ``tool_choice``, a
    named function (or allowed tool) missing from ``tools``, parameters nested deeper than
    :data:`MAX_TOOL_SCHEMA_DEPTH`, ``"required"`` with no tools (or only
    builtin tools), an unknown strictness. ``read_undeclared``: see :attr:`ToolRequest.read_undeclared`."""
    if strictness not in STRICTNESS_LEVELS:
        raise _fail(f"unknown strictness {strictness!r}; known: {', '.join(STRICTNESS_LEVELS)}")
    if not isinstance(parallel_tool_calls, bool):
        raise _fail(f"parallel_tool_calls must be a boolean, got {parallel_tool_calls!r}")
    if tools is None:
        tools = []
    if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
        raise _fail(f"tools must be a list, got {type(tools).__name__}")

    parsed = [_parse_tool(t, i) for i, t in enumerate(tools)]
    seen: set[str] = set()
    for name, *_ in parsed:
        if name in seen:
            raise _fail(f"duplicate tool name {name!r}")
        seen.add(name)
    names = [p[0] for p in parsed]

    # -- tool_choice -> mode and allowed names
    allowed: list[str] = list(names)
    mode: ToolChoiceMode
    if tool_choice is None:
        tool_choice = "auto"
    if isinstance(tool_choice, str):
        if tool_choice not in ("none", "auto", "required"):
            raise _fail(f"unknown tool_choice {tool_choice!r}; expected 'none', 'auto', 'required' or an object")
        mode = tool_choice  # type: ignore[assignment]
        if mode == "none":
            allowed = []
    elif isinstance(tool_choice, Mapping):
        ctype = tool_choice.get("type")
        if ctype == "function":
            name = _choice_name(tool_choice)
            if name not in names:
                raise _fail(f"tool_choice names function {name!r}, which is not in tools "
                            f"(available: {', '.join(names) or 'none'})")
            mode, allowed = "named", [name]
        elif ctype == "allowed_tools":
            spec = tool_choice.get("allowed_tools")
            if not isinstance(spec, Mapping):
                raise _fail("tool_choice.allowed_tools must be an object with 'mode' and 'tools'")
            amode = spec.get("mode", "auto")
            if amode not in ("auto", "required"):
                raise _fail(f"allowed_tools.mode must be 'auto' or 'required', got {amode!r}")
            refs = spec.get("tools")
            if not isinstance(refs, Sequence) or isinstance(refs, (str, bytes)):
                raise _fail("allowed_tools.tools must be a list of tool references")
            allowed = []
            for ref in refs:
                if not isinstance(ref, Mapping):
                    raise _fail(f"allowed_tools.tools item {ref!r} is not an object")
                if ref.get("type", "function") == "function":
                    name = _choice_name(ref)
                    if name not in names:
                        raise _fail(f"allowed_tools names function {name!r}, which is not in tools "
                                    f"(available: {', '.join(names) or 'none'})")
                else:
                    matches = [p[0] for p in parsed if p[3] and p[4] == ref.get("type")]
                    if not matches:
                        raise _fail(f"allowed_tools names builtin tool type {ref.get('type')!r}, which is not in tools")
                    name = matches[0]
                if name not in allowed:
                    allowed.append(name)
            mode = amode
        elif isinstance(ctype, str) and ctype:
            matches = [p[0] for p in parsed if p[3] and p[4] == ctype]
            if len(matches) != 1:
                raise _fail(f"tool_choice forces builtin tool type {ctype!r}, which matches {len(matches)} "
                            f"tools (needs exactly one)")
            mode, allowed = "named", matches
        else:
            raise _fail(f"tool_choice object has no valid 'type': {dict(tool_choice)!r}")
    else:
        raise _fail(f"tool_choice must be a string or an object, got {type(tool_choice).__name__}")

    if mode == "required":
        if not allowed:
            raise _fail("tool_choice is 'required' but there are no tools")
        if all(p[3] for p in parsed if p[0] in allowed):
            kinds = ", ".join(sorted({str(p[4]) for p in parsed if p[0] in allowed}))
            raise _fail(f"tool_choice is 'required' but every available tool is builtin ({kinds}); "
                        f"'required' needs at least one function tool")

    forced = mode in ("required", "named")

    def spec(p: tuple[str, dict[str, Any] | None, bool | None, bool, str | None]) -> ToolSpec:
        name, params, strict, builtin, btype = p
        enforce = params is not None and (
            strictness == "parameter" or strict is True or (forced and strict is not False))
        return ToolSpec(name, params if params is not None else dict(ANY_OBJECT), strict, enforce, builtin, btype)

    all_specs = tuple(spec(p) for p in parsed)
    by_name = {t.name: t for t in all_specs}
    if not isinstance(read_undeclared, bool):
        raise _fail(f"read_undeclared must be a boolean, got {read_undeclared!r}")
    undeclared = read_undeclared and mode == "auto" and len(allowed) == len(names)
    return ToolRequest(tuple(by_name[n] for n in allowed), all_specs, mode, parallel_tool_calls, strictness,
                       undeclared)


# --------------------------------------------------------------------------------------------------
# $defs handling and the JSON-schema form of the calls

_DEF_KEYS = ("$defs", "definitions")


def merge_defs(schemas: Sequence[tuple[str, Mapping[str, Any]]]) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """Lift ``$defs`` / ``definitions`` out of each (name, schema) so they can live at one root.

    Returns the schemas without their definitions (copies) and ``{"$defs": {...}, "definitions": {...}}``
    with the merged definitions (only non-empty keys). Two tools that define the same name differently
    raise ``ValueError`` naming both tools and the definition. References stay as written
    (``#/$defs/X`` and ``#/definitions/X`` resolve at the new root)."""
    merged: dict[str, dict[str, Any]] = {}
    owner: dict[tuple[str, str], str] = {}
    out: list[dict[str, Any]] = []
    for tool_name, schema in schemas:
        s = dict(schema)
        for key in _DEF_KEYS:
            defs = s.pop(key, None)
            if defs is None:
                continue
            if not isinstance(defs, Mapping):
                raise _fail(f"tool {tool_name!r}: {key} must be an object")
            bucket = merged.setdefault(key, {})
            for dname, dschema in defs.items():
                if dname in bucket and bucket[dname] != dschema:
                    raise _fail(f"conflicting {key} {dname!r}: tools {owner[(key, dname)]!r} and {tool_name!r} "
                                f"define it differently")
                bucket[dname] = dschema
                owner.setdefault((key, dname), tool_name)
        out.append(s)
    return out, merged


def _check_root_refs(tool_name: str, schema: Any) -> None:
    """A ``$ref`` to ``#`` (the tool's own root) cannot survive embedding; reject it clearly."""
    if isinstance(schema, Mapping):
        ref = schema.get("$ref")
        if ref == "#" or (isinstance(ref, str) and ref.startswith("#/") and
                          not ref.startswith(("#/$defs/", "#/definitions/"))):
            raise _fail(f"tool {tool_name!r}: $ref {ref!r} points into the tool's own root; only "
                        f"'#/$defs/...' and '#/definitions/...' references are supported")
        for v in schema.values():
            _check_root_refs(tool_name, v)
    elif isinstance(schema, list):
        for v in schema:
            _check_root_refs(tool_name, v)


def tool_calls_json_schema(request: ToolRequest) -> dict[str, Any]:
    """The JSON schema of the calls for a format without its own syntax.

    ``[{"name": <tool>, "parameters": <its schema>}, ...]``: at least one item, at most one when
    parallel calls are off or a function is named; the tools' ``$defs`` merged at the root."""
    tools = request.function_tools
    if not tools:
        raise _fail("no function tools to build a JSON schema of calls from")
    for t in tools:
        _check_root_refs(t.name, t.schema)
    stripped, defs = merge_defs([(t.name, t.schema) for t in tools])
    items = [
        {"type": "object",
         "properties": {"name": {"const": t.name}, "parameters": s},
         "required": ["name", "parameters"],
         "additionalProperties": False}
        for t, s in zip(tools, stripped)
    ]
    schema: dict[str, Any] = {
        "type": "array",
        "items": items[0] if len(items) == 1 else {"anyOf": items},
        "minItems": 1,
    }
    if request.max_calls == 1:
        schema["maxItems"] = 1
    schema.update(defs)
    return schema


def with_key_order(request: ToolRequest, key_order: KeyOrder) -> ToolRequest:
    """``request`` with its tools' keys admitted in ``key_order``: ``"any"`` (the caller's order, where the
    format's template keeps it: a key twice or a required key left out is then caught by the key check
    at the end of the output, not masked) or ``"schema"`` (the schema's order only, exact token by
    token). ``ValueError`` for another value."""
    if key_order not in ("any", "schema"):
        raise ValueError(f"key_order must be 'any' or 'schema', got {key_order!r}")
    if key_order == "any":
        return request
    def fixed(ts: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
        return tuple(dataclasses.replace(t, any_key_order=False) for t in ts)
    return dataclasses.replace(request, tools=fixed(request.tools), all_tools=fixed(request.all_tools))
