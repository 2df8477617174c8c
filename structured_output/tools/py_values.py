"""Python-literal keyword arguments (``f(a='x', b=1, c=[True, None])``): their grammar under a tool's JSON
schema, and their reader.

The pythonic families (``pythonic.py``) write a call as a Python call expression whose keyword values
are literals. Two spellings of the values, as their templates and prompts write them:

- ``"python"`` (Llama 3.2 / Llama 4 pythonic, LFM2): Python literals; a string in single or double
  quotes with Python's escapes (the prompts show both: ``location="Vancouver"``; ``repr`` writes
  ``'Vancouver'``), ``True`` / ``False`` / ``None``, numbers, ``[...]``, ``{'k': v}``;
- ``"olmo"`` (Olmo 3's template): a string as ``'`` + text + ``'``, ``true`` / ``false`` / ``null`` for
  the JSON literals, every other value with ``tojson`` (numbers, arrays, objects as JSON, which Python
  reads as the same literals once ``true`` / ``false`` / ``null`` are taken as names).

The grammar (:class:`PyArgsGrammar`): a tool's keywords in its schema's property order, each one
optional unless required, separated by ``", "``; values typed by their schema (``const`` / ``enum``,
``anyOf`` / ``oneOf``, type lists, nested objects and arrays). A string's ``pattern`` is enforced where it is
anchored and spells its strings without escapes (:func:`quoted_pattern`), else its lengths; string keywords
that a regex over Python escapes cannot express exactly (other patterns, ``format``) are not enforced by the
grammar; the
request's rules check an enforced tool's arguments against its schema after the fact (``policy.py``).
A tool whose arguments are not enforced takes any keywords (identifiers) with any literal values,
nested :attr:`PyArgsGrammar.any_depth` levels. A property name that is no Python identifier, or is a
Python keyword (``from``, ``class``), cannot be written as a keyword argument: ``ValueError`` naming
the tool and the property.

The reader (:func:`literal_value`, :func:`call_of`) reads an ``ast`` node as vLLM's pythonic parsers
do (``vllm/tool_parsers/utils.py``: ``get_parameter_value``, ``handle_single_tool``): constants,
lists, tuples and sets (as lists), dicts with constant keys, ``-`` / ``+`` before a number, f-strings
without placeholders, and the names ``true`` / ``false`` / ``null``; a dotted callee keeps its dots.
Anything else (a variable, an expression, bytes, positional arguments, ``**kw``) is :class:`NotLiteral`
and the reader keeps that text as content.
"""

from __future__ import annotations

import ast
import json
import keyword
import math
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

import xgrammar as xgr

from .marked import MAX_ARGUMENT_DEPTH
from .request import ToolSpec
from .syntax import (Fmt, const, defs_of, item_bounds, json_fmt, opt, or_, regex, repeated, resolve_ref, seq, star,
                     with_defs)
from .xml_values import MAX_RAW_MIN_LENGTH, raw_min_length

__all__ = ["PyValueStyle", "PyArgsGrammar", "NotLiteral", "literal_value", "call_of", "PY_IDENTIFIER"]

PyValueStyle = Literal["python", "olmo"]

PY_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
"""A keyword argument's name (ASCII identifiers: what the families' tools use)."""

_MAX_SCHEMA_DEPTH = 32
_NUMERIC_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")

# Python string literals without a prefix, on one line: a character other than the quote, the backslash
# and line breaks, or an escape (\\ \' \" \n \r \t \0 \a \b \f \v, \xhh, \uhhhh, \Uhhhhhhhh)
_ESCAPE = r"\\([\\'\"nrt0abfv]|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8})"


def quoted(quote: str, min_length: int = 0, max_length: int | None = None) -> str:
    """A regex for a Python string literal in ``quote`` of ``min_length`` to ``max_length`` characters (each
    escape is one character, as Python reads it)."""
    unit = f"([^{quote}\\\\\\n\\r]|{_ESCAPE})"
    if not min_length and max_length is None:
        return f"{quote}{unit}*{quote}"
    if max_length is None:
        return f"{quote}{unit}{{{min_length}}}{unit}*{quote}"
    return f"{quote}{unit}{{{min_length},{max_length}}}{quote}"


SINGLE_QUOTED = quoted("'")
DOUBLE_QUOTED = quoted('"')

_UNESCAPED_MAX_RANGE = 4096  # a character class range wider than this is not checked character by character


def _unescaped(c: int) -> bool:
    """Python writes the character ``c`` as itself inside either quote (``repr``)."""
    ch = chr(c)
    return ch.isprintable() and ch not in "'\"\\"


