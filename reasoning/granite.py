"""granite: IBM Granite 3.2/3.3 thinking, delimited by *text* markers, not special tokens.

With ``thinking: true`` in the chat-template kwargs, the Granite 3.x template adds a system instruction
("Write your thoughts after 'Here is my thought process:' and write your response after 'Here is my
response:'") and the model writes::

    Here is my thought process:
    ...thinking...
    Here is my response:
    ...answer...

The markers are plain text that the tokenizer splits into several ordinary tokens (``Here`` ``␣is``
``␣my`` ``␣response`` ``:`` on Qwen3.6; ``:\\n`` is one token on DeepSeek V4, so the last marker token
often carries text past the marker). As vLLM's ``granite`` parser does, the markers are matched
case-sensitively in both spellings the models use: ``Here is`` and ``Here's``
(:data:`START_MARKERS`, :data:`END_MARKERS`).

States of a request (latched once ``ENDED``)
--------------------------------------------
``PENDING``   thinking is on and the model has written nothing decisive yet. Leading ASCII whitespace
              keeps it pending; then the output either completes a start marker (-> ``THINKING``; the
              leading whitespace and the marker are dropped), completes an end marker (-> ``ENDED``:
              the model skipped its thoughts; whitespace and marker dropped), or stops matching every
              marker (-> ``ENDED``: the model answered without thinking; everything is content).
``THINKING``  everything is reasoning until an end marker completes (-> ``ENDED``; marker dropped). A
              start marker written again inside the thoughts is just reasoning text.
``ENDED``     everything is content.

Initial state (first rule that applies): ``include_reasoning: false`` -> ``ENDED``; the prompt's
current turn (the text after its last special token, i.e. what was prefilled after the assistant
header) holds a marker: its last one decides (end -> ``ENDED``, start -> ``THINKING``); the kwarg
``thinking`` (or ``enable_thinking``): true -> ``PENDING``, false -> ``ENDED``; otherwise ``ENDED``:
Granite's template thinks only when asked, as vLLM documents ("pass ``thinking=True``").

Token offsets (engine core)
---------------------------
The end of reasoning is at the token that *completes* an end marker (its ``:``): ``ReasoningEnd(k,
is_content=False)``, and the grammar applies from token ``k + 1``, the first token boundary after the
marker. When token ``k`` carries text past the marker (``:\\n``, ``:\\n\\n``, ``: {``), that tail was
sampled before the grammar could apply: it is *content text* for the front end but not a content
*id*, so ``content_text == tail + decode(content_ids)``. Granite writes a newline there; a grammar
that starts at a token boundary cannot do better without rewinding sampled tokens. When the model
skips thinking (``PENDING`` stops matching), the end is ``ReasoningEnd(k, is_content=True)`` at the
token holding the first byte that matches no marker; tokens before it (leading whitespace, or a
prefix such as ``Here is``) were sampled unconstrained and are content text, not content ids.

``count_reasoning_tokens`` counts the tokens strictly between the opening (whitespace + start
marker) and the first token that holds a byte of the end marker: a token that straddles a marker
boundary belongs to the marker.

Costs
-----
The tracker keeps at most ``len(longest marker) - 1`` bytes (the suffix of the output that could still
begin a marker) and, while ``PENDING``, the matched marker prefix (no whitespace is stored: it is
counted). A call costs O(bytes of its tokens + marker length), never O(output so far). The prompt is
read once, backwards, to its last special token.

``reasoning_end_token_ids`` / ``implicit_reasoning_end_token_ids``
------------------------------------------------------------------
No single token ends Granite's reasoning. ``reasoning_end_token_ids`` is the set of tokens that *can*
complete an end marker (those whose text up to one of its ``:`` is a suffix of an end marker: ``:``,
``:\\n``, ``␣response:`` ...): a necessary condition, useful as a prefilter for an explicit end, never
a sufficient one. ``implicit_reasoning_end_token_ids`` is empty: the only implicit end is the model
skipping its thoughts at the start of its output, which any token can cause. Use the tracker.

While ``PENDING``, the output is neither thinking nor content yet. An engine that constrains the
content must, at each pending step, allow the grammar's first tokens *and*
``tracker.keep_thinking_token_ids()`` (leading whitespace and tokens that continue or complete a marker,
computed once per matched prefix per model): masking with the grammar alone would forbid ``Here`` and
so the thoughts; masking nothing lets a marker-like prefix (``Here is the``) reach the grammar.

Streams hold back text that may still be part of a marker (at most a marker's length, plus leading
whitespace while ``PENDING``); call :meth:`GraniteStream.finish` at the end of generation to flush it.
"""

