"""The token-sequence reasoning parser: thinking delimited by markers that are *several* token ids.

Some families spell each marker as a short sequence of tokens that begins with a special token: Kimi
K3's XTML ``<|open|>think<|sep|>`` … ``<|close|>think<|sep|>`` (three ids each), PLaMo 3's
``<|plamo:begin_`` ``think`` ``:plamo|>``. A family declares each marker as its pieces; its ids are what the
vocabulary's tokenizer encodes for its text (a vocabulary without an encoder: each piece one token,
``Vocabulary.token_id``). The first piece must be a special token, so ordinary text can never spell a
marker (the ids decide, never the text).

Per-token kinds (what the engine core and the front end see)
-------------------------------------------------------------
- While thinking, a complete **start** sequence is dropped (the model re-opening its thinking, or
  opening it itself) and a complete **end** sequence ends the thinking at its *last* token:
  ``ReasoningEnd(last, is_content=False)``; the grammar applies from the next token.
- An **implicit end** sequence (a tool-call or answer opener written straight from the thinking) ends
  it the same way, at its last token, but its text is *content text* (a tool parser reads it). Its ids
  are not content ids: they were sampled before the end could be known (the first of them may have
  been committed in an earlier step), exactly like a Granite marker token that carries text past the
  marker.
- Tokens held while they may still begin a marker are decided by the next tokens: reasoning if the
  match breaks, marker if it completes. At the end of the output held tokens are reasoning.
- After the end every id is content (ids and text).

States: ``THINKING`` (1), ``ENDED`` (2), or :class:`Held` (thinking, with the ids of a proper prefix of
some marker held; at most the longest marker's length minus one). The initial state follows
:mod:`reasoning.markers`' rules (``include_reasoning: false``; the last marker of the prompt's current
turn; the thinking switch; ``default_mode`` ``"thinking"`` or ``"off"``). A family may read its switch
its own way by overriding :meth:`TokenSequenceParser.thinking_requested`.

Costs: a step without the first id of any marker and nothing held is one C-level set test; otherwise
O(tokens of the step x markers). The prompt is scanned once, backwards, to its last turn start.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal, NamedTuple

from thinkgate.reasoning.base import (ENDED, DeltaMessage, ReasoningEnd, ReasoningParser, ReasoningSplit, ReasoningStream,
                   StateTracker, checked_end, ending_ids_among, reasoning_excluded, thinking_switch)
from thinkgate.reasoning.markers import THINKING

__all__ = ["TokenSequenceParser", "TokenSequenceTracker", "TokenSequenceStream", "Held"]

Marker = tuple[str, ...]
"""A marker as its pieces, one token each, the first a special token."""


class Held(NamedTuple):
    """A thinking request holding the ids of a proper prefix of some marker."""

    ids: tuple[int, ...]


SeqState = int | Held
_REASONING, _MARKER, _CONTENT_TEXT, _CONTENT = "r", "m", "x", "c"


class TokenSequenceParser(ReasoningParser):
    """A reasoning parser whose markers are sequences of token ids (see the module docstring).

    Class attributes a family sets: ``start_sequences``, ``end_sequences``, ``implicit_end_sequences``,
    (each a tuple of markers, a marker a tuple of pieces),
    ``turn_start_markers`` (single tokens; those the vocabulary lacks are ignored), ``default_mode``
    (``"thinking"`` / ``"off"``) and ``thinking_kwargs``. Every marker must be spelled by the vocabulary
    (its tokenizer's encoding of the marker text; without an encoder, each piece one token) with the
    first piece as a special token, else the constructor raises ``ValueError`` naming the parser and
    the marker.
    """

    start_sequences: ClassVar[tuple[Marker, ...]] = ()
    end_sequences: ClassVar[tuple[Marker, ...]] = ()
    implicit_end_sequences: ClassVar[tuple[Marker, ...]] = ()
    turn_start_markers: ClassVar[tuple[str, ...]] = ()
    default_mode: ClassVar[Literal["thinking", "off"]] = "thinking"
    thinking_kwargs: ClassVar[tuple[str, ...]] = ("enable_thinking", "thinking")

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        if not self.end_sequences:
            raise ValueError(f"reasoning parser {self.name!r} defines no end marker")
        self._starts = tuple(self._resolve(m) for m in self.start_sequences)
        self._ends = tuple(self._resolve(m) for m in self.end_sequences)
        self._implicit = tuple(self._resolve(m) for m in self.implicit_end_sequences)
        turn_ids = (self.vocabulary.token_id(m) for m in self.turn_start_markers)
        self.turn_start_token_ids: frozenset[int] = frozenset(t for t in turn_ids if t is not None)
        # thinking-phase markers: (ids, kind) with kind "start" / "end" / "implicit"
        self._thinking_markers = ([(s, "start") for s in self._starts] + [(e, "end") for e in self._ends]
                                  + [(i, "implicit") for i in self._implicit])
        self._firsts = frozenset(ids[0] for ids, _ in self._thinking_markers)
        self._prompt_firsts = self._firsts | self.turn_start_token_ids
        self._last_ids = frozenset(ids[-1] for ids, k in self._thinking_markers if k != "start")

    def _resolve(self, marker: Marker) -> tuple[int, ...]:
        """The ids of ``marker``: as the vocabulary's tokenizer encodes its text when it has one (the
        ids the model's tokenizer gives, as vLLM encodes them; a piece may be several tokens), else its
        pieces one token each."""
        text = "".join(marker)
        v = self.vocabulary
        if v.can_encode:
            ids = v.encode(text)
            if not ids or v.decode(ids) != text:
                raise ValueError(f"reasoning parser {self.name!r}: the vocabulary {v.name!r} cannot spell "
                                 f"the marker {text!r}")
        else:
            ids = []
            for piece in marker:
                tid = v.token_id(piece)
                if tid is None:
                    raise ValueError(f"reasoning parser {self.name!r}: the vocabulary {v.name!r} has no "
                                     f"single token for {piece!r} of the marker {text!r}")
                ids.append(tid)
        if ids[0] not in v.special_token_ids or v.token_bytes[ids[0]] != marker[0].encode("utf-8"):
            raise ValueError(f"reasoning parser {self.name!r}: {marker[0]!r}, the first token of the marker "
                             f"{text!r}, is not a special token of {v.name!r}")
        return tuple(ids)

    # -- contract: engine core -------------------------------------------------------------------
    @property
    def reasoning_end_token_ids(self) -> frozenset[int]:
        """Single-token end markers only (a multi-token end needs the tracker)."""
        return frozenset(e[0] for e in self._ends if len(e) == 1)

    def thinking_requested(self, kwargs: Mapping[str, Any]) -> bool | None:
        """The thinking switch in the chat-template kwargs: True / False, None when unset."""
        return thinking_switch(kwargs, self.thinking_kwargs)

    def initial_state(self, prompt_token_ids: Sequence[int] = (),
                      chat_template_kwargs: Mapping[str, Any] | None = None) -> int:
        kw = self._kwargs(chat_template_kwargs)
        if reasoning_excluded(kw):
            return ENDED
        if not self._prompt_firsts.isdisjoint(prompt_token_ids):
            ids = prompt_token_ids
            for i in range(len(ids) - 1, -1, -1):
                t = ids[i]
                if t in self.turn_start_token_ids:
                    break
                if t in self._firsts:
                    kind = next((k for m, k in self._thinking_markers if tuple(ids[i:i + len(m)]) == m), None)
                    if kind is not None:
                        return THINKING if kind == "start" else ENDED
        on = self.thinking_requested(kw)
        if on is not None:
            return THINKING if on else ENDED
        return THINKING if self.default_mode == "thinking" else ENDED

    def is_reasoning_end(self, prompt_token_ids: Sequence[int],
                         chat_template_kwargs: Mapping[str, Any] | None = None) -> bool:
        return self.initial_state(prompt_token_ids, chat_template_kwargs) == ENDED

    def find_reasoning_end(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        return self.step(THINKING, token_ids)[1]

    def split(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
              chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningSplit:
        state = self.initial_state(prompt_token_ids, chat_template_kwargs)
        if state == ENDED:
            return ReasoningSplit([], list(token_ids), None, True)
        kinds, _, end = self._walk(state, token_ids, final=True)
        reasoning = [t for t, k in zip(token_ids, kinds) if k == _REASONING]
        content = [] if end is None else list(token_ids[end.offset + 1:])
        return ReasoningSplit(reasoning, content, end, False)

    def new_tracker(self, prompt_token_ids: Sequence[int] = (),
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> TokenSequenceTracker:
        return TokenSequenceTracker(self, self.initial_state(prompt_token_ids, chat_template_kwargs))

    def step(self, state: SeqState, token_ids: Sequence[int]) -> tuple[SeqState, ReasoningEnd | None]:
        """The tracker's step (:class:`~reasoning.base.Stepper`)."""
        if state == ENDED:
            return ENDED, None
        if state == THINKING and self._firsts.isdisjoint(token_ids):
            return THINKING, None  # the common step: no marker can begin here
        held = state.ids if isinstance(state, Held) else ()
        ids = held + tuple(token_ids) if held else token_ids
        _, held_after, end = self._walk(THINKING, ids, final=False)
        if end is not None:
            return ENDED, ReasoningEnd(end.offset - len(held), False)
        return (Held(held_after) if held_after else THINKING), None

    def keep_thinking_ids(self, state: SeqState) -> frozenset[int] | None:
        return None  # a request starts thinking or ended: its first token never decides

    def ending_ids(self, state: SeqState) -> frozenset[int] | None:
        # only the last id of an end or implicit-end marker can end it; stepping each decides exactly
        return ending_ids_among(self, state, self._last_ids)

    def forced_end_ids(self, state: SeqState) -> tuple[int, ...] | None:
        return checked_end(self, state, self._ends[0])

    # -- contract: front end ---------------------------------------------------------------------
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
        """Split a whole text on the marker texts (the pieces joined), as the ids would split it."""
        if self.initial_state(prompt_token_ids, chat_template_kwargs) == ENDED:
            return None, text or None
        texts = [("".join(self._text(t) for t in m), k) for m, k in self._thinking_markers]
        reasoning: list[str] = []
        pos = 0
        while True:
            hits = [(text.find(s, pos), -len(s), s, k) for s, k in texts if text.find(s, pos) >= 0]
            if not hits:
                reasoning.append(text[pos:])
                return "".join(reasoning) or None, None
            at, _, s, kind = min(hits)
            reasoning.append(text[pos:at])
            if kind == "start":
                pos = at + len(s)
                continue
            content = text[at:] if kind == "implicit" else text[at + len(s):]
            return "".join(reasoning) or None, content or None

    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> TokenSequenceStream:
        return TokenSequenceStream(self, self.initial_state(prompt_token_ids, chat_template_kwargs))

    # -- the one matcher -------------------------------------------------------------------------
    def _text(self, t: int) -> str:
        return self.vocabulary.token_bytes[t].decode("utf-8", errors="replace")

    def _walk(self, state: int, ids: Sequence[int], *, final: bool
              ) -> tuple[list[str], tuple[int, ...], ReasoningEnd | None]:
        """Run ``ids`` (the ids held from before first) from ``state`` (THINKING or ENDED).

        Returns the kind of each id (``r`` reasoning, ``m`` marker, ``x`` content text that is no
        content id, ``c`` content; ids still held at the end get ``h``, or their phase's plain kind when
        ``final``), the ids still held (none when ``final``), and where the thinking ended (an index
        into ``ids``).
        """
        thinking = state != ENDED
        out: list[str] = []
        end: ReasoningEnd | None = None
        buf_start = -1  # index of the first held id, -1 when nothing is held
        i = 0
        n = len(ids)
        while i < n:
            if not thinking:  # after the end every id is content
                out.extend(_CONTENT for _ in range(n - i))
                break
            markers, plain = self._thinking_markers, _REASONING
            if buf_start < 0:
                if ids[i] not in self._firsts:
                    out.append(plain)
                    i += 1
                    continue
                buf_start = i
            cand = tuple(ids[buf_start:i + 1])
            done = next((k for m, k in markers if m == cand), None)
            if done is not None:
                out.extend((_CONTENT_TEXT if done == "implicit" else _MARKER) for _ in cand)
                buf_start = -1
                if done in ("end", "implicit"):
                    end = ReasoningEnd(i, False)
                    thinking = False
                i += 1
                continue
            if any(len(m) > len(cand) and m[:len(cand)] == cand for m, _ in markers):
                i += 1  # a proper prefix of a marker: keep holding
                continue
            out.append(plain)  # the match broke: the first held id is plain; rescan after it
            i = buf_start + 1
            buf_start = -1
        if buf_start < 0:
            return out, (), end
        held = tuple(ids[buf_start:])
        if final:
            out.extend((_REASONING if thinking else _CONTENT) for _ in held)
            return out, (), end
        out.extend("h" for _ in held)
        return out, held, end


class TokenSequenceTracker(StateTracker[SeqState]):
    """Engine-core state of one request: the shared :class:`~reasoning.base.StateTracker` over
    ``THINKING``, :class:`Held` or ``ENDED``."""

    __slots__ = ()


class TokenSequenceStream(ReasoningStream):
    """Front-end splitter of one request: ids held while they may begin a marker are released when
    the next ids decide; the text is decoded from the vocabulary (``text`` is not needed)."""

    def __init__(self, parser: TokenSequenceParser, state: int) -> None:
        self._parser = parser
        self._state = state
        self._held: tuple[int, ...] = ()
        self._r = codecs.getincrementaldecoder("utf-8")("replace")
        self._c = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        return self._run(token_ids, final=False)

    def finish(self) -> DeltaMessage:
        return self._run((), final=True)

    def _run(self, token_ids: Sequence[int], final: bool) -> DeltaMessage:
        p = self._parser
        ids = list(self._held) + list(token_ids)
        kinds, rest, end = p._walk(self._state, ids, final=final)
        if end is not None:
            self._state = ENDED
        self._held = rest
        tb = p.vocabulary.token_bytes
        r = b"".join(tb[t] for t, k in zip(ids, kinds) if k == _REASONING)
        c = b"".join(tb[t] for t, k in zip(ids, kinds) if k in (_CONTENT, _CONTENT_TEXT))
        rs = self._r.decode(r, final=final)
        cs = self._c.decode(c, final=final)
        return DeltaMessage(rs or None, cs or None)
