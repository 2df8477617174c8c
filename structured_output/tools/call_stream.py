"""The streaming reader of a :class:`~.engine.CallFormat`: the whole reader's loop, run as text arrives.

The whole reader (``CallFormat.read_marked``) walks the output once: find the trigger (the first marker of
the call syntax), read a block there (``_read_block``: a call, or a section of calls), keep its calls that
the request's rules accept, and go on after the block; a block that does not read leaves the trigger as
content and the search goes on after it. This stream runs the same loop on the same definition (the same
``_read_block``, the same policy), deciding each step as soon as the text seen so far decides it:

- no trigger pending: text goes out as content (through :class:`~.stream.ContentGate`), except a tail that
  may still turn out to start the trigger (with DSML's lead ``<``);
- a trigger pending: the block's text is held until it can end. Where the block's end is a control token
  (every format but Mistral's and Llama 3's: ``</tool_call>``, ``<｜tool▁calls▁end｜>``, ``</｜DSML｜tool_calls>``
  ...), the block is read at the first place that token (with the text after it in the end literal) comes:
  a block's text holds no control token but its markers, so a block that does not read there never reads,
  and its text is released as content at once. Where the block ends with plain JSON (Mistral ``[ARGS]{...}``,
  Llama 3 ``{"name": ...}``), it is read where the brackets opened since the trigger close (a bracket depth
  counter that skips JSON strings);
- at the end of the output, what is still held is read as the whole reader would read it.

Per feed: O(the feed) to search (a window of the feed plus the end literal's length), plus one read of a
block when the feed completes one (O(the block), once per block).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkgate.reasoning.vocabulary import Vocabulary

from .args import JsonArgs, NoMatch
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCall
from .stream import ContentGate, ToolStream, ToolStreamDelta

if TYPE_CHECKING:
    from .engine import CallFormat

__all__ = ["CallFormatStream"]

_OUTSIDE_STRING = re.compile(r'[\[\]{}"]')
_INSIDE_STRING = re.compile(r'["\\]')


class _BracketDepth:
    """JSON bracket depth over plain text fed in order; reports where it returns to zero."""

    __slots__ = ("depth", "in_string", "escape")

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escape = False

    def feed(self, text: str, base: int) -> list[int]:
        """Positions (``base`` + offset, just after the bracket) where an opened bracket closes to depth 0."""
        out: list[int] = []
        i, n = 0, len(text)
        while i < n:
            if self.escape:
                self.escape = False
                i += 1
                continue
            if self.in_string:
                m = _INSIDE_STRING.search(text, i)
                if m is None:
                    break
                i = m.end()
                if m.group() == "\\":
                    self.escape = True
                else:
                    self.in_string = False
                continue
            m = _OUTSIDE_STRING.search(text, i)
            if m is None:
                break
            c, i = m.group(), m.end()
            if c == '"':
                self.in_string = True
            elif c in "[{":
                self.depth += 1
            elif self.depth > 0:
                self.depth -= 1
                if self.depth == 0:
                    out.append(base + i)
        return out

    def feed_runs(self, runs: Sequence[tuple[int, str]]) -> list[int]:
        """:meth:`feed` over the plain runs ``(offset, text)`` of a pending text (control tokens skipped)."""
        out: list[int] = []
        for base, text in runs:
            out += self.feed(text, base)
        return out


class CallFormatStream(ToolStream):
    """One request's streaming reader for a :class:`~.engine.CallFormat` (see the module docstring)."""

    def __init__(self, fmt: CallFormat, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary) -> None:
        self._fmt = fmt
        self._policy = policy
        special = frozenset(vocabulary.special_tokens)
        self._pending = PendingText(special)
        self._lit = fmt._reader_lit
        self._tools = {t.name: t for t in request.all_tools if not t.builtin}
        self._trig, self._lead = fmt._trigger, fmt._lead_text
        self._start_text = self._lead + self._trig
        end = fmt.section[1] if fmt.section else fmt.call_end
        markers = [piece for is_marker, piece in self._lit.split(end) if is_marker]
        control = [m for m in markers if m in special]
        if control:
            # the block can end only where its last control marker comes (with the text after it)
            self._end_mode = "token"
            self._end = end[end.rindex(control[-1]):]
        elif isinstance(fmt.args, JsonArgs) and not end.strip(" \n}"):
            self._end_mode = "brackets"
            self._end = end
        else:
            self._end_mode = "literal"  # a block that does not read at one end may read at a later one
            self._end = end or fmt.call_end
        self._gate = ContentGate(fmt.call_sep)
        self._taken = 0
        self._held = False
        self._t0 = 0  # the pending trigger's offset in the pending text
        self._search = 0  # the end literal is searched from here
        self._depth = _BracketDepth()
        self._ends: list[int] = []  # bracket-close positions not tried yet
        self._scanned = 0

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        p = self._pending
        before = len(p)
        p.extend(pieces)
        if self._held and self._end_mode == "brackets" and len(p) > before:
            self._scanned += len(p) - before
            self._ends += self._depth.feed_runs(p.plain_runs(before))
        return self._run(final=False)

    def finish(self) -> ToolStreamDelta:
        d = self._run(final=True)
        tail = self._gate.finish()
        return ToolStreamDelta(d.content + tail, d.calls)

    # -- the loop --------------------------------------------------------------------------------
    def _holdback(self, text: str) -> int:
        """Length of the longest tail of ``text`` that may still become the start of a block."""
        start = self._start_text
        for k in range(min(len(text), len(start) - 1), 0, -1):
            if start.startswith(text[-k:]):
                return k
        return 0

    def _next_end(self) -> int:
        """The end of the next place the pending block may end (offset in the pending text), or -1."""
        p = self._pending
        if self._end_mode == "brackets":
            return self._ends.pop(0) if self._ends else -1
        w = p.window(self._search)
        self._scanned += len(w.text)
        i = w.find_literal(self._end, 0, self._lit)
        if i < 0:
            self._search = max(self._search, len(p) - len(self._end) + 1)
            return -1
        e = w.match_literal(i, self._end, self._lit)
        at = self._search
        self._search = at + i + 1
        return at + e

    def _run(self, *, final: bool) -> ToolStreamDelta:
        p, gate, fmt = self._pending, self._gate, self._fmt
        out: list[str] = []
        calls: list[ToolCall] = []
        while True:
            if not self._held:
                src = p.marked()
                self._scanned += len(src.text)
                idx = src.find_marker(self._trig)
                if idx < 0:
                    cut = len(src.text) if final else len(src.text) - self._holdback(src.text)
                    out.append(gate.text(src.text[:cut]))
                    p.drop(cut)
                    break
                lead = self._lead
                has_lead = (bool(lead) and idx >= len(lead) and src.text.startswith(lead, idx - len(lead))
                            and src.plain(idx - len(lead), idx))
                start = idx - len(lead) if has_lead else idx
                out.append(gate.text(src.text[:start]))
                p.drop(start)
                self._held, self._t0 = True, idx - start
                self._search = self._t0 + len(self._trig)
                if self._end_mode == "brackets":
                    self._depth, self._ends = _BracketDepth(), []
                    self._ends = self._depth.feed_runs(p.plain_runs(self._t0))
                continue
            if final:
                end_at = len(p)
            else:
                end_at = self._next_end()
                if end_at < 0:
                    break
            src = p.window(0, end_at)
            self._scanned += end_at
            try:
                block, end = fmt._read_block(src, self._t0, self._tools, self._lit, skip=len(self._lead))
            except (NoMatch, RecursionError):
                if not (final or self._end_mode != "literal"):
                    continue  # a later end may still close it
                cut = self._t0 + len(self._trig)  # not a call: the trigger stays content
                out.append(gate.text(src.text[:cut]))
                self._drop_block(cut)
                continue
            text = src.text
            kept: list[ToolCall] = []
            refused: list[str] = []
            for call, cs, ce in block:
                index = self._taken + len(kept)
                if self._policy.accepts(call.name, call.arguments, index):
                    kept.append(fmt.with_id(call, text[cs:ce], index))
                else:
                    refused.append(text[cs:ce])
            if not kept:  # well-formed, but the request does not allow it: content
                out.append(gate.text(text[:end]))
            else:
                out.append(gate.call())
                out.extend(gate.text(r) for r in refused)
                gate.after_call()
                calls.extend(kept)
                self._taken += len(kept)
            self._drop_block(end)
        return ToolStreamDelta("".join(out), tuple(calls))

    def _drop_block(self, n: int) -> None:
        self._pending.drop(n)
        self._held = False
        self._ends = []