def _spelled_as_is(nodes: Any) -> bool:
    """Every string the parsed regex ``nodes`` (``re._parser``) matches is written by Python as itself inside
    quotes: only characters :func:`_unescaped` accepts, from literals, non-negated classes, ``\\d`` / ``\\w``,
    groups, alternations and repeats."""
    from re import _constants as c  # type: ignore[attr-defined]

    for op, av in nodes:
        if op is c.LITERAL:
            ok = _unescaped(av)
        elif op is c.IN:
            ok = all(_class_item_as_is(o, a) for o, a in av)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT):
            ok = _spelled_as_is(av[2])
        elif op is c.SUBPATTERN:
            ok = _spelled_as_is(av[3])
        elif op is c.BRANCH:
            ok = all(_spelled_as_is(b) for b in av[1])
        else:  # ., negated classes, \s, anchors inside, look-arounds, back-references
            ok = False
        if not ok:
            return False
    return True


def _class_item_as_is(op: Any, av: Any) -> bool:
    from re import _constants as c  # type: ignore[attr-defined]

    if op is c.LITERAL:
        return _unescaped(av)
    if op is c.RANGE:
        lo, hi = av
        return hi - lo <= _UNESCAPED_MAX_RANGE and all(_unescaped(x) for x in range(lo, hi + 1))
    if op is c.CATEGORY:
        return av in (c.CATEGORY_DIGIT, c.CATEGORY_WORD)
    return False  # a negated class


def quoted_pattern(quote: str, pattern: Any) -> str | None:
    """A regex for a Python string literal in ``quote`` whose value matches the JSON-schema ``pattern`` where
    :func:`pattern_body` finds that exact, else None."""
    body = pattern_body(pattern)
    return None if body is None else f"{quote}({body}){quote}"


def pattern_body(pattern: Any) -> str | None:
    """The regex between the quotes of a Python string literal whose value matches the JSON-schema ``pattern``,
    where that is exact: the pattern is anchored at both ends (``^...$``) and every string it matches is written
    without escapes (:func:`_spelled_as_is`: ``^[A-Z]{3}$``, ``^[A-Za-z]+/[A-Za-z_]+$``, ``^[0-9*/, -]+$``).
    Else None (the pattern is then checked after the fact only)."""
    import re

    if not isinstance(pattern, str) or len(pattern) < 2 or pattern[0] != "^" or not pattern.endswith("$"):
        return None
    body = pattern[1:-1]
    if body.endswith("\\") and not body.endswith("\\\\"):
        return None  # the ``$`` was escaped
    try:
        nodes = re._parser.parse(body)  # type: ignore[attr-defined]
    except (re.error, RecursionError, OverflowError):
        return None
    if not _spelled_as_is(nodes):
        return None
    try:  # a pattern Python reads and xgrammar does not ((?P<name>...)) stays unenforced rather than fail the tool
        xgr.Grammar.from_regex(f"({body})")
    except Exception:  # noqa: BLE001 - xgrammar reports a bad regex as RuntimeError / its own errors
        return None
    return body


def _length_bounds(s: Mapping[str, Any] | None) -> tuple[int, int | None]:
    """The ``(minLength, maxLength)`` of a string schema that a quoted string's rule enforces."""
    if not isinstance(s, Mapping):
        return 0, None
    lo, hi = raw_min_length(s), s.get("maxLength")
    hi = hi if isinstance(hi, int) and not isinstance(hi, bool) and lo <= hi <= MAX_RAW_MIN_LENGTH else None
    return lo, hi


