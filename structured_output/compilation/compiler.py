"""The per-model compile service: constraints -> xgrammar compiled grammars, in worker processes, cached.

One :class:`Compiler` per model (vocabulary), shared by every request and by every manager of that
model; all its methods are thread-safe. How a constraint becomes an xgrammar grammar (control tokens
as private bytes, token names, xgrammar's fixes) is ``xgrammar_adapter.py``; the worker processes
are ``compilation/_compile_worker.py``.

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
than ``ship_compiled_max_bytes``, by default 0: every one) comes back as its ``Grammar``, and the parent
compiles it again: the worker has already proved that it is valid and how long it takes, and the
compiled form costs more to ship than to compile (its JSON is token masks as numbers, several times
its memory size: a JSON schema's 300 KB cost about 10 ms to write, send and parse against a 1.4 ms
compile; a tool constraint's megabytes several times its compile), while the grammar is a few KB and the
parent's compile reads xgrammar's cache warmed by earlier ones. A slower compile comes back compiled, as
``CompiledGrammar.serialize_json()``, deserialized against the parent's own ``TokenizerInfo``. The
parent's part (deserialize or recompile, then the first-token row) runs on the worker's driver thread,
outside the GIL for the xgrammar calls.

xgrammar's own cache is on in each worker (and in the parent's recompile path) for JSON schemas and
objects, and for structural tags (tool constraints) whose grammar survives its text round trip
(``_compile_worker.cache_safe``: xgrammar's cached compile goes through the grammar's text, which some
structural tags do not survive), bounded by ``xgrammar_cache_bytes`` each: it keeps the token masks of
rules by their content, so rules a grammar repeats (JSON strings, numbers, each tool's call syntax) are
computed once, a schema never seen before compiles in a fraction of the time, and a tool set that shares
tools with an earlier one reuses their masks. A worker is
reused across jobs, so its cache lives as long as it does; a killed worker takes its cache with it.
The zygote compiles nothing, so forks start with an empty cache. Memory: at most ``max_workers``
caches of ``xgrammar_cache_bytes``.

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

import json
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections import OrderedDict, deque
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import xgrammar as xgr

from thinkgate.reasoning.vocabulary import Vocabulary

from . import _compile_worker as _wire
from .constraints import DEFAULT_MAX_WHITESPACE, Constraint
from .jsonws.bound import BoundedMatcher, WhitespaceBound, WhitespaceLexicon
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
        # worker found safe for it (_compile_worker.cache_safe)
        self.xgr = xgr.GrammarCompiler(tokenizer_info, max_threads=num_threads, cache_enabled=False)
        self.xgr_cached = (xgr.GrammarCompiler(tokenizer_info, max_threads=num_threads, cache_enabled=True,
                                               cache_limit_bytes=xgrammar_cache_bytes)
                           if xgrammar_cache_bytes > 0 else None)
        self.num_words = num_words
        self.text_may_allow_all = text_may_allow_all
        self.whitespace = whitespace

    def decode(self, constraint: Constraint, reply: tuple, started: float) -> CompiledConstraint:
        form = reply[0]
        if form == "invalid":
            raise ValueError(reply[1])
        if form == "error":
            raise RuntimeError(reply[1])
        _, payload, token_level, _, cache_safe = reply
        if form == "compiled":
            compiled = xgr.CompiledGrammar.deserialize_json(payload, self.tokenizer_info)
        else:  # "grammar": proved valid and quick to compile in the worker (see the module docstring)
            use = self.xgr_cached if self.xgr_cached is not None and cache_safe else self.xgr
            compiled = use.compile_grammar(xgr.Grammar.deserialize_json(payload))
        ws = constraint.whitespace_bound
        bound = self.whitespace.bound(ws) if ws is not None else None  # built once per model and bound
        mask = torch.empty((1, self.num_words), dtype=torch.int32)
        (xgr.GrammarMatcher(compiled) if bound is None else BoundedMatcher(compiled, bound)
         ).fill_next_token_bitmask(mask, 0)
        return CompiledConstraint(constraint, compiled, mask[0].numpy().copy(),
                                  token_level or self.text_may_allow_all, time.monotonic() - started, bound)


class _Job:
    __slots__ = ("constraint", "future", "deadline", "started", "proc", "state")

    def __init__(self, constraint: Constraint, deadline: float) -> None:
        self.constraint = constraint
        self.future: Future = Future()
        self.deadline = deadline
        self.started = 0.0
        self.proc: _Proc | None = None
        self.state = "queued"  # queued -> running -> settled (the pool's lock guards it)


class _Proc:
    """One worker process (a fork of the zygote) and the parent's end of its socket."""

    __slots__ = ("pid", "sock", "slow")

    def __init__(self, pid: int, sock: socket.socket) -> None:
        self.pid = pid
        self.sock = sock
        self.slow = False

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass

    def renice(self, niceness: int) -> None:
        """Lower the CPU priority of every thread of the worker (Linux: nice is per thread)."""
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            tids = [self.pid]
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, niceness)
            except OSError:
                pass


