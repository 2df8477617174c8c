"""Answer reservation (structured_output/step/reserve.py): with ``max_tokens`` from "just enough" upwards, a stand-in
model that never stops thinking (and never wants to stop its answer) still ends with a valid answer, on
Qwen3.6 with the testing kit's schemas, with drafts and with a thinking budget; without reservation the same
model's outputs are cut. Hostile input is a clear error for that request alone.
"""

from __future__ import annotations

import json
import random
import time

import jsonschema
import pytest

from thinkgate.reasoning.vocabulary import load_vocabulary
from thinkgate.structured_output import Constraint, RequestStatus, StructuredOutputManager
from thinkgate.testing.standin import run_stand_in
from thinkgate.testing.workload import SCHEMAS


@pytest.fixture(scope="module")
def vocab():
    return load_vocabulary("qwen3_6")


@pytest.fixture(scope="module")
def mgr(vocab):
    m = StructuredOutputManager(vocab, "qwen3", max_num_seqs=4, num_speculative_tokens=3)
    yield m
    m.close()


def _prompt(vocab):
    return vocab.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n")


def _ready(mgr, rid):
    t0 = time.monotonic()
    while not mgr.is_ready(rid):
        assert time.monotonic() - t0 < 120
        time.sleep(0.002)


def _answer(vocab, tokens) -> str:
    text = vocab.decode([t for t in tokens if t not in vocab.stop_token_ids])
    assert "</think>" in text, "the thinking never ended"
    return text.split("</think>", 1)[1]


def _need(mgr, rid) -> int:
    req = mgr._requests[rid]
    return req.reserve.start_len + 1  # the answer's shortest completion and qwen3's one-token </think>


@pytest.mark.parametrize("i", range(len(SCHEMAS)))
def test_never_ending_thinker_still_answers_validly(vocab, mgr, i):
    schema = SCHEMAS[i][0]
    rng = random.Random(i)
    think = vocab.encode(" hmm")[0]
    rid = f"probe{i}"
    mgr.add_request(rid, Constraint.json_schema(schema), _prompt(vocab), max_tokens=4096, reserve_answer=True)
    _ready(mgr, rid)
    need = _need(mgr, rid)
    mgr.remove_request(rid)
    for n in (need, need + 1, need + 3, need + 12, need + 40):
        for drafts in ((0, 3) if n >= need + 4 else (0,)):
            rid = f"s{i}-{n}-{drafts}"
            mgr.add_request(rid, Constraint.json_schema(schema), _prompt(vocab), max_tokens=n, reserve_answer=True)
            _ready(mgr, rid)
            run = run_stand_in(mgr, rid, n, think_token=think, rng=rng, num_drafts=drafts)
            assert run.status == "terminated", (n, drafts, run.message, vocab.decode(run.tokens)[-200:])
            assert len(run.tokens) <= n
            jsonschema.validate(json.loads(_answer(vocab, run.tokens)), schema)
            mgr.remove_request(rid)


def test_without_reservation_the_same_model_is_cut(vocab, mgr):
    schema = SCHEMAS[0][0]
    rid = "cut"
    mgr.add_request(rid, Constraint.json_schema(schema), _prompt(vocab), max_tokens=40)
    _ready(mgr, rid)
    run = run_stand_in(mgr, rid, 40, think_token=vocab.encode(" hmm")[0], rng=random.Random(0))
    assert run.status == "ok" and len(run.tokens) == 40  # cut by max_tokens while still thinking
    mgr.remove_request(rid)


def test_reservation_with_a_thinking_budget(vocab, mgr):
    """The smaller of the two budgets ends the thinking: here max_thinking_tokens=5."""
    schema = SCHEMAS[1][0]
    rid = "budget"
    mgr.add_request(rid, Constraint.json_schema(schema), _prompt(vocab), max_tokens=200, reserve_answer=True,
                    max_thinking_tokens=5)
    _ready(mgr, rid)
    run = run_stand_in(mgr, rid, 200, think_token=vocab.encode(" hmm")[0], rng=random.Random(1))
    assert vocab.decode(run.tokens[:6]).endswith("</think>")
    assert run.status == "terminated", run.message
    jsonschema.validate(json.loads(_answer(vocab, run.tokens)), schema)
    mgr.remove_request(rid)


@pytest.mark.parametrize("max_tokens", [True, 0, -3, 2.5, "64", [64]])
def test_bad_max_tokens_is_a_value_error(vocab, mgr, max_tokens):
    with pytest.raises(ValueError, match="max_tokens"):
        mgr.add_request("bad", Constraint.json_schema(SCHEMAS[0][0]), _prompt(vocab), max_tokens=max_tokens,
                        reserve_answer=True)
    assert "bad" not in mgr


def test_reserve_answer_needs_max_tokens_and_a_constraint(vocab, mgr):
    with pytest.raises(ValueError, match="needs max_tokens"):
        mgr.add_request("bad", Constraint.json_schema(SCHEMAS[0][0]), _prompt(vocab), reserve_answer=True)
    with pytest.raises(ValueError, match="needs a constraint"):
        mgr.add_request("bad", None, _prompt(vocab), max_tokens=10, reserve_answer=True)
    with pytest.raises(ValueError, match="reserve_answer must be a bool"):
        mgr.add_request("bad", Constraint.json_schema(SCHEMAS[0][0]), _prompt(vocab), max_tokens=10,
                        reserve_answer="yes")
    assert "bad" not in mgr