from __future__ import annotations

import codecs
import threading
from bisect import bisect_right
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NamedTuple

from thinkgate.reasoning.base import (ENDED, DeltaMessage, ReasoningEnd, ReasoningParser, ReasoningSplit, ReasoningStream,
                   StateTracker, checked_end, reasoning_excluded, thinking_switch)
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["GraniteReasoningParser", "GraniteTracker", "GraniteStream",
           "START_MARKERS", "END_MARKERS", "PENDING", "THINKING", "ENDED"]

START_MARKERS: tuple[str, ...] = ("Here is my thought process:", "Here's my thought process:")
"""Text that opens Granite's thoughts (vLLM's accepted set)."""
END_MARKERS: tuple[str, ...] = ("Here is my response:", "Here's my response:")
"""Text that closes Granite's thoughts and opens the response (vLLM's accepted set)."""

PENDING: Literal[0] = 0
THINKING: Literal[1] = 1
Mode = Literal[0, 1, 2]

_START_B = tuple(m.encode() for m in START_MARKERS)
_END_B = tuple(m.encode() for m in END_MARKERS)
_ALL_B = _START_B + _END_B
_PREFIXES = frozenset(m[:k] for m in _ALL_B for k in range(1, len(m)))  # proper prefixes, PENDING
_END_PREFIXES = frozenset(m[:k] for m in _END_B for k in range(1, len(m)))  # proper prefixes, THINKING
_MAX_CARRY = max(len(m) for m in _END_B) - 1
_WS_BYTES = b" \t\n\r\x0b\x0c"
_WS = frozenset(_WS_BYTES)

# an event of a scan: (kind, start, end) in byte offsets of the data fed in that call; ``start`` may be
# negative (the marker began in bytes held from an earlier call).
#   "open": a start marker completed; [start, end) is the marker (leading whitespace not included)
#   "end":  an end marker completed; [start, end) is the marker
#   "skip": PENDING stopped matching at byte ``start`` (end = start + 1): the model skipped thinking
Event = tuple[str, int, int]


