"""Fill overlapped with the model (``grammar_bitmask_async``): the same rows as ``grammar_bitmask`` on
random schedules with drafts (fresh seeds each run, printed on failure); misuse of the schedule raises
at once with no fill pending; every public call during a pending fill is a clear error that moves
nothing; an exception inside the fill surfaces from ``result()`` with every matcher rolled back.
"""

from __future__ import annotations

import json
import random
import threading
import time

import pytest

from thinkgate.testing.workload import Workload
from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}, "required": ["a"]}


class Injected(Exception):
    pass


def rows_of(batch) -> dict[int, tuple[str, bytes]]:
    """logits row -> (request id, mask bytes): the batch as a set, whatever the order of its rows."""
    if batch is None:
        return {}
    idx = batch.logits_indices.tolist()
    assert len(set(idx)) == len(idx) == len(batch.request_ids)
    return {i: (batch.request_ids[r], batch.bitmask[r].numpy().tobytes()) for r, i in enumerate(idx)}


def wait_ready(mgr, *rids, timeout=120.0):
    t0 = time.monotonic()
    while not all(mgr.is_ready(r) for r in rids):
        assert time.monotonic() - t0 < timeout, "compile did not finish"
        time.sleep(0.002)


@pytest.mark.parametrize("threads,min_rows", [(1, 32), (2, 1), (2, 4)])
def test_async_batches_equal_sync_batches_on_random_schedules(qwen_vocab, threads, min_rows):
    v = qwen_vocab
    seed = random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    k = 3
    comp = Compiler(v, num_threads=2)
    mgr = StructuredOutputManager(v, "qwen3", compiler=comp, max_num_seqs=12, num_speculative_tokens=k,
                                  num_fill_threads=threads, batch_fill_min_rows=min_rows, num_buffers=2)
    try:
        work = Workload(v, seed=seed, think_fraction=0.5)
        live: dict[str, tuple] = {}  # rid -> (script, position)
        steps = 0
        while steps < 40:
            while len(live) < 10:
                sr = work.next()
                mgr.add_request(sr.rid, sr.constraint, sr.prompt_ids, chat_template_kwargs=sr.chat_template_kwargs)
                live[sr.rid] = (sr.script, 0)
            wait_ready(mgr, *live)
            rids = rng.sample(sorted(live), rng.randint(1, len(live)))
            sched = []
            for rid in rids:
                script, pos = live[rid]
                nd = rng.randint(0, k)
                drafts = [script[pos + i] if pos + i < len(script) and rng.random() < 0.8 else rng.randrange(v.vocab_size)
                          for i in range(nd)]
                sched.append((rid, drafts) if nd or rng.random() < 0.5 else rid)
            sync = rows_of(mgr.grammar_bitmask(sched))
            handle = mgr.grammar_bitmask_async(sched)
            got = rows_of(handle.result())
            assert got == sync, f"seed {seed}, step {steps}: async rows differ from sync rows"
            assert rows_of(mgr.grammar_bitmask(sched)) == sync, f"seed {seed}: the async fill moved a matcher"
            # commit a few scripted tokens of each scheduled request (unmasked: a script whose thinking
            # writes the <tool_call> token ends its thinking there and then errors, one more state)
            for rid in rids:
                script, pos = live[rid]
                n = rng.randint(1, 1 + k)
                res = mgr.accept_tokens(rid, script[pos:pos + n])
                if res.status != "ok" or pos + n >= len(script):
                    mgr.remove_request(rid)
                    del live[rid]
                else:
                    live[rid] = (script, pos + n)
            steps += 1
    finally:
        mgr.close()
        comp.close()


def _world(v, comp, **kw):
    mgr = StructuredOutputManager(v, "qwen3", compiler=comp, max_num_seqs=8, num_speculative_tokens=3, **kw)
    body = v.encode(json.dumps({"a": 12, "b": "xy"}))
    think = v.encode("<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n<think>\n")
    for rid in ("j0", "j1", "j2"):
        mgr.add_request(rid, Constraint.json_schema(SCHEMA), include_reasoning=False)
    mgr.add_request("t", Constraint.json_schema(SCHEMA), think)
    wait_ready(mgr, "j0", "j1", "j2", "t")
    for rid in ("j0", "j1", "j2"):
        assert mgr.accept_tokens(rid, body[:2]).status == "ok"
    end = v.token_id("</think>")
    sched = [("j0", body[2:5]), ("j1", body[2:4]), "j2", ("t", v.encode(" ok") + [end] + body[:1])]
    return mgr, body, end, sched


