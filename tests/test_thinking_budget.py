"""A per-request thinking budget (``max_thinking_tokens``) forced through the bitmask rows.

A stand-in model follows a script (a long thinking, its own end marker, a JSON answer, a stop token);
a stand-in engine masks, samples greedily (the script's token when its row allows it, else the row's
only token) and verifies drafts. At every row of every step the rows are checked against a reference
computed independently of the manager and of the budget module: the whole-output split of the output
so far (``parser.split``: has the thinking ended? how many tokens were written?) and the family's
end-of-thinking sequence written out as text (``EXPECTED``). Real vocabularies: Qwen3.6, DeepSeek V4,
Magistral's tekken; gpt-oss harmony on the synthetic vocabulary (no offline one has its tokens);
granite's text markers on Qwen3.6.
"""

from __future__ import annotations

import json
import random
import time
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import pytest

from thinkgate.testing.vocabularies import synthetic_vocabulary
from thinkgate.reasoning import get_reasoning_parser
from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary
from thinkgate.structured_output import Compiler, Constraint, RequestStatus, StructuredOutputManager

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
ANSWER = '{"a": 17}'


@dataclass(frozen=True)
class Family:
    parser: str
    vocab: str
    prompt: str
    think: str  # the model's own thinking, its opening and its end marker included
    stop: str
    kwargs: dict = field(default_factory=dict)


FAMILIES = {
    "qwen3": Family("qwen3", "qwen3_6", "<|im_start|>user\nWho?<|im_end|>\n<|im_start|>assistant\n<think>\n",
                    " The user asks who. I should think about it at length, step by step, and only then answer."
                    "</think>", "<|im_end|>"),
    "deepseek_v4": Family("deepseek_v4", "deepseek_v4", "<｜User｜>Who?<｜Assistant｜><think>",
                          "The user asks who. I should think about it at length, step by step, and only then "
                          "answer.</think>", "<｜end▁of▁sentence｜>", {"thinking": True}),
    "deepseek_r1": Family("deepseek_r1", "deepseek_v4", "<｜User｜>Who?<｜Assistant｜>",
                          "The user asks who. I should think about it at length, step by step, and only then "
                          "answer.</think>", "<｜end▁of▁sentence｜>"),
    "mistral": Family("mistral", "magistral", "[INST]Who?[/INST]",
                      "[THINK]The user asks who. I should think about it at length, step by step, and only then "
                      "answer.[/THINK]", "</s>"),
    "gptoss": Family("openai_gptoss", "harmony", "<|start|>user<|message|>Who?<|end|><|start|>assistant",
                     "<|channel|>analysis<|message|>The user asks who. I should think about it at length, step "
                     "by step, and only then answer.<|end|><|start|>assistant<|channel|>final<|message|>",
                     "<|return|>"),
    "granite": Family("granite", "qwen3_6", "<|im_start|>assistant\n",
                      "Here is my thought process:\nThe user asks who. I should think about it at length, step "
                      "by step, and only then answer.\nHere is my response:", "<|im_end|>", {"thinking": True}),
    "olmo3": Family("olmo3", "qwen3_6", "<|im_start|>assistant\n<think>",
                    "The user asks who. I should think about it at length, step by step, and only then answer."
                    "</think>", "<|im_end|>"),
    "hunyuan": Family("hunyuan_a13b", "qwen3_6", "<|startoftext|>Who?<|extra_0|>",
                      "<think>\nThe user asks who. I should think about it at length, step by step, and only then "
                      "answer.\n</think>\n<answer>", "<|im_end|>"),
}

