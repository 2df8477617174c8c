"""Whether a structural tag's every output is JSON text, whitespace and control tokens.

A tool format whose forced calls are such text (the JSON-call families: ``{"name": ..., "arguments": {...}}``
between control tokens) has its whitespace bound enforced beside the grammar, as a JSON response has
(``compilation/jsonws/bound.py``): the grammar is written with free whitespace (xgrammar compiles a bounded
run that may hold a space into a list of the space-led tokens per state: megabytes per grammar), and the
matcher counts each gap. That lexer tells strings apart by quotes and backslashes alone, and passes control
tokens by; so the tag may hold only literals, JSON (``json_schema``), control tokens (``token``), runs of
whitespace and digits (a call index, which may sit inside a quoted id), and the lexer, run along any output,
must be outside a string at each JSON value and whitespace run, and at the end. The tag's own whitespace must
fit any bound: a literal's whitespace never follows whitespace (the matcher could fill that gap to the bound,
then the literal would have to lengthen it: a dead end), nor runs two characters long; a control token ends a
gap (``jsonws/bound.py``).

:func:`json_text_only` checks a tag built without a whitespace bound. The formats declare the property
(:meth:`~.call_format.ToolFormat.json_whitespace_beside`); the tests check each declaration with it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["json_text_only"]


def json_text_only(node: Any) -> bool:
    """True when every output of the structural tag ``node`` is JSON text, whitespace and control tokens, the
    bound's lexer is outside a string wherever JSON or whitespace is, and no bound of one or more characters
    can meet a dead end in the tag's own whitespace (see the module docstring)."""
    end = _walk(node, (_OUT, False))
    return end is not None and end[0] == _OUT


_OUT, _STR, _ESC = 0, 1, 2
_WS = " \t\r\n"
# the regexes a JSON-call tag holds besides JSON: whitespace runs, and digits (a call index)
_NEUTRAL_REGEX = re.compile(r"\[(?: \\t\\r\\n|\\t\\r\\n|0-9)\](?:\*|\{\d+(?:,\d+)?\})")

State = tuple[int, bool]
"""The lexer state (outside a string, in one, after a backslash in one), and whether the text so far may end
with whitespace (a gap the next literal whitespace would lengthen)."""


def _walk(node: Any, at: State) -> State | None:
    """The state after any output of ``node`` read from ``at`` (the whitespace flag: after some output); None
    when ``node`` is not JSON-call text, its outputs leave the lexer in different states, or a literal's
    whitespace could follow whitespace (a gap the matcher could fill up to the bound, then a literal that must
    lengthen it: a dead end) or holds a run of two or more."""
    state, tail = at
    if isinstance(node, str):
        return _literal(node, at)
    if not isinstance(node, Mapping):
        return None
    kind = node.get("type")
    if kind == "token":  # a control token: the lexer passes it by, and it ends a gap outside strings
        return state, False
    if kind == "json_schema":  # no whitespace before or after the value (xgrammar's JSON element)
        return (state, False) if state == _OUT else None
    if kind == "const_string":
        value = node.get("value")
        return _literal(value, at) if isinstance(value, str) else None
    if kind == "regex":
        pattern = node.get("pattern")
        if not isinstance(pattern, str) or _NEUTRAL_REGEX.fullmatch(pattern) is None or state == _ESC:
            return None
        if pattern.startswith("[0-9]"):
            return state, tail and _may_be_empty(pattern)
        return (state, True) if state == _OUT else None
    if kind == "structural_tag":
        return _walk(node.get("format"), at)
    if kind in ("sequence", "tag"):
        parts = node.get("elements") if kind == "sequence" else [node.get("begin", ""), node.get("content"),
                                                                  node.get("end", "")]
        if not isinstance(parts, list):
            return None
        cur: State | None = at
        for part in parts:
            cur = _walk(part, cur)
            if cur is None:
                return None
        return cur
    if kind == "or":
        ends = [_walk(e, at) for e in node.get("elements") or [None]]
        if any(e is None for e in ends) or len({e[0] for e in ends}) != 1:  # type: ignore[index]
            return None
        return ends[0][0], any(e[1] for e in ends)  # type: ignore[index]
    if kind in ("optional", "star", "plus", "repeat"):  # zero or more times: the content keeps the state
        once = _walk(node.get("content"), at)
        again = None if once is None else _walk(node.get("content"), (state, tail or once[1]))
        if once is None or again is None or once[0] != state or again[0] != state:
            return None
        return state, tail or once[1] or again[1]
    if kind == "tags_with_separator":  # tag (separator tag)*
        tags, sep = node.get("tags"), node.get("separator", "")
        if not isinstance(tags, list) or not tags:
            return None
        loop = {"type": "sequence", "elements": [sep, {"type": "or", "elements": tags}]}
        return _walk({"type": "sequence", "elements": [{"type": "or", "elements": tags},
                                                       {"type": "star", "content": loop}]}, at)
    return None


def _literal(text: str, at: State) -> State | None:
    """A literal read from ``at`` (see :func:`_walk`)."""
    state, tail = at
    run = 0
    for i, ch in enumerate(text):
        if state == _OUT and ch in _WS:
            run += 1
            if run > 1 or (i == 0 and tail):
                return None
        else:
            run = 0
        state = _read(ch, state)
    return state, (run > 0) if text else tail


def _may_be_empty(pattern: str) -> bool:
    return pattern.endswith("*") or bool(re.search(r"\{0(,|\})", pattern))


def _read(text: str, state: int) -> int:
    """The bound's three-state lexer (outside a string, in one, after a backslash in one) over ``text``."""
    for ch in text:
        if state == _ESC:
            state = _STR
        elif state == _STR:
            state = _ESC if ch == "\\" else _OUT if ch == '"' else _STR
        elif ch == '"':
            state = _STR
    return state
