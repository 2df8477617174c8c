"""Argument syntaxes: how a call's arguments are written, as a constraint and as a reader.

Each syntax builds the structural-tag format of one tool's arguments and reads them back from the same
definition, so the two cannot drift:

- :class:`JsonArgs`: a JSON object (hermes, llama3, mistral, deepseek v3/v3.1, kimi, harmony), its keys in
  the caller's order (any order: ``key_check.py``);
- :class:`XmlArgs`: one tag per parameter, raw text for strings and the template's spelling for the
  other values (``xml_values.py``) (qwen3_* ``<parameter=k>``, minimax ``<parameter name="k">``, DSML
  ``<｜DSML｜parameter ...>``, GLM ``<arg_key>k</arg_key><arg_value>v</arg_value>``);
- :class:`GemmaArgs`: Gemma 4's JSON-like syntax with unquoted keys and strings between ``<|"|>`` tokens.

Raw string values are any text without the parameter's closing tag (a regex of character classes, so
no control token either); JSON strings nested in an XML parameter exclude the closing tag too. Hence
the first closing tag after a value is its own, and the reader cuts there.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .marked import MAX_ARGUMENT_DEPTH, MarkedText, json_depth_ok
from .order import KEY_ORDERS, KeyOrder, Member, members_any_order, members_in_orders
from .request import ToolSpec
from .syntax import (Fmt, LiteralText, const, defs_of, item_bounds, json_fmt, opt, or_, raw_text, regex, repeated,
                     resolve_ref, seq, star)
from .xml_values import VALUE_STYLES, ValueStyle, raw_min_length, read_value, split_schema, value_fmt

if TYPE_CHECKING:
    from .arg_stream import ArgStreamer

__all__ = ["ArgsSyntax", "JsonArgs", "XmlArgs", "GemmaArgs", "NoMatch", "resolve_ref"]


class NoMatch(Exception):
    """The text does not follow the syntax at this point (the reader falls back to content)."""


def _skip_ws(text: str, p: int) -> int:
    while p < len(text) and text[p] in " \t\r\n":
        p += 1
    return p


_DECODER = json.JSONDecoder()


def _json_value(text: str, start: int, end: int) -> Any:
    """``json.loads(text[start:end])`` within the depth bound, else :class:`NoMatch`."""
    if not json_depth_ok(text, start, end):
        raise NoMatch(f"nested deeper than {MAX_ARGUMENT_DEPTH} levels")
    try:
        return json.loads(text[start:end])
    except (json.JSONDecodeError, RecursionError) as e:
        raise NoMatch(f"not JSON ({type(e).__name__})") from None


class ArgsSyntax:
    """Base class: ``build(tool, lit, max_whitespace)`` -> format, ``read(src, pos, tool, lit)`` ->
    (arguments JSON text, end position) or :class:`NoMatch`. ``src`` is a :class:`~.marked.MarkedText`
    (markers split by ``lit`` match only as control tokens when they are ones); a reader never raises
    anything but :class:`NoMatch` on model output."""

    def build(self, tool: ToolSpec, lit: LiteralText, max_whitespace: int | None) -> Fmt:
        raise NotImplementedError

    def read(self, src: MarkedText, pos: int, tool: ToolSpec, lit: LiteralText) -> tuple[str, int]:
        raise NotImplementedError

    def streamer(self, tool: ToolSpec, start: int, call_end: str, lit: LiteralText) -> ArgStreamer | None:
        """A reader of ``tool``'s arguments from ``start`` (a position in the pending text of a stream) as
        they are written (:mod:`.arg_stream`), or None when this syntax sends its arguments whole, at the
        end of the call (``call_end``: what follows the arguments)."""
        return None

    def any_order(self, tool: ToolSpec) -> bool:
        """Whether :meth:`build` admits ``tool``'s keys in any order, repetition included (the top level
        of XML parameters: :func:`~.order.members_any_order`; every object of JSON arguments: xgrammar's
        ``any_order``), so that its calls need the key check at the end of the output
        (``key_check.py``). False unless a syntax says otherwise."""
        return False


def _object_text(pairs: list[tuple[str, Any]]) -> str:
    """The arguments' JSON text, keys in the order read, a key read twice kept twice (the request's
    policy refuses such a call, the key check names it); ``json.dumps`` of the dict when no key repeats."""
    return "{" + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + json.dumps(v, ensure_ascii=False)
                           for k, v in pairs) + "}"


def _has_object_of_keys(schema: Any, n: int = 2) -> bool:
    """Whether some object of ``schema`` (at any depth) declares ``n`` or more properties: where an
    order of keys can differ at all."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            props = node.get("properties")
            if isinstance(props, Mapping) and len(props) >= n:
                return True
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return False


