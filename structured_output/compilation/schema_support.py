"""Which JSON-schema keywords the grammar enforces, which are checked on the finished output, and which
a request cannot use at all.

xgrammar's JSON-schema converter (0.2.8 / 0.2.9) silently ignores many keywords: the grammar then
lets through outputs that break the schema. Every keyword is in exactly one group, found by compiling
a schema with the keyword and feeding the grammar a valid and a violating instance
(``tests/test_schema_support.py`` keeps that check for every keyword of group 1, so an xgrammar that
drops one fails our suite):

=====================  ==========================================================================
group                  keywords
=====================  ==========================================================================
1 GRAMMAR_ENFORCED     ``type`` (non-empty), ``enum``, ``const``, ``properties``,
                       ``additionalProperties``, ``required``, ``minProperties``,
                       ``maxProperties``, ``propertyNames``, ``items`` (a schema or a boolean),
                       ``prefixItems``, ``minItems``, ``maxItems``, ``minLength``, ``maxLength``,
                       ``pattern``, ``format`` (the formats in ``GRAMMAR_FORMATS``), ``minimum``,
                       ``maximum``, ``exclusiveMinimum``, ``exclusiveMaximum``, ``multipleOf``,
                       ``anyOf``, ``allOf`` (one subschema), ``$ref`` (``#`` or ``#/pointer``),
                       ``$defs`` / ``definitions`` (containers)
2 OUTPUT_CHECKED       ``uniqueItems``, ``contains``, ``minContains``, ``maxContains``, ``not``,
                       ``if`` / ``then`` / ``else``, ``dependentRequired``, ``dependentSchemas``,
                       ``dependencies`` (draft 7), ``oneOf`` (exclusivity), ``allOf`` (2+
                       subschemas), ``patternProperties``, ``unevaluatedProperties``,
                       ``unevaluatedItems``, ``$dynamicRef``, ``$recursiveRef``; and a group-1
                       keyword where the grammar does not enforce it (below)
3 ALWAYS_REJECTED      an external ``$ref`` (not ``#...``), a ``$ref`` that does not resolve,
                       ``"type": []``, ``required`` naming a property that no object can have
                       (absent from ``properties`` while additional properties are forbidden;
                       ``strict`` reads an unset ``additionalProperties`` as false), a ``pattern``
                       with lookbehind or a backreference (xgrammar cannot compile it)
ANNOTATIONS            ``$schema``, ``$id``, ``$anchor``, ``$dynamicAnchor``, ``$recursiveAnchor``,
                       ``$comment``,
                       ``$vocabulary``, ``title``, ``description``, ``default``, ``examples``,
                       ``deprecated``, ``readOnly``, ``writeOnly``, ``contentEncoding``,
                       ``contentMediaType``, ``contentSchema``: they constrain no instance (as
                       in JSON Schema 2020-12); so do keywords JSON Schema does not define
=====================  ==========================================================================

Where a group-1 keyword is *not* enforced by the grammar, it is reported in group 2 with its path
(measured on xgrammar 0.2.9):

- a type-specific keyword (``minLength``, ``minimum``, ``required``, ``minItems``...) without a
  ``type`` naming its type: the converter ignores it;
- ``minLength`` / ``maxLength`` next to ``pattern`` or ``format`` (the length is dropped);
- ``multipleOf`` unless ``type`` is ``"integer"`` (ignored for numbers);
- ``enum`` / ``const`` next to any validation keyword but a ``type`` every value fits (the converter
  emits the values and ignores the siblings);
- ``anyOf`` / ``allOf`` / ``$ref`` next to any other validation keyword (siblings are dropped), and
  a ``$ref`` to an anchor (``#name``);
- ``propertyNames`` next to ``properties`` / ``required`` (the listed names skip it);
- ``required`` naming a property absent from ``properties`` while additional properties are
  allowed;
- a ``pattern`` with lookahead (``(?=`` / ``(?!``: xgrammar drops the assertion, a wider language);
- a ``format`` xgrammar does not know (``jsonschema``'s ``FormatChecker`` checks it where it knows
  the format; a format neither knows is an annotation, as in JSON Schema 2020-12).

The output check validates the whole finished output against the whole schema with ``jsonschema``
(Draft 2020-12, plus draft 7's ``dependencies``), once, when the grammar accepts a stop token. A schema
that uses no group-2 keyword pays nothing: :func:`schema_check` returns None for it.

With ``unsupported="reject"`` (:meth:`Constraint.json_schema`), a group-2 keyword is a ``ValueError``
naming the keyword and its path instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import jsonschema
import xgrammar as xgr

from .jsonws.bound import BoundedMatcher

__all__ = ["GRAMMAR_ENFORCED", "OUTPUT_CHECKED", "ALWAYS_REJECTED", "ANNOTATIONS", "GRAMMAR_FORMATS",
           "MAX_SCHEMA_DEPTH", "UNSUPPORTED_MODES", "find_unenforced", "schema_check", "OutputCheck",
           "RecordingMatcher", "new_matcher", "output_problem"]

GRAMMAR_ENFORCED: frozenset[str] = frozenset({
    "type", "enum", "const", "properties", "additionalProperties", "required", "minProperties",
    "maxProperties", "propertyNames", "items", "prefixItems", "minItems", "maxItems", "minLength",
    "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
    "multipleOf", "anyOf", "allOf", "$ref", "$defs", "definitions"})
"""Group 1: the grammar enforces these (under the conditions in the module docstring)."""

OUTPUT_CHECKED: frozenset[str] = frozenset({
    "uniqueItems", "contains", "minContains", "maxContains", "not", "if", "then", "else",
    "dependentRequired", "dependentSchemas", "dependencies", "oneOf", "patternProperties",
    "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef"})
"""Group 2: the grammar does not enforce these; the finished output is checked with ``jsonschema``."""

ALWAYS_REJECTED: frozenset[str] = frozenset({
    "$ref (external or unresolved)", "type: []", "required (impossible)",
    "pattern (lookbehind or backreference)"})
"""Group 3: what can never be compiled or checked honestly; ``add_request`` raises ``ValueError``."""

ANNOTATIONS: frozenset[str] = frozenset({
    "$schema", "$id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "$comment", "$vocabulary",
    "title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly",
    "contentEncoding", "contentMediaType", "contentSchema"})
"""Keywords that constrain no instance."""

GRAMMAR_FORMATS: frozenset[str] = frozenset({
    "email", "date", "date-time", "time", "uuid", "ipv4", "ipv6", "uri", "hostname", "duration"})
"""``format`` values xgrammar's converter enforces (measured on 0.2.9)."""

