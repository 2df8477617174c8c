"""The text a tool reader reads, and which of its characters came from control tokens.

A call format marks its calls with control tokens (Qwen's ``<tool_call>``, Mistral's ``[TOOL_CALLS]``,
harmony's ``<|channel|>`` ... ``<|call|>``), but once decoded, a control token and the same characters
written with ordinary tokens look the same. :class:`MarkedText` keeps the difference:

- :meth:`MarkedText.from_ids` decodes token ids and records the span of every control token (the
  vocabulary's ``special_token_ids``). A marker of the call syntax that is a control token in that
  vocabulary then matches only where the model produced that token; the same characters written with
  ordinary tokens are text (content). A marker that is ordinary text in the vocabulary is matched as
  text. Text between markers (names, arguments, values) must contain no control token.
- :meth:`MarkedText.trusted` wraps text without ids: every marker's text counts as the marker. This is
  what ``ToolReader.read(text)`` does; it cannot tell a real marker from one spelled out.

Also :func:`json_depth_ok`, the nesting bound every JSON-argument reader checks before decoding.
"""

from __future__ import annotations

import bisect
import functools
import re
from collections.abc import Iterable

from thinkgate.reasoning.vocabulary import Vocabulary

from .syntax import LiteralText

__all__ = ["MarkedText", "MAX_ARGUMENT_DEPTH", "json_depth_ok", "loose_separator"]

MAX_ARGUMENT_DEPTH = 128
"""The deepest nesting of JSON arrays / objects a reader takes in a call's arguments (the arguments
object itself is level 1). Deeper text is not read as a call: it stays content."""

_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]', re.S)


def json_depth_ok(text: str, pos: int = 0, end: int | None = None, limit: int = MAX_ARGUMENT_DEPTH) -> bool:
    """False when the JSON value starting at ``pos`` nests arrays / objects deeper than ``limit``
    (an iterative scan that skips strings; it stops where the value closes). Malformed text that never
    goes deeper is True: the decoder rejects it afterwards."""
    depth = 0
    for m in _JSON_TOKENS.finditer(text, pos, len(text) if end is None else end):
        c = m.group()[0]
        if c == '"':
            if depth == 0:
                return True
            continue
        if c in "[{":
            depth += 1
            if depth > limit:
                return False
        else:
            depth -= 1
            if depth <= 0:
                return True
    return True


