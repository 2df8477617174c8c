"""The whitespace bound of JSON constraints, enforced beside the grammar instead of inside it.

What it guarantees
------------------
A JSON constraint with ``max_whitespace=B`` (see :meth:`~thinkgate.structured_output.compilation.constraints.Constraint.json_schema`) accepts
exactly the outputs of its unbounded grammar (xgrammar's ``any_whitespace`` JSON) in which every gap
between JSON tokens holds at most ``B`` whitespace characters (space, tab, CR, LF). A gap is a maximal
run of whitespace outside strings: in JSON, whitespace outside a string can only be such a gap, so
the bound is a property of the text alone. Whitespace inside strings is string content and is not
counted. The mask of every row allows exactly the tokens that the unbounded grammar allows and that
keep every gap within ``B``; a token that breaks the bound is rejected by ``accept_token``.

Why beside the grammar
----------------------
Written into the grammar (``[ \\n\\r\\t]{0,B}`` per gap, xgrammar's ``max_whitespace_cnt``), the bound
costs megabytes of token masks per grammar, several times the compile time, and a slower fill per row
(measured by ``python -m bench jsonws``). Here the grammar is xgrammar's unbounded one (same compile,
same size, same masks as xgrammar's defaults, shared by xgrammar's cache), and the bound is a
three-state lexer (outside strings / in a string / after a backslash in a string) plus the length of
the current gap, run on each accepted token through a table built once per vocabulary and bound:

- :class:`WhitespaceLexicon` (per model): for every token id and lexer state, how the token moves the
  lexer and the gap length. Built on first use (the first bounded JSON compile, on the compiler's
  driver thread), vectorized over the vocabulary with numpy.
- :class:`WhitespaceBound` (per model and bound ``B``): the transition table over the ``B + 3``
  states (``0..B``: outside strings, that many whitespace characters in the current gap; ``B+1``: in
  a string; ``B+2``: after a backslash in a string) and, per state, the tokens the bound forbids
  there (:class:`RowClear`): in most states only the whitespace tokens longer than what is left of
  the bound, so the clear touches a few words of the row.
- :class:`BoundedMatcher` (per request): an xgrammar ``GrammarMatcher`` that also keeps the lexer state
  and one small int per accepted token (for ``rollback``, as xgrammar keeps its own history); its
  ``fill_next_token_bitmask`` clears the forbidden tokens of the current state, and its
  ``accept_token`` refuses a token that breaks the bound before the grammar sees it. Drafts and
  rollback need nothing else: the lexer state is a function of the accepted tokens, restored exactly
  by ``rollback``.

Soundness relies on the grammar accepting only JSON text, so that the lexer's idea of "in a string"
is the grammar's; ids past the tokenizer leave the lexer state as it is, and so do control tokens (which
no JSON text rule matches) inside a string; outside strings a control token ends the gap, so that a tool
call's JSON between control tokens (``tools/json_text.py``) counts its gaps between them.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Sequence
from typing import Any

import numpy as np
import xgrammar as xgr

from . import lexer as jsonws

__all__ = ["WhitespaceLexicon", "WhitespaceBound", "RowClear", "BoundedMatcher"]

_OUT, _STR, _ESC = 0, 1, 2
_WS = np.zeros(256, dtype=bool)
_WS[[0x20, 0x09, 0x0A, 0x0D]] = True
_QUOTE, _BACKSLASH = 0x22, 0x5C
_CAP = 0xFFFF  # run lengths are capped here (any bound is far below it)


class RowClear:
    """The tokens one lexer state forbids, as an AND on a bitmask row: ``idx`` (word indices) and
    ``keep`` (those words' masks) when few words are touched, else a whole ``row``."""

    __slots__ = ("idx", "keep", "row", "num_tokens")

    def __init__(self, allowed: np.ndarray, num_words: int) -> None:
        bits = np.zeros(num_words * 32, dtype=bool)
        bits[: allowed.size] = allowed
        row = np.packbits(bits, bitorder="little").view(np.int32)
        self.num_tokens = int(allowed.size - np.count_nonzero(allowed))
        touched = np.flatnonzero(row != -1)
        if touched.size * 8 < num_words:
            self.idx: np.ndarray | None = touched.astype(np.intp)
            self.keep: np.ndarray | None = row[touched].copy()
            self.row: np.ndarray | None = None
        else:
            self.idx = self.keep = None
            self.row = row

    def apply(self, bitmask: np.ndarray, i: int) -> None:
        """Clear the forbidden tokens in row ``i`` of ``bitmask`` (int32, ``[rows, words]``), in place."""
        r = bitmask[i]
        if self.row is None:
            r[self.idx] &= self.keep
        else:
            np.bitwise_and(r, self.row, out=r)


class WhitespaceBound:
    """The lexer of :class:`WhitespaceLexicon` for one bound ``B`` (see the module docstring). Immutable,
    shared by every request of the model with that bound.

    ``step[state * width + token]`` is the state after ``token`` from ``state``, or ``reject`` when the
    token would make a gap longer than ``B``; ``clears[state]`` is the :class:`RowClear` of that state
    (None when it forbids nothing). State 0 is the start (outside strings, no whitespace yet).
    """

    __slots__ = ("max_whitespace", "width", "num_states", "reject", "step", "clears", "nbytes", "lexer_tables")

    def __init__(self, lexicon: WhitespaceLexicon, max_whitespace: int) -> None:
        B = int(max_whitespace)
        if B < 1:
            raise ValueError(f"a whitespace bound is at least 1, got {max_whitespace!r}")
        lex = lexicon.tables()
        width = lexicon.width
        self.max_whitespace = B
        self.width = width
        self.num_states = B + 3
        self.reject = self.num_states
        in_str, esc = B + 1, B + 2
        dtype = np.uint8 if self.reject <= 0xFF else np.uint16
        table = np.empty((self.num_states, width), dtype=dtype)
        for state in range(self.num_states):
            start = _OUT if state <= B else (_STR if state == in_str else _ESC)
            k = state if start == _OUT else 0
            lead, inner, trail, end, allws, ident = (lex[name][start] for name in
                                                     ("lead", "inner", "trail", "end", "allws", "ident"))
            nxt = np.where(end == _OUT, trail, np.where(end == _STR, in_str, esc)).astype(np.int64)
            nxt = np.where(allws, k + lead.astype(np.int64), nxt)
            bad = (k + lead.astype(np.int64) > B) | (inner > B) | (~allws & (trail > B))
            nxt = np.where(bad, self.reject, nxt)
            nxt = np.where(ident, state, nxt)
            table[state] = nxt
        self.step = array("B" if dtype == np.uint8 else "H", table.tobytes())
        num_words = (width + 31) // 32
        clears: list[RowClear | None] = []
        for state in range(self.num_states):
            allowed = table[state] != self.reject
            clears.append(None if allowed.all() else RowClear(allowed, num_words))
        self.clears: tuple[RowClear | None, ...] = tuple(clears)
        self.nbytes = table.nbytes + sum(
            (c.row.nbytes if c.row is not None else c.idx.nbytes + c.keep.nbytes) for c in clears if c is not None)
        self.lexer_tables = jsonws.tables(self)  # what each request's lexer reads (the C extension's copy)
        if self.lexer_tables is not self:
            self.nbytes += self.lexer_tables.nbytes

    def run(self, token_ids: Sequence[int], state: int = 0) -> int:
        """The state after ``token_ids`` from ``state`` (``reject`` once a token breaks the bound)."""
        step, w, reject = self.step, self.width, self.reject
        for t in token_ids:
            state = step[state * w + t]
            if state == reject:
                return reject
        return state


class WhitespaceLexicon:
    """Per vocabulary (built once per model, thread-safe): how each token moves the JSON whitespace lexer
    (see the module docstring), and the :class:`WhitespaceBound` of each bound asked for.

    ``token_bytes``: the tokens' bytes; ``special_ids``: control tokens (outside strings they end the gap,
    inside one they leave the state as it is); ``width``: the logits width (ids past ``len(token_bytes)``
    leave the state as it is).
    """

    def __init__(self, token_bytes: Sequence[bytes], special_ids: Any, width: int) -> None:
        self._token_bytes = token_bytes
        self._special_ids = frozenset(special_ids)
        self.width = int(width)
        self._lock = threading.RLock()  # bound() builds the tables under it
        self._tables: dict[str, list[np.ndarray]] | None = None
        self._bounds: dict[int, WhitespaceBound] = {}

    @classmethod
    def of(cls, vocabulary: Any) -> WhitespaceLexicon:
        """The lexicon of a :class:`~reasoning.Vocabulary`."""
        return cls(vocabulary.token_bytes, vocabulary.special_token_ids, vocabulary.logits_width)

    def bound(self, max_whitespace: int) -> WhitespaceBound:
        """The :class:`WhitespaceBound` for ``max_whitespace`` (built once, then shared)."""
        b = self._bounds.get(max_whitespace)
        if b is None:
            with self._lock:
                b = self._bounds.get(max_whitespace)
                if b is None:
                    b = self._bounds[max_whitespace] = WhitespaceBound(self, max_whitespace)
        return b

    def tables(self) -> dict[str, list[np.ndarray]]:
        """Per start state (outside strings, in a string, after a backslash) and token: ``lead`` (the
        whitespace the token adds to the current gap before its first other byte), ``inner`` (its
        longest gap that starts and ends inside it), ``trail`` (the gap it leaves open at its end),
        ``end`` (the state after it), ``allws`` (it is all gap whitespace: it only extends the gap),
        ``ident`` (no move at all: an empty token or an id past the tokenizer; a control token inside a
        string. Outside strings a control token ends the gap and leaves the lexer outside strings)."""
        if self._tables is None:
            with self._lock:
                if self._tables is None:
                    self._tables = _lex_all(self._token_bytes, self._special_ids, self.width)
        return self._tables


def _lex_all(token_bytes: Sequence[bytes], special_ids: frozenset[int], width: int) -> dict[str, list[np.ndarray]]:
    """:meth:`WhitespaceLexicon.tables`, vectorized over tokens: one pass per byte position, over the
    tokens at least that long."""
    n = len(token_bytes)
    lengths = np.fromiter((len(b) for b in token_bytes), dtype=np.int64, count=n)
    flat = np.frombuffer(b"".join(token_bytes), dtype=np.uint8)
    offsets = np.zeros(n, dtype=np.int64)
    np.cumsum(lengths[:-1], out=offsets[1:])
    order = np.argsort(-lengths, kind="stable")  # longest first: the tokens still going are a prefix
    slen = lengths[order]
    soff = offsets[order]
    ident = np.ones(width, dtype=bool)
    ident[:n] = lengths == 0
    controls = np.array(sorted(s for s in special_ids if 0 <= s < width), dtype=np.int64)
    ident[controls] = True
    out: dict[str, list[np.ndarray]] = {k: [] for k in ("lead", "inner", "trail", "end", "allws", "ident")}
    for start in (_OUT, _STR, _ESC):
        state = np.full(n, start, dtype=np.int8)
        run = np.zeros(n, dtype=np.int64)
        lead = np.zeros(n, dtype=np.int64)
        inner = np.zeros(n, dtype=np.int64)
        leading = np.full(n, start == _OUT, dtype=bool)  # still in the gap the token started in
        maxlen = int(slen[0]) if n else 0
        for j in range(maxlen):
            m = int(np.searchsorted(-slen, -j, side="left"))  # the tokens longer than j: order[:m]
            b = flat[soff[:m] + j]
            st = state[:m]
            isws = _WS[b]
            out_ = st == _OUT
            gap = out_ & isws
            closes = out_ & ~isws  # a byte outside strings that is not whitespace ends the gap
            r = run[:m]
            ld = leading[:m]
            lead[:m] = np.where(closes & ld, r, lead[:m])
            inner[:m] = np.where(closes & ~ld, np.maximum(inner[:m], r), inner[:m])
            leading[:m] = ld & ~closes
            run[:m] = np.where(gap, r + 1, np.where(closes, 0, r))
            nst = st.copy()
            nst[out_ & (b == _QUOTE)] = _STR
            in_str = st == _STR
            nst[in_str & (b == _QUOTE)] = _OUT
            nst[in_str & (b == _BACKSLASH)] = _ESC
            nst[st == _ESC] = _STR
            state[:m] = nst
        allws = leading & (slen > 0)
        lead = np.where(allws, run, lead)
        trail = run
        # back to token order, padded to the logits width
        def unsort(a: np.ndarray, fill: Any, dtype: Any) -> np.ndarray:
            res = np.full(width, fill, dtype=dtype)
            res[order] = a
            return res

        cols = {"lead": np.minimum(unsort(lead, 0, np.int64), _CAP),
                "inner": np.minimum(unsort(inner, 0, np.int64), _CAP),
                "trail": np.minimum(unsort(trail, 0, np.int64), _CAP), "end": unsort(state, start, np.int8),
                "allws": unsort(allws, False, bool) & ~ident, "ident": ident}
        if start == _OUT and controls.size:
            # outside strings a control token ends the gap (it is no whitespace; a tool call's literal
            # whitespace after its marker starts a new one), whatever its text holds
            cols["ident"] = ident.copy()
            cols["ident"][controls] = False
            for name in ("lead", "inner", "trail"):
                cols[name][controls] = 0
            cols["end"][controls] = _OUT
            cols["allws"][controls] = False
        for name, col in cols.items():
            out[name].append(col)
    return out


class BoundedMatcher(xgr.GrammarMatcher):
    """An xgrammar ``GrammarMatcher`` with a :class:`WhitespaceBound` (see the module docstring). Same
    contract as ``GrammarMatcher``.

    ``ws_lexer`` (``jsonws/lexer.py``: the C extension's, or its Python reference) holds the lexer state and
    history and calls xgrammar's native matcher (``_handle``, as xgrammar's own wrappers and its batch
    matcher do) itself: a token's lexer step and grammar accept are one call, a row's grammar fill
    and whitespace clear another. A caller that fills rows with xgrammar's batch matcher (which
    bypasses :meth:`fill_next_token_bitmask`) applies the clears itself with ``jsonws.clear_rows``.
    ``accept_token``, ``accept_many`` and ``fill_next_token_bitmask`` are the lexer's own methods
    (instance attributes over the methods below, same signatures: no Python frame of ours per token or
    row), except where a subclass overrides them: its override reaches the lexer through ``super()``.
    ``accept_string`` (xgrammar's, not used by thinkgate) is not bounded and breaks ``rollback``'s
    count: use ``accept_token``."""

    def __init__(self, compiled_grammar: xgr.CompiledGrammar, bound: WhitespaceBound, **kwargs: Any) -> None:
        super().__init__(compiled_grammar, **kwargs)
        self.ws_bound = bound
        h = self._handle
        self.ws_lexer = jsonws.new_lexer(bound.lexer_tables, h.accept_token, h.rollback, h.fill_next_token_bitmask)
        # the lexer's methods stand in for ours where no subclass overrides them (no Python frame)
        if type(self).accept_token is BoundedMatcher.accept_token:
            self.accept_token = self.ws_lexer.accept  # type: ignore[method-assign]
            self.accept_many = self.ws_lexer.accept_many  # type: ignore[method-assign]
        if type(self).fill_next_token_bitmask is BoundedMatcher.fill_next_token_bitmask:
            self.fill_next_token_bitmask = self.ws_lexer.fill  # type: ignore[method-assign]

    def accept_token(self, token_id: int, *, debug_print: bool = False) -> bool:
        return self.ws_lexer.accept(token_id, debug_print)

    def accept_many(self, token_ids: list[int], stops: frozenset[int]) -> int:
        """``accept_token`` on each token in turn, up to the first one refused (its index is returned)
        or through the first stop token (the index after it: the tokens after a stop are never
        offered); ``len(token_ids)`` when all were accepted (the lexer's own loop, in C, where no
        subclass overrides ``accept_token``)."""
        k = 0
        for t in token_ids:
            if not self.accept_token(t):
                return k
            k += 1
            if t in stops:
                return k
        return k

    def rollback(self, num_tokens: int = 1) -> None:
        self.ws_lexer.rollback(num_tokens)

    def reset(self) -> None:
        super().reset()
        self.ws_lexer.reset()

    def fill_next_token_bitmask(self, bitmask: Any, index: int = 0, np_bitmask: np.ndarray | None = None, *,
                                debug_print: bool = False) -> bool:
        """xgrammar's fill of row ``index``, then the bound's clear of it. ``np_bitmask``: the same
        buffer as a numpy array, when the caller has it (else it is taken from ``bitmask``)."""
        return self.ws_lexer.fill(bitmask, index, np_bitmask, debug_print=debug_print)

    def breaks_bound(self, token_id: int) -> bool:
        """True when ``token_id`` would make a gap longer than the bound from here (changes nothing)."""
        return self.ws_lexer.breaks(token_id)