MAX_SCHEMA_DEPTH = 64
"""Subschemas nested deeper than this are a ``ValueError`` (a hostile schema; xgrammar's converter
recurses natively)."""

UNSUPPORTED_MODES = ("check", "reject")

# keywords whose meaning applies to one JSON type; without a ``type`` naming it xgrammar ignores them
_TYPE_OF: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("properties", "additionalProperties", "required", "minProperties", "maxProperties",
                     "propertyNames"), ("object",)),
    **dict.fromkeys(("items", "prefixItems", "minItems", "maxItems"), ("array",)),
    **dict.fromkeys(("minLength", "maxLength", "pattern", "format"), ("string",)),
    **dict.fromkeys(("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"), ("integer", "number")),
    "multipleOf": ("integer", "number"),
}
# keywords whose value is a subschema / a list of them / a map of them
_SUB_ONE = ("additionalProperties", "propertyNames", "contains", "not", "if", "then", "else",
            "unevaluatedProperties", "unevaluatedItems", "contentSchema", "additionalItems")
_SUB_LIST = ("allOf", "anyOf", "oneOf", "prefixItems")
_SUB_MAP = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_CONTAINERS = frozenset({"$defs", "definitions"})
_IN_PLACE = ("anyOf", "allOf", "$ref")  # applicators whose siblings xgrammar drops
_JSON_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _ptr(path: str, *parts: Any) -> str:
    for p in parts:
        path += "/" + str(p).replace("~", "~0").replace("/", "~1")
    return path


def _regex_problem(pattern: str) -> str | None:
    """"lookahead", "lookbehind", "backreference" or None (escapes and character classes skipped)."""
    i, n, in_class = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            nxt = pattern[i + 1:i + 2]
            if not in_class and (nxt.isdigit() and nxt != "0" or pattern.startswith("k<", i + 1)):
                return "backreference"
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if pattern.startswith("]", i + 1) or pattern.startswith("^]", i + 1):
                i += 1 + (pattern[i + 1] == "^")
        elif c == "(" and pattern.startswith("?", i + 1):
            if pattern.startswith(("?=", "?!"), i + 1):
                return "lookahead"
            if pattern.startswith(("?<=", "?<!"), i + 1):
                return "lookbehind"
        i += 1
    return None