@dataclass(frozen=True)
class PyArgsGrammar:
    """The structural-tag format of a tool's keyword arguments (see the module docstring)."""

    style: PyValueStyle = "python"
    any_depth: int = 2
    max_whitespace: int | None = None
    """The cap on consecutive whitespace inside a JSON-written value (Olmo 3's arrays and objects)."""

    # -- literals
    def _string(self, s: Mapping[str, Any] | None = None) -> Fmt:
        """A string (``s``: its schema, whose ``pattern`` is enforced where :func:`quoted_pattern` writes it, else
        its ``minLength`` / ``maxLength`` up to ``xml_values.MAX_RAW_MIN_LENGTH``; a larger ``maxLength`` is not
        enforced)."""
        quotes = ("'",) if self.style == "olmo" else ("'", '"')
        if isinstance(s, Mapping) and s.get("pattern") is not None:
            body = pattern_body(s["pattern"])
            if body is not None:
                return or_(*[regex(f"{q}({body}){q}") for q in quotes])
        lo, hi = _length_bounds(s)
        return or_(*[regex(quoted(q, lo, hi)) for q in quotes])

    def _words(self) -> tuple[str, str, str]:
        return ("true", "false", "null") if self.style == "olmo" else ("True", "False", "None")

    def literal_texts(self, v: Any, *, top: bool = True) -> list[str]:
        """How a ``const`` / ``enum`` value may be written (``ValueError`` for a value no literal is)."""
        t, f, n = self._words()
        if v is None:
            return [n]
        if isinstance(v, bool):
            return [t if v else f]
        if isinstance(v, (int, float)):
            if isinstance(v, float) and not math.isfinite(v):
                raise ValueError(f"enum value {v!r} has no literal")
            return [json.dumps(v)]
        if isinstance(v, str):
            if self.style == "olmo" and top:
                return [_single_quoted(v)]
            return list(dict.fromkeys([repr(v), json.dumps(v, ensure_ascii=False)]))
        if isinstance(v, (list, dict)):
            if self.style == "olmo":
                return [json.dumps(v, ensure_ascii=False)]
            return [_py_repr(v)]
        raise ValueError(f"enum value {v!r} has no literal")

    def _literal(self, v: Any, top: bool) -> Fmt:
        return or_(*[const(x) for x in self.literal_texts(v, top=top)])

    def _scalars(self) -> list[Fmt]:
        t, f, n = self._words()
        return [json_fmt({"type": "number"}, max_whitespace=None), const(t), const(f), const(n)]

    def any_value(self, depth: int) -> Fmt:
        """Any literal, containers nested ``depth`` levels (Olmo 3: any JSON value, a top-level string in
        single quotes)."""
        if self.style == "olmo":
            return or_(self._string(), json_fmt({"type": ["number", "boolean", "null", "array", "object"]},
                                                max_whitespace=self.max_whitespace))
        alts = [self._string(), *self._scalars()]
        if depth > 0:
            inner = self.any_value(depth - 1)
            alts.append(seq(const("["), opt(seq(inner, star(seq(const(", "), inner)))), const("]")))
            member = seq(self._string(), const(": "), inner)
            alts.append(seq(const("{"), opt(seq(member, star(seq(const(", "), member)))), const("}")))
        return or_(*alts)

    def value(self, schema: Any, defs: Mapping[str, Any], depth: int = 0, *, top: bool = True) -> Fmt:
        """A value of ``schema``. ``top``: a keyword's own value (Olmo 3 writes a nested value as JSON)."""
        s = resolve_ref(schema, defs)
        if s is True or s == {} or not isinstance(s, Mapping):
            return self.any_value(self.any_depth)
        if s is False:
            raise ValueError("a schema admits no value")
        if depth > _MAX_SCHEMA_DEPTH:
            raise ValueError("schema nested too deeply for a Python-literal value")
        if "const" in s:
            return self._literal(s["const"], top)
        if isinstance(s.get("enum"), list) and s["enum"]:
            return or_(*[self._literal(v, top) for v in s["enum"]])
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list) and s[key]:
                base = {k: v for k, v in s.items() if k != key}
                return or_(*[self.value({**base, **a} if isinstance(a, Mapping) else a, defs, depth + 1, top=top)
                             for a in s[key]])
        t = s.get("type")
        if isinstance(t, list) and t:
            return or_(*[self.value({**s, "type": x}, defs, depth + 1, top=top) for x in t])
        if t is None:
            t = "object" if "properties" in s else ("array" if "items" in s else None)
        tw, fw, nw = self._words()
        if t in ("integer", "number"):
            return json_fmt({"type": t, **{k: s[k] for k in _NUMERIC_KEYS if k in s}}, max_whitespace=None)
        if t == "boolean":
            return or_(const(tw), const(fw))
        if t == "null":
            return const(nw)
        if t == "string":
            return self._string(s)
        if t in ("array", "object"):
            if self.style == "olmo":  # tojson
                return json_fmt(with_defs({**s, "type": t}, defs_of(defs)), max_whitespace=self.max_whitespace)
            return self._array(s, defs, depth) if t == "array" else self._object(s, defs, depth)
        return self.any_value(self.any_depth)

    def _array(self, s: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> Fmt:
        item = self.value(s.get("items", True), defs, depth + 1, top=False)
        return seq(const("["), repeated(item, ", ", *item_bounds(s)), const("]"))

    def _object(self, s: Mapping[str, Any], defs: Mapping[str, Any], depth: int) -> Fmt:
        props = s.get("properties")
        if not isinstance(props, Mapping) or not props:
            member = seq(self._string(), const(": "), self.any_value(max(self.any_depth - 1, 0)))
            return seq(const("{"), opt(seq(member, star(seq(const(", "), member)))), const("}"))
        members = [(seq(self._literal(k, False), const(": "), self.value(sub, defs, depth + 1, top=False)),
                    k in set(s.get("required") or ())) for k, sub in props.items()]
        return seq(const("{"), _members(members), const("}"))

    # -- a call's keywords
    def keywords(self, tool: ToolSpec) -> Fmt:
        """The keyword arguments of a call of ``tool`` (between its parentheses)."""
        schema = tool.schema
        props = schema.get("properties") if isinstance(schema, Mapping) else None
        if not tool.enforce or not isinstance(props, Mapping) or not props:
            if tool.enforce and schema.get("additionalProperties") is False:
                return const("")  # an object of no property: no keyword at all
            kw = seq(regex(PY_IDENTIFIER), const("="), self.any_value(self.any_depth))
            return opt(seq(kw, star(seq(const(", "), kw))))
        defs = {k: schema[k] for k in ("$defs", "definitions") if isinstance(schema.get(k), Mapping)}
        required = set(schema.get("required") or ())
        members = []
        for key, sub in props.items():
            if (not isinstance(key, str) or not key.isidentifier() or keyword.iskeyword(key)
                    or unicodedata.normalize("NFKC", key) != key):
                raise ValueError(f"tool {tool.name!r}: property name {key!r} cannot be written as a Python keyword "
                                 "argument")
            try:
                members.append((seq(const(key + "="), self.value(sub, defs)), key in required))
            except ValueError as e:
                raise ValueError(f"tool {tool.name!r}, property {key!r}: {e}") from None
        return _members(members)


def _members(items: list[tuple[Fmt, bool]]) -> Fmt:
    """``items`` (format, required) in order, separated by ``", "``, optional ones optional."""
    first_required = next((i for i, (_, r) in enumerate(items) if r), None)
    if first_required is not None:
        # the optional ones before the first required member each end with the separator
        parts: list[Fmt] = [opt(seq(m, const(", "))) for m, _ in items[:first_required]]
        parts.append(items[first_required][0])
        parts += [seq(const(", "), m) if r else opt(seq(const(", "), m)) for m, r in items[first_required + 1:]]
        return seq(*parts)
    # none required: the first present one decides where the separators go (quadratic in the members)
    alts: list[Fmt] = [seq(first, *[opt(seq(const(", "), m)) for m, _ in items[k + 1:]])
                       for k, (first, _) in enumerate(items)]
    return opt(or_(*alts))


def _single_quoted(s: str) -> str:
    """A string as ``'...'`` (Python's escapes for the quote, the backslash and line breaks)."""
    r = repr(s)
    if r.startswith("'"):
        return r
    return "'" + r[1:-1].replace("\\\"", '"').replace("'", "\\'") + "'"


def _py_repr(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_py_repr(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_py_repr(x) for x in v) + "]"
    if isinstance(v, float):
        return json.dumps(v)
    return repr(v)


# --------------------------------------------------------------------------------------------------
# the reader

class NotLiteral(Exception):
    """The node is not a call or a literal the pythonic readers take."""


_NAMES = {"true": True, "false": False, "null": None}


def literal_value(node: ast.expr, depth: int = 0) -> Any:
    """The JSON value of a literal node (see the module docstring); :class:`NotLiteral` otherwise."""
    if depth > MAX_ARGUMENT_DEPTH:
        raise NotLiteral("nested too deeply")
    if isinstance(node, ast.Constant):
        v = node.value
        if v is None or isinstance(v, (str, int, float)):
            if isinstance(v, float) and not math.isfinite(v):
                raise NotLiteral("a number JSON cannot hold")
            return v
        raise NotLiteral(f"a {type(v).__name__} constant")
    if isinstance(node, ast.Dict):
        out: dict[str, Any] = {}
        for k, v in zip(node.keys, node.values):
            if not isinstance(k, ast.Constant) or not isinstance(k.value, str):
                raise NotLiteral("a dict key that is not a string")
            out[k.value] = literal_value(v, depth + 1)
        return out
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        return [literal_value(e, depth + 1) for e in node.elts]
    if isinstance(node, ast.JoinedStr) and all(isinstance(p, ast.Constant) for p in node.values):
        return "".join(str(p.value) for p in node.values)  # type: ignore[attr-defined]
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        v = literal_value(node.operand, depth + 1)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return -v if isinstance(node.op, ast.USub) else v
    raise NotLiteral(f"not a literal: {type(node).__name__}")


def _dotted(node: ast.expr) -> str:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        raise NotLiteral("the callee is not a (dotted) name")
    parts.append(node.id)
    return ".".join(reversed(parts))


def call_of(node: ast.expr) -> tuple[str, str]:
    """(name, arguments JSON text) of a call node whose arguments are all keyword literals."""
    if not isinstance(node, ast.Call):
        raise NotLiteral("not a call")
    if node.args:
        raise NotLiteral("positional arguments")
    args: dict[str, Any] = {}
    for kw in node.keywords:
        if kw.arg is None:
            raise NotLiteral("**kwargs")
        if kw.arg in args:
            raise NotLiteral(f"keyword {kw.arg!r} repeated")
        args[kw.arg] = literal_value(kw.value)
    return _dotted(node.func), json.dumps(args, ensure_ascii=False)
