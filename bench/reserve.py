"""``python -m bench loop --max-tokens N``: answer reservation under a tight ``max_tokens``.

Thinking requests (the testing kit's JSON schemas, each ``--reserve-requests`` times) are driven by the
testing kit's stand-in model (:mod:`thinkgate.testing.standin`: it never stops thinking and never wants to
stop its answer), once without reservation and once with ``reserve_answer=True``. Counted per mode: outputs
cut by ``max_tokens`` (no complete answer), invalid answers (complete but not parsing or not validating),
valid ones, and the outcomes of the constraint report as the front end's response carries it (the
``thinkgate_constraint`` field of ``Parser(...).request(...).parse(..., constraint=report)``), with the
reservation's checks (searches run in the search process during the answer) and waits (steps that waited for
one). Cost: the trajectories of the reserving run are replayed one token per step (``grammar_bitmask`` +
``accept_tokens``, timed) on a manager with and without reservation; ``step_x`` is the ratio of the median
per-step cost (with / without; the target is <= 1.05).

Then, per schema, the time of one shortest-completion search from the grammar's start and from the middle of a
valid output (the search process's code run in this process) and the completion's length.

``--reserve-thinking N`` gives every request ``max_thinking_tokens=N``: the thinking ends early and the answer is
written freely, so the reservation checks it (the path with searches). ``--reserve-forward-us US``: an untimed
stand-in forward pass (a sleep) between steps, in the runs and the replays: the time an engine's step gives the
search process (0: steps back to back, so a search needed at once is waited for).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from typing import Any

from .harness import print_table, progress, write_rows

COLUMNS = ["mode", "max_tokens", "drafts", "requests", "cut", "invalid", "valid", "checks", "waits", "step_us", "step_x",
           "outcomes"]


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
                 max_tokens: int, thinking: int | None, forward_s: float) -> list[float]:
    from thinkgate.testing.streams import wait_compiled

    per_step: list[float] = []
    for k, (constraint, tokens) in enumerate(runs):
        rid = f"replay-{reserve}-{k}"
        mgr.add_request(rid, constraint, prompt, max_tokens=max_tokens, reserve_answer=reserve,
                        max_thinking_tokens=thinking)
        wait_compiled(mgr, rid)
        spent = 0
        for t in tokens:
            t0 = time.perf_counter_ns()
            mgr.grammar_bitmask([rid])
            st = mgr.accept_tokens(rid, [t]).status
            spent += time.perf_counter_ns() - t0
            if st != "ok":
                break
            if forward_s:
                time.sleep(forward_s)
        per_step.append(spent / 1e3 / max(1, len(tokens)))
        mgr.remove_request(rid)
    return per_step


def _search_times(vocab: Any, seed: int) -> list[dict[str, Any]]:
    """Per schema: the search process's own code (``_search_worker._Searcher``, run in this process) timed on the
    shortest completion from the grammar's start and from the middle of a valid output, with its length."""
    from thinkgate.structured_output import Constraint
    from thinkgate.structured_output.compilation import _compile_worker
    from thinkgate.structured_output.step._search_worker import _Searcher
    from thinkgate.testing.workload import SCHEMAS

    searcher = _Searcher(_compile_worker.vocab_table(vocab))
    rng = random.Random(seed)
    rows = []
    for i, (schema, make) in enumerate(SCHEMAS):
        c = Constraint.json_schema(schema)
        searcher.compiled(c)  # the compile is not the search's
        ids = vocab.encode(json.dumps(make(rng), ensure_ascii=False))
        row: dict[str, Any] = {"schema": i}
        for name, prefix in (("start", ()), ("half", tuple(ids[:len(ids) // 2]))):
            t0 = time.perf_counter()
            status, found = searcher.run(c, prefix, 400)
            row[f"{name}_ms"] = round((time.perf_counter() - t0) * 1e3, 1)
            row[f"{name}_tokens"] = len(found) if status == "ok" and found else None
        rows.append(row)
    return rows


def run(args: argparse.Namespace) -> int:
    from thinkgate.reasoning.vocabulary import load_vocabulary
    from thinkgate.structured_output import Constraint, Parser, StructuredOutputManager
    from thinkgate.structured_output.frontend.parse_result import CONSTRAINT_FIELD
    from thinkgate.testing.standin import run_stand_in
    from thinkgate.testing.streams import wait_compiled
    from thinkgate.testing.workload import SCHEMAS

    vocab = load_vocabulary(args.vocab)
    n = args.max_tokens
    drafts = max(args.drafts) if args.drafts else 0
    prompt = vocab.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n")
    think = vocab.encode(" hmm")[0]
    thinking = args.reserve_thinking
    forward_s = args.reserve_forward_us / 1e6
    front = Parser(vocab, reasoning="qwen3")
    rows: list[dict[str, Any]] = []
    trajectories: list[tuple[Any, list[int]]] = []
    with StructuredOutputManager(vocab, "qwen3", max_num_seqs=4, num_speculative_tokens=drafts) as mgr:
        for reserve in (False, True):
            counts = {"cut": 0, "invalid": 0, "valid": 0}
            outcomes: dict[str, int] = {}
            checks = waits = 0
            rng = random.Random(args.seed)
            k = 0
            for rep in range(args.reserve_requests):
                for schema, _ in SCHEMAS:
                    rid = f"{reserve}-{k}"
                    k += 1
                    c = Constraint.json_schema(schema)
                    try:
                        mgr.add_request(rid, c, prompt, max_tokens=n, reserve_answer=reserve,
                                        max_thinking_tokens=thinking)
                    except ValueError as e:  # an impossible budget for this schema: counted as cut
                        progress(f"  {rid}: {e}")
                        counts["cut"] += 1
                        continue
                    wait_compiled(mgr, rid)
                    r = run_stand_in(mgr, rid, n, think_token=think, rng=rng, num_drafts=drafts,
                                     forward_s=forward_s)
                    counts[_answer_ok(vocab, r.tokens, schema)] += 1
                    report = mgr.constraint_report(rid)
                    checks += report.reservation_checks
                    waits += report.reservation_waits
                    response = front.request(prompt_token_ids=prompt).parse(
                        r.tokens, finish_reason="stop" if r.status == "terminated" else "length", constraint=report)
                    o = response.to_openai()[CONSTRAINT_FIELD]["outcome"]
                    outcomes[o] = outcomes.get(o, 0) + 1
                    if reserve:
                        trajectories.append((c, r.tokens))
                    mgr.remove_request(rid)
            rows.append({"mode": "reserve" if reserve else "plain", "max_tokens": n, "drafts": drafts,
                         "requests": sum(counts.values()), **counts, "checks": checks, "waits": waits,
                         "outcomes": ",".join(f"{a}={b}" for a, b in sorted(outcomes.items()))})
        progress("cost: replaying the reserving run's trajectories with and without reservation")
        plain, res = [], []
        for _ in range(args.reserve_repeats):
            plain += _replay_cost(mgr, vocab, prompt, trajectories, False, n, thinking, forward_s)
            res += _replay_cost(mgr, vocab, prompt, trajectories, True, n, thinking, forward_s)
    p_us, r_us = statistics.median(plain), statistics.median(res)
    rows[0]["step_us"], rows[0]["step_x"] = round(p_us, 1), 1.0
    rows[1]["step_us"], rows[1]["step_x"] = round(r_us, 1), round(r_us / p_us, 3)
    for row in rows:
        row["max_thinking_tokens"], row["forward_us"] = thinking, args.reserve_forward_us
    print_table(rows, COLUMNS)
    searches = _search_times(vocab, args.seed)
    print("\nshortest-completion searches (the search process's code, in this process; tokens: stop included):")
    print_table(searches, ["schema", "start_ms", "start_tokens", "half_ms", "half_tokens"])
    print(f"\nwithout reservation: {rows[0]['cut']} cut, {rows[0]['invalid']} invalid of {rows[0]['requests']}; "
          f"with it: {rows[1]['cut']} cut, {rows[1]['invalid']} invalid; cost per step x{rows[1]['step_x']} "
          f"(median of per-request step means over {len(res)} replays)")
    write_rows("loop_reserve", rows, args.out)
    return 0 if rows[1]["invalid"] == 0 and rows[1]["cut"] == 0 else 1
