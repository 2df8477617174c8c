"""JSON call objects inside optional markers: one machinery for the families whose calls are
``{"name": ..., "arguments": {...}}`` objects, alone or in a JSON list, after an opening marker.

A :class:`MarkedJsonFormat` is declared by literals, as its model's chat template writes a block::

    open    text before the JSON (markers and all)      'functools' | '<tool_calls>' | '<function_call> ' | ''
    body    "list": a JSON array of call objects; "object": one call object per block
    close   text after the JSON                          '</tool_calls>' | '<|action_end|>' | ''
    sep     between two blocks (object bodies)           ''

``open == ""`` means no syntax at all: the whole output is one JSON list of calls (xLAM).

The constraint (structural tag, after the thinking):

- ``required`` / named: optional leading whitespace, then a block: ``open``, the body, ``close``. The body
  is a list of call objects (at least one, at most one when one call is allowed) or one call object (blocks
  repeated with ``sep`` when several calls are allowed). A call object is ``{"name": "<tool>", "<arguments
  key>": <arguments>}`` with JSON whitespace between its tokens, the arguments as :class:`~.args.JsonArgs`
  builds them (the caller's key order, checked at the end: ``key_check.py``);
- ``auto`` (when strictness asks) / ``none``: free text in which the first piece of ``open`` (a control token
  or, for a marker that is text, that text) can only start a block, or cannot occur. Without ``open``: the
  list, or text whose first character after whitespace is not ``[`` (``none``: that text only).

JSON whitespace inside the block is free up to the cap (``max_whitespace``; a format whose template
pretty-prints raises the cap to :attr:`MarkedJsonFormat.indent_whitespace`). A call object's keys are
``name`` then the arguments key, as the templates write them; a family whose model also writes them the
other way round (Granite) admits both (:attr:`MarkedJsonFormat.arguments_first`).

The reader: each occurrence of ``open`` (its trailing whitespace optional, any of ``alt_opens`` too), then
whitespace, then the JSON body (decoded whole: nested brackets and strings are the decoder's business), then
whitespace and ``close``; each call object needs a string ``name`` and its arguments under one of
``arg_keys`` (an object; with ``string_args`` also a JSON string holding an object, passed on as that
string). A block that does not read stays content and the search goes on after its opening marker. Each
call passes the request's rules (:class:`~.policy.CallPolicy`) or its object's text stays content (without
``open``: the refused objects' texts joined by ``", "``; a list none of whose calls pass is all content);
whitespace between two blocks is dropped. Arguments are the object's text as written.

The streaming reader streams content until the first piece of an opening marker, then holds the rest and
reads it whole at ``finish`` (the whole reader reads blocks left to right, so the split is exact). A format
without ``open`` holds all (:class:`~.stream.HeldStream`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from thinkgate.reasoning.vocabulary import Vocabulary

from .args import _DECODER, JsonArgs, _skip_ws
from .arg_stream import BracketDepth
from .call_delta import CallDelta, merge_call_deltas
from .live_block import LiveCall
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, ToolFormat, join_content, lead_whitespace
from .marked import MAX_ARGUMENT_DEPTH, MarkedText, json_depth_ok
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest, ToolSpec
from .results import ToolCall, ToolCallsResult, new_call_id
from .stream import EMPTY, ContentGate, HeldStream, ToolStream, ToolStreamDelta
from .syntax import Fmt, LiteralText, any_tokens, const, opt, or_, regex, seq, star, structural_tag, tag

__all__ = ["MarkedJsonFormat", "object_members"]

_ARGS = JsonArgs()  # a call's arguments: JSON, keys in the caller's order (args.py)


def object_members(text: str, i: int) -> list[tuple[str, int, int]]:
    """For a JSON object at ``text[i]`` (known to decode), each member as (key, value start, value end)."""
    skip = functools.partial(_skip_ws, text)
    out: list[tuple[str, int, int]] = []
    i = skip(i + 1)  # after "{"
    while text[i] != "}":
        key, i = _DECODER.raw_decode(text, i)
        i = skip(skip(i) + 1)  # after ":"
        _, end = _DECODER.raw_decode(text, i)
        out.append((key, i, end))
        i = skip(end)
        if text[i] == ",":
            i = skip(i + 1)
    return out


def _list_items(text: str, i: int) -> list[int]:
    """For a JSON array at ``text[i]`` (known to decode), where each item starts."""
    skip = functools.partial(_skip_ws, text)
    starts: list[int] = []
    i = skip(i + 1)
    while text[i] != "]":
        starts.append(i)
        _, i = _DECODER.raw_decode(text, i)
        i = skip(i)
        if text[i] == ",":
            i = skip(i + 1)
    return starts


def _as_tag(x: Fmt) -> Fmt:
    """A sequence as a TagFormat: its leading token or const string is the begin, its trailing one the end."""
    els = list(x["elements"]) if x.get("type") == "sequence" else [x]
    first = els.pop(0) if els and els[0]["type"] in ("token", "const_string") else None
    last = els.pop() if els and els[-1]["type"] in ("token", "const_string") else None
    begin: str | Fmt = "" if first is None else (first if first["type"] == "token" else first["value"])
    end: str | Fmt = "" if last is None else (last if last["type"] == "token" else last["value"])
    return tag(begin, seq(*els), end)


class _NoBlock(Exception):
    pass


@dataclass(eq=False)
class MarkedJsonFormat(ToolFormat):
    """JSON call objects inside optional markers (see the module docstring)."""

    name: str
    open: str
    body: Literal["list", "object"]
    close: str = ""
    sep: str = ""
    markers: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    description: str = ""
    arg_keys: tuple[str, ...] = ("arguments",)
    """The keys a call object may hold its arguments under; the constraint writes the first."""
    string_args: bool = False
    """The reader also takes arguments given as a JSON string that holds an object."""
    alt_opens: tuple[str, ...] = ()
    """Other opening texts the reader takes (never written by the constraint)."""
    indent_whitespace: int | None = None
    """The template pretty-prints the JSON: the whitespace cap is raised to at least this."""
    arguments_first: bool = False
    """The model also writes the arguments before the name (the constraint admits both orders)."""

    def __post_init__(self) -> None:
        if self.body not in ("list", "object"):
            raise ValueError(f"format {self.name!r}: body must be 'list' or 'object'")
        if not self.arg_keys:
            raise ValueError(f"format {self.name!r}: no arguments key")
        if not self.open and (self.body != "list" or self.close or self.alt_opens):
            raise ValueError(f"format {self.name!r}: without an opening marker the output is one JSON list")

    @property
    def required_markers(self) -> tuple[str, ...]:
        syntax = self.open + self.close
        return tuple(m for m in self.markers if m in syntax)

    # -- constraint ------------------------------------------------------------------------------
    def _cap(self, max_whitespace: int | None) -> int | None:
        if max_whitespace is None or self.indent_whitespace is None:
            return max_whitespace
        return max(max_whitespace, self.indent_whitespace)

    def whitespace_cap(self, max_whitespace: int | None) -> int | None:
        return self._cap(max_whitespace)

    def json_whitespace_beside(self, request: ToolRequest) -> bool:
        """Forced calls: JSON between literals that hold no open string."""
        return request.mode in ("required", "named")

    def any_order_tools(self, request: ToolRequest) -> list[str]:
        return [t.name for t in request.function_tools if _ARGS.any_order(t)]

    def _call_object(self, t: ToolSpec, lit: LiteralText, ws: int | None) -> Fmt:
        """``{"name": "<t>", "<arguments key>": <its arguments>}``, JSON whitespace free up to the cap (with
        :attr:`arguments_first`, the two members in either order)."""
        w = regex(r"[ \t\r\n]*" if ws is None else r"[ \t\r\n]{0,%d}" % ws)
        key = json.dumps(self.arg_keys[0], ensure_ascii=False)
        name = seq(const('"name"'), w, const(":"), w, const(json.dumps(t.name, ensure_ascii=False)))
        args = seq(const(key), w, const(":"), w, _ARGS.build(t, lit, ws))
        members = seq(name, w, const(","), w, args)
        if self.arguments_first:
            members = or_(members, seq(args, w, const(","), w, name))
        return seq(const("{"), w, members, w, const("}"))

    def _block(self, request: ToolRequest, lit: LiteralText, ws: int | None) -> Fmt:
        """One block: ``open``, the body (a list of calls, at most one when one call is allowed; or one
        call object), ``close``."""
        calls = or_(*[self._call_object(t, lit, ws) for t in request.function_tools])
        if self.body == "list":
            w = regex(r"[ \t\r\n]*" if ws is None else r"[ \t\r\n]{0,%d}" % ws)
            more = None if request.max_calls == 1 else star(seq(w, const(","), w, calls))
            body = seq(const("["), w, calls, more, w, const("]"))
        else:
            body = calls
        return seq(lit(self.open), body, lit(self.close))

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        ws = self._cap(max_whitespace)
        required = request.mode in ("required", "named")
        if not self.open:
            # the output is the list, or text that does not start with "[" (what the reader tells apart)
            text = opt(seq(regex(r"[ \t\r\n]*[^\[ \t\r\n]"), {"type": "any_text"}))
            if request.mode == "none" or not request.function_tools:
                return structural_tag(text)
            block = seq(regex(lead_whitespace(ws)), self._block(request, lit, ws))
            return structural_tag(block if required else or_(block, text))
        is_token, trigger = lit.split(self.open)[0]
        if self.markers and not is_token and any(self.open.startswith(m) for m in self.markers):
            raise ValueError(f"tool format {self.name!r}: the vocabulary {getattr(vocabulary, 'name', None)!r} "
                             f"has no control token {trigger!r}")
        if required:
            block = self._block(request, lit, ws)
            if self.body == "object" and request.max_calls != 1:
                block = {"type": "tags_with_separator", "tags": [_as_tag(block)], "separator": self.sep,
                         "at_least_one": True, "stop_after_first": False}
            return structural_tag(seq(regex(lead_whitespace(ws)), block))
        if not is_token:
            trigger = self.open.rstrip() or self.open
        excludes = self._free_text_excludes(vocabulary, keep=[trigger]) if is_token else []
        if request.mode == "none" or not request.function_tools:
            if is_token:
                return structural_tag(any_tokens([trigger, *excludes]))
            return structural_tag({"type": "any_text", "excludes": [trigger]})
        tags = [_as_tag(self._block(request, lit, ws))]
        one = not request.parallel
        if is_token:
            return structural_tag({"type": "token_triggered_tags", "trigger_tokens": [trigger], "tags": tags,
                                   "exclude_tokens": excludes, "at_least_one": False, "stop_after_first": one})
        return structural_tag({"type": "triggered_tags", "triggers": [trigger], "tags": tags,
                               "at_least_one": False, "stop_after_first": one})

    # -- reader ----------------------------------------------------------------------------------
    @property
    def _reader_lit(self) -> LiteralText:
        return LiteralText(self.markers)

    @property
    def _opens(self) -> tuple[str, ...]:
        """The opening texts the reader looks for (trailing whitespace optional)."""
        return tuple(dict.fromkeys(o.rstrip() or o for o in (self.open, *self.alt_opens) if o))

    def _call_of(self, src: MarkedText, i: int) -> ToolCall:
        """The call object at ``text[i]`` (known to decode) -> its call, or :class:`_NoBlock`."""
        text = src.text
        members = object_members(text, i)
        got: dict[str, tuple[int, int]] = {k: (a, b) for k, a, b in members}  # the last of a key twice
        if "name" not in got:
            raise _NoBlock("no name")
        name = json.loads(text[slice(*got["name"])])
        if not isinstance(name, str):
            raise _NoBlock("the name is not a string")
        key = next((k for k in self.arg_keys if k in got), None)
        if key is None:
            raise _NoBlock("no arguments")
        a, b = got[key]
        if text[a] == "{":
            return ToolCall(name, text[a:b])
        if self.string_args and text[a] == '"':
            s = json.loads(text[a:b])
            try:
                ok = isinstance(json.loads(s), dict) and json_depth_ok(s)
            except (ValueError, RecursionError):
                ok = False
            if ok:
                return ToolCall(name, s)
        raise _NoBlock("the arguments are not an object")

    def _read_block(self, src: MarkedText, q: int) -> tuple[list[tuple[ToolCall, int, int]], int]:
        """The body at ``q`` (after the opening and its whitespace) -> [(call, start, end)], end of block."""
        text = src.text
        want = "[" if self.body == "list" else "{"
        if not text.startswith(want, q):
            raise _NoBlock(f"expected {want!r}")
        if not json_depth_ok(text, q, limit=MAX_ARGUMENT_DEPTH + (2 if self.body == "list" else 1)):
            raise _NoBlock("nested too deep")
        try:
            value, end = _DECODER.raw_decode(text, q)
        except (json.JSONDecodeError, RecursionError):
            raise _NoBlock("not JSON") from None
        if not src.plain(q, end):
            raise _NoBlock("a control token inside the JSON")
        items = value if self.body == "list" else [value]
        if not items or not all(isinstance(x, dict) for x in items):
            raise _NoBlock("not call objects")
        starts = _list_items(text, q) if self.body == "list" else [q]
        calls = []
        for k, s in enumerate(starts):
            e = _DECODER.raw_decode(text, s)[1]
            calls.append((self._call_of(src, s), s, e))
        if self.close:
            c = src.match_literal(_skip_ws(text, end), self.close.strip(), self._reader_lit)
            if c < 0:
                raise _NoBlock("no closing marker")
            end = c
        return calls, end

    def _next_open(self, src: MarkedText, start: int) -> tuple[int, int]:
        """(where the next opening text starts, where it ends), or (-1, -1)."""
        lit = self._reader_lit
        best = (-1, -1)
        for o in self._opens:
            i = src.find_literal(o, start, lit)
            if i >= 0 and (best[0] < 0 or i < best[0]):
                best = (i, src.match_literal(i, o, lit))
        return best

    def scan(self, src: MarkedText, request: ToolRequest, policy: CallPolicy,
             first_index: int = 0) -> tuple[list[str], list[ToolCall]]:
        """The content pieces (joined and stripped: the content) and the calls of ``src``, numbering the
        calls from ``first_index`` for the request's rules."""
        text = src.text
        calls: list[ToolCall] = []
        if not self.open:
            q = _skip_ws(text, 0)
            try:
                block, end = self._read_block(src, q)
            except _NoBlock:
                return [text], []
            if _skip_ws(text, end) != len(text):
                return [text], []
            kept: list[ToolCall] = []
            refused: list[str] = []
            for call, cs, ce in block:
                if policy.accepts(call.name, call.arguments, first_index + len(kept)):
                    kept.append(call)
                else:
                    refused.append(text[cs:ce])
            if not kept:
                return [text], []
            return [", ".join(refused)], kept
        parts: list[str] = []
        pos = scan = 0
        while True:
            idx, after = self._next_open(src, scan)
            if idx < 0:
                break
            try:
                block, end = self._read_block(src, _skip_ws(text, after))
            except _NoBlock:
                scan = after
                continue
            kept: list[ToolCall] = []
            refused: list[str] = []
            for call, cs, ce in block:
                if policy.accepts(call.name, call.arguments, first_index + len(calls) + len(kept)):
                    kept.append(call)
                else:
                    refused.append(text[cs:ce])
            if not kept:
                scan = end
                continue
            between = text[pos:idx]
            if not (calls and (between == self.sep or not between.strip())):
                parts.append(between)
            parts.extend(refused)
            calls.extend(kept)
            pos = scan = end
        parts.append(text[pos:])
        return parts, calls

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        parts, calls = self.scan(src, request, policy or CallPolicy(request))
        return ToolCallsResult(join_content(parts), tuple(calls))

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        if not self.open and not stream_arguments:
            return HeldStream(self, request, policy, vocabulary)
        return MarkedJsonStream(self, request, policy, vocabulary, stream_arguments=stream_arguments)