# the end of thinking each family's rows force, by budget (the state a budget of that size reaches)
EXPECTED: dict[tuple[str, int], str] = {
    ("qwen3", 0): "</think>", ("qwen3", 1): "</think>", ("qwen3", 9): "</think>",
    ("deepseek_v4", 0): "</think>", ("deepseek_v4", 1): "</think>", ("deepseek_v4", 9): "</think>",
    ("deepseek_r1", 0): "</think>", ("deepseek_r1", 9): "</think>",
    ("mistral", 0): "[THINK][/THINK]", ("mistral", 1): "[/THINK]", ("mistral", 9): "[/THINK]",
    ("gptoss", 0): "<|channel|>final<|message|>",
    ("gptoss", 1): "<|start|>assistant<|channel|>final<|message|>",
    ("gptoss", 9): "<|end|><|start|>assistant<|channel|>final<|message|>",
    ("granite", 0): "Here is my response:", ("granite", 1): " is my response:",
    ("granite", 12): "\nHere is my response:",
    ("olmo3", 0): "</think>", ("olmo3", 9): "</think>",
    ("hunyuan", 0): "\n</think>\n<answer>", ("hunyuan", 9): "\n</think>\n<answer>",
}


_VOCABS: dict[str, Vocabulary] = {}


def vocab_of(name: str) -> Vocabulary:
    if name not in _VOCABS:
        _VOCABS[name] = synthetic_vocabulary(name) if name == "harmony" else load_vocabulary(name)  # type: ignore[arg-type]
    return _VOCABS[name]


class Model:
    """What the stand-in model wants to write after ``out``: its thinking script, then (once the
    thinking has ended, on its own or forced) its answer and a stop token; filler past the script."""

    def __init__(self, fam: Family, v: Vocabulary) -> None:
        self.fam = fam
        self.v = v
        self.parser = get_reasoning_parser(fam.parser)(v)
        self.prompt = v.encode(fam.prompt)
        self.think = v.encode(fam.think)
        self.answer = v.encode(ANSWER) + [v.token_id(fam.stop)]
        self.filler = v.encode(" more")[0]

    def split(self, out: list[int]):
        return self.parser.split(out, self.prompt, self.fam.kwargs)

    def want(self, out: list[int]) -> int:
        sp = self.split(out)
        if sp.end is not None:
            k = len(sp.content_ids)
            return self.answer[k] if k < len(self.answer) else self.answer[-1]
        return self.think[len(out)] if len(out) < len(self.think) else self.filler


def allowed(row: np.ndarray) -> np.ndarray:
    return np.nonzero(np.unpackbits(row.view(np.uint8), bitorder="little"))[0]


@dataclass
class Live:
    model: Model
    budget: int | None
    expected: list[int] | None  # the forced sequence, written out
    proposer: object = None     # out -> drafts (None: the model's own continuation, masks ignored)
    out: list[int] = field(default_factory=list)
    done: bool = False
    forced_rows: int = 0
    unconstrained: bool = False  # never terminates in the manager: done once the answer is written


def check_row(live: Live, prefix: list[int], row: np.ndarray | None) -> None:
    """The reference: past the budget and still thinking (whole-output split), the row allows exactly
    the expected forced token; before the budget, no row is a forcing row."""
    sp = live.model.split(prefix)
    thinking = sp.end is None and not sp.ended_before
    if live.budget is not None and thinking and len(prefix) >= live.budget:
        assert row is not None, (len(prefix), live.budget)
        assert allowed(row).tolist() == [live.expected[len(prefix) - live.budget]], (len(prefix), live.budget)
        live.forced_rows += 1
    elif thinking:
        assert row is None or len(allowed(row)) > 1


