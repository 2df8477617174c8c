"""A call's argument text as it is written: what can go out before the call ends.

An :class:`ArgStreamer` reads one call's arguments from a :class:`~.pending.PendingText` (positions there
stay put while the call is held), from where it stopped, and returns the argument text that can go out
now. Every concatenation of what it returns is a prefix of the arguments string the whole reader returns
for the same text (``ArgsSyntax.read`` / ``read_until``), and, once the arguments are read to their end,
all of it:

- :class:`JsonArgStreamer` (JSON arguments: the whole reader returns the model's own JSON text): the text
  as written, from the object's ``{`` to its closing ``}`` (a JSON bracket counter that skips strings);
- :class:`XmlArgStreamer` (one element per parameter: the whole reader returns ``{"k": v, ...}`` built by
  ``_object_text``): ``{`` at once, ``"k": `` (with ``, `` before the second and later) when a parameter's
  opening is read, a raw string value escaped as its text comes (a tail that may be the start of the
  closing tag held back), any other value serialized when its parameter closes, ``}`` where the call's end
  comes;
- :class:`GemmaArgStreamer` (Gemma 4: the whole reader returns ``json.dumps`` of the value it reads):
  that serialization, built as the value is read.

Each ``advance`` costs O(the text added since the last one) plus a bounded tail (a held closing-tag prefix,
or an element's opening while it is incomplete, at most :data:`MAX_OPENING` characters). Text that cannot
be these arguments raises :class:`StreamStop` (the stream then stops sending this call's arguments early and
the call is decided where its end comes).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .args import NoMatch
from .marked import MAX_ARGUMENT_DEPTH, MarkedText
from .pending import PendingText
from .request import ToolSpec
from .syntax import LiteralText, defs_of

if TYPE_CHECKING:
    from .args import XmlArgs

__all__ = ["ArgStreamer", "JsonArgStreamer", "XmlArgStreamer", "GemmaArgStreamer", "StreamStop", "BracketDepth", "MAX_OPENING",
           "json_string_body"]

MAX_OPENING = 1024
"""The longest opening (a call's, or a parameter's) read again at each feed while it is incomplete; a longer
one stops the early streaming of its call (it is then decided at its end), so that a feed costs O(itself)."""

_OUTSIDE_STRING = re.compile(r'[\[\]{}"]')
_INSIDE_STRING = re.compile(r'["\\]')


class StreamStop(Exception):
    """The text read so far cannot be these arguments: stop streaming them early."""


def json_string_body(s: str) -> str:
    """``json.dumps(s, ensure_ascii=False)`` without its quotes: character by character, so the bodies of
    the pieces of a string joined are the body of the string."""
    return json.dumps(s, ensure_ascii=False)[1:-1]


class BracketDepth:
    """JSON bracket depth over plain text fed in order: where an opened bracket closes back to depth 0."""

    __slots__ = ("depth", "in_string", "escape")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escape = False

    def first_close(self, text: str, base: int, start: int = 0) -> int:
        """Feed ``text[start:]`` (``text`` at offset ``base``) up to the first close to depth 0: its position
        (``base`` + offset in ``text``, just after the bracket), or -1 when it has none (all of it fed)."""
        i, n = start, len(text)
        while i < n:
            if self.escape:
                self.escape = False
                i += 1
                continue
            if self.in_string:
                m = _INSIDE_STRING.search(text, i)
                if m is None:
                    return -1
                i = m.end()
                if m.group() == "\\":
                    self.escape = True
                else:
                    self.in_string = False
                continue
            m = _OUTSIDE_STRING.search(text, i)
            if m is None:
                return -1
            c, i = m.group(), m.end()
            if c == '"':
                self.in_string = True
            elif c in "[{":
                self.depth += 1
            elif self.depth > 0:
                self.depth -= 1
                if self.depth == 0:
                    return base + i
        return -1


class ArgStreamer(ABC):
    """One call's arguments, read as they are written (see the module docstring)."""

    scanned: int = 0
    """Characters examined so far (tests count work with it)."""

    @abstractmethod
    def advance(self, pending: PendingText) -> tuple[str, int]:
        """-> (the argument text that can go out now, where the arguments end in ``pending`` once read,
        else -1). :class:`StreamStop` when the text cannot be these arguments."""

    @abstractmethod
    def shift(self, n: int) -> None:
        """The first ``n`` characters of the pending text were dropped (all before these arguments)."""


class JsonArgStreamer(ArgStreamer):
    """JSON object arguments from ``start``: leading whitespace skipped, then the text as written."""

    def __init__(self, start: int) -> None:
        self._pos = start
        self._open = False
        self._depth = BracketDepth()
        self.scanned = 0

    def shift(self, n: int) -> None:
        self._pos -= n

    def advance(self, pending: PendingText) -> tuple[str, int]:
        w = pending.window(self._pos)
        text = w.text
        self.scanned += len(text)
        if not text:
            return "", -1
        if not w.plain(0, len(text)):
            raise StreamStop("a control token inside the arguments")
        i = 0
        if not self._open:
            while i < len(text) and text[i] in " \t\r\n":
                i += 1
            if i == len(text):
                self._pos += i
                return "", -1
            if text[i] != "{":
                raise StreamStop("the arguments are not a JSON object")
            self._open = True
        close = self._depth.first_close(text[i:], i) if i else self._depth.first_close(text, 0)
        if close >= 0:
            end = self._pos + close
            self._pos = end
            return text[i:close], end
        self._pos += len(text)
        return text[i:], -1


