"""``python -m bench loop --max-tokens N``: answer reservation under a tight ``max_tokens``.

Thinking requests (the testing kit's JSON schemas, each ``--reserve-requests`` times) are driven by the
testing kit's stand-in model (:mod:`thinkgate.testing.standin`: it never stops thinking and never wants to
stop its answer), once without reservation and once with ``reserve_answer=True``. Counted per mode: outputs
cut by ``max_tokens`` (no complete answer), invalid answers (complete but not parsing or not validating),
valid ones, and the constraint report's outcomes. Cost: the trajectories of the reserving run are replayed
one token per step (``grammar_bitmask`` + ``accept_tokens``, timed) on a manager with and without
reservation; ``step_x`` is the ratio of the median per-step cost (with / without; the target is <= 1.05).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from .harness import print_table, progress, write_rows

COLUMNS = ["mode", "max_tokens", "drafts", "requests", "cut", "invalid", "valid", "step_us", "step_x", "outcomes"]


def _answer_ok(vocab: Any, tokens: list[int], schema: dict[str, Any]) -> str:
    import jsonschema

    text = vocab.decode([t for t in tokens if t not in vocab.stop_token_ids])
    if "</think>" not in text:
        return "cut"
    try:
        jsonschema.validate(json.loads(text.split("</think>", 1)[1]), schema)
    except (ValueError, jsonschema.ValidationError):
        return "cut" if tokens and tokens[-1] not in vocab.stop_token_ids else "invalid"
    return "valid"


def _replay_cost(mgr: Any, vocab: Any, prompt: list[int], runs: list[tuple[Any, list[int]]], reserve: bool,
                 max_tokens: int) -> list[float]:
    from thinkgate.testing.streams import wait_compiled

    per_step: list[float] = []
    for k, (constraint, tokens) in enumerate(runs):
        rid = f"replay-{reserve}-{k}"
        mgr.add_request(rid, constraint, prompt, max_tokens=max_tokens, reserve_answer=reserve)
        wait_compiled(mgr, rid)
        t0 = time.perf_counter_ns()
        for t in tokens:
            mgr.grammar_bitmask([rid])
            if mgr.accept_tokens(rid, [t]).status != "ok":
                break
        per_step.append((time.perf_counter_ns() - t0) / 1e3 / max(1, len(tokens)))
        mgr.remove_request(rid)
    return per_step


def run(args: argparse.Namespace) -> int:
    from thinkgate.reasoning.vocabulary import load_vocabulary
    from thinkgate.structured_output import Constraint, StructuredOutputManager
    from thinkgate.testing.standin import run_stand_in
    from thinkgate.testing.streams import wait_compiled
    from thinkgate.testing.workload import SCHEMAS

    vocab = load_vocabulary(args.vocab)
    n = args.max_tokens
    drafts = max(args.drafts) if args.drafts else 0
    prompt = vocab.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n")
    think = vocab.encode(" hmm")[0]
    rows: list[dict[str, Any]] = []
    trajectories: list[tuple[Any, list[int]]] = []
    with StructuredOutputManager(vocab, "qwen3", max_num_seqs=4, num_speculative_tokens=drafts) as mgr:
        for reserve in (False, True):
            counts = {"cut": 0, "invalid": 0, "valid": 0}
            outcomes: dict[str, int] = {}
            rng = random.Random(args.seed)
            k = 0
            for rep in range(args.reserve_requests):
                for schema, _ in SCHEMAS:
                    rid = f"{reserve}-{k}"
                    k += 1
                    c = Constraint.json_schema(schema)
                    try:
                        mgr.add_request(rid, c, prompt, max_tokens=n, reserve_answer=reserve)
                    except ValueError as e:  # an impossible budget for this schema: counted as cut
                        progress(f"  {rid}: {e}")
                        counts["cut"] += 1
                        continue
                    wait_compiled(mgr, rid)
                    r = run_stand_in(mgr, rid, n, think_token=think, rng=rng, num_drafts=drafts)
                    counts[_answer_ok(vocab, r.tokens, schema)] += 1
                    o = mgr.constraint_report(rid).outcome
                    outcomes[o] = outcomes.get(o, 0) + 1
                    if reserve:
                        trajectories.append((c, r.tokens))
                    mgr.remove_request(rid)
            rows.append({"mode": "reserve" if reserve else "plain", "max_tokens": n, "drafts": drafts,
                         "requests": sum(counts.values()), **counts,
                         "outcomes": ",".join(f"{a}={b}" for a, b in sorted(outcomes.items()))})
        progress("cost: replaying the reserving run's trajectories with and without reservation")
        plain, res = [], []
        for _ in range(args.reserve_repeats):
            plain += _replay_cost(mgr, vocab, prompt, trajectories, False, n)
            res += _replay_cost(mgr, vocab, prompt, trajectories, True, n)
    p_us, r_us = statistics.median(plain), statistics.median(res)
    rows[0]["step_us"], rows[0]["step_x"] = round(p_us, 1), 1.0
    rows[1]["step_us"], rows[1]["step_x"] = round(r_us, 1), round(r_us / p_us, 3)
    print_table(rows, COLUMNS)
    print(f"\nwithout reservation: {rows[0]['cut']} cut, {rows[0]['invalid']} invalid of {rows[0]['requests']}; "
          f"with it: {rows[1]['cut']} cut, {rows[1]['invalid']} invalid; cost per step x{rows[1]['step_x']} "
          f"(median of per-request step means over {len(res)} replays)")
    write_rows("loop_reserve", rows, args.out)
    return 0 if rows[1]["invalid"] == 0 and rows[1]["cut"] == 0 else 1
