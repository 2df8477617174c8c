"""The C lexer of the JSON whitespace bound (``structured_output/compilation/jsonws/lexer.c``) against its pure-Python
reference (``jsonws/lexer_ref.py``): the same states, answers and rows on random token streams of the real
vocabularies (valid JSON walks with long whitespace runs, random foreign tokens, drafts and rollback),
the same errors for misuse, and the manager giving the same rows with either."""

from __future__ import annotations

import json
import os
import random
import time

import numpy as np
import pytest
import torch
import xgrammar as xgr

from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager
from thinkgate.structured_output.compilation.jsonws import lexer as jsonws
from thinkgate.structured_output.compilation.jsonws import lexer_ref as jsonws_ref
from thinkgate.structured_output.compilation.jsonws.bound import WhitespaceLexicon

_native = pytest.importorskip("thinkgate.structured_output.compilation.jsonws._lexer", reason="the C extension is not built")

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
    "n": {"type": "integer"}, "inner": {"type": "object", "properties": {"x": {"type": "number"}}}}}


def _fresh_seed() -> int:
    return int.from_bytes(os.urandom(4), "little")


def _compiled(compiler: Compiler, max_whitespace: int):
    c = compiler.compile(Constraint.json_schema(SCHEMA, max_whitespace=max_whitespace))
    assert c.whitespace is not None
    return c


def _pair(compiled):
    """Two lexers over two fresh matchers of the same grammar: the C one and the reference."""
    bound = compiled.whitespace
    out = []
    for impl in ("c", "ref"):
        h = xgr.GrammarMatcher(compiled.grammar)._handle
        tables = bound.lexer_tables if impl == "c" else jsonws_ref.tables(bound)
        lx = jsonws.new_lexer(tables, h.accept_token, h.rollback, h.fill_next_token_bitmask)
        out.append((lx, h))
    assert isinstance(out[0][0], _native.Lexer) and isinstance(out[1][0], jsonws_ref.Lexer)
    return out


def _allowed(row: np.ndarray, width: int) -> np.ndarray:
    bits = np.unpackbits(row.view(np.uint8), bitorder="little")[:width]
    return np.flatnonzero(bits)


@pytest.fixture(scope="module", params=["qwen", "deepseek", "tekken"])
def setup(request, qwen_vocab, deepseek_vocab, tekken_vocab):
    vocab = {"qwen": qwen_vocab, "deepseek": deepseek_vocab, "tekken": tekken_vocab}[request.param]
    comp = Compiler(vocab, num_threads=1)
    yield vocab, comp
    comp.close()


@pytest.mark.parametrize("max_whitespace", [1, 4, 16])
def test_c_lexer_equals_reference_on_random_streams_with_drafts_and_rollback(setup, max_whitespace):
    vocab, comp = setup
    _random_streams(vocab, comp, max_whitespace, rounds=3)


def test_c_lexer_with_more_than_255_states_equals_reference(deepseek_vocab):
    """A bound past 252 stores the C step table as uint16 (uint8 below)."""
    comp = Compiler(deepseek_vocab, num_threads=1)
    try:
        _random_streams(deepseek_vocab, comp, 300, rounds=1)
    finally:
        comp.close()


