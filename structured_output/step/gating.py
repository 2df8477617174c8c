"""Reasoning gating: the rows a request gets while its thinking has not ended.

While thinking, the grammar does not apply; the only row is the *think row*: every real token except
the implicit end tokens the grammar could not start with (such a token would end the thinking *and*
be rejected by the grammar). When no implicit end token is banned there is no row at all. While a
model that may skip its thinking has not decided yet (its tracker's ``keep_thinking_token_ids()`` is
not None), the row is the *pending row*: the grammar's first-token mask plus the tokens that keep the
thinking possible. Both rows are computed once per compiled grammar (and parser, or keeper set) and
kept in :attr:`CompiledConstraint.derived`, shared by every request on that grammar.

A request that thinks while its constraint still compiles gets the *hold row*: every real token
except those that would end its thinking now (the tracker's ``ending_token_ids``), so the thinking
cannot end before the grammar exists; one row per set of ids, kept here.

Which row a request takes at each position is the request's own business
(:class:`~.request.StructuredRequest`); this module builds and keeps the rows.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable

import numpy as np

from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.compiler import CompiledConstraint
from .rows import row_with, row_without, set_bits

__all__ = ["ReasoningGate"]

_MAX_DERIVED_ROWS = 1024
"""Bound on the pending rows kept per compiled grammar: keeper sets are few (one per undecided
prefix of a marker), but they come from the tracker, so the cache is bounded anyway."""


class ReasoningGate:
    """The thinking, pending and hold rows of one manager's (or engine backend's) requests, built once
    with it.

    ``implicit_end_token_ids``: the parser's tokens that end the thinking and are also content (empty
    without a parser). Building it allocates the every-real-token row (one vocabulary-sized row); per
    request, a row costs a dictionary look-up once it exists. ``lock``: held while a missing row is
    built and stored, for a backend whose requests are created on several threads (the compiler's
    callback threads); without it, driven by one thread (the shared ``derived`` cache is written
    under the GIL, and two threads computing the same row would store equal rows).
    """

    __slots__ = ("_all_row", "_implicit_ids", "_hold_rows", "_lock")

    def __init__(self, vocabulary: Vocabulary, implicit_end_token_ids: Iterable[int], *,
                 lock: threading.Lock | None = None) -> None:
        num_words = (vocabulary.logits_width + 31) // 32
        self._all_row = row_with(num_words, range(vocabulary.vocab_size))  # every real token
        self._implicit_ids = tuple(sorted(implicit_end_token_ids))
        self._hold_rows: dict[frozenset[int], np.ndarray | None] = {}
        self._lock: contextlib.AbstractContextManager[object] = lock if lock is not None else contextlib.nullcontext()

    def think_row(self, compiled: CompiledConstraint) -> np.ndarray | None:
        """The row of a thinking position on ``compiled`` (None: no row, when the grammar can start
        with every implicit end token); shared per compiled grammar."""
        d = compiled.derived
        key = ("think", self._implicit_ids)
        row = d.get(key, False)
        if row is False:
            with self._lock:
                banned = [t for t in self._implicit_ids if not compiled.allows_first(t)]
                row = d[key] = row_without(self._all_row, banned) if banned else None
        return row

    def pending_row(self, compiled: CompiledConstraint, keep: frozenset[int]) -> np.ndarray | None:
        """The grammar's first-token mask plus ``keep`` (None when that allows every real token);
        shared per compiled grammar and keeper set."""
        d = compiled.derived
        pkey = ("pending", keep)
        row = d.get(pkey, False)
        if row is False:
            with self._lock:
                row = compiled.initial_mask.copy()
                set_bits(row, keep)
                row = None if np.array_equal(row, self._all_row) else row
                if len(d) < _MAX_DERIVED_ROWS:
                    d[pkey] = row
        return row

    def hold_row(self, ending: frozenset[int] | None) -> np.ndarray | None:
        """Every real token but ``ending`` (None: no row, for no ids or ids that cannot be held)."""
        if not ending:
            return None
        row = self._hold_rows.get(ending, False)
        if row is False:
            row = row_without(self._all_row, sorted(ending))
            if len(self._hold_rows) < _MAX_DERIVED_ROWS:
                self._hold_rows[ending] = row
        return row
