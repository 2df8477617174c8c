"""The per-model compile service: constraints -> xgrammar compiled grammars, in worker processes, cached.

One :class:`Compiler` per model (vocabulary), shared by every request and by every manager of that
model; all its methods are thread-safe. How a constraint becomes an xgrammar grammar (control tokens
as private bytes, token names, xgrammar's fixes) is ``xgrammar_adapter.py``; the worker processes
are ``worker_pool.py`` (the parent's side: zygote, forks, their driver threads) and
``_compile_worker.py`` (the worker's side).

The caller's thread
-------------------
:meth:`Compiler.submit` does only work whose cost depends on the size of the constraint, never on its
content: the type check, the canonical key (built with the constraint, see ``constraints.py``, which
also bounds its nesting depth with an iterative walk), a cache look-up, and queueing the job. Every
content-dependent step (JSON-schema conversion, regex / EBNF / structural-tag parsing, the token-mask
precomputation) runs in a worker process; an invalid constraint fails the future with a
``ValueError`` naming the problem. (``sync_validate_max_bytes > 0`` opts back into validating specs up
to that length on the caller's thread, for callers that want the ``ValueError`` at once.)

Worker processes
----------------
At construction a background thread starts a *zygote*: a fresh interpreter (exec'd, never a fork of
this multi-threaded process) that imports xgrammar and builds the vocabulary's ``TokenizerInfo``
once; it is sent the vocabulary table, not a serialized ``TokenizerInfo``. Workers are forks of the
zygote (milliseconds each, tokenizer tables shared copy-on-write); ``num_threads`` of them are forked
at once and stay; more are forked whenever a job finds no free worker, up to ``max_workers`` (then
jobs wait in FIFO order); extra workers exit after ``worker_idle_s`` without work. A job goes to the
worker that became free last: its xgrammar cache (below) holds the most recent rules.

Each job has a deadline (``timeout_s`` of ``submit``, else ``compile_timeout_s``; a ``submit`` that
joins a running compile extends it to its own). When it passes, the worker is killed with SIGKILL
and its memory goes with it; the future fails with ``TimeoutError``; the next job gets a fresh fork.
A job still queued at its deadline fails without starting. A job that runs longer than
``slow_after_s`` no longer holds back others (a new job forks its own worker), and once another job
waits or runs beside it, it moves to a slow lane: its worker's threads are reniced (lower CPU priority,
so fresh jobs keep their share of the CPU while hostile ones grind) and the worker exits once the job
ends (a reniced process cannot be raised back). A long compile alone is not reniced: on a machine
loaded by other work that would only starve it (a tool constraint of many tools is a long compile).
A worker that dies (a crash inside xgrammar) fails its job with ``RuntimeError``; the zygote is
restarted if it dies.

What comes back: a grammar that compiled within ``recompile_max_s`` (and whose compiled form is larger
than ``ship_compiled_max_bytes``, by default 0: every one) comes back as its EBNF text (a ``Grammar``
where the text does not round-trip, see below), and the parent compiles it again: the worker has already
proved that it is valid and how long it takes, and the compiled form costs more to ship than to compile
(its JSON is token masks as numbers, several times its memory size: a JSON schema's 300 KB cost about 10 ms
to write, send and parse against a 1.4 ms compile; a tool constraint's megabytes several times its
compile), while the grammar is a few KB and the parent's compile reads xgrammar's cache warmed by earlier
ones. A slower compile comes back compiled, as
``CompiledGrammar.serialize_json()``, deserialized against the parent's own ``TokenizerInfo``. The
parent's part (deserialize or recompile, then the first-token row) runs on the worker's driver thread,
outside the GIL for the xgrammar calls. A structural tag's reply comes before the worker has checked that
its text round-trips (below): the parent compiles it while the worker checks, and keeps it only once the
worker confirms (otherwise the worker's next reply, the grammar as built, replaces it).

xgrammar's own cache is on in each worker (and in the parent's recompile path) for JSON schemas and
objects, and for structural tags (tool constraints) whose grammar survives its text round trip
(``_compile_worker.round_trips``: xgrammar's cached compile goes through the grammar's text, which some
structural tags do not survive), bounded by ``xgrammar_cache_bytes`` each: it keeps the token masks of
rules by their content, so rules a grammar repeats (JSON strings, numbers, each tool's call syntax) are
computed once, a schema never seen before compiles in a fraction of the time, and a tool set that shares
tools with an earlier one reuses their masks. A worker is
reused across jobs, so its cache lives as long as it does; a killed worker takes its cache with it.
The zygote compiles nothing; each standing worker (while idle, before its first job) and the parent at
start-up compile a JSON schema of every value type, as a response and as a tool argument of each kind the
tool formats write (``_compile_worker.warm_up``), so the JSON rules every schema and JSON-argument tool
grammar repeats are in its cache before the first job (the worker reports ``("warm",)``; ``wait_ready``
waits for the standing workers'), then the compiler's ``warm_up`` constraints (a tool format's call syntax:
the rules every tool set of that format repeats). An extra worker, forked for a job that waits, skips the
warm-up. Memory: at most ``max_workers`` caches of ``xgrammar_cache_bytes``.

JSON whitespace bounds (``max_whitespace``) are not compiled into the grammar: the grammar is xgrammar's
unbounded one and :class:`~.jsonws.bound.BoundedMatcher` enforces the bound (``jsonws/bound.py``); the
per-model tables it needs are built in the parent, once, on the first bounded JSON compile.

Cache (in the parent): bounded in bytes (``CompiledGrammar.memory_size_bytes``), least recently used
out first, keyed by :attr:`Constraint.key`; a hit is a dictionary look-up. A constraint being compiled
is shared too (a thousand requests with one schema start one compile). A failed compile is not cached.

Lifetime: :meth:`Compiler.close` kills the workers and the zygote and fails every pending future with
``RuntimeError``; it also runs at interpreter exit (a ``weakref.finalize`` hook, which does not keep
the compiler alive) and when the compiler is garbage collected, so a process never exits with a compile
running inside it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import xgrammar as xgr

from thinkgate.reasoning.vocabulary import Vocabulary

from .worker_pool import WorkerPool, close_pool
from .constraints import DEFAULT_MAX_WHITESPACE, DEFAULT_TOOL_MAX_WHITESPACE, Constraint
from .jsonws.bound import BoundedMatcher, WhitespaceBound, WhitespaceLexicon
from ._compile_worker import warm_up
from .xgrammar_adapter import (ControlSplitter, GrammarBuilder, build_tokenizer_info, control_token_bytes,
                               xgrammar_message)

__all__ = ["Compiler", "CompiledConstraint", "CompilerStats", "build_tokenizer_info", "control_token_bytes",
           "xgrammar_message"]


class CompiledConstraint:
    """A compiled grammar and what the manager needs from it; immutable once built, shared by every
    request with the same constraint.

    ``initial_mask`` is the bitmask row of the grammar's first token (int32, ``ceil(W/32)`` words):
    the manager uses it to decide, while a request is thinking, which implicit reasoning-end tokens
    the grammar could not start with. ``may_allow_all`` is False when no state of this grammar can
    allow every id of the logits width (every text-only grammar on a vocabulary that has control
    tokens or padding ids), so its rows never need the "allows everything" check.
    """

    __slots__ = ("constraint", "grammar", "initial_mask", "may_allow_all", "memory_bytes", "compile_s",
                 "derived", "whitespace", "__weakref__")

    def __init__(self, constraint: Constraint, grammar: xgr.CompiledGrammar, initial_mask: np.ndarray,
                 may_allow_all: bool, compile_s: float, whitespace: WhitespaceBound | None = None) -> None:
        self.constraint = constraint
        self.grammar = grammar
        self.initial_mask = initial_mask
        self.may_allow_all = may_allow_all
        self.whitespace = whitespace
        """The JSON whitespace bound its matchers enforce beside the grammar (``jsonws/bound.py``; shared
        per model and bound, so not in ``memory_bytes``), or None."""
        self.memory_bytes = int(grammar.memory_size_bytes) + initial_mask.nbytes
        self.compile_s = compile_s
        self.derived: dict[Any, Any] = {}
        """Rows derived per reasoning parser (filled by the manager; benign races under the GIL)."""

    def allows_first(self, token_id: int) -> bool:
        """True when the grammar may start with ``token_id``."""
        return bool((int(self.initial_mask[token_id >> 5]) >> (token_id & 31)) & 1)

    def __repr__(self) -> str:
        return (f"CompiledConstraint({self.constraint.kind}, {self.memory_bytes} bytes, "
                f"compiled in {self.compile_s * 1e3:.1f} ms)")


@dataclass(frozen=True)
class CompilerStats:
    """Counters since the compiler was built."""

    compiles: int
    """Compile jobs started (each distinct constraint once while it stays cached)."""
    cache_hits: int
    """``submit`` calls answered from the cache."""
    joins: int
    """``submit`` calls that joined a compile already running for the same constraint."""
    failures: int
    evictions: int
    overdue: int
    """Compiles reported past a request's deadline."""
    cache_entries: int
    cache_bytes: int
    timeouts: int = 0
    """Compiles stopped at their deadline (worker killed) or dropped from the queue past it."""
    worker_crashes: int = 0
    """Workers that died inside a compile (their job failed)."""
    workers: int = 0
    """Worker processes alive now."""