def _carry(buf: bytes) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of an end marker."""
    for k in range(min(len(buf), _MAX_CARRY), 0, -1):
        if buf[-k:] in _END_PREFIXES:
            return k
    return 0


def _find_end(buf: bytes) -> tuple[int, int] | None:
    """The first end marker in ``buf``: (start, end), or None."""
    best: tuple[int, int] | None = None
    for m in _END_B:
        s = buf.find(m)
        if s >= 0 and (best is None or s < best[0]):
            best = (s, s + len(m))
    return best


class Scan(NamedTuple):
    """The state of a request that has not ended (an ended one is ``ENDED``): immutable, small.

    ``part``: PENDING - the marker prefix matched so far (after leading whitespace);
    THINKING - the held suffix of the thoughts that may begin an end marker (<= ``_MAX_CARRY`` bytes).
    """

    mode: Mode
    part: bytes = b""


State = Scan | int
"""A :class:`Scan` (``PENDING`` / ``THINKING``) or ``ENDED``."""


def _unpack(st: State) -> tuple[Mode, bytes]:
    return (ENDED, b"") if st == ENDED else st  # type: ignore[return-value]


def _feed(st: State, data: bytes) -> tuple[State, list[Event]]:
    """The byte-level state machine (see the module docstring): the state after ``data`` and the
    events in it. Pure."""
    mode, part = _unpack(st)
    events: list[Event] = []
    i, n = 0, len(data)
    while i < n and mode != ENDED:
        if mode == PENDING:
            while i < n:
                b = data[i]
                if not part and b in _WS:
                    i += 1
                    continue
                part += data[i:i + 1]
                i += 1
                if part in _START_B or part in _END_B:
                    events.append(("open" if part in _START_B else "end", i - len(part), i))
                    mode = THINKING if part in _START_B else ENDED
                    part = b""
                    break
                if part not in _PREFIXES:
                    events.append(("skip", i - 1, i))
                    mode = ENDED
                    part = b""
                    break
        else:  # THINKING
            held = part
            buf = held + data[i:] if i else held + data
            found = _find_end(buf)
            base = i - len(held)
            if found is not None:
                events.append(("end", found[0] + base, found[1] + base))
                mode = ENDED
                part = b""
            else:
                k = _carry(buf)
                part = buf[len(buf) - k:] if k else b""
            i = n
    if mode == ENDED:
        return ENDED, events
    if isinstance(st, Scan) and st.mode == mode and st.part == part:
        return st, events
    return Scan(mode, part), events


@register_reasoning_parser()
class GraniteReasoningParser(ReasoningParser):
    """IBM Granite 3.x text-marker reasoning (see the module docstring for states and offsets).

    Construction checks that the vocabulary can spell every marker with ordinary tokens and raises
    ``ValueError`` naming the parser and the marker otherwise.
    """

    start_markers: tuple[str, ...] = START_MARKERS
    end_markers: tuple[str, ...] = END_MARKERS
    thinking_kwargs: tuple[str, ...] = ("thinking", "enable_thinking")

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        v = self.vocabulary
        self._special_ids = v.special_token_ids
        self._keep_lock = threading.Lock()
        self._keep_cache: dict[bytes, frozenset[int]] = {}
        self._buckets: tuple[dict[int, list[int]], dict[int, list[int]], list[int]] | None = None
        self._forced_cache: dict[bytes, tuple[tuple[int, ...], ...]] = {}  # prefix -> encoded candidates
        pieces, self._end_candidates = self._scan_vocabulary()
        for m in START_MARKERS + END_MARKERS:
            if not _can_spell(m.encode(), pieces):
                raise ValueError(
                    f"reasoning parser {self.name!r}: the vocabulary {v.name!r} cannot spell the marker "
                    f"{m!r} with ordinary tokens"
                )

    def _scan_vocabulary(self) -> tuple[frozenset[bytes], frozenset[int]]:
        """One pass over the ordinary tokens: those that are pieces of a marker, and those that can
        complete an end marker (their text up to one of their ``:`` is a suffix of an end marker)."""
        substrings = {m[i:j] for m in _ALL_B for i in range(len(m)) for j in range(i + 1, len(m) + 1)}
        pieces: set[bytes] = set()
        completing: set[int] = set()
        special = self._special_ids
        for tid, b in enumerate(self.vocabulary.token_bytes):
            if not b or tid in special:
                continue
            if b in substrings:
                pieces.add(b)
            p = b.find(b":")
            if p >= 0 and any(m.endswith(b[:p + 1]) for m in _END_B):
                completing.add(tid)  # end markers hold one ":", their last byte: only the first counts
        return frozenset(pieces), frozenset(completing)

    # -- contract: engine core -------------------------------------------------------------------
    @property
    def reasoning_end_token_ids(self) -> frozenset[int]:
        """Tokens that can complete an end marker: necessary for an explicit end, not sufficient."""
        return self._end_candidates

    @property
    def implicit_reasoning_end_token_ids(self) -> frozenset[int]:
        """Empty: only skipping the thoughts at the start of the output ends implicitly (any token)."""
        return frozenset()

    def _initial(self, prompt_token_ids: Sequence[int] = (),
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> State:
        kw = self._kwargs(chat_template_kwargs)
        if reasoning_excluded(kw):
            return ENDED
        special, tb = self._special_ids, self.vocabulary.token_bytes
        i = len(prompt_token_ids)
        while i > 0 and prompt_token_ids[i - 1] not in special:
            i -= 1
        if i < len(prompt_token_ids):
            prefill = b"".join([tb[t] for t in prompt_token_ids[i:]])
            last_end = max(prefill.rfind(m) for m in _END_B)
            last_start = max(prefill.rfind(m) for m in _START_B)
            if last_end >= 0 and last_end > last_start:
                return ENDED
            if last_start >= 0:
                k = _carry(prefill)
                return Scan(THINKING, prefill[len(prefill) - k:] if k else b"")
        on = thinking_switch(kw, self.thinking_kwargs)
        if on is not None:
            return Scan(PENDING) if on else ENDED
        return ENDED

    def initial_state(self, prompt_token_ids: Sequence[int] = (),
                      chat_template_kwargs: Mapping[str, Any] | None = None) -> Mode:
        """``PENDING``, ``THINKING`` or ``ENDED`` before the first generated token."""
        return _unpack(self._initial(prompt_token_ids, chat_template_kwargs))[0]

    def is_reasoning_end(self, prompt_token_ids: Sequence[int],
                         chat_template_kwargs: Mapping[str, Any] | None = None) -> bool:
        return self._initial(prompt_token_ids, chat_template_kwargs) == ENDED

    def find_reasoning_end(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        """The reasoning end inside ``token_ids`` read as the whole output of a request with thinking
        on and nothing prefilled (``PENDING`` at its first token)."""
        return self._split(Scan(PENDING), token_ids).end

    def split(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
              chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningSplit:
        """Split a whole generated output (state from the prompt / kwargs, as for a tracker).
        Reasoning ids: the tokens strictly between the opening (whitespace + start marker) and the
        first token holding an end-marker byte (a token straddling a marker belongs to the marker);
        content ids: from ``end.content_start``."""
        return self._split(self._initial(prompt_token_ids, chat_template_kwargs), token_ids)

    def _split(self, sc: State, token_ids: Sequence[int]) -> ReasoningSplit:
        ids = list(token_ids)
        if sc == ENDED:
            return ReasoningSplit([], ids, None, True)
        data, ends = _join(self.vocabulary.token_bytes, ids)
        r_start = 0
        r_stop = len(ids)
        end: ReasoningEnd | None = None
        thinking = _unpack(sc)[0] == THINKING
        for kind, s, e in _feed(sc, data)[1]:
            if kind == "open":
                r_start = bisect_right(ends, e - 1) + 1
                thinking = True
            elif kind == "end":
                # from PENDING (no thoughts): the leading whitespace is part of the opening, not reasoning
                r_stop = (bisect_right(ends, s) if s >= 0 else 0) if thinking else r_start
                end = ReasoningEnd(bisect_right(ends, e - 1), False)
            else:  # skip
                r_start = r_stop = 0
                end = ReasoningEnd(bisect_right(ends, s), True)
        reasoning = ids[r_start:r_stop] if r_stop > r_start else []
        content = [] if end is None else ids[end.content_start:]
        return ReasoningSplit(reasoning, content, end, False)

    def new_tracker(self, prompt_token_ids: Sequence[int] = (),
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> GraniteTracker:
        return GraniteTracker(self, self._initial(prompt_token_ids, chat_template_kwargs))

    def step(self, state: State, token_ids: Sequence[int]) -> tuple[State, ReasoningEnd | None]:
        """The tracker's step (:class:`~reasoning.base.Stepper`): O(bytes of the call + marker length)."""
        if state == ENDED or len(token_ids) == 0:
            return state, None
        data, ends = _join(self.vocabulary.token_bytes, token_ids)
        state, events = _feed(state, data)
        for kind, s, e in events:
            if kind == "end":
                return state, ReasoningEnd(bisect_right(ends, e - 1), False)
            if kind == "skip":
                return state, ReasoningEnd(bisect_right(ends, s), True)
        return state, None

    def keep_thinking_ids(self, state: State) -> frozenset[int] | None:
        """While ``PENDING``: :meth:`pending_keep_token_ids` of the matched prefix; else None
        (thinking: nothing is masked; ended: the grammar alone)."""
        mode, part = _unpack(state)
        return self.pending_keep_token_ids(part) if mode == PENDING else None

    def ending_ids(self, state: State) -> frozenset[int] | None:
        # the end markers are texts: ordinary tokens can complete them, so no id set holds them off
        return frozenset() if state == ENDED else None

    def forced_end_ids(self, state: State) -> tuple[int, ...] | None:
        """The end of thinking, spelled by the tokenizer: while thinking, a newline and the first end
        marker; while ``PENDING``, the rest of a marker the matched prefix begins (an end marker: the
        model skips its thoughts; else the start marker, a newline and the end marker). None without
        an encoder."""
        if state == ENDED:
            return ()
        v = self.vocabulary
        if not v.can_encode:
            return None
        mode, part = _unpack(state)
        key = b"\x00" if mode == THINKING else part  # no PENDING prefix holds a NUL byte
        candidates = self._forced_cache.get(key)
        if candidates is None:
            if mode == THINKING:
                texts = ["\n" + END_MARKERS[0]]
            else:
                texts = [m[len(part):].decode() for m in _END_B if m.startswith(part)]
                texts += [m[len(part):].decode() + "\n" + END_MARKERS[0] for m in _START_B if m.startswith(part)]
            candidates = tuple(tuple(v.encode(t)) for t in texts)
            if len(self._forced_cache) < 256:
                self._forced_cache[key] = candidates
        for c in candidates:
            found = checked_end(self, state, c)
            if found is not None:
                return found
        return None

    def pending_keep_token_ids(self, part: bytes = b"") -> frozenset[int]:
        """While ``PENDING`` with ``part`` matched: the ordinary tokens that, as the next token, do not
        end the thinking implicitly (leading whitespace, a continuation of a marker, or a token that
        completes one). Every other token would be the first content token. Built once per ``part``
        per model (a pass over the tokens that start with the next marker byte), then cached."""
        cached = self._keep_cache.get(part)
        if cached is not None:
            return cached
        with self._keep_lock:
            if self._buckets is None:
                self._buckets = self._bucket_tokens()
            raw, stripped, ws_only = self._buckets
            tb = self.vocabulary.token_bytes
            rests = {m[len(part):] for m in _ALL_B if m.startswith(part) and len(m) > len(part)}
            out: set[int] = set(ws_only) if not part else set()
            for first in {r[0] for r in rests}:
                for tid in (raw if part else stripped).get(first, ()):
                    b = tb[tid] if part else tb[tid].lstrip(_WS_BYTES)
                    if any(r.startswith(b) or b.startswith(r) for r in rests):
                        out.add(tid)
            keep = frozenset(out)
            self._keep_cache[part] = keep
            return keep

    def _bucket_tokens(self) -> tuple[dict[int, list[int]], dict[int, list[int]], list[int]]:
        """Ordinary tokens by first byte, by first byte after leading whitespace, and the all-whitespace ones."""
        raw: dict[int, list[int]] = {}
        stripped: dict[int, list[int]] = {}
        ws_only: list[int] = []
        special = self._special_ids
        for tid, b in enumerate(self.vocabulary.token_bytes):
            if not b or tid in special:
                continue
            raw.setdefault(b[0], []).append(tid)
            r = b.lstrip(_WS_BYTES)
            if r:
                stripped.setdefault(r[0], []).append(tid)
            else:
                ws_only.append(tid)
        return raw, stripped, ws_only

    # -- contract: front end ---------------------------------------------------------------------
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None
                          ) -> tuple[str | None, str | None]:
        """Split a whole generated text into (reasoning, content) at the marker texts, character-exact.

        The state before the text comes from the prompt / kwargs as for a tracker (by default thinking
        is off, so everything is content: pass ``{"thinking": True}`` as the request did). Output that
        never ends its thoughts (cut by ``max_tokens``) is all reasoning; output that does not open with
        a marker is all content (the model skipped thinking).
        """
        mode, part = _unpack(self._initial(prompt_token_ids, chat_template_kwargs))
        reasoning, content = _split_text(mode, part.decode(), text)
        return reasoning or None, content or None

    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> GraniteStream:
        return GraniteStream(self, self._initial(prompt_token_ids, chat_template_kwargs))


