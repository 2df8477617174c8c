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
  parser items in context are taken to have the same futures, and only the first is kept. xgrammar's
  ``_debug_print_internal_state`` shows a state's scannable items only; each names the step its rule
  started at, and the state there holds the items that rule returns to. The items in context replace each
  start by the identity of the state there, :data:`CONTEXT_DEPTH` starts deep (``_identify``): the string
  values of two properties (one rule) stay apart, and so do the raw values of two parameters;
- *candidates*: from a state whose row allows at most ``expand_all`` tokens, every allowed token is
  tried; from a state that allows more (free text: inside a string, a regex's ``.*``), only the allowed
  tokens of a fixed candidate set (single bytes, and short tokens made only of punctuation and spaces;
  on the byte level: :data:`BYTE_CANDIDATES`), or the first ``fallback`` allowed tokens when none of the
  candidates is allowed, and at most ``beam`` sequences are kept per level (``_cut``): first one per
  grammar position (row and items without context), then up to :data:`PER_POSITION`, each time those
  whose paths went round loops least first (a state the search reached before, by a path as short or
  shorter, counts a round). The elements of an array of arrays, in many contexts at a few
  positions, would otherwise crowd out the one path that closes the array;
- *last resorts* (``last_resort``, the byte tier): from each state, the children that keep its row (one
  more character of a string, optional whitespace) are tried only when no other child goes on to a live
  state. They are free moves that multiply a level's states (a string of every length, every run of
  optional whitespace) and crowd the paths that close the output out of the beam; a state that must
  take one (a ``minLength`` string, required whitespace) still does. Before them, once per state in context
  (the same state after a longer run of free text included), come two ways out of free text that no
  candidate names: the printable ASCII bytes that change the row (:data:`BYTE_SWEEP`: the ``@`` of
  ``[a-z]+@``), and
  the grammar's *closers*, the literals that follow its free text (``\\n</parameter>\\n<parameter=unit>\\n``
  after an XML raw value, ``compilation/closers.py``), each accepted whole; a closer's state joins the level
  of its length, ahead of the others there. Sequences sharing a prefix are not re-accepted from the root:
  the matcher rolls back to the common prefix only.

Guarantee: ``P`` is always a real completion (every token was accepted by the matcher, the stop token
was allowed, the check passed), so ``len(P)`` is achievable: steering the output along ``P`` ends it in
exactly ``len(P)`` tokens. It is the exact minimum when neither cut removed a shorter sequence: always
when every state allows at most ``expand_all`` tokens, the beam never filled and merged states were
equivalent (the tests compare it with a brute-force search over every viable token sequence on small
grammars and a tiny byte-level vocabulary). Otherwise it is an upper bound on the minimum.

Cost: one accept, one fill and one rollback per sequence tried; per level at most ``beam`` sequences
are expanded (``python -m bench loop --max-tokens N`` prints what the searches cost). None when no
completion of at most ``max_len`` tokens was found, or when a search runs past ``max_tries``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch
import xgrammar as xgr

from ..compilation.jsonws.bound import BoundedMatcher
from ..compilation.schema_support import RecordingMatcher
from ..compilation.xgrammar_adapter import control_token_bytes

__all__ = ["ShortestCompletion", "ByteLevel", "ByteGrammar", "ByteCursor", "closer_trie", "short_candidates"]

_START = re.compile(rb"rule_start_pos=(\d+)")
_MASK = (1 << 64) - 1

CONTEXT_DEPTH = 3
"""How many rule starts deep a state's identity (the search's merge key, ``_identify``) follows its context: enough
to tell the values of two properties apart, few enough that the rounds of a loop look alike after as many rounds."""
_ROOT = (0,) * (CONTEXT_DEPTH + 1)

PER_POSITION = 4
"""A full level keeps one state per grammar position first, then up to this many, then any (``_cut``)."""

