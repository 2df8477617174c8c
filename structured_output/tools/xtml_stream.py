"""The streaming reader of Kimi K3's XTML channels: :class:`~.xtml.Channels`' cut, made as the pieces arrive,
in front of the calls' own stream.

:class:`ChannelCut` holds a control token that may start one of the channel literals (``<|open|>``,
``<|close|>``) and the pieces after it until they show what it starts: a wrapper written whole is dropped,
the calls' channel opening or closing goes on (and moves the cut in or out of the channel), anything else
releases the first held piece and is looked at again from the next one. Since a literal is a control token,
a word and a control token, at most three pieces (the word maybe in several) are held. The output is the
whole reader's cut text, piece by piece, for every chunking: the decisions are those of
:meth:`~.xtml.Channels.cuts`, each taken once the pieces that decide it have come, and at the end of the
output what is held goes on (no literal completes there). :class:`XtmlStream` feeds what the cut lets
through to the :class:`~.call_stream.CallFormatStream` of the calls. Per feed: O(the feed).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from .call_delta import merge_call_deltas
from .pending import Piece
from .stream import ToolStream, ToolStreamDelta
from .xtml import Channels

__all__ = ["ChannelCut", "XtmlStream"]

_MAYBE, _NO = "maybe", "no"


class ChannelCut:
    """:meth:`~.xtml.Channels.cuts` over pieces (see the module docstring)."""

    def __init__(self, channels: Channels) -> None:
        self._ch = channels
        self._inside = False
        self._held: list[Piece] = []
        self._firsts = {inside: frozenset(channels.parts[c][0][1] for c in channels.candidates(inside))
                        for inside in (False, True)}

    def feed(self, pieces: Sequence[Piece], *, final: bool = False) -> list[Piece]:
        out: list[Piece] = []
        todo = deque(pieces)
        while todo:
            piece = todo.popleft()
            if not self._held:
                text, control = piece
                if not (control and text in self._firsts[self._inside]):
                    out.append(piece)
                    continue
            self._held.append(piece)
            got = self._state()
            if got == _MAYBE:
                continue
            held, self._held = self._held, []
            if got == _NO:
                out.append(held[0])  # not a literal here: look again from the next piece
                todo.extendleft(reversed(held[1:]))
            elif got in self._ch.drop:
                pass  # a wrapper: cut out
            else:
                self._inside = got == self._ch.calls[0]
                out.extend(held)
        if final:
            out.extend(self._held)
            self._held = []
        return out

    def _state(self) -> str:
        """What the held pieces are: a candidate literal written whole (its text), the start of one
        (``maybe``), or neither (``no``)."""
        held: list[tuple[bool, str]] = []
        for text, control in self._held:  # ordinary text in one part, as the whole reader sees it
            if held and not control and not held[-1][0]:
                held[-1] = (False, held[-1][1] + text)
            else:
                held.append((control, text))
        maybe = False
        for lit in self._ch.candidates(self._inside):
            parts = self._ch.parts[lit]
            if len(held) > len(parts):
                continue
            ok = True
            for k, (control, text) in enumerate(held):
                is_marker, piece = parts[k]
                if control != is_marker:
                    ok = False
                elif k == len(held) - 1 and not control:
                    ok = piece.startswith(text)  # a word may still be coming
                else:
                    ok = piece == text
                if not ok:
                    break
            if not ok:
                continue
            if len(held) == len(parts) and held[-1][1] == parts[-1][1]:
                return lit
            maybe = True
        return _MAYBE if maybe else _NO


class XtmlStream(ToolStream):
    """One request's streaming reader of :class:`~.xtml.XtmlFormat`: :class:`ChannelCut`, then the calls'
    stream."""

    def __init__(self, channels: Channels, inner: ToolStream) -> None:
        self._cut = ChannelCut(channels)
        self._inner = inner
        self._scanned = 0

    @property
    def scanned(self) -> int:
        return self._scanned + self._inner.scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        self._scanned += sum(len(t) for t, _ in pieces)
        return self._inner.feed(self._cut.feed(pieces))

    def finish(self) -> ToolStreamDelta:
        tail = self._cut.feed((), final=True)
        a = self._inner.feed(tail) if tail else ToolStreamDelta()
        b = self._inner.finish()
        return ToolStreamDelta(a.content + b.content, a.calls + b.calls, merge_call_deltas(a.fragments + b.fragments))
