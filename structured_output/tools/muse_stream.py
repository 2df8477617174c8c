"""The streaming reader of Muse (``muse.py``): the whole reader's message loop, run as text arrives.

The whole reader splits the output into messages (``reasoning/muse_channels.py``: a body ends at a marker;
the recipient is the ``to=NAME`` just before a ``<|message|>``) and reads each by its kind. This stream runs
the same rules incrementally, with the same helper for a body's last word (``advance_word``: the text that
may still become the next message's header is held, at most ``MAX_RECIPIENT_BYTES``, and a tail that may
start a marker spelled as text):

- an answer or content message streams its body as content as it comes (through
  :class:`~.stream.ContentGate`, so the concatenation is the whole reader's stripped content);
- a tool message holds its body until the body ends (its ``<|eom|>``, the next header, or the end of the
  output: ``<|eot|>`` is a stop token the front end never passes on), then reads it with the whole reader's
  :func:`~.muse.read_tool_body`: its calls go out whole, in the delta that ends the message (a call's
  arguments are not streamed before it ends);
- reasoning and dropped messages give nothing;
- until the first ``<|message|>`` everything is held: an output that never writes one is read whole at the
  end, as the whole reader reads an unframed output.

Per feed: O(the feed) (a marker search of the new text and the held word), plus one read of a tool body when
the feed ends it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkgate.reasoning.muse_channels import (ANSWER, CONTENT, MARKERS, MESSAGE, TOOL, advance_word,
                                               recipient_of)
from thinkgate.reasoning.vocabulary import Vocabulary

from .call_delta import CallDelta, merge_call_deltas
from .marked import MarkedText
from .muse import _Tools, read_tool_body
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCall
from .stream import ContentGate, ToolStream, ToolStreamDelta

if TYPE_CHECKING:
    from .muse import MuseFormat

__all__ = ["MuseStream"]


class MuseStream(ToolStream):
    """One request's streaming reader for Muse (see the module docstring)."""

    def __init__(self, fmt: MuseFormat, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary) -> None:
        self._recipients = fmt.recipients
        self._policy = policy
        self._tools = _Tools(request)
        special = frozenset(vocabulary.special_tokens)
        self._pending = PendingText(special)  # the text since the settled part (offsets below are into it)
        self._unframed: PendingText | None = PendingText(special)  # everything, until the first <|message|>
        self._hold_markers = tuple(m for m in MARKERS if m not in special)  # markers read as text
        self._gate = ContentGate()
        self._kind: str | None = None  # the kind of the body the output is in; None in a header
        self._word: str | None = ""  # the held end of the current word (advance_word)
        self._word_at = 0
        self._pos = 0  # the pending text before it is read
        self._body = 0  # where the current tool body starts
        self._taken = 0
        self._scanned = 0
        self._out: list[str] = []
        self._calls: list[ToolCall] = []
        self._frags: list[CallDelta] = []

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        self._pending.extend(pieces)
        if self._unframed is not None:
            self._unframed.extend(pieces)
        self._run(final=False)
        return self._delta()

    def finish(self) -> ToolStreamDelta:
        self._run(final=True)
        self._flush_word()
        self._close_body(len(self._pending))
        self._kind = None
        if self._unframed is not None:  # no message ever: read as one tool body
            src = self._unframed.marked()
            self._scanned += len(src.text)
            self._read_body(src, 0, len(src.text))
            self._unframed = None
        self._out.append(self._gate.finish())
        return self._delta()

    def _delta(self) -> ToolStreamDelta:
        d = ToolStreamDelta("".join(self._out), tuple(self._calls), merge_call_deltas(self._frags))
        self._out, self._calls, self._frags = [], [], []
        return d

    def _holdback(self, text: str) -> int:
        """The longest end of ``text`` that may start a marker read as text."""
        for k in range(min(len(text), max((len(m) for m in self._hold_markers), default=1) - 1), 0, -1):
            if any(m.startswith(text[-k:]) for m in self._hold_markers):
                return k
        return 0

    def _run(self, *, final: bool) -> None:
        p = self._pending
        base = self._pos
        src = p.window(base)  # the unread text, built once per feed
        text = src.text
        self._scanned += len(text)
        found: dict[str, int] = {}
        q = 0
        while True:
            best, which = -1, ""
            for m in MARKERS:
                i = found.get(m, -2)
                if i == -2 or 0 <= i < q:
                    i = found[m] = src.find_marker(m, q)
                if i >= 0 and (best < 0 or i < best):
                    best, which = i, m
            if best < 0:
                upto = len(text) if final else len(text) - self._holdback(text[q:])
                self._text(text[q:upto], base + q)
                q = upto
                break
            self._text(text[q:best], base + q)
            self._marker(which, base + best)
            q = best + len(which)
        self._pos = base + q
        # forget what no later read needs: a tool body's text and the held word stay
        keep = self._pos
        if self._word:
            keep = min(keep, self._word_at)
        if self._kind == TOOL:
            keep = min(keep, self._body)
        if keep > 0:
            p.drop(keep)
            self._pos -= keep
            self._word_at -= keep
            self._body -= keep

    def _emit(self, s: str) -> None:
        if s and self._kind in (CONTENT, ANSWER):
            self._out.append(self._gate.text(s))

    def _text(self, s: str, at: int) -> None:
        if not s:
            return
        start = self._word_at if self._word else at
        released, self._word = advance_word(self._word, s)
        self._emit(released)
        self._word_at = start + len(released)

    def _flush_word(self) -> None:
        if self._word:
            self._emit(self._word)
        self._word = ""

    def _marker(self, marker: str, at: int) -> None:
        if marker == MESSAGE:
            recipient = recipient_of(self._word)
            if recipient is None:
                self._flush_word()
                self._close_body(at)
            else:
                self._close_body(self._word_at)  # the header's to=NAME is not the body's
            self._word = ""
            self._kind = self._recipients.kind(recipient)
            self._body = at + len(marker)
            self._unframed = None
        else:
            self._flush_word()
            self._close_body(at)
            self._kind = None

    def _close_body(self, end: int) -> None:
        if self._kind != TOOL:
            return
        src = self._pending.window(self._body, end)
        self._scanned += len(src.text)
        self._read_body(src, 0, len(src.text))

    def _read_body(self, src: MarkedText, start: int, end: int) -> None:
        content, calls = read_tool_body(src, start, end, self._tools, self._policy, self._taken)
        for c in content:
            if c:
                self._out.append(self._gate.text(c))
        for c in calls:
            self._calls.append(c)
            self._frags.append(CallDelta(self._taken, c.arguments, c.name, c.id))
            self._taken += 1
