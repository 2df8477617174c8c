"""Answer reservation: a request's ``max_tokens`` always leaves room for a valid answer (opt-in per request).

A request added with ``max_tokens=N, reserve_answer=True`` has at most ``N`` output positions (thinking,
its end marker, the answer and its stop token together, as engines count ``max_tokens``). Two moments:

- *while thinking*: its thinking budget (:mod:`.budget`) becomes at most ``N - E - S - margin``, where
  ``E`` is the length of the family's forced end of thinking (taken from the request's first state) and
  ``S`` the length of the shortest completion from the grammar's start (:mod:`.shortest`, with its stop
  token; kept per compiled grammar). At that point the rows force the end of thinking exactly as a
  ``max_thinking_tokens`` budget does (multi-token markers included), and the answer starts with
  ``S + margin`` positions left (less when the family's end needs more tokens from there: ``margin``
  covers that).
- *in the answer*: with ``r`` positions left and ``U`` the length of the shortest completion from the
  committed state, a step whose rows could all be accepted (``1 + drafts``) without leaving ``U +
  margin`` positions *steers*: from there every row allows only the next token of that completion
  (the forced rows of :mod:`.budget`; drafts that follow it are kept, one that deviates is rejected by
  its row), so the output ends with its stop token within ``max_tokens``. ``U`` is not computed every
  step: after a computation that left a slack of ``s`` positions, the next one is ``max(1, s // 2)``
  committed tokens later (at the next step when ``s <= 1``).

Guarantee: the output parses and passes the constraint whenever the completion was found (always for
the grammars the tests sweep; see :mod:`.shortest` for when it is minimal) and ``U`` grows by less than
``margin + s / 2`` over the tokens between two computations (the model can open structures that need
more tokens to close: ``[{`` inside an array of objects with required keys). A request for which it
fails is reported (``cut``) and never harmed otherwise: its rows are the grammar's.

Hostile input: ``max_tokens`` that is not an int >= 1, ``reserve_answer`` without ``max_tokens`` or
without a constraint: ``ValueError`` at ``add_request``. A grammar whose shortest completion needs more
than ``max_tokens`` positions: ``ValueError`` at ``add_request`` when the compile is already known
(a cache hit), else that request alone goes to ``ERROR`` with the same message when its compile
resolves.

Costs: nothing for a request without reservation; with it, one comparison per step until a check is
due, one shortest-completion search per check (on a byte-level copy of the grammar for a large
vocabulary: a fill there costs microseconds), one byte-level accept per committed answer byte.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xgrammar as xgr

from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.schema_support import new_matcher
from .budget import Forcing
from .shortest import ByteLevel, ShortestCompletion, short_candidates

__all__ = ["validate_max_tokens", "Shortest", "AnswerReserve", "DEFAULT_MARGIN"]

DEFAULT_MARGIN = 4
"""Positions kept beyond the shortest completion (see the module docstring)."""

_START_CAP = 4096
"""Longest start completion searched for (per compiled grammar, once)."""

_SMALL_VOCAB = 4096
"""Up to this many tokens, the search runs on the model's own tokens (exact tier of :mod:`.shortest`)."""


def validate_max_tokens(max_tokens: object, reserve_answer: object) -> int | None:
    """``max_tokens`` as given to ``add_request``: None or an int >= 1 (``bool``, ``float`` and strings
    are refused), and ``reserve_answer`` a bool that needs it; ``ValueError`` otherwise."""
    if not isinstance(reserve_answer, bool):
        raise ValueError(f"reserve_answer must be a bool, got {reserve_answer!r} ({type(reserve_answer).__name__})")
    if max_tokens is None:
        if reserve_answer:
            raise ValueError("reserve_answer=True needs max_tokens (the output budget to reserve the answer in)")
        return None
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or max_tokens < 1:
        raise ValueError(f"max_tokens must be None or an integer >= 1, got {max_tokens!r} "
                         f"({type(max_tokens).__name__})")
    return int(max_tokens)


class Shortest:
    """Shortest completions for one manager's requests (built on the first reserving request; the
    manager's thread only): the model's own tokens for a small vocabulary, else the byte-level copy of
    the grammar and the fewest tokens spelling its shortest text (:mod:`.shortest`)."""

    __slots__ = ("vocabulary", "_tokens", "_bytes")

    def __init__(self, vocabulary: Vocabulary) -> None:
        num_words = (vocabulary.logits_width + 31) // 32
        stops = sorted(vocabulary.stop_token_ids)
        self.vocabulary = vocabulary
        self._tokens: ShortestCompletion | None = None
        self._bytes: ByteLevel | None = None
        if vocabulary.vocab_size <= _SMALL_VOCAB:
            cand = short_candidates(vocabulary.token_bytes, vocabulary.vocab_size)
            self._tokens = ShortestCompletion(num_words, stops, cand, vocabulary, expand_all=_SMALL_VOCAB,
                                             token_bytes=vocabulary.token_bytes)
        else:
            self._bytes = ByteLevel(vocabulary.token_bytes, vocabulary.vocab_size, stops, num_words)

    def start(self, compiled: object) -> tuple[int, ...] | None:
        """The shortest completion from the grammar's start (kept per compiled grammar), or None."""
        derived = compiled.derived  # type: ignore[attr-defined]
        key = ("reserve.start",)
        if key not in derived:
            derived[key] = self._find(new_matcher(compiled), self.byte_matcher(compiled), _START_CAP)
        found = derived[key]
        return None if found is None else tuple(found)

    def byte_matcher(self, compiled: object) -> xgr.GrammarMatcher | None:
        """A byte-level matcher at the grammar's start (None on the token tier)."""
        if self._bytes is None:
            return None
        return self._bytes.matcher(compiled.grammar.grammar)  # type: ignore[attr-defined]

    def feed(self, byte_matcher: xgr.GrammarMatcher, tokens: Sequence[int]) -> bool:
        return ByteLevel.feed(byte_matcher, self.vocabulary.decode_bytes(tokens))

    def _find(self, m: xgr.GrammarMatcher, byte_matcher: xgr.GrammarMatcher | None, max_len: int) -> list[int] | None:
        if self._tokens is not None:
            return self._tokens.find(m, max_len)
        assert self._bytes is not None and byte_matcher is not None, "the byte tier reads its byte matcher"
        text = self._bytes.shortest_text(byte_matcher, max(8 * max_len, 64))
        if text is None:
            return None
        seq = self._bytes.tokens(text, m, self.vocabulary)
        return seq if seq is not None and len(seq) <= max_len else None

    def find(self, m: xgr.GrammarMatcher, byte_matcher: xgr.GrammarMatcher | None, max_len: int) -> list[int] | None:
        """The shortest completion from ``m``'s committed state (``byte_matcher`` at the same text, on the
        byte tier), at most ``max_len`` tokens; None when none was found. Moves nothing."""
        return self._find(m, byte_matcher, max_len)


