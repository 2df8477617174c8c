"""thinkgate's SGLang backend stepping a batch of thinking requests with JSON schemas, driven through
SGLang 0.5.23's own calls in its scheduler's order, beside thinkgate's own manager on the same schedule.

The batch mirrors ``tests/integration/test_vllm_structured_output.py``: scripts think in text that
breaks the schema, end the thinking, then answer, some validly, some with a wrong type or too much
whitespace that the mask must steer. Each request's grammar is created as ``GrammarManager`` creates it
(key, cache or future, ``set_cache(copy)``); each step fills with SGLang's
``SamplingBatchInfo.update_regex_vocab_mask`` (or, with drafts, walks the chain as
``spec_utils.traverse_tree`` does: accept, fill, rollback), applies with SGLang's ``GrammarMask.apply``
(thinkgate's kernel underneath), samples, and accepts as ``_accept_grammar_tokens`` does.

Checked for every request: no accept is refused; every mask row equals the row thinkgate's
``StructuredOutputManager`` gives the same position (no row = every token allowed); a thinking
position's row allows every token but the implicit ends the grammar cannot start with, and the first
constrained row is the first position after the end of the thinking as ``parser.split`` places it;
every output stops, is JSON that validates, and keeps thinkgate's whitespace bound.
"""

from __future__ import annotations

import json
import re

import jsonschema
import numpy as np
import pytest
import torch
from sglang_driver import Model, accept, allowed, chain_rows, create_grammar, fill_batch
from support import BATCH_ANSWERS as ANSWERS
from support import BATCH_MAX_WS as MAX_WS
from support import BATCH_SCHEMA as SCHEMA
from support import BATCH_SCHEMA2 as SCHEMA2
from support import BATCH_THINK as THINK

from thinkgate.reasoning import get_reasoning_parser, load_vocabulary
from thinkgate.structured_output import Constraint, StructuredOutputManager
from thinkgate.engines.sglang.backend import thinkgate_family


# case -> (vocabulary, --reasoning-parser name, prompt, end marker text, start text, require_reasoning)
CASES = {
    "deepseek-r1": ("deepseek_v4", "deepseek-r1", "<｜User｜>Weather?<｜Assistant｜><think>\n", "</think>", "", True),
    # no marker in the prompt: SGLang's thinking switch (require_reasoning) turns the thinking on
    "deepseek-v4": ("deepseek_v4", "deepseek-v4", "<｜User｜>Weather?<｜Assistant｜>", "</think>", "", True),
    # thinking ends on text (ordinary tokens); a thinkgate family name given as the parser name
    "olmo3": ("deepseek_v4", "olmo3", "<｜User｜>Weather?<｜Assistant｜>", "</think>", "", True),
    # text markers over several tokens, and a first token that decides whether it thinks (pending rows)
    "granite": ("deepseek_v4", "granite", "<｜User｜>Weather?<｜Assistant｜>",
                "\nHere is my response:\n", "Here is my thought process:\n", True),
    "qwen3": ("qwen3_6", "qwen3", "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n",
              "</think>", "", True),
}


def _max_gap(text: str) -> int:
    return max((len(g) for g in re.findall(r"[ \t\r\n]+", text)), default=0)


def _manager_rows(batch, vocab_size: int, num_logits_rows: int) -> list[np.ndarray]:
    """The manager's batch as one allowed-set per logits row (no row: every token)."""
    rows = [np.ones(vocab_size, dtype=bool) for _ in range(num_logits_rows)]
    if batch is not None:
        for r, li in enumerate(batch.logits_indices.tolist()):
            rows[li] = allowed(batch.bitmask[r], vocab_size)
    return rows


