"""Hostile constraints: the caller's thread never pays for content, a compile past its deadline is
killed, hostile compiles never hold back another's, deep nesting is a clear error, and the process
exits cleanly with compiles in flight."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import xgrammar as xgr

from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager
from thinkgate.structured_output.compilation.worker_pool import WorkerPool
from thinkgate.structured_output.compilation.constraints import MAX_NESTING_DEPTH


def hostile(i: int = 0) -> Constraint:
    """A ~60-byte schema whose conversion takes minutes (distinct per ``i``)."""
    return Constraint.json_schema({"type": "object", "patternProperties": {f"^.{{1,{100_000 + i}}}$": {}}})


def trivial(i: int = 0) -> Constraint:
    return Constraint.json_schema({"type": "object", "properties": {f"k{i}": {"type": "integer"}}})


def nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth - 1):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def wait_until(cond, timeout: float, what: str) -> None:
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, what
        time.sleep(0.005)


@pytest.fixture(scope="module")
def comp(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=2, max_workers=16)
    assert c.wait_ready(120)
    yield c
    c.close()


def test_add_request_never_runs_xgrammar_on_the_callers_thread(qwen_vocab, comp, monkeypatch):
    calls: list[str] = []
    caller = threading.get_ident()

    def spy(name, original):
        # the compiler's own threads may compile in this process (a grammar proved quick in a worker is
        # compiled again in the parent): only the caller's thread is watched
        def f(*a, **kw):
            if threading.get_ident() == caller:
                calls.append(name)
                raise AssertionError(f"xgrammar {name} ran on the caller's thread")
            return original(*a, **kw)
        return f

    for name in ("from_json_schema", "from_regex", "from_ebnf", "from_structural_tag"):
        monkeypatch.setattr(xgr.Grammar, name, staticmethod(spy(name, getattr(xgr.Grammar, name))))
    monkeypatch.setattr(xgr.GrammarCompiler, "compile_grammar", spy("compile_grammar", xgr.GrammarCompiler.compile_grammar))
    mgr = StructuredOutputManager(qwen_vocab, None, compiler=comp, compile_timeout_s=2.0)
    times = {"trivial": [], "hostile": []}
    for i in range(8):
        for kind, make in (("trivial", trivial), ("hostile", hostile)):
            c = make(1000 + i)
            t0 = time.perf_counter()
            mgr.add_request(f"{kind}{i}", c)
            times[kind].append(time.perf_counter() - t0)
    assert calls == []
    # generous: the hostile spec is small, so its add costs what a trivial one does
    assert min(times["hostile"]) < 20 * min(times["trivial"]) + 0.005
    mgr.close()  # the compiler is shared: its hostile compiles stop at their deadlines


def test_a_timed_out_compile_is_killed_and_its_memory_freed(comp):
    for attempt in range(3):  # on a loaded machine a job can reach its deadline before a worker takes it
        fut = comp.submit(hostile(1 + 1000 * attempt), timeout_s=4.0)
        wait_until(lambda: comp.running_pid(fut) is not None or fut.done(), 60, "the compile did not start")
        pid = comp.running_pid(fut)
        if pid is not None:
            break
    assert pid is not None, "the compile never started before its deadline"
    with pytest.raises(TimeoutError):
        fut.result(30)
    wait_until(lambda: not alive(pid), 10, "the timed-out worker is still alive")
    assert not os.path.exists(f"/proc/{pid}")  # reaped: nothing of it is left
    assert pid not in comp.worker_pids()
    assert comp.stats.timeouts >= 1
    assert comp.compile(trivial(1), timeout=60).constraint == trivial(1)  # a fresh worker takes over


def _niceness(pid: int) -> set[int]:
    try:
        return {os.getpriority(os.PRIO_PROCESS, int(t)) for t in os.listdir(f"/proc/{pid}/task")}
    except (OSError, ValueError):
        return set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is Linux's")
def test_a_long_compile_alone_keeps_its_priority_and_gives_way_to_a_second(qwen_vocab):
    own = Compiler(qwen_vocab, num_threads=2, slow_after_s=0.1)
    try:
        assert own.wait_ready(120)
        base = os.getpriority(os.PRIO_PROCESS, 0)
        first = own.submit(hostile(7), timeout_s=120)
        wait_until(lambda: own.running_pid(first) is not None, 60, "the first compile did not start")
        pid = own.running_pid(first)
        time.sleep(0.5)  # well past slow_after_s: alone, it is not reniced
        assert not own._pool._jobs[first].proc.slow and _niceness(pid) == {base}
        second = own.submit(hostile(8), timeout_s=120)
        wait_until(lambda: own._pool._jobs[first].proc.slow, 30,
                   "the long compile did not give way once a second one came")
        # niceness is absolute: visible where the tests run below it (not under `nice`)
        assert _niceness(pid) == {max(base, WorkerPool.SLOW_NICENESS)}
        assert not first.done() and not second.done()
    finally:
        own.close()


def test_a_trivial_schema_is_ready_while_12_hostile_ones_compile(qwen_vocab, comp):
    futs = [comp.submit(hostile(100 + i), timeout_s=300) for i in range(12)]
    try:
        wait_until(lambda: all(comp.running_pid(f) is not None for f in futs), 120,
                   "the 12 hostile compiles did not all start")
        pids = [comp.running_pid(f) for f in futs]
        mgr = StructuredOutputManager(qwen_vocab, None, compiler=comp)
        mgr.add_request("t", trivial(2))
        wait_until(lambda: mgr.is_ready("t"), 60, "the trivial schema waited for the hostile ones")
        assert mgr.error("t") is None
        assert not any(f.done() for f in futs)  # they are all still compiling
    finally:
        for f in futs:
            comp.mark_overdue(f)  # not overdue yet (deadline 300 s): nothing happens
        assert not any(f.done() for f in futs)
    comp.close()
    for f in futs:
        with pytest.raises(RuntimeError, match="closed"):
            f.result(10)
    wait_until(lambda: not any(alive(p) for p in pids), 10, "close() left workers alive")


def test_deep_nesting_is_a_value_error_not_a_recursion_error():
    deep = nested(1000)
    deep_text = '{"type":"object","properties":{"a":' * 999 + '{"type":"string"}' + "}}" * 999
    for make in (lambda: Constraint.json_schema(deep), lambda: Constraint.json_schema(deep_text),
                 lambda: Constraint.structural_tag({"type": "structural_tag",
                                                    "format": {"type": "json_schema", "json_schema": deep}}),
                 lambda: Constraint.json_schema("[" * 100_000 + "]" * 100_000)):
        with pytest.raises(ValueError, match=f"nested deeper than {MAX_NESTING_DEPTH} levels"):
            make()
    loop: dict = {"type": "object"}
    loop["properties"] = {"self": loop}
    with pytest.raises(ValueError, match="nested deeper"):
        Constraint.json_schema(loop)
    Constraint.json_schema(nested(MAX_NESTING_DEPTH // 2))  # at the limit (two containers per level)


EXIT_SCRIPT = textwrap.dedent("""
    import sys
    from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager
    schema = {"type": "string"}
    for _ in range(60):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    mgr = StructuredOutputManager("qwen3_6", "qwen3")
    mgr.compiler.wait_ready(120)
    mgr.add_request("deep", Constraint.json_schema(schema))
    mgr.add_request("slow", Constraint.json_schema({"type": "object", "patternProperties": {"^.{1,100000}$": {}}}))
    print(" ".join(map(str, mgr.compiler.worker_pids())), flush=True)
    if sys.argv[1] == "close":
        mgr.close()
    # else: leave it to the interpreter's exit
