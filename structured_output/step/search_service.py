"""Where answer reservation's searches run: :class:`SearchService`, one process beside the engine.

A shortest-completion search (:mod:`.shortest`) costs what the grammar and the committed content make it
cost: milliseconds to tens of milliseconds of Python over xgrammar matchers. The scheduler thread never
runs one. It submits a job (the constraint, the request's content tokens, a length bound) and reads
the job's future at a later step; the search runs in a separate process, so it holds neither the
scheduler thread nor its GIL (a thread in the engine process would: a search holds the GIL for most
of its time, and the scheduler thread then waits up to ``sys.getswitchinterval()`` each time it wants it
back).

Lifetime: one service per manager, built with the manager's first reserving request; its driver thread
starts the process (a fresh interpreter, exec'd, never a fork of the engine process) and then feeds
it one job at a time, first in first out. The process keeps its own compiles of the constraints it is
asked about (an LRU of ``_search_worker.CACHE_ENTRIES``). :meth:`close` (also at interpreter exit)
kills it.

Costs on the caller's thread: :meth:`submit` appends to a queue and wakes the driver (no copy: the
driver takes ``tokens[:n]`` of an append-only list); :meth:`start` is that plus a dictionary look-up
(the start completion is kept per constraint key, so requests with one schema share one search).

Failure model: a job past its deadline kills the process (the next job starts a fresh one) and fails
with ``TimeoutError``; a process that cannot start or dies fails its job with ``RuntimeError``; a
constraint the process cannot compile fails with ``RuntimeError`` naming the cause. The caller reads
these from the future; nothing raises into the scheduler loop.
"""

from __future__ import annotations

import select
import socket
import subprocess
import threading
import time
import weakref
from collections import OrderedDict, deque
from concurrent.futures import Future
from typing import Any

from ..compilation import _compile_worker as _wire
from ..compilation.constraints import Constraint

__all__ = ["SearchService", "REFUSED"]

REFUSED = "refused"
"""A check's result when the grammar refuses the content it was sent (an engine that did not apply the rows)."""

_START_ENTRIES = 4096
"""Start completions kept per constraint key."""


class _Job:
    __slots__ = ("constraint", "tokens", "n", "max_len", "deadline", "future")

    def __init__(self, constraint: Constraint, tokens: list[int] | tuple[int, ...], n: int, max_len: int,
                 deadline: float) -> None:
        self.constraint = constraint
        self.tokens = tokens
        self.n = n
        self.max_len = max_len
        self.deadline = deadline
        self.future: Future = Future()


class _Proc:
    __slots__ = ("popen", "sock")

    def __init__(self, popen: subprocess.Popen, sock: socket.socket) -> None:
        self.popen = popen
        self.sock = sock

    def kill(self) -> None:
        try:
            self.popen.kill()
            self.popen.wait(5)
        except (OSError, subprocess.TimeoutExpired):
            pass
        try:
            self.sock.close()
        except OSError:
            pass