class _Closed(RuntimeError):
    pass


class _WorkerPool:
    """The zygote, the worker processes and their driver threads (see the module docstring)."""

    SLOW_NICENESS = 10
    CONTENTION_POLL_S = 0.05
    """How often a compile past ``slow_after_s`` looks for another job it should give way to."""

    def __init__(self, table: Any, decoder: _Decoder, *, num_workers: int, max_workers: int, num_threads: int,
                 slow_after_s: float, idle_s: float, settings: dict[str, Any], name: str) -> None:
        self._table = table  # the vocabulary (its table is built on the starter thread)
        self._decoder = decoder
        self._num_workers = num_workers
        self._max_workers = max_workers
        self._slow_after_s = slow_after_s
        self._idle_s = idle_s
        self._settings = {**settings, "num_threads": num_threads}
        self._name = name
        self._lock = threading.RLock()
        self._cond = threading.Condition(self._lock)
        # idle drivers, each waiting on its own condition, most recently idle last: a job wakes the
        # driver that finished last, whose worker's xgrammar cache holds the most recent rules (an
        # agent's next tool set shares most of its tools with the last one)
        self._idle: list[threading.Condition] = []
        self._queue: deque[_Job] = deque()
        self._jobs: dict[Future, _Job] = {}  # every unsettled job, by its future
        self._threads: set[threading.Thread] = set()
        self._available = 0  # driver threads not holding a job
        self._procs: set[_Proc] = set()
        self._closed = False
        self.counts = {"timeouts": 0, "worker_crashes": 0}
        self._zlock = threading.Lock()  # the zygote conversation, one at a time
        self._zygote: subprocess.Popen | None = None
        self._zsock: socket.socket | None = None
        self._zerror: str | None = None
        self._zready = threading.Event()
        threading.Thread(target=self._start_zygote_bg, name=f"{name}-zygote", daemon=True).start()
        with self._cond:
            for _ in range(num_workers):
                self._start_thread(standing=True)

    # -- zygote ----------------------------------------------------------------------------------
    def _start_zygote_bg(self) -> None:
        with self._zlock:
            self._launch_zygote()
        self._zready.set()

    def _launch_zygote(self) -> None:
        """(Re)start the zygote; with ``_zlock`` held."""
        if self._closed:
            self._zerror = "the compiler is closed"
            return
        if not isinstance(self._table, tuple):
            self._table = _wire.vocab_table(self._table)
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            code = ("import sys, json; sys.path[:] = json.loads(sys.argv[1]); "
                    "from thinkgate.structured_output.compilation._compile_worker import main; main(int(sys.argv[2]))")
            proc = subprocess.Popen([sys.executable, "-c", code, json.dumps(sys.path), str(child.fileno())],
                                    pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as e:
            parent.close()
            self._zerror = f"could not start the compile worker process: {e}"
            return
        finally:
            child.close()
        self._zygote, self._zsock = proc, parent
        try:
            _wire.send_obj(parent, ("init", self._table, self._settings))
            reply = _wire.recv_obj(parent)
        except (EOFError, OSError) as e:
            reply = ("error", f"the compile worker process exited during start-up ({e})")
        if reply[0] != "ready":
            self._zerror = str(reply[1])
            self._stop_zygote()
        elif self._closed:  # closed while starting
            self._stop_zygote()
        else:
            self._zerror = None

    def _stop_zygote(self) -> None:
        sock, proc = self._zsock, self._zygote
        self._zsock = self._zygote = None
        if sock is not None:
            sock.close()
        if proc is not None:
            try:
                proc.kill()
                proc.wait(5)
            except (OSError, subprocess.TimeoutExpired):
                pass

    def _fork(self) -> _Proc:
        """A new worker process (``RuntimeError`` if none can be started; the zygote is started
        again once if it died)."""
        self._zready.wait()
        with self._zlock:
            for _ in range(2):
                if self._closed:
                    raise _Closed("the compiler is closed")
                if self._zsock is None:
                    self._launch_zygote()
                    if self._zsock is None:
                        break
                try:
                    _wire.send_obj(self._zsock, ("fork",))
                    data, fds, _, _ = socket.recv_fds(self._zsock, _wire._PID.size, 1)
                    if len(data) != _wire._PID.size or len(fds) != 1:
                        raise EOFError("the zygote closed its socket")
                except (EOFError, OSError) as e:
                    self._stop_zygote()
                    self._zerror = f"the compile zygote process died ({e})"
                    continue
                proc = _Proc(_wire._PID.unpack(data)[0], socket.socket(fileno=fds[0]))
                with self._cond:
                    if self._closed:
                        proc.kill()
                        raise _Closed("the compiler is closed")
                    self._procs.add(proc)
                return proc
            raise RuntimeError(self._zerror or "the compile worker process could not be started")

    # -- jobs ------------------------------------------------------------------------------------
    def submit(self, constraint: Constraint, deadline: float) -> Future:
        with self._cond:
            if self._closed:
                raise RuntimeError("the compiler is closed")
            job = _Job(constraint, deadline)
            self._jobs[job.future] = job
            self._queue.append(job)
            if self._available < len(self._queue) and len(self._threads) < self._max_workers:
                self._start_thread(standing=False)
            if self._idle:  # the most recently idle driver (see __init__); off the stack, so the next
                self._idle.pop().notify()  # job wakes another
        return job.future

    def extend(self, fut: Future, deadline: float) -> None:
        with self._cond:
            job = self._jobs.get(fut)
            if job is not None and deadline > job.deadline:
                job.deadline = deadline

    def stop_if_overdue(self, fut: Future) -> bool:
        """Kill ``fut``'s compile (or drop it from the queue) if its deadline has passed."""
        with self._cond:
            job = self._jobs.get(fut)
            if job is None or time.monotonic() < job.deadline - 0.05:
                return False
        self._settle(job, exc=TimeoutError("the compile did not finish within its deadline"), kill=True,
                     timeout=True)
        return True

    def _settle(self, job: _Job, result: Any = None, exc: BaseException | None = None, *,
                kill: bool = False, timeout: bool = False, crash: bool = False) -> bool:
        """Complete ``job`` once (``kill``: its worker too, if it runs); False if it already was."""
        with self._cond:
            if job.state == "settled":
                return False
            if job.state == "queued":
                try:
                    self._queue.remove(job)
                except ValueError:
                    pass
                live = job.future.set_running_or_notify_cancel()  # False: the caller cancelled it
            else:
                live = True
            proc = job.proc if kill and job.state == "running" else None
            job.state = "settled"
            self._jobs.pop(job.future, None)
            if timeout:
                self.counts["timeouts"] += 1
            if crash:
                self.counts["worker_crashes"] += 1
            if proc is not None:
                self._procs.discard(proc)
        if proc is not None:
            proc.kill()  # its driver sees EOF and forks a fresh worker for its next job
        if live:  # outside the lock: done callbacks run here
            if exc is not None:
                job.future.set_exception(exc)
            else:
                job.future.set_result(result)
        return True

    def _start_thread(self, *, standing: bool) -> None:
        """With ``_cond`` held."""
        t = threading.Thread(target=self._drive, args=(standing,), daemon=True,
                             name=f"{self._name}-{len(self._threads)}")
        self._threads.add(t)
        self._available += 1
        t.start()

    def _drive(self, standing: bool) -> None:
        """A driver thread: owns one worker process at a time and runs jobs on it."""
        proc: _Proc | None = None
        me = threading.current_thread()
        mine = threading.Condition(self._lock)
        try:
            while True:
                if proc is None:
                    try:
                        proc = self._fork()
                    except _Closed:
                        return
                    except RuntimeError as e:
                        err = e
                        proc = None
                with self._cond:
                    while not self._queue and not self._closed:
                        self._idle.append(mine)
                        try:
                            woken = mine.wait(None if standing else self._idle_s)
                        finally:
                            if mine in self._idle:  # not taken off by a submit's wake-up
                                self._idle.remove(mine)
                        if not woken and not self._queue and not standing:
                            return  # idle too long: an extra worker goes away
                    if self._closed:
                        return
                    job = self._queue.popleft()
                    if not job.future.set_running_or_notify_cancel():  # cancelled by its caller
                        job.state = "settled"
                        self._jobs.pop(job.future, None)
                        continue
                    self._available -= 1
                    job.state = "running"
                    job.started = time.monotonic()
                    job.proc = proc if job.started < job.deadline else None
                try:
                    if job.started >= job.deadline:
                        self._settle(job, exc=TimeoutError("the compile waited past its deadline"), timeout=True)
                    elif proc is None:
                        self._settle(job, exc=RuntimeError(str(err)))
                    else:
                        try:
                            proc = self._run(proc, job)
                        except BaseException as e:  # noqa: BLE001 - a bug here fails this job, not the pool
                            self._settle(job, exc=RuntimeError(
                                f"the compile driver failed ({type(e).__name__}: {e})"), kill=True)
                            with self._cond:
                                self._procs.discard(proc)
                            proc.kill()
                            proc = None
                finally:
                    with self._cond:
                        self._available += 1
        finally:
            if proc is not None:
                with self._cond:
                    self._procs.discard(proc)
                proc.kill()
            with self._cond:
                self._threads.discard(me)
                self._available -= 1

    def _run(self, proc: _Proc, job: _Job) -> _Proc | None:
        """Run ``job`` on ``proc``; the process to keep for the next job (None: it is gone)."""
        try:
            data = pickle.dumps(job.constraint, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - e.g. an option value that does not pickle
            self._settle(job, exc=ValueError(f"the constraint cannot be sent to a compile worker "
                                             f"({type(e).__name__}: {e})"))
            return proc
        try:
            _wire.send_bytes(proc.sock, data)
            while True:
                now = time.monotonic()
                if job.state == "settled":  # killed by stop_if_overdue or close
                    return None
                if now >= job.deadline:
                    self._settle(job, exc=TimeoutError("the compile did not finish within its deadline"),
                                 kill=True, timeout=True)
                    return None
                wait = job.deadline - now
                if not proc.slow:  # past slow_after_s, look again for contention every CONTENTION_POLL_S
                    wait = min(wait, max(self.CONTENTION_POLL_S if now >= job.started + self._slow_after_s else 0.0,
                                         job.started + self._slow_after_s - now))
                ready, _, _ = select.select([proc.sock], [], [], wait)
                if ready:
                    reply = _wire.recv_obj(proc.sock)
                    break
                if (not proc.slow and time.monotonic() >= job.started + self._slow_after_s
                        and self._contended(job)):
                    proc.slow = True  # the slow lane: lower priority, retire after this job
                    proc.renice(self.SLOW_NICENESS)
        except (EOFError, OSError, ValueError) as e:  # died (or killed: then the job is settled already)
            self._settle(job, exc=RuntimeError(f"the compile worker process died ({type(e).__name__}: {e}); "
                                               f"xgrammar crashed on this constraint"), crash=True)
            with self._cond:
                self._procs.discard(proc)
            proc.kill()
            return None
        keep: _Proc | None = proc
        if proc.slow:  # reniced: it cannot be raised back, so it goes
            with self._cond:
                self._procs.discard(proc)
            proc.kill()
            keep = None
        try:
            result = self._decoder.decode(job.constraint, reply, job.started)
        except BaseException as e:  # noqa: BLE001 - every failure belongs to the future
            self._settle(job, exc=e)
        else:
            self._settle(job, result=result)
        return keep

    def _contended(self, job: _Job) -> bool:
        """Whether a job other than ``job`` waits or runs at full priority: only then does a slow
        compile give way (renicing it while nothing else needs the CPU would only hand its share to
        other processes of the machine)."""
        with self._cond:
            return bool(self._queue) or any(
                j is not job and j.state == "running" and j.proc is not None and not j.proc.slow
                for j in self._jobs.values())

    # -- introspection and shutdown ---------------------------------------------------------------
    def worker_pids(self) -> list[int]:
        with self._cond:
            return sorted(p.pid for p in self._procs)

    def running_pids(self) -> dict[Future, int]:
        with self._cond:
            return {f: j.proc.pid for f, j in self._jobs.items() if j.state == "running" and j.proc is not None}

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the zygote and the standing workers are up (True) or ``timeout`` passes."""
        end = None if timeout is None else time.monotonic() + timeout
        if not self._zready.wait(timeout):
            return False
        while True:
            with self._cond:
                if len(self._procs) >= self._num_workers or self._zerror is not None or self._closed:
                    return True
            if end is not None and time.monotonic() >= end:
                return False
            time.sleep(0.005)

    @property
    def num_procs(self) -> int:
        with self._cond:
            return len(self._procs)

    def close(self, join_s: float = 10.0) -> None:
        with self._cond:
            if self._closed:
                return
            self._closed = True
            jobs = list(self._jobs.values())
            procs = list(self._procs)
            self._procs.clear()
            threads = list(self._threads)
            while self._idle:
                self._idle.pop().notify()
            self._cond.notify_all()
        for job in jobs:
            self._settle(job, exc=RuntimeError("the compiler was closed"), kill=True)
        for p in procs:
            p.kill()
        zygote = self._zygote
        if zygote is not None:  # wakes a start-up in progress too
            try:
                zygote.kill()
            except OSError:
                pass
        if self._zlock.acquire(timeout=join_s):
            try:
                self._stop_zygote()
            finally:
                self._zlock.release()
        # a driver may be finishing a job in this process (deserialize / recompile, bounded by
        # recompile_max_s): wait for it, so no xgrammar thread runs while the interpreter exits
        end = time.monotonic() + join_s
        me = threading.current_thread()
        for t in threads:
            if t is not me:
                t.join(max(0.0, end - time.monotonic()))


def _close_pool(pool: _WorkerPool) -> None:
    pool.close()


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
    """

    def __init__(self, vocabulary: Vocabulary | str | Any, *, num_threads: int = 2,
                 cache_limit_bytes: int = 512 << 20, sync_validate_max_bytes: int = 0,
                 compile_timeout_s: float = 60.0, max_workers: int = 16, slow_after_s: float = 0.5,
                 worker_idle_s: float = 60.0, ship_compiled_max_bytes: int = 0,
                 recompile_max_s: float = 30.0, xgrammar_cache_bytes: int = 64 << 20) -> None:
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
        # can a text-only grammar ever allow every id? Only if xgrammar has no id it never allows.
        self._text_may_allow_all = len(self.tokenizer_info.special_token_ids) == 0
        self.whitespace = WhitespaceLexicon.of(self.vocabulary)
        """The JSON whitespace lexer of this vocabulary (tables built on the first bounded JSON compile)."""
        # the default bound's tables, built beside the zygote's start-up (per model, once): the first
        # bounded JSON request then does not pay for them inside its compile deadline
        self._ws_thread = threading.Thread(target=self.whitespace.bound, args=(DEFAULT_MAX_WHITESPACE,),
                                           name=f"thinkgate-ws-{self.vocabulary.name}", daemon=True)
        self._ws_thread.start()
        self._decoder = _Decoder(self.tokenizer_info, num_threads, self.num_words, self._text_may_allow_all,
                                 self.whitespace, xgrammar_cache_bytes)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[CompiledConstraint, Future]] = OrderedDict()
        self._cache_bytes = 0
        self._inflight: dict[str, Future] = {}
        self._counts = {"compiles": 0, "cache_hits": 0, "joins": 0, "failures": 0, "evictions": 0,
                        "overdue": 0}
        self._pool = _WorkerPool(self.vocabulary, self._decoder, num_workers=num_threads, max_workers=max_workers,
                                 num_threads=num_threads, slow_after_s=float(slow_after_s),
                                 idle_s=float(worker_idle_s),
                                 settings={"ship_compiled_max_bytes": int(ship_compiled_max_bytes),
                                           "recompile_max_s": float(recompile_max_s),
                                           "xgrammar_cache_bytes": int(xgrammar_cache_bytes)},
                                 name=f"thinkgate-compile-{self.vocabulary.name}")
        # at exit or when collected: stop the workers (the pool holds no reference to the compiler)
        self._finalizer = weakref.finalize(self, _close_pool, self._pool)

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

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the worker processes are started and the default JSON whitespace bound's tables
        are built (True), or ``timeout`` seconds pass."""
        end = None if timeout is None else time.monotonic() + timeout
        if not self._pool.wait_ready(timeout):
            return False
        self._ws_thread.join(None if end is None else max(0.0, end - time.monotonic()))
        return not self._ws_thread.is_alive()

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
