"""The readers of Inkling (``inkling.py``): one walk over the blocks, fed a whole output or its stream.

``InklingFormat.read_marked`` feeds this walk the whole output at once; a stream feeds it delta by delta, so
the two read the same content and calls by construction (for every chunking). The walk's states:

- ``TEXT`` (the start: the thinking's end dropped the opener of a text block, or the output starts with a
  call's kind token): text is content, through :class:`~.stream.ContentGate` (stripped; whitespace between
  two calls dropped, as between any two calls of any format);
- ``HEADER`` (after ``<|message_model|>``): the header is held; a block kind drops it, the block's end
  (``<|end_message|>`` / ``<|content_model_end_sampling|>``) or the output's end makes it content;
- ``THINK`` (a thinking block after the thinking ended): its text is dropped;
- ``CALL`` (after ``<|content_invoke_tool_json|>``): the body is held until the next framing token or the
  output's end, then read (``InklingFormat.read_payload``); a call the request's rules accept is a call,
  anything else stays content.

Framing tokens are never content. A marker that is not a control token of the vocabulary (or any marker, in
trusted text) matches as text: the stream then holds a tail that may start one.

With ``stream_arguments`` (the output was written under the request's constraint), a held body is also
read as it arrives: once its opening ``{"name":"NAME","args":`` is read and the rules allow a call of NAME
there, the call's first delta goes out, then its argument text as written (:class:`~.arg_stream.JsonArgStreamer`);
where the body ends, the rest of the whole read's arguments (:class:`~.live_block.LiveCall`). A body whose
first delta went out and that then does not read keeps the text sent (it is not content).

Per feed: O(the feed), plus one read of a body when the feed ends it, plus an incomplete opening read again
(at most :data:`~.arg_stream.MAX_OPENING` characters).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .arg_stream import MAX_OPENING, JsonArgStreamer, StreamStop
from .call_delta import CallDelta, merge_call_deltas
from .inkling import CALL, ENDS, MESSAGE, THINKING
from .live_block import LiveCall
from .marked import MarkedText
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCall, new_call_id
from .stream import ContentGate, ToolStream, ToolStreamDelta
from .tool_table import ToolTable

if TYPE_CHECKING:
    from .inkling import InklingFormat

__all__ = ["InklingStream"]

_TEXT, _HEADER, _THINK, _CALL = "text", "header", "think", "call"

_OPENING = re.compile(r'[ \t\r\n]*\{[ \t\r\n]*"name"[ \t\r\n]*:[ \t\r\n]*"([A-Za-z0-9_\-.:]{1,128})"[ \t\r\n]*,'
                      r'[ \t\r\n]*"(?:args|arguments|parameters)"[ \t\r\n]*:')
"""A body's opening as the constraint writes it (any whitespace): the name, then where the arguments start."""