class XmlArgStreamer(ArgStreamer):
    """Parameters of an :class:`~.args.XmlArgs` syntax from ``start`` up to ``call_end``, as JSON text."""

    def __init__(self, syntax: XmlArgs, tool: ToolSpec, start: int, call_end: str, lit: LiteralText) -> None:
        self._syntax, self._call_end, self._lit = syntax, call_end, lit
        schema = tool.parameters
        self._defs = defs_of(schema)
        declared = schema.get("properties") or {}
        self._declared: Mapping[str, Any] = declared if isinstance(declared, Mapping) else {}
        self._extra = schema.get("additionalProperties", True)
        self._keys = sorted(self._declared, key=len, reverse=True)
        self._k = syntax.param_end.index(syntax.close)  # the value ends this many characters before its close
        self._hold = self._k + len(syntax.close) - 1    # a raw value's tail that may start its end
        self._pos = start
        self._opened = False
        self._params = 0
        self._in_value = False
        self._key: str = ""
        self._attr: Any = None
        self._raw = False
        self._vstart = 0
        self._sent = 0  # a raw value's text sent up to here
        self.scanned = 0

    def shift(self, n: int) -> None:
        self._pos -= n
        self._vstart -= n
        self._sent -= n

    def advance(self, pending: PendingText) -> tuple[str, int]:
        out: list[str] = []
        if not self._opened:
            self._opened = True
            out.append("{")
        while True:
            if not self._in_value:
                w = pending.window(self._pos)
                self.scanned += len(w.text)
                end = self._syntax.no_params_end(w, 0, self._call_end, self._lit) if not self._params else -1
                if end >= 0 or w.match_literal(0, self._call_end, self._lit) >= 0:
                    out.append("}")
                    return "".join(out), self._pos + max(end, 0)
                try:
                    key, attr, vstart = self._syntax._read_begin(w, 0, self._keys, self._lit)
                except NoMatch:
                    if len(w.text) > MAX_OPENING:
                        raise StreamStop("no parameter opening") from None
                    return "".join(out), -1
                if vstart >= len(w.text):
                    return "".join(out), -1  # the opening's newline (read if it comes) or the value is to come
                out.append((", " if self._params else "") + json.dumps(key, ensure_ascii=False) + ": ")
                self._key, self._attr = key, attr
                self._raw = self._syntax.value_is_raw(key, attr, self._declared, self._defs)
                if self._raw:
                    out.append('"')
                self._vstart = self._sent = self._pos + vstart
                self._in_value = True
            # the value: its closing tag is searched from _sent (a raw value's text is sent up to there;
            # another value's text is only examined up to there, and read whole when it closes)
            w = pending.window(self._sent)
            text = w.text
            self.scanned += len(text)
            idx = w.find_literal(self._syntax.close, 0, self._lit)
            if idx < 0:
                safe = len(text) - self._hold
                if safe > 0:
                    if not w.plain(0, safe):
                        raise StreamStop("a control token inside a parameter value")
                    if self._raw:
                        out.append(json_string_body(text[:safe]))
                    self._sent += safe
                return "".join(out), -1
            vend = self._syntax.value_end(text, 0, idx)
            if vend < 0 or not w.plain(0, vend):
                raise StreamStop("a parameter that does not end as the syntax says")
            after = w.match_literal(vend, self._syntax.param_end, self._lit)
            if after < 0 or after >= len(text):
                if after >= 0 or len(text) < vend + len(self._syntax.param_end):
                    return "".join(out), -1  # the rest of its end (``\n`` after ``</parameter>``) is to come
                raise StreamStop("a parameter that does not end as the syntax says")
            if self._raw:
                out.append(json_string_body(text[:vend]) + '"')
            else:
                whole = pending.window(self._vstart, self._sent + vend)
                self.scanned += len(whole.text)
                try:
                    v = self._syntax._read_value(whole.text, 0, len(whole.text), self._key, self._attr,
                                                 self._declared, self._extra, self._defs)
                except (NoMatch, ValueError):
                    raise StreamStop("a value that does not read") from None
                out.append(json.dumps(v, ensure_ascii=False))
            self._pos = self._sent + after
            self._params += 1
            self._in_value = False


_KEY_CHARS = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DELIMITERS = re.compile(r"[,}\]]")


