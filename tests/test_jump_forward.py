"""Jump-forward (``StructuredOutputManager.forced_tokens``): every forced token is the only token the
grammar allows at its position, on real vocabularies, with JSON schemas, regexes and tool formats;
nothing committed moves; nothing is forced while thinking or after the end.

The reference for "the only allowed token" is the manager's own row for that position, filled
through ``grammar_bitmask`` with the forced tokens as drafts (another code path than the jump-forward
scratch row) and read bit by bit in numpy; for an unbounded JSON schema also a plain xgrammar
matcher driven directly.
"""

from __future__ import annotations

import json
import random
import time

import numpy as np
import pytest
import xgrammar as xgr
from support import ANCHOR, EXAMPLES, FAMILIES, TOOLS, vocab

from thinkgate.testing.workload import REGEXES, SCHEMAS
from thinkgate.structured_output import Constraint, RequestStatus, StructuredOutputManager
from thinkgate.structured_output.step.jump_forward import single_token
from thinkgate.structured_output.tools import build_tool_constraint

MAX = 6  # max_tokens per call in these tests (and the drafts that check them)


def allowed_ids(row: np.ndarray) -> list[int]:
    return np.flatnonzero(np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little")).tolist()


def wait_ready(mgr, rid, timeout=120.0):
    t0 = time.monotonic()
    while not mgr.is_compiled(rid):
        assert time.monotonic() - t0 < timeout, "compile did not finish"
        time.sleep(0.002)
    assert mgr.error(rid) is None, mgr.error(rid)


def rows_by_logits(batch) -> dict[int, np.ndarray]:
    if batch is None:
        return {}
    return {i: batch.bitmask[r].numpy().copy() for r, i in enumerate(batch.logits_indices.tolist())}


def check_forced_here(mgr: StructuredOutputManager, rid: str, stops: frozenset[int], max_tokens: int = MAX,
                      plain: xgr.GrammarMatcher | None = None) -> list[int]:
    """``forced_tokens`` at the request's committed state, checked against the manager's rows with
    the forced tokens as drafts (and ``plain``, a raw xgrammar matcher at the same state)."""
    before = rows_by_logits(mgr.grammar_bitmask([rid]))
    forced = mgr.forced_tokens(rid, max_tokens)
    assert len(forced) <= max_tokens
    assert rows_by_logits(mgr.grammar_bitmask([rid])).keys() == before.keys()  # nothing committed moved
    assert all(np.array_equal(rows_by_logits(mgr.grammar_bitmask([rid]))[i], before[i]) for i in before)
    rows = rows_by_logits(mgr.grammar_bitmask([(rid, forced)]))
    for j, t in enumerate(forced):
        assert allowed_ids(rows[j]) == [t], f"forced token {j} ({t}) is not the only allowed one"
        assert t not in stops
    if len(forced) < max_tokens and len(forced) in rows:  # the list ended: a choice, or a stop token
        nxt = allowed_ids(rows[len(forced)])
        assert len(nxt) != 1 or nxt[0] in stops
    if plain is not None:
        mask = xgr.allocate_token_bitmask(1, mgr.logits_width)
        for j, t in enumerate(forced):
            plain.fill_next_token_bitmask(mask, 0)
            assert allowed_ids(mask[0].numpy()) == [t]
            assert plain.accept_token(t)
        if forced:
            plain.rollback(len(forced))
    return forced


def drive(mgr, rid, content: list[int], stops, plain=None, thinking: list[int] = ()) -> int:
    """Feed ``thinking`` (nothing forced there), then ``content`` one token at a time, checking the
    forced tokens at every prefix: they are what the valid output writes next. Returns how many
    positions had a forced token."""
    for t in thinking:
        assert mgr.forced_tokens(rid, MAX) == []
        assert mgr.accept_tokens(rid, [t]).status == "ok"
    n = 0
    for k, t in enumerate(content):
        forced = check_forced_here(mgr, rid, stops, plain=plain)
        assert forced == content[k:k + len(forced)], (k, forced, content[k:k + len(forced)])
        n += bool(forced)
        res = mgr.accept_tokens(rid, [t])
        assert res.status in ("ok", "terminated"), res.message
        if plain is not None:
            assert plain.accept_token(t)
    assert mgr.status(rid) is RequestStatus.TERMINATED
    assert mgr.forced_tokens(rid, MAX) == []
    return n


@pytest.mark.parametrize("vname", ["qwen3_6", "deepseek_v4", "tekken"])
def test_forced_tokens_are_the_only_allowed_ones_json_and_regex(vname):
    v = vocab(vname)
    stops = v.stop_token_ids
    stop = min(stops)
    rng = random.Random(14)
    mgr = StructuredOutputManager(v, None, max_num_seqs=2, num_speculative_tokens=MAX, num_compile_threads=1)
    try:
        found = 0
        for i, (schema, make) in enumerate(SCHEMAS[:3]):
            text = json.dumps(make(rng), ensure_ascii=False)
            for ws in (16, None):  # bounded (the default: a BoundedMatcher) and unbounded
                rid = f"j{i}-{ws}"
                c = Constraint.json_schema(schema, max_whitespace=ws)
                mgr.add_request(rid, c)
                wait_ready(mgr, rid)
                plain = xgr.GrammarMatcher(mgr.compiler.compile(c).grammar) if ws is None else None
                found += drive(mgr, rid, v.encode(text) + [stop], stops, plain=plain)
                mgr.remove_request(rid)
        for i, (pattern, make) in enumerate(REGEXES):
            rid = f"r{i}"
            mgr.add_request(rid, Constraint.regex(pattern))
            wait_ready(mgr, rid)
            found += drive(mgr, rid, v.encode(make(rng)) + [stop], stops)
            mgr.remove_request(rid)
        assert found > 0  # the phone-number regex forces its dashes
    finally:
        mgr.close()


@pytest.mark.parametrize("fmt", ["hermes", "deepseek_v3", "mistral"])
def test_forced_tokens_are_the_only_allowed_ones_tool_calls(fmt):
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    stops = v.stop_token_ids
    tools = [t for t in TOOLS if t["function"]["name"] == ANCHOR]
    mgr = StructuredOutputManager(v, fam.parser, max_num_seqs=2, num_speculative_tokens=MAX, num_compile_threads=1)
    try:
        found = 0
        for choice in ("required", {"type": "function", "function": {"name": ANCHOR}}):
            c = build_tool_constraint(tools, choice, format=fmt, parallel_tool_calls=False, vocabulary=v)
            rid = f"{fmt}-{'named' if isinstance(choice, dict) else choice}"
            mgr.add_request(rid, c, v.encode(fam.prompt), chat_template_kwargs=fam.kwargs or None)
            wait_ready(mgr, rid)
            thinking = v.encode(fam.thinking)
            content = v.encode(fam.block([(ANCHOR, EXAMPLES[ANCHOR][0])])) + [min(stops)]
            found += drive(mgr, rid, content, stops, thinking=thinking)
            mgr.remove_request(rid)
        assert found > 0  # control tokens such as the call's closing tag are forced
    finally:
        mgr.close()


def test_nothing_forced_while_thinking_after_the_end_in_error_or_unconstrained(qwen_vocab):
    v = qwen_vocab
    regex = Constraint.regex(r"\d{3}-\d{3}")
    mgr = StructuredOutputManager(v, "qwen3", max_num_seqs=4, num_compile_threads=1)
    try:
        think = v.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n")
        mgr.add_request("think", regex, think)
        mgr.add_request("plain", regex, include_reasoning=False)
        mgr.add_request("free", None, include_reasoning=False)
        mgr.add_request("bad", Constraint.regex(r"[^\s\S]"), include_reasoning=False)
        for rid in ("think", "plain", "free", "bad"):
            while not mgr.is_compiled(rid):
                time.sleep(0.002)
        assert mgr.status("bad") is RequestStatus.ERROR and mgr.forced_tokens("bad") == []
        assert mgr.forced_tokens("free") == []
        assert mgr.forced_tokens("think") == []  # the grammar would force "-" nowhere yet; thinking: never
        digits = v.encode("123")
        assert mgr.accept_tokens("think", v.encode("hmm 123") + digits).status == "ok"
        assert mgr.forced_tokens("think") == []  # still thinking: the thinking is never constrained
        assert mgr.accept_tokens("plain", digits).status == "ok"
        dash = v.encode("-")
        assert mgr.forced_tokens("plain") == dash
        assert mgr.forced_tokens("plain", 0) == []
        assert mgr.accept_tokens("think", [v.token_id("</think>")] + digits).status == "ok"
        assert mgr.forced_tokens("think") == dash  # past its thinking: the grammar applies
        assert mgr.accept_tokens("plain", dash + v.encode("456") + [v.token_id("<|im_end|>")]).status == "terminated"
        assert mgr.forced_tokens("plain") == []
        for bad in (-1, 1.5, True, "3"):
            with pytest.raises(ValueError, match="max_tokens"):
                mgr.forced_tokens("think", bad)
        with pytest.raises(KeyError):
            mgr.forced_tokens("nope")
    finally:
        mgr.close()


def test_failure_inside_jump_forward_moves_no_matcher(qwen_vocab):
    v = qwen_vocab
    mgr = StructuredOutputManager(v, None, max_num_seqs=2, num_compile_threads=1)
    try:
        # control tokens named by id, then one character: each the only token allowed at its place
        tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
            {"type": "token", "token": "<tool_call>"}, {"type": "token", "token": "</tool_call>"},
            {"type": "token", "token": "<tool_call>"}, {"type": "const_string", "value": "x"}]}}
        mgr.add_request("r", Constraint.structural_tag(tag))
        wait_ready(mgr, "r")
        forced = mgr.forced_tokens("r", 32)
        call, end = v.token_id("<tool_call>"), v.token_id("</tool_call>")
        assert forced == [call, end, call] + v.encode("x")
        assert mgr.forced_tokens("r", 2) == [call, end]
        before = rows_by_logits(mgr.grammar_bitmask(["r"]))
        m = mgr._requests["r"].matcher
        accept = m.accept_token
        calls = {"n": 0}

        def failing(t, *a, **kw):
            calls["n"] += 1
            if calls["n"] == 2:
                raise RuntimeError("injected")
            return accept(t, *a, **kw)

        m.accept_token = failing
        with pytest.raises(RuntimeError, match="injected"):
            mgr.forced_tokens("r", 32)
        del m.accept_token
        after = rows_by_logits(mgr.grammar_bitmask(["r"]))
        assert after.keys() == before.keys() and all(np.array_equal(after[i], before[i]) for i in before)
        assert mgr.forced_tokens("r", 32) == forced
        assert mgr.accept_tokens("r", forced + [v.token_id("<|im_end|>")]).status == "terminated"
    finally:
        mgr.close()