""")


@pytest.mark.parametrize("how", ["close", "exit"])
def test_exit_with_a_compile_in_flight_exits_cleanly(how):
    r = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, how], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "terminate called" not in r.stderr
    pids = [int(p) for p in r.stdout.split()]
    assert pids
    wait_until(lambda: not any(alive(p) for p in pids), 10, "workers outlived their process")


@pytest.fixture(scope="module")
def own(qwen_vocab):
    """A compiler of these tests' own (``comp`` is closed by a test above)."""
    c = Compiler(qwen_vocab, num_threads=1, max_workers=2)
    yield c
    c.close()


def test_a_constraint_that_does_not_pickle_fails_alone(own):
    """What the driver cannot send to a worker is that request's ValueError; the pool keeps serving."""

    class Local(str):  # JSON-serialisable (the cache key is built), but a local class does not pickle
        pass

    bad = Constraint("regex", "[a-z]+", options=(("label", Local("x")),))
    fut = own.submit(bad, timeout_s=30)
    with pytest.raises(ValueError, match="cannot be sent to a compile worker"):
        fut.result(60)
    assert own.compile(trivial(7), timeout=60).grammar is not None


def test_a_schema_with_an_output_check_compiles_in_a_worker(own):
    """A constraint whose cached output check holds a jsonschema validator (a class made at run time)
    still travels to the worker: only its fields are pickled."""
    import pickle

    c = Constraint.json_schema({"type": "array", "uniqueItems": True})
    check = c.schema_check  # cached on the instance before the submit
    assert check is not None
    copy = pickle.loads(pickle.dumps(c))
    assert copy == c and "schema_check" not in vars(copy)
    assert pickle.loads(pickle.dumps(check)).problem("[1, 1]") is not None
    assert own.compile(c, timeout=60).constraint is c


