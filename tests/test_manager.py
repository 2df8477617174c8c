"""StructuredOutputManager on synthetic token streams over the real Qwen3.6 / DeepSeek V4 / Magistral
vocabularies: a scripted "model" thinks with text that would violate the grammar, ends its thinking,
then writes a valid or an invalid output. At every position we check the invariant:

- a thinking position gets no row, or (Qwen's ``<tool_call>`` implicit end, which a JSON grammar cannot
  start with) a row that allows every real token except that one;
- a content position gets a row, and the row allows the scripted token of a valid output;
- the first bad token of an invalid output is disallowed by its row and, forced through
  ``accept_tokens``, puts the request in ERROR with a message naming the token and its position;
- the finished output validates against its schema (``jsonschema``).

Trace notation: a script is a list of (kind, text) pieces, kind "t" (thinking, incl. its end marker),
"c" (content) or "s" (the stop token); ``tokens(script)`` gives the ids and the index where the content
starts.
"""

from __future__ import annotations

import json
import os
import random
import signal
import time

import jsonschema
import numpy as np
import pytest
import torch
import xgrammar as xgr

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.structured_output import (AcceptResult, BitmaskBatch, Compiler, Constraint, RequestStatus,
                               StructuredOutputManager)
from thinkgate.structured_output.compilation.jsonws.bound import BoundedMatcher

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ok": {"type": "boolean"},
    },
    "required": ["name", "age", "tags", "ok"],
}
VALID = {"name": "Ada <b> \"L\"", "age": 36, "tags": ["x", "{y}"], "ok": True}
# thinking that would break the grammar: braces, quotes, control words, a tool marker in text form
THINK = ('Let me think. {"name": 5, "age": "old"}]]] "\\" null true false {{ a tool_call is not made here; '
         'also <|im_start|> and <think> tokens </tool_call>.')

SYS = "<|im_start|>system\nYou answer in JSON.<|im_end|>\n"
Q = "<|im_start|>user\nWho?<|im_end|>\n"
PROMPTS = {
    # Qwen3.6's template opens the thinking in the prompt
    "open": SYS + Q + "<|im_start|>assistant\n<think>\n",
    # enable_thinking=false: the template writes an empty, closed thinking block
    "closed": SYS + Q + "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    # an earlier turn ended its thinking; this turn has no marker: the model thinks (default mode)
    "earlier": SYS + Q + "<|im_start|>assistant\n<think>\nold</think>\n\nA1<|im_end|>\n" + Q
    + "<|im_start|>assistant\n",
}


# ------------------------------------------------------------------------------------------------
# helpers

@pytest.fixture(scope="module")
def qwen_compiler(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=2)
    yield c
    c.close()


@pytest.fixture(scope="module")
def qwen_parser(qwen_vocab):
    return get_reasoning_parser("qwen3")(qwen_vocab)


def make(qwen_vocab, qwen_compiler, qwen_parser, **kw):
    kw.setdefault("max_num_seqs", 16)
    return StructuredOutputManager(qwen_vocab, qwen_parser, compiler=qwen_compiler, **kw)


def wait_ready(mgr, *rids, timeout=30.0):
    t0 = time.monotonic()
    while not all(mgr.is_compiled(r) for r in rids):
        assert time.monotonic() - t0 < timeout, "compile did not finish"
        time.sleep(0.002)


def bits(row) -> set[int]:
    a = np.asarray(row).view(np.uint8)
    return set(np.nonzero(np.unpackbits(a, bitorder="little"))[0].tolist())


def rows_of(batch: BitmaskBatch | None) -> dict[int, np.ndarray]:
    """logits row -> mask row (as numpy)."""
    if batch is None:
        return {}
    idx = batch.logits_indices.tolist()
    assert len(set(idx)) == len(idx), "a logits row appears twice"
    assert batch.bitmask.shape[0] == len(idx) == len(batch.request_ids)
    return {i: batch.bitmask[r].numpy().copy() for r, i in enumerate(idx)}


def allows(row: np.ndarray, t: int) -> bool:
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


def script_tokens(vocab, script):
    """(ids, index of the first content token, index of the first token of each piece)."""
    ids: list[int] = []
    content_start = None
    for kind, text in script:
        if kind in ("c", "s") and content_start is None:
            content_start = len(ids)
        ids += vocab.encode(text)
    return ids, content_start if content_start is not None else len(ids)


_THINK_ROWS: dict = {}


def thinking_row_ok(vocab, row, banned=()):
    """A thinking row allows every real token except ``banned`` (compared word by word)."""
    key = (vocab.name, tuple(sorted(banned)))
    expected = _THINK_ROWS.get(key)
    if expected is None:
        u = np.zeros((vocab.logits_width + 31) // 32 * 32, dtype=np.uint8)
        u[:vocab.vocab_size] = 1
        u[list(banned)] = 0
        expected = _THINK_ROWS[key] = np.packbits(u, bitorder="little").view(np.int32)
    return np.array_equal(row, expected)


def drive(mgr, rid, ids, content_start, *, k=0, chunk=None, rng=None, banned_while_thinking=None,
          vocab=None):
    """Run a scripted stream through the manager: each step schedules ``rid`` with up to ``k`` drafts
    (the true continuation), checks every row, and commits ``1 + len(drafts)`` tokens (or a random
    chunk of 1..``chunk`` tokens when ``chunk`` is set). Returns the last AcceptResult."""
    i = 0
    res = None
    while i < len(ids):
        if chunk:
            n = rng.randint(1, chunk)
            drafts = []
        else:
            drafts = ids[i:i + k]  # proposals for positions i .. i+k-1; row k is the bonus position
            n = min(1 + len(drafts), len(ids) - i)
        batch = mgr.grammar_bitmask([(rid, drafts)] if k else [rid])
        rows = rows_of(batch)
        for j in range(min(len(drafts) + 1, len(ids) - i)):
            pos = i + j
            row = rows.get(j)
            if pos < content_start:
                if banned_while_thinking is None:
                    assert row is None, f"thinking position {pos} got a row"
                else:
                    assert row is not None and thinking_row_ok(vocab, row, banned_while_thinking), pos
            else:
                assert row is not None, f"content position {pos} got no row"
                assert allows(row, ids[pos]), f"row at {pos} disallows {ids[pos]}"
        res = mgr.accept_tokens(rid, ids[i:i + n])
        assert res.status != "error", res.message
        i += n
    return res


def content_text(vocab, ids, content_start):
    stops = vocab.stop_token_ids
    return vocab.decode([t for t in ids[content_start:] if t not in stops])


# ------------------------------------------------------------------------------------------------
# scripted traces

@pytest.mark.parametrize("shape", ["open", "closed", "earlier"])
@pytest.mark.parametrize("mode", ["step", "chunks", "drafts"])
def test_json_trace_valid(qwen_vocab, qwen_compiler, qwen_parser, shape, mode):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser, num_speculative_tokens=3)
    prompt = v.encode(PROMPTS[shape])
    out = json.dumps(VALID)
    script = ([] if shape == "closed" else [("t", THINK + "</think>")]) + [("c", out), ("s", "<|im_end|>")]
    ids, cs = script_tokens(v, script)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), prompt)
    wait_ready(mgr, "r")
    assert mgr.status("r") is (RequestStatus.CONSTRAINED if shape == "closed" else RequestStatus.THINKING)
    tool_call = v.token_id("<tool_call>")
    res = drive(mgr, "r", ids, cs, k=3 if mode == "drafts" else 0, chunk=5 if mode == "chunks" else None,
                rng=random.Random(7), banned_while_thinking=[tool_call], vocab=v)
    assert res.status == "terminated"
    assert mgr.status("r") is RequestStatus.TERMINATED
    text = content_text(v, ids, cs)
    jsonschema.validate(json.loads(text), SCHEMA)
    # after termination only stop tokens
    rows = rows_of(mgr.grammar_bitmask([("r", [v.token_id("<|im_end|>")])]))
    assert set(rows) == {0, 1}
    for row in rows.values():
        assert bits(row) == set(v.stop_token_ids)
    assert mgr.accept_tokens("r", [v.token_id("<|endoftext|>")]).status == "terminated"
    res = mgr.accept_tokens("r", v.encode("more"))
    assert res.status == "error" and "only stop tokens" in res.message
    assert mgr.status("r") is RequestStatus.ERROR


