"""Bitmasks shaped like real ones, for kernel tests and benchmarks.

Seeded, so every run sees the same masks: three rows in four are JSON structure (a few allowed ids, the
rest blocked); every fourth row is inside a JSON string (everything allowed except a small share of ids
scattered at random, as tokens with a quote, a backslash or a control byte). Ids at or past the tokenizer
size are never allowed (Qwen3.6: 248,077 ids in a 248,320-wide logits row).
"""

from __future__ import annotations

__all__ = ["realistic_bitmask"]


def realistic_bitmask(batch: int, width: int, vocab_size: int, *, seed: int = 0, string_every: int = 4,
                      structure_allowed: int = 24, string_blocked: float = 0.015):
    """int32 [batch, ceil(width / 32)]: structure rows and string rows as described in the module."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    words = -(-width // 32)
    allowed = torch.zeros((batch, words * 32), dtype=torch.bool)
    for i in range(batch):
        if string_every and i % string_every == string_every - 1:
            allowed[i, :vocab_size] = True
            blocked = torch.randint(0, vocab_size, (int(string_blocked * vocab_size),), generator=gen)
            allowed[i, blocked] = False
        else:
            allowed[i, torch.randint(0, vocab_size, (structure_allowed,), generator=gen)] = True
    packed = (allowed.view(batch, words, 32).to(torch.int64) << torch.arange(32)).sum(-1)
    return (packed - (packed >= 2**31).to(torch.int64) * 2**32).to(torch.int32)