class AnswerReserve:
    """One request's reservation (owned by its :class:`~.request.StructuredRequest`; only its methods
    change it). ``status``: ``"thinking"`` / ``"free"`` (the model writes) / ``"steering"`` / ``"lost"``
    (no completion could be computed: the rows are the grammar's) / ``"late"`` (the completion needed more
    positions than were left)."""

    __slots__ = ("shortest", "max_tokens", "margin", "start_len", "steer", "steer_pos", "next_check", "byte_matcher",
                 "content", "status", "checks")

    def __init__(self, shortest: Shortest, max_tokens: int, margin: int) -> None:
        self.shortest = shortest
        self.max_tokens = max_tokens
        self.margin = margin
        self.start_len: int | None = None         # shortest completion from the grammar's start
        self.steer: tuple[int, ...] | None = None  # the completion being forced
        self.steer_pos = 0                         # its next token
        self.next_check = 0                        # output position of the next check
        self.byte_matcher: xgr.GrammarMatcher | None = None
        self.content = 0                           # content tokens the byte matcher has read
        self.status = "thinking"
        self.checks = 0

    def think_limit(self, forced_end: int) -> int:
        """The thinking budget that leaves room for the end of thinking, the shortest answer and the margin."""
        assert self.start_len is not None
        return max(0, self.max_tokens - forced_end - self.start_len - self.margin)

    def answer_started(self, compiled: object, n_out: int) -> None:
        """The grammar applies from output position ``n_out``: its state is the start, whose shortest
        completion is known (on the byte tier, the byte matcher starts here too)."""
        if self.status == "thinking":
            self.status = "free"
            self.byte_matcher = self.shortest.byte_matcher(compiled)
            self.content = 0
            assert self.start_len is not None
            self._schedule(n_out, self.max_tokens - n_out - self.start_len - self.margin)

    def _schedule(self, n_out: int, slack: int) -> None:
        self.next_check = n_out + max(0, slack // 2)  # no slack: check at the next step

    def committed(self, tokens: Sequence[int]) -> None:
        """Content tokens were committed: follow the completion being forced, and the byte matcher."""
        if self.steer is not None:
            steer, i = self.steer, self.steer_pos
            if tuple(tokens) == steer[i:i + len(tokens)]:
                self.steer_pos = i + len(tokens)
            else:  # an engine that did not apply the rows: find a completion again at the next step
                self.steer = None
                self.status = "free"
                self.next_check = 0
        bm = self.byte_matcher
        if bm is not None:
            stops = self.shortest.vocabulary.stop_token_ids
            if tokens and tokens[-1] in stops:  # the end of the output: nothing to read after it
                self.byte_matcher = None
                return
            if not self.shortest.feed(bm, tokens):
                self.byte_matcher = None
                self.status = "lost"
            self.content += len(tokens)

    def plan(self, compiled: object, m: xgr.GrammarMatcher, n_out: int, n_content: int,
             drafts: Sequence[int]) -> Forcing | None:
        """The forced rows of this step (None: the grammar's own rows). Moves nothing committed."""
        shortest = self.shortest
        st = self.status
        if st == "lost" or st == "thinking":
            return None
        if self.steer is None:
            if n_out < self.next_check:
                return None
            bm = self.byte_matcher
            if self.content != n_content and bm is not None:  # content the byte matcher has not read
                self.status = "lost"
                return None
            left = self.max_tokens - n_out
            self.checks += 1
            seq = shortest.find(m, bm, max(left, 1) + 64)
            if seq is None:
                self.status = "lost"
                return None
            nd = len(drafts)
            slack = left - (nd + 1) - len(seq) - self.margin
            if slack >= 0:
                self._schedule(n_out, slack)
                return None
            self.steer, self.steer_pos = tuple(seq), 0
            self.status = "steering" if len(seq) <= left else "late"
        steer, i = self.steer, self.steer_pos
        tokens: list[int] = []
        for j in range(len(drafts) + 1):
            if i + j >= len(steer):
                break
            t = steer[i + j]
            tokens.append(t)
            if j == len(drafts) or drafts[j] != t:
                break
        return Forcing(0, tuple(tokens), None)
