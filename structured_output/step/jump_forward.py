"""Jump-forward: the tokens a grammar forces next, exactly (the mask allows one token and no other).

While the next-token mask of a matcher allows exactly one token, the model has no choice: whatever it
computes, masking leaves that one token, so an engine may append it without a model step. That
token is accepted on the matcher, the next mask is filled, and so on, up to ``max_tokens``; then the
matcher is rolled back to where it started, so nothing committed moves (the engine commits the
tokens with ``accept_tokens``, like sampled ones).

Why from the mask and not xgrammar's ``find_jump_forward_tokens``: xgrammar finds the forced *text*
and re-tokenizes it greedily (longest match). At token level that text usually leaves the model a
choice (``{"`` or ``{`` then ``"``), so those tokens are not the only ones the mask allows, and a
tokenization the model would not have written shifts what it writes next. The tokens here are the
ones the model would have been forced to sample: appending them changes nothing but the number of
model steps.

Stop tokens are never returned (the sequence ends before one): ending a request is the engine's
decision (``min_tokens``, ``ignore_eos``, its finish reason), so the engine samples it in a normal
step. Control tokens a format names by id (the ``</tool_call>`` that closes a Qwen call) are
returned like any other.

Cost: one fill per position examined (at most ``max_tokens``: the last forced token needs no fill
after it), one accept per forced token and one rollback. After each fill, a few words of the row
that hold the single-character tokens (``probe``: digits, letters, JSON punctuation) are read first:
two bits there mean a choice, the usual case, and end the call without scanning the row; otherwise
the row's nonzero words are counted. ``python -m bench loop --jump-forward`` prints the time per call.
"""

from __future__ import annotations

from collections.abc import Container, Sequence

import numpy as np
import torch
import xgrammar as xgr

from ..compilation.jsonws.bound import BoundedMatcher

__all__ = ["JumpForward", "single_token"]


def single_token(row: np.ndarray) -> int | None:
    """The one token a bitmask row (int32 words, xgrammar's layout) allows, or None when it allows
    none or several."""
    if np.count_nonzero(row) != 1:
        return None
    w = int(np.flatnonzero(row)[0])
    word = int(row[w]) & 0xFFFFFFFF
    if word & (word - 1):  # more than one bit in that word
        return None
    return (w << 5) + word.bit_length() - 1


class JumpForward:
    """Finds forced tokens for one manager (built once; owns a one-row scratch bitmask, so that the
    batches the manager returned stay valid). Not thread-safe: the manager's thread only."""

    __slots__ = ("_row", "_row_np", "_stop_ids", "_words", "_probe")

    def __init__(self, num_words: int, stop_token_ids: Container[int], probe: Sequence[int] = ()) -> None:
        self._row = torch.zeros((1, num_words), dtype=torch.int32)
        self._row_np: np.ndarray = self._row.numpy()
        self._stop_ids = stop_token_ids
        self._words = memoryview(self._row_np.reshape(-1))  # one word as a Python int
        self._probe = tuple(p for p in probe if 0 <= p < num_words)

    def _choice_in_probe(self) -> bool:
        """True when the probe words of the row hold two allowed tokens or more (a choice)."""
        words = self._words
        seen = 0
        for p in self._probe:
            w = words[p]
            if w:
                w &= 0xFFFFFFFF
                seen += 1 if not w & (w - 1) else 2
                if seen > 1:
                    return True
        return False

    def forced(self, matcher: xgr.GrammarMatcher, max_tokens: int) -> list[int]:
        """The tokens ``matcher`` forces from its state, at most ``max_tokens`` (see the module
        docstring). The matcher ends where it started, also when an exception is raised."""
        out: list[int] = []
        if max_tokens <= 0 or matcher.is_terminated():
            return out
        row, row_np = self._row, self._row_np
        bounded = isinstance(matcher, BoundedMatcher)
        stops = self._stop_ids
        accepted = 0
        try:
            while len(out) < max_tokens:
                if bounded:
                    needs = matcher.fill_next_token_bitmask(row, 0, row_np)
                else:
                    needs = matcher.fill_next_token_bitmask(row, 0)
                if not needs:  # every token allowed
                    break
                if self._choice_in_probe():
                    break
                t = single_token(row_np[0])
                if t is None or t in stops:
                    break
                if not matcher.accept_token(t):  # the mask allowed it alone; a matcher that disagrees stops here
                    break
                accepted += 1
                out.append(t)
        finally:
            if accepted:
                matcher.rollback(accepted)
        return out
