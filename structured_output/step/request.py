"""One request's state and every transition it goes through: :class:`StructuredRequest`.

The request owns its status, its compile future, its grammar matcher, its reasoning tracker, its
budget and its rows, and it is the only code that changes them: compile resolved, thinking ->
constrained, accept / reject / terminate / error, rollback, budget forcing, the rows of a step. Two
kinds of driver call it, and neither writes its fields:

- the batch manager (:class:`~.manager.StructuredOutputManager`) drives many requests, one step at
  a time: :meth:`~StructuredRequest.start_compile`, :meth:`~StructuredRequest.resolve`,
  :meth:`~StructuredRequest.plan_rows` (its rows for one step, with drafts),
  :meth:`~StructuredRequest.accept` (the committed tokens of a step), :meth:`~StructuredRequest.dead_end`
  and :meth:`~StructuredRequest.forced_tokens`. A failure is final (``ERROR``, with a message).
- an engine adapter that holds one grammar object per request (SGLang's ``BaseGrammarObject``) drives
  one request one token at a time: :meth:`~StructuredRequest.from_compiled`,
  :meth:`~StructuredRequest.try_token` (a refused token moves nothing and says why: the engine aborts
  the request), :meth:`~StructuredRequest.rollback` (its draft-tree walk undoes tokens) and
  :meth:`~StructuredRequest.fill_row`. A dead end of the grammar there is not final: its rows allow only
  the stop tokens until a rollback goes back before it (the engine's walk may undo the path).

What every request of one manager (or one engine backend) shares is a :class:`RequestContext`: the
vocabulary and its stop tokens, the compiler, and the precomputed rows (thinking rows per compiled
grammar: :mod:`.gating`; the rows that force the end of thinking: :mod:`.budget`).
"""

from __future__ import annotations

import enum
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import xgrammar as xgr

from thinkgate.reasoning.base import ReasoningEnd, ReasoningTracker
from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.compiler import CompiledConstraint, Compiler, xgrammar_message
from ..compilation.constraints import Constraint
from ..compilation.jsonws.bound import BoundedMatcher
from ..compilation.schema_support import RecordingMatcher, new_matcher, output_problem
from .budget import ThinkingBudget, check_commit, plan_forcing
from .fill import StepPlan, Walk
from .gating import ReasoningGate
from .jump_forward import JumpForward
from .reserve import AnswerReserve, ReservationError
from .rows import row_with

__all__ = ["RequestStatus", "AcceptResult", "RequestContext", "StructuredRequest", "COMPILING", "THINKING",
           "CONSTRAINED", "TERMINATED", "ERROR"]


class RequestStatus(str, enum.Enum):
    """Where a request stands. ``ERROR`` is final; ``TERMINATED`` only moves to ``ERROR``."""

    COMPILING = "compiling"
    """Its constraint is compiling and it cannot think meanwhile: not schedulable (``is_ready`` is
    False)."""
    THINKING = "thinking"
    """Its thinking has not ended: the grammar does not apply yet (it may still be compiling)."""
    CONSTRAINED = "constrained"
    """The thinking has ended (or never started): the constraint, if any, applies."""
    TERMINATED = "terminated"
    """The grammar accepted a stop token: the output is complete; only stop tokens may follow."""
    ERROR = "error"
    """Invalid constraint at compile time, compile timeout, or a token the grammar rejected."""


# module globals: the step's per-request status tests read these instead of looking up the enum
COMPILING, THINKING, CONSTRAINED, TERMINATED, ERROR = (
    RequestStatus.COMPILING, RequestStatus.THINKING, RequestStatus.CONSTRAINED, RequestStatus.TERMINATED,
    RequestStatus.ERROR)


@dataclass(frozen=True)
class AcceptResult:
    """What :meth:`StructuredOutputManager.accept_tokens` reports."""

    status: Literal["ok", "terminated", "error"]
    """``ok``: accepted, more may follow; ``terminated``: accepted, and the grammar has accepted a stop
    token (the output is complete); ``error``: the request is in error (``message`` says why)."""
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.status != "error"


_OK = AcceptResult("ok")
_TERMINATED = AcceptResult("terminated")

# what a rollback-history entry records, per token accepted by try_token
_CONTENT, _THINK, _END, _END_CONTENT, _IGNORED = range(5)