@pytest.mark.parametrize("bad_output, bad_piece", [
    ('{"name": 5', "5"),                       # wrong type
    ('{"age": 3', '"age'),                     # properties out of order / missing required name
    ('{"name": "a", "age": 1.5', "."),         # integer with a fraction
    ('{"name": "a", "age": 1, "tags": [], "ok": true, "x": 1}', ","),  # additional property (strict)
    ('Sure! {"name"', "Sure"),                 # text before the JSON
])
def test_invalid_output_rejected_at_first_bad_token(qwen_vocab, qwen_compiler, qwen_parser, bad_output, bad_piece):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    prompt = v.encode(PROMPTS["open"])
    ids, cs = script_tokens(v, [("t", THINK + "</think>"), ("c", bad_output)])
    # the first bad token: the first content token whose text starts the bad piece, found by the grammar
    ref = xgr.GrammarMatcher(qwen_compiler.compile(Constraint.json_schema(SCHEMA)).grammar)
    bad = next(p for p in range(cs, len(ids)) if not ref.accept_token(ids[p]))
    assert bad_piece in v.decode(ids[bad:bad + 2]) or v.decode([ids[bad]]).strip() in bad_piece
    mgr.add_request("r", Constraint.json_schema(SCHEMA), prompt)
    wait_ready(mgr, "r")
    drive(mgr, "r", ids[:bad], cs, banned_while_thinking=[v.token_id("<tool_call>")], vocab=v)
    row = rows_of(mgr.grammar_bitmask(["r"]))[0]
    assert not allows(row, ids[bad])
    res = mgr.accept_tokens("r", ids[bad:])
    assert res.status == "error"
    assert f"token {ids[bad]} " in res.message and f"output position {bad} " in res.message
    assert f"content position {bad - cs})" in res.message
    assert mgr.status("r") is RequestStatus.ERROR and mgr.error("r") == res.message
    # final: no more rows, accept keeps answering error
    assert mgr.grammar_bitmask(["r"]) is None
    assert mgr.accept_tokens("r", v.encode("}")) == AcceptResult("error", res.message)


def test_control_tokens_masked_inside_strings_and_json(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), include_reasoning=False)
    wait_ready(mgr, "r")
    assert mgr.status("r") is RequestStatus.CONSTRAINED
    controls = sorted(v.special_token_ids)
    for t in v.encode('{"name": "in a string'):
        assert mgr.accept_tokens("r", [t]).status == "ok"
    row = rows_of(mgr.grammar_bitmask(["r"]))[0]
    allowed = bits(row)
    assert allowed.isdisjoint(controls), [v.token_bytes[t] for t in allowed & set(controls)]
    for name in ("<|im_end|>", "<think>", "</think>", "<tool_call>", "<|im_start|>"):
        assert v.token_id(name) not in allowed
    assert max(allowed) < v.vocab_size  # padding ids never allowed
    # the spelled-out text of a control token is fine inside a string
    spelled = v.encode("<|") + v.encode('im_end|> ok", "age": 1, "tags": [], "ok": false}')
    assert v.token_id("<|im_end|>") not in spelled
    for t in spelled:
        assert mgr.accept_tokens("r", [t]).status == "ok"
    row = rows_of(mgr.grammar_bitmask(["r"]))[0]
    assert bits(row) == set(v.stop_token_ids)  # at the end: only stop tokens
    # a control token forced inside JSON is rejected
    mgr.add_request("r2", Constraint.json_object(), include_reasoning=False)
    wait_ready(mgr, "r2")
    assert mgr.accept_tokens("r2", v.encode('{"a": "')).status == "ok"
    res = mgr.accept_tokens("r2", [v.token_id("<|im_end|>")])
    assert res.status == "error" and "<|im_end|>" in res.message


def test_multi_token_commit_splits_exactly(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(PROMPTS["open"]))
    wait_ready(mgr, "r")
    # one commit: thinking that looks like JSON, the end marker, then the first content tokens
    commit = v.encode('{"name": "no"} hmm</think>') + v.encode('{"')
    assert mgr.accept_tokens("r", commit).status == "ok"
    assert mgr.status("r") is RequestStatus.CONSTRAINED
    row = rows_of(mgr.grammar_bitmask(["r"]))[0]  # the grammar has seen '{"' only
    assert allows(row, v.encode("name")[0]) and not allows(row, v.encode("}")[0])
    assert not allows(row, v.encode("age")[0])
    # the same with an invalid first content token after the end inside the commit
    mgr.add_request("s", Constraint.json_schema(SCHEMA), v.encode(PROMPTS["open"]))
    wait_ready(mgr, "s")
    think = v.encode("thinking about {braces}")
    commit = think + [v.token_id("</think>")] + v.encode("x")
    res = mgr.accept_tokens("s", commit)
    assert res.status == "error" and f"output position {len(think) + 1} (content position 0)" in res.message


def test_end_marker_inside_drafts(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser, num_speculative_tokens=4)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(PROMPTS["open"]))
    wait_ready(mgr, "r")
    end = v.token_id("</think>")
    brace, key = v.encode('{"')[0], v.encode('{"name')[1:]
    drafts = v.encode(" ok") + [end] + v.encode('{"') + v.encode("name")
    # rows 0..1: thinking (only <tool_call> masked); row 2: grammar start; row 3: after '{"'
    batch = mgr.grammar_bitmask([("r", drafts)])
    rows = rows_of(batch)
    tool_call = v.token_id("<tool_call>")
    assert set(rows) == {0, 1, 2, 3, 4}
    assert thinking_row_ok(v, rows[0], [tool_call]) and thinking_row_ok(v, rows[1], [tool_call])
    assert allows(rows[2], drafts[2]) and not allows(rows[2], v.encode("x")[0])
    assert allows(rows[3], drafts[3])
    assert not allows(rows[3], v.encode("{")[0])
    # nothing was committed: the grammar is back at its start, the request still thinking
    assert mgr.status("r") is RequestStatus.THINKING
    again = rows_of(mgr.grammar_bitmask([("r", drafts)]))
    assert all(np.array_equal(again[j], rows[j]) for j in rows)
    # the verifier accepts the first 3 drafts + a bonus token: exact split
    assert mgr.accept_tokens("r", drafts[:3] + [drafts[3]]).status == "ok"
    assert mgr.status("r") is RequestStatus.CONSTRAINED
    row = rows_of(mgr.grammar_bitmask(["r"]))[0]
    assert np.array_equal(row, rows[4])
    del brace, key


