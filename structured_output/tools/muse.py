"""Muse (Spark and the Glimmer profile): tool calls are messages of their own, addressed to the tool, whose body
is an ATEM block; like harmony (``harmony.py``), the format is a class of its own.

The messages and their recipients are ``reasoning/muse_channels.py``'s (one definition for both readers);
a call, as Muse's chat template writes it (the prompt ends with ``<|start|>assistant``)::

     to=self<|message|>I should look it up.<|eom|><|start|>assistant to=weather.get<|message|><atem:function_calls>
    <atem:invoke name="weather.get">
    <atem:parameter name="city">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls><|eom|><|start|>assistant to=math.add<|message|><atem:function_calls>
    ...</atem:function_calls><|eot|>

Parallel calls are one message each, joined by ``<|eom|><|start|>assistant``; ``<|eot|>`` (a stop token) ends
the turn. A parameter's value is written as it is when it is a string, as JSON otherwise (the template's
instruction: "String and scalar parameters should be specified as is, while lists and objects should use
JSON format"); the ``<atem:...>`` tags are plain text, the four message markers control tokens.

The constraint covers the whole output (``covers_reasoning``: the recipient that names the tool is in a
header sampled before any reasoning end): any reasoning messages (Spark: and ``commentary`` updates), then,
for required / named, the calls (one when parallel calls are off or a function is named); for auto, the calls
or an answer (``to=user``); for none, an answer. The constraint writes ``to=NAME`` and ``name="NAME"`` with the
tool's own name.

The reader reads what models write: every message whose recipient is a tool (whatever tool it names: the
``invoke`` tag's name is the call's, the recipient only routes) is read for ``<atem:function_calls>`` blocks
(or bare ``<atem:invoke>`` elements), their whitespace loose; an invoke name written twice, ``get_weather.get_weather``
for a declared ``get_weather`` (what the model writes for a tool without a namespace), is that tool. Content is
the bodies of the content and answer messages, and a tool message's text that does not read as calls; the
reasoning bodies are the reasoning parser's. An unframed output (no ``<|message|>``) is read as one tool body:
its blocks are calls, the rest content. Values are typed by the tool's schema (``xml_values.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thinkgate.reasoning.muse_channels import (ANSWER, CONTENT, EOM, MESSAGE, SPARK, START, TOOL, Recipients,
                                               read_messages)
from thinkgate.reasoning.vocabulary import Vocabulary

from .args import NoMatch, XmlArgs
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, CallFormat, ToolFormat, join_content
from .marked import MarkedText
from .policy import CallPolicy
from .request import ToolRequest, ToolSpec
from .results import ToolCall, ToolCallsResult
from .stream import ToolStream
from .syntax import Fmt, LiteralText, any_tokens, const, opt, or_, seq, star, structural_tag
from .tool_table import ToolTable

__all__ = ["MuseFormat", "read_tool_body"]

_ARGS = XmlArgs('<atem:parameter name="{key}">', "</atem:parameter>\n", "</atem:parameter>", values="json")
_BLOCK_OPEN = "<atem:function_calls>"
_INVOKE_OPEN = "<atem:invoke"
# the ATEM block, and a bare invoke (models sometimes leave the block out), as call syntaxes of plain text
_BLOCK = CallFormat(name="muse_atem_block", section=(_BLOCK_OPEN + "\n", "</atem:function_calls>"),
                    call_begin='<atem:invoke name="{name}">\n', args=_ARGS, call_end="</atem:invoke>\n",
                    text_trigger=_BLOCK_OPEN)
_BARE = CallFormat(name="muse_atem_invoke", call_begin='<atem:invoke name="{name}">\n', args=_ARGS,
                   call_end="</atem:invoke>", text_trigger=_INVOKE_OPEN)
_NO_MARKERS = LiteralText(())
_NEXT = EOM + START + "assistant"


class _Tools(ToolTable):
    """The request's tools, each also under its name written twice (``get_weather.get_weather``)."""

    def __init__(self, request: ToolRequest) -> None:
        super().__init__(request)
        self._own = frozenset(self)
        for name, spec in list(self.items()):
            self.setdefault(f"{name}.{name}", spec)
        self._by_length = sorted(self, key=len, reverse=True)

    def declared(self, written: str) -> str:
        """The tool a call's written name means: itself, or ``NAME`` for ``NAME.NAME``."""
        if written in self._own:
            return written
        head, dot, tail = written.partition(".")
        return head if dot and head == tail and head in self._own else written