def _can_spell(marker: bytes, pieces: frozenset[bytes]) -> bool:
    """True when tokens from ``pieces`` concatenate to ``marker`` (reachability over its positions)."""
    reach = [False] * (len(marker) + 1)
    reach[0] = True
    for i in range(len(marker)):
        if reach[i]:
            for j in range(i + 1, len(marker) + 1):
                if marker[i:j] in pieces:
                    reach[j] = True
    return reach[-1]


def _join(tb: Sequence[bytes], ids: Sequence[int]) -> tuple[bytes, list[int]]:
    """The bytes of ``ids`` and the end offset of each token in them."""
    parts = [tb[t] for t in ids]
    ends: list[int] = []
    n = 0
    for p in parts:
        n += len(p)
        ends.append(n)
    return b"".join(parts), ends


def _split_text(mode: Mode, held: str, text: str) -> tuple[str, str]:
    """The whole-text reference (plain ``str`` operations, independent of :func:`_feed`)."""
    if mode == ENDED:
        return "", text
    if mode == PENDING:
        body = text.lstrip(" \t\n\r\x0b\x0c")
        for m in START_MARKERS:
            if body.startswith(m):
                return _split_text(THINKING, "", body[len(m):])
        for m in END_MARKERS:
            if body.startswith(m):
                return "", body[len(m):]
        if any(m.startswith(body) for m in START_MARKERS + END_MARKERS):
            return text, ""  # still undecided when the output stopped: never ended -> reasoning
        return "", text
    full = held + text
    best: tuple[int, int] | None = None
    for m in END_MARKERS:
        s = full.find(m)
        if s >= 0 and (best is None or s < best[0]):
            best = (s, s + len(m))
    if best is None:
        return text, ""
    s, e = best
    return full[len(held):s] if s > len(held) else "", full[e:]


