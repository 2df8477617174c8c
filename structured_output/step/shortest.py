"""The fewest tokens that complete a valid output from a grammar matcher's state: :class:`ShortestCompletion`.

What it returns: a token sequence ``P`` that the matcher accepts from its current state, whose last
token is a stop token (the output is complete and ends there), and for a constraint checked after the
fact (:mod:`.schema_support`) whose output passes that check. ``len(P)`` counts the stop token: it is
the number of output positions the rest of the answer needs.

Method: a breadth-first search over token sequences, driven on the matcher itself (``accept_token`` /
``rollback``; the matcher ends where it started). Level ``d`` holds sequences of ``d`` tokens; a
sequence after which a stop token is allowed (and the check passes) ends the search, so the first one
found is the shortest among the sequences the search visits. Two cuts keep a level small:

- *merging*: two sequences of the same length whose states have the same next-token row and the same
  innermost parser items (xgrammar's ``_debug_print_internal_state``, rule start positions made
  relative) are taken to have the same futures, and only the first is kept;
- *candidates*: from a state whose row allows at most ``expand_all`` tokens, every allowed token is
  tried; from a state that allows more (free text: inside a string, a regex's ``.*``), only the allowed
  tokens of a fixed candidate set (single bytes, and short tokens made only of punctuation and spaces),
  and at most ``beam`` sequences are kept per level.

Guarantee: ``P`` is always a real completion (every token was accepted by the matcher, the stop token
was allowed, the check passed), so ``len(P)`` is achievable: steering the output along ``P`` ends it in
exactly ``len(P)`` tokens. It is the exact minimum when neither cut removed a shorter sequence: always
when every state allows at most ``expand_all`` tokens, the beam never filled and merged states were
equivalent (the tests compare it with a brute-force search over every viable token sequence on small
grammars and a tiny byte-level vocabulary). Otherwise it is an upper bound on the minimum.

Cost: one accept, one fill and one rollback per sequence tried; per level at most ``beam`` sequences
are expanded. None when no completion of at most ``max_len`` tokens was found.
"""

from __future__ import annotations

import re
from collections.abc import Container, Sequence

import numpy as np
import torch
import xgrammar as xgr

from ..compilation.jsonws.bound import BoundedMatcher
from ..compilation.schema_support import RecordingMatcher

__all__ = ["ShortestCompletion", "ByteLevel", "short_candidates"]

_START = re.compile(rb"rule_start_pos=(\d+)")
_PUNCT = frozenset(b" \t\n\r!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")


def short_candidates(token_bytes: Sequence[bytes], vocab_size: int, max_punct_len: int = 3) -> np.ndarray:
    """The candidate tokens tried from a free-text state: every single-byte token, and the tokens of
    at most ``max_punct_len`` bytes made only of ASCII punctuation and spaces (``"}``, ``",``, ``]}``).
    Sorted token ids."""
    out = []
    for t in range(min(vocab_size, len(token_bytes))):
        b = token_bytes[t]
        if len(b) == 1 or (0 < len(b) <= max_punct_len and all(c in _PUNCT for c in b)):
            out.append(t)
    return np.asarray(out, dtype=np.int64)


