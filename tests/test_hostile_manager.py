"""The manager's promise under hostile conditions: an output the mask lets through is valid for its
request, and a bad request hurts itself alone.

- rows left in the buffer by one request never stand in for another's (all-allowed rows, on a
  vocabulary with and without padding ids), checked against rows recomputed from scratch;
- malformed engine input, or an exception from anywhere inside a fill, moves no matcher;
- a constraint that accepts nothing (or walks into a dead end) errors its request: no empty row;
- a second thread calling into a manager that another thread is inside raises at once.
"""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.structured_output import Compiler, Constraint, RequestStatus, StructuredOutputManager
from thinkgate.structured_output.compilation.schema_support import new_matcher

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
          "required": ["a"]}
CONSTRAINTS = {
    "any": Constraint.structural_tag({"type": "any_tokens"}),  # every row allows every real token
    "json": Constraint.json_schema(SCHEMA),
    "regex": Constraint.regex(r"[a-z]{1,3}( [0-9]{1,2})?"),
}


def wait_ready(mgr, *rids, timeout=60.0):
    t0 = time.monotonic()
    while not all(mgr.is_compiled(r) for r in rids):
        assert time.monotonic() - t0 < timeout, "compile did not finish"
        time.sleep(0.002)


def rows_of(batch) -> dict[int, np.ndarray]:
    if batch is None:
        return {}
    idx = batch.logits_indices.tolist()
    assert len(set(idx)) == len(idx)
    return {i: batch.bitmask[r].numpy().copy() for r, i in enumerate(idx)}


def row_from_ids(num_words, ids) -> np.ndarray:
    u = np.zeros(num_words * 32, dtype=np.uint8)
    u[list(ids)] = 1
    return np.packbits(u, bitorder="little").view(np.int32)


def allowed(row: np.ndarray) -> np.ndarray:
    return np.flatnonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))


# ------------------------------------------------------------------------------------------------
# 1. a row left in the buffer never stands in for another request's row

class World:
    """A vocabulary, its reasoning parser, a shared compiler and the rows recomputed from scratch."""

    def __init__(self, vocab, parser_name, prompts):
        self.vocab = vocab
        self.parser_name = parser_name
        self.parser = get_reasoning_parser(parser_name)(vocab)
        self.compiler = Compiler(vocab, num_threads=2)
        self.prompts = {k: vocab.encode(p) for k, p in prompts.items()}
        self.num_words = (vocab.logits_width + 31) // 32
        self.all_real = row_from_ids(self.num_words, range(vocab.vocab_size))
        self.stop_row = row_from_ids(self.num_words, vocab.stop_token_ids)
        self.compiled = {k: self.compiler.compile(c) for k, c in CONSTRAINTS.items()}
        self.grammars = {k: cc.grammar for k, cc in self.compiled.items()}
        self.thinking_text = vocab.encode(" so let me think about it")

    def first_row(self, ckey) -> np.ndarray:
        return self.fill(new_matcher(self.compiled[ckey]))

    def fill(self, m) -> np.ndarray:
        out = torch.empty((1, self.num_words), dtype=torch.int32)
        m.fill_next_token_bitmask(out, 0)
        return out[0].numpy().copy()

    def think_row(self, ckey):
        first = self.first_row(ckey)
        banned = [t for t in self.parser.implicit_reasoning_end_token_ids if t not in set(allowed(first).tolist())]
        if not banned:
            return None
        return row_from_ids(self.num_words, sorted(set(range(self.vocab.vocab_size)) - set(banned)))

    def pending_row(self, ckey, prompt):
        keep = self.parser.new_tracker(prompt, {}).keep_thinking_token_ids()
        assert keep is not None
        row = self.first_row(ckey) | row_from_ids(self.num_words, keep)
        return None if np.array_equal(row, self.all_real) else row

    def content_rows(self, ckey, content, drafts):
        """Row j after the committed content and drafts[:j], as a fresh matcher gives it; a row that
        allows every id of the logits width is not a row."""
        m = new_matcher(self.compiled[ckey])
        for t in content:
            assert m.accept_token(t)
        rows = {}
        stops = self.vocab.stop_token_ids
        for j in range(len(drafts) + 1):
            row = self.fill(m)
            if not np.all(row == -1):
                rows[j] = row
            if j == len(drafts) or not m.accept_token(drafts[j]) or drafts[j] in stops:
                break
        return rows