class _State:
    """What the driver thread and the caller share (the service's finalizer holds this, not the service)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.queue: deque[_Job] = deque()
        self.closed = False
        self.proc: _Proc | None = None
        # every submitted job ends as exactly one of: run (a reply came), cancelled (before it ran), timeout,
        # failure (the process died or the service closed)
        self.submitted = 0
        self.jobs = 0
        self.cancelled = 0
        self.timeouts = 0
        self.failures = 0

    def close(self) -> None:
        with self.cond:
            self.closed = True
            pending = list(self.queue)
            self.queue.clear()
            proc, self.proc = self.proc, None
            self.cond.notify_all()
        if proc is not None:
            proc.kill()
        for job in pending:
            ran = job.future.set_running_or_notify_cancel()
            with self.cond:
                if ran:
                    self.failures += 1
                else:
                    self.cancelled += 1
            if ran:
                job.future.set_exception(RuntimeError("the search service is closed"))


class SearchService:
    """Shortest completions computed off the scheduler thread (see the module docstring). Thread-safe."""

    def __init__(self, vocabulary: Any, *, name: str = "thinkgate-search") -> None:
        self._table = _wire.vocab_table(vocabulary)
        self._state = _State()
        self._starts: OrderedDict[str, Future] = OrderedDict()
        self._starts_lock = threading.Lock()
        self._thread = threading.Thread(target=_drive, args=(self._state, self._table), name=name, daemon=True)
        self._thread.start()
        self._finalizer = weakref.finalize(self, self._state.close)

    def submit(self, constraint: Constraint, tokens: list[int] | tuple[int, ...], n: int, max_len: int,
               timeout_s: float) -> Future:
        """A future of the shortest completion of ``constraint`` after its content ``tokens[:n]`` (a tuple of
        ids ending with a stop token, or None when none of at most ``max_len`` tokens was found; :data:`REFUSED`
        when the grammar refuses that content). ``tokens`` may grow meanwhile (only its first ``n`` are read)."""
        job = _Job(constraint, tokens, n, max_len, time.monotonic() + timeout_s)
        st = self._state
        with st.cond:
            if st.closed:
                job.future.set_exception(RuntimeError("the search service is closed"))
                return job.future
            st.submitted += 1
            st.queue.append(job)
            st.cond.notify()
        return job.future

    def start(self, constraint: Constraint, max_len: int, timeout_s: float) -> Future:
        """The shortest completion from the grammar's start (shared per constraint key; a failed one is
        searched again by the next request that asks)."""
        key = constraint.key
        with self._starts_lock:
            fut = self._starts.get(key)
            if fut is not None and not (fut.done() and fut.exception() is not None):
                self._starts.move_to_end(key)
                return fut
            fut = self.submit(constraint, (), 0, max_len, timeout_s)
            self._starts[key] = fut
            while len(self._starts) > _START_ENTRIES:
                self._starts.popitem(last=False)
        return fut

    @property
    def pid(self) -> int | None:
        """The search process's pid (None while none runs)."""
        proc = self._state.proc
        return None if proc is None else proc.popen.pid

    @property
    def jobs(self) -> int:
        """Jobs run so far (a reply came from the search process)."""
        return self._state.jobs

    @property
    def counts(self) -> dict[str, int]:
        """Jobs submitted, and how those that ended did: ``run``, ``cancelled`` (before they ran),
        ``timeouts``, ``failures``."""
        st = self._state
        with st.cond:
            return {"submitted": st.submitted, "run": st.jobs, "cancelled": st.cancelled,
                    "timeouts": st.timeouts, "failures": st.failures}

    def close(self) -> None:
        self._finalizer()


def _launch(table: tuple) -> _Proc:
    try:
        popen, parent = _wire.launch("thinkgate.structured_output.step._search_worker")
    except OSError as e:
        raise RuntimeError(f"could not start the search process: {e}") from None
    proc = _Proc(popen, parent)
    reply = _wire.handshake(parent, ("init", table), "the search process")
    if reply[0] != "ready":
        proc.kill()
        raise RuntimeError(f"the search process did not start: {reply[1]}")
    return proc


def _drive(st: _State, table: tuple) -> None:
    """The driver thread: starts the process (again after a kill) and runs the jobs in order."""
    job_id = 0
    while True:
        with st.cond:
            while not st.queue and not st.closed:
                st.cond.wait()
            if st.closed:
                return
            job = st.queue.popleft()
        if not job.future.set_running_or_notify_cancel():
            with st.cond:
                st.cancelled += 1
            continue
        if time.monotonic() >= job.deadline:
            with st.cond:
                st.timeouts += 1
            job.future.set_exception(TimeoutError("the search waited past its deadline"))
            continue
        try:
            proc = st.proc
            if proc is None:
                proc = _launch(table)
                with st.cond:
                    if st.closed:
                        proc.kill()
                        st.failures += 1
                        job.future.set_exception(RuntimeError("the search service is closed"))
                        return
                    st.proc = proc
            job_id += 1
            _wire.send_obj(proc.sock, (job_id, job.constraint, tuple(job.tokens[:job.n]), job.max_len))
            left = job.deadline - time.monotonic()
            ready, _, _ = select.select([proc.sock], [], [], max(0.0, left))
            if not ready:  # past its deadline: the search really stops
                with st.cond:
                    st.proc = None
                    st.timeouts += 1
                proc.kill()
                job.future.set_exception(TimeoutError("the shortest-completion search did not finish within its "
                                                      "deadline"))
                continue
            rid, status, value = _wire.recv_obj(proc.sock)
        except (EOFError, OSError, RuntimeError) as e:
            with st.cond:
                dead, st.proc = st.proc, None
                st.failures += 1
            if dead is not None:
                dead.kill()
            job.future.set_exception(RuntimeError(f"the search process failed ({e})"))
            continue
        with st.cond:
            st.jobs += 1
        if status == "ok":
            job.future.set_result(value)
        elif status == REFUSED:
            job.future.set_result(REFUSED)
        else:
            job.future.set_exception(RuntimeError(str(value)))

