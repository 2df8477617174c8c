"""The streaming reader of a :class:`~.call_format.CallFormat`: the whole reader's loop, run as text arrives.

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
- a block's text holds no control token but its own syntax markers, and its trigger once (where the syntax
  has it once): such a token before the block's end shows at once that the block does not read;
- at the end of the output, what is still held is read as the whole reader would read it;
- with ``stream_arguments`` (see :mod:`.stream`), a held block is also read as it arrives
  (:class:`~.live_block.LiveBlock`): each call's first delta once its name is read and allowed, then its
  argument text; where the block ends, the whole read's arguments past what was sent go out. A block whose
  first call went out and that does not read is taken as those calls (their text is not content).

Per feed: O(the feed) to search, plus one read of a block when the feed completes one (O(the block), once
per block). The pending text is built once per feed at most, and settled text is dropped once per feed, so
a feed holding many blocks (or a hostile run of triggers) costs O(its length) plus the reads.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkgate.reasoning.vocabulary import Vocabulary

from .arg_stream import BracketDepth
from .args import JsonArgs, NoMatch
from .call_delta import CallDelta, merge_call_deltas
from .live_block import LiveBlock
from .marked import MarkedText
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCall
from .stream import ContentGate, ToolStream, ToolStreamDelta
from .tool_table import ToolTable

if TYPE_CHECKING:
    from .call_format import CallFormat

__all__ = ["CallFormatStream"]

class CallFormatStream(ToolStream):
    """One request's streaming reader for a :class:`~.call_format.CallFormat` (see the module docstring)."""

    def __init__(self, fmt: CallFormat, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                 stream_arguments: bool = False) -> None:
        self._fmt = fmt
        self._stream_arguments = stream_arguments
        self._live: LiveBlock | None = None
        self._policy = policy
        special = frozenset(vocabulary.special_tokens)
        self._pending = PendingText(special)
        self._lit = fmt._reader_lit
        self._tools = ToolTable(request)
        self._trig, self._lead = fmt._reader_trigger, fmt._lead_text
        self._start_text = self._lead + self._trig
        ends = (fmt.section[1], *(e for _, e in fmt.alt_sections)) if fmt.section else (fmt.call_end,)
        # the block's syntax after its trigger: the end's token (with its text) must not occur in it but at
        # the end (PLaMo 3 closes every marker with ":plamo|>": its blocks end at their whole end literal)
        inner = fmt.call_sep + repr(fmt.args)
        for head in ((fmt.section[0], *(b for b, _ in fmt.alt_sections)) if fmt.section else (fmt.call_begin,)):
            inner += head[head.find(fmt._trigger) + len(fmt._trigger):]
        if fmt.section:
            inner += fmt.call_begin + fmt.call_end
        tails = []
        for end in ends:
            control = [piece for is_marker, piece in self._lit.split(end) if is_marker and piece in special]
            tail = end[end.rindex(control[-1]):] if control else ""
            tails.append(tail if tail and tail not in inner else None)
        if all(tails):
            # the block can end only where the last control marker of one of its ends comes (with the text
            # after it)
            self._end_mode = "token"
            self._ends_lit: tuple[str, ...] = tuple(tails)  # type: ignore[arg-type]
        elif len(ends) == 1 and isinstance(fmt.args, JsonArgs) and not ends[0].strip(" \n}"):
            self._end_mode = "brackets"
            self._ends_lit = ends
        else:
            self._end_mode = "literal"  # a block that does not read at one end may read at a later one
            self._ends_lit = tuple(e or fmt.call_end for e in ends)
        # control tokens a block may hold (its syntax markers), and whether it holds its trigger only once
        self._inside = frozenset(m for m in fmt.syntax_markers if m in special)
        block = "".join(fmt.section or ()) + fmt.call_begin + fmt.call_end
        self._trigger_once = sum(1 for is_m, piece in self._lit.split(block) if is_m and piece == self._trig) == 1
        self._gate = ContentGate(fmt.call_sep)
        self._taken = 0
        # the pending block (positions in the pending text)
        self._held = False
        self._t0 = 0          # its trigger
        self._search = 0      # its end is searched from here
        self._depth = BracketDepth()
        self._depth_pos = 0   # its brackets fed up to here
        # what the searches found so far (positions in the pending text; each search resumes where it
        # stopped, whichever block asks, so a feed holding many blocks is searched once)
        self._foreign: list[int] = []  # control tokens no block can hold
        self._ctrl_pos = 0             # control tokens examined up to here
        self._ends: list[tuple[int, int]] = []  # (start, end) of the end literal
        self._end_pos = 0              # end literal starts searched up to here
        self._scanned = 0

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        self._pending.extend(pieces)
        self._scanned += sum(len(t) for t, _ in pieces)
        return self._run(final=False)

    def finish(self) -> ToolStreamDelta:
        d = self._run(final=True)
        tail = self._gate.finish()
        return ToolStreamDelta(d.content + tail, d.calls, d.fragments)

    # -- the pending block -----------------------------------------------------------------------
    def _hold(self, idx: int) -> None:
        self._held, self._t0, self._search = True, idx, idx + len(self._trig)
        self._depth, self._depth_pos = BracketDepth(), idx
        if self._stream_arguments:
            self._live = LiveBlock(self._fmt, idx, len(self._lead), self._tools, self._policy, self._taken)

    def _first_foreign(self, after: int) -> int:
        """The first control token at or after ``after`` that no block can hold (not one of the syntax's
        markers, or the trigger where a block holds it once), or -1."""
        k = bisect.bisect_left(self._foreign, after)
        if k < len(self._foreign):
            return self._foreign[k]
        p = self._pending
        for off, text in p.controls_from(self._ctrl_pos):
            self._ctrl_pos = off + len(text)
            if text not in self._inside or (text == self._trig and self._trigger_once):
                self._foreign.append(off)
                if off >= after:
                    return off
        self._ctrl_pos = len(p)
        return -1

    def _next_end(self, src: MarkedText | None, limit: int) -> int:
        """The end of the first place after ``self._search`` where the pending block may end, if that place
        starts before ``limit``; else -1."""
        p = self._pending
        if self._end_mode == "brackets":
            for off, text in p.plain_runs(self._depth_pos):
                if off >= limit:
                    break
                text = text[:limit - off]
                self._scanned += len(text)
                close = self._depth.first_close(text, off)
                if close >= 0:
                    self._depth_pos = close
                    return close
                self._depth_pos = off + len(text)
            return -1
        k = bisect.bisect_left(self._ends, (self._search, -1))
        if k == len(self._ends):
            start = max(self._search, self._end_pos)
            found: tuple[int, int] | None = None
            if src is None:
                w = p.window(start)
                for literal in self._ends_lit:
                    i = w.find_literal(literal, 0, self._lit)
                    if i >= 0 and (found is None or start + i < found[0]):
                        found = (start + i, start + w.match_literal(i, literal, self._lit))
                self._scanned += len(w.text)
            else:
                for literal in self._ends_lit:
                    i = src.find_literal(literal, start, self._lit)
                    if i >= 0 and (found is None or i < found[0]):
                        found = (i, src.match_literal(i, literal, self._lit))
                self._scanned += (len(src.text) if found is None else found[0]) - start
            if found is None:
                self._end_pos = max(start, len(p) - max(map(len, self._ends_lit)) + 1)
                return -1
            self._ends.append(found)
            self._end_pos = found[0] + 1
        at, end = self._ends[k]
        if at >= limit:
            return -1
        self._search = at + 1  # a block that does not read here may read at a later end ("literal")
        return end

    def _holdback(self, text: str, base: int) -> int:
        """Length of the longest tail of ``text[base:]`` that may still become the start of a block."""
        start = self._start_text
        for k in range(min(len(text) - base, len(start) - 1), 0, -1):
            if start.startswith(text[len(text) - k:]):
                return k
        return 0

    # -- the loop --------------------------------------------------------------------------------
    def _run(self, *, final: bool) -> ToolStreamDelta:
        p, gate, fmt = self._pending, self._gate, self._fmt
        out: list[str] = []
        calls: list[ToolCall] = []
        frags: list[CallDelta] = []
        src: MarkedText | None = None  # the pending text, built at most once per run
        base = 0  # text before base is settled (dropped at the end of the run)
        while True:
            if not self._held:
                if src is None:
                    src = p.marked()
                text = src.text
                idx = src.find_marker(self._trig, base)
                self._scanned += (len(text) if idx < 0 else idx) - base
                if idx < 0:
                    cut = len(text) if final else len(text) - self._holdback(text, base)
                    out.append(gate.text(text[base:cut]))
                    base = cut
                    break
                lead = self._lead
                has_lead = (bool(lead) and idx - len(lead) >= base and text.startswith(lead, idx - len(lead))
                            and src.plain(idx - len(lead), idx))
                start = idx - len(lead) if has_lead else idx
                out.append(gate.text(text[base:start]))
                base = start
                self._hold(idx)
                continue
            broken = False
            if not final:
                foreign = self._first_foreign(self._t0 + len(self._trig))
                end_at = self._next_end(src, len(p) if foreign < 0 else foreign)
                if end_at < 0:
                    if foreign < 0:
                        if self._live is not None:
                            self._advance_live(out, frags)
                        break  # the block goes on
                    broken = True  # a control token the block cannot hold comes first: it does not read
            if src is None:
                src = p.marked()
            text = src.text
            block = None
            if not broken:
                if not final:
                    self._scanned += end_at - self._t0  # the read reads the block
                try:
                    block, end = fmt._read_block(src, self._t0, self._tools, self._lit, skip=len(self._lead))
                except (NoMatch, RecursionError):
                    if not (final or self._end_mode != "literal"):
                        continue  # a later end may still close it
            live = self._live.calls if self._live is not None else []
            if block is None and live:
                # announced calls that do not read: they keep the text sent; the block's text is theirs
                cut = len(text) if final else foreign if broken else end_at
                self._taken += len(live)
                gate.after_call()
                base = cut
                self._held = False
                self._live = None
                continue
            if block is None:
                cut = self._t0 + len(self._trig)  # not a call: the trigger stays content
                out.append(gate.text(text[base:cut]))
                base = cut
                self._held = False
                self._live = None
                continue
            if final:
                self._scanned += end - self._t0
            kept: list[ToolCall] = []
            refused: list[str] = []
            for j, (call, cs, ce) in enumerate(block):
                index = self._taken + len(kept)
                if j < len(live):  # announced: the rest of its arguments (the rules applied to its name)
                    rest, decided = live[j].decided(call)
                    frags.append(rest)
                    kept.append(decided)
                elif self._policy.accepts(call.name, call.arguments, index):
                    kept.append(fmt.with_id(call, text[cs:ce], index))
                    frags.append(CallDelta(index, kept[-1].arguments, call.name, kept[-1].id))
                else:
                    refused.append(text[cs:ce])
            if not kept:  # well-formed, but the request does not allow it: content
                out.append(gate.text(text[base:end]))
            else:
                out.append(gate.call())
                out.extend(gate.text(r) for r in refused)
                gate.after_call()
                calls.extend(kept)
                self._taken += len(kept)
            base = end
            self._held = False
            self._live = None
        self._settle(base)
        return ToolStreamDelta("".join(out), tuple(calls), merge_call_deltas(frags))

    def _advance_live(self, out: list[str], frags: list[CallDelta]) -> None:
        """Read the held block as it arrives: what of its calls can go out now."""
        live = self._live
        assert live is not None
        before, announced = live.scanned, len(live.calls)
        got = live.advance(self._pending)
        self._scanned += live.scanned - before
        if got and not announced:
            out.append(self._gate.call())  # the block's first call: the text before it is settled
        frags.extend(got)

    def _settle(self, base: int) -> None:
        """Drop the settled text; the positions kept move with it."""
        if base <= 0:
            return
        self._pending.drop(base)
        if self._live is not None:
            self._live.shift(base)
        self._t0 -= base
        self._search = max(self._search - base, 0)
        self._depth_pos = max(self._depth_pos - base, 0)
        self._ctrl_pos = max(self._ctrl_pos - base, 0)
        self._end_pos = max(self._end_pos - base, 0)
        self._foreign = [f - base for f in self._foreign if f >= base]
        self._ends = [(a - base, b - base) for a, b in self._ends if a >= base]