BYTE_CANDIDATES = np.frombuffer(b'"}],:)>\'/-.01aA ', dtype=np.uint8).astype(np.int64)
"""The bytes the byte-level search tries from a free-text state (more than ``BYTE_EXPAND_ALL`` bytes allowed), in
this order: what closes a string, an object, an array or a call first, then the shortest digits and letters.
Trying every allowed byte there costs a full expansion per byte, and the UTF-8 lead bytes, each its own partial
character state, crowded the beam out of the states that close the output."""

BYTE_MAX_TRIES = 1_000_000
"""Bytes a byte-level search tries (accepts included) before it gives up: seconds of search at most, far more
than any completion the tests sweep needs, so that a grammar it cannot complete fails fast, not at the deadline."""

BYTE_SWEEP = np.setdiff1d(np.arange(0x21, 0x7F), BYTE_CANDIDATES)
"""The printable ASCII bytes outside :data:`BYTE_CANDIDATES`, tried once per state where nothing else goes on (the
``@`` of an e-mail regex, the ``Q`` of ``[a-z]*Q``); only those that change the state's row are kept. UTF-8 lead
bytes are left out: each opens a partial character that changes the row and would crowd the level."""

BEAM_POOL = 4
"""A level's ``beam`` states are chosen (``_cut``) out of up to this many times as many."""

BYTE_EXPAND_ALL = 16
"""Byte-level states allowing at most this many bytes (a number, a keyword, a small class) try every one."""
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


def closer_trie(closers: Iterable[Sequence[int]]) -> dict:
    """Token-id sequences as a trie for :meth:`ShortestCompletion.find`: nested dicts keyed by token id, the key
    ``None`` marking the end of a sequence."""
    root: dict = {}
    for seq in closers:
        if not seq:
            continue
        node = root
        for t in seq:
            node = node.setdefault(int(t), {})
        node[None] = True
    return root