@pytest.mark.parametrize("when", ["idle", "warming"])
def test_a_worker_killed_before_its_job_does_not_fail_that_job(qwen_vocab, when):
    """A standing worker killed while idle (by the OOM killer, say) or during its start-up warm-up: the next
    compile forks a fresh worker and succeeds; nothing is counted as a crash of xgrammar."""
    import signal

    c = Compiler(qwen_vocab, num_threads=1, max_workers=2)
    try:
        if when == "idle":
            assert c.wait_ready(120)
        else:
            wait_until(lambda: c.worker_pids(), 120, "a worker forked")
        pids = c.worker_pids()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        wait_until(lambda: not any(alive(p) for p in pids), 30, "the workers died")
        assert c.compile(trivial(11), timeout=60).grammar is not None
        assert c.stats.worker_crashes == 0
    finally:
        c.close()


def test_a_worker_that_dies_after_its_unverified_reply_fails_that_job_alone(qwen_vocab):
    """A tool grammar's first reply comes before the worker's round-trip check; a worker that dies during the check
    (the OOM killer, say) fails that job as a crash, though the parent compiles that reply, and the next job
    compiles on a fresh worker."""
    import json
    import signal
    from pathlib import Path

    from thinkgate.structured_output.tools import build_tool_constraint

    corpus = json.loads((Path(__file__).parent / "data" / "tools" / "corpus.json").read_text(encoding="utf-8"))
    tools = [e["tool"] for e in corpus["tools"] if "shapes" not in e][:30]  # a check of several ms
    c = Compiler(qwen_vocab, num_threads=1, max_workers=2)
    try:
        assert c.wait_ready(120)
        pool = c._pool
        receive = pool._receive
        got: list[str] = []

        def receive_then_kill(proc, job):
            msg = receive(proc, job)
            got.append(msg[0])
            if msg[0] == "unverified":  # the worker is now checking the text
                os.kill(proc.pid, signal.SIGKILL)
            return msg

        pool._receive = receive_then_kill
        with pytest.raises(ValueError, match="worker process died"):  # compile() reports it as a failed compile
            c.compile(build_tool_constraint(tools, "required", format="hermes"), timeout=60)
        assert got == ["unverified"] and c.stats.worker_crashes == 1
        pool._receive = receive
        assert c.compile(trivial(12), timeout=60).grammar is not None
    finally:
        c.close()