class _Decoder:
    """The parent's half of a compile: a worker's reply -> :class:`CompiledConstraint`. Holds no
    reference to the :class:`Compiler` (so the pool's threads never keep it alive)."""

    def __init__(self, tokenizer_info: xgr.TokenizerInfo, num_threads: int, num_words: int,
                 text_may_allow_all: bool, whitespace: WhitespaceLexicon, xgrammar_cache_bytes: int) -> None:
        self.tokenizer_info = tokenizer_info
        # the recompile path (grammars too large to ship): xgrammar's own cache, bounded, for the grammars the
        # worker found safe for it (_compile_worker.round_trips)
        self.xgr = xgr.GrammarCompiler(tokenizer_info, max_threads=num_threads, cache_enabled=False)
        self.xgr_cached = (xgr.GrammarCompiler(tokenizer_info, max_threads=num_threads, cache_enabled=True,
                                               cache_limit_bytes=xgrammar_cache_bytes)
                           if xgrammar_cache_bytes > 0 else None)
        self.num_words = num_words
        self.text_may_allow_all = text_may_allow_all
        self.whitespace = whitespace

    def warm_up(self, builder: GrammarBuilder, extra: Sequence[Constraint]) -> None:
        """The recompile path's cache, warmed as each worker's is (``_compile_worker.warm_up``)."""
        if self.xgr_cached is not None:
            warm_up(self.xgr_cached, builder, extra)

    def decode(self, constraint: Constraint, reply: tuple, started: float) -> CompiledConstraint:
        form = reply[0]
        if form == "invalid":
            raise ValueError(reply[1])
        if form == "error":
            raise RuntimeError(reply[1])
        _, payload, reach, _, cache_safe = reply
        if form == "compiled":
            compiled = xgr.CompiledGrammar.deserialize_json(payload, self.tokenizer_info)
        else:  # "text" / "grammar": proved valid and quick to compile in the worker (see the module docstring)
            use = self.xgr_cached if self.xgr_cached is not None and cache_safe else self.xgr
            compiled = use.compile_grammar(payload if form == "text" else xgr.Grammar.deserialize_json(payload))
        ws = constraint.whitespace_bound
        bound = self.whitespace.bound(ws) if ws is not None else None  # built once per model and bound
        mask = torch.empty((1, self.num_words), dtype=torch.int32)
        (xgr.GrammarMatcher(compiled) if bound is None else BoundedMatcher(compiled, bound)
         ).fill_next_token_bitmask(mask, 0)
        return CompiledConstraint(constraint, compiled, mask[0].numpy().copy(),
                                  self.text_may_allow_all if reach is None else reach, time.monotonic() - started,
                                  bound)


