"""The generic token-marker reasoning parser: thinking delimited by special tokens.

Most families write their thinking between two special tokens (``<think>`` … ``</think>``); they differ
only in the marker strings, in tokens that end the thinking *implicitly* (Qwen's ``<tool_call>``: it
ends the thinking and is the first token of the content), in what the chat template writes into the
prompt, and in what the model does when nothing in the prompt says. :class:`TokenMarkerParser` is
parameterised by exactly those facts (class attributes); a family module subclasses it and registers
it.

State machine (per request; one state per token, latched once ended)
---------------------------------------------------------------------
``PENDING``  the model decides with its first token: a start marker -> ``THINKING``; an end marker ->
             ``ENDED`` (marker dropped); anything else -> ``ENDED`` with that token as the first content
             token (the model skipped thinking). Only families whose ``default_mode`` is
             ``"first_token"`` start here.
``THINKING`` start-marker tokens are dropped (no text); an end marker -> ``ENDED`` (dropped); an implicit
             end token -> ``ENDED`` (it is content); anything else is reasoning.
``LABEL``    (families with a ``start_label``, e.g. Gemma 4's ``thought\\n`` after ``<|channel>``): after a
             start marker, tokens whose bytes continue the label are dropped as part of the marker;
             the first token that does not continue it is reasoning (state ``THINKING``).
``ENDED``    everything is content; nothing changes the state again.

Initial state of a request (``initial_state``), first rule that applies:

1. ``include_reasoning: false`` in the chat-template kwargs -> ``ENDED`` (the grammar applies from the
   first generated token, and all text is content).
2. The prompt's *current turn* (after the last ``turn_start_markers`` token; the whole prompt when it
   has none): its last marker decides. An end or implicit-end marker -> ``ENDED`` (the template closed
   the thinking, e.g. Qwen3 ``enable_thinking: false`` writes ``<think>\\n\\n</think>\\n\\n``); a start
   marker -> ``THINKING`` (the template opened it, e.g. DeepSeek-R1 writes ``<think>\\n``). Markers of
   earlier turns are never looked at.
3. A thinking switch in the kwargs (``thinking_kwargs``, e.g. ``enable_thinking`` / ``thinking``): false
   -> ``ENDED``, true -> ``enabled_mode`` (``THINKING`` for most families: a start marker the model
   writes is then dropped).
4. The family's ``default_mode``: ``"thinking"`` -> ``THINKING`` (output without an end marker is all
   reasoning, e.g. cut by ``max_tokens``), ``"first_token"`` -> ``PENDING``, ``"off"`` -> ``ENDED``.

Costs: the prompt is scanned once, backwards, and only its current turn; every later call costs
O(len(tokens of the call)) (a C-level set test first, then a Python loop only over a call that holds a
marker), never O(tokens so far).
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

from thinkgate.reasoning.base import (ENDED, DeltaMessage, ReasoningEnd, ReasoningParser, ReasoningSplit, ReasoningStream,
                   StateTracker, checked_end, ending_ids_among, reasoning_excluded, thinking_switch)

__all__ = ["TokenMarkerParser", "TokenMarkerTracker", "TokenMarkerStream",
           "PENDING", "THINKING", "ENDED", "LABEL", "DefaultMode"]

PENDING: Literal[0] = 0
THINKING: Literal[1] = 1
LABEL: Literal[3] = 3
"""States >= LABEL: inside a start label, ``state - LABEL`` of its bytes matched."""
State = int
DefaultMode = Literal["thinking", "first_token", "off"]
_STILL_THINKING: tuple[State, None] = (THINKING, None)  # the step's answer for a call without a marker


class TokenMarkerParser(ReasoningParser):
    """A reasoning parser whose markers are single special tokens (see the module docstring).

    Class attributes a family sets:

    ``start_markers``        tokens that open the thinking (may be empty: the model never writes one);
    ``end_markers``          tokens that close it (dropped: neither reasoning nor content);
    ``implicit_end_markers`` tokens that close it and are the first content token (Qwen's ``<tool_call>``);
    ``optional_implicit_end_markers`` the same, used only when the vocabulary has them as one token
                             (a token the vocabulary lacks can never be generated);
    ``turn_start_markers``   tokens that start a chat turn; the prompt's current turn begins after the
                             last one (optional: those the vocabulary lacks are ignored);
    ``default_mode``         what the model does when neither the prompt nor the kwargs say;
    ``enabled_mode``         the same when a thinking kwarg is true;
    ``thinking_kwargs``      chat-template kwargs that switch the thinking on/off;
    ``start_label``          text that follows a start marker and belongs to it (dropped);
    ``content_strip_markers`` special tokens that wrap the content (ERNIE's ``<response>``): they stay
                             in the content ids, the front end drops their text (optional).

    Every start, end and implicit-end marker must be one token of the vocabulary, else the constructor
    raises ``ValueError`` naming the parser and the marker.
    """

    start_markers: ClassVar[tuple[str, ...]] = ("<think>",)
    end_markers: ClassVar[tuple[str, ...]] = ("</think>",)
    implicit_end_markers: ClassVar[tuple[str, ...]] = ()
    optional_implicit_end_markers: ClassVar[tuple[str, ...]] = ()
    turn_start_markers: ClassVar[tuple[str, ...]] = ()
    default_mode: ClassVar[DefaultMode] = "thinking"
    enabled_mode: ClassVar[DefaultMode] = "thinking"
    thinking_kwargs: ClassVar[tuple[str, ...]] = ("enable_thinking", "thinking")
    start_label: ClassVar[str] = ""
    content_strip_markers: ClassVar[tuple[str, ...]] = ()

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        if not (self.end_markers or self.implicit_end_markers or self.optional_implicit_end_markers):
            raise ValueError(f"reasoning parser {self.name!r} defines no end marker")
        self.start_token_ids: frozenset[int] = frozenset(self._require(m) for m in self.start_markers)
        self.end_token_ids: frozenset[int] = frozenset(self._require(m) for m in self.end_markers)
        optional = (self.vocabulary.token_id(m) for m in self.optional_implicit_end_markers)
        self.implicit_end_ids: frozenset[int] = frozenset(
            [self._require(m) for m in self.implicit_end_markers] + [t for t in optional if t is not None])
        strip_ids = (self.vocabulary.token_id(m) for m in self.content_strip_markers)
        self.content_strip_ids: frozenset[int] = frozenset(t for t in strip_ids if t is not None)
        self._label: bytes = self.start_label.encode("utf-8")
        turn_ids = (self.vocabulary.token_id(m) for m in self.turn_start_markers)
        self.turn_start_token_ids: frozenset[int] = frozenset(t for t in turn_ids if t is not None)
        # every token that can change a THINKING/PENDING state
        self._stop_ids = self.end_token_ids | self.implicit_end_ids
        self._marker_ids = self._stop_ids | self.start_token_ids
        self._prompt_stop_ids = self._marker_ids | self.turn_start_token_ids
        tb = self.vocabulary.token_bytes
        self._marker_text: dict[int, str] = {t: tb[t].decode("utf-8", errors="replace") for t in self._marker_ids}
        self._default_state: State = self.initial_state(())
        # PENDING: the tokens that do not start the content (a start marker opens the thinking, an end
        # marker closes it unwritten); any other token is the first content token
        self._pending_keep_ids: frozenset[int] = self.start_token_ids | self.end_token_ids
        # the forced end of thinking (a thinking budget): the first end marker; a model still deciding
        # writes an empty thinking (first start marker, then the end marker), as its own format spells it
        first_end = self._require(self.end_markers[0]) if self.end_markers else None
        first_start = self._require(self.start_markers[0]) if self.start_markers else None
        self._forced_end: tuple[int, ...] | None = None if first_end is None else (first_end,)
        self._forced_pending: tuple[int, ...] | None = (
            None if first_end is None else (first_end,) if first_start is None else (first_start, first_end))

    # -- contract: engine core -------------------------------------------------------------------
    @property
    def reasoning_end_token_ids(self) -> frozenset[int]:
        return self.end_token_ids

    @property
    def implicit_reasoning_end_token_ids(self) -> frozenset[int]:
        return self.implicit_end_ids

    def initial_state(self, prompt_token_ids: Sequence[int] = (),
                      chat_template_kwargs: Mapping[str, Any] | None = None) -> State:
        """The state of a request before its first generated token (rules in the module docstring)."""
        kw = self._kwargs(chat_template_kwargs)
        if reasoning_excluded(kw):
            return ENDED
        stops = self._prompt_stop_ids
        if not stops.isdisjoint(prompt_token_ids):
            for i in range(len(prompt_token_ids) - 1, -1, -1):
                t = prompt_token_ids[i]
                if t in stops:
                    if t in self.turn_start_token_ids:
                        break
                    return THINKING if t in self.start_token_ids else ENDED
        modes = {"thinking": THINKING, "first_token": PENDING, "off": ENDED}
        on = self.thinking_requested(kw)
        if on is not None:
            return modes[self.enabled_mode] if on else ENDED
        return modes[self.default_mode]

    def thinking_requested(self, kwargs: Mapping[str, Any]) -> bool | None:
        """The thinking switch in the chat-template kwargs (rule 3): True / False, None when unset.
        By default the first of ``thinking_kwargs`` that is set, read as a boolean; a family whose
        switch is not a boolean (``reasoning_effort: no_think``) overrides this."""
        return thinking_switch(kwargs, self.thinking_kwargs)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int],
                         chat_template_kwargs: Mapping[str, Any] | None = None) -> bool:
        return self.initial_state(prompt_token_ids, chat_template_kwargs) == ENDED

    def find_reasoning_end(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        """The first end or implicit-end marker in ``token_ids`` (read as generated while thinking)."""
        return self._walk(THINKING, token_ids)[1]

    def split(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
              chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningSplit:
        """Split a whole generated output into reasoning ids and content ids, exact to the token."""
        state = self.initial_state(prompt_token_ids, chat_template_kwargs)
        if state == ENDED:
            return ReasoningSplit([], list(token_ids), None, True)
        _, end, dropped = self._walk(state, token_ids)
        stop = len(token_ids) if end is None else end.offset
        reasoning = [t for i, t in enumerate(token_ids[:stop]) if i not in dropped]
        content = [] if end is None else list(token_ids[end.content_start:])
        return ReasoningSplit(reasoning, content, end, False)


    def new_tracker(self, prompt_token_ids: Sequence[int] = (),
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> TokenMarkerTracker:
        return TokenMarkerTracker(self, self.initial_state(prompt_token_ids, chat_template_kwargs))

    # -- contract: front end ---------------------------------------------------------------------
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
        """Split a whole generated text into (reasoning, content), markers removed, on the marker
        texts. The state before the text comes from the prompt / kwargs as for a tracker."""
        state = self.initial_state(prompt_token_ids, chat_template_kwargs)
        reasoning, content = self._split_text(state, text)
        return reasoning or None, content or None

    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> TokenMarkerStream:
        return TokenMarkerStream(self, self.initial_state(prompt_token_ids, chat_template_kwargs))

    # -- the one state machine -------------------------------------------------------------------
    def step(self, state: State, token_ids: Sequence[int]) -> tuple[State, ReasoningEnd | None]:
        """The tracker's step (:class:`~reasoning.base.Stepper`): ``_walk`` without the dropped indices."""
        if state == THINKING and self._marker_ids.isdisjoint(token_ids):
            return _STILL_THINKING  # the common step: more thinking (a C-level set test, no Python loop)
        state, end, _ = self._walk(state, token_ids)
        return state, end

    def keep_thinking_ids(self, state: State) -> frozenset[int] | None:
        # only PENDING is undecided: its first token always leaves it
        return self._pending_keep_ids if state == PENDING else None

    def ending_ids(self, state: State) -> frozenset[int] | None:
        if state == PENDING:
            return None  # any token but the keepers starts the content
        if state == ENDED:
            return frozenset()
        return ending_ids_among(self, state, self._stop_ids)  # only end / implicit-end markers end it

    def forced_end_ids(self, state: State) -> tuple[int, ...] | None:
        # an implicit end marker is content (Qwen's <tool_call>): a family with only those cannot force
        return checked_end(self, state, self._forced_pending if state == PENDING else self._forced_end)

    def _walk(self, state: State, token_ids: Sequence[int]) -> tuple[State, ReasoningEnd | None, set[int]]:
        """Run ``token_ids`` from ``state``: (new state, where it ended, indices of dropped markers)."""
        if state == ENDED:
            return ENDED, None, set()
        dropped: set[int] = set()
        if state == THINKING and self._marker_ids.isdisjoint(token_ids):
            return THINKING, None, dropped
        starts, ends, implicit = self.start_token_ids, self.end_token_ids, self.implicit_end_ids
        label, tb = self._label, self.vocabulary.token_bytes
        after_start: State = LABEL if label else THINKING
        for i, t in enumerate(token_ids):
            if state >= LABEL and t not in self._marker_ids:
                pos, b = state - LABEL, tb[t]
                if b and label.startswith(b, pos):  # the token continues the label: part of the marker
                    dropped.add(i)
                    pos += len(b)
                    state = THINKING if pos == len(label) else LABEL + pos
                    continue
                state = THINKING  # not the label: this token is reasoning
            if t in ends:
                dropped.add(i)
                return ENDED, ReasoningEnd(i, False), dropped
            if t in implicit:
                return ENDED, ReasoningEnd(i, True), dropped
            if t in starts:
                dropped.add(i)
                state = after_start
            elif state == PENDING:  # the model skipped thinking: this token is content
                return ENDED, ReasoningEnd(i, True), dropped
        return state, None, dropped

    def _split_text(self, state: State, text: str) -> tuple[str, str]:
        """The text twin of ``_walk`` on a whole text: (reasoning, content)."""
        if state == ENDED:
            return "", self._strip_content(text)
        starts = [self._marker_text[t] for t in self.start_token_ids]
        if state == PENDING:
            lead = next((m for m in self._marker_text.values() if text.startswith(m)), None)
            if lead is None or lead in (self._marker_text[t] for t in self.implicit_end_ids):
                return "", self._strip_content(text)
        best: tuple[int, int, bool] | None = None  # (position, marker length, is content)
        for t in self._stop_ids:
            m = self._marker_text[t]
            pos = text.find(m)
            if pos >= 0 and (best is None or pos < best[0]):
                best = (pos, len(m), t in self.implicit_end_ids)
        if best is None:
            reasoning, content = text, ""
        else:
            pos, n, is_content = best
            reasoning, content = text[:pos], text[pos:] if is_content else text[pos + n:]
        label = self.start_label
        for m in starts:
            if label:
                reasoning = reasoning.replace(m + label, "")
            reasoning = reasoning.replace(m, "")
        if state >= LABEL and label and reasoning.startswith(label[state - LABEL:]):
            reasoning = reasoning[len(label) - (state - LABEL):]
        return reasoning, self._strip_content(content)

    def _strip_content(self, content: str) -> str:
        for t in self.content_strip_ids:
            content = content.replace(self.vocabulary.token_bytes[t].decode("utf-8", errors="replace"), "")
        return content


class TokenMarkerTracker(StateTracker[State]):
    """Engine-core state of one request (see :class:`TokenMarkerParser`): the shared
    :class:`~reasoning.base.StateTracker` over the int state; O(len(step)) per call."""

    __slots__ = ()

    @property
    def state(self) -> State:
        """``PENDING`` (0), ``THINKING`` (1), ``ENDED`` (2), or inside a start label (>= ``LABEL``)."""
        return self._state


class TokenMarkerStream(ReasoningStream):
    """Front-end streaming splitter of one request; the cost of ``feed`` grows with its delta only.

    Markers give no text. When ``text`` is None (or equals this stream's own decoding of the delta)
    the text of each token run is decoded from the vocabulary with an incremental UTF-8 decoder (a
    character split across calls comes out whole, once complete). When ``text`` differs (another
    detokenizer), the ids still decide where the reasoning ends and ``text`` only supplies the
    characters: each boundary is placed at the occurrence of its marker text whose rank matches our
    own decoding (a marker spelled with ordinary tokens in the reasoning is text, not a boundary);
    if ``text`` cannot be aligned that way (special tokens skipped by the detokenizer), the stream's
    own decoding is used.
    """

    def __init__(self, parser: TokenMarkerParser, state: State) -> None:
        self._parser = parser
        self._state: State = state
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    @property
    def ended(self) -> bool:
        return self._state == ENDED

    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        before = self._state
        state, end, dropped = self._parser._walk(before, token_ids)
        self._state = state
        n = len(token_ids)
        if before == ENDED:
            r_stop = c_start = 0
        elif end is None:
            r_stop = c_start = n
        else:
            r_stop, c_start = end.offset, end.content_start
        # runs: (kind, ids) with kind "r" (reasoning), "m" (a marker: no text) or "c" (content)
        runs: list[tuple[str, list[int]]] = []
        cur: list[int] = []
        for i in range(r_stop):
            if i in dropped:
                if cur:
                    runs.append(("r", cur))
                    cur = []
                runs.append(("m", [token_ids[i]]))
            else:
                cur.append(token_ids[i])
        if cur:
            runs.append(("r", cur))
        if end is not None and not end.is_content:
            runs.append(("m", [token_ids[end.offset]]))
        if c_start < n:
            runs.append(("c", list(token_ids[c_start:])))
        own = self._decode_runs(runs)
        if text is None or text == (own.reasoning or "") + (own.content or ""):
            return own
        given = self._split_given(runs, text, before == ENDED)
        return own if given is None else given

    def finish(self) -> DeltaMessage:
        """The end of the output: flush a character left incomplete (as U+FFFD), in the current part."""
        rest = self._decoder.decode(b"", final=True)
        if not rest:
            return DeltaMessage()
        return DeltaMessage(None, rest) if self._state == ENDED else DeltaMessage(rest, None)

    def _decode_runs(self, runs: list[tuple[str, list[int]]]) -> DeltaMessage:
        tb = self._parser.vocabulary.token_bytes
        strip = self._parser.content_strip_ids
        out: dict[str, list[str]] = {"r": [], "c": []}
        for kind, ids in runs:
            if kind == "c" and strip:
                ids = [t for t in ids if t not in strip]
            if kind != "m":
                out[kind].append(self._decoder.decode(b"".join([tb[t] for t in ids])))
        return DeltaMessage("".join(out["r"]) or None, "".join(out["c"]) or None)

    def _split_given(self, runs: list[tuple[str, list[int]]], text: str, ended_before: bool) -> DeltaMessage | None:
        """Split a detokenizer's ``text`` at the boundaries the ids put; None when it cannot be aligned.

        The ids decide where each boundary is; ``text`` only supplies the characters. A boundary (a
        dropped marker, or the implicit-end token that starts the content) lies before the text of its
        marker token; reasoning may spell the same text with ordinary tokens, so the boundary is the
        ``k+1``-th occurrence of the marker text in ``text`` after the previous boundary, ``k`` being
        the number of occurrences our own decoding has before it (counted on the bytes of the run
        since the previous boundary, plus the marker: an occurrence overlapping the marker counts as
        before it). When ``text`` cannot be aligned that way (it lacks that occurrence, or holds more
        or fewer occurrences of a boundary's marker text than our decoding of the delta: the
        detokenizer skipped a special token) the caller uses its own decoding. O(len(delta)).
        """
        mt = self._parser._marker_text
        tb = self._parser.vocabulary.token_bytes
        implicit = () if ended_before else self._parser.implicit_end_ids
        pieces: dict[str, list[str]] = {"r": [], "c": []}
        pos = 0
        current: str | None = None  # the kind of the text-bearing run being read
        run_bytes = b""  # our own bytes of that run
        boundary_markers: set[str] = set()
        for kind, ids in runs:
            if kind == "m" or (kind == "c" and ids[0] in implicit):  # a boundary: find its marker text
                marker = mt.get(ids[0])
                if marker is None:
                    return None
                boundary_markers.add(marker)
                j = _nth_occurrence(text, marker, pos, _occurrences_before(run_bytes, marker.encode("utf-8")))
                if j < 0:
                    return None
                if current is not None:
                    pieces[current].append(text[pos:j])
                elif j != pos:
                    return None
                pos = j + len(marker) if kind == "m" else j
                current = None
                run_bytes = b""
            if kind != "m":
                current = kind
                run_bytes = b"".join([tb[t] for t in ids])
        if current is not None:
            pieces[current].append(text[pos:])
        elif pos != len(text):
            return None
        if boundary_markers:  # the text must hold every occurrence ours has, no fewer, no more
            own = b"".join([tb[t] for _, ids in runs for t in ids])
            if any(own.count(m.encode("utf-8")) != text.count(m) for m in boundary_markers):
                return None
        content = self._parser._strip_content("".join(pieces["c"]))
        return DeltaMessage("".join(pieces["r"]) or None, content or None)


def _occurrences_before(run: bytes, marker: bytes) -> int:
    """How many occurrences of ``marker`` start in ``run + marker`` before the marker appended (at
    ``len(run)``), overlapping ones included: the rank of the real marker among its textual twins."""
    data = run + marker
    k, i = 0, data.find(marker)
    while 0 <= i < len(run):
        k += 1
        i = data.find(marker, i + 1)
    return k


def _nth_occurrence(text: str, marker: str, pos: int, k: int) -> int:
    """The start of the ``k``-th (0-based) occurrence of ``marker`` in ``text`` at or after ``pos``,
    overlapping ones included; -1 when there are fewer."""
    i = text.find(marker, pos)
    while k > 0 and i >= 0:
        k -= 1
        i = text.find(marker, i + 1)
    return i
