"""The vectorised pure-torch path: any device, no compiler, no Triton.

Used when the C kernel cannot be built (no compiler), for devices other than CPU and CUDA, and on
request (``backend="torch"``). The bitmask is read as bytes (little-endian: byte k of word w holds
tokens 32w + 8k .. 32w + 8k + 7) and expanded through a [256, 8] lookup table into a [n, limit]
bool tensor, which ``masked_fill_`` writes through. It allocates that bool tensor per call and moves
about three times the bytes of ``logits.fill_``; the C and Triton kernels avoid both.
Its reference in the tests is :func:`kernels.reference.apply_token_bitmask_reference`.
"""

from __future__ import annotations

import sys

import torch

_LUTS: dict[torch.device, torch.Tensor] = {}


def _lut(device: torch.device) -> torch.Tensor:
    """[256, 8] bool: entry [b, j] is True when bit j of byte b is 0 (the token is blocked)."""
    lut = _LUTS.get(device)
    if lut is None:
        b = torch.arange(256, dtype=torch.int32)
        lut = (((b[:, None] >> torch.arange(8, dtype=torch.int32)) & 1) == 0).to(device)
        _LUTS[device] = lut
    return lut


def apply_bitmask_torch(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | None,
    limit: int,
) -> None:
    """Apply validated inputs with torch ops.

    ``logits`` [R, V]; ``bitmask`` int32 [n, words]; ``rows`` an int64 tensor of n logits rows on
    the logits' device, or None for row i; ``limit`` = min(vocab_size, 32 * words).
    """
    n = bitmask.shape[0]
    width = logits.shape[1]
    if n == 0 or width == 0:
        return
    neg = float("-inf")
    if limit > 0:
        words = -(-limit // 32)
        raw = bitmask[:, :words].contiguous()
        if sys.byteorder != "little":  # the byte view below assumes little-endian words
            raw = raw.to(torch.int64) & 0xFFFFFFFF
            byte_vals = torch.stack([(raw >> (8 * k)) & 0xFF for k in range(4)], dim=-1).reshape(n, -1)
        else:
            byte_vals = raw.view(torch.uint8)
        # index_select with int32 indices: much faster on CPU than advanced indexing with int64 (bench kernels)
        blocked = torch.index_select(_lut(bitmask.device), 0, byte_vals.reshape(-1).to(torch.int32))
        blocked = blocked.reshape(n, 32 * words)[:, :limit]
    if rows is None:
        if limit > 0:
            logits[:n, :limit].masked_fill_(blocked, neg)
        if limit < width:
            logits[:n, limit:].fill_(neg)
        return
    if limit > 0:
        # Duplicate rows must AND their masks: accumulate=True ORs the blocked flags per row.
        combined = torch.zeros((logits.shape[0], limit), dtype=torch.bool, device=logits.device)
        combined.index_put_((rows,), blocked, accumulate=True)
        logits[:, :limit].masked_fill_(combined, neg)
    if limit < width:
        target = torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
        target[rows] = True
        logits[:, limit:].masked_fill_(target[:, None], neg)
