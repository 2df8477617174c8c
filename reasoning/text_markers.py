"""The generic text-marker reasoning parser: thinking delimited by marker *texts* that the vocabulary
spells with ordinary tokens (OLMo 3's ``<think>`` / ``</think>``, Hunyuan's ``</think>\\n<answer>``).

A marker may span several tokens and begin or end inside a token, so markers are matched on the bytes
of the generated tokens, with a bounded tail: each token is searched together with the last
``max_marker_len - 1`` bytes before it, which is all a marker that completes in this token can reach
back. Cost per call: O(bytes of the call + marker lengths), never O(output so far).

Token-level rules (what the engine core sees):

- the reasoning **ends at the token in which an end marker completes** (``ReasoningEnd(offset, False)``);
  the content ids are the tokens after it. Bytes of that token past the marker are content *text* (the
  front end shows them) but the token is not a content id: a grammar starts at the next token;
- a start marker (``start_texts``: the texts dropped while thinking, e.g. ``<think>``, which the
  template may or may not have written) completed while thinking is dropped;
- a token is a reasoning token when at least one of its bytes is reasoning (not part of a marker).

States: ``THINKING`` or ``ENDED`` (latched). The initial state follows the rules of
:mod:`reasoning.markers` (``include_reasoning: false``; the last marker text in the prompt's current
turn, which starts after the last ``turn_start_texts``: an end text -> ended, a start text -> thinking;
the kwargs; the family default), with
``default_mode`` ``"thinking"``, ``"off"`` or ``"first_token"``.

``"first_token"`` (Kimi-VL: the model opens its thinking with a start text it writes itself, or answers
at once) starts the request ``PENDING``, and the first generated token decides, as for token markers: a
token whose bytes agree with a start text over their common length (``◁`` of ``◁think▷``) opens the
thinking; any other token is the first content token (``ReasoningEnd(0, True)``). On a whole text
(``extract_reasoning``), the first character decides the same way. A first token that agrees with the
start text but is not followed by the rest of it is still read as thinking (the decision is never
revisited: the grammar applies from the first content token).
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, NamedTuple

from thinkgate.reasoning.base import (ENDED, DeltaMessage, ReasoningEnd, ReasoningParser, ReasoningSplit, ReasoningStream,
                   StateTracker, checked_end, reasoning_excluded, thinking_switch)
from thinkgate.reasoning.markers import PENDING, THINKING

__all__ = ["TextMarkerParser", "TextMarkerTracker", "TextMarkerStream"]


class Held(NamedTuple):
    """The tracker state of a thinking request: the undecided reasoning bytes held from earlier tokens
    (a proper prefix of some marker, shorter than the longest marker). An ended request is ``ENDED``."""

    tail: bytes = b""


_NOTHING_HELD = Held()
TextState = Held | int
"""The tracker state: :class:`Held` while thinking, ``PENDING`` before a ``"first_token"`` family's first
token, or ``ENDED``."""


@dataclass
class _Scan:
    """The result of running bytes through the matcher."""

    state: int
    tail: bytes
    end: ReasoningEnd | None
    # per token of the call: (reasoning bytes, content bytes); marker bytes are in neither
    pieces: list[tuple[bytes, bytes]]


class TextMarkerParser(ReasoningParser):
    """A reasoning parser whose markers are texts (see the module docstring).

    Class attributes a family sets: ``start_texts`` (dropped while thinking), ``end_texts``,
    ``turn_start_texts``, ``default_mode`` (``"thinking"`` / ``"off"`` / ``"first_token"``, which needs a
    start text), ``thinking_kwargs`` (read by :meth:`thinking_requested`) and
    ``forced_end_text`` (what a thinking budget forces; default the first end marker).
    Construction checks that every marker encodes to tokens of the vocabulary (a vocabulary without an
    encoder cannot be checked and is accepted).
    """

    start_texts: ClassVar[tuple[str, ...]] = ()
    end_texts: ClassVar[tuple[str, ...]] = ()
    turn_start_texts: ClassVar[tuple[str, ...]] = ()
    default_mode: ClassVar[Literal["thinking", "off", "first_token"]] = "thinking"
    thinking_kwargs: ClassVar[tuple[str, ...]] = ("enable_thinking",)
    forced_end_text: ClassVar[str] = ""
    """The text a thinking budget forces to end the thinking (default: the first end marker)."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        if not self.end_texts:
            raise ValueError(f"reasoning parser {self.name!r} defines no end marker")
        if self.default_mode == "first_token" and not self.start_texts:
            raise ValueError(f"reasoning parser {self.name!r}: default_mode 'first_token' needs a start text")
        v = self.vocabulary
        if v.can_encode:
            for m in self.start_texts + self.end_texts:
                if v.decode(v.encode(m)) != m:
                    raise ValueError(f"reasoning parser {self.name!r}: the vocabulary {v.name!r} cannot spell "
                                     f"the marker {m!r}")
        self._starts = tuple(m.encode("utf-8") for m in self.start_texts)
        self._ends = tuple(m.encode("utf-8") for m in self.end_texts)
        self._turns = tuple(m.encode("utf-8") for m in self.turn_start_texts)
        self._keep = max(len(m) for m in self._starts + self._ends) - 1
        # a window without the first byte of any marker can neither hold nor begin a marker
        self._firsts = tuple({m[:1] for m in self._starts + self._ends})
        # the forced end of thinking (a thinking budget), spelled by the tokenizer
        forced = self.forced_end_text or self.end_texts[0]
        self._forced_end: tuple[int, ...] | None = tuple(v.encode(forced)) if v.can_encode else None
        # a model still deciding writes an empty thinking: the start text, then the forced end
        self._forced_pending: tuple[int, ...] | None = (
            tuple(v.encode(self.start_texts[0] + forced)) if v.can_encode and self.start_texts else None)
        self._opening_ids: frozenset[int] | None = None  # built on first use (one pass over the vocabulary)

    # -- engine core -----------------------------------------------------------------------------
    @property
    def reasoning_end_token_ids(self) -> frozenset[int]:
        """Empty: no single token ends the reasoning (the end markers are texts)."""
        return frozenset()

    def initial_state(self, prompt_token_ids: Sequence[int] = (),
                      chat_template_kwargs: Mapping[str, Any] | None = None) -> int:
        kw = self._kwargs(chat_template_kwargs)
        if reasoning_excluded(kw):
            return ENDED
        if prompt_token_ids:
            data = self.vocabulary.decode_bytes(prompt_token_ids)
            turn = max((data.rfind(t) + len(t) for t in self._turns if data.rfind(t) >= 0), default=0)
            last_start = max((data.rfind(m, turn) for m in self._starts), default=-1)
            last_end = max((data.rfind(m, turn) for m in self._ends), default=-1)
            if last_end >= 0 or last_start >= 0:
                return ENDED if last_end > last_start else THINKING
        on = self.thinking_requested(kw)
        if on is not None:
            return THINKING if on else ENDED
        return {"thinking": THINKING, "first_token": PENDING, "off": ENDED}[self.default_mode]

    def thinking_requested(self, kwargs: Mapping[str, Any]) -> bool | None:
        """The thinking switch in the chat-template kwargs: True / False, None when unset. By default the
        first of ``thinking_kwargs`` that is set, read as a boolean; a family with another rule overrides it."""
        return thinking_switch(kwargs, self.thinking_kwargs)

    def _opens(self, data: bytes) -> bool:
        """Whether a first token (or text) of these bytes opens the thinking: it agrees with a start text
        over their common length."""
        return bool(data) and any(data[:len(m)] == m[:len(data)] for m in self._starts)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int],
                         chat_template_kwargs: Mapping[str, Any] | None = None) -> bool:
        return self.initial_state(prompt_token_ids, chat_template_kwargs) == ENDED

    def find_reasoning_end(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        """The token in which the first end marker completes (read as generated while thinking)."""
        return self._scan(THINKING, b"", token_ids, want_pieces=False).end

    def split(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
              chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningSplit:
        """Reasoning ids (tokens holding at least one reasoning byte, up to the end token) and content
        ids (the tokens after the end token), from the byte positions of the markers."""
        state = self.initial_state(prompt_token_ids, chat_template_kwargs)
        if state == ENDED:
            return ReasoningSplit([], list(token_ids), None, True)
        tb = self.vocabulary.token_bytes
        if state == PENDING and token_ids and not self._opens(tb[token_ids[0]]):
            return ReasoningSplit([], list(token_ids), ReasoningEnd(0, True), False)  # answered at once
        data = b"".join([tb[t] for t in token_ids])
        dropped, end_range = self._match_all(data)
        reasoning_stop = len(data) if end_range is None else end_range[0]
        # a byte is reasoning when it is before the end marker and outside every dropped start marker
        is_r = bytearray(b"\x01") * reasoning_stop
        for a, b in dropped:
            is_r[a:b] = bytes(b - a)
        end: ReasoningEnd | None = None
        reasoning: list[int] = []
        pos = 0
        for i, t in enumerate(token_ids):
            n = len(tb[t])
            if any(is_r[pos:min(pos + n, reasoning_stop)]):
                reasoning.append(t)
            pos += n
            if end_range is not None and pos >= end_range[1]:
                end = ReasoningEnd(i, False)
                break
        content = [] if end is None else list(token_ids[end.content_start:])
        return ReasoningSplit(reasoning, content, end, False)


    def new_tracker(self, prompt_token_ids: Sequence[int] = (),
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> TextMarkerTracker:
        state = self.initial_state(prompt_token_ids, chat_template_kwargs)
        return TextMarkerTracker(self, state if state in (ENDED, PENDING) else _NOTHING_HELD)

    def step(self, state: TextState, token_ids: Sequence[int]) -> tuple[TextState, ReasoningEnd | None]:
        """The tracker's step (:class:`~reasoning.base.Stepper`) from ``Held(tail)``, ``PENDING`` or ``ENDED``."""
        if state == ENDED:
            return ENDED, None
        if state == PENDING:
            if not token_ids:
                return PENDING, None
            if not self._opens(self.vocabulary.token_bytes[token_ids[0]]):
                return ENDED, ReasoningEnd(0, True)
            state = _NOTHING_HELD
        sc = self._scan(THINKING, state.tail, token_ids, want_pieces=False)  # type: ignore[union-attr]
        if sc.end is not None:
            return ENDED, sc.end
        return (state if sc.tail == state.tail else Held(sc.tail)), None  # type: ignore[union-attr]

    def keep_thinking_ids(self, state: TextState) -> frozenset[int] | None:
        # only PENDING is undecided: the tokens that open the thinking; any other starts the content
        if state != PENDING:
            return None
        if self._opening_ids is None:
            self._opening_ids = frozenset(t for t, b in enumerate(self.vocabulary.token_bytes) if self._opens(b))
        return self._opening_ids

    def ending_ids(self, state: TextState) -> frozenset[int] | None:
        # the end markers are texts: ordinary tokens can complete them, so no id set holds them off
        return frozenset() if state == ENDED else None

    def forced_end_ids(self, state: TextState) -> tuple[int, ...] | None:
        # whatever bytes are held, the whole marker follows them: it completes in its last token
        return checked_end(self, state, self._forced_pending if state == PENDING else self._forced_end)

    # -- front end -------------------------------------------------------------------------------
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
        """Split a whole text: reasoning before the first end marker (start markers removed), content
        after it."""
        state = self.initial_state(prompt_token_ids, chat_template_kwargs)
        if state == ENDED or (state == PENDING and text and not self._opens(text[:1].encode("utf-8"))):
            return None, text or None
        data = text.encode("utf-8")
        dropped, end_range = self._match_all(data)
        stop = len(data) if end_range is None else end_range[0]
        r = bytearray()
        pos = 0
        for a, b in dropped:
            r += data[pos:a]
            pos = b
        r += data[pos:stop]
        c = b"" if end_range is None else data[end_range[1]:]
        return r.decode("utf-8", errors="replace") or None, c.decode("utf-8", errors="replace") or None

    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> TextMarkerStream:
        return TextMarkerStream(self, self.initial_state(prompt_token_ids, chat_template_kwargs))

    # -- the matcher -----------------------------------------------------------------------------
    def _first_match(self, window: bytes, after: int) -> tuple[int, int, bool] | None:
        """The marker match in ``window`` that completes first at or after byte ``after``:
        (start, end, is_end_marker)."""
        best: tuple[int, int, bool] | None = None
        for is_end, markers in ((True, self._ends), (False, self._starts)):
            for m in markers:
                pos = window.find(m, max(0, after - len(m) + 1))
                if pos >= 0:
                    cand = (pos, pos + len(m), is_end)
                    if best is None or cand[1] < best[1] or (cand[1] == best[1] and cand[0] < best[0]):
                        best = cand
        return best

    def _scan(self, state: int, tail: bytes, token_ids: Sequence[int], want_pieces: bool) -> _Scan:
        """Run ``token_ids`` from ``(state, tail)``; ``tail`` holds the undecided reasoning bytes
        (a proper prefix of some marker) carried from earlier tokens."""
        pieces: list[tuple[bytes, bytes]] = []
        if state == ENDED:
            if want_pieces:
                tb = self.vocabulary.token_bytes
                pieces = [(b"", tb[t]) for t in token_ids]
            return _Scan(ENDED, b"", None, pieces)
        tb = self.vocabulary.token_bytes
        end: ReasoningEnd | None = None
        for i, t in enumerate(token_ids):
            if end is not None:
                if want_pieces:
                    pieces.append((b"", tb[t]))
                continue
            window = tail + tb[t]
            if not any(f in window for f in self._firsts):  # fast path: no marker can touch this token
                if want_pieces:
                    pieces.append((window, b""))
                tail = b""
                continue
            reasoning = bytearray()
            after = len(tail)
            while True:
                m = self._first_match(window, after)
                if m is None:
                    break
                start, stop, is_end = m
                reasoning += window[:start]
                window = window[stop:]
                after = 0
                if is_end:
                    end = ReasoningEnd(i, False)
                    break
            if end is not None:
                tail = b""
                if want_pieces:
                    pieces.append((bytes(reasoning), window))
                continue
            keep = self._undecided(window)
            reasoning += window[:len(window) - keep]
            tail = window[len(window) - keep:]
            if want_pieces:
                pieces.append((bytes(reasoning), b""))
        return _Scan(ENDED if end is not None else THINKING, tail, end, pieces)

    def _undecided(self, window: bytes) -> int:
        """Length of the longest suffix of ``window`` that is a proper prefix of a marker."""
        for k in range(min(self._keep, len(window)), 0, -1):
            suffix = window[-k:]
            if any(m.startswith(suffix) for m in self._starts + self._ends):
                return k
        return 0

    def _match_all(self, data: bytes) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
        """Over a whole output's bytes: the dropped start-marker ranges before the end, and the first
        end marker's range (None when none completes). Same matches as the streaming scan."""
        dropped: list[tuple[int, int]] = []
        pos = 0
        while True:
            m = self._first_match(data[pos:], 0)
            if m is None:
                return dropped, None
            start, stop, is_end = m
            if is_end:
                return dropped, (pos + start, pos + stop)
            dropped.append((pos + start, pos + stop))
            pos += stop


class TextMarkerTracker(StateTracker[TextState]):
    """Engine-core state of one request: the shared :class:`~reasoning.base.StateTracker` over
    ``Held(tail)`` (the undecided tail, shorter than the longest marker) or ``ENDED``."""

    __slots__ = ()


class TextMarkerStream(ReasoningStream):
    """Front-end splitter of one request. Reasoning bytes that may begin a marker are held back until
    the next tokens decide (at most the longest marker's length); text is decoded from the vocabulary
    (``text``, when given, is not needed to place the split: the bytes are the truth)."""

    def __init__(self, parser: TextMarkerParser, state: int) -> None:
        self._parser = parser
        self._state = state
        self._tail = b""
        self._r = codecs.getincrementaldecoder("utf-8")("replace")
        self._c = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        if self._state == PENDING:  # the first token decides
            if not token_ids:
                return DeltaMessage()
            opens = self._parser._opens(self._parser.vocabulary.token_bytes[token_ids[0]])
            self._state = THINKING if opens else ENDED
        sc = self._parser._scan(self._state, self._tail, token_ids, want_pieces=True)
        self._state, self._tail = sc.state, sc.tail
        r = self._r.decode(b"".join(p[0] for p in sc.pieces))
        c = self._c.decode(b"".join(p[1] for p in sc.pieces))
        return DeltaMessage(r or None, c or None)

    def finish(self) -> DeltaMessage:
        """The end of the output (e.g. cut by max_tokens): the held-back bytes were reasoning."""
        r = self._r.decode(self._tail, final=True) if self._state == THINKING else self._r.decode(b"", final=True)
        c = self._c.decode(b"", final=True)
        self._tail = b""
        return DeltaMessage(r or None, c or None)
