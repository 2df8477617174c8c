"""``python -m bench first_token``: time to the first constrained token, compile while thinking off and on.

A batch of thinking requests, each with a cold real JSON schema (distinct schemas of
``tests/data/jsonschemas/corpus.json``, the same ones in both modes, each mode on a fresh compiler
whose new worker processes have empty caches), is added at once to a manager on the Qwen3.6 vocabulary with the ``qwen3`` parser. A stand-in
model runs the steps: each step schedules the requests that are ready, fills their rows, waits
``--step-ms`` (the forward pass), then commits one token per request: ``--think`` thinking tokens,
then ``</think>`` (when its row bans it, the model writes one more thinking token instead: the row
holds the end off), then the first content token, the lowest id its grammar row allows. The figure
is each request's time from ``add_request`` to that first constrained token, with
``compile_while_thinking`` off (a request waits for its compile before it is scheduled, then thinks)
and on (it thinks while its constraint compiles). ``held`` counts the steps whose ``</think>`` a
row held off (thinking that outlasted its own script, waiting for a compile); ``ratio`` is the on /
off median, in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

DESCRIPTION = "time to the first constrained token for cold real schemas: compile while thinking off vs on"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--schemas", type=int, default=16, help="requests (one distinct cold schema each)")
    p.add_argument("--think", type=int, default=32, help="thinking tokens each request's script writes")
    p.add_argument("--step-ms", type=float, default=20.0, help="the stand-in forward pass per step, in ms")
    p.add_argument("--repeat", type=int, default=1, help="runs per mode, interleaved (each repetition: new schemas)")
    p.add_argument("--out", default=None, help="JSON-lines file (default bench-results/first_token.jsonl)")


def _run(vocab: Any, schemas: list[dict], on: bool, think: int, step_s: float) -> tuple[list[float], int]:
    """One batch: per request the seconds from add_request to its first constrained token; the held steps."""
    from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager

    comp = Compiler(vocab, num_threads=2, compile_timeout_s=300.0)
    try:
        comp.wait_ready(120)
        mgr = StructuredOutputManager(vocab, "qwen3", compiler=comp, max_num_seqs=len(schemas),
                                      compile_timeout_s=300.0, compile_while_thinking=on, num_fill_threads=1)
        st = vocab.special_tokens
        prompt = vocab.encode("<|im_start|>user\nAnswer in JSON.<|im_end|>\n<|im_start|>assistant\n") + \
            [st["<think>"]] + vocab.encode("\n")
        end = st["</think>"]
        words = vocab.encode(" Let me look at what the schema asks for and write it down.")
        rids = [f"r{i}" for i in range(len(schemas))]
        written = dict.fromkeys(rids, 0)
        ended: set[str] = set()
        first: dict[str, float] = {}
        held = 0
        t0 = time.perf_counter()
        for rid, schema in zip(rids, schemas):
            mgr.add_request(rid, Constraint.json_schema(schema), prompt)
        added = time.perf_counter()
        while len(first) < len(rids):
            if time.perf_counter() - added > 600:
                raise TimeoutError(f"not every request reached its first constrained token in 600 s "
                                   f"(on={on}: {len(first)}/{len(rids)})")
            live = [r for r in rids if r not in first]
            for r in live:
                if mgr.status(r) == "error":
                    raise RuntimeError(f"request {r}: {mgr.error(r)}")
            sched = [r for r in live if mgr.is_ready(r)]
            batch = mgr.grammar_bitmask(sched) if sched else None
            rows = {rid: i for i, rid in enumerate(batch.request_ids)} if batch is not None else {}
            time.sleep(step_s)  # the forward pass
            for r in sched:
                i = rows.get(r)
                if r in ended:  # its first content token: the lowest id its grammar row allows
                    assert i is not None, f"{r}: no grammar row after its thinking ended"
                    row = batch.bitmask[i]
                    word = int((row != 0).nonzero()[0, 0])
                    w = int(row[word]) & 0xFFFFFFFF
                    tok = word * 32 + ((w & -w).bit_length() - 1)
                    res = mgr.accept_tokens(r, [tok])
                    assert res.ok, res.message
                    first[r] = time.perf_counter() - t0
                    mgr.remove_request(r)
                    continue
                tok = words[written[r] % len(words)]
                if written[r] >= think:
                    if i is None or (int(batch.bitmask[i, end >> 5]) >> (end & 31)) & 1:
                        tok = end
                    else:
                        held += 1
                res = mgr.accept_tokens(r, [tok])
                assert res.ok, res.message
                written[r] += 1
                if tok == end:
                    ended.add(r)
        return [first[r] for r in rids], held
    finally:
        comp.close()


def main(args: argparse.Namespace) -> int:
    from bench.harness import print_table, progress, write_rows
    from bench.jsonws import load_corpus
    from thinkgate.reasoning import load_vocabulary

    vocab = load_vocabulary("qwen3_6")
    corpus = load_corpus()
    need = args.schemas * args.repeat
    if need > len(corpus):
        raise SystemExit(f"--schemas x --repeat = {need} schemas; the corpus has {len(corpus)}")
    times: dict[bool, list[float]] = {False: [], True: []}
    helds: dict[bool, int] = {False: 0, True: 0}
    k = 0
    for rep in range(args.repeat):
        for on in (False, True):
            progress(f"run {rep + 1}/{args.repeat}, compile_while_thinking={on}: {args.schemas} cold schemas")
            t, h = _run(vocab, [e["schema"] for e in corpus[k:k + args.schemas]], on, args.think, args.step_ms / 1e3)
            times[on] += t
            helds[on] += h
        k += args.schemas  # both modes take the same schemas, each on a fresh compiler (cold: new workers)
    rows = []
    base = statistics.median(times[False])
    for on in (False, True):
        ts = sorted(times[on])
        med = statistics.median(ts)
        rows.append({"compile_while_thinking": on, "requests": len(ts), "think": args.think,
                     "step_ms": args.step_ms, "median_ms": med * 1e3,
                     "p90_ms": ts[min(len(ts) - 1, int(0.9 * len(ts)))] * 1e3, "max_ms": ts[-1] * 1e3,
                     "held": helds[on], "ratio": med / base})
    print_table(rows, ["compile_while_thinking", "requests", "think", "step_ms", "median_ms", "p90_ms", "max_ms",
                       "held", "ratio"])
    if not args.no_write:
        path = write_rows("first_token", rows, args.out)
        progress(f"rows appended to {path}")
    return 0
