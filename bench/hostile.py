"""``python -m bench hostile``: hostile constraints against the scheduler thread and the compile pool.

Two figures, on the Qwen3.6 vocabulary:

- **add_request**: the time ``StructuredOutputManager.add_request`` takes on the caller's (scheduler)
  thread, median and max over ``--adds`` distinct specs, for a trivial JSON schema and for hostile
  ones (small specs whose validation alone takes seconds: ``patternProperties`` with a huge
  repetition bound; each add a distinct spec, so every add misses the cache). ``ratio`` = hostile
  median / trivial median: 1 means the caller pays only for the size of the spec.
- **time-to-ready**: a trivial schema's time from ``add_request`` until ``is_ready``, on an idle
  compiler and while ``--hostile`` hostile compiles run (each started and running before the trivial
  one is added); ``ratio`` = busy / idle. Each trivial schema is distinct (a cache miss).

Results go to ``bench-results/hostile.jsonl`` (``--out``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

DESCRIPTION = "add_request cost and a trivial schema's time-to-ready while hostile compiles run"


def hostile_schema(i: int, bound: int = 100_000) -> dict[str, Any]:
    """A ~60-byte schema whose conversion takes minutes (distinct per ``i``)."""
    return {"type": "object", "patternProperties": {f"^.{{1,{bound + i}}}$": {}}}


def trivial_schema(i: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"k{i}": {"type": "integer"}}, "required": [f"k{i}"]}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--adds", type=int, default=20, help="add_request calls timed per kind")
    p.add_argument("--hostile", type=int, default=12, help="hostile compiles running during time-to-ready")
    p.add_argument("--trials", type=int, default=3, help="time-to-ready trials (idle and busy each)")
    p.add_argument("--max-workers", type=int, default=16, help="the compiler's max_workers")
    p.add_argument("--vocab", default="qwen3_6", help="vocabulary name")
    p.add_argument("--out", default=None, help="JSON-lines output file (default bench-results/hostile.jsonl)")


def _wait_ready(mgr: Any, rid: str, timeout: float = 120.0) -> float:
    t0 = time.perf_counter()
    while not mgr.is_ready(rid):
        if time.perf_counter() - t0 > timeout:
            raise TimeoutError(f"{rid} not ready after {timeout} s")
        time.sleep(0.0005)
    return time.perf_counter()


def main(args: argparse.Namespace) -> int:
    from bench.harness import print_table, progress, write_rows
    from thinkgate.reasoning import load_vocabulary
    from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager

    vocab = load_vocabulary(args.vocab)
    comp = Compiler(vocab, num_threads=2, max_workers=max(args.max_workers, 2), compile_timeout_s=600.0)
    rows: list[dict[str, Any]] = []
    try:
        progress("starting the compile workers")
        comp.wait_ready(120)
        mgr = StructuredOutputManager(vocab, None, compiler=comp, max_num_seqs=16,
                                      compile_timeout_s=600.0)
        seq = iter(range(10**9))

        # -- add_request on the caller's thread ----------------------------------------------
        progress(f"add_request: {args.adds} trivial and {args.adds} hostile specs")
        add_us: dict[str, list[float]] = {"trivial": [], "hostile": []}
        for i in range(args.adds):
            for kind, make in (("trivial", trivial_schema), ("hostile", hostile_schema)):
                c = Constraint.json_schema(make(next(seq)))
                rid = f"{kind}-add-{i}"
                t0 = time.perf_counter_ns()
                mgr.add_request(rid, c)
                add_us[kind].append((time.perf_counter_ns() - t0) / 1e3)
                mgr.remove_request(rid)
        comp.close()  # stop the hostile compiles just started; a fresh compiler for the next part
        med = {k: statistics.median(v) for k, v in add_us.items()}
        for kind, v in add_us.items():
            rows.append({"figure": "add_request", "kind": kind, "median_us": med[kind], "max_us": max(v),
                         "n": len(v), "ratio": med[kind] / med["trivial"]})

        # -- time-to-ready of a trivial schema: idle, then with hostile compiles running -----
        comp = Compiler(vocab, num_threads=2, max_workers=max(args.max_workers, 2), compile_timeout_s=600.0)
        comp.wait_ready(120)
        mgr = StructuredOutputManager(vocab, None, compiler=comp, max_num_seqs=16 + args.hostile,
                                      compile_timeout_s=600.0)
        mgr.add_request("warm", Constraint.json_schema(trivial_schema(next(seq))))
        _wait_ready(mgr, "warm")
        idle, busy = [], []
        for t in range(args.trials):
            rid = f"idle-{t}"
            t0 = time.perf_counter()
            mgr.add_request(rid, Constraint.json_schema(trivial_schema(next(seq))))
            idle.append(_wait_ready(mgr, rid) - t0)
        progress(f"starting {args.hostile} hostile compiles")
        hostile_ids = []
        for h in range(args.hostile):
            rid = f"hostile-{h}"
            mgr.add_request(rid, Constraint.json_schema(hostile_schema(next(seq))))
            hostile_ids.append(rid)
        t0 = time.perf_counter()
        while sum(comp.running_pid(mgr._requests[r].future) is not None for r in hostile_ids) < args.hostile:
            if time.perf_counter() - t0 > 120:
                raise TimeoutError("the hostile compiles did not all start")
            time.sleep(0.01)
        for t in range(args.trials):
            rid = f"busy-{t}"
            t0 = time.perf_counter()
            mgr.add_request(rid, Constraint.json_schema(trivial_schema(next(seq))))
            busy.append(_wait_ready(mgr, rid) - t0)
        still = sum(not mgr.is_ready(r) for r in hostile_ids)
        idle_ms, busy_ms = statistics.median(idle) * 1e3, statistics.median(busy) * 1e3
        rows.append({"figure": "time_to_ready", "kind": "idle", "median_ms": idle_ms, "max_ms": max(idle) * 1e3,
                     "n": len(idle), "ratio": 1.0})
        rows.append({"figure": "time_to_ready", "kind": f"{args.hostile} hostile running",
                     "median_ms": busy_ms, "max_ms": max(busy) * 1e3, "n": len(busy),
                     "ratio": busy_ms / idle_ms, "hostile_still_compiling": still,
                     "workers": comp.stats.workers})
    finally:
        comp.close()
    print_table([r for r in rows if r["figure"] == "add_request"], ["figure", "kind", "median_us", "max_us", "n",
                                                                     "ratio"])
    print_table([r for r in rows if r["figure"] == "time_to_ready"], ["figure", "kind", "median_ms", "max_ms", "n",
                                                                       "ratio"])
    if not args.no_write:
        path = write_rows("hostile", rows, args.out)
        progress(f"rows appended to {path}")
    return 0
