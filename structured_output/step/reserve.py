"""Answer reservation: a request's ``max_tokens`` always leaves room for a valid answer (opt-in per request).

A request added with ``max_tokens=N, reserve_answer=True`` has at most ``N`` output positions (thinking,
its end marker, the answer and its stop token together, as engines count ``max_tokens``).

Where the searches run: never on the scheduler thread. A shortest completion (:mod:`.shortest`) costs
what the grammar and the content make it cost, so every search runs in the manager's search process
(:mod:`.search_service`); the scheduler thread submits jobs and reads finished futures. Three moments:

- *before the first step*: the shortest completion from the grammar's start (``S`` tokens, its stop
  token included; kept per constraint key) is searched beside the compile, and the request is ready
  (``is_ready``) once both are done, exactly as it waits for its compile.
- *while thinking*: its thinking budget (:mod:`.budget`) becomes at most ``N - E - S - margin``, where
  ``E`` is the length of the family's forced end of thinking (taken from the request's first state). At
  that point the rows force the end of thinking exactly as a ``max_thinking_tokens`` budget does
  (multi-token markers included), and the answer starts with ``S + margin`` positions left.
- *in the answer*: when it starts with fewer than ``S + 3 * margin`` positions left, the rows force the
  start completion itself (its tokens are known: no search). Otherwise the model writes, and checks
  run in the search process: a check is submitted at ``accept_tokens`` with the committed content, and
  its result (``U`` tokens, from the output position ``c`` where it was submitted) is read at a later
  step ``n`` (``k = n - c`` tokens later). The margin is widened by ``k``: with ``r`` positions left and
  ``1 + drafts`` rows this step, ``r - (1 + drafts) - U - margin - k >= 0`` lets the model go on, and the
  next check is submitted a quarter of that slack later, so that its result is normally back before half
  of it is used. Once the slack is too small for another check to come back in time (``slack < 4 (k + 1)``), or
  the next step could be past it, the request turns *urgent*: every commit submits a check for its very
  state, which runs while the engine's forward pass does, and the next step reads it and steers along it
  (a step *waits* only when that search is not done yet; counted in ``waits``). From there every row
  allows only the next token of that completion (the forced rows of :mod:`.budget`; drafts that follow it
  are kept, one that deviates is rejected by its row), so
  the output ends with its stop token within ``max_tokens``.

Guarantee: the output parses and passes the constraint whenever the completion was found (always for
the grammars the tests sweep; see :mod:`.shortest` for when it is minimal) and, in a free answer, ``U``
grows by at most one position per committed token beyond ``margin`` between two results (the model can
open structures that need more tokens to close: ``[{`` inside an array of objects with required keys; a
deeply nested schema under a tight ``max_tokens`` can break it). A request for which it fails is
reported (``late`` / ``lost``) and never harmed otherwise: its rows are the grammar's.

Hostile input: ``max_tokens`` that is not an int >= 1, ``reserve_answer`` without ``max_tokens`` or
without a constraint: ``ValueError`` at ``add_request``. A grammar whose shortest completion needs more
than ``max_tokens`` positions (or none is found, or its search overruns ``compile_timeout_s``): a
:class:`ReservationError` (a ``ValueError``) at ``add_request`` when the compile and the start search are
already known (cached), else that request alone goes to ``ERROR`` with it as its ``cause``.

Costs on the scheduler thread: nothing for a request without reservation; with it, one comparison per
step, a list extend per committed content step, and a queue append per check (a few per answer, at
geometrically shrinking intervals, then one per step while urgent, a queued one for an earlier state
cancelled); a step that waits pays what the search took beyond the forward pass.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future, wait

import numpy as np
import xgrammar as xgr

from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.constraints import Constraint
from ..compilation.schema_support import new_matcher
from ..compilation.xgrammar_adapter import GrammarBuilder
from .budget import Forcing
from .search_service import REFUSED, SearchService
from .shortest import ByteCursor, ByteGrammar, ByteLevel, ShortestCompletion, short_candidates

__all__ = ["validate_max_tokens", "Shortest", "AnswerReserve", "ReservationError", "DEFAULT_MARGIN"]

DEFAULT_MARGIN = 4
"""Positions kept beyond the shortest completion (see the module docstring)."""

_START_CAP = 4096
"""Longest start completion searched for (per constraint key, once)."""

CHECK_TIMEOUT_S = 10.0
"""Deadline of one check during the answer (the search process is killed past it; the request is ``lost``)."""

_COPIES = 64
"""Byte-level copies kept by the search process (least recently used out first)."""

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
    """Shortest completions on one vocabulary (built once in the search process, :mod:`.search_service`;
    not thread-safe): the model's own tokens for a small vocabulary, else the byte-level copy of the
    grammar (kept per constraint key) and the fewest tokens spelling its shortest text (:mod:`.shortest`)."""

    __slots__ = ("vocabulary", "_tokens", "_bytes", "_builder", "_copies")

    def __init__(self, vocabulary: Vocabulary) -> None:
        num_words = (vocabulary.logits_width + 31) // 32
        stops = sorted(vocabulary.stop_token_ids)
        self.vocabulary = vocabulary
        self._tokens: ShortestCompletion | None = None
        self._bytes: ByteLevel | None = None
        self._builder = GrammarBuilder(vocabulary)
        self._copies: OrderedDict[str, ByteGrammar] = OrderedDict()
        if vocabulary.vocab_size <= _SMALL_VOCAB:
            cand = short_candidates(vocabulary.token_bytes, vocabulary.vocab_size)
            self._tokens = ShortestCompletion(num_words, stops, cand, vocabulary, expand_all=_SMALL_VOCAB,
                                             token_bytes=vocabulary.token_bytes)
        else:
            self._bytes = ByteLevel(vocabulary, num_words)

    def _copy(self, compiled: object) -> ByteGrammar:
        assert self._bytes is not None
        constraint = compiled.constraint  # type: ignore[attr-defined]
        key = constraint.key
        copy = self._copies.get(key)
        if copy is not None:
            self._copies.move_to_end(key)
            return copy
        tokens = self._builder.token_copy(constraint)
        check = constraint.schema_check
        closers = self._builder.closers(constraint)
        copy = (self._bytes.plain(compiled.grammar.grammar, check, closers)  # type: ignore[attr-defined]
                if tokens is None else self._bytes.with_tokens(*tokens, check, closers))
        self._copies[key] = copy
        while len(self._copies) > _COPIES:
            self._copies.popitem(last=False)
        return copy

    def byte_matcher(self, compiled: object) -> ByteCursor | None:
        """A byte-level cursor at the grammar's start (None on the token tier)."""
        if self._bytes is None:
            return None
        return self._copy(compiled).cursor()

    def find(self, m: xgr.GrammarMatcher, cursor: ByteCursor | None, max_len: int) -> list[int] | None:
        """The shortest completion from ``m``'s committed state (``cursor`` at the same output, on the byte
        tier), at most ``max_len`` tokens; None when none was found. Moves nothing."""
        if self._tokens is not None:
            return self._tokens.find(m, max_len)
        assert self._bytes is not None and cursor is not None, "the byte tier reads its cursor"
        items = self._bytes.shortest(cursor, max(8 * max_len, 64))
        if items is None:
            return None
        seq = self._bytes.tokens(items, m, cursor.grammar)
        return seq if seq is not None and len(seq) <= max_len else None

    def complete(self, compiled: object, tokens: Sequence[int], max_len: int) -> list[int] | None | bool:
        """The shortest completion of ``compiled`` after its content ``tokens`` (``()``: from the grammar's
        start), at most ``max_len`` tokens with its stop token; None when none was found, False when the
        grammar refuses ``tokens``. Builds its own matchers (the search process's; see :mod:`.search_service`)."""
        m = new_matcher(compiled)
        for t in tokens:
            if not m.accept_token(t):
                return False
        cursor = self.byte_matcher(compiled)
        if cursor is not None and not cursor.feed_tokens(tokens, self.vocabulary.token_bytes):
            return False
        return self.find(m, cursor, max_len)


