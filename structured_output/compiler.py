"""The per-model compile service: constraints -> xgrammar compiled grammars, on a thread pool, cached.

One :class:`Compiler` per model (vocabulary), shared by every request and by every manager of that
model; all its methods are thread-safe. How a constraint becomes an xgrammar grammar (control tokens
as private bytes, token names, xgrammar's fixes) is ``xgrammar_adapter.py``.

Validation and compilation
--------------------------
:meth:`Compiler.submit` validates synchronously (building the xgrammar ``Grammar``: JSON-schema to
grammar conversion, regex and EBNF parsing, structural-tag parsing; its cost grows with the size of
the spec) and raises ``ValueError`` naming the problem. A spec longer than ``sync_validate_max_bytes``
is validated on the pool instead, so that the caller never waits long; its problems then fail the
compile future. The expensive part, the token-mask precomputation, runs on the pool. A cache hit
skips both.

Cache: bounded in bytes (``CompiledGrammar.memory_size_bytes``), least recently used out first, keyed
by :attr:`Constraint.key`; a constraint being compiled is shared too (a thousand requests with one
schema start one compile). A failed compile is not cached.

Timeouts: a compile inside xgrammar cannot be interrupted. The manager gives each request a deadline
and, when it passes, puts the request in error and calls :meth:`Compiler.mark_overdue`: if that
compile is running, the pool starts a replacement worker (at most ``4 * num_threads`` at once), so
an overdue compile never shrinks the pool; the overdue thread finishes in the background, its
result is cached if it succeeds, and it then exits.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import xgrammar as xgr

from thinkgate.reasoning.vocabulary import Vocabulary

from .constraints import Constraint
from .xgrammar_adapter import GrammarBuilder, build_tokenizer_info, control_token_bytes, xgrammar_message

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
                 "derived", "__weakref__")

    def __init__(self, constraint: Constraint, grammar: xgr.CompiledGrammar, initial_mask: np.ndarray,
                 may_allow_all: bool, compile_s: float) -> None:
        self.constraint = constraint
        self.grammar = grammar
        self.initial_mask = initial_mask
        self.may_allow_all = may_allow_all
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


class _CompilePool:
    """A small thread pool that can replace a worker stuck in an uninterruptible job."""

    def __init__(self, num_threads: int, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Future, Callable[[], Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._overdue: set[Future] = set()
        self._max_overdue = 4 * num_threads
        self._threads: list[threading.Thread] = []
        self._closed = False
        for _ in range(num_threads):
            self._spawn()

    def _spawn(self) -> None:
        t = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
        self._threads.append(t)
        t.start()

    def submit(self, fn: Callable[[], Any]) -> Future:
        if self._closed:
            raise RuntimeError("the compiler is closed")
        fut: Future = Future()
        self._queue.put((fut, fn))
        return fut

    def mark_overdue(self, fut: Future) -> bool:
        """Start a replacement worker for ``fut``'s thread if ``fut`` is running; True if started."""
        with self._lock:
            if self._closed or fut.done() or not fut.running() or fut in self._overdue:
                return False
            if len(self._overdue) >= self._max_overdue:
                return False
            self._overdue.add(fut)
            self._spawn()
            return True

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fut, fn = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as e:  # noqa: BLE001 - every failure belongs to the future
                fut.set_exception(e)
            else:
                fut.set_result(result)
            with self._lock:
                if fut in self._overdue:  # a replacement has taken this thread's place
                    self._overdue.discard(fut)
                    return

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            n = len(self._threads)
        for _ in range(n):
            self._queue.put(None)