def drive(mgr: StructuredOutputManager, lives: dict[str, Live], k: int, max_steps: int = 300) -> None:
    """Steps until every request terminated: rows checked against the reference, greedy verification of
    drafts (accept while a draft equals the engine's choice at its row), commit."""
    for _ in range(max_steps):
        sched = [rid for rid, lv in lives.items() if not lv.done]
        if not sched:
            return
        entries, drafts_of = [], {}
        for rid in sched:
            lv = lives[rid]
            if k:
                if lv.proposer is not None:
                    d = lv.proposer(lv.out)[:k]
                else:
                    d = []
                    for _ in range(k):
                        d.append(lv.model.want(lv.out + d))
                entries.append((rid, d))
                drafts_of[rid] = d
            else:
                entries.append(rid)
                drafts_of[rid] = []
        batch = mgr.grammar_bitmask(entries)
        rows: dict[int, np.ndarray] = {}
        if batch is not None:
            for i, li in enumerate(batch.logits_indices.tolist()):
                rows[li] = batch.bitmask[i].numpy().copy()
        base = 0
        for rid in sched:
            lv = lives[rid]
            d = drafts_of[rid]
            commit: list[int] = []
            for j in range(len(d) + 1):
                prefix = lv.out + d[:j]
                row = rows.get(base + j)
                check_row(lv, prefix, row)
                t = lv.model.want(prefix)
                if row is not None and t not in set(allowed(row).tolist()):
                    a = allowed(row)
                    assert len(a) == 1, (rid, "the model's token is refused by a grammar row", len(prefix))
                    t = int(a[0])
                commit.append(t)
                if t in lv.model.v.stop_token_ids or j == len(d) or d[j] != t:
                    break  # the engine stops at a stop token, and at the first draft it does not take
            base += 1 + len(d)
            res = mgr.accept_tokens(rid, commit)
            assert res.ok, res.message
            lv.out += commit
            if res.status == "terminated":
                lv.done = True
            elif lv.unconstrained:
                sp = lv.model.split(lv.out)
                lv.done = sp.end is not None and len(sp.content_ids) >= len(lv.model.answer)
    raise AssertionError("did not finish")


_COMPILERS: dict[str, Compiler] = {}


def manager(v: Vocabulary, parser: str | None, k: int = 0, cwt: bool = False) -> StructuredOutputManager:
    """A manager on a compiler shared per vocabulary (its cache makes the schema's compile free)."""
    if v.name not in _COMPILERS:
        _COMPILERS[v.name] = Compiler(v, num_threads=1)
    return StructuredOutputManager(v, parser, compiler=_COMPILERS[v.name], max_num_seqs=4, num_speculative_tokens=k,
                                   num_fill_threads=1, compile_while_thinking=cwt)


def wait_ready(mgr: StructuredOutputManager, *rids: str) -> None:
    deadline = time.monotonic() + 120
    while not all(mgr.is_ready(r) for r in rids):
        assert time.monotonic() < deadline
        time.sleep(0.005)


def check_output(live: Live) -> None:
    """The output completed valid; the thinking ended exactly where the budget put it."""
    m = live.model
    sp = m.split(live.out)
    assert sp.end is not None
    content = m.v.decode([t for t in sp.content_ids if t != m.v.token_id(m.fam.stop)])
    assert json.loads(content) == json.loads(ANSWER)
    natural = m.split(m.think).end
    if live.budget is not None and live.budget <= natural.offset:
        assert sp.end.offset == live.budget + len(live.expected) - 1
        assert live.out[live.budget:sp.end.offset + 1] == live.expected
        assert live.forced_rows >= 1
    else:
        assert live.out[:natural.offset + 1] == m.think[:natural.offset + 1]  # untouched: it ended on its own
        assert sp.end.offset == natural.offset


def run(fam_name: str, budget: int | None, k: int = 0, cwt: bool = False, proposer=None,
        constrained: bool = True) -> Live:
    fam = FAMILIES[fam_name]
    v = vocab_of(fam.vocab)
    model = Model(fam, v)
    expected = v.encode(EXPECTED[fam_name, budget]) if (fam_name, budget) in EXPECTED else None
    mgr = manager(v, fam.parser, k, cwt)
    live = Live(model, budget, expected, proposer, unconstrained=not constrained)
    mgr.add_request("r", Constraint.json_schema(SCHEMA) if constrained else None, model.prompt,
                    chat_template_kwargs=fam.kwargs, max_thinking_tokens=budget)
    if not cwt:
        wait_ready(mgr, "r")
    drive(mgr, {"r": live}, k)
    check_output(live)
    mgr.close()
    return live


# ================================================================================================


@pytest.mark.parametrize("fam,budget", sorted(EXPECTED))
def test_budget_forces_the_family_end_then_the_grammar_completes_valid_json(fam, budget):
    run(fam, budget)