def _random_streams(vocab, comp, max_whitespace: int, rounds: int) -> None:
    compiled = _compiled(comp, max_whitespace)
    width = vocab.logits_width
    words = (width + 31) // 32
    ws_ids = [t for t in range(vocab.vocab_size) if vocab.token_bytes[t] and not vocab.token_bytes[t].strip(b" \t\r\n")]
    assert ws_ids
    for _ in range(rounds):
        seed = _fresh_seed()
        rng = random.Random(seed)
        (c, hc), (r, hr) = _pair(compiled)
        buf = torch.zeros((2, words), dtype=torch.int32)
        npb = buf.numpy()
        for step in range(160):
            where = f"seed {seed}, step {step}"
            assert (c.state, c.depth, c.clears) == (r.state, r.depth, r.clears), where
            # the row: C fill + clear vs reference fill + clear, on two rows of one buffer
            npb[:] = 0
            need_c = c.fill(buf, 0, npb)
            need_r = r.fill(buf, 1, None if step % 2 else npb)
            assert need_c == need_r and (npb[0] == npb[1]).all(), where
            allowed = _allowed(npb[0], width)
            op = rng.random()
            if op < 0.1 and c.depth:  # roll back a few tokens (a rejected draft walk)
                k = rng.randint(1, c.depth)
                c.rollback(k)
                r.rollback(k)
                continue
            if op < 0.2 and allowed.size:  # several tokens in one call (a commit of drafts), a stop among them
                stops = frozenset(vocab.stop_token_ids)
                toks = [int(rng.choice(allowed))] + [rng.choice(ws_ids + list(stops)) for _ in range(rng.randint(0, 3))]
                d0 = c.depth
                k = c.accept_many(toks, stops)
                assert k == r.accept_many(toks, stops) and c.depth == r.depth == d0 + k, where
                assert k >= 1, where  # the first token was allowed by the row
                assert all(t not in stops for t in toks[:k - 1]), where  # nothing offered after a stop
                if hc.is_terminated():
                    assert hr.is_terminated() and toks[k - 1] in stops, where
                    c.rollback(1)
                    r.rollback(1)
                continue
            if op < 0.4:
                t = rng.choice(ws_ids)  # whitespace runs: the bound's edge
            elif op < 0.5:
                t = rng.randrange(width)  # anything, mostly rejected
            elif allowed.size:
                t = int(rng.choice(allowed))
            else:
                break
            assert c.breaks(t) == r.breaks(t), where
            ok_c, ok_r = c.accept(t), r.accept(t)
            assert ok_c == ok_r, where
            if ok_c:
                assert t in set(allowed.tolist()), where  # the row allowed what was accepted
                if hc.is_terminated():  # a stop token ends the grammar: step back over it
                    assert hr.is_terminated(), where
                    c.rollback(1)
                    r.rollback(1)
        # a whole walk back to the start
        if c.depth:
            n = c.depth
            c.rollback(n)
            r.rollback(n)
        assert (c.state, c.depth) == (r.state, r.depth) == (0, 0)


def test_clear_rows_equals_reference_clears(qwen_vocab):
    comp = Compiler(qwen_vocab, num_threads=1)
    try:
        compiled = _compiled(comp, 8)
        words = (qwen_vocab.logits_width + 31) // 32
        seed = _fresh_seed()
        rng = random.Random(seed)
        text = json.dumps({"name": "a b", "tags": ["x", "y"], "n": 3, "inner": {"x": 1.5}}, indent=2)
        ids = qwen_vocab.encode(text)
        pairs = [_pair(compiled) for _ in range(6)]
        for (c, _), (r, _) in pairs:  # each at its own place in the text
            for t in ids[:rng.randrange(len(ids))]:
                assert c.accept(t) and r.accept(t)
        base = np.random.default_rng(seed).integers(-2**31, 2**31, size=(9, words), dtype=np.int64).astype(np.int32)
        got, want = base.copy(), base.copy()
        lc = [c for (c, _), _ in pairs] + [None]
        lr = [r for _, (r, _) in pairs] + [None]
        jsonws.clear_rows(got, lc, 2)
        jsonws.clear_rows(want, lr, 2)
        assert (got == want).all(), f"seed {seed}"
        assert (got[:2] == base[:2]).all() and (got[8] == base[8]).all()
        assert any((got[2 + i] != base[2 + i]).any() for i in range(6) if lc[i].clears) or \
            not any(lx.clears for lx in lc[:6])
    finally:
        comp.close()