def test_every_call_during_a_pending_fill_is_a_clear_error_that_moves_nothing(qwen_vocab):
    v = qwen_vocab
    comp = Compiler(v, num_threads=2)
    try:
        mgr, body, end, sched = _world(v, comp, num_fill_threads=2)
        ref = rows_of(mgr.grammar_bitmask(sched))
        assert rows_of(mgr.grammar_bitmask_async(sched).result()) == ref  # builds the worker
        # misuse of the schedule raises from grammar_bitmask_async itself: no fill pending after it
        for bad, exc in ((["nope"], KeyError), (["j0", "j0"], ValueError), ([("j1", [1.5])], ValueError),
                         ([("j0", [1, 2, 3, 4])], ValueError), ("j0", ValueError)):
            with pytest.raises(exc):
                mgr.grammar_bitmask_async(bad)
            assert mgr.status("j0").value == "constrained"  # not busy
        # a fill held inside xgrammar's batch matcher
        inside, release = threading.Event(), threading.Event()
        bm = mgr._overlap.filler._batch_matcher
        batch_fill = bm.batch_fill_next_token_bitmask

        def held(*a, **kw):
            inside.set()
            assert release.wait(30)
            return batch_fill(*a, **kw)

        bm.batch_fill_next_token_bitmask = held
        handle = mgr.grammar_bitmask_async(sched)
        assert inside.wait(30) and not handle.done()
        with pytest.raises(TimeoutError):
            handle.result(timeout=0.01)  # still pending, and so is the manager
        calls = {
            "accept_tokens": lambda: mgr.accept_tokens("j2", body[2:3]),
            "grammar_bitmask": lambda: mgr.grammar_bitmask(["j2"]),
            "grammar_bitmask_async": lambda: mgr.grammar_bitmask_async(["j2"]),
            "add_request": lambda: mgr.add_request("x", None),
            "remove_request": lambda: mgr.remove_request("j2"),
            "status": lambda: mgr.status("j2"),
            "is_ready": lambda: mgr.is_ready("j2"),
            "forced_tokens": lambda: mgr.forced_tokens("j2"),
            "close": lambda: mgr.close(),
        }
        for name, call in calls.items():
            with pytest.raises(RuntimeError, match=f"{name} called while a grammar_bitmask_async fill is pending"):
                call()
        other: list[BaseException] = []
        t = threading.Thread(target=lambda: other.append(pytest.raises(RuntimeError, mgr.status, "j0").value))
        t.start()
        t.join(30)
        assert other and "pending" in str(other[0])  # another thread: the same clear error
        release.set()
        got = handle.result()
        assert rows_of(got) == ref
        assert handle.result() is got and handle.done()  # again: the same batch
        # nothing moved, and the manager is free again
        assert "x" not in mgr and "j2" in mgr
        assert rows_of(mgr.grammar_bitmask(sched)) == ref
        assert mgr.accept_tokens("j2", body[2:] + [v.token_id("<|im_end|>")]).status == "terminated"
        mgr.close()
    finally:
        comp.close()


@pytest.mark.parametrize("threads", [1, 2])
def test_exception_inside_the_fill_surfaces_from_result_with_every_matcher_rolled_back(qwen_vocab, threads):
    v = qwen_vocab
    comp = Compiler(v, num_threads=2)
    try:
        mgr, body, end, sched = _world(v, comp, num_fill_threads=threads)
        ref = rows_of(mgr.grammar_bitmask(sched))
        assert rows_of(mgr.grammar_bitmask_async(sched).result()) == ref
        calls = {"n": 0, "fail_at": -1}

        def wrap(f):
            def g(*a, **kw):
                calls["n"] += 1
                if calls["n"] - 1 == calls["fail_at"]:
                    raise Injected(calls["fail_at"])
                return f(*a, **kw)
            return g

        for rid in ("j0", "j1", "j2", "t"):
            m = mgr._requests[rid].matcher
            m.accept_token = wrap(m.accept_token)
            m.fill_next_token_bitmask = wrap(m.fill_next_token_bitmask)
        bm = mgr._overlap.filler._batch_matcher
        bm.batch_fill_next_token_bitmask = wrap(bm.batch_fill_next_token_bitmask)
        assert rows_of(mgr.grammar_bitmask_async(sched).result()) == ref
        total = calls["n"]
        assert total >= 3
        for p in range(total):
            calls.update(n=0, fail_at=p)
            handle = mgr.grammar_bitmask_async(sched)
            with pytest.raises(Injected):
                handle.result()
            calls.update(fail_at=-1)
            # released, every matcher at its committed state: the same rows, sync and async
            assert rows_of(mgr.grammar_bitmask(sched)) == ref, p
            assert rows_of(mgr.grammar_bitmask_async(sched).result()) == ref, p
        for rid in ("j0", "j1", "j2"):
            assert mgr.accept_tokens(rid, body[2:] + [v.token_id("<|im_end|>")]).status == "terminated"
        assert mgr.accept_tokens("t", v.encode(" ok") + [end] + body).status == "ok"
        mgr.close()
    finally:
        comp.close()