@pytest.mark.parametrize("fam,budget", [("qwen3", 0), ("qwen3", 9), ("mistral", 0), ("mistral", 9),
                                        ("gptoss", 9), ("granite", 0), ("granite", 12), ("deepseek_v4", 1)])
@pytest.mark.parametrize("k", [1, 3])
def test_drafts_that_deviate_at_the_budget_get_forcing_rows(fam, budget, k):
    """The drafter proposes the model's own continuation (more thinking): the budget point falls inside
    the drafts at some step, the deviating draft's row forces the right token and it is rejected; the
    output is the same as without drafts."""
    plain = run(fam, budget).out
    assert run(fam, budget, k=k).out == plain


@pytest.mark.parametrize("fam,budget", [("qwen3", 9), ("mistral", 0), ("gptoss", 9), ("gptoss", 0),
                                        ("granite", 12), ("deepseek_r1", 9), ("hunyuan", 9)])
@pytest.mark.parametrize("k", [2, 4])
def test_drafts_that_follow_the_forced_end_are_accepted_into_the_grammar(fam, budget, k):
    """An oracle drafter proposes exactly the output (forced tokens and grammar tokens): every draft is
    accepted, across the budget point, through the forced sequence and into the JSON."""
    plain = run(fam, budget).out
    seen: list[int] = []

    def oracle(out):
        seen.append(len(out))
        return plain[len(out):len(out) + k] or [plain[-1]]

    assert run(fam, budget, k=k, proposer=oracle).out == plain
    assert len(seen) < len(plain) // 2 + 2  # whole drafts accepted: few steps


@pytest.mark.parametrize("fam", ["qwen3", "mistral", "gptoss", "granite", "deepseek_v4"])
def test_the_model_ending_on_its_own_before_the_budget_is_untouched(fam):
    live = run(fam, 500)
    assert live.forced_rows == 0
    assert live.out == run(fam, None).out


@pytest.mark.parametrize("fam,budget", [("qwen3", 9), ("mistral", 0), ("gptoss", 9), ("granite", 12)])
def test_an_unconstrained_request_with_a_budget_gets_forcing_rows(fam, budget):
    live = run(fam, budget, constrained=False)
    assert live.forced_rows == len(live.expected)


@pytest.mark.parametrize("fam,budget", [("qwen3", 0), ("qwen3", 9), ("deepseek_v4", 9), ("mistral", 1)])
@pytest.mark.parametrize("k", [0, 3])
def test_compile_while_thinking_on(fam, budget, k):
    """With compile_while_thinking the request is scheduled at once; the budget forces the end even
    over the rows that hold it off while compiling (the request then waits for its grammar)."""
    live = run(fam, budget, k=k, cwt=True)
    assert live.out == run(fam, budget).out


@pytest.mark.parametrize("fam,budget", [("qwen3", 9), ("mistral", 0), ("gptoss", 9), ("granite", 12),
                                        ("hunyuan", 9)])
def test_multi_token_commits_cross_the_budget_exactly(fam, budget):
    """The whole output committed in random chunks (budget point, forced sequence and content inside
    chunks): accepted, terminated; the grammar saw exactly the content."""
    out = run(fam, budget).out
    fam_ = FAMILIES[fam]
    v = vocab_of(fam_.vocab)
    rng = random.Random(budget)
    for trial in range(4):
        mgr = manager(v, fam_.parser)
        mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(fam_.prompt), chat_template_kwargs=fam_.kwargs,
                        max_thinking_tokens=budget)
        wait_ready(mgr, "r")
        i = 0
        res = None
        cuts = [len(out)] if trial == 0 else []
        while i < len(out):
            n = cuts.pop() if cuts else rng.randint(1, 6)
            res = mgr.accept_tokens("r", out[i:i + n])
            assert res.ok, res.message
            i += n
        assert res is not None and res.status == "terminated"
        mgr.close()