def test_rejected_draft_ends_rows_and_rolls_back(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser, num_speculative_tokens=3)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), include_reasoning=False)
    wait_ready(mgr, "r")
    good = v.encode('{"')
    drafts = good + v.encode("x") + v.encode("y")  # '{"' ok, then "x" is not a property name prefix
    r = len(good)
    rows = rows_of(mgr.grammar_bitmask([("r", drafts)]))
    assert set(rows) == set(range(r + 1))  # row r masks the rejected draft; no rows after it
    assert not allows(rows[r], drafts[r]) and allows(rows[r], v.encode("name")[0])
    fresh = rows_of(mgr.grammar_bitmask(["r"]))
    assert np.array_equal(fresh[0], rows[0])  # rolled back to the committed state
    # a draft that is a stop token at the end of the grammar ends the rows too
    assert mgr.accept_tokens("r", v.encode(json.dumps(VALID, separators=(",", ":")))).status == "ok"
    stop = v.token_id("<|im_end|>")
    rows = rows_of(mgr.grammar_bitmask([("r", [stop, stop, stop])]))
    assert set(rows) == {0} and bits(rows[0]) == set(v.stop_token_ids)
    assert mgr.status("r") is RequestStatus.CONSTRAINED


def test_implicit_end_token_is_content(qwen_vocab, qwen_compiler, qwen_parser):
    """Qwen's <tool_call> ends the thinking and is the first content token: fed to the grammar. A tag
    grammar that starts with it needs no thinking row; a JSON grammar masks it while thinking."""
    v = qwen_vocab
    tc, etc = v.token_id("<tool_call>"), v.token_id("</tool_call>")
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "token", "token": "<tool_call>"},
        {"type": "json_schema", "json_schema": {"type": "object", "properties": {"city": {"type": "string"}},
                                                "required": ["city"]}},
        {"type": "token", "token": "</tool_call>"}]}}
    mgr = make(v, qwen_compiler, qwen_parser, num_speculative_tokens=3)
    mgr.add_request("t", Constraint.structural_tag(tag), v.encode(PROMPTS["open"]))
    wait_ready(mgr, "t")
    think = v.encode("I should call the tool {not json")
    ids = think + [tc] + v.encode('{"city": "Paris"}') + [etc, v.token_id("<|im_end|>")]
    # the <tool_call> position is still a thinking position (no row: the tag may start with it)
    res = drive(mgr, "t", ids, len(think) + 1, k=3)
    assert res.status == "terminated"
    # implicit end inside the drafts: row of <tool_call>'s position is a thinking position (no row),
    # the next rows are the grammar after <tool_call>
    mgr.add_request("t2", Constraint.structural_tag(tag), v.encode(PROMPTS["open"]))
    wait_ready(mgr, "t2")
    drafts = v.encode(" x") + [tc] + v.encode('{"')
    rows = rows_of(mgr.grammar_bitmask([("t2", drafts)]))
    assert set(rows) == {2, 3}
    assert bits(rows[2]) == bits(rows[2]) & set(range(v.vocab_size)) and allows(rows[2], v.encode('{"')[0])
    assert mgr.accept_tokens("t2", drafts[:2]).status == "ok"
    assert mgr.status("t2") is RequestStatus.CONSTRAINED
    # JSON: <tool_call> while thinking is masked (the grammar could not start with it)
    mgr.add_request("j", Constraint.json_schema(SCHEMA), v.encode(PROMPTS["open"]))
    wait_ready(mgr, "j")
    rows = rows_of(mgr.grammar_bitmask(["j"]))
    assert thinking_row_ok(v, rows[0], [tc])
    res = mgr.accept_tokens("j", [tc])
    assert res.status == "error" and "<tool_call>" in res.message


def test_prompt_shapes_and_kwargs(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    c = Constraint.json_schema(SCHEMA)
    cases = {
        "open": (v.encode(PROMPTS["open"]), None, True, RequestStatus.THINKING),
        "closed": (v.encode(PROMPTS["closed"]), None, True, RequestStatus.CONSTRAINED),
        "earlier": (v.encode(PROMPTS["earlier"]), None, True, RequestStatus.THINKING),
        "kw_off": (v.encode(SYS + Q + "<|im_start|>assistant\n"), {"enable_thinking": False}, True,
                   RequestStatus.CONSTRAINED),
        "no_reasoning": (v.encode(PROMPTS["open"]), None, False, RequestStatus.CONSTRAINED),
        "kw_include_false": (v.encode(PROMPTS["open"]), {"include_reasoning": False}, True,
                             RequestStatus.CONSTRAINED),
    }
    for rid, (prompt, kw, inc, expected) in cases.items():
        mgr.add_request(rid, c, prompt, chat_template_kwargs=kw, include_reasoning=inc)
    wait_ready(mgr, *cases)
    for rid, (_, _, _, expected) in cases.items():
        assert mgr.status(rid) is expected, rid
    # constrained from the first token: the first row is the grammar's first-token mask
    first = rows_of(mgr.grammar_bitmask(["closed"]))[0]
    assert allows(first, v.encode("{")[0]) and not allows(first, v.encode("Hello")[0])
    # manager-wide kwargs reach the parser; the request's own override them
    m2 = make(v, qwen_compiler, qwen_parser, chat_template_kwargs={"enable_thinking": False})
    m2.add_request("a", c, v.encode(SYS + Q + "<|im_start|>assistant\n"))
    m2.add_request("b", c, v.encode(SYS + Q + "<|im_start|>assistant\n"), chat_template_kwargs={"enable_thinking": True})
    wait_ready(m2, "a", "b")
    assert m2.status("a") is RequestStatus.CONSTRAINED and m2.status("b") is RequestStatus.THINKING


def test_no_parser_and_deepseek_r1(deepseek_vocab):
    v = deepseek_vocab
    comp = Compiler(v)
    try:
        mgr = StructuredOutputManager(v, "deepseek_r1", compiler=comp, num_speculative_tokens=2)
        prompt = v.encode("<｜begin▁of▁sentence｜>You answer in JSON.<｜User｜>Who?<｜Assistant｜><think>\n")
        ids, cs = script_tokens(v, [("t", THINK + "</think>"), ("c", json.dumps(VALID)), ("s", "<｜end▁of▁sentence｜>")])
        mgr.add_request("r", Constraint.json_schema(SCHEMA), prompt)
        wait_ready(mgr, "r")
        assert mgr.status("r") is RequestStatus.THINKING
        # deepseek_r1 has no implicit end: no row at all while thinking
        res = drive(mgr, "r", ids, cs, k=2)
        assert res.status == "terminated"
        jsonschema.validate(json.loads(content_text(v, ids, cs)), SCHEMA)
        # no parser: the grammar applies from the first token
        plain = StructuredOutputManager(v, None, compiler=comp)
        plain.add_request("p", Constraint.json_schema(SCHEMA), prompt)
        wait_ready(plain, "p")
        assert plain.status("p") is RequestStatus.CONSTRAINED
        assert plain.accept_tokens("p", v.encode("<think>")).status == "error"
    finally:
        comp.close()


def test_first_token_decides_family(magistral_vocab):
    """Magistral ([THINK] ... [/THINK], the model may skip thinking): before the first token the row is
    the grammar's first-token mask plus the thinking markers; after [THINK] nothing is masked."""
    v = magistral_vocab
    comp = Compiler(v)
    try:
        mgr = StructuredOutputManager(v, "mistral", compiler=comp, num_speculative_tokens=1)
        mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode("[INST]Who?[/INST]"))
        wait_ready(mgr, "r")
        assert mgr.status("r") is RequestStatus.THINKING
        think, end_think = v.token_id("[THINK]"), v.token_id("[/THINK]")
        row = rows_of(mgr.grammar_bitmask(["r"]))[0]
        allowed = bits(row)
        assert think in allowed and end_think in allowed
        assert allows(row, v.encode("{")[0]) and not allows(row, v.encode("Hello")[0])
        # skipping the thinking: the first token is content, fed to the grammar
        skip = StructuredOutputManager(v, "mistral", compiler=comp)
        skip.add_request("s", Constraint.json_schema(SCHEMA), v.encode("[INST]Who?[/INST]"))
        wait_ready(skip, "s")
        assert skip.accept_tokens("s", v.encode('{"name"')).status == "ok"
        assert skip.status("s") is RequestStatus.CONSTRAINED
        # thinking: after [THINK] only the implicit end [TOOL_CALLS] (the grammar cannot start with it)
        # is masked; after [/THINK] in the drafts, the grammar
        assert mgr.accept_tokens("r", [think] + v.encode("{hmm")).status == "ok"
        tool_calls = v.token_id("[TOOL_CALLS]")
        rows = rows_of(mgr.grammar_bitmask([("r", [end_think])]))
        assert set(rows) == {0, 1} and thinking_row_ok(v, rows[0], [tool_calls])
        assert allows(rows[1], v.encode("{")[0]) and not allows(rows[1], v.encode("Hello")[0])
    finally:
        comp.close()


