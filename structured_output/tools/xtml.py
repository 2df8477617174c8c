"""Kimi K3's XTML channels (``kimi_k3``): the calls sit in a ``tools`` channel after the ``response`` channel.

K3's encoder (``encoding_k3.py`` of the checkpoint; K3 ships no Jinja template) writes an assistant turn,
after its thinking, as::

    <|open|>response<|sep|>CONTENT<|close|>response<|sep|>
    <|open|>tools<|sep|>
      <|open|>call tool="NAME" index="1"<|sep|>ARGUMENTS<|close|>call<|sep|>   (index from 1, nothing between calls)
    <|close|>tools<|sep|>
    <|close|>message<|sep|>                                                    (then <|end_of_msg|>, the stop token)

with the ``tools`` channel only when there are calls and the arguments as :mod:`.xtml_args` says. Every
marker is three tokens: the control token ``<|open|>`` or ``<|close|>``, the tag's name as ordinary text,
the control token ``<|sep|>``; attributes are text too. The generation prefix ends with
``<|open|>think<|sep|>`` (thinking) or ``<|open|>response<|sep|>`` (thinking off): the response channel's
opening is then not in the output.

:class:`XtmlFormat` is the calls (a :class:`XtmlCalls`, the :class:`~.call_format.CallFormat` whose section is the
``tools`` channel) plus the channel *wrappers* that are syntax, not content (``<|open|>response<|sep|>``,
``<|close|>response<|sep|>``, ``<|close|>message<|sep|>``):

- constraint (after the thinking): the response channel's opening (optional: the prefix may hold it), then
  ``required`` / ``named``: at most some whitespace as the response (thinkgate's rule: nothing before forced
  calls), its close, the ``tools`` channel with one call (``named``, parallel calls off) or more, and the
  message's close (optional); ``auto`` (when strictness asks) and ``none``: free text (no control token),
  then optionally the response's close, the ``tools`` channel (``auto`` only; one call when parallel calls
  are off) and the message's close;
- reader: every wrapper written with its control tokens outside a ``tools`` channel (between its opening
  and its closing, or the end of the output) is cut out (:class:`Channels`); in what is left the calls are
  read where they read and the rest is content, as :class:`~.call_format.CallFormat` reads (so text outside the
  response channel is content too: vLLM 0.34 drops it). The streaming reader makes the same cut as the ids
  arrive (:mod:`.xtml_stream`);
- ids: K3 writes no call id (its ``index`` is a position; the encoder matches tool results by the id the
  client sends back), so calls get the default id, as vLLM's own ``kimi_k3`` parser gives them.

The call's opening is read by its attributes, as vLLM reads it: in any order, with any whitespace, ``index``
optional (:class:`XtmlCalls`); the grammar writes the encoder's order.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from .args import NoMatch
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, LEAD_WHITESPACE, CallFormat, ToolFormat
from .marked import MarkedText
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCallsResult
from .stream import ToolStream
from .syntax import LiteralText, any_tokens, opt, regex, seq, structural_tag
from .tool_table import ToolTable
from .xtml_args import read_attributes

__all__ = ["XtmlFormat", "XtmlCalls", "Channels"]


@dataclass(eq=False)
class XtmlCalls(CallFormat):
    """The calls of the ``tools`` channel: a :class:`~.call_format.CallFormat` whose call opening is an element
    with attributes (``call_begin`` ``<|open|>call tool="{name}" index="{index}"<|sep|>``). The grammar writes
    it as given; the reader takes its attributes in any order, any whitespace between them, ``index``
    optional, ``tool`` unescaped (``&quot;``, ``&amp;``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        pre = self.call_begin.split("{name}")[0]
        i = pre.rfind(" ")
        if i < 0 or not pre.endswith('="'):
            raise ValueError(f"format {self.name!r}: call_begin must name the tool in an attribute "
                             f"(' tool=\"{{name}}\"')")
        self._head = pre[:i]  # <|open|>call
        self._attr = pre[i + 1:-2]  # tool
        self._sep = LiteralText(self.markers).split(self.call_begin)[-1][1]  # the token that ends the opening

    def _names_at(self, src: MarkedText, pos: int, tools: ToolTable, lit: LiteralText,
                  skip: int) -> tuple[int, list[str], str]:
        """The opening at ``pos`` read by its attributes: (where the tool's name starts, [that name] when a call
        may name it, "": the attributes after the name are read by :meth:`_after_name`); ``NoMatch`` when it is
        no opening, has no tool, or its ``<|sep|>`` has not come yet."""
        p = self._expect(src, pos, self._head[skip:], lit)
        end = src.find_marker(self._sep, p)
        if end < 0 or not src.plain(p, end):
            raise NoMatch("expected a call's attributes")
        attrs, starts = read_attributes(src.text, p, end)
        name = attrs.get(self._attr)
        if name is None:
            raise NoMatch("a call without a tool")
        return starts[self._attr], [name] if tools.knows(name) else [], ""

    def _after_name(self, src: MarkedText, p: int, name: str, lit: LiteralText, post: str = "") -> int:
        end = src.find_marker(self._sep, p)
        if end < 0:
            raise NoMatch("expected the end of a call's opening")
        return end + len(self._sep)


@dataclass(frozen=True)
class Channels:
    """The channel markers the readers cut out (``drop``), and the channel that holds the calls (``calls``:
    its opening and closing), each a literal whose markers are control tokens (see the module docstring).

    The rule, the same for the whole reader (:meth:`cuts`) and the stream (``xtml_stream.ChannelCut``): at
    each control token that starts one of the literals, outside the calls' channel, a ``drop`` literal
    written whole there is cut out and the channel's opening written whole there enters the channel; inside
    it, only its closing is looked for (and leaves it). A literal matches where its markers are the control
    tokens and its words the text between them, exactly."""

    drop: tuple[str, ...]
    calls: tuple[str, str]
    markers: tuple[str, ...]
    parts: dict[str, tuple[tuple[bool, str], ...]] = field(init=False)
    """Each literal as (is a marker, text) pieces."""

    def __post_init__(self) -> None:
        lit = LiteralText(self.markers)
        parts = {s: tuple(lit.split(s)) for s in (*self.drop, *self.calls)}
        for s, ps in parts.items():
            if not ps or not ps[0][0]:
                raise ValueError(f"channel marker {s!r} must start with a control token")
        object.__setattr__(self, "parts", parts)

    def candidates(self, inside: bool) -> tuple[str, ...]:
        """The literals looked for: the channel's closing inside it, else the drops and its opening."""
        return (self.calls[1],) if inside else (*self.drop, self.calls[0])

    def cuts(self, src: MarkedText) -> list[tuple[int, int]]:
        """The spans of ``src`` cut out by the rule. O(the text)."""
        firsts = sorted({p[0][1] for p in self.parts.values()}, key=len, reverse=True)
        out: list[tuple[int, int]] = []
        inside = False
        pos = 0
        nxt = {m: src.find_marker(m, 0) for m in firsts}
        while True:
            live = [(i, m) for m, i in nxt.items() if i >= 0]
            if not live:
                return out
            at, first = min(live)
            hit = None
            for lit_text in self.candidates(inside):
                if self.parts[lit_text][0][1] != first:
                    continue
                end = self._match(src, at, lit_text)
                if end >= 0:
                    hit = (lit_text, end)
                    break
            pos = at + len(first) if hit is None else hit[1]
            if hit is not None:
                if hit[0] in self.drop:
                    out.append((at, hit[1]))
                else:
                    inside = hit[0] == self.calls[0]
            for m in firsts:
                if nxt[m] >= 0 and nxt[m] < pos:
                    nxt[m] = src.find_marker(m, pos)

    def _match(self, src: MarkedText, pos: int, literal: str) -> int:
        """The end of ``literal`` at ``pos`` (exactly: markers at control tokens, words as they are), or -1."""
        for is_marker, piece in self.parts[literal]:
            if is_marker:
                if not src.marker_at(pos, piece):
                    return -1
            elif not src.text.startswith(piece, pos) or not src.plain(pos, pos + len(piece)):
                return -1
            pos += len(piece)
        return pos


@dataclass(eq=False)
class XtmlFormat(ToolFormat):
    """K3's channels around its calls (see the module docstring): ``calls`` reads and constrains the calls,
    ``answer`` is the response channel's (opening, closing), ``trailer`` the message's closing."""

    name: str
    calls: XtmlCalls
    answer: tuple[str, str]
    trailer: str
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if not self.calls.section:
            raise ValueError(f"format {self.name!r}: the calls need a channel (their section)")
        self.markers = self.calls.markers
        self.channels = Channels((*self.answer, self.trailer), self.calls.section, self.markers)

    @property
    def required_markers(self) -> tuple[str, ...]:
        return self.calls.required_markers

    def any_order_tools(self, request: ToolRequest) -> list[str]:
        return self.calls.any_order_tools(request)

    # -- constraint ------------------------------------------------------------------------------
    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        calls = self.calls
        lit = calls._lit(vocabulary)
        missing = [m for m in self.required_markers if m not in lit.markers]
        if missing:
            raise ValueError(f"tool format {self.name!r}: the vocabulary {getattr(vocabulary, 'name', None)!r} has no "
                             f"control token {missing[0]!r}")
        opening, close, trailer = opt(lit(self.answer[0])), lit(self.answer[1]), opt(lit(self.trailer))
        tools = request.function_tools
        if request.mode in ("required", "named"):
            block = calls._section(calls._calls(tools, lit, max_whitespace, one=request.max_calls == 1), lit)
            return structural_tag(seq(opening, regex(LEAD_WHITESPACE), close, block, trailer))
        text = any_tokens(self._free_text_excludes(vocabulary, keep=()))
        if request.mode == "none" or not tools:
            return structural_tag(seq(opening, text, opt(seq(close, trailer))))
        block = calls._section(calls._calls(tools, lit, max_whitespace, one=not request.parallel), lit)
        return structural_tag(seq(opening, text, opt(seq(close, opt(block), trailer))))

    # -- readers ---------------------------------------------------------------------------------
    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        return self.calls.read_marked(src.without(self.channels.cuts(src)), request, policy)

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        from .xtml_stream import XtmlStream  # xtml_stream imports this module's Channels
        inner = self.calls.new_stream(request, policy, vocabulary, stream_arguments=stream_arguments)
        return XtmlStream(self.channels, inner)
