"""The compile service's worker processes: the zygote, its forks and the driver thread of each (what
:class:`~.compiler.Compiler` runs every content-dependent compile in; its module docstring tells the
lifecycle: deadlines that kill, the slow lane, crashes, the warm worker first). The pool ships a job's
constraint to a worker and hands the reply to the compiler's decoder (the parent's half of a compile)."""

from __future__ import annotations

import os
import pickle
import select
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from concurrent.futures import Future
from typing import Any, Protocol

from . import _compile_worker as _wire
from .constraints import Constraint

__all__ = ["Decoder", "WorkerPool", "close_pool"]


class Decoder(Protocol):
    """The parent's half of a compile: a worker's reply -> the compiled constraint (``ValueError`` for an
    invalid one, ``RuntimeError`` for a failed one)."""

    def decode(self, constraint: Constraint, reply: tuple, started: float) -> Any: ...


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

    def gone(self) -> bool:
        """Whether the worker has closed its end (died) while idle: an idle worker sends nothing, so a readable
        socket between jobs is its EOF."""
        try:
            ready, _, _ = select.select([self.sock], [], [], 0)
            return bool(ready) and self.sock.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True

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


class WorkerPool:
    """The zygote, the worker processes and their driver threads (see the module docstring)."""

    SLOW_NICENESS = 10
    CONTENTION_POLL_S = 0.05
    """How often a compile past ``slow_after_s`` looks for another job it should give way to."""
    WARM_UP_TIMEOUT_S = 60.0
    """How long a new worker may take to warm its cache (``_compile_worker.warm_up``) before it is given up."""

    def __init__(self, table: Any, decoder: Decoder, *, num_workers: int, max_workers: int, num_threads: int,
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
        self._warmed = 0  # workers that reported warm, ever (wait_ready)
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
        try:
            proc, parent = _wire.launch("thinkgate.structured_output.compilation._compile_worker")
        except OSError as e:
            self._zerror = f"could not start the compile worker process: {e}"
            return
        self._zygote, self._zsock = proc, parent
        reply = _wire.handshake(parent, ("init", self._table, self._settings), "the compile worker process")
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

    def _fork(self, warm: bool) -> _Proc:
        """A new worker process, its cache warmed first with ``warm`` (``RuntimeError`` if none can be started;
        the zygote is started again once if it died)."""
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
                    _wire.send_obj(self._zsock, ("fork", warm))
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

    def _warm(self, proc: _Proc) -> _Proc:
        """Wait for a new worker's ``("warm",)`` (its cache warmed before its first job); ``RuntimeError``,
        the worker killed, if it dies or takes longer than :attr:`WARM_UP_TIMEOUT_S`."""
        try:
            ready, _, _ = select.select([proc.sock], [], [], self.WARM_UP_TIMEOUT_S)
            msg = _wire.recv_obj(proc.sock) if ready else None
        except (EOFError, OSError, ValueError) as e:
            msg = e
        if msg != ("warm",):
            with self._cond:
                self._procs.discard(proc)
            proc.kill()
            raise RuntimeError(f"the compile worker process did not start ({msg or 'no reply'})")
        with self._cond:
            self._warmed += 1
        return proc

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
                        # a standing worker warms its cache while idle; an extra one is forked for a
                        # job that waits, which its warm-up would only delay
                        proc = self._warm(self._fork(standing))
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
                    if proc is not None and proc.gone():  # killed while idle (by the OOM killer, say)
                        with self._cond:
                            self._procs.discard(proc)
                        proc.kill()
                        proc, err = None, RuntimeError("the compile worker process died while idle")
                    if job.started < job.deadline and proc is None:
                        proc, err = self._refork(job, err)
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

    def _refork(self, job: _Job, err: BaseException) -> tuple[_Proc | None, BaseException]:
        """A worker for ``job`` (running) where its driver has none: its worker died before the job came (killed
        during its warm-up or while idle), so one more fork, without the warm-up the job would wait for. ``(None,
        the error)`` when that fails too (or the job was settled meanwhile: closed, overdue)."""
        try:
            proc = self._warm(self._fork(False))
        except RuntimeError as e:  # _Closed included
            return None, e
        with self._cond:
            if job.state != "settled":
                job.proc = proc
                return proc, err
            self._procs.discard(proc)
        proc.kill()
        return None, err

    def _run(self, proc: _Proc, job: _Job) -> _Proc | None:
        """Run ``job`` on ``proc``; the process to keep for the next job (None: it is gone).

        An ``("unverified", reply)`` is decoded at once, while the worker checks it; it settles the job when
        ``("verified",)`` follows, and the reply that follows instead replaces it."""
        try:
            data = pickle.dumps(job.constraint, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as e:  # noqa: BLE001 - e.g. an option value that does not pickle
            self._settle(job, exc=ValueError(f"the constraint cannot be sent to a compile worker "
                                             f"({type(e).__name__}: {e})"))
            return proc
        early: tuple | None = None  # ("ok", result) / ("exc", error) of an unverified reply
        try:
            _wire.send_bytes(proc.sock, data)
            reply = self._receive(proc, job)
            if reply is not None and reply[0] == "unverified":
                early = self._decode(job, reply[1])
                reply = self._receive(proc, job)
        except (EOFError, OSError, ValueError) as e:  # died (or killed: then the job is settled already)
            self._settle(job, exc=RuntimeError(f"the compile worker process died ({type(e).__name__}: {e}); "
                                               f"xgrammar crashed on this constraint"), crash=True)
            with self._cond:
                self._procs.discard(proc)
            proc.kill()
            return None
        if reply is None:  # settled: past its deadline, stopped, or the pool closed
            return None
        keep: _Proc | None = proc
        if proc.slow:  # reniced: it cannot be raised back, so it goes
            with self._cond:
                self._procs.discard(proc)
            proc.kill()
            keep = None
        outcome = early if reply[0] == "verified" and early is not None else self._decode(job, reply)
        if outcome[0] == "ok":
            self._settle(job, result=outcome[1])
        else:
            self._settle(job, exc=outcome[1])
        return keep

    def _decode(self, job: _Job, reply: tuple) -> tuple:
        """``("ok", result)`` or ``("exc", error)`` of the decoder on ``reply``."""
        try:
            return ("ok", self._decoder.decode(job.constraint, reply, job.started))
        except BaseException as e:  # noqa: BLE001 - every failure belongs to the future
            return ("exc", e)

    def _receive(self, proc: _Proc, job: _Job) -> tuple | None:
        """The worker's next message for ``job``; None when the job was settled first (stopped or closed), or
        settled here at its deadline (the worker killed). Moves a long compile to the slow lane on the way.
        ``EOFError`` / ``OSError`` when the worker died."""
        while True:
            now = time.monotonic()
            if job.state == "settled":  # killed by stop_if_overdue or close
                return None
            wait = max(0.0, job.deadline - now)
            if not proc.slow:  # past slow_after_s, look again for contention every CONTENTION_POLL_S
                wait = min(wait, max(self.CONTENTION_POLL_S if now >= job.started + self._slow_after_s else 0.0,
                                     job.started + self._slow_after_s - now))
            ready, _, _ = select.select([proc.sock], [], [], wait)
            if ready:  # taken even past the deadline: the worker finished (the parent's decode took the time)
                return _wire.recv_obj(proc.sock)
            if time.monotonic() >= job.deadline:
                self._settle(job, exc=TimeoutError("the compile did not finish within its deadline"),
                             kill=True, timeout=True)
                return None
            if (not proc.slow and time.monotonic() >= job.started + self._slow_after_s
                    and self._contended(job)):
                proc.slow = True  # the slow lane: lower priority, retire after this job
                proc.renice(self.SLOW_NICENESS)

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
        """Wait until the zygote and the standing workers are up, their caches warm (True), or ``timeout``
        passes."""
        end = None if timeout is None else time.monotonic() + timeout
        if not self._zready.wait(timeout):
            return False
        while True:
            with self._cond:
                if self._warmed >= self._num_workers or self._zerror is not None or self._closed:
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


def close_pool(pool: WorkerPool) -> None:
    pool.close()
