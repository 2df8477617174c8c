"""An XML parameter's value under its schema: how a chat template writes it, as a constraint and a reader.

The templates of the XML-parameter families write a ``str`` argument as it is (raw text) and every other
value with a serializer of their own, the value style:

- ``"json"``: ``tojson`` (Qwen3.6, GLM-4.5 / 4.6 / 4.7, MiniMax M2): ``true``, ``null``, ``1.5``,
  ``["a", 1]``, ``{"k": "v"}``;
- ``"py_scalars"``: ``tojson`` for mappings and sequences, Jinja's ``|string`` (Python's ``str``) for the
  rest (Qwen3.5): ``True``, ``None``, ``1e-05``, ``["a", 1]``;
- ``"python"``: ``|string`` for every value (Qwen3-Coder's original template): ``True``, ``None``,
  ``['a', 1]``, ``{'k': 'v'}``. The template exists in revisions that disagree on containers (vLLM's
  example Qwen3-Coder template writes mappings and sequences with ``tojson``, i.e. Qwen3.5's rule), and
  a Qwen3-Coder model may be served with either: a parameter's array or object is also admitted as
  JSON (``["a", 1]``, ``{"k": true}``), JSON throughout its nesting; both read back to the same value.
  The two spellings share one constraint (an ``or`` at the parameter's value: a Python repr and a JSON
  text are told apart by their first quote or literal, and a text that is both, ``[1, 2]``, means the
  same in both).

A parameter's schema is split into the strings it admits (written raw) and the rest (written in the
style)::

    type: string / enum or const of strings        strings only
    type: integer, number, boolean, null, array, object / non-string enum or const   the rest only
    no type ({}), ["string", "null"], anyOf / oneOf with a string alternative, mixed enums   both

The constraint of a value is the union of the two. Where the schema admits any string, raw text is
every value already (the other spellings never contain the closing tag either), so the value is the
raw-text rule alone. The reader types a value by the schema: the text read as a literal of the style
when that literal is a non-string the schema admits, else the text itself when the schema admits
strings. A string parameter therefore reads ``007`` as ``"007"``; under a schema that admits both a
string and a number (no type, ``["string", "number"]``) the template writes the string ``"7"`` and the
number ``7`` alike, and the reader returns the number.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .marked import MAX_ARGUMENT_DEPTH, json_depth_ok
from .syntax import (Fmt, const, item_bounds, json_fmt, opt, or_, raw_text, regex, repeated, resolve_ref, seq, star,
                     with_defs)

__all__ = ["ValueStyle", "VALUE_STYLES", "split_schema", "value_fmt", "read_value", "python_literal", "raw_min_length"]

ValueStyle = Literal["json", "py_scalars", "python"]
VALUE_STYLES: tuple[str, ...] = ("json", "py_scalars", "python")

_NON_STRING = ["number", "boolean", "null", "array", "object"]  # "number" admits integers
_NUMERIC_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")
_MAX_SCHEMA_DEPTH = 32


@dataclass(frozen=True)
class StringPart:
    """The strings a schema admits: any (``any``; of at least ``min_length`` characters), else those of ``enum``
    or matching a pattern."""

    any: bool = False
    enum: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    min_length: int = 0

    def __or__(self, other: StringPart) -> StringPart:
        if self.any and other.any:
            return StringPart(any=True, min_length=min(self.min_length, other.min_length))
        if self.any or other.any:
            return _ANY_STRING
        return StringPart(False, tuple(dict.fromkeys(self.enum + other.enum)),
                          tuple(dict.fromkeys(self.patterns + other.patterns)))


_ANY_STRING = StringPart(any=True)

MAX_RAW_MIN_LENGTH = 256
"""The largest ``minLength`` a string value's rule enforces, raw or Python-quoted (its units are repeated that many
times in the grammar); a larger one is enforced up to this many characters. Also the largest ``maxLength`` a
Python-quoted string's rule enforces (``py_values.quoted``)."""


def raw_min_length(s: Mapping[str, Any] | None) -> int:
    """The ``minLength`` a raw string value's rule enforces for the string schema ``s`` (0: none)."""
    n = s.get("minLength") if isinstance(s, Mapping) else None
    return min(n, MAX_RAW_MIN_LENGTH) if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def _string_part(s: Mapping[str, Any]) -> StringPart:
    if isinstance(s.get("pattern"), str):
        return StringPart(patterns=(s["pattern"],))
    n = raw_min_length(s)
    return StringPart(any=True, min_length=n) if n else _ANY_STRING


