"""``python -m bench kernels``: the bitmask apply against xgrammar and ``logits.fill_``.

For each vocabulary width and batch: our CPU path (``kernels.apply_token_bitmask_inplace`` on CPU
tensors), xgrammar's CPU kernel and our pure-torch fallback on the same tensors, and ``logits.fill_``
on the same tensor in the same run, the floor a CPU kernel that writes every blocked logit can
approach. Ratios: ``xgr_over_ours`` (how much faster we are) and ``ours_over_fill``.

On a CUDA device (``--device auto`` or ``cuda``) it also prints the GPU table of ``bench.kernels_gpu``:
our Triton path (checked and unchecked, and with the bitmask's copy to the device), ``fill_``,
xgrammar's Triton and CUDA kernels, per dtype, width, batch and mask density, timed with CUDA events.
``--device cuda`` prints only that table.

CPU masks are synthetic but shaped like real ones (``thinkgate.testing.bitmasks.realistic_bitmask``,
seeded, so every run sees the same).
"""

from __future__ import annotations

import argparse

from bench.harness import int_list
from thinkgate.testing.bitmasks import realistic_bitmask

DESCRIPTION = "bitmask apply: our CPU path / Triton vs xgrammar vs logits.fill_"

# Logits width -> tokenizer size, for the vocabularies in reasoning.load_vocabulary.
TOKENIZER_SIZE = {248320: 248077, 129280: 129280, 131072: 131072}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batches", type=int_list, default=[1, 16, 64, 256], help="batch sizes (default 1,16,64,256)")
    p.add_argument("--vocabs", type=int_list, default=[129280, 248320],
                   help="logits widths (default 129280,248320)")
    p.add_argument("--repeat", type=int, default=20,
                   help="timed repeats per candidate and round (default 20; fewer for a slow one)")
    p.add_argument("--rounds", type=int, default=3,
                   help="interleaved rounds over the candidates (default 3)")
    p.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32")
    p.add_argument("--string-every", type=int, default=4,
                   help="every N-th row is a mostly-allowed 'inside a string' row (default 4; 0: none)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                   help="auto: the CPU table, and the GPU table when CUDA is available; cpu / cuda: only that one")
    p.add_argument("--dtypes", default="float32,bfloat16,float16",
                   help="GPU table: comma-separated dtypes (default float32,bfloat16,float16)")
    p.add_argument("--densities", default="99.9,50,0.1",
                   help="GPU table: percent of ids blocked, from 99.9, 50, 0.1 (default all three)")
    p.add_argument("--xgrammar-cuda", choices=["auto", "off"], default="auto",
                   help="GPU table: time xgrammar's CUDA kernel when it imports (its first import builds it with "
                        "nvcc, about a minute; default auto)")
    p.add_argument("--threads", type=int, default=0,
                   help="torch.set_num_threads(N) first: the budget of fill_, torch ops and our CPU path "
                        "(default 0: leave torch's setting)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="JSON-lines file (default bench-results/kernels.jsonl)")


def _interleaved(candidates: dict, repeat: int, rounds: int, measure) -> dict:
    """Time each candidate with ``measure`` in ``rounds`` interleaved rounds (the machine is shared
    and drifts; interleaving exposes every candidate to the same drift). A slow candidate gets fewer
    repeats per round (about 0.3 s). Per candidate: the median of the round medians, the lowest p10,
    the highest p90 and the total sample count.
    """
    import statistics
    import time

    from bench.harness import Stats

    per_round: dict[str, list] = {k: [] for k in candidates}
    reps: dict[str, int] = {}
    for k, fn in candidates.items():
        t0 = time.perf_counter()
        fn()
        reps[k] = max(3, min(repeat, int(0.3 / max(time.perf_counter() - t0, 1e-9))))
    for r in range(rounds):
        for k, fn in candidates.items():
            per_round[k].append(measure(fn, warmup=3 if r == 0 else 1, repeat=reps[k]))
    return {
        k: Stats(statistics.median(s.median_us for s in v), min(s.p10_us for s in v),
                 max(s.p90_us for s in v), statistics.fmean(s.mean_us for s in v), sum(s.n for s in v))
        for k, v in per_round.items()
    }


def main(args: argparse.Namespace) -> int:
    import torch
    import xgrammar as xgr

    from bench.harness import measure, print_table, progress, write_rows
    from thinkgate.kernels import apply_token_bitmask_inplace

    dtype = getattr(torch, args.dtype)
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    cuda = args.device != "cpu" and torch.cuda.is_available()
    if args.device == "cuda" and not cuda:
        raise SystemExit("--device cuda: no CUDA device")
    rows: list[dict] = []
    if cuda:
        from bench.kernels_gpu import DENSITIES, gpu_rows

        dtypes = [d for d in args.dtypes.split(",") if d]
        densities = [d for d in args.densities.split(",") if d]
        bad = [d for d in dtypes if d not in ("float32", "bfloat16", "float16")] + \
            [d for d in densities if d not in DENSITIES]
        if bad:
            raise SystemExit(f"unknown dtype or density: {bad}")
        gpu, bandwidth = gpu_rows(args.batches, args.vocabs, dtypes, densities, seed=args.seed,
                                   xgrammar_cuda=args.xgrammar_cuda == "auto")
        rows.extend(gpu)
    if args.device == "cuda":
        _print_gpu(gpu, bandwidth)
        if not args.no_write:
            path = write_rows("kernels", rows, args.out)
            progress(f"rows appended to {path}")
        return 0
    for width in args.vocabs:
        vocab = min(TOKENIZER_SIZE.get(width, width), width)
        for batch in args.batches:
            progress(f"width {width} batch {batch}")
            bitmask = realistic_bitmask(batch, width, vocab, seed=args.seed, string_every=args.string_every)
            logits = torch.randn((batch, width)).to(dtype)

            # Same result as xgrammar below vocab_size (xgrammar leaves the padding ids alone).
            ours_out, xgr_out = logits.clone(), logits.clone()
            apply_token_bitmask_inplace(ours_out, bitmask, vocab_size=vocab)
            xgr.apply_token_bitmask_inplace(xgr_out, bitmask, vocab_size=vocab, backend="cpu")
            if not torch.equal(ours_out[:, :vocab], xgr_out[:, :vocab]) or not torch.isneginf(ours_out[:, vocab:]).all():
                raise SystemExit(f"our CPU path and xgrammar disagree (width {width}, batch {batch})")

            rep = max(1, args.repeat)
            t = _interleaved({
                "ours": lambda: apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab),
                "xgr_cpu": lambda: xgr.apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab,
                                                                   backend="cpu"),
                "fill": lambda: logits.fill_(0.5),
                "torch": lambda: apply_token_bitmask_inplace(logits, bitmask, vocab_size=vocab,
                                                             backend="torch"),
            }, rep, max(1, args.rounds), measure)
            ours, xgr_cpu, fill, torch_path = t["ours"], t["xgr_cpu"], t["fill"], t["torch"]
            blocked = int(torch.isneginf(ours_out).sum())
            row = {
                "width": width, "vocab_size": vocab, "batch": batch, "dtype": args.dtype,
                "blocked_frac": blocked / (batch * width),
                "ours_us": ours.median_us, "xgr_cpu_us": xgr_cpu.median_us, "fill_us": fill.median_us,
                "torch_us": torch_path.median_us,
                "xgr_over_ours": xgr_cpu.median_us / ours.median_us,
                "ours_over_fill": ours.median_us / fill.median_us,
                # p10: the time with the least interference from other processes on the machine
                "ours_over_fill_p10": ours.p10_us / fill.p10_us,
                "ours_p90_us": ours.p90_us, "xgr_cpu_p90_us": xgr_cpu.p90_us, "fill_p90_us": fill.p90_us,
                "samples": {k: v.n for k, v in t.items()},
            }
            rows.append(row)

    columns = ["width", "batch", "blocked_frac", "ours_us", "xgr_cpu_us", "fill_us", "torch_us",
               "xgr_over_ours", "ours_over_fill", "ours_over_fill_p10"]
    print(f"CPU ({torch.get_num_threads()} torch threads), {args.dtype}, median us "
          f"(ratios of medians; last column: ratio of 10th percentiles)")
    print_table([r for r in rows if r.get("table") != "gpu"], columns)
    if cuda:
        _print_gpu(gpu, bandwidth)
    if not args.no_write:
        path = write_rows("kernels", rows, args.out)
        progress(f"rows appended to {path}")
    return 0


def _print_gpu(rows: list[dict], bandwidth: float) -> None:
    import torch

    from bench.harness import print_table
    from bench.kernels_gpu import GPU_COLUMNS

    print(f"\nCUDA ({torch.cuda.get_device_name(0)}), us per call (CUDA events, back-to-back calls); "
          f"floor_frac = (masked logit bytes + bitmask bytes) / {bandwidth / 1e9:.0f} GB/s copy bandwidth / ours_us; "
          f"masked = percent of ids blocked; miss = targets missed (ratio)")
    print_table(rows, GPU_COLUMNS)