def test_single_token_matches_a_bit_by_bit_reference():
    rng = np.random.default_rng(14)
    for _ in range(2000):
        words = int(rng.integers(1, 40))
        row = np.zeros(words, dtype=np.int32)
        n = int(rng.choice([0, 1, 1, 2, 3]))
        for t in rng.integers(0, words * 32, size=n):
            row.view(np.uint32)[t >> 5] |= np.uint32(1 << (int(t) & 31))
        ids = allowed_ids(row)
        assert single_token(row) == (ids[0] if len(ids) == 1 else None), (ids, row)
    top = np.zeros(3, dtype=np.int32)
    top.view(np.uint32)[2] = np.uint32(1 << 31)  # the sign bit of the last word
    assert single_token(top) == 95


@pytest.mark.slow
def test_loop_bench_jump_forward_tiny(tmp_path, capsys):
    """``python -m bench loop --jump-forward``, tiny: its table, forced tokens committed, 0 invalid."""
    import re

    from support import assert_table, read_rows

    from bench.__main__ import main

    out = tmp_path / "loop.jsonl"
    rc = main(["loop", "--batches", "8", "--drafts", "0,2", "--steps", "12", "--warmup", "1", "--kinds",
               "regex,tool_required", "--think-fraction", "0", "--jump-forward", "8", "--out", str(out), "--plot", ""])
    text = capsys.readouterr().out
    assert rc == 0, text
    cols = ["batch", "drafts", "content_tokens", "jf_tokens", "jf_saved", "jf_calls", "jf_us", "jf_x"]
    assert_table(text, cols)
    assert re.search(r"invalid outputs: 0\b", text), text
    rows = read_rows(out, "loop", cols)
    assert all(r["invalid"] == 0 and r["errors"] == 0 for r in rows)
    assert sum(r["jf_tokens"] for r in rows) > 0  # the regexes' dashes and the calls' closing tags
    assert all(0 <= r["jf_saved"] < 1 for r in rows)
