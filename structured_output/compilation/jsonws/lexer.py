"""Where the whitespace bound's per-request lexer comes from: the C extension ``_jsonws``
(``jsonws/lexer.c``, built by ``setup.py``) or, when it is not built, its pure-Python reference
(``jsonws/lexer_ref.py``, same interface), with one warning.

The C lexer does a token's lexer step and calls the grammar's own accept in one call, and a row's
grammar fill and whitespace clear in one call (the clear: a C loop over the few words the state
touches, instead of a numpy fancy-index AND); :func:`clear_rows` clears every bounded row of a batch
fill in one call. Both implementations give the same states, rows and errors (tested on random token
streams of the real vocabularies, drafts and rollback included).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from . import lexer_ref as jsonws_ref

if TYPE_CHECKING:
    from .bound import WhitespaceBound

try:
    from . import _lexer as _native  # type: ignore[attr-defined]
except ImportError:  # not built (no C compiler at install time): the reference, with one warning
    _native = None

__all__ = ["native", "tables", "new_lexer", "clear_rows"]

_warned = False


def native() -> bool:
    """True when the C extension is in use."""
    return _native is not None


def tables(bound: WhitespaceBound) -> Any:
    """What :func:`new_lexer` takes for ``bound``: the C extension's copy of its tables (built once per
    bound, O(states x vocabulary)), or the bound itself for the reference."""
    if _native is None:
        global _warned
        if not _warned:
            _warned = True
            warnings.warn("thinkgate.structured_output.compilation.jsonws._lexer is not built (reinstall thinkgate with a C "
                          "compiler): the JSON whitespace bound runs its pure-Python lexer, slower per token "
                          "and per row", RuntimeWarning, stacklevel=2)
        return jsonws_ref.tables(bound)
    offsets = np.zeros(bound.num_states + 1, dtype=np.int64)
    idx: list[np.ndarray] = []
    keep: list[np.ndarray] = []
    for s, c in enumerate(bound.clears):
        if c is None:
            n = 0
        elif c.row is not None:  # a whole row: every word
            idx.append(np.arange(c.row.size, dtype=np.int32))
            keep.append(c.row)
            n = c.row.size
        else:
            assert c.idx is not None and c.keep is not None
            idx.append(c.idx.astype(np.int32))
            keep.append(c.keep)
            n = c.idx.size
        offsets[s + 1] = offsets[s] + n
    flat_idx = np.concatenate(idx) if idx else np.zeros(0, dtype=np.int32)
    flat_keep = np.concatenate(keep).astype(np.int32) if keep else np.zeros(0, dtype=np.int32)
    return _native.Bound(bound.step, bound.num_states, bound.width, (bound.width + 31) // 32, offsets,
                         flat_idx, flat_keep)


def new_lexer(tables: Any, accept: Callable[[int, bool], bool], rollback: Callable[[int], Any],
              fill: Callable[[Any, int, bool], bool]) -> Any:
    """One request's lexer over ``tables`` (from :func:`tables`), bound to its grammar's calls (see
    ``jsonws_ref.Lexer``)."""
    if _native is not None and isinstance(tables, _native.Bound):
        return _native.Lexer(tables, accept, rollback, fill)
    return jsonws_ref.Lexer(tables, accept, rollback, fill)


def clear_rows(np_bitmask: np.ndarray, lexers: Sequence[Any], first: int) -> None:
    """Row ``first + i`` of ``np_bitmask`` gets the clear of ``lexers[i]`` (None: no clear); the lexers
    are all C or all reference ones."""
    for lx in lexers:
        if lx is not None:
            if _native is not None and isinstance(lx, _native.Lexer):
                _native.clear_rows(np_bitmask, lexers, first)
            else:
                jsonws_ref.clear_rows(np_bitmask, lexers, first)
            return