class Compiler:
    """Compiles constraints for one vocabulary (see the module docstring). Thread-safe.

    Lifetime: per model; the zygote and ``num_threads`` workers start in the background at
    construction (:meth:`wait_ready` waits for them); :meth:`close` (also at interpreter exit) stops
    them. Costs: ``submit`` is O(size of the constraint) on the caller's thread and a cache hit a
    dictionary look-up; each worker is a fork sharing the zygote's memory plus what its compile uses.
    Failure model: an invalid constraint fails its future with ``ValueError``, a compile past its
    deadline with ``TimeoutError`` (its worker killed), a crashed worker or a closed compiler with
    ``RuntimeError``; nothing else raises from ``submit`` except a non-``Constraint`` argument
    (``ValueError``) or a closed compiler (``RuntimeError``).

    Parameters
    ----------
    vocabulary:
        The model's vocabulary (a :class:`~reasoning.Vocabulary`, a short name, or an HF tokenizer).
    num_threads:
        Standing worker processes (always ready), and xgrammar's threads per compile (in a worker and
        in the parent's recompile).
    cache_limit_bytes:
        Bound on the bytes of cached compiled grammars; least recently used out first.
    sync_validate_max_bytes:
        Specs at most this long are validated on the caller's thread (a ``ValueError`` at ``submit``).
        Default 0: never; validation depends on content, so it runs with the compile.
    compile_timeout_s:
        Deadline of a compile whose ``submit`` gives none.
    max_workers:
        Most worker processes at once (bounds memory; past it, jobs wait in FIFO order).
    slow_after_s:
        A compile running longer than this moves to the slow lane once another job waits or runs
        (see the module docstring).
    worker_idle_s:
        An extra worker (beyond ``num_threads``) exits after this long without work.
    ship_compiled_max_bytes, recompile_max_s:
        A compiled grammar larger than ``ship_compiled_max_bytes`` (default 0: any) that compiled within
        ``recompile_max_s`` is compiled again in the parent instead of being serialized: its JSON form
        is several times its memory size (token masks as numbers) and costs more than the compile to
        write and to read back, so compiling twice is the cheaper way home (``python -m bench tools``
        measures the tool constraints).
    xgrammar_cache_bytes:
        Bound of xgrammar's own compiler cache in each worker and in the parent (0: off); see the
        module docstring.
    warm_up:
        Constraints compiled into that cache at start-up, after the JSON rules (module docstring): what this
        model's requests will repeat, such as its tool format's call syntax
        (``tools.tool_format_warm_up(format)``), so that the first request of each worker does not compute
        those rules. A constraint that fails to compile there is skipped (its own compile reports it).
    """

    def __init__(self, vocabulary: Vocabulary | str | Any, *, num_threads: int = 2,
                 cache_limit_bytes: int = 512 << 20, sync_validate_max_bytes: int = 0,
                 compile_timeout_s: float = 60.0, max_workers: int = 16, slow_after_s: float = 0.5,
                 worker_idle_s: float = 60.0, ship_compiled_max_bytes: int = 0,
                 recompile_max_s: float = 30.0, xgrammar_cache_bytes: int = 64 << 20,
                 warm_up: Sequence[Constraint] = ()) -> None:
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
        if not isinstance(cache_limit_bytes, int) or cache_limit_bytes < 0:
            raise ValueError(f"cache_limit_bytes must be a non-negative integer, got {cache_limit_bytes!r}")
        if (isinstance(xgrammar_cache_bytes, bool) or not isinstance(xgrammar_cache_bytes, int)
                or xgrammar_cache_bytes < 0):
            raise ValueError(f"xgrammar_cache_bytes must be a non-negative integer, got {xgrammar_cache_bytes!r}")
        if isinstance(max_workers, bool) or not isinstance(max_workers, int) or max_workers < num_threads:
            raise ValueError(f"max_workers must be an integer >= num_threads, got {max_workers!r}")
        for name, value in (("compile_timeout_s", compile_timeout_s), ("slow_after_s", slow_after_s),
                            ("worker_idle_s", worker_idle_s), ("recompile_max_s", recompile_max_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        if isinstance(warm_up, (str, bytes, Constraint)) or not isinstance(warm_up, Sequence) or not all(
                isinstance(c, Constraint) for c in warm_up):
            raise ValueError("warm_up must be a sequence of Constraint objects (tools.tool_format_warm_up gives a "
                             "tool format's)")
        self.warm_up: tuple[Constraint, ...] = tuple(warm_up)
        """Constraints each cached xgrammar compiler (every standing worker's, the parent's) compiles at start-up."""
        self.vocabulary = Vocabulary.coerce(vocabulary)
        self.tokenizer_info = build_tokenizer_info(self.vocabulary)
        self._grammars = GrammarBuilder(self.vocabulary)
        self.num_threads = num_threads
        self.cache_limit_bytes = cache_limit_bytes
        self.sync_validate_max_bytes = sync_validate_max_bytes
        self.compile_timeout_s = float(compile_timeout_s)
        self.max_workers = max_workers
        self.logits_width = self.vocabulary.logits_width
        self.num_words = (self.logits_width + 31) // 32
        # can a text-only grammar ever allow every id? Not when the logits have padding ids past the
        # tokenizer, or a control token that is not a stop token: its private bytes (0xFF first, never
        # UTF-8) match no text rule, so no row of a text grammar allows it
        vocab = self.vocabulary
        self._text_may_allow_all = (self.logits_width == vocab.vocab_size
                                    and vocab.special_token_ids <= vocab.stop_token_ids)
        self.whitespace = WhitespaceLexicon.of(self.vocabulary)
        """The JSON whitespace lexer of this vocabulary (tables built on the first bounded JSON compile)."""
        self._decoder = _Decoder(self.tokenizer_info, num_threads, self.num_words, self._text_may_allow_all,
                                 self.whitespace, xgrammar_cache_bytes)
        # the default bounds' tables (JSON responses, tool calls) and the parent's xgrammar cache, built beside
        # the zygote's start-up (per model, once): the first request then does not pay for them inside its
        # compile deadline
        self._warm_thread = threading.Thread(target=self._warm_up,
                                             name=f"thinkgate-warm-{self.vocabulary.name}", daemon=True)
        self._warm_thread.start()
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[CompiledConstraint, Future]] = OrderedDict()
        self._cache_bytes = 0
        self._inflight: dict[str, Future] = {}
        self._counts = {"compiles": 0, "cache_hits": 0, "joins": 0, "failures": 0, "evictions": 0,
                        "overdue": 0}
        self._pool = WorkerPool(self.vocabulary, self._decoder, num_workers=num_threads, max_workers=max_workers,
                                 num_threads=num_threads, slow_after_s=float(slow_after_s),
                                 idle_s=float(worker_idle_s),
                                 settings={"ship_compiled_max_bytes": int(ship_compiled_max_bytes),
                                           "recompile_max_s": float(recompile_max_s),
                                           "xgrammar_cache_bytes": int(xgrammar_cache_bytes),
                                           "warm_up": self.warm_up},
                                 name=f"thinkgate-compile-{self.vocabulary.name}")
        # at exit or when collected: stop the workers (the pool holds no reference to the compiler)
        self._finalizer = weakref.finalize(self, close_pool, self._pool)

    # -- public ----------------------------------------------------------------------------------
    def submit(self, constraint: Constraint, *, timeout_s: float | None = None) -> Future:
        """A future of the :class:`CompiledConstraint` for ``constraint`` (already done on a cache hit).

        O(size of the constraint) on the caller's thread (see the module docstring). The compile must
        finish within ``timeout_s`` seconds from now (default ``compile_timeout_s``); joining a compile
        already running extends its deadline to this one. Problems are the future's exception:
        ``ValueError`` for an invalid constraint, ``TimeoutError`` past the deadline, ``RuntimeError``
        for a crashed worker or a closed compiler. Raises only for a non-``Constraint`` argument
        (``ValueError``), a spec validated here (``sync_validate_max_bytes``), or a closed compiler."""
        if not isinstance(constraint, Constraint):
            raise ValueError(f"expected a Constraint, got {type(constraint).__name__}")
        key = constraint.key
        deadline = time.monotonic() + (self.compile_timeout_s if timeout_s is None else float(timeout_s))
        with self._lock:
            hit = self._lookup(key, deadline)
            if hit is not None:
                return hit
        if 0 < len(constraint.spec) <= self.sync_validate_max_bytes:
            self.validate(constraint)  # opted in: content-dependent work on the caller's thread
        with self._lock:
            hit = self._lookup(key, deadline)
            if hit is not None:
                return hit
            self._counts["compiles"] += 1
            fut = self._pool.submit(constraint, deadline)
            self._inflight[key] = fut
        fut.add_done_callback(lambda f: self._finish(key, f))
        return fut

    def compile(self, constraint: Constraint, timeout: float | None = None) -> CompiledConstraint:
        """Compile synchronously (through the cache); raises ``ValueError`` for an invalid
        constraint or a compile error, ``TimeoutError`` past ``timeout`` seconds (the compile is
        then stopped too, unless another caller still waits for it)."""
        fut = self.submit(constraint, timeout_s=timeout)
        try:
            return fut.result(None if timeout is None else timeout + 5.0)
        except TimeoutError:
            raise
        except Exception as e:
            raise ValueError(f"{constraint.kind}: compile failed: {xgrammar_message(e)}") from e

    def mark_overdue(self, fut: Future) -> None:
        """Tell the compiler that a request waiting on ``fut`` passed its deadline: the compile is
        stopped now (its worker killed) unless a later ``submit`` of the same constraint extended
        the deadline."""
        with self._lock:
            self._counts["overdue"] += 1
        self._pool.stop_if_overdue(fut)

    def _warm_up(self) -> None:
        """Per model, once, beside the zygote's start-up: the default whitespace bounds' tables and the
        parent's xgrammar cache (``_Decoder.warm_up``)."""
        for bound in (DEFAULT_MAX_WHITESPACE, DEFAULT_TOOL_MAX_WHITESPACE):
            self.whitespace.bound(bound)
        self._decoder.warm_up(self._grammars, self.warm_up)

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the worker processes are started, the default JSON whitespace bounds' tables (JSON
        responses, tool calls) are built and the parent's xgrammar cache is warm (True), or ``timeout``
        seconds pass. Each standing worker warms its own cache before its first job."""
        end = None if timeout is None else time.monotonic() + timeout
        if not self._pool.wait_ready(timeout):
            return False
        self._warm_thread.join(None if end is None else max(0.0, end - time.monotonic()))
        return not self._warm_thread.is_alive()

    def worker_pids(self) -> list[int]:
        """The pids of the worker processes alive now (for monitoring and tests)."""
        return self._pool.worker_pids()

    def running_pid(self, fut: Future) -> int | None:
        """The pid of the worker running ``fut``'s compile, None if it is not running."""
        return self._pool.running_pids().get(fut)

    @property
    def stats(self) -> CompilerStats:
        with self._lock:
            return CompilerStats(**self._counts, cache_entries=len(self._cache), cache_bytes=self._cache_bytes,
                                 **self._pool.counts, workers=self._pool.num_procs)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._cache_bytes = 0

    def close(self) -> None:
        """Kill the workers and the zygote and fail every pending future (``RuntimeError``); a later
        ``submit`` that misses the cache raises ``RuntimeError``. Idempotent."""
        self._finalizer()

    # -- validation ------------------------------------------------------------------------------
    def validate(self, constraint: Constraint) -> tuple[xgr.Grammar, bool]:
        """Build the xgrammar ``Grammar`` of ``constraint`` on the caller's thread (``ValueError``
        naming the problem) and whether it uses token-level formats (see :meth:`GrammarBuilder.build`).
        Its cost depends on the content: never call it on a scheduler thread."""
        return self._grammars.build(constraint)

    @property
    def control_splitter(self) -> ControlSplitter:
        """The vocabulary's control texts, found and split in literals (built once, with the compiler)."""
        return self._grammars.control

    def resolve_structural_tag(self, tag: Any) -> tuple[dict[str, Any], bool]:
        """``tag`` with token names resolved to ids in this vocabulary, and whether any token-level
        format occurs (see :meth:`GrammarBuilder.resolve_structural_tag`)."""
        return self._grammars.resolve_structural_tag(tag)

    # -- internals -------------------------------------------------------------------------------
    def _lookup(self, key: str, deadline: float) -> Future | None:
        entry = self._cache.get(key)
        if entry is not None:
            self._cache.move_to_end(key)
            self._counts["cache_hits"] += 1
            return entry[1]
        fut = self._inflight.get(key)
        if fut is not None:
            self._counts["joins"] += 1
            self._pool.extend(fut, deadline)
        return fut

    def _finish(self, key: str, fut: Future) -> None:
        with self._lock:
            if self._inflight.get(key) is fut:
                del self._inflight[key]
            if fut.cancelled() or fut.exception() is not None:
                self._counts["failures"] += 1
                return
            entry: CompiledConstraint = fut.result()
            if entry.memory_bytes > self.cache_limit_bytes or key in self._cache:
                return
            self._cache[key] = (entry, fut)
            self._cache_bytes += entry.memory_bytes
            while self._cache_bytes > self.cache_limit_bytes and self._cache:
                _, (old, _) = self._cache.popitem(last=False)
                self._cache_bytes -= old.memory_bytes
                self._counts["evictions"] += 1