class MarkedJsonStream(ToolStream):
    """Content streams until the first piece of an opening marker; from there the output is held and read
    whole at ``finish`` (see the module docstring). O(the feed) per feed.

    With ``stream_arguments`` (the output was written under the request's constraint), a scanner follows
    the held blocks as they come (:class:`_CallScanner`): a call's first delta goes out once its name is
    read and allowed, then its arguments' text as written; whatever the scanner cannot follow stops the
    early sending, and ``finish`` completes the calls sent from the whole reading (or they keep the text
    sent, as the stream contract says)."""

    def __init__(self, fmt: MarkedJsonFormat, request: ToolRequest, policy: CallPolicy,
                 vocabulary: Vocabulary, *, stream_arguments: bool = False) -> None:
        self._fmt, self._request, self._policy = fmt, request, policy
        special = frozenset(vocabulary.special_tokens)
        lit = LiteralText([m for m in fmt.markers if m in special])
        # the first piece of each opening text: a control token, or text
        firsts = [lit.split(o)[0] for o in fmt._opens]
        self._tokens = frozenset(p for is_m, p in firsts if is_m)
        self._texts = tuple(sorted({p for is_m, p in firsts if not is_m}, key=len, reverse=True))
        self._tail = max((len(t) for t in self._texts), default=1) - 1
        self._gate = ContentGate()
        self._held = PendingText(special)
        self._holding = not fmt.open  # without an opening marker the output is the list
        self._buf = ""  # plain text not yet let out: it may end with the start of an opening text
        self._scanned = 0
        self._scanner = _CallScanner(fmt, policy, self._tokens, self._texts) if stream_arguments else None

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        out: list[str] = []
        frags: list[CallDelta] = []
        for text, control in pieces:
            self._scanned += len(text)
            if self._holding:
                self._hold(text, control, frags)
            elif control:
                out.append(self._gate.text(self._buf))
                self._buf = ""
                if text in self._tokens:
                    self._holding = True
                    self._hold(text, True, frags)
                else:
                    out.append(self._gate.text(text))
            else:
                self._plain(text, out, frags)
        content = "".join(out)
        if not content and not frags:
            return EMPTY
        return ToolStreamDelta(content, (), merge_call_deltas(frags))

    def _hold(self, text: str, control: bool, frags: list[CallDelta]) -> None:
        self._held.append(text, control)
        if self._scanner is not None:
            self._scanner.feed(text, control, frags)

    def _plain(self, text: str, out: list[str], frags: list[CallDelta]) -> None:
        buf = self._buf + text
        hit = min((i for i in (buf.find(t) for t in self._texts) if i >= 0), default=-1)
        if hit >= 0:
            out.append(self._gate.text(buf[:hit]))
            self._buf = ""
            self._holding = True
            self._hold(buf[hit:], False, frags)
            return
        # keep the longest tail that may start an opening text
        keep = 0
        for k in range(min(self._tail, len(buf)), 0, -1):
            if any(t.startswith(buf[-k:]) for t in self._texts):
                keep = k
                break
        out.append(self._gate.text(buf[:len(buf) - keep]))
        self._buf = buf[len(buf) - keep:]

    def finish(self) -> ToolStreamDelta:
        out = [self._gate.text(self._buf)]
        self._buf = ""
        calls: list[ToolCall] = []
        frags: list[CallDelta] = []
        if self._holding:
            src = self._held.marked()
            self._scanned += len(src.text)
            self._held.clear()
            parts, read = self._fmt.scan(src, self._request, self._policy)
            sent = self._scanner.calls if self._scanner is not None else []
            if len(read) < len(sent):
                calls = [ToolCall(c.name, c.arguments_sent(), c.id) for c in sent]  # they keep the text sent
                frags = []
                parts = []
            else:
                for i, c in enumerate(read):
                    if i < len(sent):
                        rest, decided = sent[i].decided(c)
                        frags.append(rest)
                        calls.append(decided)
                    else:
                        frags.append(CallDelta(i, c.arguments, c.name, c.id))
                        calls.append(c)
            out.append(self._gate.text("".join(parts)))
        out.append(self._gate.finish())
        return ToolStreamDelta("".join(out), tuple(calls), merge_call_deltas(frags))


