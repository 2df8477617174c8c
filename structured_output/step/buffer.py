"""The manager's preallocated bitmask buffer and the one record of what each of its places holds."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

__all__ = ["BitmaskBuffer"]


class BitmaskBuffer:
    """One preallocated bitmask buffer and what the manager remembers about it between steps.

    ``bitmask`` / ``indices`` are the tensors a :class:`BitmaskBatch` views (``*_np``: numpy views of
    the same memory, for writes from numpy); ``views`` keeps the ``[:n]`` views of each row count
    already returned (slicing a tensor per step costs more than a dictionary look-up). ``last_rows``
    is the list of logits rows that ``indices`` holds (written only when a step's differ), and
    ``last_batch`` the batch returned last from this buffer (returned again, the same object, when a
    step has the same rows and requests: a steady batch of one costs no new object).

    ``static_at[i]`` is the precomputed row (thinking, pending or stop-only) that place ``i`` holds,
    None when something else may be there, so that a place that holds the same precomputed row as
    last step is not written again. It is kept right by two methods, the only writers of the buffer's
    rows: :meth:`place` writes a precomputed row, and :meth:`overwritten` is called *before* any fill
    may write into a range of places (every fill: kept, dropped because it allows everything, dead,
    or cut short by an exception).

    ``probe``: word offsets inside a row where a row that allows anything usually has a bit set (the
    words of the single-byte text tokens); :meth:`row_is_empty` reads those first and scans the whole
    row only when they are all zero.
    """

    __slots__ = ("bitmask", "bitmask_np", "indices", "indices_np", "views", "static_at", "num_words", "_words",
                 "_probe", "last_rows", "last_batch", "_static_end")

    def __init__(self, rows: int, num_words: int, pin_memory: bool, probe: tuple[int, ...] = ()) -> None:
        self.bitmask = torch.empty((rows, num_words), dtype=torch.int32, pin_memory=pin_memory)
        self.bitmask_np: np.ndarray = self.bitmask.numpy()
        self.indices = torch.empty((rows,), dtype=torch.int32, pin_memory=pin_memory)
        self.indices_np: np.ndarray = self.indices.numpy()
        self.views: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.static_at: list[np.ndarray | None] = [None] * rows
        self.num_words = num_words
        self._words = memoryview(self.bitmask_np.reshape(-1))  # one word: a Python int, no numpy scalar
        self._probe = tuple(p for p in probe if 0 <= p < num_words)
        self._static_end = 0  # static_at[i] is None for every i >= this
        self.last_rows: list[int] | None = None  # the logits rows that indices[:len] holds
        self.last_batch: Any = None             # the batch returned last from this buffer

    def place(self, i: int, row: np.ndarray) -> None:
        """Put the precomputed ``row`` at place ``i`` (written only when the place holds another row)."""
        if self.static_at[i] is not row:
            self.bitmask_np[i] = row
            self.static_at[i] = row
            if i >= self._static_end:
                self._static_end = i + 1

    def overwritten(self, start: int, stop: int) -> None:
        """Places ``start .. stop-1`` may be written by fills: they hold no known precomputed row."""
        end = self._static_end
        if start >= end:  # the usual case of a step without precomputed rows: nothing to forget
            return
        if stop >= end:
            self._static_end = start
        stop = min(stop, end)
        if start < stop:
            self.static_at[start:stop] = [None] * (stop - start)

    def row_is_empty(self, i: int) -> bool:
        """True when row ``i`` allows no token at all (rare: a grammar's dead end)."""
        words = self._words
        base = i * self.num_words
        for p in self._probe:
            if words[base + p]:
                return False
        return not np.count_nonzero(self.bitmask_np[i])

    def any_empty(self, start: int, stop: int) -> bool:
        """True when one of rows ``start .. stop-1`` allows no token at all (:meth:`row_is_empty` over
        a range, in one call)."""
        words = self._words
        nw = self.num_words
        probe = self._probe
        for i in range(start, stop):
            base = i * nw
            for p in probe:
                if words[base + p]:
                    break
            else:
                if not np.count_nonzero(self.bitmask_np[i]):
                    return True
        return False