def test_a_schedule_with_nothing_to_fill_completes_at_once_and_still_needs_result(qwen_vocab):
    v = qwen_vocab
    comp = Compiler(v, num_threads=1)
    try:
        mgr = StructuredOutputManager(v, "qwen3", compiler=comp, max_num_seqs=2)
        mgr.add_request("free", None, include_reasoning=False)
        handle = mgr.grammar_bitmask_async(["free"])
        assert handle.done()
        with pytest.raises(RuntimeError, match="pending"):
            mgr.accept_tokens("free", [1])
        assert handle.result() is None
        assert mgr.accept_tokens("free", [1]).status == "ok"
        mgr.close()
    finally:
        comp.close()


def test_draft_lists_reused_by_the_engine_after_the_call_do_not_change_the_rows(qwen_vocab):
    v = qwen_vocab
    comp = Compiler(v, num_threads=2)
    try:
        mgr, body, end, sched = _world(v, comp, num_fill_threads=2)
        ref = rows_of(mgr.grammar_bitmask(sched))
        inside, release = threading.Event(), threading.Event()
        mgr.grammar_bitmask_async(["j0"]).result()
        bm = mgr._overlap.filler._batch_matcher
        batch_fill = bm.batch_fill_next_token_bitmask

        def held(*a, **kw):
            inside.set()
            assert release.wait(30)
            return batch_fill(*a, **kw)

        bm.batch_fill_next_token_bitmask = held
        mine = [(e[0], list(e[1])) if isinstance(e, tuple) else e for e in sched]  # the engine's own lists
        handle = mgr.grammar_bitmask_async(mine)
        assert inside.wait(30)
        for e in mine:
            if isinstance(e, tuple):
                e[1][:] = [13] * len(e[1])  # the engine refills its draft lists for the next step
        release.set()
        assert rows_of(handle.result()) == ref
        mgr.close()
    finally:
        comp.close()


@pytest.mark.slow
def test_loop_bench_overlap_tiny(tmp_path, capsys):
    """``python -m bench loop --overlap``, tiny: its table, overlapped rows equal to the step's rows."""
    from support import assert_table, read_rows

    from bench.__main__ import main

    out = tmp_path / "loop.jsonl"
    rc = main(["loop", "--batches", "8", "--drafts", "0,2", "--steps", "10", "--warmup", "1", "--overlap",
               "--forward-us", "500", "--out", str(out), "--plot", ""])
    text = capsys.readouterr().out
    assert rc == 0, text
    cols = ["batch", "drafts", "fill_us", "fwd_us", "serial_us", "overlap_us", "overlap_x", "overlap_mismatch"]
    assert_table(text, cols)
    rows = read_rows(out, "loop", cols)
    assert all(r["overlap_mismatch"] == 0 and r["invalid"] == 0 and r["errors"] == 0 for r in rows)
    assert all(r["serial_us"] > 0 and r["overlap_us"] > 0 for r in rows)


def test_gil_bench_tiny(tmp_path, capsys):
    """``python -m bench gil``, tiny: one row per kind of call, rates measured."""
    from support import assert_table, read_rows

    from bench.__main__ import main

    out = tmp_path / "gil.jsonl"
    assert main(["gil", "--seconds", "0.05", "--rows", "4", "--out", str(out)]) == 0
    assert_table(capsys.readouterr().out, ["call", "work_per_s", "py_kept", "work_kept"])
    rows = read_rows(out, "gil", ["call", "work_per_s", "py_kept", "work_kept", "vocab"])
    assert len(rows) == 4 and all(r["work_per_s"] > 0 and r["py_kept"] > 0 for r in rows)