class RequestContext:
    """What every request of one manager (or one engine backend) shares, built once with it: the
    vocabulary and its stop tokens, the compiler (and the deadline of a compile), the stop-only row,
    the thinking rows (:class:`~.gating.ReasoningGate`, kept per compiled grammar) and the one-token
    rows of a thinking budget (:class:`~.budget.ThinkingBudget`). Its requests only read it.

    ``thread_safe_rows``: requests may be created on other threads (an engine that builds them on the
    compiler's callback threads), so the shared thinking-row caches are written under a lock."""

    __slots__ = ("vocabulary", "compiler", "compile_timeout_s", "stop_ids", "stop_list", "stop_row", "gate",
                 "budget")

    def __init__(self, vocabulary: Vocabulary, compiler: Compiler, implicit_end_token_ids: Iterable[int],
                 compile_timeout_s: float, *, thread_safe_rows: bool = False) -> None:
        num_words = (vocabulary.logits_width + 31) // 32
        self.vocabulary = vocabulary
        self.compiler = compiler
        self.compile_timeout_s = compile_timeout_s
        self.stop_ids = vocabulary.stop_token_ids
        self.stop_list = sorted(self.stop_ids)
        self.stop_row = row_with(num_words, self.stop_ids)  # the row of a terminated request
        self.gate = ReasoningGate(vocabulary, implicit_end_token_ids,
                                  lock=threading.Lock() if thread_safe_rows else None)
        self.budget = ThinkingBudget(num_words)