def _same_split(before: State, own: bytes, mine: tuple, given: bytes, theirs: tuple) -> bool:
    """True when the detokenizer's ``given`` bytes of a delta split as our ``own`` bytes of its ids do:
    the same state after, the same events with the same marker texts, and between every two
    boundaries the same number of occurrences of every marker text (so a marker that only the given
    text spells, e.g. ``Here's my response:`` made of ``Here`` ``␣'s`` by cleaned-up spaces, or one
    whose pieces a skipped special token separated, is never taken for the real one). O(len(delta))."""
    if mine[0] != theirs[0]:
        return False
    ev_a, ev_b = mine[5], theirs[5]
    if [k for k, _, _ in ev_a] != [k for k, _, _ in ev_b]:
        return False
    hold = _unpack(before)[1]
    buf_a, buf_b = hold + own, hold + given
    off = len(hold)
    cuts_a: list[int] = [0]
    cuts_b: list[int] = [0]
    for (kind, s, e), (_, s2, e2) in zip(ev_a, ev_b):
        if kind != "skip" and buf_a[max(0, s + off):e + off] != buf_b[max(0, s2 + off):e2 + off]:
            return False
        cuts_a += [max(0, s + off), e + off]
        cuts_b += [max(0, s2 + off), e2 + off]
    cuts_a.append(len(buf_a))
    cuts_b.append(len(buf_b))
    for i in range(0, len(cuts_a), 2):
        seg_a, seg_b = buf_a[cuts_a[i]:cuts_a[i + 1]], buf_b[cuts_b[i]:cuts_b[i + 1]]
        if any(seg_a.count(m) != seg_b.count(m) for m in _ALL_B):
            return False
    return True


