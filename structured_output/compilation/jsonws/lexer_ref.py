"""The whitespace bound's per-request lexer in pure Python: the reference of ``jsonws/lexer.c`` (the tests
compare the two on real vocabularies) and the fallback when that extension is not built.

Same interface as ``_jsonws``: :class:`Lexer` (one request's lexer state and history, bound to its
grammar's accept / rollback / fill callables) and :func:`clear_rows`; :func:`tables` is the
reference's stand-in for ``_jsonws.Bound`` (it reads the :class:`~.bound.WhitespaceBound` as is).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from .bound import WhitespaceBound

__all__ = ["Lexer", "clear_rows", "tables"]


def tables(bound: WhitespaceBound) -> WhitespaceBound:
    """What :class:`Lexer` reads: the bound itself (the C extension copies it into a ``Bound``)."""
    return bound


def _rows(np_bitmask: Any, num_words: int, index: int) -> np.ndarray:
    """``np_bitmask`` checked as the C extension checks it: an int32 ``[rows, num_words]`` C-contiguous
    array with a row ``index``."""
    if not isinstance(np_bitmask, np.ndarray) or np_bitmask.dtype != np.int32 or np_bitmask.ndim != 2 \
            or np_bitmask.shape[1] != num_words or not np_bitmask.flags.c_contiguous or not np_bitmask.flags.writeable:
        raise ValueError(f"the bitmask must be a writable C-contiguous int32 array [rows, {num_words}]")
    if not 0 <= index < len(np_bitmask):
        raise IndexError(f"row {index} outside the bitmask's {len(np_bitmask)} rows")
    return np_bitmask


class Lexer:
    """One request's lexer of a :class:`~.bound.WhitespaceBound` (see ``jsonws/bound.py``), bound to
    its grammar: ``accept(token_id, debug_print)``, ``rollback(num_tokens)`` and ``fill(bitmask,
    index, debug_print)`` are the grammar's own calls (xgrammar's native matcher)."""

    __slots__ = ("_bound", "_accept", "_rollback", "_fill", "_state", "_hist", "_num_words")

    def __init__(self, bound: WhitespaceBound, accept: Callable[[int, bool], bool], rollback: Callable[[int], Any],
                 fill: Callable[[Any, int, bool], bool]) -> None:
        self._bound = bound
        self._accept = accept
        self._rollback = rollback
        self._fill = fill
        self._state = 0
        self._hist: list[int] = []  # the state before each accepted token
        self._num_words = (bound.width + 31) // 32

    def _next(self, token_id: int) -> int:
        b = self._bound
        t = operator.index(token_id)  # TypeError for a non-integer, as the C lexer
        if not 0 <= t < b.width:
            return self._state  # no JSON text: the grammar rejects it, or it moves nothing
        return b.step[self._state * b.width + t]

    def accept(self, token_id: int, debug_print: bool = False) -> bool:
        """Refuse a token that breaks the bound (the grammar is not called), else the grammar's accept;
        the lexer moves only when the grammar accepted."""
        nxt = self._next(token_id)
        if nxt == self._bound.reject:
            return False
        if not self._accept(token_id, debug_print):
            return False
        self._hist.append(self._state)
        self._state = nxt
        return True

    def accept_many(self, token_ids: list[int], stops: frozenset[int] | set[int]) -> int:
        """:meth:`accept` on each token in turn, up to the first one refused (its index is returned) or
        through the first stop token (the index after it: the tokens after a stop are never offered);
        ``len(token_ids)`` when all were accepted."""
        if not isinstance(token_ids, list) or not isinstance(stops, (set, frozenset)):
            raise TypeError("accept_many(token_ids: list, stops: set)")
        k = 0
        for t in token_ids:
            if not self.accept(t):
                return k
            k += 1
            if t in stops:
                return k
        return k

    def rollback(self, num_tokens: int = 1) -> None:
        """The grammar's rollback, then the lexer's (``ValueError`` for more tokens than were accepted:
        then nothing moves)."""
        n = int(num_tokens)
        if n > len(self._hist):
            raise ValueError(f"cannot roll back {n} tokens: {len(self._hist)} accepted")
        self._rollback(num_tokens)
        if n > 0:
            self._state = self._hist[-n]
            del self._hist[-n:]

    def fill(self, bitmask: Any, index: int = 0, np_bitmask: np.ndarray | None = None, *,
             debug_print: bool = False) -> bool:
        """The grammar's fill of row ``index`` of ``bitmask``, then this state's clear of that row of
        ``np_bitmask`` (the same memory as an int32 array; None: ``bitmask.numpy()``); True when the
        row masks something. The signature of ``BoundedMatcher.fill_next_token_bitmask``."""
        needs = self._fill(bitmask, index, debug_print)
        c = self._bound.clears[self._state]
        if c is None:
            return bool(needs)
        if np_bitmask is None:
            np_bitmask = bitmask.numpy()
        c.apply(_rows(np_bitmask, self._num_words, index), index)
        return True

    def clear(self, np_bitmask: np.ndarray, index: int) -> bool:
        """This state's clear of row ``index`` (True when it clears something)."""
        rows = _rows(np_bitmask, self._num_words, index)
        c = self._bound.clears[self._state]
        if c is None:
            return False
        c.apply(rows, index)
        return True

    def breaks(self, token_id: int) -> bool:
        """True when ``token_id`` would make a gap longer than the bound from here (changes nothing)."""
        return self._next(token_id) == self._bound.reject

    def reset(self) -> None:
        """Back to the start state, no history (the grammar's reset is the caller's)."""
        self._state = 0
        self._hist.clear()

    @property
    def state(self) -> int:
        return self._state

    @property
    def depth(self) -> int:
        return len(self._hist)

    @property
    def clears(self) -> bool:
        return self._bound.clears[self._state] is not None


def clear_rows(np_bitmask: np.ndarray, lexers: Sequence[Lexer | None], first: int) -> None:
    """Row ``first + i`` gets the clear of ``lexers[i]`` (None: no clear)."""
    if first < 0 or first + len(lexers) > len(np_bitmask):
        raise IndexError(f"rows {first}..{first + len(lexers)} outside the bitmask's {len(np_bitmask)} rows")
    for i, lx in enumerate(lexers):
        if lx is not None:
            lx.clear(np_bitmask, first + i)