def split_schema(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> tuple[StringPart | None, Any]:
    """-> (the strings ``schema`` admits or None, the schema of its other values or None)."""
    s = resolve_ref(schema, defs)
    if s is False:
        return None, None
    if not isinstance(s, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return _ANY_STRING, {"type": _NON_STRING}
    if "const" in s:
        return (StringPart(enum=(s["const"],)), None) if isinstance(s["const"], str) else (None, s)
    if isinstance(s.get("enum"), list) and s["enum"]:
        strs = tuple(v for v in s["enum"] if isinstance(v, str))
        others = [v for v in s["enum"] if not isinstance(v, str)]
        return (StringPart(enum=strs) if strs else None), ({**s, "enum": others} if others else None)
    for key in ("anyOf", "oneOf"):
        alts = s.get(key)
        if isinstance(alts, list) and alts:
            base = {k: v for k, v in s.items() if k != key}
            strings: StringPart | None = None
            others: list[Any] = []
            for alt in alts:
                a = {**base, **alt} if isinstance(alt, Mapping) else alt
                st, ot = split_schema(a, defs, depth + 1)
                if st is not None:
                    strings = st if strings is None else strings | st
                if ot is not None:
                    others.append(ot)
            # the non-string alternatives stay alternatives (anyOf: a value the string ones took is gone)
            return strings, (None if not others else others[0] if len(others) == 1 else {"anyOf": others})
    t = s.get("type")
    types = [t] if isinstance(t, str) else t
    if not isinstance(types, list) or not types:
        return _string_part(s), {**s, "type": _NON_STRING}  # no type: any value
    rest = [x for x in types if x != "string"]
    strings = _string_part(s) if "string" in types else None
    return strings, ({**s, "type": rest[0] if len(rest) == 1 else rest} if rest else None)


# --------------------------------------------------------------------------------------------------
# the constraint

def _raw_fmt(part: StringPart, close: str) -> Fmt:
    if part.any:
        return raw_text(close, part.min_length)
    for v in part.enum:
        if close in v:
            raise ValueError(f"enum value {v!r} contains the closing tag {close!r}")
    return or_(*[const(v) for v in part.enum], *[regex(p) for p in part.patterns])


def value_fmt(schema: Any, defs: Mapping[str, Any], style: ValueStyle, *, close: str, json_exclude: str,
              max_whitespace: int | None) -> Fmt:
    """The format of one value of ``schema`` between a parameter's tags (see the module docstring).
    ``ValueError`` for a schema that admits no value or an enum string holding the closing tag."""
    strings, other = split_schema(schema, defs)
    if strings is None and other is None:
        raise ValueError("a parameter schema admits no value")
    if strings is not None and strings.any and not strings.min_length:
        return _raw_fmt(strings, close)
    alts = [] if strings is None else [_raw_fmt(strings, close)]
    if other is not None:
        if style == "json":
            alts.append(json_fmt(with_defs(other, defs), max_whitespace=max_whitespace, excludes=[json_exclude]))
        else:
            alts.append(_PyWriter(defs, style, close, json_exclude, max_whitespace).value(other, 0, top=True))
    return or_(*alts)


# Python's repr of a str: quoted with ' (or with " when the text has a ' and no "), escapes for the
# backslash, the quote, \n \r \t and other unprintable characters (\xhh, \uhhhh, \Uhhhhhhhh: the
# rule takes the letter, the hex digits are ordinary characters after it, which keeps it short)
_PY_ESCAPE = r"\\[\\nrtxuU]"


def _cls_not(chars: set[str]) -> str:
    names = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
    return "[^" + "".join(names.get(c, "\\" + c if c in "\\^$.|?*+()[]{}/-\"'" else c)
                          for c in sorted(chars)) + "]"


def _units_avoiding(forbidden: str, excluded: set[str], escape: str) -> str:
    """A regex for a sequence of units (a character not in ``excluded``, or an ``escape``, which never
    holds ``forbidden[0]``) whose text does not contain ``forbidden``: every ``a = forbidden[0]`` starts a chunk,
    and the text avoids ``forbidden`` iff no chunk starts with it::

        U* ( a Y )*     U = a unit other than a;  Y = ( U(not s1) U* | s1 ( U(not s2) U* | s2 ( ... )? )? )?

    (character classes: a quoted string's escapes are units, which ``any_text`` cannot express)."""
    a = forbidden[0]
    if a in forbidden[1:] or any(c in excluded for c in forbidden):
        raise ValueError(f"cannot exclude {forbidden!r} from a quoted string")

    def unit(*not_: str) -> str:
        return f"({_cls_not(excluded | set(not_))}|{escape})"

    rest = unit(a) + "*"
    if len(forbidden) == 1:
        return rest
    y = f"({unit(forbidden[-1], a)}{rest})?"
    for k in range(len(forbidden) - 2, 0, -1):
        y = f"({unit(forbidden[k], a)}{rest}|{_cls_esc(forbidden[k])}{y})?"
    return f"{rest}({_cls_esc(a)}{y})*"


def _cls_esc(c: str) -> str:
    return "\\" + c if c in "\\^$.|?*+()[]{}/-\"'" else c


@dataclass(frozen=True)
class _PyWriter:
    """Non-string values as Python's ``str`` writes them (``python``; ``py_scalars``: arrays and
    objects as JSON). Objects follow the schema's property order; array length bounds are enforced up
    to ``syntax.MAX_ITEMS_BOUND``; a value without a schema nests ``any_depth`` levels (its rule
    holds each level four times: the bound keeps it small)."""

    defs: Mapping[str, Any]
    style: str
    close: str
    json_exclude: str
    ws: int | None
    any_depth: int = 1

    def _string(self) -> Fmt:
        # repr quotes with " only a text that has a ' and no " (then no escaped quote); else with ',
        # escaping a ' (a text with both quotes)
        # like JSON strings nested in a parameter, a Python string never holds ``json_exclude`` (``</``
        # where the closing tag starts with it): the first closing tag after a value is its own, and
        # the two-character exclusion keeps the rule small (it occurs at every string of the schema)
        ctrl = {"\\", "\n", "\r", "\t"}
        x = self.json_exclude
        single = "'" + _units_avoiding(x, ctrl | {"'"}, r"\\[\\'nrtxuU]") + "'"
        no_quote = _units_avoiding(x, ctrl | {'"', "'"}, _PY_ESCAPE)
        with_apostrophe = _units_avoiding(x, ctrl | {'"'}, _PY_ESCAPE)
        double = '"' + no_quote + "'" + with_apostrophe + '"'
        return or_(regex(single), regex(double))

    def _literal(self, v: Any, top: bool = False) -> Fmt:
        if self.style == "py_scalars" and isinstance(v, (list, dict)):
            texts = [json.dumps(v, ensure_ascii=False)]
        elif top and isinstance(v, (list, dict)):  # "python": a parameter's container also as JSON
            texts = list(dict.fromkeys([python_literal(v), json.dumps(v, ensure_ascii=False)]))
        else:
            texts = [python_literal(v)]
        for text in texts:
            if self.close in text or self.json_exclude in text:
                raise ValueError(f"enum value {v!r} contains {self.json_exclude!r}, which a value cannot hold here")
        return or_(*[const(t) for t in texts])

    def _scalars(self) -> list[Fmt]:
        return [json_fmt({"type": "number"}, max_whitespace=None), const("True"), const("False"), const("None")]

    def _any(self, depth: int) -> Fmt:
        if self.style == "py_scalars":
            return or_(*self._scalars(), json_fmt({"type": ["array", "object"]}, max_whitespace=self.ws,
                                                  excludes=[self.json_exclude]))
        alts = [self._string(), *self._scalars()]
        if depth > 0:
            inner = self._any(depth - 1)
            alts.append(seq(const("["), opt(seq(inner, star(seq(const(", "), inner)))), const("]")))
            member = seq(self._string(), const(": "), inner)
            alts.append(seq(const("{"), opt(seq(member, star(seq(const(", "), member)))), const("}")))
        return or_(*alts)

    def value(self, schema: Any, depth: int, *, top: bool = False) -> Fmt:
        """``top``: the parameter's own value (not a value nested in it), where the ``python`` style
        also admits an array or object as JSON."""
        s = resolve_ref(schema, self.defs)
        if s is True or s == {} or not isinstance(s, Mapping):
            return self._any(self.any_depth)
        if depth > _MAX_SCHEMA_DEPTH:
            raise ValueError("schema nested too deeply for a Python-literal value")
        if "const" in s:
            return self._literal(s["const"], top)
        if isinstance(s.get("enum"), list) and s["enum"]:
            return or_(*[self._literal(v, top) for v in s["enum"]])
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list) and s[key]:
                base = {k: v for k, v in s.items() if k != key}
                return or_(*[self.value({**base, **a} if isinstance(a, Mapping) else a, depth + 1, top=top)
                             for a in s[key]])
        t = s.get("type")
        if isinstance(t, list):
            return or_(*[self.value({**s, "type": x}, depth + 1, top=top) for x in t])
        if t is None:
            t = "object" if "properties" in s else ("array" if "items" in s else None)
        if t in ("integer", "number"):
            return json_fmt({"type": t, **{k: s[k] for k in _NUMERIC_KEYS if k in s}}, max_whitespace=None)
        if t == "boolean":
            return or_(const("True"), const("False"))
        if t == "null":
            return const("None")
        if t in ("array", "object"):
            as_json = json_fmt(with_defs({**s, "type": t}, self.defs), max_whitespace=self.ws,
                               excludes=[self.json_exclude])
            if self.style == "py_scalars":
                return as_json
            as_python = self._array(s, depth) if t == "array" else self._object(s, depth)
            return or_(as_python, as_json) if top else as_python
        if t == "string":
            return self._string()
        return self._any(self.any_depth)

    def _array(self, s: Mapping[str, Any], depth: int) -> Fmt:
        item = self.value(s.get("items", True), depth + 1)
        return seq(const("["), repeated(item, ", ", *item_bounds(s)), const("]"))

    def _object(self, s: Mapping[str, Any], depth: int) -> Fmt:
        props: Mapping[str, Any] = s.get("properties") or {}
        required = set(s.get("required") or ())
        if not props:
            member = seq(self._string(), const(": "), self._any(self.any_depth - 1))
            return seq(const("{"), opt(seq(member, star(seq(const(", "), member)))), const("}"))
        items = [(seq(self._literal(k), const(": "), self.value(sub, depth + 1)), k in required)
                 for k, sub in props.items()]
        first_required = next((i for i, (_, r) in enumerate(items) if r), None)
        if first_required is not None:
            # linear: the optional ones before the first required property each end with the separator
            parts: list[Fmt] = [opt(seq(m, const(", "))) for m, _ in items[:first_required]]
            parts.append(items[first_required][0])
            parts += [seq(const(", "), m) if r else opt(seq(const(", "), m)) for m, r in items[first_required + 1:]]
            return seq(const("{"), *parts, const("}"))
        # no property required: the first present one decides where the separators go (alternative k
        # starts with property k; quadratic in the properties of such an object)
        alts: list[Fmt] = []
        for k, (first, _) in enumerate(items):
            alts.append(seq(first, *[opt(seq(const(", "), m)) for m, _ in items[k + 1:]]))
        alts.append(const(""))
        return seq(const("{"), or_(*alts), const("}"))


def python_literal(v: Any) -> str:
    """``str(v)`` as Jinja's ``|string`` writes a non-string argument (Python's ``repr`` inside)."""
    return repr(v)


# --------------------------------------------------------------------------------------------------
# the reader

_PY_WORDS = {"True": True, "False": False, "None": None}


def _jsonable(v: Any, depth: int = 0) -> bool:
    if depth > MAX_ARGUMENT_DEPTH:
        return False
    if v is None or isinstance(v, (str, bool, int, float)):
        return True
    if isinstance(v, list):
        return all(_jsonable(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(isinstance(k, str) and _jsonable(x, depth + 1) for k, x in v.items())
    return False


def _parse(text: str, style: ValueStyle) -> tuple[bool, Any]:
    """(True, value) when ``text`` is a literal of ``style``, else (False, None)."""
    t = text.strip()
    if style != "json" and t in _PY_WORDS:
        return True, _PY_WORDS[t]
    if not json_depth_ok(t):
        return False, None
    try:
        # JSON first: in "python" a container may be JSON (see the module docstring), whose ``<\/``
        # Python would read as two characters; a Python repr that is also JSON means the same in both
        return True, json.loads(t)
    except (json.JSONDecodeError, RecursionError):
        pass
    if style == "python" and t[:1] in "[{'\"":
        try:
            v = ast.literal_eval(t)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return False, None
        return (True, v) if _jsonable(v) else (False, None)
    return False, None


def _json_type_ok(other: Any, defs: Mapping[str, Any], v: Any, depth: int = 0) -> bool:
    """Whether the non-string part ``other`` admits a value of ``v``'s JSON type (its type only)."""
    s = resolve_ref(other, defs)
    if not isinstance(s, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return s is not False
    if "const" in s:
        return _type_of(s["const"]) == _type_of(v)
    if isinstance(s.get("enum"), list):
        return any(_type_of(e) == _type_of(v) for e in s["enum"])
    if isinstance(s.get("anyOf"), list):
        return any(_json_type_ok(a, defs, v, depth + 1) for a in s["anyOf"])
    t = s.get("type")
    types = [t] if isinstance(t, str) else (t if isinstance(t, list) else None)
    if types is None:
        return True
    vt = _type_of(v)
    return vt in types or (vt == "integer" and "number" in types) or (
        vt == "number" and "integer" in types and float(v).is_integer())


def _type_of(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def read_value(text: str, schema: Any, defs: Mapping[str, Any], style: ValueStyle) -> Any:
    """The value ``text`` (a parameter's text) stands for under ``schema`` (see the module docstring).
    Never raises on model output: text that is no literal the schema admits is returned as it is (the
    request's rules then judge the call)."""
    try:
        strings, other = split_schema(schema, defs)
    except ValueError:  # an unresolvable $ref: read as a value without a schema
        strings, other = _ANY_STRING, {"type": _NON_STRING}
        defs = {}
    if other is None:
        return text
    ok, v = _parse(text, style)
    if ok and not isinstance(v, str):
        try:
            admitted = _json_type_ok(other, defs, v)
        except ValueError:
            admitted = True
        if admitted or strings is None:
            return v
    return text
