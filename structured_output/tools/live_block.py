"""A held call block of a :class:`~.call_format.CallFormat`, read as it arrives (``stream_arguments``).

While :class:`~.call_stream.CallFormatStream` holds a block until its end, this reader walks the same
definition over the text so far: the section's opening, each call's opening (``CallFormat.read_header``:
its name, written whole and followed by the rest of the opening), its arguments (the syntax's
:class:`~.arg_stream.ArgStreamer`, or nothing until the block ends where the syntax has none for the tool), the call's
end and the separator before the next call. It returns :class:`~.call_delta.CallDelta` s: a call's first
delta once its name is read and the request's rules allow a call of that tool at that index, then
argument text. When the block's end comes, the stream reads the block whole and sends what is left of each
announced call's arguments (the whole read's arguments past the text already sent).

Per ``advance``: O(the text added since the last one), plus an incomplete opening read again (at most
:data:`~.arg_stream.MAX_OPENING` characters). Text that cannot be the block (or an opening longer than
that) stops the early reading: the calls announced so far keep their text, later ones are decided at the
block's end.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .arg_stream import MAX_OPENING, ArgStreamer, StreamStop
from .args import NoMatch
from .call_delta import CallDelta
from .marked import MarkedText
from .pending import PendingText
from .policy import CallPolicy
from .request import ToolSpec
from .results import ToolCall

if TYPE_CHECKING:
    from .call_format import CallFormat

__all__ = ["LiveBlock", "LiveCall"]

_SECTION, _HEADER, _ARGS, _AFTER, _WAIT = "section", "header", "args", "after", "wait"


@dataclass
class LiveCall:
    """A call whose first delta went out: its index, id, name and the argument text sent so far."""

    index: int
    id: str
    name: str
    sent: list[str] = field(default_factory=list)

    def arguments_sent(self) -> str:
        return "".join(self.sent)

    def decided(self, read: ToolCall) -> tuple[CallDelta, ToolCall]:
        """The call read whole as ``read``: the delta of the rest of its arguments, and the call. Where the
        read disagrees with what went out (another name, arguments not starting with the text sent), the call
        keeps the text sent and nothing more goes out."""
        sent = self.arguments_sent()
        same = read.name == self.name and read.arguments.startswith(sent)
        return (CallDelta(self.index, read.arguments[len(sent):] if same else ""),
                ToolCall(self.name, read.arguments if same else sent, self.id))


class LiveBlock:
    """One held block read as it arrives (see the module docstring)."""

    def __init__(self, fmt: CallFormat, start: int, skip: int, tools: dict[str, ToolSpec], policy: CallPolicy,
                 first_index: int) -> None:
        self._fmt, self._tools, self._policy = fmt, tools, policy
        self._lit = fmt._reader_lit
        self._pos, self._skip = start, skip
        self._first = first_index
        self._state = _SECTION if fmt.section else _HEADER
        self._args: ArgStreamer | None = None
        self._stopped = False
        self.calls: list[LiveCall] = []
        self.scanned = 0

    def advance(self, pending: PendingText) -> list[CallDelta]:
        """What the text added since the last call lets go out (see the module docstring)."""
        out: list[CallDelta] = []
        try:
            while not self._stopped and self._step(pending, out):
                pass
        except StreamStop:
            self._stopped = True
        return out

    def _window_text(self, pending: PendingText) -> MarkedText:
        w = pending.window(self._pos)
        self.scanned += len(w.text)
        return w

    def _step(self, pending: PendingText, out: list[CallDelta]) -> bool:
        """One step of the walk; False when it must wait for more text."""
        fmt, lit = self._fmt, self._lit
        if self._state == _SECTION:
            assert fmt.section is not None
            w = self._window_text(pending)
            q = fmt.match_section_opening(w, 0, lit, self._skip)
            if q < 0 or (q == len(w.text) and fmt.section[0][-1:].isspace()):
                return self._wait(w.text)  # (its whitespace, any run, may still come)
            self._pos += q
            self._skip = 0
            self._state = _HEADER
            return True
        if self._state == _HEADER:
            w = self._window_text(pending)
            try:
                name, q = fmt.read_header(w, 0, self._tools, lit, self._skip)
            except NoMatch:
                return self._wait(w.text)
            index = self._first + len(self.calls)
            if self._policy.tool(name) is None or self._policy.full(index):
                raise StreamStop("a call the request's rules refuse")
            cid = fmt.with_id(ToolCall(name, ""), w.text[:q], index).id
            self.calls.append(LiveCall(index, cid, name))
            out.append(CallDelta(index, "", name, cid))
            self._skip = 0
            self._args = fmt.args.streamer(self._tools[name], self._pos + q, fmt.call_end, lit)
            self._pos += q
            self._state = _WAIT if self._args is None else _ARGS
            return self._args is not None
        if self._state == _ARGS:
            assert self._args is not None
            before = self._args.scanned
            try:
                frag, end = self._args.advance(pending)
            finally:
                self.scanned += self._args.scanned - before
            if frag:
                call = self.calls[-1]
                call.sent.append(frag)
                out.append(CallDelta(call.index, frag))
            if end < 0:
                return False
            self._pos = end
            self._state = _AFTER if fmt.section else _WAIT
            return fmt.section is not None
        if self._state == _AFTER:  # a section: after a call, its end then the section's end or a separator
            assert fmt.section is not None
            w = self._window_text(pending)
            q = w.match_literal(0, fmt.call_end, lit)
            if q < 0:
                return self._wait(w.text)
            if fmt.match_section_closing(w, q, lit) >= 0:
                self._state = _WAIT
                return False
            r = w.match_literal(q, fmt.call_sep, lit)
            if r < 0 or r == len(w.text):
                return self._wait(w.text)
            self._pos += r
            self._state = _HEADER
            return True
        return False  # _WAIT: the rest is decided where the block ends

    def shift(self, n: int) -> None:
        """The first ``n`` characters of the pending text were dropped (all before this block)."""
        self._pos -= n
        if self._args is not None:
            self._args.shift(n)

    @staticmethod
    def _wait(text: str) -> bool:
        if len(text) > MAX_OPENING:
            raise StreamStop("an opening too long to read again at each feed")
        return False
