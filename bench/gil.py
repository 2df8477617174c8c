"""Do xgrammar's calls release the GIL? A worker thread makes one kind of call in a loop while the main
thread runs pure-Python work; each alone, then both together.

``py_kept``: the Python thread's rate beside the worker / alone. A call that releases the GIL leaves it
near 1 (the two threads run on two cores); one that holds it takes about half (as the pure-Python
control shows). ``work_kept``: the worker's rate beside the Python thread / alone: a call that
releases the GIL still has to take it back when it returns, and with a Python-busy thread beside it
that wait (up to the interpreter's switch interval, ``sys.getswitchinterval()``) is paid per call,
so many short calls lose most of their rate while one long call (a batch fill) loses little.
This is why ``grammar_bitmask_async`` fills every round with the batch matcher (``structured_output/step/overlap.py``).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from typing import Any

from .harness import print_table, progress, write_rows

DESCRIPTION = "whether xgrammar's fill / accept calls release the GIL: a pure-Python thread beside each"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--seconds", type=float, default=1.0, help="length of each measurement (default: 1.0)")
    p.add_argument("--rows", type=int, default=64, help="matchers (rows) per batch fill (default: 64)")
    p.add_argument("--vocab", default="qwen3_6", help="vocabulary (default: qwen3_6)")
    p.add_argument("--switch-interval", type=float, default=None,
                   help="sys.setswitchinterval for the run, in seconds (default: Python's, 0.005)")
    p.add_argument("--out", default=None, help="JSON-lines file to append to (default: bench-results/gil.jsonl)")


def main(args: argparse.Namespace) -> int:
    import torch
    import xgrammar as xgr

    from thinkgate.reasoning.vocabulary import load_vocabulary
    from thinkgate.structured_output import Compiler, Constraint

    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    vocab = load_vocabulary(args.vocab)
    compiler = Compiler(vocab, num_threads=1)
    schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}, "required": ["a", "b"]}
    grammar = compiler.compile(Constraint.json_schema(schema, max_whitespace=None)).grammar
    prefix = vocab.encode('{"a": "hello wor')
    matchers = [xgr.GrammarMatcher(grammar) for _ in range(args.rows)]
    for m in matchers:
        for t in prefix:
            assert m.accept_token(t)
    mask = torch.empty((args.rows, (vocab.logits_width + 31) // 32), dtype=torch.int32)
    batch = xgr.BatchGrammarMatcher(1)
    indices = list(range(args.rows))
    letter = vocab.encode("l")[0]
    one = matchers[0]

    def fill_one() -> int:
        one.fill_next_token_bitmask(mask, 0)
        return 1

    def fill_batch() -> int:
        batch.batch_fill_next_token_bitmask(matchers, mask, indices)
        return args.rows

    def accept_rollback() -> int:
        one.accept_token(letter)
        one.rollback(1)
        return 1

    def python_work() -> int:
        s = 0
        for i in range(200):
            s += i
        return 1

    kinds = {"fill_next_token_bitmask": fill_one, f"batch_fill ({args.rows} rows, 1 thread)": fill_batch,
             "accept_token + rollback": accept_rollback, "pure Python (control)": python_work}
    rows: list[dict[str, Any]] = []
    for name, work in kinds.items():
        alone_work = _rate_in_thread(work, args.seconds)
        alone_py = _python_rate(args.seconds)
        beside_work, beside_py = _together(work, args.seconds)
        rows.append({"call": name, "work_per_s": alone_work, "py_kept": beside_py / alone_py,
                     "work_kept": beside_work / alone_work, "switch_interval_s": sys.getswitchinterval()})
        progress(f"{name}: py_kept {rows[-1]['py_kept']:.2f}, work_kept {rows[-1]['work_kept']:.2f}")
    print()
    print(f"a worker thread calling xgrammar beside a pure-Python thread ({vocab.name}, switch interval "
          f"{sys.getswitchinterval() * 1e3:g} ms): rates beside / alone")
    print_table(rows, ["call", "work_per_s", "py_kept", "work_kept"])
    if not args.no_write:
        path = write_rows("gil", [dict(r, vocab=vocab.name) for r in rows], args.out)
        progress(f"rows appended to {path}")
    compiler.close()
    return 0


def _rate_in_thread(work, seconds: float) -> float:
    count = [0]
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            count[0] += work()

    t = threading.Thread(target=loop)
    t.start()
    time.sleep(seconds)
    stop.set()
    t.join()
    return count[0] / seconds


def _python_rate(seconds: float) -> float:
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        s = 0
        for i in range(1000):
            s += i
        n += 1
    return n / seconds


def _together(work, seconds: float) -> tuple[float, float]:
    count = [0]
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            count[0] += work()

    t = threading.Thread(target=loop)
    t.start()
    py = _python_rate(seconds)
    stop.set()
    t.join()
    return count[0] / seconds, py
