"""Marked text built incrementally: what a streaming tool reader reads, one delta at a time.

:class:`MarkedDecoder` turns token ids into pieces ``(text, is_control)`` exactly as
:meth:`~.marked.MarkedText.from_ids` decodes a whole output (ordinary tokens through one UTF-8 decoder, so
a character split across deltas comes out whole once complete; the decoder is flushed at each control
token; invalid UTF-8 is replaced), so the concatenation of the pieces of every delta is the text of the
whole output and the control pieces are its control-token spans.

:class:`PendingText` holds the text a streaming reader has not settled yet, as parts, with the spans of its
control tokens. Appending is O(the piece); :meth:`PendingText.window` (a :class:`MarkedText` of a range)
and :meth:`PendingText.marked` cost O(the range); :meth:`PendingText.drop` costs O(what stays).
"""

from __future__ import annotations

import bisect
import codecs
from collections.abc import Iterable, Iterator, Sequence

from thinkgate.reasoning.vocabulary import Vocabulary

from .marked import MarkedText

__all__ = ["Piece", "MarkedDecoder", "PendingText"]

Piece = tuple[str, bool]
"""``(text, is_control)``: a run of ordinary text, or the text of one control token."""


class MarkedDecoder:
    """Token ids -> :data:`Piece` s, per request (see the module docstring). O(len(ids)) per call."""

    __slots__ = ("_tb", "_specials", "_decoder")

    def __init__(self, vocabulary: Vocabulary) -> None:
        self._tb = vocabulary.token_bytes
        self._specials = vocabulary.special_token_ids
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, token_ids: Iterable[int], *, final: bool = False) -> list[Piece]:
        """The pieces of ``token_ids``; ``final`` flushes an incomplete character (as U+FFFD).
        ``ValueError`` for an id the vocabulary does not define (nothing is decoded then)."""
        tb, specials, n = self._tb, self._specials, len(self._tb)
        ids = list(token_ids)
        for tid in ids:
            if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid < n:
                raise ValueError(f"token id {tid!r} is not in the vocabulary (size {n})")
        out: list[Piece] = []
        run: list[bytes] = []
        for tid in ids:
            if tid in specials:
                s = self._decoder.decode(b"".join(run), final=True)
                run.clear()
                if s:
                    out.append((s, False))
                s = tb[tid].decode("utf-8", errors="replace")
                if s:
                    out.append((s, True))
            else:
                run.append(tb[tid])
        s = self._decoder.decode(b"".join(run), final=final)
        if s:
            out.append((s, False))
        return out


class PendingText:
    """Text not settled yet, as parts with their control flags (see the module docstring)."""

    __slots__ = ("_special", "_parts", "_starts", "_controls", "_len")

    def __init__(self, special: frozenset[str]) -> None:
        self._special = special
        self._parts: list[str] = []
        self._starts: list[int] = []
        self._controls: list[bool] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def append(self, text: str, control: bool) -> None:
        if not text:
            return
        self._parts.append(text)
        self._starts.append(self._len)
        self._controls.append(control)
        self._len += len(text)

    def extend(self, pieces: Sequence[Piece]) -> None:
        for text, control in pieces:
            self.append(text, control)

    def window(self, start: int, end: int | None = None) -> MarkedText:
        """The text of ``[start, end)`` with its control spans (offsets relative to ``start``); a control
        token cut by ``start`` counts as ordinary text there. O(end - start)."""
        end = self._len if end is None else end
        k = max(bisect.bisect_right(self._starts, start) - 1, 0)
        texts: list[str] = []
        controls: dict[int, int] = {}
        pos = 0
        while k < len(self._parts) and self._starts[k] < end:
            a, part = self._starts[k], self._parts[k]
            lo, hi = max(start - a, 0), min(end - a, len(part))
            piece = part[lo:hi]
            if self._controls[k] and lo == 0 and hi == len(part):
                controls[pos] = pos + len(piece)
            texts.append(piece)
            pos += len(piece)
            k += 1
        return MarkedText("".join(texts), controls, self._special)

    def plain_runs(self, start: int) -> Iterator[tuple[int, str]]:
        """``(offset, text)`` of the ordinary-text parts from ``start`` on (a control token cut by ``start``
        counts as ordinary text), lazily: O(the parts taken)."""
        k = max(bisect.bisect_right(self._starts, start) - 1, 0)
        for j in range(k, len(self._parts)):
            a, part = self._starts[j], self._parts[j]
            lo = max(start - a, 0)
            if lo >= len(part) or (self._controls[j] and lo == 0):
                continue
            yield a + lo, part[lo:]

    def controls_from(self, start: int) -> Iterator[tuple[int, str]]:
        """``(offset, text)`` of the control tokens that start at or after ``start``, lazily."""
        for j in range(bisect.bisect_left(self._starts, start), len(self._parts)):
            if self._controls[j]:
                yield self._starts[j], self._parts[j]

    def marked(self) -> MarkedText:
        return self.window(0, self._len)

    def text(self, start: int = 0, end: int | None = None) -> str:
        return self.window(start, end).text

    def drop(self, n: int) -> None:
        """Forget the first ``n`` characters (a control token cut by ``n`` stays a control token only if
        whole; readers never cut one)."""
        if n <= 0:
            return
        if n >= self._len:
            self.clear()
            return
        k = bisect.bisect_right(self._starts, n) - 1
        parts, controls = self._parts[k:], self._controls[k:]
        cut = n - self._starts[k]
        if cut:
            parts[0] = parts[0][cut:]
            controls[0] = False  # the rest of a cut control token is ordinary text
        self._parts, self._controls = parts, controls
        self._starts = []
        pos = 0
        for p in parts:
            self._starts.append(pos)
            pos += len(p)
        self._len = pos

    def clear(self) -> None:
        self._parts, self._starts, self._controls, self._len = [], [], [], 0
