"""Filling grammar rows into the bitmask buffer: one row per request, or a walk through its drafts.

:class:`RowFiller` picks, per round of rows, between xgrammar's batch matcher (its own threads,
outside the GIL) and filling one by one (a plain loop under the GIL, cheaper per row for small
rounds). Either way the rows are the same; only their order in the batch differs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import xgrammar as xgr

from ..compilation.jsonws import lexer as jsonws
from ..compilation.jsonws.bound import BoundedMatcher
from .buffer import BitmaskBuffer

__all__ = ["Walk", "StepPlan", "RowFiller", "auto_fill_threads"]


class Walk:
    """One request's grammar rows through its drafts, in one step.

    Row ``j`` of the request (logits row ``logits_base + j``) masks the token after draft ``j - 1``:
    ``next_row`` is the next row to fill, and also the next draft to accept once it is filled.
    ``accepted`` counts the drafts the matcher has accepted this step (rolled back at the end, so the
    matcher leaves the step at the committed state). When the thinking ends inside the drafts,
    ``drafts[content_start:next_row]`` (the implicit end token, if any) go to the grammar before its
    first row; otherwise ``content_start == next_row == 0``. ``may_allow_all``: a row may allow every
    token, and such a row is dropped (it would mask nothing), so the batch matcher is not used.
    """

    __slots__ = ("matcher", "drafts", "next_row", "logits_base", "accepted", "request_id", "may_allow_all",
                 "content_start")

    def __init__(self, matcher: xgr.GrammarMatcher, drafts: Sequence[int], next_row: int, logits_base: int,
                 request_id: str, may_allow_all: bool, content_start: int) -> None:
        self.matcher = matcher
        self.drafts = drafts
        self.next_row = next_row
        self.logits_base = logits_base
        self.accepted = 0
        self.request_id = request_id
        self.may_allow_all = may_allow_all
        self.content_start = content_start


@dataclass(eq=False, slots=True)
class StepPlan:
    """One step after its caller's half (the schedule checked, the precomputed rows placed): what is
    left to fill. ``row_logits`` / ``row_rids`` already hold the precomputed rows (the logits row and
    request of each place of ``buffer``, in place order); the fill appends the grammar rows. Each
    scheduled request adds its part (:meth:`~.request.StructuredRequest.plan_rows`)."""

    buffer: BitmaskBuffer
    row_logits: list[int] = field(default_factory=list)
    row_rids: list[str] = field(default_factory=list)
    plain_matchers: list[xgr.GrammarMatcher] = field(default_factory=list)
    """Constrained requests without drafts whose rows never allow everything: one row each,"""
    plain_rows: list[int] = field(default_factory=list)
    """at these logits rows,"""
    plain_rids: list[str] = field(default_factory=list)
    """for these requests."""
    walks: list[Walk] = field(default_factory=list)
    """The other constrained requests (see :class:`Walk`)."""
    fill_rows: int = 0
    """At most this many rows are filled (after the precomputed ones)."""
    num_logits_rows: int = 0
    """Logits rows the schedule covers (the batch's ``num_logits_rows``)."""


class RowFiller:
    """Fills grammar rows for one manager (built once; owns xgrammar's batch matcher and its threads).

    ``num_threads``: batch-matcher threads (``"auto"``: :func:`auto_fill_threads`). ``min_rows``: a round
    of at least this many rows goes to the batch matcher, smaller ones are filled one by one. With one
    thread the batch matcher is never used: it then pays its batching overhead with no parallelism to
    win it back, and is slower per row than filling one by one; ``always_batch`` uses it anyway, for
    every round (the overlapped fill's choice with several threads: one GIL round trip per round, see
    ``overlap.py``).
    ``ValueError`` for a bad ``num_threads``.

    The fill methods append each filled row's logits row and request id to ``row_logits`` /
    ``row_rids``, the row itself going to place ``len(row_logits)`` of the buffer (the caller's next
    free place; the caller marks the places fills may write with :meth:`BitmaskBuffer.overwritten`
    first); they leave every matcher at its committed state, also when they raise. Not thread-safe:
    one caller at a time.
    """

    __slots__ = ("num_threads", "min_rows", "_batch_matcher", "_stop_ids")

    def __init__(self, num_threads: int | Literal["auto"], min_rows: int, stop_token_ids: frozenset[int], *,
                 always_batch: bool = False) -> None:
        if num_threads == "auto":
            num_threads = auto_fill_threads()
        elif isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_fill_threads must be a positive integer or 'auto', got {num_threads!r}")
        self.num_threads: int = num_threads
        self.min_rows = 1 if always_batch else min_rows if num_threads > 1 else 1 << 30
        self._batch_matcher = xgr.BatchGrammarMatcher(num_threads)
        self._stop_ids = stop_token_ids

    @property
    def stop_token_ids(self) -> frozenset[int]:
        return self._stop_ids

    def fill_plain(self, sb: BitmaskBuffer, matchers: list[xgr.GrammarMatcher], rows: list[int],
                   rids: list[str], row_logits: list[int], row_rids: list[str], dead: list[str]) -> None:
        """One row per matcher at its committed state, for logits row ``rows[i]`` of request ``rids[i]``
        (no drafts, and rows that never allow everything, so every row is kept, except a row that
        allows no token at all: it is left out and its request appended to ``dead``). Moves no matcher."""
        n0 = len(row_logits)
        bitmask = sb.bitmask
        if len(matchers) >= self.min_rows:
            self._batch_matcher.batch_fill_next_token_bitmask(matchers, bitmask, list(range(n0, n0 + len(matchers))))
            _whitespace_rows(sb, matchers, n0)
        else:
            i = n0
            npmask = sb.bitmask_np
            for m in matchers:
                if isinstance(m, BoundedMatcher):  # grammar fill + whitespace clear, one call
                    m.fill_next_token_bitmask(bitmask, i, npmask)
                else:
                    m.fill_next_token_bitmask(bitmask, i)
                i += 1
        if sb.any_empty(n0, n0 + len(matchers)):  # rare: keep the rows that allow something, in place order
            self._keep_live(sb, n0, rows, rids, row_logits, row_rids, dead)
            return
        row_logits.extend(rows)
        row_rids.extend(rids)

    @staticmethod
    def _keep_live(sb: BitmaskBuffer, n0: int, rows: list[int], rids: list[str], row_logits: list[int],
                   row_rids: list[str], dead: list[str]) -> None:
        """Rows ``n0 ..`` were filled for ``rows`` / ``rids``; some allow nothing: move the others down
        over them, append them, and append the requests of the empty ones to ``dead``."""
        buf = sb.bitmask_np
        for k, (r, rid) in enumerate(zip(rows, rids)):
            i = n0 + k
            if sb.row_is_empty(i):
                dead.append(rid)
                continue
            j = len(row_logits)
            if j != i:
                buf[j] = buf[i]
            row_logits.append(r)
            row_rids.append(rid)

    def fill_walks(self, sb: BitmaskBuffer, walks: list[Walk], row_logits: list[int], row_rids: list[str],
                   dead: list[str]) -> None:
        """Every walk's rows, in rounds over all of them: fill row ``j``, accept draft ``j``. A walk
        leaves when its drafts are used up, a draft is rejected, or a draft is a stop token (which
        terminates the grammar: no rows after it); then its matcher is rolled back. A row that allows
        no token at all (a dead end of the grammar) is left out, its walk ends there, and its request
        is appended to ``dead``.

        Every matcher leaves at its committed state, also when an exception is raised from anywhere
        inside (then the rows written are garbage: the caller returns no batch). Call it after the
        whole schedule was checked: a misuse found in the schedule then leaves every matcher untouched."""
        try:
            if len(walks) < self.min_rows:
                self._walk_one_by_one(sb, walks, row_logits, row_rids, dead)
            else:
                self._walk_in_rounds(sb, walks, row_logits, row_rids, dead)
        except BaseException:
            for w in walks:  # the walks not rolled back yet (accepted is 0 once a walk is rolled back)
                if w.accepted:
                    w.matcher.rollback(w.accepted)
                    w.accepted = 0
            raise

    def _walk_in_rounds(self, sb: BitmaskBuffer, walks: list[Walk], row_logits: list[int], row_rids: list[str],
                        dead: list[str]) -> None:
        stops = self._stop_ids
        bitmask = sb.bitmask
        empty = sb.row_is_empty
        live = walks
        if any(w.content_start < w.next_row for w in walks):
            live = []
            for w in walks:
                m = w.matcher
                ok = True
                for t in w.drafts[w.content_start:w.next_row]:
                    if not m.accept_token(t):
                        ok = False  # rejected (its thinking row masks it): no grammar rows
                        break
                    w.accepted += 1
                    if t in stops:
                        ok = False  # the output ends here: no rows after it
                        break
                if ok:
                    live.append(w)
                elif w.accepted:
                    m.rollback(w.accepted)
                    w.accepted = 0
        while live:
            n0 = len(row_logits)
            ended: list[Walk] = []  # walks whose row of this round allows nothing
            if len(live) >= self.min_rows and not any(w.may_allow_all for w in live):
                matchers = [w.matcher for w in live]
                self._batch_matcher.batch_fill_next_token_bitmask(matchers, bitmask, list(range(n0, n0 + len(live))))
                _whitespace_rows(sb, matchers, n0)
                rows = [w.logits_base + w.next_row for w in live]
                rids = [w.request_id for w in live]
                if sb.any_empty(n0, n0 + len(live)):
                    nd0 = len(dead)
                    self._keep_live(sb, n0, rows, rids, row_logits, row_rids, dead)
                    gone = set(dead[nd0:])
                    ended = [w for w in live if w.request_id in gone]
                else:
                    row_logits.extend(rows)
                    row_rids.extend(rids)
            else:
                npmask = sb.bitmask_np
                for w in live:
                    # fill_next_token_bitmask answers whether the row masks anything; one that
                    # masks nothing is dropped (possible only when may_allow_all)
                    i = len(row_logits)
                    m = w.matcher
                    needs = (m.fill_next_token_bitmask(bitmask, i, npmask) if isinstance(m, BoundedMatcher)
                             else m.fill_next_token_bitmask(bitmask, i))
                    if needs or not w.may_allow_all:
                        if empty(i):
                            dead.append(w.request_id)
                            ended.append(w)
                            continue
                        row_logits.append(w.logits_base + w.next_row)
                        row_rids.append(w.request_id)
            nxt: list[Walk] = []
            for w in live:
                if ended and w in ended:
                    if w.accepted:
                        w.matcher.rollback(w.accepted)
                        w.accepted = 0
                    continue
                j = w.next_row
                drafts = w.drafts
                if j < len(drafts):
                    t = drafts[j]
                    if w.matcher.accept_token(t):
                        w.accepted += 1
                        if t not in stops:  # a stop token terminates the grammar: no rows after it
                            w.next_row = j + 1
                            nxt.append(w)
                            continue
                if w.accepted:
                    w.matcher.rollback(w.accepted)
                    w.accepted = 0
            live = nxt

    def _walk_one_by_one(self, sb: BitmaskBuffer, walks: list[Walk], row_logits: list[int],
                         row_rids: list[str], dead: list[str]) -> None:
        """The walks without the batch matcher: each walk's rows in one tight loop, its state in locals
        (the same rows; only their order in the batch differs). Each walk is rolled back in a
        ``finally``, so an exception leaves no matcher moved."""
        stops = self._stop_ids
        bitmask = sb.bitmask
        empty = sb.row_is_empty
        for w in walks:
            m = w.matcher
            drafts = w.drafts
            j = w.next_row
            accepted = 0
            accept = m.accept_token
            try:
                ok = True
                for t in drafts[w.content_start:j]:  # content drafts before the first grammar row (implicit end)
                    if not accept(t):
                        ok = False
                        break
                    accepted += 1
                    if t in stops:
                        ok = False
                        break
                if ok:
                    fill = m.fill_next_token_bitmask
                    npmask = sb.bitmask_np if isinstance(m, BoundedMatcher) else None  # see BoundedMatcher
                    base = w.logits_base
                    rid = w.request_id
                    may_allow_all = w.may_allow_all
                    nd = len(drafts)
                    while True:
                        i = len(row_logits)
                        kept = fill(bitmask, i) if npmask is None else fill(bitmask, i, npmask)
                        kept = kept or not may_allow_all
                        if kept:
                            row_logits.append(base + j)
                            row_rids.append(rid)
                        if j == nd:
                            break
                        t = drafts[j]
                        if not accept(t):
                            break
                        accepted += 1
                        if t in stops:
                            break
                        j += 1
                    # every row but the last allowed the draft accepted after it (a mask allows exactly
                    # what its matcher accepts), so only the last can be a dead end: no row for it
                    if kept and empty(len(row_logits) - 1):
                        row_logits.pop()
                        row_rids.pop()
                        dead.append(rid)
            finally:
                if accepted:
                    m.rollback(accepted)


def _whitespace_rows(sb: BitmaskBuffer, matchers: list[xgr.GrammarMatcher], n0: int) -> None:
    """After xgrammar's batch fill of ``matchers`` into places ``n0 ..`` (which bypasses
    :meth:`BoundedMatcher.fill_next_token_bitmask`): narrow the rows of bounded matchers, in one call."""
    lexers = [m.ws_lexer if isinstance(m, BoundedMatcher) else None for m in matchers]
    jsonws.clear_rows(sb.bitmask_np, lexers, n0)


def auto_fill_threads() -> int:
    """Half the CPUs this process may run on, at least 1 and at most 16 (as xgrammar chooses)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        n = os.cpu_count() or 2
    return max(1, min(16, n // 2))