@pytest.mark.parametrize("fam,budget", [("qwen3", 9), ("mistral", 0), ("gptoss", 9), ("granite", 12)])
def test_a_commit_that_ignores_the_forced_row_is_an_error_for_that_request_alone(fam, budget):
    fam_ = FAMILIES[fam]
    v = vocab_of(fam_.vocab)
    model = Model(fam_, v)
    mgr = manager(v, fam_.parser)
    for rid in ("r", "o"):
        mgr.add_request(rid, Constraint.json_schema(SCHEMA), model.prompt, chat_template_kwargs=fam_.kwargs,
                        max_thinking_tokens=budget if rid == "r" else None)
    wait_ready(mgr, "r", "o")
    over = model.think[:budget] + [model.filler]  # one thinking token past the budget
    res = mgr.accept_tokens("r", over)
    assert res.status == "error" and "max_thinking_tokens" in res.message and "forced" in res.message
    assert f"output position {budget}" in res.message
    assert mgr.status("r") is RequestStatus.ERROR
    assert mgr.accept_tokens("o", model.think[:budget + 1]).ok and mgr.status("o") is RequestStatus.THINKING
    batch = mgr.grammar_bitmask(["r", "o"])
    assert batch is None or "r" not in batch.request_ids


@pytest.mark.parametrize("k", [0, 3])
def test_a_request_with_a_budget_beside_one_without(k):
    """Same batch: the budget request is forced, the other thinks on its own and ends on its own; the
    other's output is what it writes alone."""
    fam = FAMILIES["qwen3"]
    v = vocab_of(fam.vocab)
    alone = run("qwen3", None, k=k).out
    mgr = manager(v, fam.parser, k)
    lives = {"b": Live(Model(fam, v), 5, v.encode("</think>")), "n": Live(Model(fam, v), None, None),
             "z": Live(Model(fam, v), 0, v.encode("</think>"))}
    for rid, lv in lives.items():
        mgr.add_request(rid, Constraint.json_schema(SCHEMA), lv.model.prompt, max_thinking_tokens=lv.budget)
    wait_ready(mgr, *lives)
    drive(mgr, lives, k)
    for lv in lives.values():
        check_output(lv)
    assert lives["n"].out == alone and lives["n"].forced_rows == 0
    assert lives["b"].out != alone


@pytest.mark.parametrize("bad", [-1, True, False, 1.0, 2.5, "3", [3], float("nan")])
def test_hostile_budgets_are_refused(bad):
    v = vocab_of("qwen3_6")
    mgr = manager(v, "qwen3")
    with pytest.raises(ValueError, match="max_thinking_tokens"):
        mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(FAMILIES["qwen3"].prompt), max_thinking_tokens=bad)
    assert "r" not in mgr
    mgr.add_request("r", None, v.encode(FAMILIES["qwen3"].prompt), max_thinking_tokens=np.int64(2))  # numpy ints are fine
    assert "r" in mgr


