"""SGLang's per-request ``thinking_budget`` (``custom_params``) under the thinkgate backend: the
manager's ``max_thinking_tokens``. A model that would think on is stopped at the budget: the rows force
its family's end of thinking, one token per row, then the grammar applies; every row equals the row
thinkgate's manager gives with ``max_thinking_tokens`` on the same stream, cached or not, and a
rollback to before the budget point takes it again."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sglang_driver import Model, accept, allowed, create_grammar, fill_batch

from thinkgate.structured_output import Constraint, StructuredOutputManager
from thinkgate.engines.sglang.backend import thinkgate_family

SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"], "additionalProperties": False}
CASES = {
    "deepseek-r1": ("deepseek_v4", "<｜User｜>Hi<｜Assistant｜><think>\n", 1),
    "qwen3": ("qwen3_6", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n", None),
    "granite": ("deepseek_v4", "<｜User｜>Hi<｜Assistant｜>", 1),
}


@pytest.mark.parametrize("budget", [0, 5])
@pytest.mark.parametrize("case", list(CASES))
def test_the_budget_forces_the_end_of_thinking_like_the_manager(case, budget, backends):
    vname, prompt_text, eos = CASES[case]
    b = backends(vname, case)
    v = b.vocabulary
    eos = eos if eos is not None else v.token_id("<|im_end|>")
    prompt = v.encode(prompt_text)
    key = ("json", json.dumps(SCHEMA))
    switch = {"enable_thinking": True, "thinking": True, "reasoning": True}
    mgr = StructuredOutputManager(v, thinkgate_family(case), max_num_seqs=2, compiler=b.compiler)
    grammars = [create_grammar(b, key, prompt, True, thinking_budget=budget) for _ in range(2)]  # a miss, a hit
    for rid in ("a", "b"):
        mgr.add_request(rid, Constraint.json_schema(SCHEMA), prompt, chat_template_kwargs=switch,
                        max_thinking_tokens=budget)
        while not mgr.is_ready(rid):
            pass
    script = v.encode("Here is my thought process:\n" * (case.startswith("granite")) + "hmm " * 20 + "more") + [eos]
    models = [Model(script, [eos], seed=s) for s in (1, 2)]
    outs: list[list[int]] = [[], []]
    for _ in range(60):
        live = [i for i in (0, 1) if not grammars[i].is_terminated()]
        if not live:
            break
        gm = fill_batch([grammars[i] for i in live], b.vocab_size)
        mb = mgr.grammar_bitmask([("a", "b")[i] for i in live])
        theirs = [np.ones(v.vocab_size, dtype=bool) for _ in live]
        if mb is not None:
            for r, li in enumerate(mb.logits_indices.tolist()):
                theirs[li] = allowed(mb.bitmask[r], v.vocab_size)
        logits = torch.stack([models[i].logits(outs[i], b.vocab_size) for i in live])
        gm.apply(logits)
        for s, i in enumerate(live):
            assert np.array_equal(allowed(gm.vocab_mask[s], v.vocab_size), theirs[s]), f"{case} at {len(outs[i])}"
            t = models[i].pick(outs[i], logits[s])
            assert accept(grammars[i], [t]) == ([t], None)
            assert mgr.accept_tokens(("a", "b")[i], [t]).ok
            outs[i].append(t)
    parser = b.parser
    for out in outs:
        split = parser.split(out, prompt, switch)
        assert split.end is not None and len(split.reasoning_ids) <= budget + 2, v.decode(out)
        json.loads(v.decode(split.content_ids[:-1]))
    mgr.close()


def test_rollback_before_the_budget_point_forgets_the_forced_end(backends):
    b = backends("deepseek_v4", "deepseek-r1")
    v = b.vocabulary
    g = create_grammar(b, ("json", json.dumps(SCHEMA)), v.encode(CASES["deepseek-r1"][1]), True, thinking_budget=2)
    end = v.token_id("</think>")
    m = g.allocate_vocab_mask(b.vocab_size, 3, "cpu")
    for t in v.encode("a b"):
        g.accept_token(t)
    g.fill_vocab_mask(m, 0)
    assert np.flatnonzero(allowed(m[0], v.vocab_size)).tolist() == [end]
    g.rollback(1)
    g.fill_vocab_mask(m, 1)
    assert allowed(m[1], v.vocab_size).all()  # one thinking token left: free
    g.accept_token(v.encode(" c")[0])
    g.fill_vocab_mask(m, 2)
    assert np.flatnonzero(allowed(m[2], v.vocab_size)).tolist() == [end]
    g.accept_token(end)
    assert not g.thinking
