"""The scheduler-facing structured-output manager: compile, gate on reasoning, fill, accept.

See :class:`StructuredOutputManager` for lifetimes, thread-safety and the step protocol.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Literal, TypeVar, Union

import numpy as np
import torch

from thinkgate.reasoning.base import ReasoningParser, ReasoningTracker
from thinkgate.reasoning.registry import get_reasoning_parser
from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.compiler import Compiler
from ..compilation.constraints import Constraint
from .budget import validate_budget
from .buffer import BitmaskBuffer
from .fill import RowFiller, StepPlan
from .jump_forward import JumpForward
from .overlap import OverlapFiller, PendingBitmask
from .report import ConstraintReport, report_of
from .request import COMPILING, AcceptResult, RequestContext, RequestStatus, StructuredRequest
from .reserve import DEFAULT_MARGIN, AnswerReserve, ReservationError, validate_max_tokens
from .search_service import SearchService

__all__ = ["StructuredOutputManager", "RequestStatus", "AcceptResult", "BitmaskBatch", "ScheduleEntry",
           "PendingBitmask"]

ScheduleEntry = Union[str, tuple[str, Sequence[int]]]
"""A scheduled request: its id, or ``(id, draft_token_ids)`` with speculative decoding."""

_FILL_PENDING = -1
"""What the manager's driver field holds while an async fill is pending (never a thread id)."""

_GUARD = """
def {name}(self, {params}):
    _tid = _get_ident()
    _prev = self._driver
    if _prev is not None and _prev != _tid:
        _concurrent_call(_prev, _tid, {name!r})
    self._driver = _tid
    try:
        return _method(self, {params})
    finally:
        self._driver = _prev
"""

_F = TypeVar("_F", bound=Callable[..., Any])


def _one_thread(method: _F) -> _F:
    """Guard a public method against a second thread: the manager records the thread inside one of
    its public methods (``_driver``), and another thread calling one meanwhile gets a ``RuntimeError``
    naming both (a thread-id compare and two attribute writes per call; no lock). A nested call from
    the same thread is allowed.

    The guard is written once (``_GUARD``) and built per method with that method's own positional
    parameters, so a call passes them on without packing ``*args`` / ``**kwargs`` (which costs a tenth
    of the per-step calls ``accept_tokens``, ``is_ready``, ``status``); a method with defaults,
    keyword-only or variable parameters gets ``*args, **kwargs``."""
    code = method.__code__
    plain = not (code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS)) and not code.co_kwonlyargcount \
        and not method.__defaults__
    params = ", ".join(code.co_varnames[1:code.co_argcount]) if plain else "*args, **kwargs"
    name = method.__name__
    scope = {"_get_ident": _get_ident, "_concurrent_call": _concurrent_call, "_method": method}
    # the template is fixed and the parameters are the method's own names (a namedtuple's way)
    exec(compile(_GUARD.format(name=name, params=params), f"<thread guard of {name}>", "exec"), scope)  # noqa: S102
    return functools.wraps(method)(scope[name])  # type: ignore[return-value]


def _concurrent_call(other: int, me: int, method: str) -> None:
    """Raise for a public call made while another thread is inside the manager, or a fill is pending."""
    if other == _FILL_PENDING:
        raise RuntimeError(f"StructuredOutputManager.{method} called while a grammar_bitmask_async fill is "
                           f"pending: call result() on its handle first (the manager is busy until then; "
                           f"nothing moved for this call)")
    raise RuntimeError(f"StructuredOutputManager.{method} called from thread {_thread_name(me)} while thread "
                       f"{_thread_name(other)} is inside another of its methods: a manager is driven by "
                       f"one thread at a time (the scheduler loop)")


def _thread_name(ident: int) -> str:
    for t in threading.enumerate():
        if t.ident == ident:
            return f"{t.name!r} (id {ident})"
    return f"id {ident}"


_get_ident = threading.get_ident


