"""Thinking budget: a request's ``max_thinking_tokens``, enforced through the same bitmask rows.

What counts: the tokens the model generated in this turn before its thinking ended, as the request's
reasoning tracker splits them (every committed token while the request is ``THINKING``: markers the
model writes itself, such as Mistral's ``[THINK]`` or a harmony header, included; thinking the template
prefilled in the prompt not included). This is ``StructuredRequest.n_out`` while the request thinks.

What is forced: once ``max_thinking_tokens`` tokens were written and the thinking has not ended, the
rows force the family's end-of-thinking sequence, ``tracker.forced_end_token_ids()`` taken at that
point (the *budget point*): one row per token, each allowing only its token. The sequence is exact by
construction (:func:`reasoning.base.checked_end`): the tracker ends the thinking on its last token, so
the grammar (if any) applies from the next row as usual. A request without a constraint gets the forced
rows too.

Drafts: row ``j`` of a request takes the state after drafts ``0 .. j-1``. Rows before the budget
point are the usual thinking rows; the row at forced index ``i`` allows ``F[i]``; a draft equal to
its row's token is followed by the next forced row, and the draft that completes ``F`` by grammar rows
(the walk starts there); a draft that deviates gets its row forcing the right token (the engine
rejects it) and no row after it. Committed tokens are checked the same way: a committed token past the
budget point that is not the forced one (an engine that did not apply the rows) puts that request in
``ERROR`` with a message naming it.

Costs: a request whose budget is not reached in a step pays one comparison; at and after the budget
point, the tracker's step over the step's tokens (as for any thinking request) and one precomputed
row per forced token (one row per token id, kept per manager).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from thinkgate.reasoning.base import ReasoningEnd, ReasoningTracker

from .buffer import BitmaskBuffer
from .rows import row_with

__all__ = ["ThinkingBudget", "Forcing", "validate_budget", "plan_forcing", "check_commit"]

_MAX_ROWS = 1024
"""Bound on the one-token rows kept: forced tokens are few per family (markers), but a text-marker
family's spelling comes from the tokenizer, so the cache is bounded anyway."""


def validate_budget(value: object) -> int | None:
    """``max_thinking_tokens`` as given to ``add_request``: None (no budget) or an int >= 0;
    ``ValueError`` otherwise (``bool``, ``float`` and strings are refused)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise ValueError(f"max_thinking_tokens must be None or an integer >= 0, got {value!r} "
                         f"({type(value).__name__})")
    return int(value)


@dataclass(frozen=True)
class Forcing:
    """One request's forced rows in one step: rows ``first .. first + len(tokens) - 1`` each allow only
    their token. ``end``: where the thinking ends inside the drafts (a draft completed the forced
    sequence): grammar rows follow from ``end.offset + 1``; None when no draft completes it."""

    first: int
    tokens: tuple[int, ...]
    end: ReasoningEnd | None


class ThinkingBudget:
    """The one-token rows of one manager's (or engine backend's) requests, built once with it and
    driven by its thread; which rows a request gets is :func:`plan_forcing`'s answer."""

    __slots__ = ("_num_words", "_rows")

    def __init__(self, num_words: int) -> None:
        self._num_words = num_words
        self._rows: dict[int, np.ndarray] = {}

    def row(self, token: int) -> np.ndarray:
        """The row allowing only ``token`` (kept per token id)."""
        row = self._rows.get(token)
        if row is None:
            row = row_with(self._num_words, (token,))
            if len(self._rows) < _MAX_ROWS:
                self._rows[token] = row
        return row

    def place(self, forcing: Forcing, rid: str, base: int, sb: BitmaskBuffer, row_logits: list[int],
              row_rids: list[str]) -> None:
        """Put the forced rows of ``forcing`` (a request whose logits rows start at ``base``) at the
        next places of the buffer (not written again when a place holds the same row already)."""
        j = base + forcing.first
        for t in forcing.tokens:
            sb.place(len(row_logits), self.row(t))
            row_logits.append(j)
            row_rids.append(rid)
            j += 1


def plan_forcing(limit: int, spent: int, forced: tuple[int, ...] | None, tracker: ReasoningTracker,
                 drafts: Sequence[int]) -> Forcing | None:
    """The forced rows of a thinking request with budget ``limit``, ``spent`` thinking tokens written
    and ``forced`` kept (its end of thinking once the budget point is behind it), in a step with
    ``drafts``; None when none of its rows is forced (the budget point lies past the step, or the
    thinking ends on its own before it). Pure: the tracker is only scanned."""
    nd = len(drafts)
    p = limit - spent  # the row of the budget point (<= 0: reached in an earlier step)
    if p > nd:
        return None
    end = tracker.scan(drafts) if nd else None
    if end is not None and end.offset < p:
        return None  # it ends on its own first
    first = max(p, 0)
    forced = forced if p <= 0 else tracker.forced_end_token_ids(drafts[:p])
    if not forced:
        return Forcing(first, (), None)  # cannot force from there: the commit check says why
    tokens: list[int] = []
    i = spent + first - limit  # forced tokens committed before this step's first forced row
    for j in range(first, nd + 1):
        if i >= len(forced):
            break  # not reached: the tracker ends on the last forced token (checked_end)
        t = forced[i]
        tokens.append(t)
        if j == nd or drafts[j] != t:
            break  # no draft left, or this draft deviates: its row rejects it, no row after it
        if i == len(forced) - 1:
            # the thinking ends on this draft (checked_end makes it so for every built-in family; a
            # tracker that disagrees gets no grammar rows here, and its commit is checked anyway)
            return Forcing(first, tuple(tokens), end if end is not None and end.offset == j else None)
        i += 1
    return Forcing(first, tuple(tokens), None)


def check_commit(limit: int, spent: int, forced: tuple[int, ...] | None, tracker: ReasoningTracker,
                 token_ids: Sequence[int], vocab_bytes: Sequence[bytes]
                 ) -> tuple[str | None, tuple[int, ...] | None]:
    """Before a thinking request with budget ``limit`` and ``spent`` thinking tokens commits
    ``token_ids`` that reach its budget point (``spent + len(token_ids) >= limit``): the tokens past
    that point and up to the end of thinking must be the forced ones. Returns ``(problem, keep)``:
    the problem (the request goes to ``ERROR``) or None, and the forced sequence to keep for the next
    steps (None: nothing new to keep). Pure: the tracker is only scanned."""
    n = len(token_ids)
    p = limit - spent
    end = tracker.scan(token_ids)
    last = n - 1 if end is None else end.offset
    if end is not None and last < p:
        return None, None  # it ended on its own before the budget point
    forced = forced if p <= 0 else tracker.forced_end_token_ids(token_ids[:p])
    if not forced:
        return (f"max_thinking_tokens={limit} was reached, but the reasoning parser cannot force the end "
                f"of its thinking from there (after {spent + max(p, 0)} thinking tokens)"), None
    for i in range(max(p, 0), last + 1):
        k = spent + i - limit
        t = token_ids[i]
        if k >= len(forced) or t != forced[k]:
            want = forced[k] if k < len(forced) else None
            return (f"token {t} ({_text(vocab_bytes, t)!r}) at output position {spent + i} is not the "
                    f"forced end-of-thinking token {want} ({_text(vocab_bytes, want)!r}): "
                    f"max_thinking_tokens={limit} was reached, so its row allowed only that token"), None
    return None, (forced if end is None else None)


def _text(vocab_bytes: Sequence[bytes], t: int | None) -> str:
    if t is None or not 0 <= t < len(vocab_bytes):
        return ""
    return vocab_bytes[t].decode("utf-8", errors="replace")
