"""Answer reservation's searches never run on the scheduler thread (structured_output/step/search_service.py):
the start completion is searched beside the compile and the answer's checks in the search process; a spy on
the search entries in this process sees none during the steps. The search process's failures (a deadline,
a constraint it cannot compile) stay that request's; an impossible budget is a typed ReservationError.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time

import jsonschema
import pytest

from thinkgate.reasoning.vocabulary import load_vocabulary
from thinkgate.structured_output import Constraint, RequestStatus, StructuredOutputManager
from thinkgate.structured_output.step import reserve as reserve_mod
from thinkgate.structured_output.step import shortest as shortest_mod
from thinkgate.structured_output.step.reserve import ReservationError, Shortest
from thinkgate.structured_output.step.search_service import SearchService
from thinkgate.testing.standin import run_stand_in
from thinkgate.testing.streams import wait_compiled
from thinkgate.testing.workload import SCHEMAS


@pytest.fixture(scope="module")
def vocab():
    return load_vocabulary("qwen3_6")


@pytest.fixture(scope="module")
def mgr(vocab):
    m = StructuredOutputManager(vocab, "qwen3", max_num_seqs=4)
    yield m
    m.close()


def _prompt(vocab):
    return vocab.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n")


@pytest.fixture
def spy(monkeypatch):
    """Every call of a search entry in this process: (pid, thread id, what)."""
    calls: list[tuple[int, int, str]] = []

    def wrap(cls, name):
        orig = getattr(cls, name)

        def spied(*a, **k):
            calls.append((os.getpid(), threading.get_ident(), f"{cls.__name__}.{name}"))
            return orig(*a, **k)

        monkeypatch.setattr(cls, name, spied)

    wrap(shortest_mod.ShortestCompletion, "find")
    wrap(shortest_mod.ByteLevel, "shortest")
    wrap(reserve_mod.Shortest, "find")
    wrap(reserve_mod.Shortest, "complete")
    return calls


def test_no_search_runs_on_the_scheduler_thread(vocab, mgr, spy):
    """Both answer paths (steered from the start, and written freely with checks and waits): valid outputs,
    searches run (the service counts its jobs, in another process), and the spy sees none here."""
    think = vocab.encode(" hmm")[0]
    checks = 0
    for i, (schema, _) in enumerate(SCHEMAS[:3]):
        for n, budget in ((48, None), (70, 3)):
            rid = f"{i}-{n}"
            mgr.add_request(rid, Constraint.json_schema(schema), _prompt(vocab), max_tokens=n, reserve_answer=True,
                            max_thinking_tokens=budget)
            wait_compiled(mgr, rid)
            run = run_stand_in(mgr, rid, n, think_token=think, rng=random.Random(i), num_drafts=0)
            res = mgr._requests[rid].reserve
            checks += res.checks
            if run.status == "terminated":
                text = vocab.decode([t for t in run.tokens if t not in vocab.stop_token_ids])
                jsonschema.validate(json.loads(text.split("</think>", 1)[1]), schema)
            else:  # a model that outgrows the margin (see reserve.py's guarantee): reported, never invalid
                assert res.status in ("late", "lost"), (rid, run.status, res.status)
            mgr.remove_request(rid)
    service = mgr._search
    assert service is not None and checks > 0
    # a check still queued when its request ended was cancelled, one still running finishes later: a last
    # job, run after all of them (one driver, FIFO), makes the count final
    service.submit(Constraint.json_schema(SCHEMAS[0][0]), (), 0, 64, 60).result(timeout=60)
    n = service.counts
    # one start search per schema (shared by its two requests), every check, the last job; each ended one way
    assert n["submitted"] == 3 + checks + 1, (n, checks)
    assert n["run"] + n["cancelled"] + n["timeouts"] + n["failures"] == n["submitted"], n
    assert n["run"] >= 3 + 1 and n["failures"] == 0, n
    assert service.pid is not None and service.pid != os.getpid()
    assert spy == []
    # the spy is live: a search in this process is seen
    c = Constraint.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
    compiled = mgr.compiler.compile(c)
    assert Shortest(vocab).complete(compiled, (), 40)
    assert spy and spy[0][:2] == (os.getpid(), threading.get_ident())


def test_the_start_search_is_awaited_like_the_compile(vocab, mgr, spy):
    """A request is not ready before its start completion is known; then its thinking budget is set."""
    c = Constraint.json_schema({"type": "object", "properties": {"zz": {"type": "string"}}, "required": ["zz"]})
    mgr.add_request("r", c, _prompt(vocab), max_tokens=64, reserve_answer=True)
    req = mgr._requests["r"]
    t0 = time.monotonic()
    while not mgr.is_ready("r"):
        assert req.think_limit is None and req.reserve.start_len is None
        assert time.monotonic() - t0 < 60
        time.sleep(0.002)
    assert req.reserve.start_len is not None and req.think_limit == 64 - 1 - req.reserve.start_len - 4
    mgr.remove_request("r")
    assert spy == []


def test_impossible_budget_is_a_reservation_error(vocab, mgr):
    schema = {"type": "object", "properties": {"k": {"type": "string", "minLength": 31}}, "required": ["k"]}
    c = Constraint.json_schema(schema)
    mgr.add_request("tight", c, _prompt(vocab), max_tokens=5, reserve_answer=True)
    wait_compiled(mgr, "tight")
    assert mgr.status("tight") is RequestStatus.ERROR
    assert isinstance(mgr._requests["tight"].cause, ReservationError)
    with pytest.raises(ReservationError, match="more than max_tokens=5"):
        mgr.add_request("tight2", c, _prompt(vocab), max_tokens=5, reserve_answer=True)
    assert "tight2" not in mgr
    # another failure of a reserving request is no ReservationError: a token its grammar refuses
    mgr.add_request("ok", c, _prompt(vocab), max_tokens=300, reserve_answer=True, include_reasoning=False)
    wait_compiled(mgr, "ok")
    assert mgr.accept_tokens("ok", vocab.encode("x")[:1]).status == "error"
    assert mgr.status("ok") is RequestStatus.ERROR and not isinstance(mgr._requests["ok"].cause, ReservationError)
    for rid in ("tight", "ok"):
        mgr.remove_request(rid)


def test_a_search_past_its_deadline_stops_and_the_next_one_runs(vocab):
    """A search that overruns its deadline really stops (its process is killed); the next job starts a fresh
    one. A job that waited past its deadline never starts; content the grammar refuses is told apart."""
    svc = SearchService(vocab)
    try:
        c = Constraint.json_schema({"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]})
        seq = svc.submit(c, (), 0, 200, 60.0).result(60)
        assert seq is not None and seq[-1] in vocab.stop_token_ids
        first = svc.pid
        # a search of seconds: its shortest text is three strings of 4,000 characters, one search level each
        slow = Constraint.json_schema({"type": "array", "items": {"type": "string", "minLength": 4000}, "minItems": 3})
        t0 = time.monotonic()
        with pytest.raises(TimeoutError):
            svc.submit(slow, (), 0, 4096, 0.5).result(30)
        assert time.monotonic() - t0 < 10
        with pytest.raises(TimeoutError):
            svc.submit(c, (), 0, 200, 1e-6).result(30)  # past its deadline before it starts
        assert svc.submit(c, (), 0, 200, 60.0).result(60) == seq
        assert svc.pid not in (None, first)
        assert svc.submit(c, vocab.encode("}"), 1, 200, 60.0).result(60) == "refused"
        # a job cancelled while queued never runs; the one running when the service closes fails
        busy = svc.submit(slow, (), 0, 4096, 60.0)
        queued = svc.submit(c, (), 0, 200, 60.0)
        assert queued.cancel()
    finally:
        svc.close()
    with pytest.raises(RuntimeError):
        busy.result(30)
    with pytest.raises(RuntimeError, match="closed"):
        svc.submit(c, (), 0, 10, 1.0).result(5)
    # every job submitted ended one way (the refused content is a reply: it ran)
    assert svc.counts == {"submitted": 7, "run": 3, "cancelled": 1, "timeouts": 2, "failures": 1}