WORLDS = {
    # padding ids: width 248320 > 248077 ids, so an any_tokens row is a row (it masks the padding)
    "qwen3_6": ("qwen3", {"think": "<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n<think>\n"}),
    # no padding ids (width == 131072 ids): an any_tokens row is all ones and is dropped; mistral's
    # first token decides between thinking and content (pending rows)
    "magistral": ("mistral", {"think": "<s>[INST]Who?[/INST][THINK]", "pending": "<s>[INST]Who?[/INST]"}),
}


@pytest.fixture(scope="module", params=sorted(WORLDS))
def world(request):
    from thinkgate.reasoning import load_vocabulary
    parser_name, prompts = WORLDS[request.param]
    w = World(load_vocabulary(request.param), parser_name, prompts)
    if request.param == "magistral":
        assert w.vocab.logits_width == w.vocab.vocab_size
    else:
        assert w.vocab.logits_width > w.vocab.vocab_size
    yield w
    w.compiler.close()


KINDS = ("think", "pending", "content")


@settings(deadline=None, max_examples=20, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_all_allowed_row_never_leaves_a_stale_row_for_another_request(world, data):
    """Random schedules of thinking, pending, constrained (any_tokens rows that allow everything among
    them), terminated and errored requests, with drafts, over several steps: every returned row equals
    the row recomputed from scratch, and every expected row is returned."""
    v = world.vocab
    k = 2
    threads, min_rows = data.draw(st.sampled_from([(1, 32), (2, 1)]), label="fill")
    mgr = StructuredOutputManager(v, world.parser, compiler=world.compiler, max_num_seqs=8, num_speculative_tokens=k,
                                  num_fill_threads=threads, batch_fill_min_rows=min_rows,
                                  num_buffers=data.draw(st.sampled_from([1, 2]), label="buffers"))
    kinds = [k_ for k_ in KINDS if k_ in world.prompts or k_ == "content"]
    reqs = {}
    for i in range(data.draw(st.integers(2, 6), label="requests")):
        kind = data.draw(st.sampled_from(kinds))
        ckey = data.draw(st.sampled_from(["any", "any", "json", "regex"]))
        rid = f"{kind}-{ckey}-{i}"
        if kind == "content":
            mgr.add_request(rid, CONSTRAINTS[ckey], include_reasoning=False)
        else:
            mgr.add_request(rid, CONSTRAINTS[ckey], world.prompts[kind])
        reqs[rid] = {"kind": kind, "ckey": ckey, "content": [], "state": "live"}
    wait_ready(mgr, *reqs)
    stops = sorted(v.stop_token_ids)
    for step in range(data.draw(st.integers(3, 8), label="steps")):
        order = data.draw(st.permutations(sorted(reqs)))
        chosen = order[:data.draw(st.integers(1, len(order)))]
        schedule, expected, base = [], {}, 0
        for rid in chosen:
            r = reqs[rid]
            nd = 0 if r["kind"] == "pending" else data.draw(st.integers(0, k))
            if r["kind"] == "think":
                drafts = world.thinking_text[:nd]
                row = world.think_row(r["ckey"])
                exp = {} if row is None else {j: row for j in range(nd + 1)}
            elif r["kind"] == "pending":
                drafts = []
                row = world.pending_row(r["ckey"], world.prompts["pending"])
                exp = {} if row is None else {0: row}
            elif r["state"] == "terminated":
                drafts = [data.draw(st.sampled_from(stops)) for _ in range(nd)]
                exp = {j: world.stop_row for j in range(nd + 1)}
            elif r["state"] == "error":
                drafts = [data.draw(st.integers(0, v.vocab_size - 1)) for _ in range(nd)]
                exp = {}
            else:
                drafts = []
                m = new_matcher(world.compiled[r["ckey"]])
                for t in r["content"]:
                    m.accept_token(t)
                for _ in range(nd):  # the true continuation mostly, a random id sometimes
                    ok_ids = allowed(world.fill(m))
                    t = int(data.draw(st.sampled_from(ok_ids.tolist()[:64]))) if data.draw(st.booleans()) \
                        else data.draw(st.integers(0, v.vocab_size - 1))
                    drafts.append(t)
                    if not m.accept_token(t) or t in v.stop_token_ids:
                        break
                exp = world.content_rows(r["ckey"], r["content"], drafts)
            schedule.append((rid, drafts))
            expected.update({base + j: row for j, row in exp.items()})
            base += 1 + len(drafts)
        got = rows_of(mgr.grammar_bitmask(schedule))
        assert set(got) == set(expected), (step, schedule)
        for i, row in expected.items():
            assert np.array_equal(got[i], row), (step, i, schedule)
        # commit one token for the constrained requests: an allowed one (a stop token when it may end),
        # or, sometimes, one the row bans
        for rid, _ in schedule:
            r = reqs[rid]
            if r["kind"] != "content" or r["state"] != "live":
                continue
            row0 = world.content_rows(r["ckey"], r["content"], [])
            ok_ids = allowed(row0[0]) if 0 in row0 else np.arange(v.logits_width)
            ok_ids = ok_ids[ok_ids < v.vocab_size]
            how = data.draw(st.sampled_from(["ok", "ok", "stop", "bad"]))
            ok_stops = [t for t in stops if t in set(ok_ids.tolist())]
            if how == "bad" and len(ok_ids) < v.vocab_size:
                t = int(np.setdiff1d(np.arange(v.vocab_size), ok_ids)[0])
                assert mgr.accept_tokens(rid, [t]).status == "error"
                r["state"] = "error"
            elif how == "stop" and ok_stops:
                assert mgr.accept_tokens(rid, [ok_stops[0]]).status == "terminated"
                r["state"] = "terminated"
            else:
                t = int(data.draw(st.sampled_from(ok_ids.tolist()[:64])))
                res = mgr.accept_tokens(rid, [t])
                r["content"].append(t)
                if res.status == "terminated":
                    r["state"] = "terminated"
                else:
                    assert res.status == "ok"
    mgr.close()


def test_terminated_request_after_an_all_allowed_row_gets_its_stop_row(deepseek_vocab):
    """The issue's case on DeepSeek V4 (no padding ids): an any_tokens row (all ones, dropped) written
    where a stop-only row, then a thinking row banning ｜DSML｜, sat the step before."""
    v = deepseek_vocab
    comp = Compiler(v)
    try:
        mgr = StructuredOutputManager(v, "deepseek_v4", compiler=comp, max_num_seqs=4, num_fill_threads=1)
        prompt = v.encode("<｜begin▁of▁sentence｜><｜User｜>Who?<｜Assistant｜>")
        mgr.add_request("any", CONSTRAINTS["any"], prompt)
        mgr.add_request("done", Constraint.regex("ok"), prompt)
        mgr.add_request("think", Constraint.json_schema(SCHEMA), prompt, chat_template_kwargs={"thinking": True})
        wait_ready(mgr, "any", "done", "think")
        assert mgr.accept_tokens("done", v.encode("ok") + sorted(v.stop_token_ids)).status == "terminated"
        num_words = (v.logits_width + 31) // 32
        stop_row = row_from_ids(num_words, v.stop_token_ids)
        dsml = v.token_id("｜DSML｜")
        for other in ("done", "think"):
            first = rows_of(mgr.grammar_bitmask([other]))[0]
            assert mgr.grammar_bitmask(["any"]) is None  # all ones: no row, but written in the buffer
            again = rows_of(mgr.grammar_bitmask([other]))[0]
            assert np.array_equal(again, first)
        assert np.array_equal(rows_of(mgr.grammar_bitmask(["done"]))[0], stop_row)
        think = rows_of(mgr.grammar_bitmask(["think"]))[0]
        assert not (int(think[dsml >> 5]) >> (dsml & 31)) & 1
    finally:
        comp.close()


# ------------------------------------------------------------------------------------------------
# 2. malformed input, or an exception inside a fill, moves no matcher

class Injected(Exception):
    pass


@pytest.mark.parametrize("threads,min_rows", [(1, 32), (2, 1)])
def test_bad_engine_input_or_a_failure_inside_a_fill_moves_no_matcher(qwen_vocab, threads, min_rows):
    v = qwen_vocab
    comp = Compiler(v, num_threads=2)
    try:
        mgr = StructuredOutputManager(v, "qwen3", compiler=comp, max_num_seqs=8, num_speculative_tokens=3,
                                      num_fill_threads=threads, batch_fill_min_rows=min_rows)
        body = v.encode(json.dumps({"a": 12, "b": "xy"}))
        think = v.encode("<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n<think>\n")
        rids = ["j0", "j1", "j2", "t"]
        for rid in rids[:3]:
            mgr.add_request(rid, Constraint.json_schema(SCHEMA), include_reasoning=False)
        mgr.add_request("t", Constraint.json_schema(SCHEMA), think)
        wait_ready(mgr, *rids)
        for rid in rids[:3]:
            assert mgr.accept_tokens(rid, body[:2]).status == "ok"
        end = v.token_id("</think>")
        sched = [("j0", body[2:5]), ("j1", body[2:4]), "j2", ("t", v.encode(" ok") + [end] + body[:1])]
        ref = rows_of(mgr.grammar_bitmask(sched))
        assert len(ref) == 4 + 3 + 1 + 4  # "t": two thinking rows, then two grammar rows

        def same_rows():
            got = rows_of(mgr.grammar_bitmask(sched))
            return set(got) == set(ref) and all(np.array_equal(got[i], ref[i]) for i in ref)

        # malformed input: rejected whole, naming the request and the value, before anything moves
        for bad, what in ((("j1", [body[2], 3.0]), "3.0"), (("j1", [True]), "True"), (("j1", ["7"]), "'7'"),
                          (("j1", np.array([1.5])), "1.5"), (("j1", "12"), "'12'")):
            with pytest.raises(ValueError, match=what) as ei:
                mgr.grammar_bitmask(sched[:1] + [bad] + sched[2:])
            assert "'j1'" in str(ei.value)
            assert same_rows()
        with pytest.raises(ValueError):
            mgr.grammar_bitmask("j0")  # a string is not a schedule of one-character ids
        for bad in ([body[2], 2.5], [True], (body[2], "x"), [np.float32(3)]):
            with pytest.raises(ValueError, match="'j0'"):
                mgr.accept_tokens("j0", bad)
            assert same_rows()
        assert mgr.grammar_bitmask([("j0", np.array(body[2:4], dtype=np.int64))]) is not None  # numpy ints: fine

        # an exception at every call into xgrammar inside a fill: every matcher back at its committed
        # state, and the next step gives the same rows
        calls = {"n": 0, "fail_at": -1}

        def hook():
            calls["n"] += 1
            if calls["n"] - 1 == calls["fail_at"]:
                raise Injected(calls["fail_at"])

        def wrap(f):
            def g(*a, **kw):
                hook()
                return f(*a, **kw)
            return g

        for rid in rids:
            m = mgr._requests[rid].matcher
            m.accept_token = wrap(m.accept_token)
            m.fill_next_token_bitmask = wrap(m.fill_next_token_bitmask)
        bm = mgr._filler._batch_matcher
        bm.batch_fill_next_token_bitmask = wrap(bm.batch_fill_next_token_bitmask)
        assert same_rows()
        total = calls["n"]
        assert total >= 3
        for p in range(total):
            calls.update(n=0, fail_at=p)
            with pytest.raises(Injected):
                mgr.grammar_bitmask(sched)
            calls.update(fail_at=-1)
            assert same_rows(), p
        # and the requests go on: the valid output is accepted
        for rid in rids[:3]:
            assert mgr.accept_tokens(rid, body[2:] + [v.token_id("<|im_end|>")]).status == "terminated"
        assert mgr.accept_tokens("t", v.encode(" ok") + [end] + body).status == "ok"
    finally:
        comp.close()


# ------------------------------------------------------------------------------------------------
# 3. a constraint that accepts nothing errors its request; no empty row reaches the engine

@pytest.mark.parametrize("threads,min_rows", [(1, 32), (2, 1)])
def test_constraint_that_accepts_nothing_errors_its_request_and_never_returns_an_empty_row(
        qwen_vocab, threads, min_rows):
    v = qwen_vocab
    comp = Compiler(v, num_threads=2)
    try:
        mgr = StructuredOutputManager(v, "qwen3", compiler=comp, max_num_seqs=8, num_speculative_tokens=2,
                                      num_fill_threads=threads, batch_fill_min_rows=min_rows)
        never = {"rec": Constraint.grammar("root ::= root"), "cls": Constraint.regex(r"[^\s\S]")}
        for rid, c in never.items():
            mgr.add_request(rid, c, include_reasoning=False)
        # grammars that walk into a dead end after their first token
        dead_end = Constraint.regex(r"a[^\s\S]")
        tag = Constraint.structural_tag({"type": "structural_tag", "format": {"type": "sequence", "elements": [
            {"type": "const_string", "value": "x"}, {"type": "regex", "pattern": r"[^\s\S]"}]}})
        for rid in ("d0", "d1"):
            mgr.add_request(rid, dead_end, include_reasoning=False)
        mgr.add_request("tag", tag, include_reasoning=False)
        mgr.add_request("ok", Constraint.json_schema(SCHEMA), include_reasoning=False)
        wait_ready(mgr, "rec", "cls", "d0", "d1", "tag", "ok")
        for rid in never:
            assert mgr.status(rid) is RequestStatus.ERROR
            assert "accepts no output" in mgr.error(rid)
        a, x = v.encode("a"), v.encode("x")
        assert mgr.accept_tokens("d0", a).status == "ok"
        assert mgr.accept_tokens("tag", x).status == "ok"
        batch = mgr.grammar_bitmask(["rec", "cls", "d0", ("d1", a), "tag", ("ok", v.encode('{"'))])
        rows = rows_of(batch)
        assert all(row.any() for row in rows.values())  # no empty row reaches the logits
        # d0 (row 2) and tag (row 5): dead now; d1: its row 0 allows "a", its row 1 (after "a") is dead
        assert set(rows) == {3, 6, 7}
        for rid in ("d0", "d1", "tag"):
            assert mgr.status(rid) is RequestStatus.ERROR and "accepts no output" in mgr.error(rid)
            assert mgr.accept_tokens(rid, a).status == "error"
        assert mgr.status("ok") is RequestStatus.CONSTRAINED
        body = v.encode(json.dumps({"a": 1}))
        assert mgr.accept_tokens("ok", body + [v.token_id("<|im_end|>")]).status == "terminated"
    finally:
        comp.close()


# ------------------------------------------------------------------------------------------------
# 4. two threads driving one manager

def test_second_thread_calling_while_another_is_inside_raises_naming_both(qwen_vocab):
    v = qwen_vocab
    comp = Compiler(v, num_threads=2)
    try:
        mgr = StructuredOutputManager(v, None, compiler=comp, max_num_seqs=4, num_fill_threads=1)
        mgr.add_request("r", Constraint.json_schema(SCHEMA))
        mgr.add_request("s", Constraint.json_schema(SCHEMA))
        wait_ready(mgr, "r", "s")
        inside, release = threading.Event(), threading.Event()
        m = mgr._requests["r"].matcher
        fill = m.fill_next_token_bitmask

        def slow_fill(*a):
            inside.set()
            assert release.wait(30)
            return fill(*a)

        m.fill_next_token_bitmask = slow_fill
        out = {}

        def scheduler():
            try:
                out["batch"] = mgr.grammar_bitmask(["r", "s"])
            except BaseException as e:  # noqa: BLE001
                out["error"] = e

        t = threading.Thread(target=scheduler, name="scheduler-A")
        t.start()
        assert inside.wait(30)
        errors = []
        for call in (lambda: mgr.accept_tokens("s", v.encode("{")), lambda: mgr.grammar_bitmask(["s"]),
                     lambda: mgr.add_request("x", None), lambda: mgr.remove_request("s"),
                     lambda: mgr.status("s"), lambda: mgr.is_ready(request_id="s"),
                     lambda: mgr.accept_tokens(request_id="s", token_ids=v.encode("{"))):
            with pytest.raises(RuntimeError) as ei:
                call()
            errors.append(str(ei.value))
        release.set()
        t.join(30)
        assert "error" not in out and len(out["batch"]) == 2
        for e in errors:
            assert "scheduler-A" in e and threading.current_thread().name in e
        # nothing moved, and once the other thread is out, this one may drive the manager
        assert "x" not in mgr and "s" in mgr
        m.fill_next_token_bitmask = fill
        assert len(mgr.grammar_bitmask(["r", "s"])) == 2
        assert mgr.accept_tokens(request_id="s", token_ids=v.encode("{")).status == "ok"  # keywords pass
        assert mgr.is_ready(request_id="s") and mgr.status(request_id="s") == "constrained"
    finally:
        comp.close()
