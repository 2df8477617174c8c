"""The per-request state machine driven one token at a time, as an engine's grammar object drives it
(SGLang's ``ThinkgateGrammar`` is a thin shell over these calls; its engine tests need SGLang, these do
not): ``try_token`` refuses a token with nothing moved, ``rollback`` undoes thinking, its end and
content alike, ``fill_row`` writes the thinking / pending / forced / grammar / stop-only row, a dead
end allows only the stop tokens until a rollback goes back before it. The last test walks the same
scripts through the batch manager and checks that both drivers give the same row at every position.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.structured_output import Compiler, Constraint, RequestStatus, StructuredOutputManager
from thinkgate.structured_output.step.request import RequestContext, StructuredRequest

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
PROMPT = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n"
WINDOW = 200


@pytest.fixture(scope="module")
def compiler(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=2)
    yield c
    c.close()


@pytest.fixture(scope="module")
def ctx(qwen_vocab, compiler):
    parser = get_reasoning_parser("qwen3")(qwen_vocab)
    return RequestContext(qwen_vocab, compiler, parser.implicit_reasoning_end_token_ids, 30.0,
                          thread_safe_rows=True), parser


def request(ctx, compiler, constraint, prompt=None, think_limit=None):
    context, parser = ctx
    v = context.vocabulary
    tracker = None if prompt is None else parser.new_tracker(v.encode(prompt), {})
    return StructuredRequest.from_compiled(context, "r", compiler.compile(constraint), tracker,
                                           think_limit=think_limit, rollback_window=WINDOW)


def row_of(req, width):
    mask = torch.full((1, (width + 31) // 32), -1, dtype=torch.int32)
    dead = req.fill_row(mask, 0)
    return mask[0].numpy().copy(), dead


def allowed(row, vocab_size):
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


def test_a_refused_token_moves_nothing_and_the_request_goes_on(ctx, compiler, qwen_vocab):
    v = qwen_vocab
    r = request(ctx, compiler, Constraint.json_schema(SCHEMA))
    assert r.status is RequestStatus.CONSTRAINED
    for t in v.encode('{"city": '):
        assert r.try_token(t) is None
    n_out, n_content = r.n_out, r.n_content
    bad = v.encode("5")[0]
    why = r.try_token(bad)
    assert why is not None and "is not allowed by the json_schema constraint" in why and "'5'" in why
    assert f"at output position {n_out} (content position {n_content})" in why
    assert (r.n_out, r.n_content, r.status) == (n_out, n_content, RequestStatus.CONSTRAINED)
    for t in v.encode('"Rome"}'):
        assert r.try_token(t) is None
    assert not r.is_finished()
    assert r.try_token(v.token_id("<|im_end|>")) is None
    assert r.is_finished() and r.status is RequestStatus.TERMINATED
    assert r.try_token(v.encode("x")[0]) is None  # after the end: ignored, as SGLang's own grammar does


def test_the_whitespace_bound_refuses_with_the_same_message_as_the_manager(ctx, compiler, qwen_vocab):
    v = qwen_vocab
    r = request(ctx, compiler, Constraint.json_schema(SCHEMA))
    tokens = v.encode('{"city":') + v.encode(" " * 40)
    why = None
    for t in tokens:
        why = r.try_token(t)
        if why is not None:
            break
    assert why is not None and why.endswith("whitespace characters in a gap between JSON tokens: "
                                            "max_whitespace=16)")
    with StructuredOutputManager(v, None, compiler=compiler, max_num_seqs=1) as mgr:
        mgr.add_request("r", Constraint.json_schema(SCHEMA))
        while not mgr.is_ready("r"):
            pass
        res = mgr.accept_tokens("r", tokens)
        assert res.status == "error" and res.message == why  # one message builder for both drivers


def test_a_dead_end_allows_only_stops_until_a_rollback_goes_before_it(ctx, compiler, qwen_vocab):
    """``uniqueItems`` is checked on the output: where only the end could follow a duplicate, the row
    allows only the stop tokens, the request reports itself finished, a non-stop token is refused, a
    stop token is ignored; rolling back before the dead end clears it."""
    v = qwen_vocab
    schema = json.dumps({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    r = request(ctx, compiler, Constraint.json_schema(schema))
    for t in v.encode("[1, 1]"):
        assert r.try_token(t) is None
    assert not r.is_finished() and r.dead_end_message is None
    row, dead = row_of(r, v.logits_width)
    assert dead is not None and "uniqueItems" in dead and r.dead_end_message == dead
    assert np.flatnonzero(allowed(row, v.vocab_size)).tolist() == sorted(v.stop_token_ids)
    assert r.is_finished()
    assert "uniqueItems" in r.try_token(v.encode("x")[0])
    stop = v.token_id("<|im_end|>")
    assert r.try_token(stop) is None
    again, dead2 = row_of(r, v.logits_width)
    assert dead2 is None and np.array_equal(again, row)  # still at the dead end: the stop-only row
    r.rollback(2)  # the stop token, then "]"
    assert not r.is_finished() and r.dead_end_message is None
    for t in v.encode("0]") + [stop]:
        assert r.try_token(t) is None
    assert r.is_finished() and r.dead_end_message is None and r.status is RequestStatus.TERMINATED


def test_rollback_across_the_end_of_thinking_restores_the_thinking_row(ctx, compiler, qwen_vocab):
    v = qwen_vocab
    r = request(ctx, compiler, Constraint.json_schema(SCHEMA), PROMPT)
    assert r.status is RequestStatus.THINKING
    before, _ = row_of(r, v.logits_width)
    toks = v.encode('hmm</think>{"city"')
    for t in toks:
        assert r.try_token(t) is None
    assert r.status is RequestStatus.CONSTRAINED and r.n_content > 0
    r.rollback(len(toks))
    assert r.status is RequestStatus.THINKING and (r.n_out, r.n_content) == (0, 0)
    after, _ = row_of(r, v.logits_width)
    assert np.array_equal(before, after)
    tc = v.token_id("<tool_call>")  # Qwen's implicit end: it cannot start a JSON object, so it is banned
    assert not allowed(before, v.vocab_size)[tc]
    for t in toks:
        assert r.try_token(t) is None
    for t in v.encode(': "Oslo"}') + [v.token_id("<|im_end|>")]:
        assert r.try_token(t) is None
    assert r.is_finished()


def test_an_implicit_end_the_grammar_rejects_leaves_the_request_thinking(ctx, compiler, qwen_vocab):
    v = qwen_vocab
    r = request(ctx, compiler, Constraint.json_schema(SCHEMA), PROMPT)
    assert r.try_token(v.encode("hmm")[0]) is None
    why = r.try_token(v.token_id("<tool_call>"))
    assert why is not None and "'<tool_call>'" in why and "is not allowed by the json_schema constraint" in why
    assert r.status is RequestStatus.THINKING and not r.tracker.ended and r.n_out == 1
    assert r.try_token(v.token_id("</think>")) is None and r.status is RequestStatus.CONSTRAINED


def test_rollback_past_its_window_is_refused_and_moves_nothing(ctx, compiler, qwen_vocab):
    v = qwen_vocab
    r = request(ctx, compiler, Constraint.json_schema(SCHEMA))
    for t in v.encode('{"'):
        assert r.try_token(t) is None
    n = r.n_out
    with pytest.raises(ValueError, match=f"cannot roll back {n + 1} tokens: {n} can be \\(at most {WINDOW}\\)"):
        r.rollback(n + 1)
    assert r.n_out == n
    r.rollback(0)
    r.rollback(-1)
    assert r.n_out == n
    unrecorded = StructuredRequest.from_compiled(ctx[0], "u", compiler.compile(Constraint.json_schema(SCHEMA)), None)
    assert unrecorded.try_token(v.encode("{")[0]) is None
    with pytest.raises(ValueError, match="cannot roll back 1 tokens: 0 can be \\(at most 0\\)"):
        unrecorded.rollback(1)


def test_the_budget_forces_the_end_of_thinking_one_row_per_token(ctx, compiler, qwen_vocab):
    v = qwen_vocab
    r = request(ctx, compiler, Constraint.json_schema(SCHEMA), PROMPT, think_limit=2)
    think_row, _ = row_of(r, v.logits_width)
    for t in v.encode(" a b")[:2]:
        assert r.try_token(t) is None
    end = v.token_id("</think>")
    forced, _ = row_of(r, v.logits_width)
    assert np.flatnonzero(allowed(forced, v.vocab_size)).tolist() == [end]
    assert r.forced == (end,)
    assert r.try_token(end) is None and r.status is RequestStatus.CONSTRAINED
    r.rollback(1)  # back to the budget point: forced again
    assert r.status is RequestStatus.THINKING and np.array_equal(row_of(r, v.logits_width)[0], forced)
    r.rollback(1)  # before the budget point: the thinking row, the forced end taken again when reached
    assert r.forced is None and np.array_equal(row_of(r, v.logits_width)[0], think_row)


SCRIPTS = {
    "answer": 'I think {"x"} </think>{"city": "Oslo"}',
    "implicit": "hmm<tool_call>x",
    "closed": '{"city": "Rome"}',
}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_both_drivers_give_the_same_row_at_every_position(ctx, compiler, qwen_vocab, name):
    """The manager (batch driver) and ``fill_row`` (one-token driver) at each prefix of a script: the
    same allowed tokens (no row from the manager = every real token allowed), the same status."""
    v = qwen_vocab
    tool = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "token", "token": "<tool_call>"}, {"type": "const_string", "value": "x"}]}}
    constraint = Constraint.structural_tag(tool) if name == "implicit" else Constraint.json_schema(SCHEMA)
    prompt = PROMPT if name != "closed" else PROMPT + "\n</think>\n\n"
    tokens = v.encode(SCRIPTS[name]) + [v.token_id("<|im_end|>")]
    context, parser = ctx
    with StructuredOutputManager(v, parser, compiler=compiler, max_num_seqs=1) as mgr:
        mgr.add_request("r", constraint, v.encode(prompt))
        while not mgr.is_ready("r"):
            pass
        r = StructuredRequest.from_compiled(context, "r", compiler.compile(constraint),
                                            parser.new_tracker(v.encode(prompt), {}), rollback_window=WINDOW)
        for i, t in enumerate(tokens):
            batch = mgr.grammar_bitmask(["r"])
            want = np.ones(v.vocab_size, dtype=bool) if batch is None else \
                allowed(batch.bitmask[0].numpy().copy(), v.vocab_size)
            got, dead = row_of(r, v.logits_width)
            assert dead is None
            assert np.array_equal(allowed(got, v.vocab_size), want), (name, i)
            assert want[t], (name, i)
            assert r.try_token(t) is None
            res = mgr.accept_tokens("r", [t])
            assert res.ok and mgr.status("r") is r.status, (name, i, res)
        assert r.status is RequestStatus.TERMINATED
