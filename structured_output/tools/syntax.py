"""Building blocks for structural tags (plain JSON-able dicts in xgrammar's structural-tag format).

Markers (the family's control tokens: ``<tool_call>``, ``｜DSML｜``, ``[TOOL_CALLS]`` ...) are matched as
*tokens*, never as text: the compiler gives control tokens no text, so a text rule can never produce
them, and a marker spelled out of ordinary sub-tokens is not a marker. :class:`LiteralText` splits a
literal of the call syntax into const strings and token formats. A token is named by its string (the
manager resolves it against the vocabulary).

:func:`raw_text` is the rule for a raw XML string value: any text (no control token) that does not contain
the value's closing tag, so that the first closing tag after a value is always its own; a reader can then cut
at it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

Fmt = dict[str, Any]

__all__ = ["Fmt", "const", "token", "seq", "or_", "opt", "star", "repeated", "item_bounds", "tag", "regex", "json_fmt",
           "any_tokens", "LiteralText", "raw_text", "structural_tag"]


def const(s: str) -> Fmt:
    return {"type": "const_string", "value": s}


def token(t: str | int) -> Fmt:
    return {"type": "token", "token": t}


def seq(*xs: Fmt | None) -> Fmt:
    flat: list[Fmt] = []
    for x in xs:
        if x is None:
            continue
        flat.extend(x["elements"] if x.get("type") == "sequence" else [x])
    els: list[Fmt] = []
    for x in flat:
        if x.get("type") == "const_string":
            if x["value"] == "":
                continue
            if els and els[-1].get("type") == "const_string":
                els[-1] = const(els[-1]["value"] + x["value"])
                continue
        els.append(x)
    if not els:
        return const("")
    return els[0] if len(els) == 1 else {"type": "sequence", "elements": els}


def or_(*xs: Fmt) -> Fmt:
    return xs[0] if len(xs) == 1 else {"type": "or", "elements": list(xs)}


def opt(x: Fmt) -> Fmt:
    return {"type": "optional", "content": x}


def star(x: Fmt) -> Fmt:
    return {"type": "star", "content": x}


MAX_ITEMS_BOUND = 64
"""The largest ``minItems`` / ``maxItems`` an array rule spells out (each bound item is a copy of the item's rule);
a larger ``minItems`` is enforced as this many, a larger ``maxItems`` not at all."""


def item_bounds(s: Mapping[str, Any]) -> tuple[int, int | None]:
    """The ``(minItems, maxItems)`` of an array schema that :func:`repeated` enforces (integers only, bools ignored)."""
    lo, hi = s.get("minItems"), s.get("maxItems")
    lo = min(lo, MAX_ITEMS_BOUND) if isinstance(lo, int) and not isinstance(lo, bool) and lo > 0 else 0
    hi = hi if isinstance(hi, int) and not isinstance(hi, bool) and lo <= hi <= MAX_ITEMS_BOUND else None
    return lo, hi


def repeated(item: Fmt, sep: str, lo: int = 0, hi: int | None = None) -> Fmt:
    """``item`` repeated, separated by ``sep``: at least ``lo`` times, at most ``hi`` (None: no bound). The optional
    copies nest (``(, x (, x)?)?``), so that a text has one parse."""
    more = seq(const(sep), item)
    if hi == 0:
        return const("")
    tail: Fmt | None
    if hi is None:
        tail = star(more)
    else:
        tail = None
        for _ in range(hi - max(lo, 1)):
            tail = opt(more if tail is None else seq(more, tail))
    body = seq(item, *[more] * (max(lo, 1) - 1), tail)
    return body if lo >= 1 else opt(body)


# every character JSON text of numbers, booleans, null, arrays and objects without strings can hold
_NON_STRING_JSON_CHARS = frozenset("0123456789+-.eEtruefalsn[]{},: \t\r\n")
_SCALAR_TYPES = frozenset(("integer", "number", "boolean", "null"))


def _excludes_unreachable(schema: Any, excludes: Sequence[str]) -> bool:
    """Whether no JSON text of ``schema`` can contain any of ``excludes``: the schema admits no string (so no
    object either: keys are strings), and each excluded string holds a character that only a string could.
    xgrammar then compiles the same language without the exclusion (which costs a precomputation per JSON
    value: about half of a qwen3_6 ten-tool compile, measured in-process)."""
    if not all(set(e) - _NON_STRING_JSON_CHARS for e in excludes):
        return False
    return not _may_hold_strings(schema, schema, 0)


def _may_hold_strings(node: Any, root: Any, depth: int) -> bool:
    """Conservative: ``False`` only where every JSON value of ``node`` is a number, boolean, null or an array of
    such values."""
    if node is False:
        return False
    if not isinstance(node, Mapping) or depth > 32:
        return True
    ref = node.get("$ref")
    if ref is not None:
        try:
            target = resolve_ref({"$ref": ref}, defs_of(root) if isinstance(root, Mapping) else {})
        except ValueError:
            return True
        if _may_hold_strings(target, root, depth + 1):
            return True
    for key in ("anyOf", "oneOf", "allOf"):
        branches = node.get(key)
        if branches is not None:
            if not isinstance(branches, list) or any(_may_hold_strings(b, root, depth + 1) for b in branches):
                return True
            if key != "allOf":  # every value is one of the branches'
                return False
    for key in ("enum", "const"):
        if key in node:
            values = node[key] if key == "enum" else [node[key]]
            return not isinstance(values, list) or not all(
                v is None or isinstance(v, (bool, int, float)) for v in values)
    types = node.get("type")
    if types is None:
        return ref is None and not any(k in node for k in ("anyOf", "oneOf", "allOf"))
    types = [types] if isinstance(types, str) else types
    if not isinstance(types, list) or not all(isinstance(x, str) for x in types):
        return True
    if not set(types) <= _SCALAR_TYPES | {"array"}:
        return True
    if "array" in types:
        items = [node[k] for k in ("items", "additionalItems", "unevaluatedItems") if k in node]
        prefix = node.get("prefixItems", [])
        if "items" not in node or not isinstance(prefix, list):
            return True
        return any(_may_hold_strings(s, root, depth + 1) for s in [*items, *prefix])
    return False


def resolve_ref(schema: Any, defs: Mapping[str, Any], *, depth: int = 0) -> Any:
    """Follow local ``$ref`` (``#/$defs/X`` / ``#/definitions/X``) until a schema without one; ``defs`` as
    :func:`defs_of` gives them. ``ValueError`` for a ``$ref`` that does not resolve."""
    while isinstance(schema, Mapping) and isinstance(schema.get("$ref"), str) and depth < 32:
        ref = schema["$ref"]
        for key in ("$defs", "definitions"):
            prefix = f"#/{key}/"
            if ref.startswith(prefix) and ref[len(prefix):] in defs.get(key, {}):
                schema = defs[key][ref[len(prefix):]]
                break
        else:
            raise ValueError(f"unresolvable $ref {ref!r}")
        depth += 1
    return schema


def defs_of(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A root schema's ``$defs`` / ``definitions`` (what :func:`resolve_ref` reads)."""
    return {k: schema[k] for k in ("$defs", "definitions") if isinstance(schema.get(k), Mapping)}


def with_defs(sub: Any, defs: Mapping[str, Any]) -> Any:
    """A subschema that carries its root's ``$defs`` / ``definitions`` (:func:`defs_of`), so that it stands
    alone as a JSON schema."""
    if not defs or not isinstance(sub, Mapping):
        return sub
    return {**sub, **defs}


def tag(begin: str | Fmt, content: Fmt, end: str | Fmt) -> Fmt:
    return {"type": "tag", "begin": begin, "content": content, "end": end}


def regex(pattern: str) -> Fmt:
    return {"type": "regex", "pattern": pattern}


def json_fmt(schema: Mapping[str, Any] | bool, *, max_whitespace: int | None,
             excludes: Sequence[str] = (), any_order: bool = False) -> Fmt:
    """A JSON value of ``schema``. ``any_order``: xgrammar's relaxed objects (every object's properties
    in any order, each any number of times, required ones not enforced: see ``key_check.py``)."""
    f: Fmt = {"type": "json_schema", "json_schema": schema}
    if max_whitespace is not None:
        f["max_whitespace_cnt"] = max_whitespace
    if excludes and not _excludes_unreachable(schema, excludes):
        f["excludes"] = list(excludes)
    if any_order:
        f["any_order"] = True
    return f


def any_tokens(exclude: Iterable[str | int]) -> Fmt:
    return {"type": "any_tokens", "exclude_tokens": list(exclude)}


def structural_tag(fmt: Fmt) -> dict[str, Any]:
    return {"type": "structural_tag", "format": fmt}


class LiteralText:
    """Splits literal call syntax into const strings and marker tokens.

    ``markers`` are the strings matched as single tokens; a token format names a marker by its
    string, which the manager resolves against the vocabulary."""

    def __init__(self, markers: Iterable[str]) -> None:
        self.markers = tuple(sorted({m for m in markers if m}, key=len, reverse=True))

    def split(self, text: str) -> list[tuple[bool, str]]:
        """[(is_marker, piece), ...] covering ``text``."""
        out: list[tuple[bool, str]] = []
        while text:
            best: tuple[int, str] | None = None
            for m in self.markers:
                i = text.find(m)
                if i != -1 and (best is None or i < best[0]):
                    best = (i, m)
            if best is None:
                out.append((False, text))
                break
            i, m = best
            if i:
                out.append((False, text[:i]))
            out.append((True, m))
            text = text[i + len(m):]
        return out

    def __call__(self, text: str) -> Fmt:
        return seq(*[token(p) if is_m else const(p) for is_m, p in self.split(text)])


# --------------------------------------------------------------------------------------------------
# "any text without substring S"

_RX_NAMES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _rx(c: str) -> str:
    return _RX_NAMES.get(c) or ("\\" + c if c in "\\^$.|?*+()[]{}/-\"" else c)


def _rx_not(chars: Iterable[str]) -> str:
    return "[^" + "".join(_rx(c) for c in sorted(set(chars))) + "]"


def raw_text(forbidden: str, min_length: int = 0) -> Fmt:
    """Any text, possibly empty (at least ``min_length`` characters long with ``min_length``), that does not
    contain ``forbidden``: a raw string value ended by its closing tag, so that the first closing tag after a
    value is always its own and a reader can cut at it.

    xgrammar's ``any_text`` with ``forbidden`` excluded (the compiler adds the control tokens' mark to its
    excludes, so no control token occurs in it, and gives it a tag of its own inside a tag that ends with text,
    whose end xgrammar would otherwise add to the excludes: ``compilation/xgrammar_adapter.py``). Its masks are
    computed from one automaton of the excluded strings; the same language as character classes (a chunk per
    ``forbidden[0]``) needs two precomputed states per character of ``forbidden`` (about 0.4 s per distinct
    closing tag on a 248k vocabulary) and fills a row some 20 times slower (measured in-process: docs/results.md).
    ``any_text`` reads bytes, not UTF-8: a byte token that starts no character (a lone continuation byte) is
    allowed in it, as in xgrammar's own structural tags for these formats (docs/limits.md).

    ``min_length``: that many units first (a regex), each a character other than ``a = forbidden[0]``, or ``a``
    and a character other than ``forbidden[1]`` and ``a``: at least one character each, and no ``forbidden[:2]``
    in or across them, so ``forbidden`` cannot start among them (a value that holds ``forbidden[:2]`` within its
    first ``min_length`` characters is not admitted). Needs ``forbidden[0]`` to occur nowhere else in it, as in
    closing tags such as ``</parameter>`` and in ``<|"|>``."""
    if not forbidden:
        raise ValueError("raw_text: the forbidden string is empty")
    body: Fmt = {"type": "any_text", "excludes": [forbidden]}
    return seq(regex(_min_head(forbidden, min_length)), body) if min_length > 0 else body


def _min_head(s: str, min_length: int) -> str:
    """The regex of ``min_length`` units that no string avoiding ``s`` can start ``s`` in (:func:`raw_text`)."""
    a = s[0]
    if a in s[1:]:
        raise ValueError(f"raw_text: {s!r} repeats its first character")
    unit = _rx_not(a) if len(s) == 1 else f"({_rx_not(a)}|{_rx(a)}{_rx_not([s[1], a])})"
    return f"{unit}{{{min_length}}}"