class Compiler:
    """Compiles constraints for one vocabulary (see the module docstring). Thread-safe.

    Parameters
    ----------
    vocabulary:
        The model's vocabulary (a :class:`~reasoning.Vocabulary`, a short name, or an HF tokenizer).
    num_threads:
        Compile pool size (also xgrammar's threads per compile).
    cache_limit_bytes:
        Bound on the bytes of cached compiled grammars; least recently used out first.
    sync_validate_max_bytes:
        Constraints whose spec is at most this long are validated on the caller's thread (a
        ``ValueError`` at ``submit``); longer ones on the pool, where an invalid one fails the future
        (the manager puts the request in ``ERROR``), so that ``add_request`` never blocks the
        scheduler for long.
    """

    def __init__(self, vocabulary: Vocabulary | str | Any, *, num_threads: int = 2,
                 cache_limit_bytes: int = 512 << 20, sync_validate_max_bytes: int = 32 << 10) -> None:
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
        if not isinstance(cache_limit_bytes, int) or cache_limit_bytes < 0:
            raise ValueError(f"cache_limit_bytes must be a non-negative integer, got {cache_limit_bytes!r}")
        self.vocabulary = Vocabulary.coerce(vocabulary)
        self.tokenizer_info = build_tokenizer_info(self.vocabulary)
        self._grammars = GrammarBuilder(self.vocabulary)
        # xgrammar's own cache is off: ours is keyed by the constraint and shares in-flight compiles.
        self._xgr = xgr.GrammarCompiler(self.tokenizer_info, max_threads=num_threads, cache_enabled=False)
        self.num_threads = num_threads
        self.cache_limit_bytes = cache_limit_bytes
        self.sync_validate_max_bytes = sync_validate_max_bytes
        self.logits_width = self.vocabulary.logits_width
        self.num_words = (self.logits_width + 31) // 32
        # can a text-only grammar ever allow every id? Only if xgrammar has no id it never allows.
        self._text_may_allow_all = len(self.tokenizer_info.special_token_ids) == 0
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[CompiledConstraint, Future]] = OrderedDict()
        self._cache_bytes = 0
        self._inflight: dict[str, Future] = {}
        self._counts = {"compiles": 0, "cache_hits": 0, "joins": 0, "failures": 0, "evictions": 0,
                        "overdue": 0}
        self._pool = _CompilePool(num_threads, f"thinkgate-compile-{self.vocabulary.name}")

    # -- public ----------------------------------------------------------------------------------
    def submit(self, constraint: Constraint) -> Future:
        """A future of the :class:`CompiledConstraint` for ``constraint`` (already done on a cache hit).

        Raises ``ValueError`` naming the problem when the constraint is invalid (and its spec at most
        ``sync_validate_max_bytes`` long); nothing is started then. Otherwise a problem is the
        future's exception (a ``ValueError`` for an invalid constraint)."""
        if not isinstance(constraint, Constraint):
            raise ValueError(f"expected a Constraint, got {type(constraint).__name__}")
        key = constraint.key
        with self._lock:
            hit = self._lookup(key)
            if hit is not None:
                return hit
        if len(constraint.spec) <= self.sync_validate_max_bytes:
            grammar, token_level = self.validate(constraint)  # outside the lock: may take milliseconds

            def job() -> CompiledConstraint:
                return self._compile(constraint, grammar, token_level)
        else:  # too big to validate on the caller's thread: a ValueError becomes the future's

            def job() -> CompiledConstraint:
                return self._compile(constraint, *self.validate(constraint))

        with self._lock:
            hit = self._lookup(key)
            if hit is not None:
                return hit
            self._counts["compiles"] += 1
            fut = self._pool.submit(job)
            self._inflight[key] = fut
        fut.add_done_callback(lambda f: self._finish(key, f))
        return fut

    def compile(self, constraint: Constraint, timeout: float | None = None) -> CompiledConstraint:
        """Compile synchronously (through the cache); raises ``ValueError`` for an invalid
        constraint or a compile error, ``TimeoutError`` past ``timeout`` seconds."""
        fut = self.submit(constraint)
        try:
            return fut.result(timeout)
        except TimeoutError:
            raise
        except Exception as e:
            raise ValueError(f"{constraint.kind}: compile failed: {xgrammar_message(e)}") from e

    def mark_overdue(self, fut: Future) -> None:
        """Tell the pool that ``fut`` ran past a request's deadline (see the module docstring)."""
        with self._lock:
            self._counts["overdue"] += 1
        self._pool.mark_overdue(fut)

    @property
    def stats(self) -> CompilerStats:
        with self._lock:
            return CompilerStats(**self._counts, cache_entries=len(self._cache), cache_bytes=self._cache_bytes)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._cache_bytes = 0

    def close(self) -> None:
        """Stop the pool's idle workers (compiles already queued are dropped)."""
        self._pool.close()

    # -- validation ------------------------------------------------------------------------------
    def validate(self, constraint: Constraint) -> tuple[xgr.Grammar, bool]:
        """Build the xgrammar ``Grammar`` of ``constraint`` (``ValueError`` naming the problem) and
        whether it uses token-level formats (see :meth:`GrammarBuilder.build`)."""
        return self._grammars.build(constraint)

    def resolve_structural_tag(self, tag: Any) -> tuple[dict[str, Any], bool]:
        """``tag`` with token names resolved to ids in this vocabulary, and whether any token-level
        format occurs (see :meth:`GrammarBuilder.resolve_structural_tag`)."""
        return self._grammars.resolve_structural_tag(tag)

    # -- internals -------------------------------------------------------------------------------
    def _lookup(self, key: str) -> Future | None:
        entry = self._cache.get(key)
        if entry is not None:
            self._cache.move_to_end(key)
            self._counts["cache_hits"] += 1
            return entry[1]
        fut = self._inflight.get(key)
        if fut is not None:
            self._counts["joins"] += 1
        return fut

    def _compile(self, constraint: Constraint, grammar: xgr.Grammar, token_level: bool) -> CompiledConstraint:
        t0 = time.perf_counter()
        compiled = self._xgr.compile_grammar(grammar)
        mask = torch.empty((1, self.num_words), dtype=torch.int32)
        xgr.GrammarMatcher(compiled).fill_next_token_bitmask(mask, 0)
        return CompiledConstraint(constraint, compiled, mask[0].numpy().copy(),
                                  token_level or self._text_may_allow_all, time.perf_counter() - t0)

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