def test_impossible_budget_fails_that_request_alone(vocab, mgr):
    """A grammar whose shortest output does not fit: ERROR when its compile resolves, ValueError at
    add_request once the compile is known; a request beside it is untouched."""
    schema = {"type": "object", "properties": {"k": {"type": "string", "minLength": 30}}, "required": ["k"]}
    c = Constraint.json_schema(schema)
    mgr.add_request("ok", Constraint.json_schema(SCHEMAS[0][0]), _prompt(vocab), max_tokens=300, reserve_answer=True)
    try:
        mgr.add_request("tight", c, _prompt(vocab), max_tokens=5, reserve_answer=True)
        _ready(mgr, "tight")
        assert mgr.status("tight") is RequestStatus.ERROR
        assert "more than max_tokens=5" in mgr.error("tight")
        mgr.remove_request("tight")
    except ValueError as e:  # the compile was already known
        assert "more than max_tokens=5" in str(e)
    with pytest.raises(ValueError, match="more than max_tokens=5"):
        mgr.add_request("tight2", c, _prompt(vocab), max_tokens=5, reserve_answer=True)
    assert "tight2" not in mgr
    _ready(mgr, "ok")
    run = run_stand_in(mgr, "ok", 300, think_token=vocab.encode(" hmm")[0], rng=random.Random(2))
    assert run.status == "terminated"
    mgr.remove_request("ok")


def test_constraint_report_says_how_each_output_was_constrained(vocab):
    from thinkgate.testing.streams import replay

    with StructuredOutputManager(vocab, None, max_num_seqs=4) as m:
        end = sorted(vocab.stop_token_ids)[0]
        cases = {
            "enforced": (Constraint.json_schema({"type": "array", "items": {"type": "integer"}}), "[1,2]"),
            "checked": (Constraint.json_schema({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
                        "[1,2]"),
            "failed": (Constraint.json_schema({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}),
                       "[1,1]"),
            "incomplete": (Constraint.json_schema({"type": "array", "items": {"type": "integer"}}), "[1,"),
        }
        for rid, (c, text) in cases.items():
            m.add_request(rid, c)
            _ready(m, rid)
            ids = vocab.encode(text) + ([] if rid == "incomplete" else [end])
            replay(m, rid, ids, check_mask=False)
            rep = m.constraint_report(rid)
            assert rep.outcome == rid, (rid, rep)
            if rid == "checked":
                assert rep.checked_keywords == ("uniqueItems at #",)
            if rid == "failed":
                assert "uniqueItems" in rep.cause or "unique" in rep.cause.lower(), rep.cause
            assert rep.as_dict()["outcome"] == rid
        m.add_request("free", None)
        assert m.constraint_report("free").outcome == "unconstrained"


def test_report_names_the_steered_reservation(vocab, mgr):
    rid = "rep"
    mgr.add_request(rid, Constraint.json_schema(SCHEMAS[0][0]), _prompt(vocab), max_tokens=40, reserve_answer=True)
    _ready(mgr, rid)
    run_stand_in(mgr, rid, 40, think_token=vocab.encode(" hmm")[0], rng=random.Random(3))
    rep = mgr.constraint_report(rid)
    assert rep.outcome == "enforced" and rep.reservation == "steering", rep
    mgr.remove_request(rid)


def test_the_response_carries_the_constraint_report(vocab, mgr):
    """The front end's response has the documented extension field (whole and streamed) when given the
    manager's report; none without it; anything else is a ValueError."""
    from thinkgate.structured_output import Parser
    from thinkgate.structured_output.frontend.parse_result import CONSTRAINT_FIELD

    rid = "resp"
    mgr.add_request(rid, Constraint.json_schema(SCHEMAS[0][0]), _prompt(vocab), max_tokens=40, reserve_answer=True)
    _ready(mgr, rid)
    run = run_stand_in(mgr, rid, 40, think_token=vocab.encode(" hmm")[0], rng=random.Random(4))
    rep = mgr.constraint_report(rid)
    mgr.remove_request(rid)
    view = Parser(vocab, reasoning="qwen3").request(prompt_token_ids=_prompt(vocab))
    choice = view.parse(run.tokens, constraint=rep).to_openai()
    assert choice[CONSTRAINT_FIELD] == {"outcome": "enforced", "cause": None, "checked_keywords": [],
                                        "reservation": "steering"}
    assert json.loads(choice["message"]["content"]) is not None
    assert CONSTRAINT_FIELD not in view.parse(run.tokens).to_openai()
    stream = Parser(vocab, reasoning="qwen3").request(prompt_token_ids=_prompt(vocab))
    for t in run.tokens:
        stream.parse_delta([t])
    assert stream.finish("stop", constraint=rep).to_openai()[CONSTRAINT_FIELD]["outcome"] == "enforced"
    with pytest.raises(ValueError, match="ConstraintReport"):
        view.parse(run.tokens, constraint={"outcome": "enforced"})