def _unescape(token: str, *, uri: bool = True) -> str:
    """A JSON-pointer token (``uri``: from a ``$ref``, so percent-encoded too)."""
    if uri:
        from urllib.parse import unquote
        token = unquote(token)
    return token.replace("~1", "/").replace("~0", "~")


def _resolve_pointer(root: Any, ref: str) -> bool:
    node = root
    if ref in ("#", "#/"):
        return True
    for token in ref[2:].split("/"):
        key = _unescape(token)
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return False
    return isinstance(node, (dict, bool))


def _types(schema: Mapping[str, Any]) -> set[str] | None:
    t = schema.get("type")
    if isinstance(t, str):
        return {t}
    if isinstance(t, list):
        return {x for x in t if isinstance(x, str)}
    return None


def _fits_type(value: Any, types: set[str]) -> bool:
    for t in types:
        if t in ("integer", "number"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if t == "number" or float(value).is_integer():
                return True
        elif isinstance(value, _JSON_TYPES.get(t, ())) and not (t != "boolean" and isinstance(value, bool)):
            return True
    return False


def find_unenforced(schema: Any, *, strict: bool = True) -> list[tuple[str, str]]:
    """The keywords of ``schema`` the grammar does not enforce (group 2), as ``(keyword, path)`` with
    a JSON-pointer path (``#/properties/tags``), in schema order. Raises ``ValueError`` naming the
    keyword and its path for what can never be honoured (group 3) and for subschemas nested deeper
    than :data:`MAX_SCHEMA_DEPTH`. Walks iteratively."""
    found: list[tuple[str, str]] = []
    anchors: set[str] = set()
    refs: list[tuple[str, str]] = []
    stack: list[tuple[Any, str, int, bool]] = [(schema, "#", 0, False)]
    while stack:
        node, path, depth, is_name = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, Mapping):
            raise ValueError(f"invalid JSON schema: the subschema at {path} is a {type(node).__name__}, "
                             "not an object or a boolean")
        if depth > MAX_SCHEMA_DEPTH:
            raise ValueError(f"invalid JSON schema: subschemas nested deeper than {MAX_SCHEMA_DEPTH} "
                             f"levels (at {path})")
        _classify(node, path, strict, found, refs, {"string"} if is_name else None)
        for a in ("$anchor", "$dynamicAnchor"):
            if isinstance(node.get(a), str):
                anchors.add(node[a])
        children: list[tuple[Any, str]] = []
        for k, v in node.items():
            if k == "propertyNames":  # its instance is a property name: a string
                stack.append((v, _ptr(path, k), depth + 1, True))
            elif k in _SUB_ONE or (k == "items" and not isinstance(v, list)):
                children.append((v, _ptr(path, k)))
            elif k in _SUB_LIST or (k == "items" and isinstance(v, list)):
                if isinstance(v, list):
                    children += [(s, _ptr(path, k, i)) for i, s in enumerate(v)]
            elif k in _SUB_MAP or (k == "dependencies" and isinstance(v, Mapping)):
                if isinstance(v, Mapping):
                    children += [(s, _ptr(path, k, name)) for name, s in v.items()
                                 if not (k == "dependencies" and isinstance(s, list))]
        for child in reversed(children):
            stack.append((child[0], child[1], depth + 1, False))
    for ref, path in refs:
        if ref.startswith("#/") or ref == "#":
            if not _resolve_pointer(schema, ref):
                raise ValueError(f"JSON schema: $ref {ref!r} at {path} does not resolve")
        elif ref[1:] not in anchors:
            raise ValueError(f"JSON schema: $ref {ref!r} at {path} does not resolve")
    return found