def read_tool_body(src: MarkedText, start: int, end: int, tools: _Tools, policy: CallPolicy,
                   taken: int) -> tuple[list[str], list[ToolCall]]:
    """A tool message's body ``src.text[start:end]``: (its content parts, its calls). Its ATEM blocks (or bare
    invokes) whose calls the rules accept are calls; everything else is content. ``taken``: the calls read
    before this body (the request's limit counts them)."""
    text = src.text
    content: list[str] = []
    calls: list[ToolCall] = []
    pos = scan = start
    while scan < end:
        idx = text.find("<atem:", scan, end)
        if idx < 0:
            break
        block: list[tuple[ToolCall, int, int]] | None = None
        for fmt in (_BLOCK, _BARE):
            trigger = fmt._reader_trigger
            if not text.startswith(trigger, idx):
                continue
            try:
                found, block_end = fmt._read_block(src, idx, tools, _NO_MARKERS, 0)
            except (NoMatch, RecursionError):
                continue
            if block_end <= end:
                block = found
                break
        if block is None:
            scan = idx + 1
            continue
        kept: list[ToolCall] = []
        refused: list[str] = []
        for call, cs, ce in block:
            name = tools.declared(call.name)
            if policy.accepts(name, call.arguments, taken + len(calls) + len(kept)):
                kept.append(ToolCall(name, call.arguments))
            else:
                refused.append(text[cs:ce])
        if not kept:
            scan = block_end
            continue
        content.append(text[pos:idx])
        content.extend(refused)
        calls.extend(kept)
        pos = scan = block_end
    content.append(text[pos:end])
    return content, calls


@dataclass(eq=False)
class MuseFormat(ToolFormat):
    """Muse's call messages (see the module docstring); ``recipients`` is the family's reading of them."""

    name: str = "muse"
    aliases: tuple[str, ...] = ()
    recipients: Recipients = SPARK
    description: str = ("Muse: a message to=NAME<|message|> holding <atem:function_calls><atem:invoke name=NAME>"
                        "<atem:parameter name=K>V</atem:parameter>")
    markers: tuple[str, ...] = ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>")
    covers_reasoning: bool = True
    pre_recipients: tuple[str, ...] = field(default=("self", "commentary"))
    """What the constraint lets the model address before its calls or answer (reasoning, updates)."""

    def any_order_tools(self, request: ToolRequest) -> list[str]:
        return [t.name for t in request.function_tools if _ARGS.any_order(t)]

    @property
    def required_markers(self) -> tuple[str, ...]:
        """None: a Muse checkpoint's tokenizer need not have its markers as single tokens (each is matched as
        the control token where the vocabulary has it, else as its text)."""
        return ()

    # -- constraint ------------------------------------------------------------------------------
    def _text(self, vocabulary: Vocabulary | None) -> Fmt:
        """A body's free text: no control token but the stop tokens (with a vocabulary whose markers are text:
        no marker's text)."""
        if vocabulary is not None and EOM not in vocabulary.special_tokens:
            return {"type": "any_text", "excludes": list(self.markers)}
        return any_tokens(self._free_text_excludes(vocabulary, keep=()))

    def _call(self, t: ToolSpec, lit: LiteralText, ws: int | None) -> Fmt:
        return seq(const(f" to={t.name}"), lit(MESSAGE), const(f'{_BLOCK_OPEN}\n<atem:invoke name="{t.name}">\n'),
                   _ARGS.build(t, lit, ws), const("</atem:invoke>\n</atem:function_calls>"))

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        text = self._text(vocabulary)
        nxt = lit(_NEXT)
        pre = seq(or_(*[const(f" to={r}") for r in self.pre_recipients]), lit(MESSAGE), text, nxt)
        head = seq(opt(lit(START + "assistant")), star(pre))
        answer = seq(const(" to=user"), lit(MESSAGE), text)
        tools = request.function_tools
        if request.mode == "none" or not tools:
            return structural_tag(seq(head, answer))
        one = or_(*[self._call(t, lit, max_whitespace) for t in tools])
        calls = one if request.max_calls == 1 else seq(one, star(seq(nxt, one)))
        if request.mode in ("required", "named"):
            return structural_tag(seq(head, calls))
        return structural_tag(seq(head, or_(answer, calls)))

    # -- reader ----------------------------------------------------------------------------------
    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        policy = policy or CallPolicy(request)
        tools = _Tools(request)
        text = src.text
        messages, framed = read_messages(text, self.recipients, _finder(src))
        if not framed:
            content, calls = read_tool_body(src, 0, len(text), tools, policy, 0)
            return ToolCallsResult(join_content(content), tuple(calls))
        content = []
        calls: list[ToolCall] = []
        for m in messages:
            if m.kind in (CONTENT, ANSWER):
                content.append(text[m.start:m.end])
            elif m.kind == TOOL:
                c, found = read_tool_body(src, m.start, m.end, tools, policy, len(calls))
                content.extend(c)
                calls.extend(found)
        return ToolCallsResult(join_content(content), tuple(calls))

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        from .muse_stream import MuseStream
        return MuseStream(self, request, policy, vocabulary)


def _finder(src: MarkedText) -> Callable[[str, int], int]:
    return lambda marker, start: src.find_marker(marker, start)

