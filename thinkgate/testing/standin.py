"""A stand-in model that drives one request through the manager as an engine would, sampling from the rows.

It never wants to stop: while thinking it writes ``think_token`` forever (its rows, if any, decide), and in
the answer it picks a random allowed token that is not a stop token (a stop token only when nothing else is
allowed). The engine stops it at ``max_tokens`` output tokens, as vLLM and SGLang do. With ``num_drafts``,
each step proposes that many drafts (random allowed-looking guesses: the jump-forward tokens when there are
some, else ``think_token``) and keeps them while each is allowed by its row, then samples the bonus token
from the row after the last kept draft, as speculative decoding does.

This is the model that makes ``max_tokens`` bite: without answer reservation its outputs are cut.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import numpy as np

from thinkgate.structured_output import StructuredOutputManager

__all__ = ["StandInRun", "run_stand_in"]


@dataclass
class StandInRun:
    tokens: list[int]
    """Every output token (thinking, its end, the answer, the stop token if any)."""
    status: str
    """The last ``accept_tokens`` status: ``ok`` (cut at ``max_tokens``), ``terminated`` or ``error``."""
    message: str | None
    steps: int


def _allowed(row: np.ndarray, vocab_size: int) -> np.ndarray:
    ids = np.flatnonzero(np.unpackbits(np.ascontiguousarray(row).view(np.uint8), bitorder="little"))
    return ids[ids < vocab_size]


def _row_allows(row: np.ndarray | None, t: int) -> bool:
    return row is None or bool((int(row[t >> 5]) >> (t & 31)) & 1)


def run_stand_in(manager: StructuredOutputManager, request_id: str, max_tokens: int, *, think_token: int,
                 rng: random.Random, num_drafts: int = 0, forward_s: float = 0.0) -> StandInRun:
    """Drive ``request_id`` (added and ready) until it terminates, errs or reaches ``max_tokens``.
    ``forward_s``: a stand-in forward pass (a sleep) between ``grammar_bitmask`` and sampling, as an engine's step
    takes (0: steps back to back)."""
    vocab = manager.vocabulary
    stops = vocab.stop_token_ids
    out: list[int] = []
    status, message, steps = "ok", None, 0
    while len(out) < max_tokens:
        steps += 1
        room = max_tokens - len(out)
        drafts: list[int] = []
        if num_drafts and room > 1:
            guess = manager.forced_tokens(request_id, min(num_drafts, room - 1))
            drafts = guess if guess else [think_token] * min(num_drafts, room - 1)
        batch = manager.grammar_bitmask([(request_id, drafts)] if num_drafts else [request_id])
        if forward_s:
            time.sleep(forward_s)
        rows: dict[int, np.ndarray] = {}
        if batch is not None:
            for r, i in enumerate(batch.logits_indices.tolist()):
                rows[i] = batch.bitmask[r].numpy().copy()
        kept: list[int] = []
        for j, d in enumerate(drafts):
            if not _row_allows(rows.get(j), d):
                break
            kept.append(d)
        row = rows.get(len(kept))
        if row is None:
            bonus = think_token
        else:
            ids = _allowed(row, vocab.vocab_size)
            plain = [t for t in ids.tolist() if t not in stops]
            bonus = rng.choice(plain) if plain else int(ids[0])
        commit = [*kept, bonus][:room]
        out.extend(commit)
        res = manager.accept_tokens(request_id, commit)
        status, message = res.status, res.message
        if status != "ok":
            break
    return StandInRun(out, status, message, steps)