class ReservationError(ValueError):
    """Why a request's answer cannot be reserved in its ``max_tokens`` (its constraint's shortest output does not
    fit, or none was found): the cause a request fails with (:attr:`.request.StructuredRequest.cause`), raised
    by ``add_request`` when it is known at once."""


class AnswerReserve:
    """One request's reservation (owned by its :class:`~.request.StructuredRequest`; only its methods
    change it). ``status``: ``"thinking"`` / ``"free"`` (the model writes) / ``"steering"`` / ``"lost"``
    (no completion could be computed: the rows are the grammar's) / ``"late"`` (the completion needed more
    positions than were left). ``checks``: searches submitted during the answer; ``waits``: how many of
    them a step waited for (see the module docstring)."""

    __slots__ = ("service", "constraint", "stop_ids", "max_tokens", "margin", "start", "start_len", "steer", "steer_pos",
                 "tokens", "known_len", "known_at", "next_check", "pending", "pending_at", "urgent", "status",
                 "checks", "waits")

    def __init__(self, service: SearchService, constraint: Constraint, stop_ids: frozenset[int], max_tokens: int,
                 margin: int) -> None:
        self.service = service
        self.constraint = constraint
        self.stop_ids = stop_ids
        self.max_tokens = max_tokens
        self.margin = margin
        self.start: Future | None = None           # the start completion's search (see begin)
        self.start_len: int | None = None          # shortest completion from the grammar's start
        self.steer: tuple[int, ...] | None = None  # the completion being forced
        self.steer_pos = 0                         # its next token
        self.tokens: list[int] = []                # content committed (append-only: checks read a prefix)
        self.known_len = 0                         # the last completion length found ...
        self.known_at = 0                          # ... at this output position
        self.next_check = 0                        # output position from which the next check is submitted
        self.pending: Future | None = None         # the check in flight
        self.pending_at = 0                        # its output position
        self.urgent = False                        # steer at the next completion for the current state
        self.status = "thinking"
        self.checks = 0
        self.waits = 0

    # -- the start --------------------------------------------------------------------------------
    def begin(self, timeout_s: float) -> None:
        """Submit the start completion's search (with the compile; shared per constraint key)."""
        self.start = self.service.start(self.constraint, _START_CAP, timeout_s)

    def start_done(self) -> bool:
        return self.start is None or self.start.done()

    def start_completion(self) -> tuple[tuple[int, ...] | None, str | None]:
        """The start completion (done), or None and why it is missing."""
        assert self.start is not None and self.start.done()
        try:
            found = self.start.result()
        except TimeoutError:
            return None, "the shortest-completion search did not finish within its deadline"
        except Exception as e:  # noqa: BLE001 - the search process's failure, reported as the request's
            return None, f"the shortest-completion search failed ({e})"
        if found is None or found == REFUSED:
            return None, None
        return tuple(found), None

    def think_limit(self, forced_end: int) -> int:
        """The thinking budget that leaves room for the end of thinking, the shortest answer and the margin."""
        assert self.start_len is not None
        return max(0, self.max_tokens - forced_end - self.start_len - self.margin)

    def answer_started(self, n_out: int) -> None:
        """The grammar applies from output position ``n_out``: its state is the start, whose shortest
        completion is known. Little room left: steer along it at once; else the model writes."""
        if self.status != "thinking":
            return
        assert self.start is not None and self.start_len is not None
        self.tokens = []
        left = self.max_tokens - n_out
        slack = left - self.start_len - self.margin
        if slack < 2 * self.margin:
            seq, _ = self.start_completion()
            assert seq is not None
            self.steer, self.steer_pos = seq, 0
            self.status = "steering" if self.start_len <= left else "late"
            return
        self.status = "free"
        self._known(self.start_len, n_out, n_out, slack)

    # -- the answer -------------------------------------------------------------------------------
    def _known(self, length: int, at: int, n_out: int, slack: int) -> None:
        """A completion of ``length`` tokens from output position ``at``, with ``slack`` positions to spare
        at ``n_out``: the next check is submitted a quarter of the slack later, so that its result is
        there before half of it is used (:meth:`_safe`)."""
        self.known_len, self.known_at = length, at
        self.next_check = n_out + slack // 4

    def _safe(self, n_out: int, nd: int) -> bool:
        """Can this step's rows (``1 + nd``) be the grammar's? Yes while the last completion found, grown by
        one position per token committed since, still leaves the margin."""
        return (self.max_tokens - n_out - (nd + 1) - self.known_len - self.margin - (n_out - self.known_at)) >= 0

    def committed(self, tokens: Sequence[int], n_out: int) -> None:
        """Content tokens were committed (the output is at ``n_out`` after them): follow the completion being
        forced; submit a check when one is due."""
        self.tokens += tokens
        if self.steer is not None:
            steer, i = self.steer, self.steer_pos
            if tuple(tokens) == steer[i:i + len(tokens)]:
                self.steer_pos = i + len(tokens)
                return
            # drafts past the end of thinking, or an engine that did not apply the rows: search again
            self.steer = None
            self.status = "free"
            self.known_len, self.known_at, self.next_check = self.max_tokens, n_out, n_out
        if self.status != "free" or not tokens or tokens[-1] in self.stop_ids:  # (after a stop token it has ended)
            return
        if not self.urgent and not self._safe(n_out, self.margin - 1):
            self.urgent = True  # the next step may be past the slack: its completion is needed
        if self.urgent:
            # the completion of this very state, searched while the engine's forward pass runs: the next step
            # reads it (and waits only for what the forward did not cover)
            if self.pending is not None and self.pending_at != n_out and self.pending.cancel():
                self.pending = None  # still queued, for an earlier state: of no use now
            if self.pending is None or self.pending_at != n_out:
                self._submit(n_out)
        elif self.pending is None and n_out >= self.next_check:
            self._submit(n_out)

    def _submit(self, n_out: int) -> None:
        self.checks += 1
        left = self.max_tokens - n_out
        self.pending = self.service.submit(self.constraint, self.tokens, len(self.tokens), max(left, 1) + 64,
                                           CHECK_TIMEOUT_S)
        self.pending_at = n_out

    def _take(self, n_out: int, nd: int) -> None:
        """Read the finished check (submitted ``k`` tokens ago): steer along it when it is for this very state
        and the slack is gone or ``urgent``; else schedule the next check, or turn ``urgent`` when the slack
        left is too small for another check to come back in time (about ``k`` tokens per search)."""
        p, self.pending = self.pending, None
        assert p is not None
        try:
            found = p.result()
        except Exception:  # noqa: BLE001 - a timeout or a failed search: the rows are the grammar's
            self.status = "lost"
            return
        if found is None or found == REFUSED:
            self.status = "lost"
            return
        k = n_out - self.pending_at
        left = self.max_tokens - n_out
        slack = left - (nd + 1) - len(found) - self.margin - k
        if k == 0 and (slack < 0 or self.urgent):
            self.steer, self.steer_pos = tuple(found), 0
            self.status = "steering" if len(found) <= left else "late"
            return
        if slack >= 0:
            self._known(len(found), self.pending_at, n_out, slack)
        if slack < 4 * (k + 1):
            self.urgent = True

    def plan(self, n_out: int, n_content: int, drafts: Sequence[int]) -> Forcing | None:
        """The forced rows of this step (None: the grammar's own rows). Moves nothing committed; never
        searches (a step that cannot go on without a fresh completion waits for the search process)."""
        if self.status != "free" and self.steer is None:
            return None
        if self.steer is None:
            nd = len(drafts)
            if len(self.tokens) != n_content:  # content the reservation has not seen
                self.status = "lost"
                return None
            if self.pending is not None and self.pending.done():
                self._take(n_out, nd)
            if self.steer is None and self.status == "free" and (self.urgent or not self._safe(n_out, nd)):
                # the last resort: a completion from this very state, waited for (once per request: it steers)
                self.urgent = True
                if self.pending is not None and self.pending_at != n_out:
                    self.pending = None  # for an earlier state: of no use now
                if self.pending is None:
                    self._submit(n_out)
                if not self.pending.done():
                    self.waits += 1
                    wait([self.pending], timeout=CHECK_TIMEOUT_S + 1.0)
                if self.pending.done():
                    self._take(n_out, nd)
                if self.steer is None:  # timed out, or no completion: the rows are the grammar's
                    self.pending = None
                    self.status = "lost"
            if self.steer is None:
                return None
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