class ShortestCompletion:
    """Finds shortest completions for one manager (built once with its vocabulary; owns a scratch row).
    Not thread-safe: the manager's thread only.

    ``stop_ids``: the vocabulary's stop tokens; ``candidates``: :func:`short_candidates`;
    ``check``: ``(matcher) -> problem | None`` for a matcher whose output is checked after the fact
    (:class:`~.schema_support.RecordingMatcher`), called with the stop token accepted."""

    __slots__ = ("_row", "_row_np", "_stops", "_cand", "expand_all", "beam", "fallback", "last_resort", "max_tries",
                 "_vocabulary", "_blank", "_translate", "_tries", "_closers", "_closed", "sweep", "_ids", "_base",
                 "_later", "_visited", "_rounds", "_where")

    def __init__(self, num_words: int, stop_ids: Container[int] | Sequence[int], candidates: np.ndarray,
                 vocabulary: object = None, *, expand_all: int = 256, beam: int = 48, fallback: int = 4,
                 last_resort: bool = False, token_bytes: Sequence[bytes] = (),
                 translate: Callable[[int], int] | None = None, max_tries: int = 1 << 62,
                 sweep: np.ndarray | None = None) -> None:
        self._row = torch.zeros((1, num_words), dtype=torch.int32)
        self._row_np: np.ndarray = self._row.numpy()
        self._stops = tuple(sorted(stop_ids))
        self._cand = candidates
        self._vocabulary = vocabulary
        self._translate = translate  # this search's token ids -> ``vocabulary``'s, for the output check
        self.expand_all = expand_all
        self.beam = beam
        self.fallback = fallback
        self.last_resort = last_resort
        self.max_tries = max_tries  # tokens tried per search before it gives up (None found)
        self._tries = max_tries
        self._closers: dict = {}  # this search's closers (a trie, see ``find``)
        self._closed: dict[bytes, bool] = {}  # the states whose closers and sweep were tried: whether a closer went on
        self._ids: dict[int, tuple[int, ...]] = {}  # hash(path) -> its state's identities (``_identify``)
        self._base = 0  # the history step of the search's root
        self._later: dict[int, list[tuple[tuple[int, ...], bytes]]] = {}  # closer states by length, with keys
        self._visited: set[int] = set()  # the keys of every state this search reached
        self._rounds: dict[int, int] = {}  # hash(path) -> how many of its states were reached before (``_key``)
        self._where: dict[int, int] = {}  # hash(path) -> its state's grammar position: row and items alone, hashed
        self.sweep = np.empty(0, dtype=np.int64) if sweep is None else sweep
        # whitespace-only tokens are tried after the others; where they keep the row (optional filler that would
        # crowd the beam otherwise) they are last resorts
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
        if self._translate is not None:  # a byte-level copy: its output read as the model's tokens
            f = self._translate
            return m.check.problem_of_tokens(self._vocabulary, [f(t) for t in m.tokens], frozenset()) is None
        return m.check.problem_of_tokens(self._vocabulary, [*m.tokens, stop], frozenset(self._stops)) is None

    @staticmethod
    def _steps(text: bytes) -> int:
        mo = re.search(rb"(\d+) steps", text)
        return int(mo.group(1)) if mo else 0

    def _key(self, m: xgr.GrammarMatcher, row: np.ndarray, path: tuple[int, ...]) -> bytes:
        """The merge key of the state ``m`` is at, reached by ``path`` from the search's root: its row and its items
        in context (``_identify``). Records, for ``path``, its identities (the context of the states after it) and
        how many of its path's states were reached before (``_rounds``)."""
        items, ids = self._identify(m, path)
        h = hash(path)
        self._ids[h] = ids
        key = row.tobytes() + items
        j = len(path) - 1
        while j > 0 and hash(path[:j]) not in self._rounds:
            j -= 1
        rounds = self._rounds.get(hash(path[:j]), 0)
        seen = hash(key)
        if seen in self._visited:  # reached before, at this length or shorter: a loop's round, or a longer way there
            rounds += 1
        else:
            self._visited.add(seen)
        self._rounds[h] = rounds
        self._where[h] = hash((key[:row.nbytes], ids[0]))
        return key

    def _identify(self, m: xgr.GrammarMatcher, path: tuple[int, ...]) -> tuple[bytes, tuple[int, ...]]:
        """The state ``m`` is at, reached by ``path``: (its items in context, its identities at each depth of
        context, hashed). xgrammar shows a state's scannable parser items only; each names the step its rule started
        at, whose state holds the items that rule returns to. Depth 0 is the items alone (rule starts left out: the
        same grammar position anywhere); at depth ``d`` each start is replaced by the identity at depth ``d - 1`` of
        the state there (``_at``). Where every rule started at this step (the pieces of a literal, one rule each),
        the items they return to are not shown: the state before, at the same depth, stands for them (with the
        items here, not the token: two bytes of one class lead to one state). Context reaches :data:`CONTEXT_DEPTH`
        rule starts deep: the string values of two properties (one rule) differ there, and the rounds of a loop
        (one more array element) look alike after a few."""
        text = m._debug_print_internal_state().encode()
        parts = _START.split(text.partition(b"Last step:")[2])
        texts, starts = parts[0::2], [int(x) for x in parts[1::2]]
        n = len(path)
        base = self._base
        js = [x - base for x in starts]  # the state after path[:j]
        alone = n > 0 and bool(js) and min(js) >= n
        prev = self._at(path, n - 1) if alone else ()
        refs = [self._at(path, j) if 0 < j < n else () for j in js]
        bare = items = b"r".join(texts)  # depth 0
        ids = [hash(bare)]
        for d in range(1, CONTEXT_DEPTH + 1):
            pieces = [texts[0]]
            for x, j, ref, t in zip(starts, js, refs, texts[1:]):
                if j <= 0:  # at or before the search's root: one context
                    pieces.append(b"r%d" % x)
                elif j >= n:  # started at this step: it returns to the other items here, or the state before
                    pieces.append(b"r%x." % (hash((prev[d], bare)) & _MASK) if alone else b"r.")
                else:
                    pieces.append(b"r%x" % (ref[d - 1] & _MASK))
                pieces.append(t)
            items = b"".join(pieces)
            ids.append(hash(items))
        return items, tuple(ids)

    def _at(self, path: tuple[int, ...], j: int) -> tuple[int, ...]:
        """The identities of the state after ``path[:j]`` (``j < len(path)``; zeros at the search's root): recorded
        by ``_key``, else (a state inside a closer) those of its longest recorded prefix with the tokens after it."""
        if j <= 0:
            return _ROOT
        ids = self._ids
        got = ids.get(hash(path[:j]))
        if got is not None:
            return got
        k = j - 1
        while k > 0 and hash(path[:k]) not in ids:
            k -= 1
        tail = path[k:j]
        return tuple(hash((x, tail)) for x in ids.get(hash(path[:k]), _ROOT))

    def _children(self, row: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The tokens to try after a state with ``row``: (non-blank, whitespace-only)."""
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")
        n = int(bits.sum())
        if n <= self.expand_all:
            ids = np.flatnonzero(bits)
        else:
            cand = self._cand
            cand = cand[cand < bits.shape[0]]
            ids = cand[bits[cand] != 0]
            if ids.size == 0:  # none of the candidates may come here: the first allowed tokens still do
                ids = np.flatnonzero(bits)[:self.fallback]
        blank = self._blank[ids]
        return (ids[~blank], ids[blank]) if blank.any() else (ids, ids[:0])

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
    def find(self, m: xgr.GrammarMatcher, max_len: int, closers: Mapping | None = None) -> list[int] | None:
        """A shortest completion from ``m``'s state (see the module docstring), at most ``max_len``
        tokens with its stop token; None when none was found. ``m`` ends where it started, also when
        an exception is raised. A terminated matcher needs nothing: ``[]``.

        ``closers`` (with ``last_resort``): the grammar's literals that end its free text, as a trie of token ids
        (:func:`closer_trie`). Where a state's candidates all keep it in free text, each closer it accepts whole is
        tried as one move (once per state): inside raw text every byte is allowed, so no row tells which byte
        begins the way out (``\\n</parameter>``), and single bytes would not find it."""
        if m.is_terminated():
            return []
        if max_len <= 0:
            return None
        stops = frozenset(self._stops)
        root = self._fill(m)
        stop = self._stop_allowed(root)
        if stop is not None and self._passes(m, stop):
            return [stop]
        self._tries = self.max_tries
        self._closers = closers or {}
        self._closed = {}
        self._ids = {hash(()): _ROOT}
        self._base = self._steps(m._debug_print_internal_state().encode()) - 1
        self._later = {}
        self._visited = set()
        self._rounds = {hash(()): 0}
        self._where = {}
        level: list[tuple[int, ...]] = [()]
        at: list[tuple[int, ...]] = [()]  # the sequence ``m`` is advanced by (shared prefixes are not re-accepted)
        try:
            for depth in range(1, max_len):  # sequences of `depth` tokens, then their stop token
                nxt: list[tuple[int, ...]] = []
                seen: set[bytes] = set()  # per level: keys (``_key``) of the states kept
                for path in level:
                    self._move(m, at, path)
                    found = self._expand(m, path, root, nxt, seen, stops)
                    if found is not None:
                        return found
                if len(nxt) > self.beam:
                    nxt = self._cut(nxt)
                ahead = [path for path, key in self._later.pop(depth, ()) if key not in seen and not seen.add(key)]
                if ahead:  # a closer's state leads its level: the beam keeps what follows it first
                    nxt[:0] = ahead
                if (not nxt and not self._later) or self._tries < 0:  # nothing left, or past its budget of tries
                    return None
                level = nxt
            return None
        finally:
            if at[0]:
                m.rollback(len(at[0]))

    def _cut(self, level: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
        """The ``beam`` states a level keeps: one per grammar position (row and items alone) first, then a second,
        up to :data:`PER_POSITION`, then any; in each round the paths that went round loops least first. Paths
        in many contexts at a few positions (the numbers of an array of arrays) crowd out none that has a position
        of its own (the closing literal after the array)."""
        rounds, where = self._rounds, self._where
        level.sort(key=lambda p: rounds.get(hash(p), 0))
        kept: list[tuple[int, ...]] = []
        count: dict[int, int] = {}
        for limit in range(1, PER_POSITION + 2):
            rest = []
            for p in level:
                w = where.get(hash(p), 0)
                c = count.get(w, 0)
                if c < limit or limit > PER_POSITION:
                    count[w] = c + 1
                    kept.append(p)
                    if len(kept) == self.beam:
                        return kept
                else:
                    rest.append(p)
            level = rest
        return kept

    def _move(self, m: xgr.GrammarMatcher, at: list[tuple[int, ...]], path: tuple[int, ...]) -> None:
        """Bring ``m`` from the sequence ``at[0]`` to ``path`` (both from the search's root): roll back to their
        common prefix, accept the rest (each accept counted against the search's budget of tries)."""
        cur = at[0]
        n = 0
        for a, b in zip(cur, path):
            if a != b:
                break
            n += 1
        if len(cur) > n:
            m.rollback(len(cur) - n)
            at[0] = cur[:n]
        self._tries -= len(path) - n
        for i in range(n, len(path)):
            if not m.accept_token(path[i]):
                at[0] = path[:i]
                raise RuntimeError("a sequence the matcher accepted before is refused now")
        at[0] = path

    def _expand(self, m: xgr.GrammarMatcher, path: tuple[int, ...], root: np.ndarray, nxt: list[tuple[int, ...]],
                seen: set[bytes], stops: frozenset[int]) -> list[int] | None:
        """Try the children of ``path`` (``m`` is at its state): a completion ending after one of them, else the new
        states appended to ``nxt``. With ``last_resort``, the children that keep the row (one more character of a
        string, optional whitespace) are tried only when no other child nor closer (``_close``; a swept byte may
        begin a longer unit of free text) goes on: they multiply the states of a level and crowd the paths that
        close the output out of the beam. ``m`` ends where it started."""
        row = self._fill(m).copy() if path else root.copy()
        main, blank = self._children(row)
        if not self.last_resort:
            return self._try(m, path, np.concatenate([main, blank]), nxt, seen, stops, None, None)[0]
        loops: list[int] = []
        # whitespace that changes the row is a way on (`` to=functions.f`` in harmony's header); whitespace that
        # keeps it (optional whitespace in JSON, a newline in raw text) is a loop
        found, went_on = self._try(m, path, np.concatenate([main, blank]), nxt, seen, stops, row, loops)
        if found is not None or went_on:
            return found
        if (self._closers or self.sweep.size) and row.any():
            found, went_on = self._close(m, path, row, nxt, seen, stops)
            if found is not None or went_on:
                return found
        return self._try(m, path, np.asarray(loops, dtype=np.int64), nxt, seen, stops, None, None)[0]

    def _close(self, m: xgr.GrammarMatcher, path: tuple[int, ...], row: np.ndarray, nxt: list[tuple[int, ...]],
               seen: set[bytes], stops: frozenset[int]) -> tuple[list[int] | None, bool]:
        """The ``sweep`` tokens ``m`` allows from ``path``'s state that change its row (``[a-z]*@``: the ``@`` no
        candidate names), each a new state in ``nxt``, then the closers (``find``) it accepts whole, each a state of
        the level of its length (``_later``), past the beam both (there are few): (a completion or None, whether
        a closer went on). Tried once per state of a search, the same state after a longer run of free text included
        (whether a closer went on is kept: where one did, that longer run is no shorter a way out). ``m`` ends where
        it started."""
        key = row.tobytes() + self._identify(m, path)[0]
        if key in self._closed:  # tried from this state after a shorter run of free text
            return None, self._closed[key]
        items: list[int] = []
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")
        sweep = self.sweep[bits[self.sweep] != 0] if self.sweep.size else self.sweep
        self._tries -= len(sweep)
        for t in sweep.tolist():
            if not m.accept_token(t):
                continue
            try:
                r = self._fill(m)
                if not r.any() or np.array_equal(r, row):
                    continue  # a dead end, or a loop (the candidates' tier has those)
                stop = self._stop_allowed(r)
                if stop is not None and self._passes(m, stop):
                    return [*path, t, stop], True
                k = self._key(m, r, (*path, t))
                if k not in seen:
                    seen.add(k)
                    nxt.append((*path, t))
            finally:
                m.rollback(1)

        went = False

        def walk(node: Mapping) -> list[int] | None:
            nonlocal went
            for t, child in node.items():
                if t is None:
                    continue
                self._tries -= 1
                if t in stops or not m.accept_token(t):
                    continue
                items.append(t)
                try:
                    if None in child:  # a closer ends here
                        r = self._fill(m)
                        if r.any():
                            stop = self._stop_allowed(r)
                            if stop is not None and self._passes(m, stop):
                                return [*path, *items, stop]
                            went = True
                            k = self._key(m, r, (*path, *items))
                            # its level is its length: it joins the states of that many tokens (``find``)
                            self._later.setdefault(len(path) + len(items), []).append(((*path, *items), k))
                    if len(child) > (None in child):
                        found = walk(child)
                        if found is not None:
                            return found
                finally:
                    items.pop()
                    m.rollback(1)
            return None

        found = walk(self._closers)
        # where a closer went on, a longer run of the same free text is no shorter a way out; where none did, the
        # run goes on (the same items may count a repetition, ``minLength``, which they do not show; a swept byte
        # such as ``<`` may begin a longer unit of it)
        self._closed[key] = went
        return (found, True) if found is not None else (None, went)

    def _try(self, m: xgr.GrammarMatcher, path: tuple[int, ...], children: np.ndarray, nxt: list[tuple[int, ...]],
             seen: set[bytes], stops: frozenset[int], parent: np.ndarray | None,
             loops: list[int] | None) -> tuple[list[int] | None, bool]:
        """``children`` after ``path``: (a completion, or None; whether any went on to a live state). With
        ``parent`` (the row at ``path``), a child that keeps that row goes to ``loops`` instead of ``nxt``."""
        went_on = False
        self._tries -= len(children)
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
                    return [*path, t, stop], True
                if parent is not None and np.array_equal(row, parent):
                    loops.append(t)  # type: ignore[union-attr]
                    continue
                went_on = True
                if len(nxt) >= BEAM_POOL * self.beam:
                    continue
                key = self._key(m, row, (*path, t))
                if key in seen:
                    continue
                seen.add(key)
                nxt.append((*path, t))
            finally:
                m.rollback(1)
        return None, went_on


# ------------------------------------------------------------------------------------------------
# Large vocabularies: the shortest *text* on a byte-level copy of the grammar, then its fewest tokens


class ByteGrammar:
    """One constraint's byte-level copy (:meth:`ByteLevel.plain` / :meth:`ByteLevel.with_tokens`): its compiled
    grammar, the search over it, and the model tokens its token-level formats name, each one token of the
    copy's vocabulary (``to_model``: copy id -> model id; ``from_model``: the reverse)."""

    __slots__ = ("compiled", "search", "to_model", "from_model", "check", "closers")

    def __init__(self, compiled: xgr.CompiledGrammar, search: ShortestCompletion, to_model: dict[int, int],
                 check: object = None, closers: dict | None = None) -> None:
        self.compiled = compiled
        self.search = search
        self.to_model = to_model
        self.from_model = {m: b for b, m in to_model.items()}
        self.check = check  # the constraint's output check (checked where the search may end), or None
        self.closers = closers or {}  # the literals that end its free text, as copy ids (:func:`closer_trie`)

    def cursor(self) -> "ByteCursor":
        """A matcher of the copy at the grammar's start."""
        m = xgr.GrammarMatcher(self.compiled) if self.check is None else RecordingMatcher(self.compiled, self.check)
        return ByteCursor(self, m)


class ByteCursor:
    """A byte-level matcher and the copy it runs on; advanced by the model's bytes or tokens."""

    __slots__ = ("grammar", "matcher")

    def __init__(self, grammar: ByteGrammar, matcher: xgr.GrammarMatcher) -> None:
        self.grammar = grammar
        self.matcher = matcher

    def feed_bytes(self, data: bytes) -> bool:
        """Advance over text (False: refused)."""
        m = self.matcher
        for b in data:
            if not m.accept_token(b):
                return False
        return True

    def feed_tokens(self, tokens: Sequence[int], token_bytes: Sequence[bytes]) -> bool:
        """Advance over model tokens: a token the copy names is its one token, any other its bytes."""
        named = self.grammar.from_model
        for t in tokens:
            b = named.get(t)
            if b is not None:
                if not self.matcher.accept_token(b):
                    return False
            elif not self.feed_bytes(token_bytes[t]):
                return False
        return True


Closers = Iterable[Sequence["str | int"]]


def _closer_items(closers: Closers, ids: Mapping[int, int]) -> dict:
    """Closers (pieces: text, or a model token id) as a trie of a copy's ids: text as its UTF-8 bytes, a model
    token as ``ids[token]``; a closer naming a token the copy lacks is left out."""
    seqs = []
    for closer in closers:
        seq: list[int] = []
        for piece in closer:
            if isinstance(piece, str):
                seq.extend(piece.encode())
            elif piece in ids:
                seq.append(ids[piece])
            else:
                break
        else:
            seqs.append(seq)
    return closer_trie(seqs)


class ByteLevel:
    """The byte-level copies of a model's grammars, for :class:`ShortestCompletion` on a large vocabulary
    (built once per search process; its compilers are xgrammar's, on a vocabulary of the 256 bytes and one
    stop token, so a fill costs microseconds). Not thread-safe.

    A grammar whose structural tag names model tokens (``<tool_call>``, a stop token inside a format) gets a
    copy whose vocabulary is the 256 bytes plus one token for each model token it names and each stop token
    (:meth:`with_tokens`); its search tries those tokens beside the candidate bytes.

    ``shortest(cursor)``: a short completion from a cursor's state, by the search above over single bytes
    (and named tokens): every allowed one where at most ``BYTE_EXPAND_ALL`` are, else :data:`BYTE_CANDIDATES`;
    an upper bound on the shortest, always a real completion. ``tokens(items, grammar, real_matcher)``: the
    fewest tokens of the model's vocabulary that spell it (dynamic programming over each run of bytes; a
    named token is itself), checked on the real matcher (accepted, then a stop token allowed), else the
    text's single-byte tokens, else None."""

    STOP = 256

    def __init__(self, vocabulary: Any, num_words: int, *, beam: int = 48) -> None:
        token_bytes, vocab_size = vocabulary.token_bytes, vocabulary.vocab_size
        specials = vocabulary.special_token_ids
        # the stop token's text is a control token's private bytes, which no text rule matches: xgrammar 0.2.9 also
        # allows a stop token where its text (``</s>``) would complete the output (``[^a]+`` from its start)
        info = xgr.TokenizerInfo([bytes([b]) for b in range(256)] + [control_token_bytes(self.STOP)],
                                 stop_token_ids=[self.STOP])
        self._compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
        self._vocabulary = vocabulary
        self._beam = beam
        self._token_bytes = token_bytes
        self._stop_ids = sorted(vocabulary.stop_token_ids)
        self._specials = specials
        self._real = ShortestCompletion(num_words, self._stop_ids, np.empty(0, dtype=np.int64), vocabulary)
        by_bytes: dict[bytes, int] = {}
        for t in range(min(vocab_size, len(token_bytes))):
            b = token_bytes[t]
            if b and b not in by_bytes and t not in specials:
                by_bytes[b] = t
        self._by_bytes = by_bytes
        self._max_len = max((len(b) for b in by_bytes), default=1)
        self._single = [by_bytes.get(bytes([b])) for b in range(256)]
        self._search = self._new_search(9, (self.STOP,), [bytes([b]) for b in range(256)], (), self._single.__getitem__)

    def _new_search(self, num_words: int, stops: Sequence[int], pieces: Sequence[bytes], extra: Sequence[int],
                    translate: Callable[[int], int]) -> ShortestCompletion:
        cand = np.concatenate([BYTE_CANDIDATES, np.asarray(extra, dtype=np.int64)])
        return ShortestCompletion(num_words, stops, cand, self._vocabulary, expand_all=BYTE_EXPAND_ALL,
                                  beam=self._beam, last_resort=True, token_bytes=pieces, translate=translate,
                                  max_tries=BYTE_MAX_TRIES, sweep=BYTE_SWEEP)

    def plain(self, grammar: xgr.Grammar, check: object = None, closers: Closers = ()) -> ByteGrammar:
        """The copy of a grammar that names no model token (``check``: its output check, or None; ``closers``: the
        literals that end its free text, ``GrammarBuilder.closers``)."""
        return ByteGrammar(self._compiler.compile_grammar(grammar), self._search, {}, check,
                           _closer_items(closers, {}))

    def with_tokens(self, named: Iterable[int], build: Callable[[Mapping[int, int]], xgr.Grammar],
                    check: object = None, closers: Closers = ()) -> ByteGrammar:
        """The copy of a grammar whose token-level formats name the model tokens ``named``: ``build(ids)`` makes
        it with every model token id ``t`` it names replaced by ``ids[t]``, that token's id in the copy."""
        model_ids = sorted(set(named) | set(self._stop_ids))
        ids = {t: 256 + j for j, t in enumerate(model_ids)}
        pieces = [bytes([b]) for b in range(256)]
        for t in model_ids:  # a control token stays one that text never spells (xgrammar_adapter's rule)
            pieces.append(control_token_bytes(ids[t]) if t in self._specials or t >= len(self._token_bytes)
                          else self._token_bytes[t])
        stops = [ids[t] for t in self._stop_ids]
        info = xgr.TokenizerInfo(pieces, xgr.VocabType.RAW, stop_token_ids=stops)
        compiled = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False).compile_grammar(build(ids))
        to_model = {b: t for t, b in ids.items()}
        single = self._single

        def translate(i: int) -> int:
            return single[i] if i < 256 else to_model[i]  # type: ignore[return-value]

        search = self._new_search((len(pieces) + 31) // 32, stops, pieces,
                                  [ids[t] for t in model_ids if ids[t] not in stops], translate)
        return ByteGrammar(compiled, search, to_model, check, _closer_items(closers, ids))

    def shortest(self, cursor: ByteCursor, max_len: int) -> list[int] | None:
        """A short completion from ``cursor``'s state: the copy's token ids, its stop token left out."""
        path = cursor.grammar.search.find(cursor.matcher, max_len, cursor.grammar.closers)
        return None if path is None else path[:-1]

    def _spell(self, text: bytes) -> tuple[list[int] | None, list[int] | None]:
        """The fewest model tokens spelling ``text``, and its single-byte tokens (None where none exist)."""
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
        fewest: list[int] | None = None
        if n == 0 or best[n] <= n:
            fewest = []
            j = n
            while j > 0:
                fewest.append(tok[j])
                j = prev[j]
            fewest.reverse()
        single = [self._single[b] for b in text]
        return fewest, (single if all(t is not None for t in single) else None)  # type: ignore[return-value]

    def tokens(self, items: bytes | Sequence[int], real: xgr.GrammarMatcher,
               grammar: ByteGrammar | None = None) -> list[int] | None:
        """The fewest model tokens that spell ``items`` (text, or a copy's token ids: bytes and named tokens),
        then a stop token allowed after them, checked on ``real`` (which ends where it started); None when
        neither they nor the single bytes pass."""
        to_model = grammar.to_model if grammar is not None else {}
        runs: list[bytes | int] = []  # runs of text and named model tokens
        buf = bytearray()
        for i in items:
            if i < 256:
                buf.append(i)
                continue
            if buf:
                runs.append(bytes(buf))
                buf.clear()
            runs.append(to_model[i])
        if buf:
            runs.append(bytes(buf))
        best: list[int] | None = []
        single: list[int] | None = []
        for r in runs:
            if isinstance(r, int):
                best = None if best is None else [*best, r]
                single = None if single is None else [*single, r]
                continue
            f, one = self._spell(r)
            best = None if best is None or f is None else best + f
            single = None if single is None or one is None else single + one
        tries = [t for t in (best, single) if t is not None]
        if len(tries) == 2 and tries[0] == tries[1]:
            tries.pop()
        for seq in tries:
            stop = self._real.ends_after(real, seq)
            if stop is not None:
                return [*seq, stop]
        return None
