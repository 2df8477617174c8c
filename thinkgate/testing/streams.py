"""Synthetic token streams: a scripted model output driven through the manager's step protocol, and
random cuts of a stream into deltas (for stream == whole checks of the front end).

:func:`replay` plays one request's output as an engine would with a model that writes exactly those
tokens: each step it asks for the request's bitmask row, checks that the next token is allowed, then
commits it with ``accept_tokens``. The mask and the grammar must agree at every prefix: a token the mask
allows but the grammar rejects (or the reverse) is a bug, reported with its position and text.
"""

from __future__ import annotations

import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from thinkgate.structured_output.step.manager import StructuredOutputManager

__all__ = ["Replay", "replay", "wait_compiled", "random_cuts", "cut"]


@dataclass(frozen=True)
class Replay:
    """What :func:`replay` saw."""

    accepted: int
    """Tokens committed before the replay stopped (a rejected token is not counted)."""
    status: Literal["ok", "terminated", "error"]
    """``ok``: every token accepted, no stop yet; ``terminated``: the grammar accepted a stop token (the
    tokens after it were not fed); ``error``: the token at index ``accepted`` was rejected."""
    message: str | None = None
    """The manager's error message, or what the mask and the grammar disagreed on."""
    disagreement: int | None = None
    """Index of a token on which the mask and ``accept_tokens`` disagreed (None: they never did)."""


def wait_compiled(manager: StructuredOutputManager, request_id: str, timeout_s: float = 60.0) -> None:
    """Wait until the request's constraint is compiled (or failed); ``TimeoutError`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not manager.is_compiled(request_id):
        if time.monotonic() > deadline:
            raise TimeoutError(f"request {request_id!r} not compiled after {timeout_s} s")
        time.sleep(0.002)


def _allowed(manager: StructuredOutputManager, request_id: str, token: int) -> bool:
    batch = manager.grammar_bitmask([request_id])
    if batch is None or request_id not in batch.request_ids:
        return True  # no row: the step is not constrained (thinking, or no constraint)
    row = batch.bitmask[batch.request_ids.index(request_id)]
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


def replay(manager: StructuredOutputManager, request_id: str, token_ids: Sequence[int], *,
           check_mask: bool = True) -> Replay:
    """Feed ``token_ids`` to an added request one token per step, as an engine would.

    Per token: with ``check_mask``, the step's bitmask row (``grammar_bitmask``) must allow it exactly when
    ``accept_tokens`` accepts it; then it is committed. Stops at the first rejected token, at a terminating
    stop token, or at a disagreement between the mask and the grammar."""
    decode = manager.vocabulary.decode
    res = None
    for k, t in enumerate(token_ids):
        allowed = _allowed(manager, request_id, t) if check_mask else True
        res = manager.accept_tokens(request_id, [t])
        if res.status == "error":
            if allowed and check_mask:
                return Replay(k, "error", f"token {k} {decode([t])!r} rejected but allowed by the mask: "
                                          f"{res.message}", k)
            return Replay(k, "error", res.message)
        if not allowed:
            return Replay(k + 1, res.status, f"token {k} {decode([t])!r} accepted but masked out after "
                                             f"{decode(list(token_ids[:k]))[-60:]!r}", k)
        if res.status == "terminated":
            return Replay(k + 1, "terminated")
    return Replay(len(token_ids), "ok")


def random_cuts(n: int, rng: random.Random, max_delta: int = 8) -> list[int]:
    """Sorted cut positions in ``(0, n)``: deltas of 1 to ``max_delta`` tokens."""
    if max_delta < 1:
        raise ValueError(f"max_delta must be >= 1, got {max_delta}")
    cuts, k = [], 0
    while True:
        k += rng.randint(1, max_delta)
        if k >= n:
            return cuts
        cuts.append(k)


def cut(ids: Sequence[int], cuts: Sequence[int]) -> list[list[int]]:
    """``ids`` split at ``cuts`` (positions outside ``(0, len(ids))`` and repeats are ignored)."""
    if not ids:
        return []
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ids)}), len(ids)]
    return [list(ids[a:b]) for a, b in zip(bounds, bounds[1:])]