@dataclass(frozen=True)
class JsonArgs(ArgsSyntax):
    """The arguments are one JSON object; the reader returns it as written.

    ``caller_order``: an enforced tool's objects take their keys in any order, at every level, as the
    caller's dicts held them (``tojson`` keeps their order): xgrammar's ``any_order`` objects, whose
    keys may repeat and whose required keys are not enforced; the key check (``key_check.py``) does
    both at the end of the output. Only for a tool with an object of two or more properties somewhere
    (else there is no other order, and the exact grammar stays). False: the schema's order only."""

    caller_order: bool = True

    def any_order(self, tool: ToolSpec) -> bool:
        return self.caller_order and tool.enforce and tool.any_key_order and _has_object_of_keys(tool.parameters)

    def build(self, tool: ToolSpec, lit: LiteralText, max_whitespace: int | None) -> Fmt:
        return json_fmt(tool.schema, max_whitespace=max_whitespace, any_order=self.any_order(tool))

    def streamer(self, tool: ToolSpec, start: int, call_end: str, lit: LiteralText) -> ArgStreamer | None:
        from .arg_stream import JsonArgStreamer  # arg_stream reads this module's syntaxes
        return JsonArgStreamer(start)

    def read(self, src: MarkedText, pos: int, tool: ToolSpec, lit: LiteralText) -> tuple[str, int]:
        text = src.text
        pos = _skip_ws(text, pos)
        if not json_depth_ok(text, pos):
            raise NoMatch(f"arguments nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        try:
            obj, end = _DECODER.raw_decode(text, pos)
        except (json.JSONDecodeError, RecursionError) as e:
            raise NoMatch(str(e)) from None
        if not isinstance(obj, dict):
            raise NoMatch("arguments are not a JSON object")
        if not src.plain(pos, end):
            raise NoMatch("a control token inside the arguments")
        return text[pos:end], end


@dataclass(frozen=True)
class XmlArgs(ArgsSyntax):
    """One element per parameter: ``param_begin`` (with ``{key}``), the value, ``param_end``. ``close`` is the closing tag inside ``param_end``
    that a value never contains. An enforced tool's parameters come in any order (``caller_order``,
    two or more declared), a name possibly repeated and a required one possibly left out until the
    key check at the end of the output (``key_check.py``); else (one parameter, ``caller_order=False``)
    in the schema's order, required ones enforced by the grammar.
    A tool whose arguments are not enforced takes any parameter names with raw text values. DSML,
    whose ``string`` attribute says how each value is written, is :class:`~.dsml.DsmlArgs`.

    ``values``: how the template writes a value that is not a string (``xml_values.py``: ``"json"``,
    ``"py_scalars"``, ``"python"``); the reader types every value by the tool's schema, enforced or
    not. A parameter name is written literally: any declared name is accepted
    but one holding a control token of the family or the character that ends a name in this syntax
    (``>`` in ``<parameter=K>``, ``"`` in ``name="K"``), which is a ``ValueError`` naming the tool and
    the parameter."""

    param_begin: str
    param_end: str
    close: str
    key_pattern: str = r"[A-Za-z_][A-Za-z0-9_.\-]*"
    values: ValueStyle = "json"
    caller_order: bool = True
    """An enforced tool's parameters in any order (two or more declared), checked at the end of the
    output (``key_check.py``); False: the schema's order."""

    def __post_init__(self) -> None:
        if self.close not in self.param_end:
            raise ValueError("XmlArgs: close must occur in param_end")
        if self.values not in VALUE_STYLES:
            raise ValueError(f"XmlArgs: unknown value style {self.values!r}; known: {', '.join(VALUE_STYLES)}")

    @property
    def _json_exclude(self) -> str:
        """What JSON strings nested in a parameter never contain. ``</`` when the closing tag starts
        with it: JSON can always write it ``<\\/`` (the same string once decoded), and a two-character
        exclusion compiles several times faster than the whole closing tag."""
        return "</" if self.close.startswith("</") else self.close


    def _raw_value(self, sub: Mapping[str, Any] | None) -> Fmt:
        if sub is not None:
            values = [sub["const"]] if "const" in sub else sub.get("enum")
            if isinstance(values, list) and values and all(isinstance(v, str) for v in values):
                for v in values:
                    if self.close in v:
                        raise ValueError(f"enum value {v!r} contains the closing tag {self.close!r}")
                return or_(*[const(v) for v in values])
            if isinstance(sub.get("pattern"), str):
                return regex(sub["pattern"])
        return raw_text(self.close, raw_min_length(sub))

    def _param(self, key: str, sub: Any, defs: Mapping[str, Any], lit: LiteralText, ws: int | None) -> Fmt:
        value = value_fmt(sub, defs, self.values, close=self.close, json_exclude=self._json_exclude,
                          max_whitespace=ws)
        return seq(lit(self.param_begin.replace("{key}", key)), value, lit(self.param_end))

    def _any_param(self, lit: LiteralText, ws: int | None, declared: tuple[str, ...] = ()) -> Fmt:
        """A parameter of any name (the key pattern, or one of ``declared`` written literally)."""
        pre, post = self.param_begin.split("{key}")
        names = [k for k in declared if not re.fullmatch(self.key_pattern, k)]
        key = or_(regex(self.key_pattern), *[const(k) for k in names]) if names else regex(self.key_pattern)
        return seq(lit(pre), key, lit(post), raw_text(self.close), lit(self.param_end))

    def _check_key(self, tool: ToolSpec, key: str, lit: LiteralText) -> None:
        post = self.param_begin.split("{key}")[1]
        first = lit.split(post)[0] if post else (False, "")
        end = first[1] if first[0] else post[:1]  # what ends a name: a marker, or a character
        bad = [m for m in lit.markers if m in key] + ([end] if end and end in key else [])
        if bad:
            raise ValueError(f"tool {tool.name!r}: parameter name {key!r} cannot be written in this format "
                             f"(it contains {bad[0]!r}, which ends a name or is a control token)")

    def build(self, tool: ToolSpec, lit: LiteralText, max_whitespace: int | None) -> Fmt:
        if not tool.enforce:
            declared = tuple(tool.parameters.get("properties") or {})
            return star(self._any_param(lit, max_whitespace, declared))
        schema = tool.parameters
        defs = defs_of(schema)
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        members: list[Member] = []
        for key, sub in props.items():
            self._check_key(tool, key, lit)
            try:
                p = self._param(key, sub, defs, lit, max_whitespace)
            except ValueError as e:
                raise ValueError(f"tool {tool.name!r}, parameter {key!r}: {e}") from None
            members.append(Member(key, p, key in required))
        missing = required - set(props)
        if missing:
            raise ValueError(f"tool {tool.name!r}: required parameters {sorted(missing)} are not in properties")
        extra = schema.get("additionalProperties", False)
        more = extra is not False and extra is not None
        if self.any_order(tool):
            if more:  # an undeclared parameter is one more member (the check ignores its keys)
                members.append(Member("", self._any_param(lit, max_whitespace), False))
            return members_any_order(members, const(""))
        parts = [m.fmt if m.required else opt(m.fmt) for m in members]
        if more:
            parts.append(star(self._any_param(lit, max_whitespace)))
        return seq(*parts)

    def any_order(self, tool: ToolSpec) -> bool:
        props = tool.parameters.get("properties")
        return self.caller_order and tool.enforce and tool.any_key_order and isinstance(props, Mapping) \
            and len(props) >= 2

    def read(self, src: MarkedText, pos: int, tool: ToolSpec, lit: LiteralText) -> tuple[str, int]:
        raise NotImplementedError("XmlArgs.read_until needs the call end")

    def streamer(self, tool: ToolSpec, start: int, call_end: str, lit: LiteralText) -> ArgStreamer | None:
        from .arg_stream import XmlArgStreamer  # arg_stream reads this module's syntaxes
        return XmlArgStreamer(self, tool, start, call_end, lit)

    def value_is_raw(self, key: str, attr: Any, declared: Mapping[str, Any], defs: Mapping[str, Any]) -> bool:
        """Whether :meth:`_read_value` returns parameter ``key``'s text as it is, whatever it is (its
        schema admits strings only): the value can then go out as it comes."""
        if key not in declared:
            return False
        try:
            return split_schema(declared[key], defs)[1] is None
        except ValueError:
            return False

    def no_params_end(self, src: MarkedText, pos: int, call_end: str, lit: LiteralText) -> int:
        """Where ``call_end`` starts when the text at ``pos`` says the call has no parameters in a way
        other than ``call_end`` itself, else -1 (none here; DSML's blank line)."""
        return -1

    def _read_begin(self, src: MarkedText, pos: int, keys: list[str], lit: LiteralText) -> tuple[str, Any, int]:
        """A parameter's opening at ``pos`` -> (key, what the opening says of its value (None here), value
        start)."""
        pre, post = self.param_begin.split("{key}")
        p = src.match_literal(pos, pre, lit)
        if p < 0:
            raise NoMatch("expected a parameter")
        text = src.text
        candidates = [k for k in keys if text.startswith(k, p)]
        m = re.compile(self.key_pattern).match(text, p)
        if m is not None and m.group() not in candidates:
            candidates.append(m.group())
        for key in candidates:
            if not src.plain(p, p + len(key)):
                continue
            q = src.match_literal(p + len(key), post, lit, exact_tail=True)
            if q >= 0:
                return key, None, q
        raise NoMatch("expected a parameter")

    def value_end(self, text: str, vstart: int, close_at: int) -> int:
        """Where a value starting at ``vstart`` ends, given its closing tag at ``close_at``: before what
        ``param_end`` writes ahead of the tag, when the text has it (``\\n`` in ``\\n</parameter>``), else at the
        tag (a model that writes ``<parameter=k>v</parameter>``); -1 when the text before the tag is not
        what ``param_end`` writes there (and is not whitespace the reader may leave out)."""
        pre = self.param_end[:self.param_end.index(self.close)]
        if text.startswith(pre, close_at - len(pre)) and close_at - len(pre) >= vstart:
            return close_at - len(pre)
        return close_at if not pre.strip() else -1

    def _read_value(self, text: str, start: int, end: int, key: str, attr: Any, declared: Mapping[str, Any],
                    extra: Any, defs: Mapping[str, Any]) -> Any:
        """The value of parameter ``key`` written as ``text[start:end]`` (``attr``: what its opening said),
        typed by its schema: ``declared[key]``, else the tool's ``additionalProperties`` (``extra``)."""
        sub = declared[key] if key in declared else (extra if isinstance(extra, Mapping) else True)
        return read_value(text[start:end], sub, defs, self.values)

    def read_until(self, src: MarkedText, pos: int, tool: ToolSpec, call_end: str,
                   lit: LiteralText) -> tuple[str, int]:
        """Read parameters from ``pos`` up to (not including) ``call_end``."""
        text = src.text
        schema = tool.parameters
        defs = defs_of(schema)
        declared: Mapping[str, Any] = schema.get("properties") or {}
        if not isinstance(declared, Mapping):
            declared = {}
        extra = schema.get("additionalProperties", True)
        keys = sorted(declared, key=len, reverse=True)
        out: list[tuple[str, Any]] = []
        while src.match_literal(pos, call_end, lit) < 0:
            key, attr, vstart = self._read_begin(src, pos, keys, lit)
            idx = src.find_literal(self.close, vstart, lit)
            vend = self.value_end(text, vstart, idx) if idx >= 0 else -1
            after = src.match_literal(vend, self.param_end, lit) if vend >= vstart else -1
            if after < 0:
                raise NoMatch("unterminated parameter")
            if not src.plain(vstart, vend):
                raise NoMatch("a control token inside a parameter value")
            out.append((key, self._read_value(text, vstart, vend, key, attr, declared, extra, defs)))
            pos = after
        return _object_text(out), pos


# --------------------------------------------------------------------------------------------------
# Gemma 4

_GEMMA_KEY = r"[A-Za-z_][A-Za-z0-9_]*"
"""The key of an object without declared properties (an untyped value's keys)."""
_GEMMA_KEY_COLON = re.compile(_GEMMA_KEY + ":")  # the reader's "key:" (compiled once)


def gemma_name_problem(name: str, markers: Sequence[str]) -> str | None:
    """Why a declared property name cannot be written in Gemma 4's syntax, or None.

    The template writes a name as it is (``key:value``, no quotes, no escape at any level), so any
    name is written literally and read back as one of the declared names, except:

    - a name holding a control token of the format (``<|"|>``, ``<tool_call|>`` ...): the tokenizer
      writes it as that token, which never appears inside a call's text;
    - a name with a ``:`` followed later by ``,`` or ``{``: ``name:`` then also reads as a shorter key,
      a value and another key (``a:1,b`` beside ``a`` and ``b``; ``k:{j`` as ``k`` holding ``{j:...}``),
      and nothing in the syntax tells the two apart.

    Without those, the first ``:`` after the longest declared name at a key's position is its own
    (a value never continues with ``:``), which is how the reader cuts."""
    bad = next((m for m in markers if m in name), None)
    if bad is not None:
        return f"it contains {bad!r}, a control token of the format (names are written unquoted, with no escape)"
    i = name.find(":")
    if i >= 0 and ("," in name[i + 1:] or "{" in name[i + 1:]):
        return ("it holds ':' followed by ',' or '{', so 'name:' also reads as a shorter key, a value and more "
                "(names are written unquoted, with no escape)")
    return None


def _declared_names(schema: Any) -> tuple[str, ...]:
    """Every property name a schema declares at any depth (``properties`` keys, and the keys of
    ``const`` / ``enum`` objects), longest first: the reader's candidates at a key's position. Keys
    of other mappings may be collected too (a property named ``properties``): a candidate only ever
    matches text that is that key followed by ``:``, so an extra one reads the same key."""
    names: set[str] = set()
    stack: list[tuple[Any, bool]] = [(schema, False)]
    while stack:
        node, literal = stack.pop()
        if isinstance(node, Mapping):
            if literal:
                names.update(k for k in node if isinstance(k, str))
            props = node.get("properties")
            if not literal and isinstance(props, Mapping):
                names.update(k for k in props if isinstance(k, str))
            for k, v in node.items():
                stack.append((v, literal or k in ("const", "enum")))
        elif isinstance(node, list):
            stack.extend((x, literal) for x in node)
    return tuple(sorted(names, key=len, reverse=True))


@dataclass(frozen=True)
class GemmaArgs(ArgsSyntax):
    """Gemma 4: ``{key:value,...}`` with unquoted keys, strings as ``<|"|>text<|"|>`` (the delimiter is
    a token), numbers / booleans as JSON, null as ``null`` or ``None`` (the first revision of the
    template renders Python's None as such), at every nesting level, no whitespace. Gemma 4's
    template writes every object's keys through ``dictsort``: a call's keys follow one of
    ``key_orders`` (default: the schema's order or sorted, see :mod:`.order`) at every level, const and
    enum objects included (a call that mixes the two orders is rejected); required properties must
    appear in either. Array length bounds are enforced up to ``syntax.MAX_ITEMS_BOUND``. A declared
    property name is written literally, whatever its characters (``Content-Type:``, ``user.email:``,
    ``año_vehiculo:``), as the template writes it; :func:`gemma_name_problem` says which names the
    syntax cannot hold (a ``ValueError`` naming the tool, the name and why). The reader takes keys in
    any order, matches the longest declared name at a key's position (else an undeclared
    ``[A-Za-z_][A-Za-z0-9_]*`` key) and returns the keys as written."""

    quote: str = '<|"|>'
    any_depth: int = 3
    key_orders: tuple[KeyOrder, ...] = KEY_ORDERS

    def __post_init__(self) -> None:
        unknown = [o for o in self.key_orders if o not in KEY_ORDERS]
        if unknown or not self.key_orders:
            raise ValueError(f"GemmaArgs: key_orders must be a non-empty subset of {KEY_ORDERS}, got {self.key_orders}")

    def _string(self, lit: LiteralText, sub: Mapping[str, Any] | None = None) -> Fmt:
        if sub is not None and isinstance(sub.get("pattern"), str):
            body = regex(sub["pattern"])
        else:
            body = raw_text(self.quote, raw_min_length(sub))
        return seq(lit(self.quote), body, lit(self.quote))

    def _literal(self, v: Any, lit: LiteralText, order: KeyOrder) -> Fmt:
        if isinstance(v, str):
            if self.quote in v:
                raise ValueError(f"enum value {v!r} contains the string delimiter")
            return seq(lit(self.quote), const(v), lit(self.quote))
        if isinstance(v, dict):
            for k in v:
                why = gemma_name_problem(k, lit.markers)
                if why is not None:
                    raise ValueError(f"object key {k!r} cannot be written in the gemma format: {why}")
            members = [Member(k, seq(const(k + ":"), self._literal(x, lit, order)), True) for k, x in v.items()]
            return seq(const("{"), members_in_orders(members, (order,), ","), const("}"))
        if isinstance(v, list):
            return seq(const("["), *_join_fmts([self._literal(x, lit, order) for x in v]), const("]"))
        if v is None:
            return self._null()
        return const(json.dumps(v))

    @staticmethod
    def _null() -> Fmt:
        # the template's first revision renders None with ``{{ argument }}`` (Python's ``None``), later
        # ones write ``null``
        return or_(const("null"), const("None"))

    def _any(self, lit: LiteralText, depth: int, names: tuple[str, ...] = ()) -> Fmt:
        """Any value, ``depth`` levels deep; an object's key is ``_GEMMA_KEY`` or one of ``names``."""
        scalars = [self._string(lit), json_fmt({"type": ["number", "boolean"]}, max_whitespace=None), self._null()]
        if depth <= 0:
            return or_(*scalars)
        inner = self._any(lit, depth - 1, names)
        arr = seq(const("["), opt(seq(inner, star(seq(const(","), inner)))), const("]"))
        return or_(*scalars, arr, self._any_object(inner, names))

    @staticmethod
    def _any_object(inner: Fmt, names: tuple[str, ...] = ()) -> Fmt:
        """An object of values ``inner``, keys ``_GEMMA_KEY`` or one of ``names``."""
        extra = [const(n) for n in names if not re.fullmatch(_GEMMA_KEY, n)]
        member = seq(or_(regex(_GEMMA_KEY), *extra) if extra else regex(_GEMMA_KEY), const(":"), inner)
        return seq(const("{"), opt(seq(member, star(seq(const(","), member)))), const("}"))

    def _value(self, schema: Any, defs: Mapping[str, Any], lit: LiteralText, tool: ToolSpec, order: KeyOrder,
               depth: int = 0) -> Fmt:
        s = resolve_ref(schema, defs)
        if s is True or s == {} or not isinstance(s, Mapping):
            return self._any(lit, self.any_depth)
        if depth > 16:
            raise ValueError(f"tool {tool.name!r}: schema nested too deeply for the gemma format")
        if "const" in s:
            return self._literal(s["const"], lit, order)
        if isinstance(s.get("enum"), list) and s["enum"]:
            return or_(*[self._literal(v, lit, order) for v in s["enum"]])
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list) and s[key]:
                base = {k: v for k, v in s.items() if k != key}
                return or_(*[self._value({**base, **alt} if isinstance(alt, Mapping) else alt, defs, lit, tool, order,
                                         depth + 1) for alt in s[key]])
        t = s.get("type")
        if isinstance(t, list):
            return or_(*[self._value({**s, "type": x}, defs, lit, tool, order, depth + 1) for x in t])
        if t is None:
            t = "object" if "properties" in s else ("array" if "items" in s else None)
        if t == "string":
            return self._string(lit, s)
        if t == "object":
            return self._object(s, defs, lit, tool, order, depth)
        if t == "array":
            item = self._value(s.get("items", True), defs, lit, tool, order, depth + 1)
            return seq(const("["), repeated(item, ",", *item_bounds(s)), const("]"))
        if t == "null":
            return self._null()
        if t in ("integer", "number", "boolean"):
            return json_fmt(s, max_whitespace=None)
        return self._any(lit, self.any_depth)

    def _object(self, s: Mapping[str, Any], defs: Mapping[str, Any], lit: LiteralText, tool: ToolSpec, order: KeyOrder,
                depth: int) -> Fmt:
        props: Mapping[str, Any] = s.get("properties") or {}
        required = set(s.get("required") or ())
        if not props:
            return self._any_object(self._any(lit, self.any_depth - 1))
        members: list[Member] = []
        for key, sub in props.items():
            why = gemma_name_problem(key, lit.markers)
            if why is not None:
                raise ValueError(f"tool {tool.name!r}: property name {key!r} cannot be written in the gemma format: "
                                 f"{why}")
            members.append(Member(key, seq(const(key + ":"), self._value(sub, defs, lit, tool, order, depth + 1)),
                                  key in required))
        return seq(const("{"), members_in_orders(members, (order,), ","), const("}"))

    def build(self, tool: ToolSpec, lit: LiteralText, max_whitespace: int | None) -> Fmt:
        # one order for the whole call (an or of whole arguments): k orders cost at most k copies
        # whatever the nesting, where one or per object would multiply them at every level
        if not tool.enforce:
            # any object, whose keys may also be the declared names the pattern does not cover
            names = tuple(n for n in _declared_names(tool.parameters) if gemma_name_problem(n, lit.markers) is None)
            return self._any_object(self._any(lit, self.any_depth - 1, names), names)
        alts: list[Fmt] = []
        for order in dict.fromkeys(self.key_orders):
            f = self._value(tool.schema, defs_of(tool.schema), lit, tool, order)
            if f not in alts:  # the orders coincide at every level
                alts.append(f)
        return or_(*alts)

    # -- reader
    def _read_key(self, src: MarkedText, p: int, names: tuple[str, ...]) -> tuple[str, int] | None:
        """The key at ``p`` and the position after its ``:``: the longest declared name written there
        (any characters), else an undeclared key (``_GEMMA_KEY``); None when there is none."""
        text = src.text
        for name in names:
            end = p + len(name)
            if text.startswith(":", end) and text.startswith(name, p) and src.plain(p, end + 1):
                return name, end + 1
        m = _GEMMA_KEY_COLON.match(text, p)
        if m is None:
            return None
        return m.group()[:-1], m.end()

    def _read_value(self, src: MarkedText, p: int, depth: int = 0, names: tuple[str, ...] = ()) -> tuple[Any, int]:
        text, q = src.text, self.quote
        if depth > MAX_ARGUMENT_DEPTH:
            raise NoMatch(f"nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        if src.marker_at(p, q):
            end = src.find_marker(q, p + len(q))
            if end < 0 or not src.plain(p + len(q), end):
                raise NoMatch("unterminated string")
            return text[p + len(q):end], end + len(q)
        if text.startswith("{", p):
            p += 1
            out: dict[str, Any] = {}
            first = True
            while True:
                key = self._read_key(src, p, names)
                if key is None:
                    if first and text.startswith("}", p):  # a declared name may start with "}"
                        return out, p + 1
                    raise NoMatch("expected a key")
                first = False
                v, p = self._read_value(src, key[1], depth + 1, names)
                out[key[0]] = v
                if text.startswith(",", p):
                    p += 1
                elif text.startswith("}", p):
                    return out, p + 1
                else:
                    raise NoMatch("expected , or }")
        if text.startswith("[", p):
            p += 1
            arr: list[Any] = []
            if text.startswith("]", p):
                return arr, p + 1
            while True:
                v, p = self._read_value(src, p, depth + 1, names)
                arr.append(v)
                if text.startswith(",", p):
                    p += 1
                elif text.startswith("]", p):
                    return arr, p + 1
                else:
                    raise NoMatch("expected , or ]")
        if text.startswith("None", p) and src.plain(p, p + 4):
            return None, p + 4
        try:
            v, end = _DECODER.raw_decode(text, p)
        except (json.JSONDecodeError, RecursionError) as e:
            raise NoMatch(str(e)) from None
        if not src.plain(p, end):
            raise NoMatch("a control token inside a value")
        return v, end

    def streamer(self, tool: ToolSpec, start: int, call_end: str, lit: LiteralText) -> ArgStreamer | None:
        if not (tool.enforce and self._closed(tool.schema, defs_of(tool.schema))):
            return None  # an object of any keys may repeat one: only the end tells where its value goes
        from .arg_stream import GemmaArgStreamer  # arg_stream reads this module's syntaxes
        return GemmaArgStreamer(self.quote, _declared_names(tool.parameters), _GEMMA_KEY_COLON, start)

    def _closed(self, schema: Any, defs: Mapping[str, Any], depth: int = 0) -> bool:
        """Whether every object :meth:`_value` admits under ``schema`` declares its keys (each then comes
        once per object in a call the grammar writes)."""
        try:
            s = resolve_ref(schema, defs)
        except ValueError:
            return False
        if not isinstance(s, Mapping) or not s or depth > 16:
            return False
        if "const" in s or (isinstance(s.get("enum"), list) and s["enum"]):
            return True
        for key in ("anyOf", "oneOf"):
            if isinstance(s.get(key), list) and s[key]:
                base = {k: v for k, v in s.items() if k != key}
                return all(isinstance(a, Mapping) and self._closed({**base, **a}, defs, depth + 1) for a in s[key])
        t = s.get("type")
        if isinstance(t, list):
            return bool(t) and all(self._closed({**s, "type": x}, defs, depth + 1) for x in t)
        if t is None:
            t = "object" if "properties" in s else ("array" if "items" in s else None)
        if t in ("string", "integer", "number", "boolean", "null"):
            return True
        if t == "object":
            props = s.get("properties")
            return isinstance(props, Mapping) and bool(props) and all(
                self._closed(v, defs, depth + 1) for v in props.values())
        if t == "array":
            return self._closed(s.get("items", True), defs, depth + 1)
        return False

    def read(self, src: MarkedText, pos: int, tool: ToolSpec, lit: LiteralText) -> tuple[str, int]:
        v, end = self._read_value(src, pos, 0, _declared_names(tool.parameters))
        if not isinstance(v, dict):
            raise NoMatch("arguments are not an object")
        return json.dumps(v, ensure_ascii=False), end


def _join_fmts(items: list[Fmt]) -> list[Fmt]:
    out: list[Fmt] = []
    for i, x in enumerate(items):
        if i:
            out.append(const(","))
        out.append(x)
    return out