class GraniteTracker(StateTracker[State]):
    """Engine-core state of one request: the shared :class:`~reasoning.base.StateTracker` over a
    :class:`Scan` or ``ENDED``; O(bytes of the call + marker length) per call.

    ``keep_thinking_token_ids()``: while ``PENDING``, the tokens that, as the next token, keep the
    thinking possible (see :meth:`GraniteReasoningParser.pending_keep_token_ids`); any other token is
    content. An engine that constrains the output lets the grammar's first tokens *or* these through
    while pending, at every pending step (the decision can take several tokens: ``Here`` ``␣is`` ...).
    """

    __slots__ = ()

    @property
    def state(self) -> Mode:
        """``PENDING`` (0), ``THINKING`` (1) or ``ENDED`` (2)."""
        return _unpack(self._state)[0]


class GraniteStream(ReasoningStream):
    """Front-end streaming splitter of one request; the cost of ``feed`` grows with its delta only.

    The token ids decide where the thoughts open and end (the bytes of the ids, as the tracker and
    :meth:`GraniteReasoningParser.split` read them); ``text``, when given, only supplies the
    characters, and only when it splits the same way (else the delta is decoded from the ids): text a
    detokenizer made look like a marker (cleaned-up spaces, skipped special tokens) ends nothing. It
    works on UTF-8 bytes, so a character split across calls comes out whole once complete. Text that may still be part of a marker is held
    back (at most a marker's length, plus leading whitespace while undecided); :meth:`finish` releases
    it at the end of generation (as reasoning: an output cut inside a marker never ended its thoughts).
    The concatenated deltas equal :meth:`GraniteReasoningParser.extract_reasoning` on the whole text.
    """

    def __init__(self, parser: GraniteReasoningParser, state: State) -> None:
        self._parser = parser
        self._st = state
        self._skip = len(_unpack(state)[1])  # held bytes that came from the prompt: never emitted
        self._ws = bytearray()  # leading whitespace held while PENDING
        self._rdec = codecs.getincrementaldecoder("utf-8")("replace")
        self._cdec = codecs.getincrementaldecoder("utf-8")("replace")
        self._finished = False

    @property
    def ended(self) -> bool:
        return self._st == ENDED

    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        if self._finished:
            raise ValueError("GraniteStream.feed after finish()")
        before = self._st
        tb = self._parser.vocabulary.token_bytes
        own = b"".join([tb[t] for t in token_ids])
        given = None if text is None else text.encode("utf-8")
        # the ids decide (the bytes the tracker and the whole split read) and our decoders always follow
        # them, so the stream stays right whichever source a delta's characters come from; the given
        # text supplies the characters when it splits the same way (see _same_split)
        if self._st == ENDED:
            c = self._cdec.decode(own)
            return DeltaMessage(None, c or None) if given is None or given == own else DeltaMessage(None, text or None)
        mine = self._advance(own)
        theirs = None if given is None or given == own else self._advance(given)
        self._st, self._skip = mine[0], mine[4]
        self._ws[:] = mine[3]
        out = self._out(mine[1], mine[2])
        if theirs is None or not _same_split(before, own, mine, given, theirs):  # type: ignore[arg-type]
            return out
        r, c = theirs[1].decode("utf-8", "replace"), theirs[2].decode("utf-8", "replace")
        return DeltaMessage(r or None, c or None)

    def _advance(self, data: bytes) -> tuple[State, bytes, bytes, bytes, int, list[Event]]:
        """The delta ``data`` from the current state, without changing the stream: (state after,
        reasoning bytes, content bytes, held whitespace after, prompt bytes still to skip, events)."""
        st = self._st
        mode, hold = _unpack(st)
        st, events = _feed(st, data)
        part = _unpack(st)[1]
        ws = bytearray(self._ws)
        skip = self._skip
        buf = hold + data if hold else data
        off = len(hold)
        cur = min(skip, len(buf))
        r: list[bytes] = []
        c: list[bytes] = []
        for kind, s, e in events:
            if kind == "open":
                ws.clear()
                cur = e + off
                mode = THINKING
            elif kind == "end":
                if mode == THINKING and s + off > cur:
                    r.append(buf[cur:s + off])
                ws.clear()
                cur = max(cur, e + off)
                mode = ENDED
            else:  # skip: everything held is content
                c.append(bytes(ws))
                ws.clear()
                mode = ENDED
        if mode == ENDED:
            c.append(buf[cur:])
            skip = 0
        elif mode == THINKING:
            keep = len(part)
            if len(buf) - keep > cur:
                r.append(buf[cur:len(buf) - keep])
            skip = max(0, skip - (len(buf) - keep))
        else:  # still PENDING: this call's leading whitespace joins the held whitespace
            if not hold:
                ws += data[:len(data) - len(part)]
        return st, b"".join(r), b"".join(c), bytes(ws), skip, events

    def finish(self) -> DeltaMessage:
        """End of generation: release held text (reasoning: the thoughts never ended) and any
        incomplete UTF-8 tail. The stream accepts no more input."""
        if self._finished:
            return DeltaMessage()
        self._finished = True
        mode, part = _unpack(self._st)
        r = b""
        if mode == PENDING:
            r = bytes(self._ws) + part
        elif mode == THINKING:
            r = part[self._skip:]
        self._ws.clear()
        reasoning = self._rdec.decode(r, final=True)
        content = self._cdec.decode(b"", final=True)
        return DeltaMessage(reasoning or None, content or None)

    def _out(self, r: bytes, c: bytes) -> DeltaMessage:
        reasoning = self._rdec.decode(r) if r else ""
        content = self._cdec.decode(c) if c else ""
        return DeltaMessage(reasoning or None, content or None)