class StructuredRequest:
    """One request, from its creation to its removal: its state and every transition (see the module
    docstring for the two kinds of driver). Small: nothing vocabulary-sized of its own (its rows are
    shared per compiled grammar, in its :class:`RequestContext`).

    Invariants it keeps: ``future`` is set only while the compile runs (``COMPILING``, or ``THINKING``
    for a request that thinks while its constraint compiles); ``held`` only while ``COMPILING`` (content
    tokens committed before the grammar existed, fed to it when it does); ``compiled`` and ``matcher``
    are set together once the compile succeeded (both None for an unconstrained request and after
    :meth:`fail`); a ``THINKING`` request has a ``tracker``; ``pending`` implies a compiled grammar.
    Other modules read its fields and call its methods; only its methods write them.
    """

    __slots__ = ("ctx", "rid", "constraint", "status", "message", "future", "deadline", "compiled", "matcher",
                 "tracker", "think_row", "pending_row", "pending", "n_out", "n_content", "may_allow_all", "held",
                 "think_limit", "forced", "_history", "_pos", "_dead", "_dead_at", "reserve", "cause")

    def __init__(self, ctx: RequestContext, rid: str, constraint: Constraint | None,
                 tracker: ReasoningTracker | None, *, think_limit: int | None = None,
                 forced: tuple[int, ...] | None = None, rollback_window: int = 0,
                 reserve: AnswerReserve | None = None) -> None:
        """A request at its start (``COMPILING``): the manager then calls :meth:`start_compile`;
        :meth:`from_compiled` builds one whose grammar exists. ``think_limit`` / ``forced`` apply only
        with a ``tracker`` (a request whose thinking has not ended); ``rollback_window``: how many
        tokens accepted by :meth:`try_token` can be rolled back (0: none are recorded)."""
        self.ctx = ctx
        self.rid = rid
        self.constraint = constraint
        self.status: RequestStatus = COMPILING
        self.message: str | None = None
        self.cause: Exception | None = None         # the typed cause of ERROR where one is declared
        self.future: Future[CompiledConstraint] | None = None
        self.deadline = 0.0                         # time.monotonic() past which COMPILING is an error
        self.compiled: CompiledConstraint | None = None
        self.matcher: xgr.GrammarMatcher | None = None
        self.tracker = tracker
        self.think_row: np.ndarray | None = None    # row for a thinking position (None: no row)
        self.pending_row: np.ndarray | None = None  # row while the first token decides (None: no row)
        self.pending = False                        # the next token decides thinking vs content
        self.n_out = 0                              # tokens accepted (output position of the next)
        self.n_content = 0                          # tokens fed to the grammar
        self.may_allow_all = False                  # a row may allow everything: fill one by one
        self.held: list[int] | None = None          # content committed before the grammar existed
        self.think_limit = think_limit if tracker is not None else None  # max_thinking_tokens (see .budget)
        self.forced = forced if self.think_limit is not None else None  # the forced end, once the budget is reached
        # try_token's driver: per token, (kind, the tracker before it when it was a thinking token)
        self._history: deque[tuple[int, ReasoningTracker | None]] | None = \
            deque(maxlen=rollback_window) if rollback_window else None
        self._pos = 0                  # tokens accepted by try_token (ignored ones included), less those rolled back
        self._dead: str | None = None  # why the row at _dead_at allowed nothing (see fill_row)
        self._dead_at = 0
        self.reserve = reserve  # answer reservation (max_tokens, see .reserve), or None

    @classmethod
    def from_compiled(cls, ctx: RequestContext, rid: str, compiled: CompiledConstraint,
                      tracker: ReasoningTracker | None, *, think_limit: int | None = None,
                      rollback_window: int = 0) -> StructuredRequest:
        """A request whose grammar exists (an engine adapter's: the compile was awaited by the engine),
        thinking while ``tracker`` has not ended, else constrained at once."""
        if tracker is not None and tracker.ended:
            tracker = None
        req = cls(ctx, rid, compiled.constraint, tracker, think_limit=think_limit, rollback_window=rollback_window)
        req._take_compiled(compiled)
        return req

    # -- compile ---------------------------------------------------------------------------------
    def start_compile(self, think_while_compiling: bool) -> None:
        """Start the compile of the constraint (the manager's ``add_request``; a cache hit resolves at
        once). Without a constraint the request is thinking or constrained at once. With
        ``think_while_compiling``, a request that starts thinking is ``THINKING`` while it compiles
        (its rows hold the end of its thinking off), if its family can say which tokens end it."""
        constraint = self.constraint
        tracker = self.tracker
        if constraint is None:
            self.status = THINKING if tracker is not None else CONSTRAINED
            return
        ctx = self.ctx
        self.future = ctx.compiler.submit(constraint, timeout_s=ctx.compile_timeout_s)
        self.deadline = time.monotonic() + ctx.compile_timeout_s
        if self.reserve is not None:  # its start completion is searched beside the compile, off this thread
            self.reserve.begin(ctx.compile_timeout_s)
        if think_while_compiling and tracker is not None and tracker.keep_thinking_token_ids() is None \
                and tracker.ending_token_ids() is not None:
            self.status = THINKING  # it thinks while its constraint compiles (rows hold the end off)
        if self.future.done():
            self.resolve()

    def resolve(self) -> None:
        """Move a compiling request on if its compile finished or its deadline passed (nothing to do
        for a request that is not compiling)."""
        fut = self.future
        constraint = self.constraint
        if fut is None or constraint is None:  # not compiling (an unconstrained request never compiles)
            return
        timeout_s = self.ctx.compile_timeout_s
        if fut.done():
            exc = fut.exception()
            res = self.reserve
            if exc is None and res is not None and not res.start_done():  # compiled; its start search runs
                if time.monotonic() > self.deadline:
                    self.future = None
                    self.fail(f"reserve_answer: the shortest output of the {constraint.kind} constraint was not "
                              f"found within compile_timeout_s={timeout_s:g} s", ReservationError)
                return
            self.future = None
            if exc is not None:
                if isinstance(exc, ValueError):  # an invalid constraint (validated with the compile)
                    self.fail(str(exc))
                elif isinstance(exc, TimeoutError):  # the compiler stopped it at its deadline
                    self.fail(f"{constraint.kind} constraint did not compile within compile_timeout_s={timeout_s:g} s")
                else:
                    self.fail(f"{constraint.kind} constraint failed to compile: {xgrammar_message(exc)}")
                return
            compiled: CompiledConstraint = fut.result()
            if not compiled.initial_mask.any():  # not even a stop token: it cannot end right away either
                self.fail(f"the {constraint.kind} constraint accepts no output: its grammar allows no first "
                          f"token (and cannot end at once)")
                return
            self._take_compiled(compiled)
        elif time.monotonic() > self.deadline:
            self.future = None
            self.ctx.compiler.mark_overdue(fut)
            self.fail(f"{constraint.kind} constraint did not compile within compile_timeout_s={timeout_s:g} s")

    def _take_compiled(self, compiled: CompiledConstraint) -> None:
        """The compile succeeded: the grammar applies now, or once the thinking has ended (then the
        thinking rows are this grammar's). Content that waited for it is fed to it."""
        self.compiled = compiled
        self.matcher = new_matcher(compiled)  # records its tokens when the schema needs an output check
        self.may_allow_all = compiled.may_allow_all
        if self.reserve is not None and not self._reserve_start(compiled):
            return
        tracker = self.tracker
        if tracker is not None and not tracker.ended:
            self.status = THINKING
            self.think_row = self.ctx.gate.think_row(compiled)
            self._refresh_pending()
        else:
            self.status = CONSTRAINED
            held, self.held = self.held, None
            if held:
                self._feed(self.matcher, held)

    def _refresh_pending(self) -> None:
        """Is the next token the one that decides between thinking and content? The tracker says
        (``keep_thinking_token_ids``); then ``pending_row`` is the row for it. Call it after the tracker
        moved, while thinking."""
        tracker = self.tracker
        assert tracker is not None, "a thinking request has a tracker"
        keep = tracker.keep_thinking_token_ids()
        if keep is None or self.compiled is None:
            self.pending = False
            self.pending_row = None
            return
        self.pending = True
        self.pending_row = self.ctx.gate.pending_row(self.compiled, keep)

    def fail(self, message: str, cause: type[Exception] | None = None) -> None:
        """Move to ``ERROR`` (final) with ``message``; drop the matcher, grammar and tracker. ``cause``: the
        declared type of the failure, kept as :attr:`cause` (``cause(message)``), for a caller that tells
        failures apart (``add_request`` raises a :class:`~.reserve.ReservationError` known at once)."""
        self.status = ERROR
        self.message = message
        self.cause = cause(message) if cause is not None else None
        self.matcher = None
        self.compiled = None
        self.tracker = None

    # -- answer reservation (see .reserve) ------------------------------------------------------------
    def _reserve_start(self, compiled: CompiledConstraint) -> bool:
        """The grammar exists and its start completion is known (searched off this thread, see
        :meth:`resolve`): it must fit in ``max_tokens`` (else ``ERROR`` with a
        :class:`~.reserve.ReservationError`), and the thinking budget leaves room for it. False when the
        request failed."""
        res = self.reserve
        assert res is not None
        seq, why = res.start_completion()
        kind = self._kind()
        if seq is None:
            self.fail(f"reserve_answer: no complete output of the {kind} constraint was found"
                      f"{f' ({why})' if why else ''}, so none can be reserved within max_tokens={res.max_tokens}",
                      ReservationError)
            return False
        res.start_len = len(seq)
        tracker = self.tracker
        thinking = tracker is not None and not tracker.ended
        end = len(tracker.forced_end_token_ids() or ()) if thinking else 0
        need = res.start_len + end
        if self.n_out + need > res.max_tokens:
            self.fail(f"reserve_answer: the shortest output of the {kind} constraint needs {res.start_len} tokens "
                      f"(its stop token included{f', after {end} to end the thinking' if end else ''}), more than "
                      f"max_tokens={res.max_tokens} leaves", ReservationError)
            return False
        if thinking:
            limit = res.think_limit(end)
            if self.think_limit is None or limit < self.think_limit:
                self.think_limit = max(self.n_out, limit)
                if self.think_limit == self.n_out:  # reached now: its forced end is taken from here
                    self.forced = tracker.forced_end_token_ids()
        else:
            res.answer_started(self.n_out)
        return True

    def accept_reserving(self, token_ids: list[int]) -> AcceptResult:
        """:meth:`accept` for a request with an answer reservation: its reservation follows the content
        tokens (those at the end of ``token_ids``). The manager calls this one only where ``reserve`` is set,
        so :meth:`accept`, the hot path, stays one call."""
        res = self.reserve
        assert res is not None, "accept_reserving is for a request with a reservation"
        before = self.n_content
        out = self.accept(token_ids)
        d = self.n_content - before
        if self.status is CONSTRAINED or self.status is TERMINATED:
            res.answer_started(self.n_out - d)
            if d:
                res.committed(token_ids[len(token_ids) - d:], self.n_out)
        return out

    # -- the batch driver: committed tokens --------------------------------------------------------
    def accept(self, token_ids: list[int]) -> AcceptResult:
        """Commit the sampled tokens of one step (checked ints inside the logits width): the tracker
        finds where the thinking ends and only the tokens after it go to the grammar (an implicit end
        token that is also content included). ``ok``, ``terminated`` or ``error`` (then the request is
        in ``ERROR``, final). ``ValueError`` for a request still compiling (it cannot have sampled)."""
        st = self.status
        n = len(token_ids)
        if st is CONSTRAINED:  # the hot path, inlined: feed every token to the grammar
            m = self.matcher
            if m is None:  # unconstrained
                self.n_out += n
                return _OK
            stops = self.ctx.stop_ids
            if n == 1:  # one token (no drafts): the loop below without its bookkeeping
                t = token_ids[0]
                if not m.accept_token(t):
                    return self._rejected(m, token_ids, 0)
                self.n_out += 1
                self.n_content += 1
                if t in stops:
                    return self._terminate()
                return _OK
            if isinstance(m, BoundedMatcher):  # the same loop, in its lexer (C)
                i = m.accept_many(token_ids, stops)
                if i < n:
                    return self._rejected(m, token_ids, i)
            else:
                accept = m.accept_token
                i = 0
                for t in token_ids:
                    if not accept(t):
                        return self._rejected(m, token_ids, i)
                    i += 1
                    if t in stops and i < n:  # tokens after a stop: never offer them to a terminated matcher
                        return self._rejected(m, token_ids, i)
            self.n_out += n
            self.n_content += n
            # every token was accepted, so only the last can be a stop token (one before it would
            # have terminated the grammar and failed the next); accepting a stop token terminates it
            if n and token_ids[-1] in stops:
                return self._terminate()
            return _OK
        if st is THINKING:
            tracker = self.tracker
            assert tracker is not None, "a thinking request has a tracker"
            limit = self.think_limit
            if limit is not None and self.n_out + n >= limit:  # at its budget point
                problem, forced = check_commit(limit, self.n_out, self.forced, tracker, token_ids,
                                               self.ctx.vocabulary.token_bytes)
                if problem is not None:
                    self.fail(problem)
                    return AcceptResult("error", problem)
                if forced is not None:
                    self.forced = forced  # kept for the next steps' rows
            end = tracker.advance(token_ids)
            if end is None:
                self.n_out += n
                if self.pending:
                    self._refresh_pending()
                return _OK
            self.pending = False
            self.status = CONSTRAINED
            m = self.matcher
            start = end.content_start
            if m is None and self.future is not None:
                # the thinking ended before the grammar exists (the engine did not mask, or the family
                # cannot hold its end off): the content waits for the compile, the request leaves
                # the schedule until then
                self.n_out += start
                self.status = COMPILING
                self.held = token_ids[start:]
                self.resolve()
                if self.status is ERROR:
                    return AcceptResult("error", self.message)
                return _TERMINATED if self.status is TERMINATED else _OK
            if m is None:
                self.n_out += n
                return _OK
            self.n_out += start
            return self._feed(m, token_ids[start:])
        if st is ERROR:
            return AcceptResult("error", self.message)
        if st is TERMINATED:
            return self._after_end(token_ids)
        self.resolve()
        if self.status is ERROR:
            return AcceptResult("error", self.message)
        raise ValueError(f"request {self.rid!r} is still compiling; it cannot have sampled tokens")

    def _feed(self, m: xgr.GrammarMatcher, tokens: list[int]) -> AcceptResult:
        """Feed content tokens to the grammar (the same as the inlined hot path of :meth:`accept`)."""
        accept = m.accept_token
        stops = self.ctx.stop_ids
        n = len(tokens)
        for i, t in enumerate(tokens):
            if not accept(t):
                return self._rejected(m, tokens, i)
            if t in stops and i + 1 < n:  # tokens after a stop: never offer them to a terminated matcher
                return self._rejected(m, tokens, i + 1)
        self.n_out += n
        self.n_content += n
        if n and tokens[-1] in stops:
            return self._terminate()
        return _OK

    def _rejected(self, m: xgr.GrammarMatcher, tokens: list[int], i: int) -> AcceptResult:
        """``tokens[:i]`` were accepted; ``tokens[i]`` was rejected, or follows a stop token that
        terminated the grammar (then only stop tokens may follow)."""
        self.n_out += i
        self.n_content += i
        if m.is_terminated():
            if self._terminate() is not _TERMINATED:
                return AcceptResult("error", self.message)
            return self._after_end(tokens[i:])
        return self._reject(tokens[i], self._bound_broken(m, tokens[i]))

    def _terminate(self) -> AcceptResult:
        """The grammar accepted a stop token: the output is complete. A schema with keywords the grammar
        does not enforce has its output checked here, once (schema_support.py): a violation is ERROR."""
        ctx = self.ctx
        problem = output_problem(self.matcher, ctx.vocabulary, ctx.stop_ids)
        if problem is not None:
            self.fail(problem)
            return AcceptResult("error", problem)
        self.status = TERMINATED
        return _TERMINATED

    def _after_end(self, tokens: list[int]) -> AcceptResult:
        """Tokens after the grammar accepted a stop token: only stop tokens."""
        stops = self.ctx.stop_ids
        for i, t in enumerate(tokens):
            if t not in stops:
                self.n_out += i
                return self._reject(t, " after the output was complete (only stop tokens may follow)")
        self.n_out += len(tokens)
        return _TERMINATED

    def _reject(self, token: int, why: str) -> AcceptResult:
        message = self._rejection(token, why)
        self.fail(message)
        return AcceptResult("error", message)

    # -- messages --------------------------------------------------------------------------------
    @staticmethod
    def _bound_broken(m: xgr.GrammarMatcher, token: int) -> str:
        """Why the grammar refused ``token`` beyond its own rules: the JSON whitespace bound, or ``""``."""
        if isinstance(m, BoundedMatcher) and m.breaks_bound(token):
            b = m.ws_bound.max_whitespace
            return f" (it would put more than {b} whitespace characters in a gap between JSON tokens: max_whitespace={b})"
        return ""

    def _rejection(self, token: int, why: str) -> str:
        """The message for ``token``, refused at the next output position: its id, its text, where, and
        by which constraint (``why`` appended)."""
        vocab = self.ctx.vocabulary
        text = vocab.token_bytes[token] if token < vocab.vocab_size else b""
        return (f"token {token} ({text.decode('utf-8', errors='replace')!r}) at output position {self.n_out} "
                f"(content position {self.n_content}) is not allowed by the {self._kind()} constraint{why}")

    def _no_token_left(self, after: str) -> str:
        return (f"the {self._kind()} constraint accepts no output from here: after {self.n_content} content "
                f"token(s){after} its grammar allows no token at all")

    def _kind(self) -> str:
        return self.constraint.kind if self.constraint is not None else "?"

    # -- the batch driver: rows --------------------------------------------------------------------
    def plan_rows(self, plan: StepPlan, drafts: Sequence[int], base: int) -> None:
        """This request's part of one step (a schedulable request whose logits rows start at ``base``):
        its precomputed rows placed into the plan's buffer (thinking, pending, hold, forced, stop-only),
        and its grammar rows listed for the fill (a plain matcher, or a :class:`Walk` through its
        drafts). Moves no matcher and no tracker (the tracker is only scanned); a compile that finished
        meanwhile resolves."""
        st = self.status
        if st is CONSTRAINED:
            m = self.matcher
            res = self.reserve
            if res is not None and m is not None:  # steering to the shortest completion (see .reserve)
                forcing = res.plan(self.n_out, self.n_content, drafts)
                if forcing is not None:
                    self.ctx.budget.place(forcing, self.rid, base, plan.buffer, plan.row_logits, plan.row_rids)
                    return
            if m is not None:
                nd = len(drafts)
                if nd == 0 and not self.may_allow_all:
                    plan.plain_matchers.append(m)
                    plan.plain_rows.append(base)
                    plan.plain_rids.append(self.rid)
                    plan.fill_rows += 1
                else:
                    plan.walks.append(Walk(m, drafts, 0, base, self.rid, self.may_allow_all, 0))
                    plan.fill_rows += nd + 1
        elif st is THINKING:
            m = self.matcher
            if m is None and self.future is not None:  # thinking while its constraint compiles
                self.resolve()
                m = self.matcher
            nd = len(drafts)
            # a budget reached in this step: its rows from the budget point on force the end of thinking
            limit = self.think_limit
            forcing = plan_forcing(limit, self.n_out, self.forced, self.tracker, drafts) \
                if limit is not None and self.status is THINKING and self.n_out + nd >= limit else None
            own = drafts if forcing is None else drafts[:forcing.first - 1] if forcing.first else None
            end = None
            if own is not None and self.status is THINKING:
                if m is None:
                    if self.future is not None:  # still compiling: hold the end off
                        self._holding_rows(own, base, plan)
                else:
                    end = self._thinking_rows(own, base, plan)
            if forcing is not None:
                self.ctx.budget.place(forcing, self.rid, base, plan.buffer, plan.row_logits, plan.row_rids)
                end = forcing.end
            if end is not None and m is not None:
                # the grammar starts at drafts[content_start] (the implicit end token itself, or the token
                # after the end marker); its first row is at end.offset + 1
                plan.walks.append(Walk(m, drafts, end.offset + 1, base, self.rid, self.may_allow_all,
                                       end.content_start))
                plan.fill_rows += nd - end.offset
        elif st is TERMINATED:
            stop = self.ctx.stop_row
            place = plan.buffer.place
            row_logits = plan.row_logits
            row_rids = plan.row_rids
            rid = self.rid
            for j in range(len(drafts) + 1):
                place(len(row_logits), stop)
                row_logits.append(base + j)
                row_rids.append(rid)

    def _thinking_rows(self, drafts: Sequence[int], base: int, plan: StepPlan) -> ReasoningEnd | None:
        """The thinking rows of this thinking request (with a grammar); returns where its thinking ends
        inside ``drafts`` (None: it does not).

        Each thinking position gets the thinking (or pending) row, placed at ``len(row_logits)`` by
        :meth:`BitmaskBuffer.place` (not written again when that place holds it already). The positions
        after the returned end are grammar rows: the caller fills them, the grammar starting at
        ``drafts[end.content_start]`` with its first row at ``end.offset + 1``."""
        tracker = self.tracker
        assert tracker is not None, "a thinking request has a tracker"
        gate = self.ctx.gate
        sb, row_logits, row_rids = plan.buffer, plan.row_logits, plan.row_rids
        nd = len(drafts)
        end = tracker.scan(drafts) if nd else None
        last_thinking = nd if end is None else end.offset  # rows 0..last_thinking are thinking rows
        rid = self.rid
        for j in range(last_thinking + 1):
            if not self.pending:
                row = self.think_row
            elif j == 0:
                row = self.pending_row
            else:
                # still undecided after drafts 0..j-1? (text markers: the decision can take several tokens)
                keep = tracker.keep_thinking_token_ids(drafts[:j])
                if keep is None:
                    row = self.think_row
                else:
                    compiled = self.compiled
                    assert compiled is not None, "a pending request has a grammar"
                    row = gate.pending_row(compiled, keep)
            if row is not None:
                sb.place(len(row_logits), row)  # same row as last step at this place: nothing written
                row_logits.append(base + j)
                row_rids.append(rid)
        return end

    def _holding_rows(self, drafts: Sequence[int], base: int, plan: StepPlan) -> None:
        """The rows of this thinking request while its constraint still compiles: at each position, the
        hold row after the drafts before it. A draft that would end the thinking is banned by its own
        row (so the engine rejects it and every draft after it): no row follows it."""
        tracker = self.tracker
        assert tracker is not None, "a thinking request has a tracker"
        gate = self.ctx.gate
        sb, row_logits, row_rids = plan.buffer, plan.row_logits, plan.row_rids
        nd = len(drafts)
        end = tracker.scan(drafts) if nd else None
        last = nd if end is None else end.offset
        rid = self.rid
        for j in range(last + 1):
            row = gate.hold_row(tracker.ending_token_ids(drafts[:j]) if j else tracker.ending_token_ids())
            if row is not None:
                sb.place(len(row_logits), row)
                row_logits.append(base + j)
                row_rids.append(rid)

    def dead_end(self) -> None:
        """A row of this step allowed no token at all (the fill left it out): ``ERROR``."""
        self.fail(self._no_token_left(" (and this step's drafts)"))

    def forced_tokens(self, max_tokens: int, jump: JumpForward) -> list[int]:
        """The tokens forced next (jump-forward, see :mod:`.jump_forward`): the grammar's, past the
        thinking; the rest of the forced end of thinking, past the thinking budget; else none. Moves
        nothing (a compile that finished meanwhile resolves)."""
        if self.future is not None:
            self.resolve()
        m = self.matcher
        if self.status is THINKING:
            limit = self.think_limit
            if limit is None or self.forced is None or self.n_out < limit:
                return []
            return list(self.forced[self.n_out - limit:])[:max_tokens]
        if self.status is not CONSTRAINED or m is None:
            return []
        return jump.forced(m, max_tokens)

    # -- the one-token driver (an engine's grammar object) ---------------------------------------
    @property
    def dead_end_message(self) -> str | None:
        """Why this request's grammar hit a dead end under :meth:`fill_row` (then its rows allow only
        stop tokens; a rollback to before that point clears it), else None."""
        return self._dead

    def is_finished(self) -> bool:
        """The output is complete for :meth:`try_token`'s driver: the grammar accepted a stop token, or
        hit a dead end (changes nothing)."""
        return self.status is TERMINATED or self._dead is not None

    def _push(self, kind: int, before: ReasoningTracker | None) -> None:
        hist = self._history
        if hist is not None:
            hist.append((kind, before))
        self._pos += 1

    def try_token(self, token: int) -> str | None:
        """Commit one token (an id inside the logits width), or refuse it: returns why (the grammar
        rejects it, the finished output breaks the schema, a non-stop token after a dead end), with
        nothing moved; None once it is committed. After the end of the output, tokens are ignored."""
        if self._dead is not None:
            if token not in self.ctx.stop_ids:
                return self._dead
            self._push(_IGNORED, None)
            return None
        status = self.status
        if status is THINKING:
            tracker = self.tracker
            assert tracker is not None, "a thinking request has a tracker"
            before = tracker.copy()
            end = tracker.advance((token,))
            if end is None:
                self._push(_THINK, before)
                self.n_out += 1
                if self.pending:
                    self._refresh_pending()
                return None
            self.pending = False
            self.status = CONSTRAINED
            if not end.is_content:
                self._push(_END, before)
                self.n_out += 1
                return None
            why = self._try_content(token)
            if why is not None:
                self.tracker = before
                self.status = THINKING
                self._refresh_pending()
                return why
            self._push(_END_CONTENT, before)
            return None
        if status is CONSTRAINED:
            why = self._try_content(token)
            if why is None:
                self._push(_CONTENT, None)
            return why
        self._push(_IGNORED, None)  # terminated: as SGLang's xgrammar grammar, nothing after the end
        return None

    def _try_content(self, token: int) -> str | None:
        m = self.matcher
        assert m is not None, "a constrained request of this driver has a grammar"
        if not m.accept_token(token):
            return self._rejection(token, self._bound_broken(m, token))
        self.n_out += 1
        self.n_content += 1
        if m.is_terminated():
            ctx = self.ctx
            problem = output_problem(m, ctx.vocabulary, ctx.stop_ids)
            if problem is not None:
                m.rollback(1)
                self.n_out -= 1
                self.n_content -= 1
                return problem
            self.status = TERMINATED
        return None

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` tokens accepted by :meth:`try_token` (thinking, its end and content alike);
        ``ValueError`` past its rollback window."""
        if k <= 0:
            return
        hist = self._history
        if hist is None or k > len(hist):
            raise ValueError(f"cannot roll back {k} tokens: {len(hist or ())} can be "
                             f"(at most {hist.maxlen if hist is not None else 0})")
        m = self.matcher
        content = 0
        restore: ReasoningTracker | None = None
        for _ in range(k):
            kind, before = hist.pop()
            if kind == _CONTENT or kind == _END_CONTENT:
                content += 1
            if kind != _IGNORED:
                self.n_out -= 1
            if before is not None:
                restore = before  # the earliest one popped wins: the state before the first undone token
        self._pos -= k
        if self._dead is not None and self._pos < self._dead_at:
            self._dead = None  # back before the dead end (a draft path the engine walked and undid)
        if content:
            assert m is not None
            m.rollback(content)
            self.n_content -= content
        if self.forced is not None and self.n_out < self.think_limit:
            self.forced = None  # back before the budget point: taken again when it is reached
        if restore is not None:
            self.tracker = restore
            self.status = THINKING
            self._refresh_pending()
        elif self.status is TERMINATED and m is not None and not m.is_terminated():
            self.status = CONSTRAINED

    def fill_row(self, vocab_mask: torch.Tensor, idx: int) -> str | None:
        """Row ``idx`` of ``vocab_mask`` (a CPU int32 mask whose rows allow everything until written):
        nothing written while thinking with nothing to mask; the forced token past the thinking budget;
        the thinking or pending row; the grammar's row; stop tokens only once terminated or at a dead
        end. Returns the message of a dead end found by this fill (its row then allows only the stop
        tokens), else None."""
        ctx = self.ctx
        if self._dead is not None:
            vocab_mask[idx].copy_(torch.from_numpy(ctx.stop_row))
            return None
        status = self.status
        if status is THINKING:
            limit = self.think_limit
            if limit is not None and self.n_out >= limit:  # the budget forces the end
                if self.forced is None:
                    tracker = self.tracker
                    assert tracker is not None, "a thinking request has a tracker"
                    self.forced = tracker.forced_end_token_ids() or ()
                i = self.n_out - limit
                if i < len(self.forced):
                    vocab_mask[idx].copy_(torch.from_numpy(ctx.budget.row(self.forced[i])))
                    return None
            row = self.pending_row if self.pending else self.think_row
            if row is not None:
                vocab_mask[idx].copy_(torch.from_numpy(row))
            return None
        if status is TERMINATED:
            vocab_mask[idx].copy_(torch.from_numpy(ctx.stop_row))
            return None
        m = self.matcher
        assert m is not None, "a constrained request of this driver has a grammar"
        self.message = None
        m.fill_next_token_bitmask(vocab_mask, idx)
        words = vocab_mask.numpy()[idx]
        if isinstance(m, RecordingMatcher):
            self._check_ending(m, words)
        if not words.any():  # a dead end: never hand the sampler a row that allows nothing
            self._dead = self.message or self._no_token_left("")
            self._dead_at = self._pos
            vocab_mask[idx].copy_(torch.from_numpy(ctx.stop_row))
            return self._dead
        return None

    def _check_ending(self, m: RecordingMatcher, words: np.ndarray) -> None:
        """A schema checked on its output: the stop tokens stay allowed only if the output so far
        passes the check (else the model may not end here; the message is kept for a dead end)."""
        ctx = self.ctx
        stops = ctx.stop_list
        if not any((int(words[t >> 5]) >> (t & 31)) & 1 for t in stops):
            return
        problem = m.check.problem_of_tokens(ctx.vocabulary, m.tokens, ctx.stop_ids)
        if problem is None:
            return
        bits = words.view(np.uint32)
        for t in stops:
            bits[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
        self.message = problem

    def __repr__(self) -> str:
        return (f"StructuredRequest({self.rid}, {self.status.value}, out={self.n_out}, content={self.n_content}"
                f"{', ' + repr(self.message) if self.message else ''})")
