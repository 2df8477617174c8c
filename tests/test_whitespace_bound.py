"""The JSON whitespace bound enforced beside the grammar (structured_output/compilation/jsonws/bound.py) against the
bound written into the grammar (xgrammar's ``max_whitespace_cnt``, what thinkgate compiled before):
the same rows at every prefix, the same accepted outputs, and a rejection past the bound; through the
manager with drafts and rollback too."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import xgrammar as xgr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkgate.testing.vocabularies import byte_level_vocabulary
from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager
from thinkgate.structured_output.compilation.jsonws.bound import BoundedMatcher, WhitespaceLexicon
from thinkgate.structured_output.compilation.xgrammar_adapter import build_tokenizer_info

CORPUS = json.loads((Path(__file__).parent / "data" / "jsonschemas" / "corpus.json").read_text(encoding="utf-8"))

# multi-byte tokens where gaps, strings and escapes meet
EXTRA = ["  ", "    ", "\n  ", "\n    ", " \n", "\t\t", "\r\n", ", ", ",\n  ", ": ", '": "', '",\n    "', '" ',
         '\\"', '\\\\', '\\" ', '"}', '"]', "} ", "]\n", "{\n  ", "[\n", "        ", " " * 12, "\n" + " " * 9,
         "true ", "1 ", '"a b"', ' "', '"  ', "\\n", '\\"  ', "null,\n"]

B = 3  # small, so that random layouts cross it often


@pytest.fixture(scope="module")
def vocab():
    return byte_level_vocabulary(extra_tokens=EXTRA)


@pytest.fixture(scope="module")
def tinfo(vocab):
    return build_tokenizer_info(vocab)


def _ref_state(tb: bytes, state: int, b: int) -> int:
    """The reference lexer, byte by byte (states as in WhitespaceBound; b + 3 = reject)."""
    s = 0 if state <= b else (1 if state == b + 1 else 2)
    k = state if s == 0 else 0
    for c in tb:
        if s == 0:
            if c in b" \t\n\r":
                k += 1
                if k > b:
                    return b + 3
                continue
            k = 0
            if c == 0x22:
                s = 1
        elif s == 1:
            if c == 0x22:
                s = 0
            elif c == 0x5C:
                s = 2
        else:
            s = 1
    return k if s == 0 else (b + 1 if s == 1 else b + 2)


@pytest.mark.parametrize("bound", [1, 3, 16])
def test_lexer_table_equals_the_byte_by_byte_lexer(vocab, bound):
    wb = WhitespaceLexicon.of(vocab).bound(bound)
    specials = vocab.special_token_ids
    for state in range(wb.num_states):
        for t, tb in enumerate(vocab.token_bytes):
            if t in specials:  # outside strings a control token ends the gap; inside one it changes nothing
                want = 0 if state <= bound else state
            else:
                want = state if not tb else _ref_state(tb, state, bound)
            assert wb.step[state * wb.width + t] == want, (state, tb)
    # the tokens each state forbids are exactly those the table rejects
    for state, clear in enumerate(wb.clears):
        row = np.full((1, (wb.width + 31) // 32), -1, dtype=np.int32)
        if clear is not None:
            clear.apply(row, 0)
        allowed = np.unpackbits(row.view(np.uint8), bitorder="little")[: wb.width].astype(bool)
        want = np.array([wb.step[state * wb.width + t] != wb.reject for t in range(wb.width)])
        assert (allowed == want).all(), state


def _matchers(tinfo, spec: str, bound: int, vocab):
    comp = xgr.GrammarCompiler(tinfo, cache_enabled=False)
    old = comp.compile_grammar(xgr.Grammar.from_json_schema(spec, any_whitespace=True, max_whitespace_cnt=bound))
    new = comp.compile_grammar(xgr.Grammar.from_json_schema(spec, any_whitespace=True))
    return xgr.GrammarMatcher(old), BoundedMatcher(new, WhitespaceLexicon.of(vocab).bound(bound))


def _rows_equal_along(old, new, ids, width) -> tuple[bool, int]:
    """Feed ``ids`` to both: the rows must be equal at every prefix and both must accept or reject each
    token alike. Returns (all accepted, tokens accepted)."""
    words = (width + 31) // 32
    a = torch.zeros((1, words), dtype=torch.int32)
    b = torch.zeros((1, words), dtype=torch.int32)
    for n, t in enumerate(ids):
        old.fill_next_token_bitmask(a)
        new.fill_next_token_bitmask(b)
        # the ids of the logits width (xgrammar leaves the bits past it as they fall)
        bits_a = np.unpackbits(a.numpy().view(np.uint8), bitorder="little")[:width]
        bits_b = np.unpackbits(b.numpy().view(np.uint8), bitorder="little")[:width]
        assert (bits_a == bits_b).all(), f"rows differ after {n} tokens at ids {np.flatnonzero(bits_a != bits_b)}"
        ok_old, ok_new = old.accept_token(t), new.accept_token(t)
        assert ok_old == ok_new, f"token {n}: old grammar {ok_old}, bound beside it {ok_new}"
        if not ok_old:
            return False, n
    return True, len(ids)


# random JSON values and random layouts: each gap gets 0..2B whitespace characters
_ws = st.text(alphabet=" \t\n\r", min_size=0, max_size=2 * B)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-1000, 1000),
                     st.text(alphabet=st.sampled_from(list('ab "\\\t\n{}[],:é')), max_size=6))
_values = st.recursive(
    _scalars, lambda kids: st.one_of(st.lists(kids, max_size=3),
                                     st.dictionaries(st.text("abc ", max_size=3), kids, max_size=3)),
    max_leaves=8)


def _layout(value, draw_ws) -> str:
    """``value`` as JSON with ``draw_ws()`` in every gap inside it."""
    if isinstance(value, dict):
        if not value:
            return "{" + draw_ws() + "}"
        parts = [draw_ws() + json.dumps(k) + draw_ws() + ":" + draw_ws() + _layout(v, draw_ws) + draw_ws()
                 for k, v in value.items()]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, list):
        if not value:
            return "[" + draw_ws() + "]"
        return "[" + ",".join(draw_ws() + _layout(v, draw_ws) + draw_ws() for v in value) + "]"
    return json.dumps(value)


def _max_gap(text: str) -> int:
    """The longest whitespace run outside strings of JSON ``text``."""
    best = run = 0
    in_str = esc = False
    for ch in text:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
            continue
        if ch in " \t\n\r":
            run += 1
            best = max(best, run)
            continue
        run = 0
        if ch == '"':
            in_str = True
    return best


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.dictionaries(st.text("abc", max_size=3), _values, max_size=4), data=st.data())
def test_bounded_json_object_same_rows_and_outputs_as_the_bound_in_the_grammar(vocab, tinfo, value, data):
    text = _layout(value, lambda: data.draw(_ws))
    old, new = _matchers(tinfo, '{"type": "object"}', B, vocab)
    stop = min(vocab.stop_token_ids)
    done, _ = _rows_equal_along(old, new, vocab.encode(text) + [stop], vocab.logits_width)
    assert done == (_max_gap(text) <= B), text  # within the bound: accepted; beyond it: rejected
    if done:
        assert new.is_terminated()
        new.rollback(3)  # the lexer state comes back with the grammar's
        old.rollback(3)
        _rows_equal_along(old, new, vocab.encode(text)[-2:] + [stop], vocab.logits_width)


@pytest.mark.parametrize("entry", CORPUS["schemas"][::12], ids=lambda e: e["source"].split("/")[-1])
def test_corpus_schema_same_rows_as_the_bound_in_the_grammar_on_qwen(qwen_vocab, entry):
    """Real schemas on a real vocabulary (its many whitespace tokens), laid out with gaps inside and
    past the default bound."""
    tinfo = _qwen_tinfo(qwen_vocab)
    spec = json.dumps(entry["schema"])
    stop = min(qwen_vocab.stop_token_ids)
    for indent in (2, 7, 17):  # gaps grow with the depth: some layouts fit in 16, some do not
        text = json.dumps(entry["instance"], indent=indent)
        fits = _max_gap(text) <= 16
        old, new = _matchers(tinfo, spec, 16, qwen_vocab)
        done, _ = _rows_equal_along(old, new, qwen_vocab.encode(text) + [stop], qwen_vocab.logits_width)
        assert done == fits


_QWEN_TINFO: list = []


def _qwen_tinfo(v):
    if not _QWEN_TINFO:
        _QWEN_TINFO.append(build_tokenizer_info(v))
    return _QWEN_TINFO[0]


def test_drafts_and_rollback_through_the_manager(vocab):
    """Rows through drafts equal a fresh matcher's at each draft; the step leaves the committed state;
    a draft past the bound ends the walk; accepting it is an error that names the bound."""
    comp = Compiler(vocab, num_threads=1)
    try:
        mgr = StructuredOutputManager(vocab, None, compiler=comp, num_speculative_tokens=4)
        c = Constraint.json_schema({"type": "object"}, max_whitespace=B)
        mgr.add_request("r", c)
        mgr.add_request("ref", c)
        deadline = time.monotonic() + 60
        while not (mgr.is_compiled("r") and mgr.is_compiled("ref")):
            assert time.monotonic() < deadline, "compile did not finish"
            time.sleep(0.01)
        sp = vocab.encode(" ")[0]
        two = vocab.token_id("  ")
        prefix = vocab.encode('{"a"') + [sp]
        assert mgr.accept_tokens("r", prefix).status == "ok"
        # drafts: one more space (2 in the gap), ':' , two spaces (2), then two more (4 > B)
        drafts = [sp] + vocab.encode(":") + [two, two]
        batch = mgr.grammar_bitmask([("r", drafts)])
        assert batch is not None
        rows = {int(i): r.copy() for i, r in zip(batch.logits_indices.numpy(), batch.bitmask.numpy())}
        # rows for the committed state and after drafts 0..2; the 4th draft breaks the bound: no row after it
        assert sorted(rows) == [0, 1, 2, 3]
        # a second request fed the same prefix and drafts one by one gives the same rows
        assert mgr.accept_tokens("ref", list(prefix)).status == "ok"
        for j in range(4):
            ref = mgr.grammar_bitmask(["ref"]).bitmask.numpy()[0]
            assert (rows[j] == ref).all(), j
            if j < 3:
                assert mgr.accept_tokens("ref", [drafts[j]]).status == "ok"
        bit = lambda row, t: bool((int(row[t >> 5]) >> (t & 31)) & 1)  # noqa: E731
        assert not bit(rows[3], two) and bit(rows[3], sp) and bit(rows[2], two)
        # the step left the committed state: the same drafts, accepted for real, behave as the rows said
        assert mgr.accept_tokens("r", drafts[:3]).status == "ok"
        res = mgr.accept_tokens("r", [two])
        assert res.status == "error" and "max_whitespace=3" in res.message
    finally:
        comp.close()
