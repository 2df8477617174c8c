"""The scheduler-facing structured-output manager: compile, gate on reasoning, fill, accept.

See :class:`StructuredOutputManager` for lifetimes, thread-safety and the step protocol.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union

import numpy as np
import torch
import xgrammar as xgr

from thinkgate.reasoning.base import ReasoningParser
from thinkgate.reasoning.registry import get_reasoning_parser
from thinkgate.reasoning.vocabulary import Vocabulary

from .compiler import CompiledConstraint, Compiler, xgrammar_message
from .constraints import Constraint
from .fill import RowFiller, Walk
from .gating import ReasoningGate
from .request_state import COMPILING, CONSTRAINED, ERROR, TERMINATED, THINKING, RequestState, RequestStatus
from .rows import row_with

__all__ = ["StructuredOutputManager", "RequestStatus", "AcceptResult", "BitmaskBatch", "ScheduleEntry"]

ScheduleEntry = Union[str, tuple[str, Sequence[int]]]
"""A scheduled request: its id, or ``(id, draft_token_ids)`` with speculative decoding."""


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


@dataclass(frozen=True)
class BitmaskBatch:
    """The rows to mask in one step.

    ``bitmask`` is an int32 ``[n, ceil(logits_width / 32)]`` view of the manager's preallocated buffer
    (token ``t`` allowed iff bit ``t & 31`` of word ``t >> 5`` is set; ids past the tokenizer's size
    are never set); ``logits_indices`` (int32 ``[n]``, same buffer rules) gives the logits row each
    mask row applies to. Both are valid until the next ``grammar_bitmask`` call (with
    ``num_buffers=2``, the one after): copy them (e.g. to the GPU) before it, and treat them as read-only (the manager leaves a precomputed row in place
    from one step to the next when it is still the right one). Rows come in no particular order;
    every logits row appears at most once.
    """

    bitmask: torch.Tensor
    logits_indices: torch.Tensor
    request_ids: list[str]
    """The request of each row."""
    num_logits_rows: int
    """Logits rows the schedule covers: the sum of ``1 + len(drafts)`` over the scheduled requests."""

    def __len__(self) -> int:
        return int(self.bitmask.shape[0])


class BitmaskBuffer:
    """One preallocated bitmask buffer and what the manager remembers about it between steps.

    ``bitmask`` / ``indices`` are the tensors a :class:`BitmaskBatch` views (``*_np``: numpy views of
    the same memory, for writes from numpy); ``views`` keeps the ``[:n]`` views of each row count
    already returned (slicing a tensor per step costs more than a dictionary look-up); ``static_at[i]``
    is the precomputed row (thinking, pending or stop-only) row ``i`` holds, None for a filled one,
    so that a place that holds the same precomputed row as last step is not written again.
    """

    __slots__ = ("bitmask", "bitmask_np", "indices", "indices_np", "views", "static_at")

    def __init__(self, rows: int, num_words: int, pin_memory: bool) -> None:
        self.bitmask = torch.empty((rows, num_words), dtype=torch.int32, pin_memory=pin_memory)
        self.bitmask_np: np.ndarray = self.bitmask.numpy()
        self.indices = torch.empty((rows,), dtype=torch.int32, pin_memory=pin_memory)
        self.indices_np: np.ndarray = self.indices.numpy()
        self.views: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.static_at: list[np.ndarray | None] = [None] * rows


class StructuredOutputManager:
    """Structured output for one model, called by the engine's scheduler every step.

    Lifetimes
    ---------
    Per model (built once, shared): the :class:`~reasoning.Vocabulary`, the reasoning parser instance,
    and the :class:`~structured_output.compiler.Compiler` (xgrammar compiler, compile pool, byte-bounded
    cache keyed by :attr:`Constraint.key`). Pass ``compiler=`` to share one among managers of the same
    model; otherwise the manager builds its own.
    Per manager: the preallocated bitmask buffer ``[max_num_seqs * (1 + num_speculative_tokens),
    ceil(logits_width / 32)]`` int32 and the rows precomputed from the vocabulary (stop tokens only).
    Per request (created by ``add_request``, freed by ``remove_request``): the constraint and its compile
    future, then its grammar matcher; its reasoning tracker (``parser.new_tracker(prompt,
    chat_template_kwargs)``); its status and error message.

    Thread-safety
    -------------
    The manager is driven by one thread, the scheduler loop: its methods must not be called
    concurrently. Compiles run on the compiler's threads, which only complete futures; the manager
    reads them when it is called. Large batches are filled by xgrammar's batch matcher on its own
    threads, outside the GIL, inside ``grammar_bitmask``.

    The step protocol
    -----------------
    1. ``add_request(id, constraint, prompt_token_ids, chat_template_kwargs=..., include_reasoning=...)``
       checks its arguments (``ValueError`` for a malformed one; nothing is stored) and starts the
       constraint's compile (a cache hit is ready at once). Its cost depends on the size of the
       constraint, never on its content: the constraint is validated with its compile, in a worker
       process, and an invalid one puts the request in ``ERROR`` with a message naming the problem.
       ``constraint=None`` registers an unconstrained request: it only occupies its logits rows in
       the schedule.
    2. Schedule only requests with ``is_ready(id)``; a request in ``ERROR`` should be aborted (its
       ``error(id)`` says why).
    3. ``grammar_bitmask(schedule)``: each scheduled request owns ``1 + len(drafts)`` consecutive
       logits rows, in schedule order. Rows are returned only where something is constrained:
       a request past its thinking gets one row per position (row ``i``: after draft ``i``; the grammar
       is advanced through the drafts and rolled back; a draft the grammar rejects, or a stop token
       it accepts, ends that request's rows for the step); a request still thinking gets no row,
       except to mask implicit reasoning-end tokens its grammar could not start with (see below); a
       terminated request gets stop-token-only rows; unconstrained and errored requests get none.
    4. The engine applies the rows (``kernels.apply_token_bitmask_inplace(logits, batch.bitmask,
       batch.logits_indices)``) and samples.
    5. ``accept_tokens(id, token_ids)`` with the committed tokens (accepted drafts plus the bonus
       token): the reasoning tracker finds where the thinking ends (exactly, to the token) and only
       the tokens after it go to the grammar (an implicit end token that is also content, Qwen's
       ``<tool_call>``, included). Answers ``ok`` / ``terminated`` / ``error``.
    6. ``remove_request(id)`` when the request finishes or is aborted.

    Reasoning gating
    ----------------
    With a reasoning parser and ``include_reasoning=True``, the grammar applies from the first token
    after the thinking of the current turn ends (the tracker reads the prompt: a template that closed
    the thinking starts the request past it, one that opened it starts it thinking; the request's
    ``chat_template_kwargs`` reach the parser). ``include_reasoning=False`` (or no parser, or a constraint
    whose ``covers_reasoning`` is set, such as harmony's tool calls): the grammar
    applies from the first token. While thinking, nothing is masked except implicit end tokens that
    the grammar could not start with (they would end the thinking *and* be rejected); that row is
    precomputed once per compiled grammar. While a model that may skip its thinking has not yet
    decided (the tracker's ``keep_thinking_token_ids()`` is not None: the first token for token
    markers, possibly several for granite's text markers), the row is the grammar's first-token mask
    plus the tokens that keep the thinking possible; with drafts, row ``j`` takes the keepers after
    drafts ``0..j-1`` (``keep_thinking_token_ids(after=drafts[:j])``, pure).

    Failure model
    -------------
    A compile error or timeout (``compile_timeout_s``, counted from ``add_request``: a request is never
    ``COMPILING`` longer), or a token the grammar rejects, puts that request in ``ERROR`` with a message;
    it gets no more rows, and ``accept_tokens`` answers ``error``. Only misuse raises: an unknown or
    duplicate request id (``KeyError`` / ``ValueError``), a request scheduled before it is ready, a
    schedule larger than the buffer, more drafts than ``num_speculative_tokens``, token ids outside the
    logits width (``ValueError``).

    Costs
    -----
    Per step, the work grows with the tokens of that step: one fill per returned row (xgrammar), one
    accept per committed or draft token, the tracker's O(tokens) scan; nothing grows with the sequence
    so far, and nothing of size ``[batch, vocab]`` is allocated per step. Precomputed rows (thinking,
    stop-only) are written into the buffer only when that place held another row the step before.
    ``python -m bench step`` measures the manager against xgrammar's matchers called directly.
    """

    def __init__(
        self,
        vocabulary: Vocabulary | str | Any,
        reasoning_parser: ReasoningParser | str | None = None,
        *,
        max_num_seqs: int = 256,
        num_speculative_tokens: int = 0,
        compile_timeout_s: float = 30.0,
        cache_limit_bytes: int = 512 << 20,
        num_compile_threads: int = 2,
        num_fill_threads: int | Literal["auto"] = "auto",
        batch_fill_min_rows: int = 32,
        compiler: Compiler | None = None,
        chat_template_kwargs: Mapping[str, Any] | None = None,
        pin_memory: bool | None = None,
        num_buffers: int = 1,
    ) -> None:
        """
        Parameters
        ----------
        vocabulary: the model's vocabulary (a ``Vocabulary``, a short name, or an HF tokenizer).
        reasoning_parser: a registered parser name (``"qwen3"``), a parser instance, or None (no
            reasoning: the grammar applies from the first token).
        max_num_seqs, num_speculative_tokens: size the bitmask buffer: at most ``max_num_seqs``
            requests per schedule, at most ``num_speculative_tokens`` drafts each.
        compile_timeout_s: longest time a request may stay ``COMPILING`` (from ``add_request``).
        cache_limit_bytes, num_compile_threads: for the compiler built when ``compiler`` is None.
        num_fill_threads: xgrammar batch-matcher threads (``"auto"``: half the CPUs this process may
            run on, at most 16, as xgrammar does). With 1, rows are always filled one by one.
        batch_fill_min_rows: a round of at least this many rows is filled by the batch matcher
            (threads, outside the GIL); smaller ones one by one.
        compiler: a shared per-model :class:`Compiler` (its vocabulary must be this one).
        chat_template_kwargs: defaults for every request (a request's own override them).
        pin_memory: allocate the buffers in pinned memory for fast copies to the GPU (default: when
            CUDA is available).
        num_buffers: bitmask buffers used in turn. With 1, a batch is valid until the next
            ``grammar_bitmask`` call; an engine that copies it to the GPU with ``non_blocking=True``
            and prepares step N+1 before step N's copy is known to be done (async scheduling) should
            use 2: a batch then stays valid until the call after next.
        """
        vocab = compiler.vocabulary if compiler is not None and vocabulary is None else Vocabulary.coerce(vocabulary)
        for name, value, low in (("max_num_seqs", max_num_seqs, 1), ("num_speculative_tokens", num_speculative_tokens, 0),
                                 ("batch_fill_min_rows", batch_fill_min_rows, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not (isinstance(compile_timeout_s, (int, float)) and compile_timeout_s > 0):
            raise ValueError(f"compile_timeout_s must be a positive number of seconds, got {compile_timeout_s!r}")
        if compiler is None:
            compiler = Compiler(vocab, num_threads=num_compile_threads, cache_limit_bytes=cache_limit_bytes)
            self._owns_compiler = True
        else:
            if compiler.vocabulary is not vocab and (compiler.vocabulary.vocab_size != vocab.vocab_size
                                                     or compiler.vocabulary.logits_width != vocab.logits_width):
                raise ValueError(f"the compiler was built for vocabulary {compiler.vocabulary.name!r}, "
                                 f"not {vocab.name!r}")
            self._owns_compiler = False
        self.vocabulary = vocab
        self.compiler = compiler
        self.parser = self._make_parser(reasoning_parser, vocab)
        self.chat_template_kwargs = dict(chat_template_kwargs or {})
        self.max_num_seqs = max_num_seqs
        self.num_speculative_tokens = num_speculative_tokens
        self.compile_timeout_s = float(compile_timeout_s)
        self.logits_width = vocab.logits_width
        self.num_words = (vocab.logits_width + 31) // 32

        rows = max_num_seqs * (1 + num_speculative_tokens)
        if pin_memory is None:
            pin_memory = torch.cuda.is_available()
        if isinstance(num_buffers, bool) or not isinstance(num_buffers, int) or num_buffers < 1:
            raise ValueError(f"num_buffers must be a positive integer, got {num_buffers!r}")
        self._buffers = [BitmaskBuffer(rows, self.num_words, pin_memory) for _ in range(num_buffers)]
        self._buffer = self._buffers[0]
        self._next_buffer = 0
        self._filler = RowFiller(num_fill_threads, batch_fill_min_rows, vocab.stop_token_ids)
        self._gate = ReasoningGate(vocab, self.parser.implicit_reasoning_end_token_ids if self.parser is not None else ())
        self._requests: dict[str, RequestState] = {}
        self._stop_row = row_with(self.num_words, vocab.stop_token_ids)  # precomputed row of a terminated request
        self._stop_ids = vocab.stop_token_ids

    @property
    def num_fill_threads(self) -> int:
        """xgrammar batch-matcher threads (``"auto"`` resolved)."""
        return self._filler.num_threads

    @property
    def batch_fill_min_rows(self) -> int:
        """Rows per round from which the batch matcher fills (never, with one fill thread)."""
        return self._filler.min_rows

    # -- construction helpers --------------------------------------------------------------------
    @staticmethod
    def _make_parser(parser: ReasoningParser | str | None, vocab: Vocabulary) -> ReasoningParser | None:
        if parser is None:
            return None
        if isinstance(parser, str):
            return get_reasoning_parser(parser)(vocab)
        if isinstance(parser, ReasoningParser):
            pv = parser.vocabulary
            if pv is not vocab and (pv.vocab_size != vocab.vocab_size or pv.special_tokens != vocab.special_tokens):
                raise ValueError(f"the reasoning parser {parser.name!r} was built for vocabulary {pv.name!r}, "
                                 f"not {vocab.name!r}")
            return parser
        raise ValueError(f"reasoning_parser must be a parser name, a ReasoningParser or None, "
                         f"got {type(parser).__name__}")

    def close(self) -> None:
        """Drop every request; stop the compile pool if this manager built it."""
        self._requests.clear()
        if self._owns_compiler:
            self.compiler.close()

    def __enter__(self) -> StructuredOutputManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    def add_request(self, request_id: str, constraint: Constraint | None, prompt_token_ids: Sequence[int] = (), *,
                    chat_template_kwargs: Mapping[str, Any] | None = None, include_reasoning: bool = True) -> None:
        """Register a request: check the arguments (``ValueError`` for a malformed one, nothing
        stored), start compiling the constraint, and derive the reasoning state from the prompt.
        O(size of the prompt and the constraint) on this thread: the constraint is validated with
        its compile, off this thread (an invalid one puts the request in ``ERROR``)."""
        if not isinstance(request_id, str):
            raise ValueError(f"request_id must be a str, got {type(request_id).__name__}")
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already registered")
        if constraint is not None and not isinstance(constraint, Constraint):
            raise ValueError(f"constraint must be a Constraint or None, got {type(constraint).__name__}")
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, Mapping):
            raise ValueError("chat_template_kwargs must be a mapping")
        prompt_token_ids = self._prompt_list(prompt_token_ids)
        tracker = None
        if constraint is not None and constraint.covers_reasoning:
            include_reasoning = False  # the constraint spells the thinking itself (harmony)
        if self.parser is not None and include_reasoning:
            kwargs = self.chat_template_kwargs
            if chat_template_kwargs:
                kwargs = {**kwargs, **chat_template_kwargs}
            tracker = self.parser.new_tracker(prompt_token_ids, kwargs)
            if tracker.ended:
                tracker = None
        req = RequestState(request_id, constraint, tracker)
        if constraint is None:
            req.status = THINKING if tracker is not None else CONSTRAINED
        else:
            req.future = self.compiler.submit(constraint, timeout_s=self.compile_timeout_s)
            req.deadline = time.monotonic() + self.compile_timeout_s
            if req.future.done():
                self._resolve(req)
        self._requests[request_id] = req

    def remove_request(self, request_id: str) -> None:
        """Forget a request (``KeyError`` if unknown)."""
        try:
            del self._requests[request_id]
        except KeyError:
            raise KeyError(f"unknown request {request_id!r}") from None

    def is_ready(self, request_id: str) -> bool:
        """True once the request's compile is done, well or not: it can be scheduled (an errored one
        gets no rows; abort it). Reading the clock and the compile future is all it does: a finished
        compile or a passed deadline is what changes the answer."""
        req = self._get(request_id)
        if req.status is COMPILING:
            self._resolve(req)
        return req.status is not COMPILING

    def status(self, request_id: str) -> RequestStatus:
        req = self._get(request_id)
        if req.status is COMPILING:
            self._resolve(req)
        return req.status

    def error(self, request_id: str) -> str | None:
        """The error message of a request in ``ERROR``, else None."""
        req = self._get(request_id)
        if req.status is COMPILING:
            self._resolve(req)
        return req.message

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._requests

    def __len__(self) -> int:
        return len(self._requests)

    # -- the step --------------------------------------------------------------------------------
    def grammar_bitmask(self, schedule: Sequence[ScheduleEntry]) -> BitmaskBatch | None:
        """The rows to mask for ``schedule`` (see the class docstring); None when no row is needed.

        ``schedule``: request ids, or ``(request_id, draft_token_ids)`` pairs; request ``i`` owns the
        logits rows ``base_i .. base_i + len(drafts_i)``, ``base_i`` being the sum of ``1 + len(drafts)``
        over the entries before it. Row ``j`` of a request masks the token that follows its committed
        tokens and drafts ``0 .. j-1``.
        """
        if len(schedule) > self.max_num_seqs:
            raise ValueError(f"schedule has {len(schedule)} requests; the manager was built for "
                             f"max_num_seqs={self.max_num_seqs}")
        if len(self._buffers) > 1:  # take turns: the previous batches stay valid for a while
            self._buffer = self._buffers[self._next_buffer]
            self._next_buffer = (self._next_buffer + 1) % len(self._buffers)
        sb = self._buffer
        reqs = self._requests
        buf = sb.bitmask_np
        static_at = sb.static_at
        gate = self._gate
        row_logits: list[int] = []
        row_rids: list[str] = []
        plain_matchers: list[xgr.GrammarMatcher] = []  # constrained, no drafts, rows never all-allowed:
        plain_rows: list[int] = []                     # one row each, at these logits rows,
        plain_rids: list[str] = []                     # for these requests
        walks: list[Walk] = []                         # the other constrained requests (see Walk)
        base = 0
        k_max = self.num_speculative_tokens
        seen: set[str] = set()
        for entry in schedule:
            if type(entry) is str:
                rid, drafts = entry, ()
            else:
                rid, drafts = self._parse_entry(entry)
            req = reqs.get(rid)
            if req is None:
                raise KeyError(f"unknown request {rid!r} in the schedule")
            if rid in seen:
                raise ValueError(f"request {rid!r} appears twice in the schedule")
            seen.add(rid)
            nd = len(drafts)
            if nd > k_max:
                raise ValueError(f"request {rid!r} has {nd} draft tokens; the manager was built for "
                                 f"num_speculative_tokens={k_max}")
            st = req.status
            if st is COMPILING:
                self._resolve(req)
                st = req.status
                if st is COMPILING:
                    raise ValueError(f"request {rid!r} is still compiling (is_ready() is False); "
                                     f"it cannot be scheduled yet")
            if st is CONSTRAINED:
                m = req.matcher
                if m is not None:
                    if nd == 0 and not req.may_allow_all:
                        plain_matchers.append(m)
                        plain_rows.append(base)
                        plain_rids.append(rid)
                    else:
                        walks.append(Walk(m, drafts, 0, base, rid, req.may_allow_all, 0))
            elif st is THINKING:
                m = req.matcher
                if m is not None:
                    end = gate.thinking_rows(req, drafts, base, buf, static_at, row_logits, row_rids)
                    if end is not None:
                        # the grammar starts at drafts[content_start] (the implicit end token itself, or
                        # the token after the end marker); its first row is at end.offset + 1
                        walks.append(Walk(m, drafts, end.offset + 1, base, rid, req.may_allow_all, end.content_start))
            elif st is TERMINATED:
                stop = self._stop_row
                for j in range(nd + 1):
                    i = len(row_logits)
                    if static_at[i] is not stop:
                        buf[i] = stop
                        static_at[i] = stop
                    row_logits.append(base + j)
                    row_rids.append(rid)
            base += 1 + nd

        n_static = len(row_logits)  # rows so far hold precomputed rows; the ones below are filled
        if plain_matchers:
            self._filler.fill_plain(sb.bitmask, plain_matchers, plain_rows, plain_rids, row_logits, row_rids)
        if walks:
            # after the whole schedule was checked: a misuse found in it leaves every matcher untouched
            self._filler.fill_walks(sb.bitmask, walks, row_logits, row_rids)
        n = len(row_logits)
        if n == 0:
            return None
        if n_static < n:
            static_at[n_static:n] = [None] * (n - n_static)
        sb.indices_np[:n] = row_logits
        views = sb.views.get(n)
        if views is None:  # slicing a tensor costs more than a look-up: keep the views of each row count
            views = sb.views[n] = (sb.bitmask[:n], sb.indices[:n])
        return BitmaskBatch(views[0], views[1], row_rids, base)

    def accept_tokens(self, request_id: str, token_ids: Sequence[int]) -> AcceptResult:
        """Commit the sampled tokens of one step (accepted drafts plus the bonus token).

        Returns ``ok``, ``terminated`` (the grammar accepted a stop token), or ``error`` (this or an
        earlier token was rejected; the request is in ``ERROR``, final, with a message naming the
        token, its text and its output position)."""
        req = self._requests.get(request_id)
        if req is None:
            raise KeyError(f"unknown request {request_id!r}")
        if type(token_ids) is not list:
            token_ids = self._as_token_list(token_ids)
        n = len(token_ids)
        width = self.logits_width
        if n == 1:
            if not 0 <= token_ids[0] < width:
                self._bad_token(request_id, token_ids)
        elif n and (min(token_ids) < 0 or max(token_ids) >= width):
            self._bad_token(request_id, token_ids)
        st = req.status
        if st is CONSTRAINED:  # the hot path, inlined: feed every token to the grammar
            m = req.matcher
            if m is None:  # unconstrained
                req.n_out += n
                return _OK
            accept = m.accept_token
            stops = self._stop_ids
            i = 0
            for t in token_ids:
                if not accept(t):
                    return self._rejected(req, m, token_ids, i)
                i += 1
                if t in stops and i < n:  # tokens after a stop: never offer them to a terminated matcher
                    return self._rejected(req, m, token_ids, i)
            req.n_out += n
            req.n_content += n
            # every token was accepted, so only the last can be a stop token (one before it would
            # have terminated the grammar and failed the next); accepting a stop token terminates it
            if n and token_ids[-1] in self._stop_ids:
                req.status = TERMINATED
                return _TERMINATED
            return _OK
        if st is THINKING:
            tracker = req.tracker
            assert tracker is not None, "a thinking request has a tracker"
            end = tracker.advance(token_ids)
            if end is None:
                req.n_out += len(token_ids)
                if req.pending:
                    self._gate.refresh_pending(req)
                return _OK
            req.pending = False
            req.status = CONSTRAINED
            m = req.matcher
            if m is None:
                req.n_out += len(token_ids)
                return _OK
            start = end.content_start
            req.n_out += start
            return self._feed(req, m, token_ids[start:])
        if st is ERROR:
            return AcceptResult("error", req.message)
        if st is TERMINATED:
            return self._after_end(req, token_ids)
        self._resolve(req)
        if req.status is ERROR:
            return AcceptResult("error", req.message)
        raise ValueError(f"request {request_id!r} is still compiling; it cannot have sampled tokens")

    # -- internals: requests ---------------------------------------------------------------------
    def _get(self, request_id: str) -> RequestState:
        req = self._requests.get(request_id)
        if req is None:
            raise KeyError(f"unknown request {request_id!r}")
        return req

    def _resolve(self, req: RequestState) -> None:
        """Move a compiling request on if its compile finished or its deadline passed."""
        fut = req.future
        constraint = req.constraint
        if fut is None or constraint is None:  # not compiling (an unconstrained request never compiles)
            return
        if fut.done():
            req.future = None
            exc = fut.exception()
            if exc is not None:
                if isinstance(exc, ValueError):  # an invalid constraint (validated with the compile)
                    req.fail(str(exc))
                elif isinstance(exc, TimeoutError):  # the compiler stopped it at its deadline
                    req.fail(f"{constraint.kind} constraint did not compile within "
                             f"compile_timeout_s={self.compile_timeout_s:g} s")
                else:
                    req.fail(f"{constraint.kind} constraint failed to compile: {xgrammar_message(exc)}")
                return
            compiled: CompiledConstraint = fut.result()
            req.compiled = compiled
            req.matcher = xgr.GrammarMatcher(compiled.grammar)
            req.may_allow_all = compiled.may_allow_all
            if req.tracker is not None:
                req.status = THINKING
                self._gate.prepare(req, compiled)
            else:
                req.status = CONSTRAINED
        elif time.monotonic() > req.deadline:
            req.future = None
            self.compiler.mark_overdue(fut)
            req.fail(f"{constraint.kind} constraint did not compile within "
                     f"compile_timeout_s={self.compile_timeout_s:g} s")

    # -- internals: accept -----------------------------------------------------------------------
    def _feed(self, req: RequestState, m: xgr.GrammarMatcher, tokens: list[int]) -> AcceptResult:
        """Feed content tokens to the grammar (the same as the inlined hot path of accept_tokens)."""
        accept = m.accept_token
        stops = self._stop_ids
        n = len(tokens)
        for i, t in enumerate(tokens):
            if not accept(t):
                return self._rejected(req, m, tokens, i)
            if t in stops and i + 1 < n:  # tokens after a stop: never offer them to a terminated matcher
                return self._rejected(req, m, tokens, i + 1)
        req.n_out += n
        req.n_content += n
        if n and tokens[-1] in self._stop_ids:
            req.status = TERMINATED
            return _TERMINATED
        return _OK

    def _rejected(self, req: RequestState, m: xgr.GrammarMatcher, tokens: list[int], i: int) -> AcceptResult:
        """``tokens[:i]`` were accepted; ``tokens[i]`` was rejected, or follows a stop token that
        terminated the grammar (then only stop tokens may follow)."""
        req.n_out += i
        req.n_content += i
        if m.is_terminated():
            req.status = TERMINATED
            return self._after_end(req, tokens[i:])
        return self._reject(req, tokens[i], "")

    def _after_end(self, req: RequestState, tokens: list[int]) -> AcceptResult:
        """Tokens after the grammar accepted a stop token: only stop tokens."""
        stops = self._stop_ids
        for i, t in enumerate(tokens):
            if t not in stops:
                req.n_out += i
                return self._reject(req, t, " after the output was complete (only stop tokens may follow)")
        req.n_out += len(tokens)
        return _TERMINATED

    def _reject(self, req: RequestState, token: int, why: str) -> AcceptResult:
        text = self.vocabulary.token_bytes[token] if token < self.vocabulary.vocab_size else b""
        kind = req.constraint.kind if req.constraint is not None else "?"
        message = (f"token {token} ({text.decode('utf-8', errors='replace')!r}) at output position "
                   f"{req.n_out} (content position {req.n_content}) is not allowed by the {kind} "
                   f"constraint{why}")
        req.fail(message)
        return AcceptResult("error", message)

    # -- internals: token ids -------------------------------------------------------------------
    def _prompt_list(self, prompt_token_ids: Any) -> list[int]:
        """The prompt as a list of ints inside the logits width (``ValueError`` otherwise). Once per
        request: min / max over a list run at C speed, so even a long prompt costs little next to its prefill."""
        if isinstance(prompt_token_ids, (torch.Tensor, np.ndarray)):
            prompt = self._as_token_list(prompt_token_ids)
        elif isinstance(prompt_token_ids, (str, bytes)) or not isinstance(prompt_token_ids, Sequence):
            raise ValueError(f"prompt_token_ids must be a sequence of token ids, got {type(prompt_token_ids).__name__}")
        else:
            prompt = prompt_token_ids if type(prompt_token_ids) is list else list(prompt_token_ids)
        if prompt:
            try:
                lo, hi = min(prompt), max(prompt)
                ok = isinstance(lo, (int, np.integer)) and isinstance(hi, (int, np.integer)) \
                    and 0 <= lo and hi < self.logits_width
            except TypeError:
                ok = False
            if not ok:
                bad = next((t for t in prompt if not isinstance(t, (int, np.integer))
                            or not 0 <= t < self.logits_width), prompt[0])
                raise ValueError(f"prompt token id {bad!r} is not an id in [0, {self.logits_width})")
        return prompt

    def _bad_token(self, request_id: str, token_ids: list[int]) -> None:
        bad = next(t for t in token_ids if not 0 <= t < self.logits_width)
        raise ValueError(f"request {request_id!r}: token id {bad} is outside [0, {self.logits_width})")

    @staticmethod
    def _as_token_list(token_ids: Any) -> list[int]:
        if isinstance(token_ids, torch.Tensor):
            if token_ids.dim() != 1:
                raise ValueError(f"token_ids must be 1-D, got shape {tuple(token_ids.shape)}")
            return token_ids.tolist()
        if isinstance(token_ids, np.ndarray):
            if token_ids.ndim != 1:
                raise ValueError(f"token_ids must be 1-D, got shape {token_ids.shape}")
            return token_ids.tolist()
        if isinstance(token_ids, (str, bytes)) or not isinstance(token_ids, Sequence):
            raise ValueError(f"token_ids must be a sequence of ints, got {type(token_ids).__name__}")
        out = list(token_ids)
        for t in out:
            if isinstance(t, bool) or not isinstance(t, (int, np.integer)):
                raise ValueError(f"token_ids must be ints, got {t!r}")
        return [int(t) for t in out]

    def _parse_entry(self, entry: Any) -> tuple[str, list[int]]:
        if not isinstance(entry, (tuple, list)) or len(entry) != 2 or not isinstance(entry[0], str):
            raise ValueError(f"a schedule entry is a request id or (request_id, draft_token_ids), got {entry!r}")
        rid, drafts = entry
        if type(drafts) is not list:
            drafts = self._as_token_list(drafts)
        if drafts and (min(drafts) < 0 or max(drafts) >= self.logits_width):
            raise ValueError(f"request {rid!r}: a draft token id is outside [0, {self.logits_width})")
        return rid, drafts