def test_misuse_raises_the_same_in_both_and_moves_nothing(qwen_vocab):
    comp = Compiler(qwen_vocab, num_threads=1)
    try:
        compiled = _compiled(comp, 2)
        words = (qwen_vocab.logits_width + 31) // 32
        read_only = np.zeros((2, words), dtype=np.int32)
        read_only.flags.writeable = False
        for lx, _ in _pair(compiled):
            assert lx.accept(qwen_vocab.encode("{")[0])
            with pytest.raises(ValueError, match="cannot roll back 2 tokens: 1 accepted"):
                lx.rollback(2)
            assert lx.depth == 1
            with pytest.raises(TypeError):
                lx.accept("{")
            assert lx.depth == 1
            assert lx.accept(qwen_vocab.logits_width + 5) is False  # no such token: the grammar refuses it
            assert lx.accept(-1) is False
            for bad in (np.zeros((2, words), dtype=np.int64), np.zeros((2, words + 1), dtype=np.int32),
                        np.zeros(words, dtype=np.int32), np.zeros((2, words), dtype=np.float32),
                        np.zeros((2, 2 * words), dtype=np.int32)[:, ::2], np.zeros((2, words), dtype=np.uint32),
                        read_only):
                with pytest.raises(ValueError, match="writable C-contiguous int32"):
                    lx.clear(bad, 0)
            for row in (2, -1):
                with pytest.raises(IndexError):
                    lx.clear(np.zeros((2, words), dtype=np.int32), row)
            # fill's signature is BoundedMatcher.fill_next_token_bitmask's, keywords included
            buf = torch.zeros((2, words), dtype=torch.int32)
            assert lx.fill(buf) is True  # after "{": the bound forbids long whitespace runs
            assert lx.fill(bitmask=buf, index=1, np_bitmask=buf.numpy(), debug_print=False) is True
            assert (buf[0] == buf[1]).all()
            for bad_call in (lambda: lx.fill(buf, 0, None, False), lambda: lx.fill(buf, foo=1),
                             lambda: lx.fill(buf, 0, index=1), lambda: lx.fill()):
                with pytest.raises(TypeError):
                    bad_call()
            lx.rollback(1)
            assert (lx.state, lx.depth) == (0, 0)
        with pytest.raises(ValueError, match="step entry"):
            _native.Bound(bytes([0, 9]), 2, 1, 1, np.zeros(3, dtype=np.int64), np.zeros(0, np.int32),
                          np.zeros(0, np.int32))
        with pytest.raises(ValueError, match="clear word index"):
            _native.Bound(bytes([0, 1]), 2, 1, 1, np.array([0, 1, 1]), np.array([1], np.int32), np.array([0], np.int32))
        with pytest.raises(ValueError, match="offsets"):
            _native.Bound(bytes([0, 1]), 2, 1, 1, np.array([0, 2, 1]), np.array([0], np.int32), np.array([0], np.int32))
        with pytest.raises(TypeError, match="not a Lexer"):
            _native.clear_rows(np.zeros((2, words), dtype=np.int32), [object()], 0)
    finally:
        comp.close()


def _rows_of(vocab, drafts_per_step: int, steps: int, seed: int) -> list[list[tuple[int, bytes]]]:
    """The manager's rows along one indented document with a few drafts per step."""
    comp = Compiler(vocab, num_threads=1)
    try:
        mgr = StructuredOutputManager(vocab, None, compiler=comp, max_num_seqs=2, num_speculative_tokens=3)
        con = Constraint.json_schema(SCHEMA, max_whitespace=6)
        rng = random.Random(seed)
        doc = {"name": "x  y", "tags": ["a", "b c"], "n": 12, "inner": {"x": 2.5}}
        ids = vocab.encode(json.dumps(doc, indent=rng.choice([1, 2])))
        mgr.add_request("a", con)
        mgr.add_request("b", con)
        deadline = time.monotonic() + 60
        while not (mgr.is_compiled("a") and mgr.is_compiled("b")):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        out = []
        pos = 0
        while pos < len(ids):
            k = min(drafts_per_step, len(ids) - pos - 1)
            batch = mgr.grammar_bitmask([("a", ids[pos:pos + k]), "b"])
            assert batch is not None
            out.append(sorted((int(i), r.tobytes()) for i, r in zip(batch.logits_indices.numpy(),
                                                                    batch.bitmask.numpy())))
            assert mgr.accept_tokens("a", ids[pos:pos + k + 1]).ok
            assert mgr.accept_tokens("b", ids[pos:pos + k + 1]).ok
            pos += k + 1
        return out
    finally:
        comp.close()


def test_manager_rows_are_the_same_with_the_reference_lexer(deepseek_vocab, monkeypatch):
    seed = _fresh_seed()
    with_c = _rows_of(deepseek_vocab, 3, 40, seed)
    monkeypatch.setattr(jsonws, "_native", None)
    monkeypatch.setattr(jsonws, "_warned", True)
    with_ref = _rows_of(deepseek_vocab, 3, 40, seed)
    assert with_c == with_ref, f"seed {seed}"


def test_missing_extension_warns_once(qwen_vocab, monkeypatch):
    monkeypatch.setattr(jsonws, "_native", None)
    monkeypatch.setattr(jsonws, "_warned", False)
    lexicon = WhitespaceLexicon.of(qwen_vocab)
    with pytest.warns(RuntimeWarning, match="jsonws._lexer is not built"):
        from thinkgate.structured_output.compilation.jsonws.bound import WhitespaceBound

        WhitespaceBound(lexicon, 5)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = WhitespaceBound(lexicon, 6)
    assert b.lexer_tables is b