class ShortestCompletion:
    """Finds shortest completions for one manager (built once with its vocabulary; owns a scratch row).
    Not thread-safe: the manager's thread only.

    ``stop_ids``: the vocabulary's stop tokens; ``candidates``: :func:`short_candidates`;
    ``check``: ``(matcher) -> problem | None`` for a matcher whose output is checked after the fact
    (:class:`~.schema_support.RecordingMatcher`), called with the stop token accepted."""

    __slots__ = ("_row", "_row_np", "_stops", "_cand", "expand_all", "beam", "_vocabulary", "_blank")

    def __init__(self, num_words: int, stop_ids: Container[int] | Sequence[int], candidates: np.ndarray,
                 vocabulary: object = None, *, expand_all: int = 256, beam: int = 48,
                 token_bytes: Sequence[bytes] = ()) -> None:
        self._row = torch.zeros((1, num_words), dtype=torch.int32)
        self._row_np: np.ndarray = self._row.numpy()
        self._stops = tuple(sorted(stop_ids))
        self._cand = candidates
        self._vocabulary = vocabulary
        self.expand_all = expand_all
        self.beam = beam
        # whitespace-only tokens are tried last: optional filler that would crowd the beam otherwise
        blank = np.zeros(num_words * 32, dtype=bool)
        for t, b in enumerate(token_bytes[:num_words * 32]):
            blank[t] = bool(b) and not b.strip(b" \t\r\n")
        self._blank = blank

    # -- one state ---------------------------------------------------------------------------------
    def _fill(self, m: xgr.GrammarMatcher) -> np.ndarray:
        if isinstance(m, BoundedMatcher):
            m.fill_next_token_bitmask(self._row, 0, self._row_np)
        else:
            m.fill_next_token_bitmask(self._row, 0)
        return self._row_np[0]

    def _stop_allowed(self, row: np.ndarray) -> int | None:
        for t in self._stops:
            if (int(row[t >> 5]) >> (t & 31)) & 1:
                return t
        return None

    def _passes(self, m: xgr.GrammarMatcher, stop: int) -> bool:
        """The output so far, ended by ``stop``, passes the after-the-fact check (always, without one)."""
        if not isinstance(m, RecordingMatcher):
            return True
        return m.check.problem_of_tokens(self._vocabulary, [*m.tokens, stop], frozenset(self._stops)) is None

    @staticmethod
    def _key(m: xgr.GrammarMatcher, row: np.ndarray) -> bytes:
        text = m._debug_print_internal_state().encode()
        head, _, state = text.partition(b"Last step:")
        steps = int(re.search(rb"(\d+)", head).group(1)) if re.search(rb"(\d+)", head) else 0
        # rule start positions are absolute (history steps): make them relative to this state
        state = _START.sub(lambda mo: b"r%d" % (steps - int(mo.group(1))), state)
        return row.tobytes() + state

    def _children(self, row: np.ndarray) -> np.ndarray:
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")
        n = int(bits.sum())
        if n <= self.expand_all:
            ids = np.flatnonzero(bits)
        else:
            cand = self._cand
            cand = cand[cand < bits.shape[0]]
            ids = cand[bits[cand] != 0]
        blank = self._blank[ids]
        return np.concatenate([ids[~blank], ids[blank]]) if blank.any() else ids

    def ends_after(self, m: xgr.GrammarMatcher, seq: Sequence[int]) -> int | None:
        """The stop token that may follow ``seq`` from ``m``'s state (the check passed), or None when
        ``m`` refuses a token of ``seq`` or no stop token may follow. ``m`` ends where it started."""
        accepted = 0
        try:
            for t in seq:
                if not m.accept_token(t):
                    return None
                accepted += 1
            stop = self._stop_allowed(self._fill(m))
            return stop if stop is not None and self._passes(m, stop) else None
        finally:
            if accepted:
                m.rollback(accepted)

    # -- the search --------------------------------------------------------------------------------
    def find(self, m: xgr.GrammarMatcher, max_len: int) -> list[int] | None:
        """A shortest completion from ``m``'s state (see the module docstring), at most ``max_len``
        tokens with its stop token; None when none was found. ``m`` ends where it started, also when
        an exception is raised. A terminated matcher needs nothing: ``[]``."""
        if m.is_terminated():
            return []
        if max_len <= 0:
            return None
        stops = frozenset(self._stops)
        root = self._fill(m)
        stop = self._stop_allowed(root)
        if stop is not None and self._passes(m, stop):
            return [stop]
        level: list[tuple[int, ...]] = [()]
        for depth in range(1, max_len):  # sequences of `depth` tokens, then their stop token
            nxt: list[tuple[int, ...]] = []
            seen: set[bytes] = set()  # per level: the key shows the innermost items only
            for path in level:
                accepted = 0
                try:
                    for t in path:
                        if not m.accept_token(t):
                            raise RuntimeError("a sequence the matcher accepted before is refused now")
                        accepted += 1
                    children = self._children(self._fill(m).copy() if path else root.copy())
                    for t in children.tolist():
                        if t in stops:
                            continue
                        if not m.accept_token(t):
                            continue
                        try:
                            row = self._fill(m)
                            if not row.any():
                                continue  # a dead end
                            stop = self._stop_allowed(row)
                            if stop is not None and self._passes(m, stop):
                                return [*path, t, stop]
                            if len(nxt) >= self.beam:
                                continue
                            key = self._key(m, row)
                            if key in seen:
                                continue
                            seen.add(key)
                            nxt.append((*path, t))
                        finally:
                            m.rollback(1)
                finally:
                    if accepted:
                        m.rollback(accepted)
            if not nxt:
                return None
            level = nxt
        return None