class GemmaArgStreamer(ArgStreamer):
    """Gemma 4's arguments (``{key:value,...}``, strings between ``<|"|>`` tokens) as the whole reader
    returns them, ``json.dumps`` of the value read: ``{``, ``[``, ``, ``, ``"key": `` and closing brackets as
    they are read, a string escaped as its text comes, any other scalar (``1.50``, ``true``, ``None``) when
    the character after it shows where it ends. Only for a tool whose every object declares its keys
    (``GemmaArgs.streams``): there a key comes once per object, so the dict the whole reader builds keeps the
    written order and values (a key written twice would move where the whole reader puts its value)."""

    def __init__(self, quote: str, names: tuple[str, ...], key_colon: re.Pattern[str], start: int) -> None:
        self._q, self._names, self._key_colon = quote, names, key_colon
        self._pos = start
        self._stack: list[str] = []   # the open "{" / "[" around the next value
        self._state = "value"         # value | key | after | string | array_first
        self._first = False           # an object: no key read yet (an empty object may close)
        self.scanned = 0

    def shift(self, n: int) -> None:
        self._pos -= n

    def _key(self, w: MarkedText, i: int) -> tuple[str, int] | None | bool:
        """The key at ``i`` and the position after its ``:``; True when more text may change it; None when
        there is none (as ``GemmaArgs._read_key`` reads it: the longest declared name, else ``[A-Za-z_]...``)."""
        text = w.text
        rest = text[i:i + MAX_OPENING + 1]
        found: tuple[str, int] | None = None
        for name in self._names:
            end = i + len(name)
            if text.startswith(":", end) and text.startswith(name, i) and w.plain(i, end + 1):
                found = (name, end + 1)
                break
        if found is None:
            m = self._key_colon.match(text, i)
            if m is not None:
                found = (m.group()[:-1], m.end())
        shortest = len(found[0]) if found is not None else -1
        if any(len(n) > shortest and len(rest) <= len(n) and (n + ":").startswith(rest) for n in self._names):
            return True  # a longer declared name may still be written here
        if found is None and (not rest or _KEY_CHARS.fullmatch(rest)):
            return True
        return found

    def advance(self, pending: PendingText) -> tuple[str, int]:
        w = pending.window(self._pos)
        text = w.text
        self.scanned += len(text)
        out: list[str] = []
        i, n, q = 0, len(text), self._q
        while i < n or (self._state == "after" and not self._stack):
            state = self._state
            if state == "after" and not self._stack:  # the arguments' object closed
                self._pos += i
                return "".join(out), self._pos
            if state == "string":
                k = w.find_marker(q, i)
                stop = k if k >= 0 else n - _prefix_tail(text, q)
                if not w.plain(i, stop):
                    raise StreamStop("a control token inside a string")
                out.append(json_string_body(text[i:stop]))
                if k < 0:
                    i = stop
                    break
                out.append('"')
                i, self._state = k + len(q), "after"
            elif state == "key":
                key = self._key(w, i)
                if key is True:
                    if n - i > MAX_OPENING:
                        raise StreamStop("a key too long to read again")
                    break
                if key is None:
                    if self._first and text.startswith("}", i):
                        out.append("}")
                        self._stack.pop()
                        i, self._state = i + 1, "after"
                        continue
                    raise StreamStop("expected a key")
                out.append(json.dumps(key[0], ensure_ascii=False) + ": ")
                i, self._first, self._state = key[1], False, "value"
            elif state == "after":
                c = text[i]
                if c == ",":
                    out.append(", ")
                    i += 1
                    self._state = "key" if self._stack[-1] == "{" else "value"
                elif c == ("}" if self._stack[-1] == "{" else "]"):
                    out.append(c)
                    self._stack.pop()
                    i += 1
                else:
                    raise StreamStop("expected , or a closing bracket")
            elif state == "array_first" and text.startswith("]", i):
                out.append("]")
                self._stack.pop()
                i, self._state = i + 1, "after"
            else:  # a value
                if not self._stack and text[i] != "{":
                    raise StreamStop("the arguments are not an object")
                if w.marker_at(i, q):
                    out.append('"')
                    i, self._state = i + len(q), "string"
                elif text[i] in "{[":
                    if len(self._stack) >= MAX_ARGUMENT_DEPTH:
                        raise StreamStop("nested too deeply")
                    out.append(text[i])
                    self._stack.append(text[i])
                    self._first = text[i] == "{"
                    i, self._state = i + 1, "key" if text[i] == "{" else "array_first"
                else:  # a scalar: it ends at the next delimiter
                    m = _DELIMITERS.search(text, i)
                    if m is None:
                        if n - i > MAX_OPENING:
                            raise StreamStop("a scalar too long to read again")
                        break
                    token = text[i:m.start()]
                    if not w.plain(i, m.start()) or token != token.strip():
                        raise StreamStop("not a scalar")
                    if token == "None":
                        v: Any = None
                    else:
                        try:
                            v = json.loads(token)
                        except (ValueError, RecursionError):
                            raise StreamStop("not a scalar") from None
                        if isinstance(v, (dict, list, str)):
                            raise StreamStop("not a scalar")
                    out.append(json.dumps(v, ensure_ascii=False))
                    i, self._state = m.start(), "after"
        self._pos += i
        return "".join(out), -1


def _prefix_tail(text: str, marker: str) -> int:
    """The length of the longest tail of ``text`` that is a proper prefix of ``marker``."""
    for k in range(min(len(text), len(marker) - 1), 0, -1):
        if marker.startswith(text[len(text) - k:]):
            return k
    return 0