def test_a_budget_needs_a_parser_and_a_family_that_can_force_its_end():
    v = vocab_of("qwen3_6")
    with pytest.raises(ValueError, match="needs a reasoning parser"):
        manager(v, None).add_request("r", None, [], max_thinking_tokens=3)
    harmony = vocab_of("harmony")
    mgr = manager(harmony, "openai_gptoss")
    whole = Constraint.structural_tag({"type": "structural_tag", "format": {"type": "const_string", "value": "x"}},
                                      covers_reasoning=True)
    with pytest.raises(ValueError, match="covers the"):
        mgr.add_request("t", whole, harmony.encode(FAMILIES["gptoss"].prompt), max_thinking_tokens=3)
    assert "t" not in mgr
    # a request whose thinking ended in the prompt: nothing to count, no rows
    qm = manager(v, "qwen3")
    closed = v.encode("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    qm.add_request("c", None, closed, max_thinking_tokens=0)
    assert qm.status("c") is RequestStatus.CONSTRAINED and qm.grammar_bitmask(["c"]) is None


def test_forced_end_token_ids_is_pure_and_exact():
    """The tracker's contract: stepping the sequence ends the thinking on its last token, and asking
    moves nothing."""
    for name, fam in FAMILIES.items():
        v = vocab_of(fam.vocab)
        parser = get_reasoning_parser(fam.parser)(v)
        tracker = parser.new_tracker(v.encode(fam.prompt), fam.kwargs)
        think = v.encode(fam.think)
        natural = parser.split(think, v.encode(fam.prompt), fam.kwargs).end.offset
        for n in range(natural):
            forced = tracker.forced_end_token_ids(think[:n])
            assert forced, (name, n)
            end = tracker.scan(think[:n] + list(forced))
            assert end is not None and end.offset == n + len(forced) - 1 and not end.is_content, (name, n)
        assert not tracker.ended and tracker.scan(think) is not None
        tracker.advance(think)
        assert tracker.forced_end_token_ids() == ()


def test_rows_when_the_budget_point_falls_inside_the_drafts():
    """Budget 2 on Qwen3.6, four drafts: rows 0-1 are thinking rows, row 2 forces ``</think>``; when draft
    2 is ``</think>`` the grammar's rows follow in the same step, when it deviates no row follows it."""
    fam = FAMILIES["qwen3"]
    v = vocab_of(fam.vocab)
    mgr = manager(v, fam.parser, k=4)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(fam.prompt), max_thinking_tokens=2)
    wait_ready(mgr, "r")
    end = v.token_id("</think>")
    a, b, c, d = v.encode(" so we go on")[:4]
    brace, quote = v.encode("{")[0], v.encode('"')[0]
    batch = mgr.grammar_bitmask([("r", [a, b, end, brace])])
    rows = {li: allowed(batch.bitmask[i].numpy()) for i, li in enumerate(batch.logits_indices.tolist())}
    assert sorted(rows) == [0, 1, 2, 3, 4]
    assert len(rows[0]) > 1000 and len(rows[1]) > 1000 and end in rows[1]
    assert rows[2].tolist() == [end]
    assert brace in rows[3] and len(rows[3]) < 100 and quote in rows[4] and brace not in rows[4]
    batch = mgr.grammar_bitmask([("r", [a, b, c, d])])
    assert batch.logits_indices.tolist() == [0, 1, 2]
    assert allowed(batch.bitmask[2].numpy()).tolist() == [end]
    # nothing moved: the same step again gives the same rows; the commit crosses the budget exactly
    assert mgr.grammar_bitmask([("r", [a, b, c, d])]).logits_indices.tolist() == [0, 1, 2]
    assert mgr.accept_tokens("r", [a, b, end, brace]).ok and mgr.status("r") is RequestStatus.CONSTRAINED
    row = allowed(mgr.grammar_bitmask(["r"]).bitmask[0].numpy())
    assert quote in row and brace not in row


@pytest.mark.slow
def test_bench_loop_with_a_budget_stays_valid(tmp_path, capsys):
    """``python -m bench loop --max-thinking-tokens``, tiny: forced ends happen, every output is valid."""
    from bench.__main__ import main

    out = tmp_path / "loop.jsonl"
    rc = main(["loop", "--batches", "4", "--drafts", "0,2", "--steps", "25", "--warmup", "1",
               "--max-thinking-tokens", "3", "--out", str(out), "--plot", ""])
    text = capsys.readouterr().out
    assert rc == 0, text
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert all(r["invalid"] == 0 and r["errors"] == 0 and r["max_thinking_tokens"] == 3 for r in rows)
    assert sum(r["forced_ends"] for r in rows) > 0 and sum(r["finished"] for r in rows) > 0
    assert "forced_ends" in text


class HeldCompiler:
    """The real compiler behind a future the test completes when it chooses."""

    def __init__(self, real: Compiler) -> None:
        self.real = real
        self.pending: list[tuple[Constraint, Future]] = []

    def submit(self, constraint: Constraint, *, timeout_s: float | None = None) -> Future:
        fut: Future = Future()
        self.pending.append((constraint, fut))
        return fut

    def mark_overdue(self, fut: Future) -> None:
        pass

    def __getattr__(self, name: str):
        return getattr(self.real, name)

    def finish(self) -> None:
        for constraint, fut in self.pending:
            fut.set_running_or_notify_cancel()
            fut.set_result(self.real.compile(constraint, timeout=120))