@pytest.mark.parametrize("k", [0, 2], ids=["no-drafts", "2-drafts"])
@pytest.mark.parametrize("case", list(CASES))
def test_sglang_backend_gates_a_batch_like_the_manager(case, k, backends):
    vocab_name, parser_name, prompt_text, end_text, start_text, require_reasoning = CASES[case]
    backend = backends(vocab_name, parser_name)
    vocab = backend.vocabulary
    assert vocab.token_bytes == load_vocabulary(vocab_name).token_bytes  # the real table, read from SGLang's tokenizer
    family = thinkgate_family(parser_name)
    eos = min(vocab.stop_token_ids) if vocab_name == "deepseek_v4" else vocab.token_id("<|im_end|>")
    assert eos in vocab.stop_token_ids
    V = vocab.vocab_size
    width = backend.vocab_size
    closers = [eos] + [vocab.encode(s)[0] for s in ('"', "}", "]")]
    prompt = vocab.encode(prompt_text)
    batch = len(THINK) * len(ANSWERS) // 2
    switch = {"enable_thinking": require_reasoning, "thinking": require_reasoning, "reasoning": require_reasoning}
    mgr = StructuredOutputManager(vocab, family, max_num_seqs=batch, num_speculative_tokens=k,
                                  compiler=backend.compiler)
    rids, grammars, models, schemas, rows_seen = [], [], [], [], []
    for i in range(batch):
        schema, answer = ANSWERS[i % len(ANSWERS)]
        script = vocab.encode(start_text + THINK[i % len(THINK)] + end_text + answer) + [eos]
        g = create_grammar(backend, ("json", json.dumps(schema)), prompt, require_reasoning)
        assert type(g).__name__ == "ThinkgateGrammar", g
        rid = f"r{i}"
        mgr.add_request(rid, Constraint.json_schema(schema), prompt, chat_template_kwargs=switch)
        rids.append(rid)
        grammars.append(g)
        models.append(Model(script, closers, seed=i))
        schemas.append(schema)
        rows_seen.append([])
    for rid in rids:
        while not mgr.is_ready(rid):
            pass
    implicit = np.zeros(V, dtype=bool)
    implicit[list(backend.parser.implicit_reasoning_end_token_ids)] = True
    outputs: list[list[int]] = [[] for _ in range(batch)]
    done = [False] * batch
    for _ in range(400):
        live = [i for i in range(batch) if not done[i]]
        if not live:
            break
        if k == 0:
            gmask = fill_batch([grammars[i] for i in live], width)
            logits = torch.stack([models[i].logits(outputs[i], width) for i in live])
            mine = [allowed(gmask.vocab_mask[s], V) for s in range(len(live))]
            theirs = _manager_rows(mgr.grammar_bitmask([rids[i] for i in live]), V, len(live))
            gmask.apply(logits)
            committed = {}
            for s, i in enumerate(live):
                assert np.array_equal(mine[s], theirs[s]), f"{rids[i]} at {len(outputs[i])}: rows differ"
                rows_seen[i].append((len(outputs[i]), bool((mine[s] | implicit).all())))
                committed[i] = [models[i].pick(outputs[i], logits[s])]
        else:
            drafts = {i: models[i].script[len(outputs[i]):len(outputs[i]) + k] for i in live}
            theirs = _manager_rows(mgr.grammar_bitmask([(rids[i], drafts[i]) for i in live]), V,
                                   sum(1 + len(drafts[i]) for i in live))
            committed = {}
            base = 0
            for i in live:
                d = drafts[i]
                rows = chain_rows(grammars[i], d, width)
                accepted: list[int] = []
                for j in range(len(d) + 1):
                    mine = allowed(rows[j], V)
                    assert np.array_equal(mine, theirs[base + j]), f"{rids[i]} at {len(outputs[i]) + j}: rows differ"
                    rows_seen[i].append((len(outputs[i]) + j, bool((mine | implicit).all())))
                    x = models[i].logits(outputs[i] + accepted, width)[None]
                    grammars[i].apply_vocab_mask(x, rows[j:j + 1])
                    t = models[i].pick(outputs[i] + accepted, x[0])
                    accepted.append(t)
                    if j < len(d) and t != d[j] or t == eos:
                        break
                base += 1 + len(d)
                committed[i] = accepted
        for i, toks in committed.items():
            kept, err = accept(grammars[i], toks)
            assert err is None, f"{rids[i]}: SGLang would abort it: {err}"
            res = mgr.accept_tokens(rids[i], toks)
            assert res.ok, f"{rids[i]}: the manager refused {toks}: {res.message}"
            assert kept == toks  # the grammar terminates only on the eos, which ends the list
            outputs[i].extend(kept)
            assert grammars[i].is_terminated() == (res.status == "terminated")
            if grammars[i].is_terminated() or len(outputs[i]) >= 200:
                done[i] = True
    assert all(done)
    mgr.close()
    parser = get_reasoning_parser(family)(vocab)
    for i, out in enumerate(outputs):
        split = parser.split(out, prompt, switch)
        assert split.end is not None, f"r{i}: the thinking never ended: {vocab.decode(out)!r}"
        start = split.end.content_start
        assert THINK[i % len(THINK)][:8] in vocab.decode(out[:start])  # the thinking came through
        first = {}
        for pos, free in rows_seen[i]:
            first.setdefault(pos, free)
        undecided = len(vocab.encode(start_text))  # granite: while its first tokens decide whether it
        for pos, free in first.items():        # thinks, the row is the pending row (equal to the manager's)
            if pos >= undecided:
                assert free == (pos < start), f"r{i} position {pos}: free={free}, content starts at {start}"
        answer = ANSWERS[i % len(ANSWERS)][1]
        if jsonschema.Draft202012Validator(schemas[i]).is_valid(json.loads(answer)) and _max_gap(answer) <= MAX_WS:
            assert out == models[i].script, f"r{i}: a valid script was masked: {vocab.decode(out)!r}"
        else:
            assert models[i].off_script and vocab.decode(out[start:]) != answer
        assert out[-1] == eos, f"r{i} did not stop: {vocab.decode(out)!r}"
        text = vocab.decode(out[start:-1])
        jsonschema.validate(json.loads(text), schemas[i])
        assert _max_gap(text) <= MAX_WS, text
