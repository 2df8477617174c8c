"""The GPU half of ``python -m bench kernels``: the apply path an engine runs on CUDA, against the floor.

For each dtype, logits width, batch and mask density, on the same device tensors in the same run:

- ``ours_us``: ``apply_token_bitmask_inplace`` (validation + launch + kernel), ``unchecked_us``: the
  engine's pre-validated entry point :func:`apply_token_bitmask_inplace_unchecked`;
- ``path_us``: what an engine's step runs: the bitmask's copy from pinned host memory to a device
  buffer (``non_blocking``; every row of this table has a mask, so every row is copied) plus our call;
  ``h2d_us``: that copy alone;
- ``fill_us``: ``logits.fill_`` of the same logits (the write floor of a kernel that writes every
  masked logit); ``xgr_triton_us`` / ``xgr_cuda_us``: xgrammar's Triton kernel and its CUDA kernel
  (built by nvcc at first import; the column is empty when it cannot be imported);
- ``floor_frac``: (masked logit bytes written + bitmask bytes read) / the device-to-device copy
  bandwidth measured in the same run, over ``ours_us``: the fraction of the memory floor reached.

Each time is the median over 5 rounds of the mean of back-to-back calls between CUDA events, so
launch and Python costs count, as in an engine that launches from Python; the logits rotate among
enough copies that together exceed twice the L2 cache. Masks are random bits with the given
fraction blocked (99.9% is a JSON structure state, 0.1% the inside of a string); ids past the
tokenizer size are always blocked. Every configuration is checked against the reference first.
``miss`` names the issue's targets a row misses (empty: all met).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

TOKENIZER_SIZE = {248320: 248077, 129280: 129280, 131072: 131072}
DENSITIES = {"99.9": 0.999, "50": 0.5, "0.1": 0.001}  # percent of the ids blocked -> fraction


def cuda_time(fn, repeat: int, rounds: int = 5) -> float:
    """Median over ``rounds`` of the mean per-call time of ``repeat`` back-to-back calls (us)."""
    import torch

    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    out = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeat):
            fn()
        end.record()
        end.synchronize()
        out.append(start.elapsed_time(end) * 1e3 / repeat)
    return statistics.median(out)


def copy_bandwidth() -> float:
    """Device copy bandwidth in bytes/s (read + write), from a 1 GiB device-to-device copy."""
    import torch

    src = torch.empty(1 << 28, dtype=torch.float32, device="cuda")
    dst = torch.empty_like(src)
    us = cuda_time(lambda: dst.copy_(src), 10)
    del src, dst
    return 2 * (1 << 28) * 4 / (us * 1e-6)


def random_bitmask(batch: int, width: int, vocab: int, blocked: float, gen) -> Any:
    """int32 [batch, ceil(width / 32)] on the GPU: each id below ``vocab`` blocked with probability
    ``blocked``; ids at or past it blocked."""
    import torch

    words = -(-width // 32)
    allowed = torch.rand((batch, words * 32), device="cuda", generator=gen) >= blocked
    allowed[:, vocab:] = False
    shifts = torch.arange(32, device="cuda", dtype=torch.int32)
    # distinct bits never carry, so an int32 sum is the word (bit 31 adds -2**31, the sign bit)
    return (allowed.view(batch, words, 32).to(torch.int32) << shifts).sum(-1, dtype=torch.int32)


def expected_of(logits, bitmask, vocab: int):
    """The reference, vectorised over the batch (the bench may allocate [batch, V]; the kernels never do)."""
    import torch

    width = logits.shape[1]
    col = torch.arange(width, device=logits.device)
    bits = (bitmask[:, col >> 5] >> (col & 31).to(torch.int32)) & 1
    allowed = (bits == 1) & (col < vocab)
    return torch.where(allowed, logits, torch.full((), float("-inf"), dtype=logits.dtype, device=logits.device))


def xgrammar_kernels(cuda: bool = True) -> dict[str, Any]:
    """xgrammar's Triton and CUDA kernels (the CUDA one only if ``cuda``), those that import."""
    found: dict[str, Any] = {}
    try:
        from xgrammar.kernels.apply_token_bitmask_inplace_triton import apply_token_bitmask_inplace_triton

        found["triton"] = apply_token_bitmask_inplace_triton
    except Exception as e:  # noqa: BLE001 - any failure means "not available"
        print(f"[bench] xgrammar's Triton kernel unavailable: {e}")
    if not cuda:
        return found
    try:
        from xgrammar.kernels.apply_token_bitmask_inplace_cuda import apply_token_bitmask_inplace_cuda

        found["cuda"] = apply_token_bitmask_inplace_cuda
    except Exception as e:  # noqa: BLE001
        print(f"[bench] xgrammar's CUDA kernel unavailable: {type(e).__name__}: {str(e)[:200]}")
    return found


def misses(row: dict[str, Any]) -> str:
    """The issue's targets this row misses, as 'name=ratio' (empty: all met)."""
    out = []
    ours = row["ours_us"]
    if row.get("xgr_cuda_us") and ours > row["xgr_cuda_us"]:
        out.append(f"cuda={ours / row['xgr_cuda_us']:.2f}")
    if row["batch"] == 1 and row.get("xgr_triton_us") and ours > row["xgr_triton_us"]:
        out.append(f"triton={ours / row['xgr_triton_us']:.2f}")
    if row["batch"] >= 64:
        if row.get("xgr_triton_us") and ours > 0.5 * row["xgr_triton_us"]:
            out.append(f"triton/2={ours / row['xgr_triton_us']:.2f}")
        if row["masked"] == "99.9" and ours > 1.15 * row["fill_us"]:
            out.append(f"fill={ours / row['fill_us']:.2f}")
        if row["masked"] == "0.1" and ours > 0.7 * row["fill_us"]:
            out.append(f"fill={ours / row['fill_us']:.2f}")
    return " ".join(out)