@dataclass(frozen=True)
class BitmaskBatch:
    """The rows to mask in one step.

    ``bitmask`` is an int32 ``[n, ceil(logits_width / 32)]`` view of the manager's preallocated buffer
    (token ``t`` allowed iff bit ``t & 31`` of word ``t >> 5`` is set; ids past the tokenizer's size
    are never set); ``logits_indices`` (int32 ``[n]``, same buffer rules) gives the logits row each
    mask row applies to. Both are valid until the next ``grammar_bitmask`` call (with
    ``num_buffers=2``, the one after): copy them (e.g. to the GPU) before it, and treat them as read-only (the manager leaves a precomputed row in place
    from one step to the next when it is still the right one). Rows come in no particular order;
    every logits row appears at most once. A step whose rows go to the same logits rows of the same
    requests as the last batch from the same buffer returns that batch object again (its views hold
    the new rows).
    """

    bitmask: torch.Tensor
    logits_indices: torch.Tensor
    request_ids: list[str]
    """The request of each row."""
    num_logits_rows: int
    """Logits rows the schedule covers: the sum of ``1 + len(drafts)`` over the scheduled requests."""

    def __len__(self) -> int:
        return int(self.bitmask.shape[0])


class StructuredOutputManager:
    """Structured output for one model, called by the engine's scheduler every step.

    Lifetimes
    ---------
    Per model (built once, shared): the :class:`~reasoning.Vocabulary`, the reasoning parser instance,
    and the :class:`~thinkgate.structured_output.compilation.compiler.Compiler` (xgrammar compiler, compile pool, byte-bounded
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
    concurrently. A cheap guard catches it (a thread-id compare per public call, no lock): a thread
    calling a public method while another thread is inside one gets a ``RuntimeError`` naming both,
    and nothing moves for that call (a race that both threads enter at the same instant is not
    guaranteed to be caught). Handing the manager from one thread to another between calls is fine. Compiles run on the compiler's threads, which only complete futures; the manager
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
       ``error(id)`` says why). With ``compile_while_thinking=True``, a request that starts thinking is
       ready at once: it thinks while its
       constraint compiles, and its rows ban the tokens that would end its thinking
       (``tracker.ending_token_ids()``) until the grammar exists. A family whose thinking ends on
       text (granite, text markers) or whose first token decides whether it thinks waits for its
       compile instead. If the thinking ends anyway (an engine that did not mask), the content
       tokens are kept, the request leaves the schedule (``COMPILING``) until the compile is done,
       and they are fed to the grammar then. ``is_compiled(id)`` says whether the compile settled.
    3. ``grammar_bitmask(schedule)``: each scheduled request owns ``1 + len(drafts)`` consecutive
       logits rows, in schedule order. Rows are returned only where something is constrained:
       a request past its thinking gets one row per position (row ``i``: after draft ``i``; the grammar
       is advanced through the drafts and rolled back; a draft the grammar rejects, or a stop token
       it accepts, ends that request's rows for the step); a request still thinking gets no row,
       except to mask implicit reasoning-end tokens its grammar could not start with (see below); a
       terminated request gets stop-token-only rows; unconstrained and errored requests get none. A
       request that reached its ``max_thinking_tokens`` without ending its thinking gets, from that
       point, one row per token of its family's end of thinking, each allowing only that token, with or
       without a constraint (:mod:`.budget`).
    4. The engine applies the rows (``kernels.apply_token_bitmask_inplace(logits, batch.bitmask,
       batch.logits_indices)``) and samples.
    5. ``accept_tokens(id, token_ids)`` with the committed tokens (accepted drafts plus the bonus
       token): the reasoning tracker finds where the thinking ends (exactly, to the token) and only
       the tokens after it go to the grammar (an implicit end token that is also content, Qwen's
       ``<tool_call>``, included). Answers ``ok`` / ``terminated`` / ``error``.
    6. ``remove_request(id)`` when the request finishes or is aborted.

    Jump-forward (optional, between 5 and the next 3): ``forced_tokens(id, max_tokens)`` lists the
    tokens the grammar forces next, each the only token its mask allows (never a stop token; nothing
    while thinking, except the rest of an end of thinking that a budget forces, and nothing after the
    end, in error or unconstrained; see :mod:`.jump_forward`). It moves
    nothing; the engine appends them to the request without a model step and commits them with
    ``accept_tokens(id, tokens)`` like sampled tokens, before the request's next
    ``grammar_bitmask`` (its drafts, if any, follow them). Costs at most ``max_tokens`` fills.

    Overlapped fill (optional, replaces 3): ``handle = grammar_bitmask_async(schedule)`` checks the
    schedule and places the precomputed rows on the caller's thread (misuse raises at once), then
    fills the grammar rows on a worker thread while the engine runs the model; ``handle.result()``
    gives the same batch as ``grammar_bitmask(schedule)``. Until ``result()`` returns or raises, the
    manager is busy: any other public call raises ``RuntimeError`` and moves nothing. A fill exception
    is raised by ``result()``, every matcher rolled back (see :mod:`.overlap`).

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
    ``COMPILING`` longer), a constraint that accepts no output (its grammar allows no first token and
    cannot end at once: known when its compile resolves), a grammar that walks into a dead end (a row
    that allows no token at all, after the committed tokens or after this step's drafts: that row is
    left out of the batch, so it never reaches the logits; the request's rows before it in the same
    step are kept), or a token the grammar rejects, puts that request in ``ERROR`` with a message; it
    gets no more rows, and ``accept_tokens`` answers ``error``. Only misuse raises, at once, and then
    nothing has moved (every matcher at its committed state, no request status changed except a
    compile that resolved): an unknown or duplicate request id (``KeyError`` / ``ValueError``), a
    request scheduled before it is ready, a schedule that is not a sequence of ids / ``(id, drafts)``
    pairs or is larger than the buffer, more drafts than ``num_speculative_tokens``, token ids (drafts
    or committed) that are not ints (``bool``, ``float``, ``str`` are refused; numpy integers are
    fine) or lie outside the logits width (``ValueError`` naming the request and the value; a list is
    checked whole before any token is fed), a second thread (``RuntimeError``). An exception from
    anywhere inside a fill (xgrammar included) rolls back every matcher already walked and propagates;
    that call returns no batch.

    Rows already in the buffer: a precomputed row (thinking, pending, stop-only) is not written again
    where the same row sat last step; every fill marks the places it may write first (kept rows, rows
    dropped because they allow everything, dead rows alike), so a stale row never stands in for
    another request's row.

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
        compile_while_thinking: bool = False,
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
        compile_while_thinking: a request that starts thinking is schedulable before its compile is
            done, its rows holding off the end of its thinking (see the step protocol). Off by
            default: it changes what a model writes while a compile runs (its thinking cannot end).
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
        self.compile_while_thinking = bool(compile_while_thinking)
        self.compile_timeout_s = float(compile_timeout_s)
        self.logits_width = vocab.logits_width
        self.num_words = (vocab.logits_width + 31) // 32

        rows = max_num_seqs * (1 + num_speculative_tokens)
        if pin_memory is None:
            pin_memory = torch.cuda.is_available()
        if isinstance(num_buffers, bool) or not isinstance(num_buffers, int) or num_buffers < 1:
            raise ValueError(f"num_buffers must be a positive integer, got {num_buffers!r}")
        probe = self._probe_words(vocab)
        self._buffers = [BitmaskBuffer(rows, self.num_words, pin_memory, probe) for _ in range(num_buffers)]
        self._buffer = self._buffers[0]
        self._next_buffer = 0
        self._filler = RowFiller(num_fill_threads, batch_fill_min_rows, vocab.stop_token_ids)
        # what every request shares: stop tokens, thinking rows per compiled grammar, budget rows
        self._ctx = RequestContext(vocab, compiler, self.parser.implicit_reasoning_end_token_ids
                                   if self.parser is not None else (), self.compile_timeout_s)
        self._requests: dict[str, StructuredRequest] = {}
        self._driver: int | None = None  # threading.get_ident() of the thread inside a public method
        # (_FILL_PENDING while a grammar_bitmask_async fill is pending)
        self._overlap: OverlapFiller | None = None  # the worker of grammar_bitmask_async, built on first use
        self._jump = JumpForward(self.num_words, vocab.stop_token_ids, probe)
        self._search: SearchService | None = None  # answer reservation's search process, built on first use

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
    def _probe_words(vocab: Vocabulary) -> tuple[int, ...]:
        """The (at most 3) row words holding most single-character text tokens (JSON punctuation,
        digits, letters): a row that allows anything usually has a bit there, so the empty-row check
        reads them before it scans a whole row."""
        counts: dict[int, int] = {}
        for ch in ' "{}[]:,0123456789abcdefghijklmnopqrstuvwxyz\n':
            try:
                ids = vocab.encode(ch)
            except Exception:  # noqa: BLE001 - a probe is only a shortcut
                continue
            if len(ids) == 1 and 0 <= ids[0] < vocab.vocab_size:
                counts[ids[0] >> 5] = counts.get(ids[0] >> 5, 0) + 1
        return tuple(sorted(counts, key=counts.__getitem__, reverse=True)[:3])

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

    @_one_thread
    def close(self) -> None:
        """Drop every request; stop the compile pool if this manager built it."""
        self._requests.clear()
        if self._overlap is not None:
            self._overlap.close()
            self._overlap = None
        if self._search is not None:
            self._search.close()
            self._search = None
        if self._owns_compiler:
            self.compiler.close()

    def __enter__(self) -> StructuredOutputManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests --------------------------------------------------------------------------------
    @_one_thread
    def add_request(self, request_id: str, constraint: Constraint | None, prompt_token_ids: Sequence[int] = (), *,
                    chat_template_kwargs: Mapping[str, Any] | None = None, include_reasoning: bool = True,
                    max_thinking_tokens: int | None = None, max_tokens: int | None = None,
                    reserve_answer: bool = False) -> None:
        """Register a request: check the arguments (``ValueError`` for a malformed one, nothing
        stored), start compiling the constraint, and derive the reasoning state from the prompt.
        O(size of the prompt and the constraint) on this thread: the constraint is validated with
        its compile, off this thread (an invalid one puts the request in ``ERROR``).

        ``max_thinking_tokens``: None (no budget) or an int >= 0: once the request has written that many
        tokens of this turn's thinking, its rows force the family's end of thinking, then the grammar
        applies (see :mod:`.budget`). ``ValueError`` without a reasoning parser, with a constraint that
        covers the reasoning, or with a family that cannot force its end; no effect on a request that
        starts with its thinking ended.

        ``max_tokens`` / ``reserve_answer``: the request's output budget (thinking, its end and the answer
        with its stop token, as the engine counts ``max_tokens``) and whether to reserve a valid answer in
        it: the thinking is ended in time and the answer steered to the shortest valid completion when
        room runs out (see :mod:`.reserve`). ``ValueError`` for a ``max_tokens`` that is not an int >= 1,
        ``reserve_answer`` without ``max_tokens`` or a constraint, a family that cannot force its end of
        thinking, or (when its compile is already known) a constraint whose shortest output does not fit;
        a compile that resolves later with that problem puts the request in ``ERROR``."""
        if not isinstance(request_id, str):
            raise ValueError(f"request_id must be a str, got {type(request_id).__name__}")
        if request_id in self._requests:
            raise ValueError(f"request {request_id!r} is already registered")
        if constraint is not None and not isinstance(constraint, Constraint):
            raise ValueError(f"constraint must be a Constraint or None, got {type(constraint).__name__}")
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, Mapping):
            raise ValueError("chat_template_kwargs must be a mapping")
        prompt_token_ids = self._prompt_list(prompt_token_ids)
        limit = validate_budget(max_thinking_tokens)
        max_tokens = validate_max_tokens(max_tokens, reserve_answer)
        if reserve_answer and constraint is None:
            raise ValueError("reserve_answer=True needs a constraint (there is no answer to reserve room for)")
        if reserve_answer and constraint.option("keys_check") is not None:
            raise ValueError("reserve_answer: this tool constraint takes argument keys in any order and checks the "
                             "required ones when the output ends (tools/key_check.py); its shortest completion is "
                             "not searched yet; build it with build_tool_constraint(..., key_order=\"schema\") to "
                             "reserve its answer")
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
        forced = self._budget_start(limit, constraint, tracker)
        reserve = None
        if reserve_answer:
            assert max_tokens is not None
            if tracker is not None and tracker.forced_end_token_ids() is None:
                raise ValueError(f"reserve_answer: the reasoning parser {self.parser.name!r} cannot force the end of "
                                 f"its thinking on the vocabulary {self.vocabulary.name!r}")
            if self._search is None:
                self._search = SearchService(self.vocabulary)
            # the margin also covers a step's drafts past the forced end of thinking (their rows are the grammar's)
            reserve = AnswerReserve(self._search, constraint, frozenset(self.vocabulary.stop_token_ids), max_tokens,
                                    max(DEFAULT_MARGIN, self.num_speculative_tokens + 1))
        req = StructuredRequest(self._ctx, request_id, constraint, tracker, think_limit=limit,
                                forced=forced if limit == 0 else None, reserve=reserve)
        req.start_compile(self.compile_while_thinking)
        if isinstance(req.cause, ReservationError):
            raise req.cause  # known at once (compile and start search cached): nothing stored
        self._requests[request_id] = req

    def _budget_start(self, limit: int | None, constraint: Constraint | None,
                      tracker: ReasoningTracker | None) -> tuple[int, ...] | None:
        """The forced end of thinking from the request's first state (None without a budget or a
        thinking tracker); ``ValueError`` when a budget cannot apply."""
        if limit is None:
            return None
        if self.parser is None:
            raise ValueError("max_thinking_tokens needs a reasoning parser: this manager has none")
        if constraint is not None and constraint.covers_reasoning:
            raise ValueError(f"max_thinking_tokens cannot apply to a {constraint.kind} constraint that covers the "
                             f"reasoning: its grammar spells the thinking itself")
        if tracker is None:
            return None  # its thinking has ended before the first token: nothing to count
        forced = tracker.forced_end_token_ids()
        if forced is None:
            raise ValueError(f"max_thinking_tokens: the reasoning parser {self.parser.name!r} cannot force the end "
                             f"of its thinking on the vocabulary {self.vocabulary.name!r}")
        return forced

    @_one_thread
    def remove_request(self, request_id: str) -> None:
        """Forget a request (``KeyError`` if unknown)."""
        try:
            del self._requests[request_id]
        except KeyError:
            raise KeyError(f"unknown request {request_id!r}") from None

    @_one_thread
    def is_ready(self, request_id: str) -> bool:
        """True once the request's compile is done, well or not: it can be scheduled (an errored one
        gets no rows; abort it). Reading the clock and the compile future is all it does: a finished
        compile or a passed deadline is what changes the answer."""
        req = self._get(request_id)
        if req.future is not None:
            req.resolve()
        return req.status is not COMPILING

    @_one_thread
    def is_compiled(self, request_id: str) -> bool:
        """True once the request's compile has settled, well or not (at once for an unconstrained
        request). A request that thinks is schedulable before that (``is_ready``): it thinks while
        its constraint compiles."""
        req = self._get(request_id)
        if req.future is not None:
            req.resolve()
        return req.future is None

    @_one_thread
    def status(self, request_id: str) -> RequestStatus:
        req = self._get(request_id)
        if req.future is not None:
            req.resolve()
        return req.status

    @_one_thread
    def constraint_report(self, request_id: str) -> ConstraintReport:
        """How the request's output is constrained (:mod:`.report`): ``enforced`` by the grammar, ``checked``
        after the fact, ``failed`` with its cause, ``incomplete`` or ``unconstrained``; with the answer
        reservation's state. Call it before ``remove_request``. Moves nothing (a finished compile resolves)."""
        req = self._get(request_id)
        if req.future is not None:
            req.resolve()
        return report_of(req)

    @_one_thread
    def error(self, request_id: str) -> str | None:
        """The error message of a request in ``ERROR``, else None."""
        req = self._get(request_id)
        if req.future is not None:
            req.resolve()
        return req.message

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._requests

    def __len__(self) -> int:
        return len(self._requests)

    # -- the step --------------------------------------------------------------------------------
    @_one_thread
    def grammar_bitmask(self, schedule: Sequence[ScheduleEntry]) -> BitmaskBatch | None:
        """The rows to mask for ``schedule`` (see the class docstring); None when no row is needed.

        ``schedule``: request ids, or ``(request_id, draft_token_ids)`` pairs; request ``i`` owns the
        logits rows ``base_i .. base_i + len(drafts_i)``, ``base_i`` being the sum of ``1 + len(drafts)``
        over the entries before it. Row ``j`` of a request masks the token that follows its committed
        tokens and drafts ``0 .. j-1``.
        """
        return self._fill_step(self._plan_step(schedule))

    def grammar_bitmask_async(self, schedule: Sequence[ScheduleEntry]) -> PendingBitmask:
        """Start the fill of ``grammar_bitmask(schedule)`` on a worker thread and return at once, so
        the engine runs the model meanwhile; ``handle.result()`` gives the batch (the same rows as
        ``grammar_bitmask``; see :mod:`.overlap` for the protocol and costs).

        Everything that depends on the caller is done here, before the fill is handed off: the whole
        schedule is checked (misuse raises at once, nothing moved, no fill pending), and the
        precomputed rows are placed. From here until ``result()`` returns or raises, the manager is
        busy with the fill: any other public call raises ``RuntimeError`` (nothing moves for it). An
        exception inside the fill surfaces from ``result()``, every matcher at its committed state."""
        tid = _get_ident()
        prev = self._driver
        if prev is not None:
            if prev != tid:
                _concurrent_call(prev, tid, "grammar_bitmask_async")
            raise RuntimeError("StructuredOutputManager.grammar_bitmask_async called from inside another of its "
                               "methods")
        self._driver = tid
        try:
            plan = self._plan_step(schedule)
            if self._overlap is None:
                self._overlap = OverlapFiller(self._filler)
            handle = self._overlap.start(plan, self._fill_step, self._fill_collected)
        except BaseException:
            self._driver = None
            raise
        self._driver = _FILL_PENDING  # released by the handle's result()
        return handle

    def _fill_collected(self) -> None:
        """The async fill's handle was collected (its first ``result()``): the manager is free again."""
        if self._driver == _FILL_PENDING:
            self._driver = None

    def _plan_step(self, schedule: Sequence[ScheduleEntry]) -> StepPlan:
        """The caller's half of a step: check the whole schedule, place the precomputed rows, and
        list the grammar rows to fill (no matcher moves): each request adds its part
        (:meth:`StructuredRequest.plan_rows`)."""
        if type(schedule) is not list and (isinstance(schedule, (str, bytes)) or not isinstance(schedule, Sequence)):
            raise ValueError(f"schedule must be a sequence of request ids or (request_id, draft_token_ids) "
                             f"pairs, got {type(schedule).__name__}")
        if len(schedule) > self.max_num_seqs:
            raise ValueError(f"schedule has {len(schedule)} requests; the manager was built for "
                             f"max_num_seqs={self.max_num_seqs}")
        if len(self._buffers) > 1:  # take turns: the previous batches stay valid for a while
            self._buffer = self._buffers[self._next_buffer]
            self._next_buffer = (self._next_buffer + 1) % len(self._buffers)
        plan = StepPlan(self._buffer)
        reqs = self._requests
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
            if req.status is COMPILING:
                req.resolve()
                if req.status is COMPILING:
                    raise ValueError(f"request {rid!r} is still compiling (is_ready() is False); "
                                     f"it cannot be scheduled yet")
            req.plan_rows(plan, drafts, base)
            base += 1 + nd
        plan.num_logits_rows = base
        return plan

    def _fill_step(self, plan: StepPlan, filler: RowFiller | None = None) -> BitmaskBatch | None:
        """The fill half of a step (on the caller's thread, or on the overlap worker with its filler):
        the grammar rows of ``plan``, then the batch. Every matcher leaves at its committed state."""
        if filler is None:
            filler = self._filler
        sb, row_logits, row_rids = plan.buffer, plan.row_logits, plan.row_rids
        fill_rows = plan.fill_rows
        if fill_rows:
            # places from here on hold precomputed rows no more: fills write them (rows kept, dropped
            # as all-allowed or empty, or half-written by an exception alike)
            n_static = len(row_logits)
            sb.overwritten(n_static, n_static + fill_rows)
            dead: list[str] = []
            if plan.plain_matchers:
                filler.fill_plain(sb, plan.plain_matchers, plan.plain_rows, plan.plain_rids, row_logits, row_rids,
                                  dead)
            if plan.walks:
                # after the whole schedule was checked: a misuse found in it leaves every matcher
                # untouched; an exception inside leaves every matcher at its committed state
                filler.fill_walks(sb, plan.walks, row_logits, row_rids, dead)
            for rid in dict.fromkeys(dead):  # a row of theirs allowed no token at all (it was left out)
                self._requests[rid].dead_end()
        n = len(row_logits)
        if n == 0:
            return None
        last = sb.last_batch
        if sb.last_rows == row_logits:  # the indices hold these rows already (a list compare, at C speed)
            if last is not None and last.num_logits_rows == plan.num_logits_rows and last.request_ids == row_rids:
                return last  # the same rows of the same requests: the same (immutable) batch object
        else:
            sb.indices_np[:n] = row_logits
            sb.last_rows = row_logits
        views = sb.views.get(n)
        if views is None:  # slicing a tensor costs more than a look-up: keep the views of each row count
            views = sb.views[n] = (sb.bitmask[:n], sb.indices[:n])
        batch = sb.last_batch = BitmaskBatch(views[0], views[1], row_rids, plan.num_logits_rows)
        return batch

    @_one_thread
    def accept_tokens(self, request_id: str, token_ids: Sequence[int]) -> AcceptResult:
        """Commit the sampled tokens of one step (accepted drafts plus the bonus token).

        Returns ``ok``, ``terminated`` (the grammar accepted a stop token), or ``error`` (this or an
        earlier token was rejected; the request is in ``ERROR``, final, with a message naming the
        token, its text and its output position)."""
        req = self._requests.get(request_id)
        if req is None:
            raise KeyError(f"unknown request {request_id!r}")
        # the whole list is checked before anything moves: exact ints (numpy integers converted; no
        # bool, float or str), each inside the logits width
        if type(token_ids) is not list:
            token_ids = self._token_list(request_id, token_ids, "token_ids")
        n = len(token_ids)
        if n == 1:
            t = token_ids[0]
            if type(t) is not int or not 0 <= t < self.logits_width:
                token_ids = self._token_list(request_id, token_ids, "token_ids")
        elif n:
            for t in token_ids:
                if type(t) is not int:
                    token_ids = self._token_list(request_id, token_ids, "token_ids")
                    break
            if min(token_ids) < 0 or max(token_ids) >= self.logits_width:
                self._token_list(request_id, token_ids, "token_ids")  # raises, naming the id
        return req.accept(token_ids) if req.reserve is None else req.accept_reserving(token_ids)

    @_one_thread
    def forced_tokens(self, request_id: str, max_tokens: int = 16) -> list[int]:
        """Jump-forward: the tokens the request's grammar forces next, at most ``max_tokens`` (see
        :mod:`.jump_forward`). Token ``i`` is the only token the mask allows after the committed
        tokens and tokens ``0 .. i-1``; the list stops before a position with a choice, before a
        stop token, and at ``max_tokens``. Empty for a request that is not past its thinking (the
        thinking is never constrained), terminated, in error, unconstrained or still compiling;
        except a thinking request past its ``max_thinking_tokens``: its rows force the rest of its
        family's end of thinking, and those tokens are listed (the list stops at the end of thinking).

        Nothing moves: the engine appends the tokens to the request without a model step and
        commits them with ``accept_tokens(request_id, tokens)`` (they count as sampled tokens),
        before its next ``grammar_bitmask`` with this request; drafts for that step follow them.
        Costs at most ``max_tokens`` fills (one when nothing is forced). ``ValueError`` for a
        ``max_tokens`` that is not an int >= 0; ``KeyError`` for an unknown request."""
        req = self._get(request_id)
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, np.integer)) or max_tokens < 0:
            raise ValueError(f"max_tokens must be an integer >= 0, got {max_tokens!r}")
        return req.forced_tokens(int(max_tokens), self._jump)

    # -- internals: requests ---------------------------------------------------------------------
    def _get(self, request_id: str) -> StructuredRequest:
        req = self._requests.get(request_id)
        if req is None:
            raise KeyError(f"unknown request {request_id!r}")
        return req

    # -- internals: token ids -------------------------------------------------------------------
    def _prompt_list(self, prompt_token_ids: Any) -> list[int]:
        """The prompt as a list of ints inside the logits width (``ValueError`` otherwise). Once per
        request: min / max over a list run at C speed, so even a long prompt costs little next to its prefill."""
        if isinstance(prompt_token_ids, (torch.Tensor, np.ndarray)):
            if prompt_token_ids.ndim != 1:
                raise ValueError(f"prompt_token_ids must be 1-D, got shape {tuple(prompt_token_ids.shape)}")
            prompt = prompt_token_ids.tolist()
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

    def _token_list(self, request_id: str, token_ids: Any, what: str) -> list[int]:
        """``token_ids`` (a list, tuple, 1-D tensor or array) as a list of Python ints inside the logits
        width; ``ValueError`` naming the request and the bad value otherwise. The slow path: the
        callers check a plain ``list[int]`` inline."""
        if isinstance(token_ids, (torch.Tensor, np.ndarray)):
            if token_ids.ndim != 1:
                raise ValueError(f"request {request_id!r}: {what} must be 1-D, got shape {tuple(token_ids.shape)}")
            token_ids = token_ids.tolist()  # Python ints for integer dtypes; floats / bools are caught below
        elif not isinstance(token_ids, (list, tuple)):
            raise ValueError(f"request {request_id!r}: {what} must be a list of token ids, got "
                             f"{type(token_ids).__name__} {token_ids!r:.80}")
        out: list[int] = []
        width = self.logits_width
        for t in token_ids:
            if type(t) is not int:
                if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
                    raise ValueError(f"request {request_id!r}: {what} must be ints, got {t!r} "
                                     f"({type(t).__name__})")
                t = int(t)
            if not 0 <= t < width:
                raise ValueError(f"request {request_id!r}: token id {t} in {what} is outside [0, {width})")
            out.append(t)
        return out

    def _parse_entry(self, entry: Any) -> tuple[str, list[int]]:
        """``(request_id, drafts)`` checked whole: drafts a list / tuple / 1-D tensor or array of ints
        inside the logits width (``ValueError`` naming the request and the bad value)."""
        if not isinstance(entry, (tuple, list)) or len(entry) != 2 or type(entry[0]) is not str:
            raise ValueError(f"a schedule entry is a request id or (request_id, draft_token_ids), got {entry!r:.120}")
        rid, drafts = entry
        if type(drafts) is not list:
            return rid, self._token_list(rid, drafts, "draft_token_ids")
        for t in drafts:
            if type(t) is not int:
                return rid, self._token_list(rid, drafts, "draft_token_ids")
        if drafts and (min(drafts) < 0 or max(drafts) >= self.logits_width):
            return rid, self._token_list(rid, drafts, "draft_token_ids")  # raises, naming the id
        return rid, drafts
