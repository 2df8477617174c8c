"""The pure-torch reference of the bitmask operation: the executable form of the contract.

Every fast path (``cpu_bitmask``, ``torch_bitmask``, ``triton_bitmask``) is tested against
:func:`apply_token_bitmask_reference` with exact equality. It is written for clarity, one bitmask
row at a time, and does no validation: :func:`kernels.apply_token_bitmask_inplace` validates first.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def apply_token_bitmask_reference(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
    vocab_size: int | None = None,
) -> None:
    """Set every disallowed logit to -inf, in place::

        for i, r in enumerate(indices if indices is not None else range(bitmask.shape[0])):
            for t in range(logits.shape[-1]):
                allowed = t < vocab_size and t < 32 * bitmask.shape[-1] \\
                          and (bitmask[i, t // 32] >> (t % 32)) & 1
                if not allowed: logits[r, t] = -inf

    ``logits`` is [rows, V] (or [V]), ``bitmask`` int32 [n, words] (or [words]); ``vocab_size``
    defaults to V. Duplicate entries in ``indices`` apply every one of their masks (an AND).
    """
    logits2 = logits.unsqueeze(0) if logits.dim() == 1 else logits
    bitmask2 = bitmask.unsqueeze(0) if bitmask.dim() == 1 else bitmask
    width = logits2.shape[-1]
    words = bitmask2.shape[-1]
    vocab = width if vocab_size is None else int(vocab_size)
    rows = range(bitmask2.shape[0]) if indices is None else [int(r) for r in indices]

    token = torch.arange(width, device=logits2.device)
    in_range = (token < vocab) & (token < 32 * words)
    word_of = (token // 32).clamp(max=max(words - 1, 0))
    shift = token % 32
    for i, r in enumerate(rows):
        if words:
            # int64 keeps the sign bit of the int32 word as an ordinary bit 31.
            bits = (bitmask2[i].to(torch.int64)[word_of] >> shift) & 1
            allowed = in_range & (bits == 1)
        else:
            allowed = in_range
        logits2[r].masked_fill_(~allowed, float("-inf"))
