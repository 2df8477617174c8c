"""A request that thinks is schedulable at once; its constraint compiles while it thinks.

The compile is held open here by a compiler whose futures the test completes (with the real compiled
grammar), so every case is deterministic: thinking while compiling, the end of thinking held off by
the rows (drafts included), content committed before the grammar exists (fed to it when it does), a
compile that fails while the request thinks, and families whose end cannot be held by token ids.
"""

from __future__ import annotations

import json
from concurrent.futures import Future

import numpy as np
import pytest

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.structured_output import Compiler, Constraint, RequestStatus, StructuredOutputManager

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
THINK = "<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n<think>\n"


class HeldCompiler:
    """The real compiler behind futures the test completes when it chooses."""

    def __init__(self, real: Compiler) -> None:
        self.real = real
        self.futures: list[tuple[Constraint, Future]] = []

    def submit(self, constraint: Constraint, *, timeout_s: float | None = None) -> Future:
        fut: Future = Future()
        self.futures.append((constraint, fut))
        return fut

    def mark_overdue(self, fut: Future) -> None:
        pass

    def __getattr__(self, name: str):  # the vocabulary and the rest: the real compiler's
        return getattr(self.real, name)

    def finish(self, i: int = -1, exc: BaseException | None = None) -> None:
        constraint, fut = self.futures[i]
        fut.set_running_or_notify_cancel()
        if exc is not None:
            fut.set_exception(exc)
        else:
            fut.set_result(self.real.compile(constraint, timeout=120))


@pytest.fixture(scope="module")
def real(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=1)
    yield c
    c.close()


def _mgr(vocab, held, parser="qwen3", k=3):
    return StructuredOutputManager(vocab, parser, compiler=held, max_num_seqs=4, num_speculative_tokens=k,
                                   num_fill_threads=1, compile_while_thinking=True)


def _allows(row, t):
    return bool((int(row[t >> 5]) >> (t & 31)) & 1)


def test_thinks_while_compiling_and_the_end_is_held_off(qwen_vocab, real):
    v = qwen_vocab
    held = HeldCompiler(real)
    mgr = _mgr(v, held)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(THINK))
    assert mgr.is_ready("r") and not mgr.is_compiled("r")
    assert mgr.status("r") is RequestStatus.THINKING
    end, call = v.token_id("</think>"), v.token_id("<tool_call>")
    words = v.encode(" let me see")
    batch = mgr.grammar_bitmask([("r", words[:2])])
    assert batch.logits_indices.tolist() == [0, 1, 2]
    for row in batch.bitmask.numpy():
        assert not _allows(row, end) and not _allows(row, call)
        assert all(_allows(row, t) for t in words + v.encode('{"a": 1}'))
        assert not any(_allows(row, t) for t in range(v.vocab_size, v.logits_width))
    # a draft that would end the thinking: its own row bans it, no row after it
    batch = mgr.grammar_bitmask([("r", words[:1] + [end] + words[:1])])
    assert batch.logits_indices.tolist() == [0, 1]
    assert not _allows(batch.bitmask[1].numpy(), end)
    assert mgr.accept_tokens("r", words).status == "ok"
    held.finish()
    assert mgr.is_compiled("r") and mgr.status("r") is RequestStatus.THINKING
    # compiled: the ordinary thinking rows (only <tool_call>, which the grammar cannot start with)
    row = mgr.grammar_bitmask(["r"]).bitmask[0].numpy()
    assert _allows(row, end) and not _allows(row, call)
    body = v.encode(json.dumps({"a": 7})) + [v.token_id("<|im_end|>")]
    assert mgr.accept_tokens("r", [end] + body).status == "terminated"