def gpu_rows(batches: list[int], widths: list[int], dtypes: list[str], densities: list[str],
             seed: int = 0, xgrammar_cuda: bool = True) -> tuple[list[dict[str, Any]], float]:
    """One row per configuration, and the measured copy bandwidth (bytes/s)."""
    import torch

    from bench.harness import progress
    from thinkgate.kernels import apply_token_bitmask_inplace, apply_token_bitmask_inplace_unchecked

    bandwidth = copy_bandwidth()
    progress(f"device copy bandwidth {bandwidth / 1e9:.0f} GB/s on {torch.cuda.get_device_name(0)}")
    xgr = xgrammar_kernels(xgrammar_cuda)
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    rows: list[dict[str, Any]] = []
    for dtype_name in dtypes:
        dtype = getattr(torch, dtype_name)
        for width in widths:
            vocab = min(TOKENIZER_SIZE.get(width, width), width)
            for batch in batches:
                size = batch * width * dtype.itemsize
                copies = max(1, min(64, math.ceil(2 * l2 / size)))
                logits = [torch.randn((batch, width), device="cuda", generator=gen).to(dtype) for _ in range(copies)]
                for masked in densities:
                    bitmask = random_bitmask(batch, width, vocab, DENSITIES[masked], gen)
                    host = torch.empty(bitmask.shape, dtype=torch.int32, pin_memory=True)
                    host.copy_(bitmask)
                    device_mask = torch.empty_like(bitmask)

                    want = expected_of(logits[0], bitmask, vocab)
                    got = logits[0].clone()
                    apply_token_bitmask_inplace(got, bitmask, vocab_size=vocab)
                    if not torch.equal(got, want):
                        raise SystemExit(f"the Triton kernel disagrees with the reference ({dtype_name}, "
                                         f"width {width}, batch {batch}, {masked}% masked)")
                    del got, want
                    blocked = int((~((bitmask[:, :, None] >> torch.arange(32, device="cuda", dtype=torch.int32)) & 1)
                                   .bool()).view(batch, -1)[:, :width].sum())

                    turn = [0]

                    def nxt():
                        turn[0] = (turn[0] + 1) % copies
                        return logits[turn[0]]

                    candidates = {
                        "ours": lambda: apply_token_bitmask_inplace(nxt(), bitmask, vocab_size=vocab),
                        "unchecked": lambda: apply_token_bitmask_inplace_unchecked(nxt(), bitmask, None, vocab),
                        "path": lambda: (device_mask.copy_(host, non_blocking=True),
                                         apply_token_bitmask_inplace(nxt(), device_mask, vocab_size=vocab)),
                        "h2d": lambda: device_mask.copy_(host, non_blocking=True),
                        "fill": lambda: nxt().fill_(0.5),
                    }
                    if "triton" in xgr:
                        candidates["xgr_triton"] = lambda: xgr["triton"](nxt(), bitmask, vocab_size=vocab)
                    if "cuda" in xgr:
                        candidates["xgr_cuda"] = lambda: xgr["cuda"](nxt(), bitmask)
                    # about 2 ms of calls per round, at least 5
                    est = max(cuda_time(candidates["fill"], 3, rounds=1), 1.0)
                    repeat = max(5, min(100, int(2000 / est)))
                    t = {k: cuda_time(fn, repeat) for k, fn in candidates.items()}
                    moved = blocked * dtype.itemsize + bitmask.numel() * 4
                    floor_us = moved / bandwidth * 1e6
                    row = {
                        "table": "gpu", "dtype": dtype_name, "width": width, "vocab_size": vocab, "batch": batch,
                        "masked": masked, "blocked_frac": blocked / (batch * width),
                        "ours_us": t["ours"], "unchecked_us": t["unchecked"], "path_us": t["path"],
                        "h2d_us": t["h2d"], "fill_us": t["fill"],
                        "xgr_triton_us": t.get("xgr_triton"), "xgr_cuda_us": t.get("xgr_cuda"),
                        "ours_over_fill": t["ours"] / t["fill"],
                        "ours_over_xgr_triton": t["ours"] / t["xgr_triton"] if "xgr_triton" in t else None,
                        "ours_over_xgr_cuda": t["ours"] / t["xgr_cuda"] if "xgr_cuda" in t else None,
                        "floor_us": floor_us, "floor_frac": floor_us / t["ours"],
                    }
                    row["miss"] = misses(row)
                    rows.append(row)
                    progress(f"{dtype_name} width {width} batch {batch} masked {masked}%: ours {t['ours']:.1f} us, "
                             f"fill {t['fill']:.1f}, xgr_triton {t.get('xgr_triton', 0):.1f}, xgr_cuda "
                             f"{t.get('xgr_cuda', 0):.1f}, unchecked {t['unchecked']:.1f} {row['miss']}")
                    del bitmask, host, device_mask
                del logits
                torch.cuda.empty_cache()
    return rows, bandwidth


GPU_COLUMNS = ["dtype", "width", "batch", "masked", "ours_us", "unchecked_us", "fill_us", "xgr_triton_us",
               "xgr_cuda_us", "ours_over_fill", "ours_over_xgr_triton", "ours_over_xgr_cuda", "floor_frac",
               "h2d_us", "path_us", "miss"]
