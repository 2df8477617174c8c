"""Bitmask rows built in numpy: one int32 word per 32 tokens, token ``t`` allowed iff bit ``t & 31`` of
word ``t >> 5`` is set (xgrammar's layout).

These build the rows precomputed once per manager or per compiled grammar (stop-only, every real
token, thinking, pending); nothing here runs per row of a step. Each call allocates a row (or a
vocabulary-sized byte array in :func:`set_bits`), so keep the results instead of calling again.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = ["row_with", "set_bits", "row_without"]


def row_with(num_words: int, ids: Iterable[int]) -> np.ndarray:
    """A new row of ``num_words`` words allowing exactly ``ids`` (each in ``[0, 32 * num_words)``)."""
    row = np.zeros(num_words, dtype=np.int32)
    set_bits(row, ids)
    return row


def set_bits(row: np.ndarray, ids: Iterable[int]) -> None:
    """Allow ``ids`` in ``row`` too, in place (``IndexError`` for an id past the row)."""
    arr = np.fromiter(ids, dtype=np.int64)
    if arr.size == 0:
        return
    bits = np.zeros(row.size * 32, dtype=np.uint8)
    bits[arr] = 1
    row |= np.packbits(bits, bitorder="little").view(np.int32)


def row_without(row: np.ndarray, ids: Iterable[int]) -> np.ndarray:
    """A copy of ``row`` with ``ids`` banned; ``row`` is left as it is."""
    out = row.copy()
    u = out.view(np.uint32)
    for t in ids:
        u[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
    return out
