"""The Triton kernel (CUDA; CPU tensors under ``TRITON_INTERPRET=1``).

One launch covers every row: the grid is (bitmask rows, column blocks), so batch 1 on a 256k vocab
still spreads over ~240 programs and a large batch needs no persistent loop. The kernel only ever
stores -inf; it never reads the logits, so duplicate indices cannot race (both write -inf) and a
token that is allowed costs no logit traffic at all. Per program (BLOCK columns of one row):

1. Read the block's bitmask words once, as one VEC-bit field per group of VEC columns
   (VEC * element size = 16 bytes: 4 float32 or 8 bfloat16 / float16 columns), and count in one
   reduction the groups with something to store and the mixed ones (allowed and blocked columns).
2. A block with nothing to store stops there (whole all-allowed blocks are skipped; an all-ones
   word costs its read and nothing else).
3. Sparse path, when at most 1 / MIXED_SHARE of the groups are mixed (a JSON structure state, 99.9%
   blocked, or text that allows almost everything): each thread owns whole groups in a
   [groups, VEC] tile. A wholly blocked group is one 16-byte vector store, a warp writing 512
   consecutive bytes (as ``fill_`` writes); the few mixed groups store their blocked columns from
   the same registers, one column per instruction and lane. A few instructions per column, so a
   row that blocks almost nothing costs little more than reading its bitmask.
4. Dense path, when many groups are mixed (about half blocked): a 1-D tile declared
   non-contiguous, one column per lane, so a warp-wide store covers 32 consecutive logits (lanes
   16 bytes apart would multiply the partial-sector writes).

Both layouts follow from the pointers' contiguity alone (a [groups, VEC] tile whose contiguous
axis is the last; a 1-D tile), so they do not depend on how a Triton version orders the axes of
a tile with no contiguity at all (the layout of the previous [words, 32] tile flipped to lanes 64
or 128 bytes apart under Triton 3.3 and 3.6). tests/test_kernel_store_layout.py compiles the kernel
for sm_90 and checks the stores' layouts under the installed Triton; bench/triton_layouts.sh does
the same under the Triton versions that engines ship.

No host synchronisation: the logits row comes from the indices tensor on the device, and an index
outside [0, rows) stores nothing (a device index tensor is not range-checked on the host, since
that would need a sync). No per-call allocation besides moving a host index list to the device.
Compared with xgrammar's kernel: bitmask row i goes to logits row indices[i] (xgrammar uses row
indices[i] of both), ids past ``vocab_size`` and columns past 32 * words become -inf (xgrammar
leaves them), and the stores are 16-byte vectors or lane-contiguous scalars (xgrammar's Triton
kernel stores one column per instruction from a reshaped [words, 32] tile).
Its reference in the tests is :func:`kernels.reference.apply_token_bitmask_reference`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

# Sizes used only in comparisons, and the bitmask's row stride, are not specialised (fewer compiled
# variants: no recompile per batch or vocab); the logits row stride is, so a stride divisible by 16
# lets the group stores be 16-byte vectors.
DO_NOT_SPECIALIZE = ["n_logit_rows", "width", "limit", "bitmask_row_stride"]


@triton.jit(do_not_specialize=DO_NOT_SPECIALIZE)
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
    VEC: tl.constexpr,
    MIXED_SHARE: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1) * BLOCK
    if HAS_INDICES:
        target = tl.load(indices_ptr + row).to(tl.int64)
    else:
        target = row
    # An index outside [0, n_logit_rows) gets an empty row: nothing is stored.
    row_width = tl.where((target >= 0) & (target < n_logit_rows), width, 0)
    words = bitmask_ptr + row * bitmask_row_stride
    out = logits_ptr + target * logits_row_stride
    ALL: tl.constexpr = (1 << VEC) - 1

    # 1. one VEC-bit field per group, a bit per column: 1 = leave it alone. A word is read when any of
    # its columns is below `limit` (limit <= 32 * words keeps that in bounds); columns at or past
    # `limit` are blocked (0), columns at or past the row's end are left alone (1).
    gcol = start + tl.arange(0, BLOCK // VEC) * VEC
    gword = tl.load(words + (gcol >> 5), mask=(gcol & ~31) < limit, other=0)
    keep = tl.minimum(tl.maximum(limit - gcol, 0), VEC)
    span = tl.minimum(tl.maximum(row_width - gcol, 0), VEC)
    field = ((gword >> (gcol & 31)) & ((1 << keep) - 1)) | (ALL & ~((1 << span) - 1))
    # one reduction: low 16 bits count the groups with something to store, high bits the mixed ones
    counts = tl.sum(tl.where(field == ALL, 0, tl.where(field == 0, 1, 65537)), axis=0)
    # 2. a block with nothing blocked stores nothing
    if counts != 0:
        if (counts >> 16) * MIXED_SHARE <= BLOCK // VEC:
            # 3. few mixed groups (a JSON structure row, or text that allows almost everything): each thread
            # owns whole groups; a wholly blocked group is one 16-byte store, and the blocked columns of
            # the mixed groups are scalar stores from the same registers (few by construction)
            lane = tl.arange(0, VEC)
            gptrs = out + gcol[:, None] + lane[None, :]
            tl.store(gptrs, float("-inf"), mask=(field == 0)[:, None])
            off = ((field[:, None] >> lane[None, :]) & 1) == 0
            tl.store(gptrs, float("-inf"), mask=off & (field != 0)[:, None])
        else:
            # 4. many mixed groups (about half blocked): one column per lane, so a warp-wide store covers 32
            # consecutive logits (the hint keeps Triton from giving each thread 16 bytes of columns that it
            # would then store one at a time, lanes 16 bytes apart)
            col = start + tl.arange(0, BLOCK)
            word = tl.load(words + (col >> 5), mask=(col & ~31) < limit, other=0)
            blocked = (((word >> (col & 31)) & 1) == 0) | (col >= limit)
            tl.store(tl.max_contiguous(out + col, 1), float("-inf"), mask=blocked & (col < row_width))


def block_and_warps(n_rows: int) -> tuple[int, int]:
    """(columns per program, warps per program) for ``n_rows`` bitmask rows."""
    # Batch 1-7: small blocks so one row of a 256k vocab still fills a large GPU (~240 programs).
    # Larger batches: bigger blocks, fewer programs.
    if n_rows >= 8:
        return 4096, 8
    return 1024, 4


# A block takes the sparse path when at most 1 / MIXED_SHARE of its groups mix allowed and blocked
# columns (their columns are then stored one per instruction and lane, lanes 16 bytes apart).
MIXED_SHARE = 8
# Columns per 16-byte group store.
VEC = {torch.float32: 4, torch.bfloat16: 8, torch.float16: 8}


def apply_bitmask_triton(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | None,
    limit: int,
) -> None:
    """Launch the kernel on validated inputs (no checks here: the caller validated them).

    ``logits`` [R, V] float32 / bfloat16 / float16 with unit column stride and non-overlapping rows;
    ``bitmask`` int32 [n, words] with unit column stride, same device; ``rows`` a contiguous
    int32/int64 tensor of n logits rows on that device, or None (row i); ``limit`` =
    min(vocab_size, 32 * words). This is also the engine's pre-validated entry point:
    :func:`thinkgate.kernels.apply_token_bitmask_inplace_unchecked`.
    """
    n = bitmask.shape[0]
    width = logits.shape[1]
    if n == 0 or width == 0:
        return
    block, warps = block_and_warps(n)
    while triton.cdiv(width, block) > 65535:  # grid axis 1 limit (a vocab beyond 67M columns)
        block *= 2
    _apply_bitmask_kernel[(n, triton.cdiv(width, block))](
        logits, bitmask, rows if rows is not None else bitmask,
        logits.shape[0], width, limit, logits.stride(0), bitmask.stride(0),
        HAS_INDICES=rows is not None, BLOCK=block, VEC=VEC[logits.dtype], MIXED_SHARE=MIXED_SHARE,
        num_warps=warps,
        enable_fp_fusion=False,  # no floating-point arithmetic here; also silences Triton 3.9's notice
    )