def _classify(node: Mapping[str, Any], path: str, strict: bool, found: list[tuple[str, str]],
              refs: list[tuple[str, str]], implied: set[str] | None = None) -> None:
    """Add the group-2 keywords of one schema object (not its subschemas) to ``found``. ``implied``:
    the types the instance can only have there (a property name is a string)."""
    types = _types(node) or implied
    if "type" in node:
        t = node["type"]
        if t == [] or not isinstance(t, (str, list)):
            raise ValueError(f"JSON schema: 'type' at {path} must be a type name or a non-empty list "
                             f"of them, got {json.dumps(t)}")
    validation = [k for k in node if k not in ANNOTATIONS and k not in _CONTAINERS]

    def add(keyword: str) -> None:
        found.append((keyword, path))

    for k in validation:
        if k in OUTPUT_CHECKED:
            if k == "oneOf" and isinstance(node[k], list) and len(node[k]) <= 1 and len(validation) == 1:
                continue  # one branch: what anyOf does
            add(k)
            continue
        if k not in GRAMMAR_ENFORCED:
            continue  # not a JSON Schema keyword: constrains nothing
        applies = _TYPE_OF.get(k)
        if applies is not None:
            if types is None:  # no type: the converter ignores the keyword
                add(k)
                continue
            if not types & set(applies):  # a keyword of a type the instance cannot have: vacuous
                continue
        if k == "multipleOf":
            if "number" in types or not isinstance(node[k], int) or isinstance(node[k], bool):
                add(k)
        elif k in ("minLength", "maxLength") and ("pattern" in node or "format" in node):
            add(k)
        elif k in ("enum", "const"):
            values = node[k] if k == "enum" else [node[k]]
            others = [x for x in validation if x not in ("enum", "const", "type")]
            if others or (types is not None and isinstance(values, list)
                          and not all(_fits_type(v, types) for v in values)):
                add(k)
        elif k in _IN_PLACE:
            if k == "allOf" and isinstance(node[k], list) and len(node[k]) > 1:
                add(k)
            elif [x for x in validation if x != k]:
                add(k)
            if k == "$ref":
                ref = node[k]
                if not isinstance(ref, str) or not ref.startswith("#"):
                    raise ValueError(f"JSON schema: external $ref {ref!r} at {path}: only references "
                                     "inside the schema ('#...') can be compiled")
                refs.append((ref, path))
                if not (ref == "#" or ref.startswith("#/")) and ("$ref", path) not in found:
                    add(k)  # an anchor: xgrammar reads it as any JSON
        elif k == "propertyNames" and ("properties" in node or "required" in node):
            add(k)
        elif k == "required" and isinstance(node[k], list):
            props = node.get("properties") if isinstance(node.get("properties"), Mapping) else {}
            absent = [r for r in node[k] if r not in props]
            if absent:
                addl = node.get("additionalProperties", None if not strict else False)
                if addl is False and "patternProperties" not in node and not any(
                        x in node for x in ("anyOf", "allOf", "oneOf", "$ref", "if", "dependentSchemas")):
                    raise ValueError(f"JSON schema: 'required' at {path} names {absent[0]!r}, which is not "
                                     "in 'properties' while additional properties are forbidden"
                                     + (" (strict reads an unset additionalProperties as false)"
                                        if "additionalProperties" not in node else "")
                                     + ": no output can satisfy it")
                add(k)
        elif k == "pattern" and isinstance(node[k], str):
            problem = _regex_problem(node[k])
            if problem == "lookahead":
                add(k)
            elif problem is not None:
                raise ValueError(f"JSON schema: 'pattern' at {path} uses a {problem}, which the grammar "
                                 f"cannot express: {node[k]!r}")
        elif k == "format" and node[k] not in GRAMMAR_FORMATS:
            add(k)


class OutputCheck:
    """The finished output's check against the full schema (for a schema with group-2 keywords)."""

    __slots__ = ("keywords", "_schema", "_validator")

    def __init__(self, schema: Any, keywords: Sequence[tuple[str, str]]) -> None:
        self.keywords = tuple(keywords)
        self._schema = schema
        formats = sorted({str(node_format) for node_format in _formats(schema, keywords)})
        checker = jsonschema.FormatChecker(formats) if formats else None
        self._validator = _VALIDATOR(schema, format_checker=checker)

    def __reduce__(self) -> tuple:
        # the validator's class is made by jsonschema at run time and does not pickle: rebuild it
        return (OutputCheck, (self._schema, self.keywords))

    def problem(self, text: str) -> str | None:
        """None when ``text`` is JSON valid for the schema, else a message naming the violated keyword,
        its schema path and the output path."""
        try:
            instance = json.loads(text)
        except (ValueError, RecursionError) as e:
            return f"the output is not JSON the schema check can read: {e}"
        try:
            error = jsonschema.exceptions.best_match(self._validator.iter_errors(instance))
        except RecursionError:
            return "the output is nested too deeply to check against the JSON schema"
        except Exception as e:  # an unresolvable reference the walk did not see: never call it valid
            return f"the output could not be checked against the JSON schema: {e}"
        if error is None:
            return None
        schema_path = _ptr("#", *error.absolute_schema_path)
        return (f"the output breaks the JSON schema: {error.validator!r} at {schema_path} "
                f"(output {error.json_path}): {error.message}")

    def problem_of_tokens(self, vocabulary: Any, tokens: Iterable[int], stop_ids: Any) -> str | None:
        """:meth:`problem` of the output's tokens (stop tokens left out). The contract of every output
        check (``tools/key_check.py`` has the other one)."""
        token_bytes = vocabulary.token_bytes
        data = b"".join(token_bytes[t] for t in tokens if t not in stop_ids)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            return f"the output is not UTF-8: {e}"
        return self.problem(text)