class MarkedText:
    """``text`` and where its control tokens are (see the module docstring)."""

    __slots__ = ("text", "_controls", "_special", "_ends")

    def __init__(self, text: str, controls: dict[int, int] | None = None,
                 special: Iterable[str] | None = None) -> None:
        self.text = text
        self._controls = controls  # start -> end of each control token; None: trusted text
        self._special = None if special is None else frozenset(special)
        self._ends: list[tuple[int, int]] | None = None

    @classmethod
    def trusted(cls, text: str) -> MarkedText:
        """Text without ids: every marker's text is taken as the marker."""
        return cls(text)

    @classmethod
    def from_ids(cls, token_ids: Iterable[int], vocabulary: Vocabulary) -> MarkedText:
        """Decode ``token_ids`` (ordinary tokens in runs, so multi-byte characters split across tokens
        decode whole; invalid UTF-8 replaced) and record the span of each control token.
        ``ValueError`` for an id the vocabulary does not define."""
        if not isinstance(vocabulary, Vocabulary):
            raise ValueError(f"vocabulary must be a Vocabulary, got {type(vocabulary).__name__}")
        tb = vocabulary.token_bytes
        specials = vocabulary.special_token_ids
        n = len(tb)
        parts: list[str] = []
        controls: dict[int, int] = {}
        run: list[bytes] = []
        pos = 0

        def flush() -> None:
            nonlocal pos
            if run:
                s = b"".join(run).decode("utf-8", errors="replace")
                parts.append(s)
                pos += len(s)
                run.clear()

        for tid in token_ids:
            if isinstance(tid, bool) or not isinstance(tid, int) or not 0 <= tid < n:
                raise ValueError(f"token id {tid!r} is not in vocabulary {vocabulary.name!r} (size {n})")
            if tid in specials:
                flush()
                s = tb[tid].decode("utf-8", errors="replace")
                if s:
                    controls[pos] = pos + len(s)
                    parts.append(s)
                    pos += len(s)
            else:
                run.append(tb[tid])
        flush()
        return cls("".join(parts), controls, vocabulary.special_tokens)

    @property
    def special_tokens(self) -> frozenset[str]:
        """The strings that match as markers only where they are control tokens (none for trusted text)."""
        if self._controls is None or self._special is None:
            return frozenset()
        return self._special

    def pieces(self) -> list[tuple[str, bool]]:
        """The text as ``(text, is_control)`` pieces (what :class:`~.pending.PendingText` holds): each control
        token alone, the ordinary text between them as one piece; trusted text is one ordinary piece. With
        :attr:`special_tokens`, the pieces hold what this text holds. O(len(text))."""
        if not self._controls:
            return [(self.text, False)] if self.text else []
        out: list[tuple[str, bool]] = []
        pos = 0
        for a, b in sorted(self._controls.items()):
            if a > pos:
                out.append((self.text[pos:a], False))
            out.append((self.text[a:b], True))
            pos = b
        if pos < len(self.text):
            out.append((self.text[pos:], False))
        return out

    def without(self, spans: Iterable[tuple[int, int]]) -> MarkedText:
        """This text with ``spans`` (sorted, disjoint ``(start, end)``) cut out: the control tokens outside
        them keep their spans (moved back by what was cut before them). O(the text + the control tokens)."""
        spans = list(spans)
        if not spans:
            return self
        text = self.text
        parts: list[str] = []
        pos = 0
        for a, b in spans:
            parts.append(text[pos:a])
            pos = b
        parts.append(text[pos:])
        if self._controls is None:
            return MarkedText("".join(parts))
        starts = [a for a, _ in spans]
        removed = [0]
        for a, b in spans:
            removed.append(removed[-1] + b - a)
        controls: dict[int, int] = {}
        for s, e in self._controls.items():
            k = bisect.bisect_right(starts, s)  # spans starting at or before s
            if k and s < spans[k - 1][1]:
                continue  # cut out
            controls[s - removed[k]] = e - removed[k]
        return MarkedText("".join(parts), controls, self._special)

    def marker_at(self, pos: int, marker: str) -> bool:
        """Whether the marker ``marker`` is at ``pos``: its text, and, when it is a control token in the
        vocabulary, produced as that token."""
        if not self.text.startswith(marker, pos):
            return False
        if self._controls is None or marker not in self._special:  # type: ignore[operator]
            return True
        return self._controls.get(pos) == pos + len(marker)

    def find_marker(self, marker: str, start: int = 0, end: int | None = None) -> int:
        """The first position >= ``start`` where ``marker`` is (see :meth:`marker_at`), or -1."""
        text = self.text
        stop = len(text) if end is None else end
        i = text.find(marker, start, stop)
        while i >= 0 and not self.marker_at(i, marker):
            i = text.find(marker, i + 1, stop)
        return i

    def plain(self, start: int, end: int) -> bool:
        """Whether ``text[start:end]`` holds no control token (always, for trusted text)."""
        if not self._controls or end <= start:
            return True
        if self._ends is None:
            self._ends = sorted(self._controls.items())
        # any control token overlapping [start, end)?
        k = bisect.bisect_left(self._ends, (start, -1))
        if k > 0 and self._ends[k - 1][1] > start:
            return False
        return k >= len(self._ends) or self._ends[k][0] >= end

    def match_literal(self, pos: int, literal: str, lit: LiteralText, *, exact_tail: bool = False) -> int:
        """The end of ``literal`` (a piece of call syntax, its markers split by ``lit``) at ``pos``, or -1:
        each marker at a control token when it is one, the text between them plain.

        Read generously (the grammar writes the literal exactly; models write it looser): a run of
        whitespace in the literal's text matches any run of whitespace in the text, also none
        (``<tool_call>{"name":"f"`` reads as ``<tool_call>\\n{"name": "f"``), and whitespace may come before a
        marker that starts the literal or follows another marker (``</arg_key>\\n<arg_value>``). ``exact_tail``: a run that ends
        the literal matches its own text or nothing (a raw value follows, whose leading whitespace is
        its own)."""
        parts = lit.split(literal)
        last = len(parts) - 1
        for k, (is_marker, piece) in enumerate(parts):
            if is_marker:
                if (k == 0 or parts[k - 1][0]) and not self.marker_at(pos, piece):
                    pos = self._skip_space(pos)  # whitespace between two markers, or before the first
                if not self.marker_at(pos, piece):
                    return -1
                pos += len(piece)
                continue
            start = pos
            pos = _match_loose(self.text, pos, piece, exact_tail and k == last)
            if pos < 0 or not self.plain(start, pos):
                return -1
        return pos

    def _skip_space(self, pos: int) -> int:
        end = pos
        while end < len(self.text) and self.text[end] in _WS:
            end += 1
        return end if self.plain(pos, end) else pos

    def find_literal(self, literal: str, start: int, lit: LiteralText) -> int:
        """The first position >= ``start`` where :meth:`match_literal` matches, or -1 (a literal that
        starts with whitespace matches from the start of the whitespace before its first word)."""
        chunks = _chunks(literal)
        if not chunks:
            return start if start <= len(self.text) else -1
        lead = chunks[0][1] if chunks[0][0] else ""
        anchor = next(c for ws, c in chunks if not ws)
        i = self.text.find(anchor, start)
        while i >= 0:
            j = i
            if lead:
                while j > start and self.text[j - 1] in _WS:
                    j -= 1
            if self.match_literal(j, literal, lit) >= 0:
                return j
            i = self.text.find(anchor, i + 1)
        return -1


_WS = " \t\r\n"


@functools.lru_cache(maxsize=512)
def _chunks(piece: str) -> tuple[tuple[bool, str], ...]:
    """``piece`` as (is_whitespace, text) runs."""
    return tuple((m.group()[0] in _WS, m.group()) for m in _RUNS.finditer(piece))


_RUNS = re.compile(r"[ \t\r\n]+|[^ \t\r\n]+")


def _match_loose(text: str, pos: int, piece: str, exact_tail: bool) -> int:
    """The end of the plain ``piece`` at ``pos`` (see :meth:`MarkedText.match_literal`), or -1."""
    chunks = _chunks(piece)
    last = len(chunks) - 1
    for k, (ws, chunk) in enumerate(chunks):
        if not ws:
            if not text.startswith(chunk, pos):
                return -1
            pos += len(chunk)
        elif exact_tail and k == last:
            if text.startswith(chunk, pos):
                pos += len(chunk)
        else:
            n = len(text)
            while pos < n and text[pos] in _WS:
                pos += 1
    return pos


def loose_separator(between: str, sep: str) -> bool:
    """Whether ``between`` (the text between two calls) is only whitespace, or the separator ``sep`` read
    generously (its whitespace any run, also none; ``;`` for ``"; "``)."""
    return "".join(between.split()) in ("", "".join(sep.split()))