class InklingStream(ToolStream):
    """One output's walk over Inkling's blocks (see the module docstring). ``special``: the strings that are
    markers only where they are control tokens (the vocabulary's special tokens; empty for trusted text)."""

    def __init__(self, fmt: InklingFormat, request: ToolRequest, policy: CallPolicy, special: frozenset[str], *,
                 stream_arguments: bool = False) -> None:
        self._fmt, self._policy = fmt, policy
        self._tools = ToolTable(request)
        self._stream_arguments = stream_arguments
        self._pending = PendingText(special)
        self._find = re.compile("|".join(re.escape(m) for m in sorted(fmt.markers, key=len, reverse=True)))
        self._hold = tuple(m for m in fmt.markers if m not in special)
        self._gate = ContentGate()
        self._state = _TEXT
        self._start = 0   # HEADER / CALL: where the held text starts (in the pending text)
        self._search = 0  # the pending text before this is walked
        self._taken = 0
        self._scanned = 0
        self._live: LiveCall | None = None       # the held call whose first delta went out
        self._args: JsonArgStreamer | None = None  # its arguments, while they are being written
        self._live_stopped = True

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        self._pending.extend(pieces)
        return self._run(final=False)

    def finish(self) -> ToolStreamDelta:
        d = self._run(final=True)
        return ToolStreamDelta(d.content + self._gate.finish(), d.calls, d.fragments)

    # -- the walk --------------------------------------------------------------------------------
    def _run(self, *, final: bool) -> ToolStreamDelta:
        p = self._pending
        out: list[str] = []
        calls: list[ToolCall] = []
        frags: list[CallDelta] = []
        base = self._search
        w = p.window(base)
        text = w.text
        self._scanned += len(text)
        cur = 0
        for m in self._find.finditer(text):
            i, marker = m.start(), m.group()
            if not w.marker_at(i, marker):
                continue  # the marker's text written with ordinary tokens: text
            self._text(text, cur, i, out)
            self._marker(marker, base + i, base + i + len(marker), out, calls, frags)
            cur = i + len(marker)
        end = len(text) if final else len(text) - self._holdback(w, cur)
        self._text(text, cur, end, out)
        self._search = base + end
        if final:
            if self._state == _HEADER:
                out.append(self._gate.text(p.text(self._start)))
            elif self._state == _CALL:
                self._end_call(len(p), out, calls, frags)
            self._state = _TEXT
        elif self._state == _CALL and not self._live_stopped:
            self._advance_live(out, frags)
        self._settle(self._start if self._state in (_HEADER, _CALL) else self._search)
        return ToolStreamDelta("".join(out), tuple(calls), merge_call_deltas(frags))

    def _text(self, text: str, a: int, b: int, out: list[str]) -> None:
        """Text of the current state (visible text goes out; a header or a body is held; thinking dropped)."""
        if a < b and self._state == _TEXT:
            out.append(self._gate.text(text[a:b]))

    def _marker(self, marker: str, at: int, after: int, out: list[str], calls: list[ToolCall],
                frags: list[CallDelta]) -> None:
        """A framing token at ``at`` (ending at ``after``) in the pending text: the state it leads to."""
        if self._state == _HEADER:
            if marker in ENDS:  # a header that no block kind follows is text
                out.append(self._gate.text(self._pending.text(self._start, at)))
                self._state = _TEXT
                return
        elif self._state == _CALL:
            self._end_call(at, out, calls, frags)
            self._state = _TEXT
            if marker in ENDS:
                return
        if marker == MESSAGE:
            self._state, self._start = _HEADER, after
        elif marker == CALL:
            self._state, self._start = _CALL, after
            self._live, self._args, self._live_stopped = None, None, not self._stream_arguments
        elif marker == THINKING:
            self._state = _THINK
        else:  # a visible block's kind, or a block's end
            self._state = _TEXT

    def _end_call(self, at: int, out: list[str], calls: list[ToolCall], frags: list[CallDelta]) -> None:
        """The held body ends at ``at``: read it."""
        body: MarkedText = self._pending.window(self._start, at)
        self._scanned += len(body.text)
        got = self._fmt.read_payload(body, 0, len(body.text))
        live, self._live, self._args = self._live, None, None
        if live is not None:  # announced: the rest of its arguments, or (a body that does not read) nothing
            if got is not None:
                rest, call = live.decided(ToolCall(*got))
                frags.append(rest)
                calls.append(call)
            self._taken += 1
            self._gate.after_call()
            return
        if got is not None and self._tools.knows(got[0]) and self._policy.accepts(got[0], got[1], self._taken):
            call = ToolCall(*got)
            out.append(self._gate.call())
            self._gate.after_call()
            calls.append(call)
            frags.append(CallDelta(self._taken, call.arguments, call.name, call.id))
            self._taken += 1
        else:
            out.append(self._gate.text(body.text))

    def _advance_live(self, out: list[str], frags: list[CallDelta]) -> None:
        """A held body read as it arrives (``stream_arguments``): its first delta, then argument text."""
        p = self._pending
        if self._live is None:
            w = p.window(self._start)
            self._scanned += len(w.text)
            m = _OPENING.match(w.text)
            if m is None or not w.plain(0, m.end()):
                self._live_stopped = m is not None or len(w.text) > MAX_OPENING
                return
            name, index = m.group(1), self._taken
            if not self._tools.knows(name) or self._policy.tool(name) is None or self._policy.full(index):
                self._live_stopped = True  # decided where the body ends
                return
            self._live = LiveCall(index, new_call_id(), name)
            frags.append(CallDelta(index, "", name, self._live.id))
            out.append(self._gate.call())
            self._args = JsonArgStreamer(self._start + m.end())
        args = self._args
        if args is None:
            return
        before = args.scanned
        try:
            frag, end = args.advance(p)
        except StreamStop:
            self._args, self._live_stopped = None, True
            return
        finally:
            self._scanned += args.scanned - before
        if frag:
            self._live.sent.append(frag)
            frags.append(CallDelta(self._live.index, frag))
        if end >= 0:
            self._args = None  # the arguments are written: the rest is decided where the body ends

    def _holdback(self, w: MarkedText, cur: int) -> int:
        """Length of the longest plain tail of ``w.text[cur:]`` that may start a marker matched as text."""
        text = w.text
        longest = max((len(m) for m in self._hold), default=1) - 1
        for k in range(min(len(text) - cur, longest), 0, -1):
            if w.plain(len(text) - k, len(text)) and any(m.startswith(text[len(text) - k:]) for m in self._hold):
                return k
        return 0

    def _settle(self, keep: int) -> None:
        """Drop the pending text before ``keep``; the positions kept move with it."""
        if keep <= 0:
            return
        self._pending.drop(keep)
        self._search -= keep
        self._start = max(self._start - keep, 0)
        if self._args is not None:
            self._args.shift(keep)