def test_other_constraint_kinds(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    cases = [
        ("choice", Constraint.choice(["yes", "no", 'maybe "so"']), 'maybe "so"', "nope"),
        ("regex", Constraint.regex(r"\d{3}-[a-z]+"), "123-abc", "12a"),
        ("grammar", Constraint.grammar('root ::= "A" [0-9]+ ("!" | "?")'), "A42!", "B"),
        ("object", Constraint.json_object(), '{"x": [1, {"y": null}]}', "[1]"),
    ]
    for rid, c, good, bad in cases:
        mgr.add_request(rid, c, include_reasoning=False)
        mgr.add_request(rid + "-bad", c, include_reasoning=False)
    wait_ready(mgr, *[r for r, *_ in cases], *[r + "-bad" for r, *_ in cases])
    stop = v.token_id("<|im_end|>")
    for rid, _, good, bad in cases:
        ids = v.encode(good) + [stop]
        res = drive(mgr, rid, ids, 0)
        assert res.status == "terminated", rid
        res = mgr.accept_tokens(rid + "-bad", v.encode(bad))
        assert res.status == "error", rid


def test_json_whitespace_is_bounded(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    mgr.add_request("r", Constraint.json_schema(SCHEMA, max_whitespace=4), include_reasoning=False)
    mgr.add_request("c", Constraint.json_schema(SCHEMA, any_whitespace=False), include_reasoning=False)
    wait_ready(mgr, "r", "c")
    space = v.encode(" ")[0]
    assert mgr.accept_tokens("r", v.encode("{")).status == "ok"
    for _ in range(4):
        assert allows(rows_of(mgr.grammar_bitmask(["r"]))[0], space)
        assert mgr.accept_tokens("r", [space]).status == "ok"
    assert not allows(rows_of(mgr.grammar_bitmask(["r"]))[0], space)
    assert mgr.accept_tokens("r", [space]).status == "error"
    # any_whitespace=False: json.dumps layout only; max_whitespace=0: compact
    assert mgr.accept_tokens("c", v.encode(json.dumps(VALID))).status == "ok"
    mgr.add_request("z", Constraint.json_schema(SCHEMA, max_whitespace=0), include_reasoning=False)
    mgr.add_request("z2", Constraint.json_schema(SCHEMA, max_whitespace=0), include_reasoning=False)
    wait_ready(mgr, "z", "z2")
    assert mgr.accept_tokens("z", v.encode(json.dumps(VALID, separators=(",", ":")))).status == "ok"
    assert mgr.accept_tokens("z2", v.encode(json.dumps(VALID))).status == "error"
    mgr.add_request("c2", Constraint.json_schema(SCHEMA, any_whitespace=False), include_reasoning=False)
    wait_ready(mgr, "c2")
    assert mgr.accept_tokens("c2", v.encode('{ "name"')).status == "error"


# ------------------------------------------------------------------------------------------------
# compile: cache, validation, errors, timeouts

def test_thousand_requests_compile_once(qwen_vocab, qwen_parser):
    comp = Compiler(qwen_vocab, num_threads=2)
    try:
        mgr = StructuredOutputManager(qwen_vocab, qwen_parser, compiler=comp, max_num_seqs=1000)
        prompt = qwen_vocab.encode(PROMPTS["open"])
        for i in range(1000):
            schema = json.loads(json.dumps(SCHEMA))  # a fresh, equal dict each time
            mgr.add_request(f"r{i}", Constraint.json_schema(schema), prompt)
        wait_ready(mgr, *[f"r{i}" for i in range(1000)])
        s = comp.stats
        assert s.compiles == 1 and s.cache_hits + s.joins == 999 and s.failures == 0
        assert all(mgr.status(f"r{i}") is RequestStatus.THINKING for i in range(1000))
        # a different option is a different constraint
        mgr.add_request("w", Constraint.json_schema(SCHEMA, max_whitespace=3), prompt)
        wait_ready(mgr, "w")
        assert comp.stats.compiles == 2
    finally:
        comp.close()


@pytest.mark.parametrize("make_constraint, words", [
    (lambda: Constraint.json_schema({"type": "foo"}), ["JSON schema", "Unsupported type"]),
    (lambda: Constraint.json_schema({"type": "object", "properties": {"a": {"$ref": "#/defs/x"}}}),
     ["JSON schema", "defs"]),
    (lambda: Constraint.json_schema({"type": "string", "pattern": "(["}), ["JSON schema", "Unclosed"]),
    (lambda: Constraint.regex("(ab"), ["regex", "parenthesis"]),
    (lambda: Constraint.grammar('root ::= foo'), ["grammar", '"foo" is not defined']),
    (lambda: Constraint.grammar('start ::= "a"'), ["grammar", "root"]),
    (lambda: Constraint.structural_tag({"type": "structural_tag", "format": {"type": "nope"}}),
     ["structural tag"]),
    (lambda: Constraint.structural_tag({"type": "token", "token": "<not_a_token>"}),
     ["structural tag", "<not_a_token>", "not a single token"]),
    (lambda: Constraint.structural_tag({"type": "any_tokens", "exclude_tokens": [10**9]}),
     ["structural tag", "outside the vocabulary"]),
])
def test_invalid_constraint_puts_the_request_in_error(qwen_vocab, qwen_compiler, qwen_parser, make_constraint,
                                                     words):
    """Validation depends on the content, so it runs with the compile, off the scheduler thread."""
    mgr = make(qwen_vocab, qwen_compiler, qwen_parser)
    mgr.add_request("bad", make_constraint())  # no ValueError: the request waits for its compile
    wait_ready(mgr, "bad")
    assert mgr.status("bad") is RequestStatus.ERROR
    msg = mgr.error("bad")
    for w in words:
        assert w in msg, (w, msg)
    assert "[" not in msg.split(":")[0]  # no xgrammar timestamp / source prefix
    assert mgr.accept_tokens("bad", [1]).status == "error" and mgr.grammar_bitmask(["bad"]) is None
    mgr.remove_request("bad")
    mgr.add_request("bad", Constraint.json_object())  # the id is free
    wait_ready(mgr, "bad")
    assert mgr.status("bad") is not RequestStatus.ERROR


def test_constraint_values_rejected_early():
    with pytest.raises(ValueError, match="not valid JSON"):
        Constraint.json_schema("{nope")
    with pytest.raises(ValueError, match="empty"):
        Constraint.choice([])
    with pytest.raises(ValueError, match="max_whitespace"):
        Constraint.json_schema({}, max_whitespace=-1)
    assert Constraint.json_schema({"a": 1, "b": 2}).key != Constraint.json_schema({"b": 2, "a": 1}).key
    with pytest.raises(ValueError, match="nested deeper than"):
        Constraint.json_schema(_nested(1000))


def _nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}, "required": ["a"]}
    return schema