# ------------------------------------------------------------------------------------------------
# Large vocabularies: the shortest *text* on a byte-level copy of the grammar, then its fewest tokens


class ByteLevel:
    """The byte-level copy of a model's grammars, for :class:`ShortestCompletion` on a large vocabulary
    (built once per manager; its compiler is xgrammar's, on a 257-token vocabulary: the 256 bytes and one
    stop token, so a fill costs microseconds). Not thread-safe: the manager's thread only.

    ``shortest_text(matcher)``: the shortest byte completion from a byte-level matcher's state, by the
    search above over single bytes (every allowed byte is tried; exact up to the merging of states).
    ``tokens(text, real_matcher)``: the fewest tokens of the model's vocabulary that spell ``text``
    (dynamic programming over the text's positions), checked on the real matcher (accepted, then a stop
    token allowed), else the text's single-byte tokens, else None."""

    STOP = 256

    def __init__(self, token_bytes: Sequence[bytes], vocab_size: int, stop_ids: Sequence[int] | Container[int],
                 num_words: int, *, beam: int = 48) -> None:
        info = xgr.TokenizerInfo([bytes([b]) for b in range(256)] + [b"</s>"], stop_token_ids=[self.STOP])
        self._compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self._search = ShortestCompletion(9, (self.STOP,), np.arange(256), None, expand_all=257, beam=beam,
                                          token_bytes=[bytes([b]) for b in range(256)])
        self._real = ShortestCompletion(num_words, stop_ids, np.empty(0, dtype=np.int64), None)
        by_bytes: dict[bytes, int] = {}
        for t in range(min(vocab_size, len(token_bytes))):
            b = token_bytes[t]
            if b and b not in by_bytes:
                by_bytes[b] = t
        self._by_bytes = by_bytes
        self._max_len = max((len(b) for b in by_bytes), default=1)
        self._single = [by_bytes.get(bytes([b])) for b in range(256)]

    def matcher(self, grammar: xgr.Grammar) -> xgr.GrammarMatcher:
        """A byte-level matcher of ``grammar`` at its start."""
        return xgr.GrammarMatcher(self._compiler.compile_grammar(grammar))

    @staticmethod
    def feed(byte_matcher: xgr.GrammarMatcher, data: bytes) -> bool:
        """Advance a byte-level matcher over ``data`` (False: refused)."""
        for b in data:
            if not byte_matcher.accept_token(b):
                return False
        return True

    def shortest_text(self, byte_matcher: xgr.GrammarMatcher, max_len: int) -> bytes | None:
        path = self._search.find(byte_matcher, max_len)
        if path is None:
            return None
        return bytes(path[:-1])

    def tokens(self, text: bytes, real: xgr.GrammarMatcher, check_vocabulary: object = None) -> list[int] | None:
        """The fewest model tokens that spell ``text``, then a stop token allowed after them, checked on
        ``real`` (which ends where it started); None when neither they nor the single bytes pass."""
        n = len(text)
        best = [0] + [n + 1] * n
        prev = [-1] * (n + 1)
        tok = [0] * (n + 1)
        by_bytes = self._by_bytes
        for j in range(1, n + 1):
            for i in range(max(0, j - self._max_len), j):
                if best[i] + 1 < best[j]:
                    t = by_bytes.get(text[i:j])
                    if t is not None:
                        best[j] = best[i] + 1
                        prev[j] = i
                        tok[j] = t
        tries: list[list[int]] = []
        if n == 0 or best[n] <= n:
            seq: list[int] = []
            j = n
            while j > 0:
                seq.append(tok[j])
                j = prev[j]
            tries.append(seq[::-1])
        single = [self._single[b] for b in text]
        if all(t is not None for t in single):
            tries.append(single)  # type: ignore[arg-type]
        self._real._vocabulary = check_vocabulary
        for seq in tries:
            stop = self._real.ends_after(real, seq)
            if stop is not None:
                return [*seq, stop]
        return None
