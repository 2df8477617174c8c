"""Reasoning gating: which rows a request gets while its thinking has not ended.

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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from thinkgate.reasoning.base import ReasoningEnd
from thinkgate.reasoning.vocabulary import Vocabulary

from .buffer import BitmaskBuffer
from .compiler import CompiledConstraint
from .request_state import RequestState
from .rows import row_with, row_without, set_bits

__all__ = ["ReasoningGate"]

_MAX_DERIVED_ROWS = 1024
"""Bound on the pending rows kept per compiled grammar: keeper sets are few (one per undecided
prefix of a marker), but they come from the tracker, so the cache is bounded anyway."""


class ReasoningGate:
    """The thinking and pending rows of one manager's requests (built once per manager).

    ``implicit_end_token_ids``: the parser's tokens that end the thinking and are also content (empty
    without a parser). Building it allocates the every-real-token row (one vocabulary-sized row);
    per request, :meth:`prepare` and :meth:`refresh_pending` cost a dictionary look-up once the rows of
    its grammar exist. Driven by the manager's thread only (the shared ``derived`` cache is written
    under the GIL, and two threads computing the same row would store equal rows).
    """

    __slots__ = ("_all_row", "_implicit_ids", "_hold_rows")

    def __init__(self, vocabulary: Vocabulary, implicit_end_token_ids: Iterable[int]) -> None:
        num_words = (vocabulary.logits_width + 31) // 32
        self._all_row = row_with(num_words, range(vocabulary.vocab_size))  # every real token
        self._implicit_ids = tuple(sorted(implicit_end_token_ids))
        self._hold_rows: dict[frozenset[int], np.ndarray | None] = {}

    def prepare(self, req: RequestState, compiled: CompiledConstraint) -> None:
        """Set the thinking rows of a request whose compile just finished and whose thinking has not
        ended (``req.tracker`` is set)."""
        d = compiled.derived
        key = ("think", self._implicit_ids)
        if key not in d:
            banned = [t for t in self._implicit_ids if not compiled.allows_first(t)]
            d[key] = row_without(self._all_row, banned) if banned else None
        req.think_row = d[key]
        req.pending = True
        self.refresh_pending(req)

    def refresh_pending(self, req: RequestState) -> None:
        """Is the next token the one that decides between thinking and content? The tracker says
        (``keep_thinking_token_ids``); then ``req.pending_row`` is the row for it. Call it after the
        tracker advanced, while ``req.pending``."""
        tracker = req.tracker
        assert tracker is not None, "a thinking request has a tracker"
        keep = tracker.keep_thinking_token_ids()
        if keep is None or req.compiled is None:
            req.pending = False
            req.pending_row = None
            return
        req.pending = True
        req.pending_row = self.pending_row(req.compiled, keep)

    def pending_row(self, compiled: CompiledConstraint, keep: frozenset[int]) -> np.ndarray | None:
        """The grammar's first-token mask plus ``keep`` (None when that allows every real token);
        shared per compiled grammar and keeper set."""
        d = compiled.derived
        pkey = ("pending", keep)
        row = d.get(pkey, False)
        if row is False:
            row = compiled.initial_mask.copy()
            set_bits(row, keep)
            row = None if np.array_equal(row, self._all_row) else row
            if len(d) < _MAX_DERIVED_ROWS:
                d[pkey] = row
        return row

    def thinking_rows(self, req: RequestState, drafts: Sequence[int], base: int, sb: BitmaskBuffer,
                      row_logits: list[int], row_rids: list[str]) -> ReasoningEnd | None:
        """The thinking rows of a thinking request (with a grammar) whose logits rows start at ``base``;
        returns where its thinking ends inside ``drafts`` (None: it does not).

        Each thinking position gets the thinking (or pending) row, placed at ``len(row_logits)`` by
        :meth:`BitmaskBuffer.place` (not written again when that place holds it already). The
        positions after the returned end are grammar rows: the caller fills them, the grammar starting
        at ``drafts[end.content_start]`` with its first row at ``end.offset + 1``. Changes no request
        state (the tracker is only scanned)."""
        tracker = req.tracker
        assert tracker is not None, "a thinking request has a tracker"
        nd = len(drafts)
        end = tracker.scan(drafts) if nd else None
        last_thinking = nd if end is None else end.offset  # rows 0..last_thinking are thinking rows
        rid = req.rid
        for j in range(last_thinking + 1):
            if not req.pending:
                row = req.think_row
            elif j == 0:
                row = req.pending_row
            else:
                # still undecided after drafts 0..j-1? (text markers: the decision can take several tokens)
                keep = tracker.keep_thinking_token_ids(drafts[:j])
                if keep is None:
                    row = req.think_row
                else:
                    compiled = req.compiled
                    assert compiled is not None, "a pending request has a grammar"
                    row = self.pending_row(compiled, keep)
            if row is not None:
                sb.place(len(row_logits), row)  # same row as last step at this place: nothing written
                row_logits.append(base + j)
                row_rids.append(rid)
        return end

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

    def holding_rows(self, req: RequestState, drafts: Sequence[int], base: int, sb: BitmaskBuffer,
                     row_logits: list[int], row_rids: list[str]) -> None:
        """The rows of a thinking request whose constraint still compiles: at each position, the hold
        row after the drafts before it. A draft that would end the thinking is banned by its own row
        (so the engine rejects it and every draft after it): no row follows it. Changes no state."""
        tracker = req.tracker
        assert tracker is not None, "a thinking request has a tracker"
        nd = len(drafts)
        end = tracker.scan(drafts) if nd else None
        last = nd if end is None else end.offset
        rid = req.rid
        for j in range(last + 1):
            row = self.hold_row(tracker.ending_token_ids(drafts[:j]) if j else tracker.ending_token_ids())
            if row is not None:
                sb.place(len(row_logits), row)
                row_logits.append(base + j)
                row_rids.append(rid)
