"""Kimi K3's typed arguments: one XTML ``argument`` element per argument, its ``type`` attribute naming how
the value is written.

K3's encoder (``encoding_k3.py`` of the checkpoint, which replaces a chat template: ``_xtml_type`` and
``_xtml_value``) writes each argument as::

    <|open|>argument key="K" type="T"<|sep|>VALUE<|close|>argument<|sep|>

``<|open|>``, ``<|close|>`` and ``<|sep|>`` are control tokens; the rest is text. ``T`` follows the
*value*, not the schema: ``string`` for a ``str`` (the value is its raw text, never escaped), else
``number`` (integers too), ``boolean``, ``null``, ``object`` or ``array`` with ``json.dumps(value,
ensure_ascii=False)`` as the value. The key is an attribute value: ``&`` is written ``&amp;`` and ``"``
``&quot;``. Arguments follow the caller's dict, with nothing between them.

This is DSML's idea (an attribute saying raw text or JSON, :class:`~.dsml.DsmlArgs`) with a type name
instead of ``string="true"``, so the reading rules are DSML's (a string the schema does not admit is read
as JSON when it is JSON; text that is not JSON under a non-string type is the text where the schema admits
strings):

- the constraint writes, for each parameter, ``type="string"`` with raw text where its schema admits
  strings, and one ``type="T"`` branch with the JSON of that type for each other JSON type it admits
  (``integer`` and ``number`` are both ``number``). Raw text never holds ``<|close|>`` (not even
  written with ordinary tokens, so that a reader of the text cuts the value where the ids do), and JSON
  strings never hold ``<|`` (they can write it ``\\u003c|``);
- the reader takes the attributes in any order, with any whitespace between them (``type`` missing:
  ``string``, as vLLM 0.34's ``kimi_k3`` reads it), unescapes them, and types the value as above.
  Names that hold a marker's text (``<|sep|>`` ...) are a ``ValueError`` naming the tool and the name.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .args import NoMatch, XmlArgs
from .dsml import DsmlArgs, split_string_schema
from .marked import MarkedText
from .request import ToolSpec
from .syntax import Fmt, LiteralText, const, json_fmt, or_, raw_text, regex, resolve_ref, seq, star, with_defs
from .xml_values import raw_min_length

__all__ = ["XtmlArgs", "split_by_type", "escape_attr", "unescape_attr", "read_attributes", "XTML_TYPES"]

XTML_TYPES: tuple[str, ...] = ("number", "boolean", "null", "object", "array")
"""The ``type`` names of the values that are not strings (written as JSON)."""
_XTML_OF = {"integer": "number", "number": "number", "boolean": "boolean", "null": "null", "object": "object",
            "array": "array"}
_JSON_OF = {"number": "number", "boolean": "boolean", "null": "null", "object": "object", "array": "array"}
_ATTRS = re.compile(r'(?:\s+[A-Za-z_][\w\-]*="[^"]*"(?:\s*[A-Za-z_][\w\-]*="[^"]*")*)?\s*')
_ATTR = re.compile(r'([A-Za-z_][\w\-]*)="([^"]*)"')
_MAX_DEPTH = 32


def escape_attr(value: str) -> str:
    """An attribute value as K3's encoder writes it (``&`` first, then ``"``)."""
    return value.replace("&", "&amp;").replace('"', "&quot;")


def unescape_attr(value: str) -> str:
    """The inverse of :func:`escape_attr` (``&quot;`` first, then ``&amp;``)."""
    return value.replace("&quot;", '"').replace("&amp;", "&")


def read_attributes(text: str, start: int, end: int) -> tuple[dict[str, str], dict[str, int]]:
    """The attributes of an element's opening written as ``text[start:end]`` (after the tag's word, up to its
    ``<|sep|>``): (name -> unescaped value, name -> where its value starts). Read as models write them:
    whitespace after the word, then ``name="value"`` pairs in any order, any whitespace between and after
    them. ``NoMatch`` for anything else, or a name written twice."""
    if _ATTRS.fullmatch(text, start, end) is None:
        raise NoMatch('the attributes are not name="value" pairs')
    values: dict[str, str] = {}
    starts: dict[str, int] = {}
    for m in _ATTR.finditer(text, start, end):
        if m.group(1) in values:
            raise NoMatch(f"the attribute {m.group(1)!r} is written twice")
        values[m.group(1)] = unescape_attr(m.group(2))
        starts[m.group(1)] = m.start(2)
    return values, starts