# a 60-byte schema whose conversion takes minutes and grows its memory: it only ends when killed
HOSTILE = {"type": "object", "patternProperties": {"^.{1,100000}$": {}}}


def test_compile_timeout_hurts_only_its_request(qwen_vocab, qwen_parser):
    v = qwen_vocab
    comp = Compiler(v, num_threads=1)
    try:
        assert comp.wait_ready(120)
        mgr = StructuredOutputManager(v, qwen_parser, compiler=comp, compile_timeout_s=1.0)
        t_add = time.monotonic()
        mgr.add_request("slow", Constraint.json_schema(HOSTILE), include_reasoning=False)
        if time.monotonic() - t_add < 0.8:  # (a very loaded machine may already be past the deadline)
            assert not mgr.is_ready("slow") and mgr.status("slow") is RequestStatus.COMPILING
            with pytest.raises(ValueError, match="still compiling"):
                mgr.grammar_bitmask(["slow"])
        pid = comp.running_pid(mgr._requests["slow"].future)
        time.sleep(max(0.0, t_add + 1.05 - time.monotonic()))
        assert mgr.is_ready("slow")
        assert mgr.status("slow") is RequestStatus.ERROR
        assert "did not compile within compile_timeout_s=1 s" in mgr.error("slow")
        assert mgr.accept_tokens("slow", [1]).status == "error"
        assert mgr.grammar_bitmask(["slow"]) is None
        # its worker was killed; a fresh one compiles the others
        mgr.add_request("fast", Constraint.json_schema(SCHEMA), include_reasoning=False)
        wait_ready(mgr, "fast", timeout=30)
        assert mgr.status("fast") is RequestStatus.CONSTRAINED
        ids = v.encode(json.dumps(VALID)) + [v.token_id("<|im_end|>")]
        assert drive(mgr, "fast", ids, 0).status == "terminated"
        s = comp.stats
        assert s.timeouts == 1 and s.overdue <= 1 and s.cache_entries == 1  # stopped by the compiler or the manager
        assert pid is None or pid not in comp.worker_pids()
    finally:
        comp.close()


def test_compile_error_hurts_only_its_request(qwen_vocab, qwen_parser):
    v = qwen_vocab
    comp = Compiler(v, num_threads=1)
    try:
        assert comp.wait_ready(120)
        mgr = StructuredOutputManager(v, qwen_parser, compiler=comp)
        mgr.add_request("b", Constraint.json_schema(HOSTILE))
        t0 = time.monotonic()
        while (pid := comp.running_pid(mgr._requests["b"].future)) is None:
            assert time.monotonic() - t0 < 30
            time.sleep(0.005)
        os.kill(pid, signal.SIGKILL)  # stands in for a crash inside xgrammar
        mgr.add_request("g", Constraint.json_schema(SCHEMA), v.encode(PROMPTS["closed"]))
        wait_ready(mgr, "b", "g")
        assert mgr.status("b") is RequestStatus.ERROR
        assert mgr.error("b").startswith("json_schema constraint failed to compile: the compile worker process died")
        assert mgr.status("g") is RequestStatus.CONSTRAINED
        batch = mgr.grammar_bitmask(["b", "g"])
        assert batch.request_ids == ["g"] and batch.logits_indices.tolist() == [1]
        s = comp.stats
        assert s.failures == 1 and s.worker_crashes == 1 and s.cache_entries == 1
    finally:
        comp.close()


def test_cache_is_bounded_in_bytes(qwen_vocab):
    comp = Compiler(qwen_vocab, num_threads=1, cache_limit_bytes=1 << 20)
    try:
        sizes = []
        for i in range(6):
            c = comp.compile(Constraint.regex(f"item{i}-[a-z]{{1,8}}"))
            sizes.append(c.memory_bytes)
        s = comp.stats
        assert s.cache_bytes <= 1 << 20 and s.cache_bytes == sum(sizes[-s.cache_entries:])
        assert s.evictions == 6 - s.cache_entries and s.evictions > 0
        comp.compile(Constraint.regex("item5-[a-z]{1,8}"))  # most recent: still cached
        assert comp.stats.compiles == 6
        comp.compile(Constraint.regex("item0-[a-z]{1,8}"))  # evicted: compiled again
        assert comp.stats.compiles == 7
    finally:
        comp.close()


# ------------------------------------------------------------------------------------------------
# the batch: layout, misuse, batched fill == one-by-one fill == xgrammar directly

def test_schedule_layout_and_unconstrained(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser, num_speculative_tokens=2)
    mgr.add_request("free", None, v.encode(PROMPTS["open"]))
    mgr.add_request("think", Constraint.regex("[a-z]+"), v.encode(PROMPTS["open"]))
    mgr.add_request("json", Constraint.json_schema(SCHEMA), include_reasoning=False)
    wait_ready(mgr, "free", "think", "json")
    assert mgr.status("free") is RequestStatus.THINKING
    # regex [a-z]+ cannot start with <tool_call> either: its thinking rows mask it
    batch = mgr.grammar_bitmask([("free", [5, 6]), "think", ("json", v.encode('{"'))])
    assert batch.num_logits_rows == 3 + 1 + 2
    got = dict(zip(batch.logits_indices.tolist(), batch.request_ids))
    assert got == {3: "think", 4: "json", 5: "json"}
    assert batch.bitmask.dtype == xgr.bitmask_dtype and batch.bitmask.shape[1] == (v.logits_width + 31) // 32
    assert mgr.accept_tokens("free", v.encode("anything </think> at all")).status == "ok"
    assert mgr.status("free") is RequestStatus.CONSTRAINED
    assert mgr.grammar_bitmask(["free"]) is None


