"""The streaming reader of harmony (gpt-oss): ``HarmonyFormat.read_marked``'s message loop, run as text
arrives.

The whole reader reads one message at a time: a header up to ``<|message|>``, then a body up to the first
of ``<|end|>`` / ``<|call|>`` / ``<|return|>``. This stream decides each message as soon as its header is
complete: a call (a recipient and a channel) holds its body until the body ends and is then read as the
whole reader reads it (a call the rules refuse, or whose body is not a JSON object, stays content); a final
answer or a commentary preamble streams its body as content as it comes; any other message (analysis) gives
nothing. With ``stream_arguments``, a call of an allowed tool sends its first delta when its header is
read and its body as it comes (leading whitespace dropped, trailing whitespace held), the rest where it
ends; a body that then does not read keeps what was sent (it is not content). Content messages are joined
with ``"\\n"`` and the whole is stripped, as the whole reader does
(:class:`~.stream.ContentGate`). Text after the last message that never reaches a ``<|message|>`` is
content, as there. Per feed: O(the feed), plus one read of a call body when the feed ends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkgate.reasoning.vocabulary import Vocabulary

from .marked import MarkedText
from .call_delta import CallDelta, merge_call_deltas
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCall, new_call_id
from .stream import EMPTY, ContentGate, ToolStream, ToolStreamDelta

if TYPE_CHECKING:
    from .harmony import HarmonyFormat

__all__ = ["HarmonyStream"]

_MESSAGE = "<|message|>"
_START = "<|start|>"

# what a message is, once its header is read
_CALL, _CONTENT, _SKIP = "call", "content", "skip"


class _Finder:
    """The first occurrence of a marker at or after a position in one text, each marker's search resuming
    from its last answer (positions only grow while a feed is read), so a feed is searched once."""

    __slots__ = ("_src", "_last")

    def __init__(self, src: MarkedText) -> None:
        self._src = src
        self._last: dict[str, tuple[int, int]] = {}  # marker -> (searched from, found at or -1)

    def __call__(self, marker: str, start: int) -> int:
        last = self._last.get(marker)
        if last is not None and last[0] <= start and (last[1] < 0 or last[1] >= start):
            return last[1]
        i = self._src.find_marker(marker, start)
        self._last[marker] = (start, i)
        return i


def _first(src: MarkedText, markers: Sequence[str], start: int = 0) -> tuple[int, str]:
    """The first of ``markers`` at or after ``start`` (position, marker); (-1, "") when none."""
    best, which = -1, ""
    for m in markers:
        i = src.find_marker(m, start)
        if i >= 0 and (best < 0 or i < best):
            best, which = i, m
    return best, which


class HarmonyStream(ToolStream):
    """One request's streaming reader for harmony (see the module docstring)."""

    def __init__(self, fmt: HarmonyFormat, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                 stream_arguments: bool = False) -> None:
        self._fmt = fmt
        self._stream_arguments = stream_arguments
        self._live: CallDelta | None = None  # the first delta of the call whose body is streaming
        self._live_sent: list[str] = []
        self._live_ws: list[str] = []  # its body's trailing whitespace, held
        self._live_open = False
        self._live_stopped = False
        self._body_pos = 0  # its body is read up to here (in the pending text)
        self._policy = policy
        special = frozenset(vocabulary.special_tokens)
        self._pending = PendingText(special)  # the current message's text not yet settled
        self._ends = fmt._ENDS
        self._hold_markers = tuple(m for m in (_MESSAGE, *self._ends) if m not in special)
        self._gate = ContentGate()
        self._in_body = False
        self._kind = _SKIP
        self._name = ""
        self._search = 0
        self._contents = 0  # content messages so far (joined with "\n")
        self._taken = 0
        self._scanned = 0

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        self._pending.extend(pieces)
        return self._run(final=False)

    def finish(self) -> ToolStreamDelta:
        d = self._run(final=True)
        return ToolStreamDelta(d.content + self._gate.finish(), d.calls, d.fragments)

    def _holdback(self, text: str) -> int:
        for k in range(min(len(text), max((len(m) for m in self._hold_markers), default=1) - 1), 0, -1):
            if any(m.startswith(text[-k:]) for m in self._hold_markers):
                return k
        return 0

    def _content_piece(self) -> str:
        """A content message starts: the separator before it (none before the first)."""
        self._contents += 1
        return self._gate.text("\n") if self._contents > 1 else ""

    def _run(self, *, final: bool) -> ToolStreamDelta:
        p, gate = self._pending, self._gate
        if not final and (not self._in_body or self._kind == _CALL):
            # a header, or a call's body, is held until it ends: look at the new text only
            w = p.window(self._search)
            self._scanned += len(w.text)
            ends = self._ends if self._in_body else (_MESSAGE,)
            if _first(w, ends)[0] < 0:
                self._search = max(0, len(p) - max(len(m) for m in ends) + 1)
                if self._live is not None and self._in_body:
                    return ToolStreamDelta("", (), self._live_body())
                return EMPTY
        src = p.marked()  # what is held has just ended (or is small): built once per feed
        self._scanned += len(src.text)
        text, find = src.text, _Finder(src)
        out: list[str] = []
        calls: list[ToolCall] = []
        frags: list[CallDelta] = []
        base = 0  # text before base is settled (dropped at the end of the run)
        while True:
            if not self._in_body:
                msg = find(_MESSAGE, base)
                if msg < 0:
                    if final and base < len(text):  # text that never opens a body is content
                        out.append(self._content_piece())
                        out.append(gate.text(text[base:]))
                        base = len(text)
                    break
                out.append(self._header(src, base, msg))
                base = msg + len(_MESSAGE)
                self._in_body = True
                if (self._kind == _CALL and self._stream_arguments and self._policy.tool(self._name) is not None
                        and not self._policy.full(self._taken)):
                    # a call of an allowed tool: its first delta now, its body as it comes
                    self._live = CallDelta(self._taken, "", self._name, new_call_id())
                    self._live_sent, self._live_ws, self._live_open, self._live_stopped = [], [], False, False
                    self._body_pos = 0
                    frags.append(self._live)
                continue
            i, marker = -1, ""
            for m in self._ends:
                j = find(m, base)
                if j >= 0 and (i < 0 or j < i):
                    i, marker = j, m
            if i < 0 and not final:
                if self._kind != _CALL:  # an answer streams as it comes; analysis is dropped
                    cut = len(text) - self._holdback(text[base:])
                    if self._kind == _CONTENT:
                        out.append(gate.text(text[base:cut]))
                    base = cut
                break
            end = len(text) if i < 0 else i
            if self._kind == _CONTENT:
                out.append(gate.text(text[base:end]))
            elif self._kind == _CALL and self._live is not None:
                # announced: the rest of its body (a body that does not read keeps what was sent)
                live, self._live = self._live, None
                sent = "".join(self._live_sent)
                if self._fmt._is_call(src, base, end, self._name, self._policy, self._taken):
                    args = text[base:end].strip()
                    if args.startswith(sent):
                        frags.append(CallDelta(live.index, args[len(sent):]))
                        calls.append(ToolCall(self._name, args, live.id or ""))
                self._taken += 1
            elif self._kind == _CALL:
                if self._fmt._is_call(src, base, end, self._name, self._policy, self._taken):
                    calls.append(ToolCall(self._name, text[base:end].strip()))
                    frags.append(CallDelta(self._taken, calls[-1].arguments, self._name, calls[-1].id))
                    self._taken += 1
                else:
                    out.append(self._content_piece())
                    out.append(gate.text(text[base:end]))
            base = end + len(marker)
            self._in_body = False
            if i < 0:
                break
        p.drop(base)
        self._search = 0
        if self._live is not None and self._in_body and base < len(text):
            frags.extend(self._live_body())  # the body read so far in this feed, after its header
        return ToolStreamDelta("".join(out), tuple(calls), merge_call_deltas(frags))

    def _live_body(self) -> tuple[CallDelta, ...]:
        """An announced call's body text since the last feed, as its arguments will read it (``strip``):
        leading whitespace dropped, trailing whitespace held until more text follows it. A control token in
        the body stops the early sending (the body cannot read as arguments). O(the new text)."""
        assert self._live is not None
        if self._live_stopped:
            return ()
        w = self._pending.window(self._body_pos)
        text = w.text
        self._scanned += len(text)
        self._body_pos += len(text)
        if not text:
            return ()
        if not w.plain(0, len(text)):
            self._live_stopped = True
            return ()
        if not self._live_open:
            text = text.lstrip()
            if not text:
                return ()
            self._live_open = True
        core = text.rstrip()
        if not core:
            self._live_ws.append(text)
            return ()
        out = "".join(self._live_ws) + core
        self._live_ws = [text[len(core):]] if len(core) < len(text) else []
        self._live_sent.append(out)
        return (CallDelta(self._live.index, out),)

    def _header(self, src: MarkedText, pos: int, msg: int) -> str:
        """Decide the message whose header is ``src.text[pos:msg]`` (from its start to ``<|message|>``)."""
        text = src.text
        h = pos
        if src.marker_at(h, _START) and text.startswith("assistant", h + len(_START)):
            h += len(_START) + len("assistant")
        header = text[h:msg]
        channel = src.find_marker("<|channel|>", h, msg)
        r = self._fmt._RECIPIENT.search(header)
        if r is not None and channel >= 0 and src.plain(h + r.start(), h + r.end()):
            target = r.group(1)
            self._name = target[len("functions."):] if target.startswith("functions.") else target
            self._kind = _CALL
            return ""
        if "final" in header or "commentary" in header:
            self._kind = _CONTENT
            return self._content_piece()
        self._kind = _SKIP
        return ""
