"""``python -m bench step``: the manager's per-step time (fill + accept) vs xgrammar called directly.

A batch of requests on the Qwen3.6 vocabulary with the qwen3 reasoning parser: a fraction of them
(default half) still thinking (their drafts and tokens are thinking text), the rest writing a long
JSON document for one schema, each at a different position in it. Every step:

- **manager**: ``grammar_bitmask(schedule)`` with ``k`` drafts per request (the true continuation,
  so every draft is accepted), then ``accept_tokens(id, k + 1 tokens)`` for every request;
- **floor**: the same grammar work done by calling xgrammar directly in a plain loop, for the
  constrained requests only (the floor knows which ones think): ``fill_next_token_bitmask`` for row 0,
  then ``accept_token(draft) + fill`` for each draft, ``rollback(k)``, then ``accept_token`` of the
  ``k + 1`` committed tokens. It has no reasoning tracking, no schedule parsing, no status, no rows for
  thinking requests.

Both run in lockstep over the same token positions (manager step, floor step, alternating which goes
first): ``ratio`` = median manager step / median floor step; ``ratio_paired`` = median over steps of
(manager step / floor step), the figure to read on a shared machine, where another process's burst
slows single steps. ``think_us`` is the
manager's step for the thinking requests alone (schedule + accept), i.e. what thinking rows cost.
The goal: ratio <= 1.2 at batch 256, thinking rows near zero.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from typing import Any

DESCRIPTION = "manager per-step time (fill + accept) vs xgrammar matchers called directly"

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "items": {"type": "array", "items": {
            "type": "object",
            "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                           "tags": {"type": "array", "items": {"type": "string"}},
                           "score": {"type": "number"}, "ok": {"type": "boolean"}},
            "required": ["id", "name", "tags", "score", "ok"]}},
    },
    "required": ["items"],
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, nargs="+", default=[1, 16, 64, 256], help="batch sizes")
    p.add_argument("--drafts", type=int, nargs="+", default=[0, 3], help="draft tokens per request")
    p.add_argument("--steps", type=int, default=24, help="measured steps per configuration")
    p.add_argument("--warmup", type=int, default=3, help="unmeasured steps first")
    p.add_argument("--thinking", type=float, default=0.5, help="fraction of requests still thinking")
    p.add_argument("--vocab", default="qwen3_6", help="vocabulary name")
    p.add_argument("--parser", default="qwen3", help="reasoning parser name")
    p.add_argument("--fill-threads", default="auto", help="xgrammar batch-matcher threads ('auto' or N)")
    p.add_argument("--batch-fill-min-rows", type=int, default=None,
                   help="rows per round from which the batch matcher fills (default: the manager's)")
    p.add_argument("--out", default=None, help="JSON-lines output file (default bench-results/step.jsonl)")


def _document(rng: random.Random, n_items: int) -> dict[str, Any]:
    words = ["alpha", "beta", "gamma delta", "epsilon", "zeta eta theta", "iota", "kappa lambda mu"]
    return {"items": [{"id": rng.randint(0, 10**6), "name": " ".join(rng.sample(words, 2)),
                       "tags": rng.sample(words, rng.randint(0, 3)), "score": round(rng.uniform(-100, 100), 3),
                       "ok": rng.random() < 0.5} for _ in range(n_items)]}


def main(args: argparse.Namespace) -> int:
    import statistics

    import torch
    import xgrammar as xgr

    from bench.harness import print_table, progress, write_rows
    from thinkgate.reasoning import load_vocabulary
    from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager

    vocab = load_vocabulary(args.vocab)
    progress(f"vocabulary {vocab.name}: {vocab.vocab_size} ids, logits width {vocab.logits_width}")
    compiler = Compiler(vocab, num_threads=2)
    constraint = Constraint.json_schema(SCHEMA)
    compiled = compiler.compile(constraint)
    rng = random.Random(0)
    doc_ids = vocab.encode(json.dumps(_document(rng, 60)))
    think_ids = vocab.encode(" ".join(["Let me think about {the} \"schema\" and what to write;"] * 200))
    end_think = vocab.token_id("</think>")
    assert end_think not in think_ids
    prompt_thinking = vocab.encode("<|im_start|>user\nJSON please<|im_end|>\n<|im_start|>assistant\n<think>\n")
    fill_threads = args.fill_threads if args.fill_threads == "auto" else int(args.fill_threads)
    words = (vocab.logits_width + 31) // 32
    rows: list[dict[str, Any]] = []

    for k in args.drafts:
        for batch in args.batch:
            n_think = int(round(batch * args.thinking))
            n_json = batch - n_think
            per_step = k + 1
            need = (args.warmup + args.steps) * per_step
            if need + 1 >= len(doc_ids):
                raise ValueError(f"--steps too large for the scripted document ({len(doc_ids)} tokens)")
            kw = {} if args.batch_fill_min_rows is None else {"batch_fill_min_rows": args.batch_fill_min_rows}
            mgr = StructuredOutputManager(vocab, args.parser, compiler=compiler, max_num_seqs=batch,
                                          num_speculative_tokens=k, num_fill_threads=fill_threads, **kw)
            # constrained requests start at different places of the document; thinking ones think on
            starts = [rng.randint(0, len(doc_ids) - need - 1) for _ in range(n_json)]
            streams: dict[str, tuple[list[int], int]] = {}
            floor: list[tuple[xgr.GrammarMatcher, list[int], int]] = []
            for i in range(batch):
                rid = f"r{i}"
                if i < n_json:
                    mgr.add_request(rid, constraint, include_reasoning=False)
                    streams[rid] = (doc_ids, starts[i])
                    m = xgr.GrammarMatcher(compiled.grammar)
                    for t in doc_ids[:starts[i]]:
                        m.accept_token(t)
                    floor.append((m, doc_ids, starts[i]))
                else:
                    mgr.add_request(rid, constraint, prompt_thinking)
                    streams[rid] = (think_ids, rng.randint(0, len(think_ids) - 2 * need - 1))
            for rid in streams:
                while not mgr.is_compiled(rid):
                    time.sleep(0.001)
            for i in range(n_json):
                rid = f"r{i}"
                res = mgr.accept_tokens(rid, doc_ids[:starts[i]])
                assert res.status == "ok", res
            order = list(streams)
            thinking_order = order[n_json:]
            buf = torch.empty((batch * per_step, words), dtype=torch.int32)

            def manager_step(pos: int, ids_order: list[str] = order) -> tuple[float, float, int]:
                sched = []
                for rid in ids_order:
                    ids, s = streams[rid]
                    sched.append((rid, ids[s + pos:s + pos + k]) if k else rid)
                t0 = time.perf_counter_ns()
                b = mgr.grammar_bitmask(sched)
                t1 = time.perf_counter_ns()
                for rid in ids_order:
                    ids, s = streams[rid]
                    r = mgr.accept_tokens(rid, ids[s + pos:s + pos + per_step])
                    if r.status != "ok":
                        raise AssertionError(f"{rid}: {r.message}")
                t2 = time.perf_counter_ns()
                return (t1 - t0) / 1e3, (t2 - t1) / 1e3, 0 if b is None else len(b)

            def floor_step(pos: int) -> tuple[float, float]:
                t0 = time.perf_counter_ns()
                r = 0
                for m, ids, s in floor:
                    m.fill_next_token_bitmask(buf, r)
                    r += 1
                    if k:
                        for j in range(k):
                            m.accept_token(ids[s + pos + j])
                            m.fill_next_token_bitmask(buf, r)
                            r += 1
                        m.rollback(k)
                t1 = time.perf_counter_ns()
                for m, ids, s in floor:
                    for t in ids[s + pos:s + pos + per_step]:
                        m.accept_token(t)
                t2 = time.perf_counter_ns()
                return (t1 - t0) / 1e3, (t2 - t1) / 1e3

            m_fill, m_acc, f_fill, f_acc, n_rows = [], [], [], [], []
            for step in range(args.warmup + args.steps):
                pos = step * per_step
                if step % 2:
                    fl = floor_step(pos)
                    mg = manager_step(pos)
                else:
                    mg = manager_step(pos)
                    fl = floor_step(pos)
                if step >= args.warmup:
                    m_fill.append(mg[0])
                    m_acc.append(mg[1])
                    n_rows.append(mg[2])
                    f_fill.append(fl[0])
                    f_acc.append(fl[1])
            # what the thinking requests alone cost the manager (schedule + accept), same positions
            think_cost = []
            if thinking_order:
                base = (args.warmup + args.steps) * per_step
                for step in range(args.steps):
                    pos = base + step * per_step
                    sched = [(rid, streams[rid][0][streams[rid][1] + pos:streams[rid][1] + pos + k]) if k else rid
                             for rid in thinking_order]
                    t0 = time.perf_counter_ns()
                    mgr.grammar_bitmask(sched)
                    for rid in thinking_order:
                        ids, s = streams[rid]
                        mgr.accept_tokens(rid, ids[s + pos:s + pos + per_step])
                    think_cost.append((time.perf_counter_ns() - t0) / 1e3)
            med = statistics.median
            m_tot = [a + b for a, b in zip(m_fill, m_acc)]
            f_tot = [a + b for a, b in zip(f_fill, f_acc)]
            mgr_us = med(m_tot)
            floor_us = med(f_tot)
            # each step's manager / floor pair ran back to back: the median of their ratios is what
            # to read on a shared machine (a burst of another process hits one step, not the median)
            paired = med([m / f for m, f in zip(m_tot, f_tot) if f > 0]) if floor_us else float("nan")
            row = {
                "batch": batch, "drafts": k, "thinking": n_think, "rows": med(n_rows),
                "mgr_us": mgr_us, "floor_us": floor_us, "ratio": mgr_us / floor_us if floor_us else float("nan"),
                "ratio_paired": paired,
                "mgr_fill_us": med(m_fill), "floor_fill_us": med(f_fill),
                "mgr_accept_us": med(m_acc), "floor_accept_us": med(f_acc),
                "think_us": med(think_cost) if think_cost else 0.0,
                "think_us_per_req": (med(think_cost) / len(thinking_order)) if think_cost else 0.0,
                "vocab": vocab.name, "parser": args.parser, "fill_threads": str(args.fill_threads),
            }
            rows.append(row)
            progress(f"batch {batch:>4} drafts {k}: manager {mgr_us:9.1f} us  floor {floor_us:9.1f} us  "
                     f"ratio {row['ratio']:.3f} (paired {paired:.3f})  thinking {row['think_us']:.1f} us")
            mgr.close()
    compiler.close()
    print_table(rows, ["batch", "drafts", "thinking", "rows", "mgr_us", "floor_us", "ratio", "ratio_paired", "mgr_fill_us",
                       "floor_fill_us", "mgr_accept_us", "floor_accept_us", "think_us", "think_us_per_req"])
    if not args.no_write:
        path = write_rows("step", rows, args.out)
        progress(f"rows appended to {path}")
    return 0