def _type_of(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return "number"
    return "object" if isinstance(value, dict) else "array"


def split_by_type(schema: Any, defs: Mapping[str, Any], depth: int = 0) -> list[tuple[str, Any]]:
    """``schema`` (of values that are not strings: :func:`~.dsml.split_string_schema`'s second part) as
    ``[(type name, the schema of its values of that type), ...]``, one entry per type it admits, in the
    order of :data:`XTML_TYPES`. ``$ref`` are followed; ``anyOf`` / ``oneOf`` are split alternative by
    alternative, an enum by its values' types; a schema whose type cannot be told (``allOf``, ``not``) is
    that schema under each type."""
    found: dict[str, list[Any]] = {}
    for t, s in _split(schema, defs, depth):
        if t == "string":
            continue  # written raw (the caller splits strings off first)
        found.setdefault(t, [])
        if s not in found[t]:
            found[t].append(s)
    return [(t, found[t][0] if len(found[t]) == 1 else {"anyOf": found[t]}) for t in XTML_TYPES if t in found]


def _split(schema: Any, defs: Mapping[str, Any], depth: int) -> list[tuple[str, Any]]:
    s = resolve_ref(schema, defs)
    if depth > _MAX_DEPTH or s is True or (isinstance(s, Mapping) and not s):
        return [(t, {"type": _JSON_OF[t]}) for t in XTML_TYPES]
    if not isinstance(s, Mapping):
        return []
    if "const" in s:
        return [("string" if isinstance(s["const"], str) else _type_of(s["const"]), s)]
    if isinstance(s.get("enum"), list) and s["enum"]:
        by: dict[str, list[Any]] = {}
        for v in s["enum"]:
            by.setdefault("string" if isinstance(v, str) else _type_of(v), []).append(v)
        return [(t, {**s, "enum": vs}) for t, vs in by.items()]
    for key in ("anyOf", "oneOf"):
        alts = s.get(key)
        if isinstance(alts, list) and alts:
            base = {k: v for k, v in s.items() if k != key}
            out: list[tuple[str, Any]] = []
            for alt in alts:
                alt = resolve_ref(alt, defs)
                out += _split({**base, **alt} if isinstance(alt, Mapping) else alt, defs, depth + 1)
            return out
    t = s.get("type")
    if isinstance(t, str):
        return [("string", s)] if t == "string" else [(_XTML_OF[t], s)] if t in _XTML_OF else []
    if isinstance(t, list):
        return [(_XTML_OF.get(x, "string"), {**s, "type": x}) for x in t if x in _XTML_OF or x == "string"]
    if "properties" in s and not any(k in s for k in ("allOf", "not", "if")):
        return [("object", s)]
    if "items" in s and not any(k in s for k in ("allOf", "not", "if")):
        return [("array", s)]
    return [(x, {**s, "type": _JSON_OF[x]}) for x in XTML_TYPES]


@dataclass(frozen=True)
class XtmlArgs(DsmlArgs):
    """K3's ``argument`` elements (see the module docstring). Enforced parameters come in any order (two or
    more declared: the key check at the end of the output, as :class:`~.args.XmlArgs`); a call without
    arguments has none (nothing between the call's opening and its end)."""

    param_begin: str = '<|open|>argument key="{key}" type="{type}"<|sep|>'
    param_end: str = "<|close|>argument<|sep|>"
    close: str = "<|close|>argument<|sep|>"
    key_pattern: str = '[^"]*'
    """Names of parameters a tool does not declare: any attribute text (a ``"`` is written ``&quot;``)."""
    stop: str = "<|close|>"
    """What no raw value holds (the text of the token every closing tag begins with)."""
    json_stop: str = "<|"
    """What no JSON string holds: ``<|`` (JSON writes it ``\\u003c|``, the same string once decoded; a
    two-character exclusion compiles far faster than the whole ``<|close|>``)."""

    @property
    def _json_exclude(self) -> str:
        return self.json_stop

    # -- constraint
    def _check_key(self, tool: ToolSpec, key: str, lit: LiteralText | None = None) -> None:
        bad = next((m for m in (lit.markers if lit is not None else ()) if m in key), None)
        if bad is not None:
            raise ValueError(f"tool {tool.name!r}: parameter name {key!r} cannot be written in XTML (it holds "
                             f"{bad!r}, the text of a control token, which no reader of the text tells apart)")

    def _open(self, key: Fmt, type_name: str, lit: LiteralText) -> Fmt:  # type: ignore[override]
        pre, post = self.param_begin.split("{key}")
        return seq(lit(pre), key, lit(post.replace("{type}", type_name)))

    def _free_raw(self, min_length: int = 0) -> Fmt:
        return raw_text(self.stop, min_length)

    def _raw_value(self, sub: Mapping[str, Any] | None) -> Fmt:
        if sub is not None:
            values = [sub["const"]] if "const" in sub else sub.get("enum")
            if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
                for v in values:
                    if self.stop in v:
                        raise ValueError(f"enum value {v!r} holds {self.stop!r}, which a raw value cannot hold")
                return or_(*[const(v) for v in values])
            if isinstance(sub.get("pattern"), str):
                return regex(sub["pattern"])
        return self._free_raw(raw_min_length(sub))

    def _json(self, schema: Any, defs: Mapping[str, Any], ws: int | None) -> Fmt:
        return json_fmt(with_defs(schema, defs), max_whitespace=ws, excludes=[self.json_stop])

    def _param(self, key: str, sub: Any, defs: Mapping[str, Any], lit: LiteralText, ws: int | None) -> Fmt:
        strs, other = split_string_schema(sub, defs)
        name = const(escape_attr(key))
        alts: list[Fmt] = []
        if strs:
            raws = [self._raw_value(resolve_ref(x, defs)) for x in strs]
            free = self._free_raw()
            value = free if free in raws else or_(*raws)
            alts.append(seq(self._open(name, "string", lit), value, lit(self.param_end)))
        if other is not None:
            for t, s in split_by_type(other, defs):
                alts.append(seq(self._open(name, t, lit), self._json(s, defs, ws), lit(self.param_end)))
        if not alts:
            raise ValueError("the schema admits no value")
        return or_(*alts)

    def _any_param(self, lit: LiteralText, ws: int | None, declared: tuple[str, ...] = ()) -> Fmt:
        key = regex(self.key_pattern)
        alts = [seq(self._open(key, "string", lit), self._free_raw(), lit(self.param_end))]
        alts += [seq(self._open(key, t, lit), self._json({"type": _JSON_OF[t]}, {}, ws), lit(self.param_end))
                 for t in XTML_TYPES]
        return or_(*alts)

    def build(self, tool: ToolSpec, lit: LiteralText, max_whitespace: int | None) -> Fmt:
        if not tool.enforce:
            return star(self._any_param(lit, max_whitespace))
        return XmlArgs.build(self, tool, lit, max_whitespace)

    # -- reader
    def no_params_end(self, src: MarkedText, pos: int, call_end: str, lit: LiteralText) -> int:
        return -1  # no arguments: the call's end right after its opening

    def _read_begin(self, src: MarkedText, pos: int, keys: list[str], lit: LiteralText) -> tuple[str, bool, int]:
        """An argument's opening at ``pos`` -> (its key, whether ``type`` says ``string``, where its value
        starts). The attributes run to the first ``<|sep|>`` after ``<|open|>argument``; ``NoMatch`` when
        they are not ``name="value"`` pairs holding a ``key`` (or the ``<|sep|>`` has not come yet)."""
        pre = self.param_begin.split("{key}")[0]
        head = pre[:pre.rindex(" key=")]  # <|open|>argument
        sep = lit.split(self.param_begin)[-1][1]  # the token that ends the opening
        p = src.match_literal(pos, head, lit)
        if p < 0:
            raise NoMatch("expected an argument")
        end = src.find_marker(sep, p)
        if end < 0 or not src.plain(p, end):
            raise NoMatch("expected an argument's attributes")
        found, _ = read_attributes(src.text, p, end)
        if "key" not in found:
            raise NoMatch("an argument without a key")
        return found["key"], found.get("type", "string") == "string", end + len(sep)
