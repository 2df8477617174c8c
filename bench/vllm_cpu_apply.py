"""``python -m bench vllm_cpu``: vLLM 0.34's CPU-worker bitmask apply, its own torch path vs thinkgate's
C kernel (what the general plugin installs), on the same tensors, with ``logits.fill_`` as the floor.

Runs in a Python that has vLLM 0.34 (e.g. ``.venv-vllm/bin/python -m bench vllm_cpu`` after
``bash tests/integration/run.sh``). For each logits width and batch: one grammar request per logits
row (no drafts), masks shaped as ``bench kernels`` shapes them (three rows in four JSON structure, 24
allowed ids; every fourth inside a string, 1.5% blocked), ``CPUStructuredOutputsWorker.apply_grammar_bitmask``
timed as vLLM ships it (``vllm_us``) and with thinkgate's patch (``tg_us``) on fresh copies of the
same logits, in interleaved rounds. ``vllm_over_tg``: how much faster the patch is; ``tg_over_fill``:
the patch over ``logits.fill_`` on the same tensor. Both paths give the same logits (checked each
configuration; the command exits 1 otherwise).
"""

from __future__ import annotations

import argparse

from bench.harness import int_list

DESCRIPTION = "vLLM's CPU-worker bitmask apply: its torch path vs thinkgate's C kernel (needs vLLM)"
COLUMNS = ["vocab", "batch", "vllm_us", "tg_us", "fill_us", "vllm_over_tg", "tg_over_fill", "same"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batches", type=int_list, default=[1, 16, 64], help="batch sizes (default 1,16,64)")
    p.add_argument("--vocabs", type=int_list, default=[129280, 248320], help="logits widths (default 129280,248320)")
    p.add_argument("--repeat", type=int, default=10, help="timed repeats per candidate and round (default 10)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    p.add_argument("--out", default=None, help="JSON-lines file (default bench-results/vllm_cpu.jsonl)")


def main(args: argparse.Namespace) -> int:
    from types import SimpleNamespace as NS

    import torch

    try:
        from vllm.v1.worker.cpu.structured_outputs import CPUStructuredOutputsWorker
    except ImportError:
        print("python -m bench vllm_cpu needs vLLM 0.34 in this Python (bash tests/integration/run.sh builds one)")
        return 2
    from bench.harness import measure, print_table, write_rows
    from bench.kernels import TOKENIZER_SIZE, _interleaved
    from thinkgate.testing.bitmasks import realistic_bitmask
    from thinkgate.engines.vllm import cpu_worker as vllm_cpu_worker

    original = CPUStructuredOutputsWorker.apply_grammar_bitmask
    rows, ok = [], True
    for width in args.vocabs:
        for batch in args.batches:
            size = TOKENIZER_SIZE.get(width, width)
            bitmask = realistic_bitmask(batch, width, size).numpy()
            ids = [f"r{i}" for i in range(batch)]
            ib = NS(req_ids=ids, cu_num_logits=torch.arange(batch + 1, dtype=torch.int32))
            worker = CPUStructuredOutputsWorker(batch, width, torch.device("cpu"), 1)
            base = torch.randn(batch, width)
            # applying again to masked logits costs the same (every blocked logit is written again)
            bufs = {k: base.clone() for k in ("vllm", "tg", "fill")}
            cands = {
                "vllm": lambda: original(worker, bufs["vllm"], ib, ids, bitmask),
                "tg": lambda: vllm_cpu_worker.apply_grammar_bitmask(worker, bufs["tg"], ib, ids, bitmask),
                "fill": lambda: bufs["fill"].fill_(float("-inf")),
            }
            cands["vllm"]()
            cands["tg"]()
            same = bool(torch.equal(bufs["vllm"], bufs["tg"]))
            ok &= same
            stats = _interleaved(cands, args.repeat, args.rounds, measure)
            v, t, f = (stats[k].median_us for k in ("vllm", "tg", "fill"))
            rows.append({"vocab": width, "batch": batch, "vllm_us": v, "tg_us": t, "fill_us": f,
                         "vllm_over_tg": v / t, "tg_over_fill": t / f, "same": same})
    print_table(rows, COLUMNS)
    if not args.no_write:
        path = write_rows("vllm_cpu", rows, args.out)
        print(f"rows appended to {path}")
    return 0 if ok else 1
