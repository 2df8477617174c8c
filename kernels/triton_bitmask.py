"""The Triton kernel (CUDA; CPU tensors under ``TRITON_INTERPRET=1``).

One launch covers every row: the grid is (bitmask rows, column blocks), so batch 1 on a 256k vocab
still spreads over ~240 programs and a large batch needs no persistent loop. Each program loads the
BLOCK/32 words of its block once, expands them in registers as a [BLOCK/32, 32] tile (no reshape,
so no layout shuffle), and issues a masked store of -inf only where a token is blocked, laid out so
that each warp-wide store covers one word's 32 consecutive logits (see the comment at the store).
A word of all ones produces no memory traffic, so a row that allows everything costs its bitmask
read and nothing else.

No host synchronisation: the logits row comes from the indices tensor on the device, and an index
outside [0, rows) stores nothing (a device index tensor is not range-checked on the host, since
that would need a sync). No per-call allocation besides moving a host index list to the device.
Compared with xgrammar's kernel: bitmask row i goes to logits row indices[i] (xgrammar uses row
indices[i] of both), ids past ``vocab_size`` and columns past 32 * words become -inf (xgrammar
leaves them), blocks are sized for batch 1 instead of a grid of one program per SM, and each warp
store writes whole 128-byte segments where xgrammar's layout writes partial sectors.
Its reference in the tests is :func:`kernels.reference.apply_token_bitmask_reference`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# Sizes used only in comparisons are not specialised (no recompile per batch or vocab); the row
# strides are, so a stride divisible by 16 lets the stores and word loads vectorise.
@triton.jit(do_not_specialize=["n_logit_rows", "width", "limit"])
def _apply_bitmask_kernel(
    logits_ptr,
    bitmask_ptr,
    indices_ptr,
    n_logit_rows,
    width,
    limit,
    logits_row_stride,
    bitmask_row_stride,
    HAS_INDICES: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    block = tl.program_id(1)
    if HAS_INDICES:
        target = tl.load(indices_ptr + row).to(tl.int64)
    else:
        target = row
    word = block * (BLOCK // 32) + tl.arange(0, BLOCK // 32)
    # Words wholly at or past `limit` are never read (limit <= 32 * words keeps reads in bounds).
    packed = tl.load(bitmask_ptr + row * bitmask_row_stride + word, mask=word * 32 < limit, other=0)
    bit = tl.arange(0, 32)
    col = word[:, None] * 32 + bit[None, :]
    blocked = (((packed[:, None] >> bit[None, :]) & 1) == 0) | (col >= limit)
    # An index outside [0, n_logit_rows) gets an empty row: nothing is stored.
    row_width = tl.where((target >= 0) & (target < n_logit_rows), width, 0)
    # The store is masked per element, so it cannot be a vector store. Left alone, Triton would
    # still give each thread 4 adjacent columns (a [1, 4] layout) and every warp-wide scalar store
    # would touch 128 bytes spread over 512 in partial sectors. Declaring no contiguity yields the
    # [1, 32]-lanes layout: each warp store writes one word's 32 logits, one contiguous segment.
    ptrs = tl.max_contiguous(logits_ptr + target * logits_row_stride + col, [1, 1])
    tl.store(ptrs, float("-inf"), mask=blocked & (col < row_width))


def _block_and_warps(n_rows: int) -> tuple[int, int]:
    # Batch 1-7: small blocks so one row of a 256k vocab still fills a large GPU (~240 programs).
    # Larger batches: bigger blocks, fewer programs, longer contiguous stores per warp.
    if n_rows >= 8:
        return 4096, 8
    return 1024, 4


def apply_bitmask_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | None,
    limit: int,
) -> None:
    """Launch the kernel on validated inputs.

    ``logits`` [R, V] with unit column stride; ``bitmask`` int32 [n, words] with unit column
    stride, same device; ``rows`` an int32/int64 tensor of n logits rows on that device, or None;
    ``limit`` = min(vocab_size, 32 * words).
    """
    n = bitmask.shape[0]
    width = logits.shape[1]
    if n == 0 or width == 0:
        return
    block, warps = _block_and_warps(n)
    while triton.cdiv(width, block) > 65535:  # grid axis 1 limit (a vocab beyond 67M columns)
        block *= 2
    grid = (n, triton.cdiv(width, block))
    _apply_bitmask_kernel[grid](
        logits, bitmask, rows if rows is not None else bitmask,
        logits.shape[0], width, limit, logits.stride(0), bitmask.stride(0),
        HAS_INDICES=rows is not None, BLOCK=block, num_warps=warps,
        enable_fp_fusion=False,  # no floating-point arithmetic here; also silences Triton 3.9's notice
    )