def test_misuse_raises(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser, max_num_seqs=2, num_speculative_tokens=1)
    mgr.add_request("a", Constraint.json_object())
    wait_ready(mgr, "a")
    with pytest.raises(ValueError, match="already registered"):
        mgr.add_request("a", None)
    for call in (lambda: mgr.accept_tokens("zz", [1]), lambda: mgr.remove_request("zz"),
                 lambda: mgr.grammar_bitmask(["zz"]), lambda: mgr.is_ready("zz"), lambda: mgr.status("zz")):
        with pytest.raises(KeyError, match="zz"):
            call()
    mgr.add_request("b", None)
    mgr.add_request("c", None)
    with pytest.raises(ValueError, match="max_num_seqs=2"):
        mgr.grammar_bitmask(["a", "b", "c"])
    with pytest.raises(ValueError, match="num_speculative_tokens=1"):
        mgr.grammar_bitmask([("a", [1, 2])])
    with pytest.raises(ValueError, match="twice"):
        mgr.grammar_bitmask(["a", "a"])
    with pytest.raises(ValueError, match="schedule entry"):
        mgr.grammar_bitmask([("a", [1], 3)])
    with pytest.raises(ValueError, match="outside"):
        mgr.accept_tokens("a", [v.logits_width])
    with pytest.raises(ValueError, match="outside"):
        mgr.grammar_bitmask([("a", [-1])])
    with pytest.raises(ValueError, match="1-D"):
        import torch
        mgr.accept_tokens("a", torch.zeros((2, 2), dtype=torch.int64))
    with pytest.raises(ValueError, match="Constraint"):
        mgr.add_request("d", {"type": "object"})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown reasoning parser"):
        StructuredOutputManager(v, "no_such_parser", compiler=qwen_compiler)
    with pytest.raises(ValueError, match="max_num_seqs"):
        StructuredOutputManager(v, None, compiler=qwen_compiler, max_num_seqs=0)
    mgr.remove_request("a")
    assert "a" not in mgr


def _reference_rows(vocab, compiled_by_rid, committed, schedule, base_rows):
    """The rows computed with plain xgrammar matchers (no reasoning here: every request is
    constrained from the start): for each request, replay its committed tokens, then fill row j after
    drafts[:j] until a draft is rejected or terminates the grammar."""
    out = {}
    words = (vocab.logits_width + 31) // 32
    import torch
    buf = torch.empty((1, words), dtype=torch.int32)
    for (rid, drafts), base in zip(schedule, base_rows):
        c = compiled_by_rid[rid]  # a JSON whitespace bound is enforced beside the grammar (jsonws/bound.py)
        m = xgr.GrammarMatcher(c.grammar) if c.whitespace is None else BoundedMatcher(c.grammar, c.whitespace)
        for t in committed[rid]:
            assert m.accept_token(t)
        if m.is_terminated():
            for j in range(len(drafts) + 1):
                row = np.zeros(words, dtype=np.int32)
                for s in vocab.stop_token_ids:
                    row[s >> 5] |= np.int32(np.uint32(1 << (s & 31)).view(np.int32))
                out[base + j] = row
            continue
        for j in range(len(drafts) + 1):
            m.fill_next_token_bitmask(buf, 0)
            out[base + j] = buf[0].numpy().copy()
            if j == len(drafts) or not m.accept_token(drafts[j]) or m.is_terminated():
                break
    return out


@pytest.mark.parametrize("k", [0, 3])
def test_batched_fill_equals_one_by_one_and_xgrammar(qwen_vocab, qwen_compiler, k):
    v = qwen_vocab
    rng = random.Random(k)
    schemas = [SCHEMA, {"type": "array", "items": {"type": "integer"}, "maxItems": 5},
               {"type": "object", "properties": {"e": {"enum": ["a", "b c", "d"]}}, "required": ["e"]}]
    samples = [json.dumps(VALID), json.dumps([1, 22, 333]), json.dumps({"e": "b c"})]
    stop = v.token_id("<|im_end|>")
    batched = StructuredOutputManager(v, None, compiler=qwen_compiler, max_num_seqs=48, num_speculative_tokens=3,
                                      batch_fill_min_rows=1, num_fill_threads=2)
    single = StructuredOutputManager(v, None, compiler=qwen_compiler, max_num_seqs=48, num_speculative_tokens=3,
                                     num_fill_threads=1)
    committed, schedule, compiled = {}, [], {}
    for i in range(40):
        s = i % 3
        ids = v.encode(samples[s]) + [stop]
        cut = rng.randint(0, len(ids))
        rid = f"r{i}"
        for mgr in (batched, single):
            mgr.add_request(rid, Constraint.json_schema(schemas[s]))
        wait_ready(batched, rid)
        wait_ready(single, rid)
        for mgr in (batched, single):
            assert mgr.accept_tokens(rid, ids[:cut]).status != "error"
        committed[rid] = ids[:cut]
        compiled[rid] = qwen_compiler.compile(Constraint.json_schema(schemas[s]))
        drafts = ids[cut:cut + k]
        if k and i % 4 == 0 and drafts:  # a wrong draft in the middle
            drafts = drafts[:1] + v.encode("@@") + drafts[2:]
        schedule.append((rid, drafts))
    bases, b = [], 0
    for _, d in schedule:
        bases.append(b)
        b += 1 + len(d)
    ref = _reference_rows(v, compiled, committed, schedule, bases)
    got_b = rows_of(batched.grammar_bitmask(schedule))
    got_s = rows_of(single.grammar_bitmask(schedule))
    assert set(got_b) == set(got_s) == set(ref)
    for i in ref:
        assert np.array_equal(got_b[i], ref[i]) and np.array_equal(got_s[i], ref[i]), i
    # and the matchers were rolled back: the same call gives the same rows
    again = rows_of(batched.grammar_bitmask(schedule))
    assert all(np.array_equal(again[i], ref[i]) for i in ref)


def test_misuse_in_a_schedule_leaves_every_matcher_untouched(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    tc = v.token_id("<tool_call>")
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "token", "token": "<tool_call>"}, {"type": "json_schema", "json_schema": {"type": "object"}}]}}
    mgr = make(v, qwen_compiler, qwen_parser, num_speculative_tokens=3)
    mgr.add_request("t", Constraint.structural_tag(tag), v.encode(PROMPTS["open"]))
    mgr.add_request("j", Constraint.json_schema(SCHEMA), include_reasoning=False)
    wait_ready(mgr, "t", "j")
    sched = [("t", v.encode(" a") + [tc] + v.encode('{"')), ("j", v.encode('{"name'))]
    before = rows_of(mgr.grammar_bitmask(sched))
    for bad in (sched + ["zz"], sched + [("j", [1])], sched + [("t", [1, 2, 3, 4])]):
        with pytest.raises((KeyError, ValueError)):
            mgr.grammar_bitmask(bad)
    after = rows_of(mgr.grammar_bitmask(sched))
    assert set(after) == set(before) and all(np.array_equal(after[i], before[i]) for i in before)