_STRING_STOP = re.compile(r'[\\"]')

# scanner states
_SEEK, _OPENER, _ITEM, _KEY_OR_CLOSE, _KEY, _COLON, _VALUE, _NAME, _IN_ARGS, _AFTER_VALUE, _AFTER_ITEM = range(11)


class _CallScanner:
    """Follows the held blocks of a constrained output as they come (see :class:`MarkedJsonStream`): after an
    opening marker's first piece it goes on to the body (``[`` or ``{``), then reads call objects: a ``name``
    string (held until its closing quote, then decoded), arguments (an object, sent as written once the call
    is out; held before). Between an opening marker and the body only whitespace (and the marker's other
    control tokens). O(the text fed). Anything else stops it for good (``finish`` decides)."""

    def __init__(self, fmt: MarkedJsonFormat, policy: CallPolicy, tokens: frozenset[str],
                 texts: tuple[str, ...]) -> None:
        self._fmt, self._policy = fmt, policy
        self._tokens, self._texts = tokens, texts
        self._list = fmt.body == "list"
        self._state = _OPENER if not fmt.open else _SEEK
        self._broken = False
        self._escape = False
        self._str: list[str] = []
        self._key = ""
        self._depth = BracketDepth()
        self._seek = ""  # plain text seen while looking for the next opening marker (a text one may be split)
        self.calls: list[LiveCall] = []
        self._call: LiveCall | None = None
        self._held_args: list[str] = []
        self._args_done = False

    def feed(self, text: str, control: bool, out: list[CallDelta]) -> None:
        if self._broken:
            return
        if control:
            if self._state == _SEEK and text in self._tokens:
                self._state, self._seek = _OPENER, ""
            elif self._state not in (_SEEK, _OPENER):
                self._broken = True  # a control token inside the JSON: the whole reader decides
            return
        self._scan(text, out)

    def _scan(self, t: str, out: list[CallDelta]) -> None:
        i, n = 0, len(t)
        while i < n and not self._broken:
            st = self._state
            if st == _SEEK:
                s = self._seek + t[i:]
                hit = min((k + len(x) for x in self._texts for k in [s.find(x)] if k >= 0), default=-1)
                if hit < 0:
                    self._seek = s[-max((len(x) for x in self._texts), default=1):]
                    return
                i += hit - len(self._seek)
                self._seek, self._state = "", _OPENER
                continue
            if st == _OPENER:  # whitespace, then the body
                i = _skip_ws(t, i)
                if i == n:
                    return
                if t[i] != ("[" if self._list else "{"):
                    self._broken = True
                    return
                i = i + 1 if self._list else i
                self._state = _ITEM
                continue
            if st in (_KEY, _NAME):
                e = self._string(t, i)
                self._str.append(t[i:] if e < 0 else t[i:e - 1])
                if sum(map(len, self._str)) > 4096:
                    self._broken = True
                    return
                if e < 0:
                    return
                i = e
                raw, self._str = "".join(self._str), []
                try:
                    value = json.loads('"' + raw + '"')
                except ValueError:
                    self._broken = True
                    return
                if st == _KEY:
                    self._key, self._state = value, _COLON
                else:
                    self._named(value, out)
                    self._state = _AFTER_VALUE
                continue
            if st == _IN_ARGS:
                close = self._depth.first_close(t, 0, i)
                end = n if close < 0 else close
                self._arguments(t[i:end], out)
                i = end
                if close >= 0:
                    self._args_done, self._state = True, _AFTER_VALUE
                continue
            i = _skip_ws(t, i)
            if i == n:
                return
            c = t[i]
            if st == _ITEM and c == "{":
                self._call, self._held_args, self._args_done = None, [], False
                self._state = _KEY_OR_CLOSE
            elif st == _KEY_OR_CLOSE and c == '"':
                self._state = _KEY
            elif st == _COLON and c == ":":
                self._state = _VALUE
            elif st == _VALUE and c == '"' and self._key == "name" and self._call is None:
                self._state = _NAME
            elif st == _VALUE and c == "{" and self._key in self._fmt.arg_keys and not self._args_done:
                self._depth = BracketDepth()
                self._state = _IN_ARGS
                continue  # the bracket is the arguments' first character
            elif st == _AFTER_VALUE and c == ",":
                self._state = _KEY_OR_CLOSE
            elif st == _AFTER_VALUE and c == "}" and self._call is not None and self._args_done:
                self._state = _AFTER_ITEM if self._list else _SEEK
                if not self._list:
                    self._after_block()
            elif st == _AFTER_ITEM and c == ",":
                self._state = _ITEM
            elif st == _AFTER_ITEM and c == "]":
                self._state = _SEEK
                self._after_block()
            else:
                self._broken = True
                return
            i += 1

    def _after_block(self) -> None:
        if not self._fmt.open:
            self._broken = True  # one list: nothing more to follow
        self._seek = ""

    def _string(self, t: str, i: int) -> int:
        n = len(t)
        while i < n:
            if self._escape:
                self._escape = False
                i += 1
                continue
            m = _STRING_STOP.search(t, i)
            if m is None:
                return -1
            if m.group() == "\\":
                self._escape = True
                i = m.end()
                continue
            return m.end()
        return -1

    def _named(self, name: str, out: list[CallDelta]) -> None:
        index = len(self.calls)
        if self._policy.tool(name) is None or self._policy.full(index):
            self._broken = True
            return
        call = LiveCall(index, new_call_id(), name, list(self._held_args))
        self.calls.append(call)
        self._call = call
        out.append(CallDelta(index, "".join(self._held_args), name, call.id))

    def _arguments(self, text: str, out: list[CallDelta]) -> None:
        if not text:
            return
        if self._call is None:
            self._held_args.append(text)
        else:
            self._call.sent.append(text)
            out.append(CallDelta(self._call.index, text))