@pytest.mark.parametrize("valid", [True, False])
def test_content_before_the_grammar_waits_for_it(qwen_vocab, real, valid):
    """An engine that does not mask commits the end of thinking and content: the request leaves the
    schedule until its compile is done, then the content is fed (an invalid one is its ERROR)."""
    v = qwen_vocab
    held = HeldCompiler(real)
    mgr = _mgr(v, held)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(THINK))
    mgr.add_request("o", Constraint.json_schema(SCHEMA), v.encode(THINK))
    text = '{"a": 12' if valid else '{"b": 1'
    assert mgr.accept_tokens("r", v.encode(" ok") + [v.token_id("</think>")] + v.encode(text)).status == "ok"
    assert mgr.status("r") is RequestStatus.COMPILING and not mgr.is_ready("r")
    with pytest.raises(ValueError, match="still compiling"):
        mgr.grammar_bitmask(["r"])
    assert mgr.grammar_bitmask(["o"]) is not None  # the other one is not held back
    held.finish(0)
    assert mgr.is_ready("r")
    if valid:
        assert mgr.status("r") is RequestStatus.CONSTRAINED
        row = mgr.grammar_bitmask(["r"]).bitmask[0].numpy()
        assert _allows(row, v.encode("}")[0]) and not _allows(row, v.encode('"')[0])
        assert mgr.accept_tokens("r", v.encode("}") + [v.token_id("<|im_end|>")]).status == "terminated"
    else:
        assert mgr.status("r") is RequestStatus.ERROR
        assert "is not allowed by the json_schema constraint" in mgr.error("r")
    assert mgr.status("o") is RequestStatus.THINKING


def test_a_compile_that_fails_while_thinking_errors_only_that_request(qwen_vocab, real):
    v = qwen_vocab
    held = HeldCompiler(real)
    mgr = _mgr(v, held)
    mgr.add_request("bad", Constraint.json_schema(SCHEMA), v.encode(THINK))
    mgr.add_request("ok", Constraint.json_schema(SCHEMA), v.encode(THINK))
    assert mgr.accept_tokens("bad", v.encode(" hm")).status == "ok"
    held.finish(0, ValueError("invalid JSON schema: test"))
    batch = mgr.grammar_bitmask(["bad", "ok"])
    assert batch.request_ids == ["ok"]
    assert mgr.status("bad") is RequestStatus.ERROR and mgr.error("bad") == "invalid JSON schema: test"
    assert mgr.accept_tokens("bad", v.encode(" hm")).status == "error"


def test_off_by_default_a_thinking_request_waits_for_its_compile(qwen_vocab, real):
    v = qwen_vocab
    held = HeldCompiler(real)
    mgr = StructuredOutputManager(v, "qwen3", compiler=held, max_num_seqs=2)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(THINK))
    assert not mgr.is_ready("r") and mgr.status("r") is RequestStatus.COMPILING
    held.finish()
    assert mgr.is_ready("r") and mgr.status("r") is RequestStatus.THINKING


def test_families_whose_end_is_text_wait_for_the_compile(qwen_vocab, real):
    """Granite ends its thinking on text that ordinary tokens spell: no id set holds it off, so its
    request is not schedulable before its grammar exists (as an undecided first token is not)."""
    v = qwen_vocab
    held = HeldCompiler(real)
    granite = get_reasoning_parser("granite")(v)
    tracker = granite.new_tracker(v.encode("x"), {"thinking": True})
    assert not tracker.ended and tracker.ending_token_ids() is None
    mgr = _mgr(v, held, parser=granite)
    mgr.add_request("g", Constraint.json_schema(SCHEMA), v.encode("x"), chat_template_kwargs={"thinking": True})
    assert not mgr.is_ready("g") and mgr.status("g") is RequestStatus.COMPILING
    held.finish()
    assert mgr.is_ready("g") and mgr.status("g") is RequestStatus.THINKING


@pytest.mark.parametrize("family", ["qwen3", "deepseek_r1", "deepseek_v4"])
def test_ending_token_ids_are_exactly_the_ids_that_end_it(family, qwen_vocab, deepseek_vocab):
    """The tracker's contract, checked against its own scan over every marker id and a sample of
    ordinary ids: an id is in the set iff scanning it ends the thinking."""
    v = qwen_vocab if family == "qwen3" else deepseek_vocab
    parser = get_reasoning_parser(family)(v)
    prompt = v.encode(THINK) if family == "qwen3" else v.encode("<｜User｜>Who?<｜Assistant｜><think>")
    tracker = parser.new_tracker(prompt, {"thinking": True})
    assert not tracker.ended
    rng = np.random.default_rng()
    candidates = set(parser.reasoning_end_token_ids | parser.implicit_reasoning_end_token_ids)
    candidates |= {int(t) for t in rng.integers(0, v.vocab_size, 300)}
    for after in ([], v.encode(" fine")):
        ending = tracker.ending_token_ids(after)
        assert ending is not None and ending
        for t in candidates:
            assert (t in ending) == (tracker.scan([*after, t]) is not None), (family, t)
