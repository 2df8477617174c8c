"""Arguments as nested elements after a namespace token (MiniMax M3): the constraint and the reader.

MiniMax M3 writes every tag of a call after its namespace token ``]<]minimax[>[`` (``NS`` below), one
element per argument, named after it, with nothing between two elements::

    NS<city>ParisNS</city>NS<days>3NS</days>NS<stops>NS<item>LyonNS</item>NS</stops>

The value style is MiniMax's own serializer of an M3
call (``M3TextParser.stringify_function_calls`` of its text parser; the framing is xgrammar 0.2.9's
``minimax_m3`` tag's and that of vLLM's tests): a ``str`` as it is (no escaping: the namespace token that
ends it is a control token), an object as its members' elements in the caller's order, a list as
``<item>`` elements, anything else as ``json.dumps`` writes it (``true``, ``42``, ``1.5``); ``None`` is
left out (a null-valued member, a null item: the model never saw null in a call). An empty list or object
is an empty element.

The constraint follows each argument's schema: strings raw (an ``enum`` / ``const`` as written, a
``pattern`` as its regex), integers / numbers / booleans as JSON, ``null`` as ``null`` (the one spelling a
value the template leaves out can take; vLLM's reader takes it as null), objects as elements of their
declared properties, arrays as ``<item>`` elements (length bounds enforced up to ``syntax.MAX_ITEMS_BOUND``),
``anyOf`` / ``oneOf`` / type lists as the union of their alternatives. Keys come in any order with the
key check (``key_check.py``: each key once, the required ones present, at every level), as JSON arguments
do, or in the schema's order when the request asks for it.

What cannot be written as elements of declared names, and the fallback (xgrammar 0.2.9's
``minimax_m3_xml`` style refuses these schemas, "requires fixed object property names" / "does not
support unconstrained schemas"): an object's undeclared members (``additionalProperties``, an object
without ``properties``) and a value without a schema (``{}``) are elements of any name of
:data:`FREE_NAME` (not one of the object's declared names, not ``invoke`` / ``tool_call``) holding
raw text or such elements, :data:`ANY_DEPTH` levels deep. A grammar cannot tie such an element's closing
name to its opening one, so the reader lets a closing tag close the element it ends whatever name it
spells (not a structural one): the two agree on every text the grammar admits.

The reader reads what models write, looser than the template: whitespace between elements; typed by the
schema: the text of a leaf read as the JSON literal the schema admits (``42``, ``true``, ``null``, also a
JSON object or array written inline), an integer with leading zeros or a ``+`` (``018956``, as vLLM
reads it), ``True`` / ``NULL`` in any case, an empty element as ``[]`` / ``{}`` where the schema admits a
list or an object and no string, else the text as written; an element holding elements is an object, or
a list where the schema says array (for a value without a schema: where every child is an ``<item>``).
Malformed text (an unterminated element, text beside child elements, a tag holding a control token, a
structural name where an argument goes) is no call; a key written twice is kept twice in the arguments'
text, so the request's rules refuse the call (vLLM collects such values into a list).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .args import ArgsSyntax, NoMatch, _has_object_of_keys
from .marked import MAX_ARGUMENT_DEPTH, MarkedText
from .order import Member, members_any_order, members_in_orders
from .request import ToolSpec
from .syntax import (Fmt, LiteralText, _rx, const, defs_of, item_bounds, json_fmt, or_, regex, repeated, resolve_ref,
                     seq, star)
from .xml_values import _json_type_ok, raw_min_length, read_value, split_schema

__all__ = ["ElementArgs", "FREE_NAME", "ANY_DEPTH"]

ANY_TEXT = r"[\s\S]*"
"""A raw string value: any text (control tokens have no text in the grammar, so never the namespace token)."""

FREE_NAME = (r"[^<>/\s]", r"[^<>\s]")
"""The first and later characters of an element name the schema does not declare (an undeclared member,
a value without a schema): no ``<``, ``>`` or whitespace, not starting with ``/``."""

ANY_DEPTH = 3
"""How deep a value without a schema nests elements in the grammar (deeper: raw text only)."""

_MAX_SCHEMA_DEPTH = 64
_LEAF_INT = re.compile(r"[+-]?[0-9]+")
_LEAF_FLOAT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


# --------------------------------------------------------------------------------------------------
# names

def _cls(neg: str, extra: str = "") -> str:
    """A negated character class: not ``neg`` (a class body), nor the characters of ``extra``."""
    return "[^" + neg + "".join("\\" + c if c in "\\^]-[" else c for c in sorted(set(extra))) + "]"


@functools.lru_cache(maxsize=256)
def names_except(words: frozenset[str]) -> str:
    """A regex for the names of :data:`FREE_NAME` but ``words`` (a trie of the excluded names, walked one
    character at a time: at each step a character that leaves the trie, then any name characters)."""
    first, rest = FREE_NAME[0][2:-1], FREE_NAME[1][2:-1]
    words = frozenset(w for w in words if re.fullmatch(FREE_NAME[0] + FREE_NAME[1] + "*", w))

    def node(prefix: str) -> str:
        nxt = sorted({w[len(prefix)] for w in words if w.startswith(prefix) and len(w) > len(prefix)})
        body = first if not prefix else rest
        alts = [_rx(c) + node(prefix + c) for c in nxt]
        alts.append(_cls(body, "".join(nxt)) + FREE_NAME[1] + "*")
        out = "(" + "|".join(alts) + ")"
        return out + "?" if prefix and prefix not in words else out

    return node("")


# --------------------------------------------------------------------------------------------------
# the reader's tree, and a JSON text that keeps a key written twice

@dataclass(frozen=True)
class _Element:
    name: str
    text: str                                   # the text, when it holds no element
    children: tuple[_Element, ...] | None       # the elements it holds (None: a leaf)


class _Pairs(list):
    """An object as read: (key, value) in order, a key possibly twice."""


def dumps(v: Any) -> str:
    """The JSON text of a read value: ``json.dumps`` spacing, a key read twice kept twice."""
    if isinstance(v, _Pairs):
        return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + dumps(x) for k, x in v) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(dumps(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


# --------------------------------------------------------------------------------------------------
# the syntax

@dataclass(frozen=True)
class ElementArgs(ArgsSyntax):
    """Arguments as elements after the namespace token ``ns`` (see the module docstring). ``item``: the
    element of a list item; ``reserved``: names whose tags are the call's own syntax (``invoke``,
    ``tool_call``: its closing tag would end the call), which no argument may take.

    ``caller_order``: an enforced tool's object members in any order, at every level, with the key check
    (a tool with an object of two or more properties somewhere); False: the schema's order, required
    members enforced by the grammar."""

    ns: str
    item: str = "item"
    reserved: tuple[str, ...] = ("invoke", "tool_call")
    caller_order: bool = True

    # -- the constraint ---------------------------------------------------------------------------
    def any_order(self, tool: ToolSpec) -> bool:
        return self.caller_order and tool.enforce and tool.any_key_order and _has_object_of_keys(tool.parameters)

    def _tag(self, lit: LiteralText, name: str, closing: bool = False) -> Fmt:
        return lit(self.ns + ("</" if closing else "<") + name + ">")

    def _element(self, lit: LiteralText, name: str, value: Fmt) -> Fmt:
        return seq(self._tag(lit, name), value, self._tag(lit, name, True))

    def _free_element(self, lit: LiteralText, names: str, value: Fmt) -> Fmt:
        """An element of any name of ``names`` (a regex); its closing name is not tied to its opening one."""
        return seq(lit(self.ns + "<"), regex(names), const(">"), value, lit(self.ns + "</"), regex(names),
                   const(">"))

    def name_problem(self, name: str, lit: LiteralText) -> str | None:
        """Why a declared name cannot be an element's name in this syntax, or None."""
        if not name.strip():
            return "it is empty or blank"
        if "<" in name or ">" in name or name.startswith("/"):
            return "it holds '<' or '>', or starts with '/', which a tag's name cannot"
        if name in self.reserved:
            return f"'{self.ns}</{name}>' is the call's own closing tag"
        bad = [m for m in lit.markers if m in f"<{name}>" or m in f"</{name}>"]
        if bad:
            return f"its tag holds {bad[0]!r}, a control token of the format"
        return None

    def _check(self, tool: ToolSpec, name: str, lit: LiteralText) -> None:
        why = self.name_problem(name, lit)
        if why is not None:
            raise ValueError(f"tool {tool.name!r}: argument name {name!r} cannot be written in this format ({why})")

    def _any(self, lit: LiteralText, depth: int) -> Fmt:
        """A value without a schema: raw text, or ``depth`` levels of elements of any name."""
        raw = regex(ANY_TEXT)
        if depth <= 0:
            return raw
        child = self._free_element(lit, names_except(frozenset(self.reserved)), self._any(lit, depth - 1))
        return or_(raw, star(child))  # star's empty is raw's too: one copy of the child, not two

    def _literal(self, v: Any, lit: LiteralText, tool: ToolSpec) -> Fmt:
        if isinstance(v, str):
            if self.ns in v:
                raise ValueError(f"tool {tool.name!r}: enum value {v!r} holds the namespace token {self.ns!r}")
            return const(v)
        if isinstance(v, list):
            return seq(*[self._element(lit, self.item, self._literal(x, lit, tool)) for x in v if x is not None])
        if isinstance(v, dict):
            for k in v:
                self._check(tool, k, lit)
            return seq(*[self._element(lit, k, self._literal(x, lit, tool)) for k, x in v.items() if x is not None])
        return const(json.dumps(v))

    def _value(self, schema: Any, defs: Mapping[str, Any], lit: LiteralText, tool: ToolSpec, ordered: bool,
               depth: int) -> Fmt:
        s = resolve_ref(schema, defs)
        if s is False:
            raise ValueError(f"tool {tool.name!r}: a schema admits no value")
        if s is True or not isinstance(s, Mapping) or not s:
            return self._any(lit, ANY_DEPTH)
        if depth > _MAX_SCHEMA_DEPTH:
            raise ValueError(f"tool {tool.name!r}: schema nested too deeply for this format")
        if "const" in s:
            return self._literal(s["const"], lit, tool)
        if isinstance(s.get("enum"), list) and s["enum"]:
            return _union([self._literal(v, lit, tool) for v in s["enum"]])
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list) and s[key]:
                base = {k: v for k, v in s.items() if k != key}
                return _union([self._value({**base, **a} if isinstance(a, Mapping) else a, defs, lit, tool, ordered,
                                           depth + 1) for a in s[key]])
        t = s.get("type")
        if isinstance(t, list):
            return _union([self._value({**s, "type": x}, defs, lit, tool, ordered, depth + 1) for x in t])
        if t is None:
            t = ("object" if "properties" in s or "additionalProperties" in s else "array" if "items" in s
                 else None)
        if t == "string":
            if isinstance(s.get("pattern"), str):
                return regex(s["pattern"])
            n = raw_min_length(s)
            return regex(rf"[\s\S]{{{n}}}{ANY_TEXT}" if n else ANY_TEXT)  # minLength: characters, as the reader counts
        if t in ("integer", "number"):
            return json_fmt({k: v for k, v in s.items() if k in _NUMBER_KEYS}, max_whitespace=None)
        if t == "boolean":
            return or_(const("true"), const("false"))
        if t == "null":
            return const("null")
        if t == "object":
            return self._object(s, defs, lit, tool, ordered, depth)
        if t == "array":
            items = s.get("items", True)
            item = self._element(lit, self.item, self._value(items if isinstance(items, (Mapping, bool)) else True,
                                                             defs, lit, tool, ordered, depth + 1))
            return repeated(item, "", *item_bounds(s))
        return self._any(lit, ANY_DEPTH)

    def _object(self, s: Mapping[str, Any], defs: Mapping[str, Any], lit: LiteralText, tool: ToolSpec, ordered: bool,
                depth: int) -> Fmt:
        props = s.get("properties") or {}
        if not isinstance(props, Mapping):
            props = {}
        required = set(s.get("required") or ())
        if required - set(props) and props:
            raise ValueError(f"tool {tool.name!r}: required arguments {sorted(required - set(props))} are not in "
                             f"properties")
        extra = s.get("additionalProperties")
        members: list[Member] = []
        for key, sub in props.items():
            self._check(tool, key, lit)
            members.append(Member(key, self._element(lit, key, self._value(sub, defs, lit, tool, ordered, depth + 1)),
                                  key in required))
        free: Fmt | None = None
        if extra is not False and (not props or extra is not None):
            value = self._value(extra, defs, lit, tool, ordered, depth + 1) if isinstance(extra, Mapping) \
                else self._any(lit, ANY_DEPTH - 1)
            free = self._free_element(lit, names_except(frozenset(self.reserved) | frozenset(props)), value)
        if not ordered:
            if free is not None:
                members.append(Member("", free, False))
            return members_any_order(members, const(""))
        body = members_in_orders(members, ("schema",), "")
        return body if free is None else seq(body, star(free))

    def build(self, tool: ToolSpec, lit: LiteralText, max_whitespace: int | None) -> Fmt:
        schema = tool.schema
        return self._object(schema, defs_of(schema), lit, tool, not self.any_order(tool), 0)

    # -- the reader -------------------------------------------------------------------------------
    def _skip_ws(self, src: MarkedText, p: int) -> int:
        text = src.text
        q = p
        while q < len(text) and text[q] in " \t\r\n":
            q += 1
        return q if src.plain(p, q) else p

    def _opening_at(self, src: MarkedText, p: int) -> bool:
        """Whether an element opens at ``p`` (the namespace token, then ``<`` not followed by ``/``)."""
        q = p + len(self.ns)
        return src.marker_at(p, self.ns) and src.text.startswith("<", q) and not src.text.startswith("</", q)

    def _tag_name(self, src: MarkedText, p: int) -> tuple[str, int]:
        """The name of the tag whose name starts at ``p`` and the position after its ``>``."""
        end = src.text.find(">", p)
        if end < 0 or not src.plain(p, end + 1):
            raise NoMatch("an unterminated tag")
        name = src.text[p:end]
        if not name.strip() or "<" in name or name.split(None, 1)[0] in self.reserved:
            raise NoMatch(f"not an argument's tag name: {name!r}")
        return name, end + 1

    def _read_element(self, src: MarkedText, p: int, depth: int) -> tuple[_Element, int]:
        """The element opening at ``p`` (see :meth:`_opening_at`) and the position after it."""
        if depth > MAX_ARGUMENT_DEPTH:
            raise NoMatch(f"elements nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        text, n = src.text, len(self.ns)
        name, p = self._tag_name(src, p + n + 1)
        texts: list[str] = []
        children: list[_Element] = []
        while True:
            i = src.find_marker(self.ns, p)
            if i < 0 or not src.plain(p, i):
                raise NoMatch(f"element {name!r} is not closed")
            texts.append(text[p:i])
            if text.startswith("</", i + n):
                _, p = self._tag_name(src, i + n + 2)  # it closes this element, whatever name it spells
                break
            if not text.startswith("<", i + n):
                raise NoMatch("the namespace token outside a tag")
            child, p = self._read_element(src, i, depth + 1)
            children.append(child)
        body = "".join(texts)
        if children and body.strip():
            raise NoMatch(f"element {name!r} holds text beside elements")
        return _Element(name, body, tuple(children) if children else None), p

    def read(self, src: MarkedText, pos: int, tool: ToolSpec, lit: LiteralText) -> tuple[str, int]:
        schema = tool.parameters
        defs = defs_of(schema)
        elements: list[_Element] = []
        p = self._skip_ws(src, pos)
        while self._opening_at(src, p):
            e, p = self._read_element(src, p, 1)
            elements.append(e)
            p = self._skip_ws(src, p)
        return dumps(_object(elements, schema, defs, 1)), p


_NUMBER_KEYS = ("type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")


def _union(alts: list[Fmt]) -> Fmt:
    """The alternatives of a value, the scalar ones dropped where raw text (which spells them all) is one."""
    alts = list({json.dumps(a, sort_keys=True): a for a in alts}.values())
    raw = regex(ANY_TEXT)
    if raw in alts:
        alts = [raw] + [a for a in alts if a != raw and _writes_elements(a)]
    return or_(*alts)


def _writes_elements(f: Fmt) -> bool:
    """Whether ``f`` can write an element (the namespace token, a token format, is in it)."""
    return '"type": "token"' in json.dumps(f)


# --------------------------------------------------------------------------------------------------
# typing what was read

def _resolved(schema: Any, defs: Mapping[str, Any]) -> Any:
    try:
        return resolve_ref(schema, defs)
    except ValueError:
        return True


def _containers(s: Any, defs: Mapping[str, Any], depth: int = 0) -> tuple[list[Any], list[Any]]:
    """(the array schemas, the object schemas) ``s`` admits, alternatives in order; a schema without any
    type information admits both (as ``True``)."""
    s = _resolved(s, defs)
    if s is True or not isinstance(s, Mapping) or not s:
        return [True], [True]
    if depth > _MAX_SCHEMA_DEPTH or "const" in s or "enum" in s:
        return [], []
    arrays: list[Any] = []
    objects: list[Any] = []
    for key in ("anyOf", "oneOf"):
        if isinstance(s.get(key), list):
            base = {k: v for k, v in s.items() if k != key}
            for a in s[key]:
                x, y = _containers({**base, **a} if isinstance(a, Mapping) else a, defs, depth + 1)
                arrays += x
                objects += y
            return arrays, objects
    t = s.get("type")
    types = [t] if isinstance(t, str) else t if isinstance(t, list) else None
    if types is None:
        if "items" in s:
            return [s], []
        if "properties" in s or "additionalProperties" in s:
            return [], [s]
        return [True], [True]
    return ([s] if "array" in types else []), ([s] if "object" in types else [])


def _admits_string(s: Any, defs: Mapping[str, Any]) -> bool:
    try:
        return split_schema(s, defs)[0] is not None
    except ValueError:
        return True


def _leaf(text: str, schema: Any, defs: Mapping[str, Any]) -> Any:
    """A leaf's text typed by ``schema`` (see the module docstring)."""
    arrays, objects = _containers(schema, defs)
    strings = _admits_string(schema, defs)
    if not text.strip() and (arrays or objects) and not strings:
        return [] if arrays else {}
    v = read_value(text, schema, defs, "json")
    if v is not text or strings:
        return v
    try:
        other = split_schema(schema, defs)[1]
    except ValueError:
        return text
    t = text.strip()
    candidates: list[Any] = []
    if _LEAF_INT.fullmatch(t):
        candidates.append(int(t))
    elif _LEAF_FLOAT.fullmatch(t):
        f = float(t)
        if f == f and f not in (float("inf"), float("-inf")):
            candidates.append(f)
    if t.lower() in ("true", "false"):
        candidates.append(t.lower() == "true")
    if t.lower() == "null":
        candidates.append(None)
    for c in candidates:
        try:
            if other is not None and _json_type_ok(other, defs, c):
                return c
        except ValueError:
            return c
    return text


def _value(e: _Element, schema: Any, defs: Mapping[str, Any], depth: int) -> Any:
    if e.children is None:
        return _leaf(e.text, schema, defs)
    arrays, objects = _containers(schema, defs)
    as_list = bool(arrays) and (not objects or all(c.name == "item" for c in e.children))
    if as_list:
        items = arrays[0].get("items", True) if isinstance(arrays[0], Mapping) else True
        return [_value(c, items, defs, depth + 1) for c in e.children]
    if not objects:  # elements where the schema says neither: an object, typed as a value without a schema
        return _object(list(e.children), True, defs, depth + 1)
    names = {c.name for c in e.children}

    def declared(o: Any) -> int:
        props = o.get("properties") if isinstance(o, Mapping) else None
        return len(names & set(props)) if isinstance(props, Mapping) else 0

    return _object(list(e.children), max(objects, key=declared), defs, depth + 1)


def _object(elements: list[_Element], schema: Any, defs: Mapping[str, Any], depth: int) -> _Pairs:
    s = _resolved(schema, defs)
    props = s.get("properties") if isinstance(s, Mapping) else None
    props = props if isinstance(props, Mapping) else {}
    extra = s.get("additionalProperties", True) if isinstance(s, Mapping) else True
    extra = extra if isinstance(extra, Mapping) else True
    return _Pairs((e.name, _value(e, props.get(e.name, extra), defs, depth)) for e in elements)