def _formats(schema: Any, keywords: Sequence[tuple[str, str]]) -> list[str]:
    out = []
    for k, path in keywords:
        if k != "format":
            continue
        node = schema
        for token in path[2:].split("/") if path != "#" else ():
            key = _unescape(token, uri=False)
            node = node[int(key)] if isinstance(node, list) else node[key]
        out.append(node["format"])
    return out


def _validator_class() -> Any:
    base = jsonschema.Draft202012Validator
    return jsonschema.validators.extend(
        base, {"dependencies": jsonschema.Draft7Validator.VALIDATORS["dependencies"]})


_VALIDATOR = _validator_class()


def schema_check(spec: str, *, strict: bool = True, unsupported: str = "check") -> OutputCheck | None:
    """The output check a JSON-schema constraint needs (None when the grammar enforces all of it).
    ``ValueError`` naming the keyword and its path for group 3, and for group 2 when ``unsupported`` is
    ``"reject"``."""
    if unsupported not in UNSUPPORTED_MODES:
        raise ValueError(f"unsupported must be one of {UNSUPPORTED_MODES}, got {unsupported!r}")
    try:
        schema = json.loads(spec)
    except RecursionError:
        raise ValueError("invalid JSON schema: nested too deeply") from None
    keywords = find_unenforced(schema, strict=strict)
    if not keywords:
        return None
    if unsupported == "reject":
        where = ", ".join(f"{k!r} at {p}" for k, p in keywords[:5])
        more = f" and {len(keywords) - 5} more" if len(keywords) > 5 else ""
        raise ValueError(f"JSON schema: keywords the grammar cannot enforce (unsupported='reject'): "
                         f"{where}{more}")
    return OutputCheck(schema, keywords)


class RecordingMatcher(xgr.GrammarMatcher):
    """A matcher that keeps the tokens it accepted (rollbacks included), for the output check of a
    schema with group-2 keywords; the other requests keep plain matchers."""

    def __init__(self, compiled: xgr.CompiledGrammar, check: OutputCheck, **kwargs: Any) -> None:
        super().__init__(compiled, **kwargs)
        self.tokens: list[int] = []
        self.check = check

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        ok = super().accept_token(token_id, debug_print=debug_print)
        if ok:
            self.tokens.append(token_id)
        return ok

    def rollback(self, num_tokens: int = 1) -> None:
        super().rollback(num_tokens)
        if num_tokens > 0:
            del self.tokens[-num_tokens:]

    def reset(self) -> None:
        super().reset()
        self.tokens.clear()


class _RecordingBoundedMatcher(RecordingMatcher, BoundedMatcher):
    """:class:`RecordingMatcher` with a JSON whitespace bound (``jsonws/bound.py``)."""


def new_matcher(compiled: Any) -> xgr.GrammarMatcher:
    """The matcher for a request of ``compiled`` (a :class:`CompiledConstraint`): one that records
    its tokens when the constraint needs an output check, and a :class:`~.jsonws.bound.BoundedMatcher`
    when it has a JSON whitespace bound."""
    check = compiled.constraint.schema_check
    bound = compiled.whitespace
    if check is None:
        return xgr.GrammarMatcher(compiled.grammar) if bound is None else BoundedMatcher(compiled.grammar, bound)
    if bound is None:
        return RecordingMatcher(compiled.grammar, check)
    return _RecordingBoundedMatcher(compiled.grammar, check, bound=bound)


def output_problem(matcher: Any, vocabulary: Any, stop_ids: Any) -> str | None:
    """At termination: None when the output is valid (always, for a plain matcher), else the message."""
    if not isinstance(matcher, RecordingMatcher):
        return None
    return matcher.check.problem_of_tokens(vocabulary, matcher.tokens, stop_ids)