def test_request_that_finished_compiling_can_be_scheduled_at_once(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    c = Constraint.regex("z[0-9]{1,7}z")
    mgr.add_request("r", c, include_reasoning=False)
    qwen_compiler.compile(c)  # wait for it without asking the manager
    batch = mgr.grammar_bitmask(["r"])  # resolved inside the call
    assert batch is not None and batch.request_ids == ["r"]


def test_batched_fill_equals_one_by_one_with_reasoning(qwen_vocab, qwen_compiler, qwen_parser):
    """Thinking requests whose end marker (explicit or Qwen's implicit <tool_call>) falls at every place
    of the drafts, mixed with constrained ones: the batch matcher gives the same rows."""
    v = qwen_vocab
    end, tc = v.token_id("</think>"), v.token_id("<tool_call>")
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "token", "token": "<tool_call>"}, {"type": "json_schema", "json_schema": SCHEMA}]}}
    mgrs = [StructuredOutputManager(v, qwen_parser, compiler=qwen_compiler, max_num_seqs=40, num_speculative_tokens=4,
                                    batch_fill_min_rows=1, num_fill_threads=2),
            StructuredOutputManager(v, qwen_parser, compiler=qwen_compiler, max_num_seqs=40, num_speculative_tokens=4,
                                    num_fill_threads=1)]
    body = v.encode(json.dumps(VALID))
    schedule = []
    for i in range(40):
        rid = f"r{i}"
        use_tag = i % 2 == 1
        marker = [tc] if use_tag else [end]
        at = i % 5  # where the end marker falls in the drafts
        drafts = (v.encode(" so") * at + marker + body)[:4]
        for m in mgrs:
            m.add_request(rid, Constraint.structural_tag(tag) if use_tag else Constraint.json_schema(SCHEMA),
                          v.encode(PROMPTS["open"]))
        schedule.append((rid, drafts))
    for m in mgrs:
        wait_ready(m, *[r for r, _ in schedule])
    got = [rows_of(m.grammar_bitmask(schedule)) for m in mgrs]
    assert set(got[0]) == set(got[1])
    assert all(np.array_equal(got[0][i], got[1][i]) for i in got[0])
    assert len(got[0]) > 100


def test_deepseek_v4_family(deepseek_vocab):
    """DeepSeek V4 (``deepseek_v4``): thinking by the kwarg; its two implicit ends (``｜DSML｜``,
    ``<｜tool▁calls▁begin｜>``) are masked while thinking when the grammar cannot start with them."""
    v = deepseek_vocab
    comp = Compiler(v)
    try:
        mgr = StructuredOutputManager(v, "deepseek_v4", compiler=comp, num_speculative_tokens=2)
        prompt = v.encode("<｜begin▁of▁sentence｜><｜User｜>Who?<｜Assistant｜>")
        mgr.add_request("on", Constraint.json_schema(SCHEMA), prompt, chat_template_kwargs={"thinking": True})
        mgr.add_request("off", Constraint.json_schema(SCHEMA), prompt)
        wait_ready(mgr, "on", "off")
        assert mgr.status("on") is RequestStatus.THINKING and mgr.status("off") is RequestStatus.CONSTRAINED
        banned = [v.token_id("｜DSML｜"), v.token_id("<｜tool▁calls▁begin｜>")]
        ids, cs = script_tokens(v, [("t", THINK + "</think>"), ("c", json.dumps(VALID)), ("s", "<｜end▁of▁sentence｜>")])
        assert drive(mgr, "on", ids, cs, k=2, banned_while_thinking=banned, vocab=v).status == "terminated"
        jsonschema.validate(json.loads(content_text(v, ids, cs)), SCHEMA)
        out = v.encode(json.dumps(VALID)) + [v.token_id("<｜end▁of▁sentence｜>")]
        assert drive(mgr, "off", out, 0).status == "terminated"
    finally:
        comp.close()


def test_strict_false_allows_additional_properties(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    mgr.add_request("loose", Constraint.json_schema(SCHEMA, strict=False), include_reasoning=False)
    mgr.add_request("strict", Constraint.json_schema(SCHEMA), include_reasoning=False)
    wait_ready(mgr, "loose", "strict")
    extra = v.encode(json.dumps({**VALID, "extra": [1, "x"]})) + [v.token_id("<|im_end|>")]
    assert drive(mgr, "loose", extra, 0).status == "terminated"
    assert mgr.accept_tokens("strict", extra).status == "error"


# ------------------------------------------------------------------------------------------------
# property: the row of a position does not depend on how the stream was chunked or drafted

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_REF: dict = {}


def _reference_stream(v, compiler, parser):
    """The stream (thinking, end, JSON, stop) and the row of every position, fed one token a step."""
    if "rows" not in _REF:
        ids, cs = script_tokens(v, [("t", 'Hmm {"x": "}" ok'), ("t", "</think>"),
                                    ("c", json.dumps({"name": "a", "age": 1, "tags": ["b"], "ok": False})),
                                    ("s", "<|im_end|>")])
        mgr = StructuredOutputManager(v, parser, compiler=compiler, max_num_seqs=1)
        mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(PROMPTS["open"]))
        wait_ready(mgr, "r")
        rows = []
        for t in ids:
            rows.append(rows_of(mgr.grammar_bitmask(["r"])).get(0))
            assert mgr.accept_tokens("r", [t]).status != "error"
        _REF.update(ids=ids, rows=rows)
    return _REF["ids"], _REF["rows"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=80))
def test_rows_do_not_depend_on_chunking_or_drafts(qwen_vocab, qwen_compiler, qwen_parser, plan):
    v = qwen_vocab
    ids, ref = _reference_stream(v, qwen_compiler, qwen_parser)
    mgr = StructuredOutputManager(v, qwen_parser, compiler=qwen_compiler, max_num_seqs=1, num_speculative_tokens=4)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(PROMPTS["open"]))
    wait_ready(mgr, "r")
    pos, step = 0, 0
    while pos < len(ids):
        k, take = plan[step % len(plan)]
        step += 1
        drafts = ids[pos:pos + k]
        rows = rows_of(mgr.grammar_bitmask([("r", drafts)]))
        for j in range(min(len(drafts) + 1, len(ids) - pos)):
            expected, got = ref[pos + j], rows.get(j)
            assert (expected is None) == (got is None), (pos + j, k)
            assert expected is None or np.array_equal(expected, got), (pos + j, k)
        n = min(1 + min(take, len(drafts)), len(ids) - pos)  # the verifier accepts a prefix + bonus
        res = mgr.accept_tokens("r", ids[pos:pos + n])
        assert res.status != "error", res.message
        pos += n
    assert mgr.status("r") is RequestStatus.TERMINATED