@pytest.mark.parametrize("k", [0, 2])
def test_the_budget_forces_the_end_while_the_constraint_still_compiles(k):
    """compile_while_thinking: before the budget the rows hold the end off; at the budget they force it
    anyway; the request then waits for its grammar out of the schedule, and completes valid after."""
    fam = FAMILIES["qwen3"]
    v = vocab_of(fam.vocab)
    manager(v, fam.parser)  # the shared compiler for this vocabulary
    held = HeldCompiler(_COMPILERS[v.name])
    mgr = StructuredOutputManager(v, fam.parser, compiler=held, max_num_seqs=2, num_speculative_tokens=k,
                                  num_fill_threads=1, compile_while_thinking=True)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(fam.prompt), max_thinking_tokens=3)
    assert mgr.is_ready("r") and not mgr.is_compiled("r")
    end = v.token_id("</think>")
    think = v.encode(fam.think)
    out: list[int] = []
    while mgr.status("r") is RequestStatus.THINKING:
        drafts = think[len(out):len(out) + k]
        batch = mgr.grammar_bitmask([("r", drafts)] if k else ["r"])
        rows = {li: allowed(batch.bitmask[i].numpy()) for i, li in enumerate(batch.logits_indices.tolist())}
        commit = []
        for j in range(len(drafts) + 1):
            row = rows[j]
            pos = len(out) + j
            if pos < 3:
                assert end not in row and len(row) > 1000  # the hold row
                t = think[pos]
            else:
                assert row.tolist() == [end]
                t = end
            commit.append(t)
            if j == len(drafts) or drafts[j] != t:
                break
        assert mgr.accept_tokens("r", commit).ok
        out += commit
    assert out == think[:3] + [end]
    assert mgr.status("r") is RequestStatus.COMPILING and not mgr.is_ready("r")
    held.finish()
    assert mgr.is_ready("r") and mgr.status("r") is RequestStatus.CONSTRAINED
    body = v.encode(ANSWER) + [v.token_id(fam.stop)]
    for t in body:
        assert t in allowed(mgr.grammar_bitmask(["r"]).bitmask[0].numpy())
        res = mgr.accept_tokens("r", [t])
    assert res.status == "terminated"


@pytest.mark.parametrize("fam,budget", [("qwen3", 1), ("deepseek_v4", 9), ("mistral", 0), ("hunyuan", 9),
                                        ("granite", 12), ("gptoss", 9)])
def test_jump_forward_lists_the_forced_end_of_thinking(fam, budget):
    """``forced_tokens`` of a thinking request: nothing before its budget point, then exactly the rest of
    the end its rows force (each token the only one its row allows), shrinking as they are committed."""
    f = FAMILIES[fam]
    v = vocab_of(f.vocab)
    mgr = manager(v, f.parser)
    mgr.add_request("r", Constraint.json_schema(SCHEMA), v.encode(f.prompt), chat_template_kwargs=f.kwargs,
                    max_thinking_tokens=budget)
    wait_ready(mgr, "r")
    for t in v.encode(f.think)[:budget]:
        assert mgr.forced_tokens("r") == []  # the thinking is never constrained before the budget point
        assert mgr.accept_tokens("r", [t]).ok
    listed = mgr.forced_tokens("r")
    assert listed == v.encode(EXPECTED[fam, budget])
    assert mgr.forced_tokens("r", max_tokens=1) == listed[:1]
    for i, t in enumerate(listed):
        assert mgr.forced_tokens("r") == listed[i:]
        batch = mgr.grammar_bitmask(["r"])
        assert batch is not None and batch.request_ids[0] == "r"
        assert allowed(batch.bitmask[0].numpy()).tolist() == [t]
        assert mgr.accept_tokens("r", [t]).ok
    assert mgr.status("r") == RequestStatus.CONSTRAINED  # the thinking ended on the last listed token
    mgr.close()