def test_text_marker_family_pending_rows(qwen_vocab, qwen_compiler):
    """granite (text markers, thinking when asked): while the first tokens decide between thinking and
    answering, each row is the grammar's first-token mask plus the tokens the tracker says keep the
    thinking possible; then nothing while thinking; the grammar after "Here is my response:"."""
    v = qwen_vocab
    mgr = StructuredOutputManager(v, "granite", compiler=qwen_compiler)
    prompt = v.encode("<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n")
    for rid in ("think", "skip"):
        mgr.add_request(rid, Constraint.json_schema(SCHEMA), prompt, chat_template_kwargs={"thinking": True})
    wait_ready(mgr, "think", "skip")
    brace = v.encode("{")[0]
    ids = v.encode("Here is my thought process:\nThe {answer} is \"x\".\nHere is my response:")
    n_marker = len(v.encode("Here is my thought process:"))
    for i, t in enumerate(ids[:n_marker]):
        row = rows_of(mgr.grammar_bitmask(["think"]))[0]
        assert allows(row, t) and allows(row, brace), i
        assert not allows(row, v.encode("Hello")[0]) or t == v.encode("Hello")[0]
        assert mgr.accept_tokens("think", [t]).status == "ok"
    rest = ids[n_marker:]
    for t in rest:
        assert mgr.grammar_bitmask(["think"]) is None  # thinking: nothing masked
        assert mgr.accept_tokens("think", [t]).status == "ok"
    assert mgr.status("think") is RequestStatus.CONSTRAINED
    out = v.encode(json.dumps(VALID)) + [v.token_id("<|im_end|>")]
    assert drive(mgr, "think", out, 0).status == "terminated"
    # skipping the thoughts: "Here" then "{" -> the content starts at "{"
    assert mgr.accept_tokens("skip", v.encode("Here")).status == "ok"
    row = rows_of(mgr.grammar_bitmask(["skip"]))[0]
    assert allows(row, brace) and allows(row, v.encode(" is")[0])
    assert mgr.accept_tokens("skip", v.encode(json.dumps(VALID)) + [v.token_id("<|im_end|>")]).status == "terminated"


def test_text_marker_family_pending_rows_with_drafts(qwen_vocab, qwen_compiler):
    """granite with speculative drafts: while the opening is undecided, row j of a drafted step is the
    row the request would get after committing drafts 0..j-1 one by one (grammar's first tokens plus
    the keepers after that prefix); once the start marker completes inside the drafts, no row."""
    v = qwen_vocab
    k = 3
    mgr = StructuredOutputManager(v, "granite", compiler=qwen_compiler, num_speculative_tokens=k)
    prompt = v.encode("<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n")
    kw = {"thinking": True}
    ids = v.encode("Here is my thought process:\nThe {answer}.\nHere is my response:")
    n_marker = len(v.encode("Here is my thought process:"))
    assert n_marker >= 4
    hello = v.encode("Hello")[0]
    for pos in range(n_marker):
        ref, drafted = f"ref{pos}", f"drafted{pos}"
        for rid in (ref, drafted):
            mgr.add_request(rid, Constraint.json_schema(SCHEMA), prompt, chat_template_kwargs=kw)
        wait_ready(mgr, ref, drafted)
        if pos:
            assert mgr.accept_tokens(drafted, ids[:pos]).status == "ok"
            assert mgr.accept_tokens(ref, ids[:pos]).status == "ok"
        drafts = ids[pos:pos + k]
        got = rows_of(mgr.grammar_bitmask([(drafted, drafts)]))
        for j in range(len(drafts) + 1):
            if j:  # the reference commits the same prefix one token at a time
                assert mgr.accept_tokens(ref, [drafts[j - 1]]).status == "ok"
            expected = rows_of(mgr.grammar_bitmask([ref])).get(0)
            assert (expected is None) == (j not in got), (pos, j)
            if expected is not None:
                assert np.array_equal(expected, got[j]), (pos, j)
                assert allows(got[j], ids[pos + j]) and not allows(got[j], hello), (pos, j)
        mgr.remove_request(ref)
        mgr.remove_request(drafted)


def test_tokens_after_a_stop_in_one_commit(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    stop, eot = v.token_id("<|im_end|>"), v.token_id("<|endoftext|>")
    body = v.encode(json.dumps(VALID))
    for rid in ("a", "b"):
        mgr.add_request(rid, Constraint.json_schema(SCHEMA), include_reasoning=False)
    wait_ready(mgr, "a", "b")
    assert mgr.accept_tokens("a", body + [stop, eot]) == AcceptResult("terminated")
    res = mgr.accept_tokens("b", body + [stop] + v.encode("x"))
    assert res.status == "error" and f"output position {len(body) + 1} " in res.message
    assert "only stop tokens may follow" in res.message


def test_two_buffers_keep_the_previous_batch(qwen_vocab, qwen_compiler, qwen_parser):
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser, num_buffers=2)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), include_reasoning=False)
    wait_ready(mgr, "r")
    first = mgr.grammar_bitmask(["r"])
    kept = first.bitmask.clone()
    assert mgr.accept_tokens("r", v.encode('{"')).status == "ok"
    second = mgr.grammar_bitmask(["r"])
    assert first.bitmask.data_ptr() != second.bitmask.data_ptr()
    assert torch.equal(first.bitmask, kept) and not torch.equal(second.bitmask, kept)
    third = mgr.grammar_bitmask(["r"])
    assert third.bitmask.data_ptr() == first.bitmask.data_ptr() and torch.equal(third.bitmask, second.bitmask)
    with pytest.raises(ValueError, match="num_buffers"):
        make(v, qwen_compiler, qwen_parser, num_buffers=0)


def test_constraint_that_covers_reasoning_applies_from_the_first_token(qwen_vocab, qwen_compiler, qwen_parser):
    """A structural tag marked covers_reasoning (harmony's tool calls spell the thinking themselves)
    is applied from the first token even though the prompt opened the thinking; the same tag without
    the mark waits for the end of the thinking. The mark is part of the cache key."""
    v = qwen_vocab
    mgr = make(v, qwen_compiler, qwen_parser)
    tag = {"type": "structural_tag", "format": {"type": "const_string", "value": "ok"}}
    covers = Constraint.structural_tag(tag, covers_reasoning=True)
    plain = Constraint.structural_tag(tag)
    assert covers.covers_reasoning and not plain.covers_reasoning and covers.key != plain.key
    prompt = v.encode(PROMPTS["open"])
    mgr.add_request("covers", covers, prompt)
    mgr.add_request("plain", plain, prompt)
    wait_ready(mgr, "covers", "plain")
    assert mgr.status("covers") is RequestStatus.CONSTRAINED
    assert mgr.status("plain") is RequestStatus.THINKING
    row = rows_of(mgr.grammar_bitmask(["covers"]))[0]
    assert allows(row, v.encode("ok")[0]) and not allows(row, v.token_id("</think>"))
    assert mgr.accept_tokens("covers", v.encode("ok") + [v.token_id("<|im_end|>")]).status == "terminated"


def test_prompt_ids_are_checked(qwen_vocab, qwen_compiler):
    """Prompt ids outside the logits width (or not ints) are API misuse: ValueError, nothing stored;
    tensors and arrays are accepted. granite reads the prompt's bytes, so a bad id would otherwise
    surface as an IndexError from inside the parser."""
    import numpy as np
    import torch

    v = qwen_vocab
    mgr = StructuredOutputManager(v, "granite", compiler=qwen_compiler)
    c = Constraint.regex("x")
    for bad in ([10**9], [-1], [v.logits_width], ["a"], [1.5], "text", 7):
        with pytest.raises(ValueError, match="prompt"):
            mgr.add_request("r", c, bad, chat_template_kwargs={"thinking": True})
        assert "r" not in mgr
    prompt = v.encode("<|im_start|>assistant\n")
    mgr.add_request("t", c, torch.tensor(prompt), chat_template_kwargs={"thinking": True})
    mgr.add_request("n", c, np.array(prompt), chat_template_kwargs={"thinking": True})
    mgr.add_request("l", c, tuple(prompt), chat_template_kwargs={"thinking": True})
    wait_ready(mgr, "t", "n", "l")
    assert {mgr.status(r) for r in ("t", "n", "l")} == {RequestStatus.THINKING}
