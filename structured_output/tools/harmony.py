"""OpenAI harmony (gpt-oss): tool calls are messages of their own, so the format is its own class
(the call syntax of the format engine does not fit it)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from .args import JsonArgs
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, ToolFormat, join_content
from .harmony_stream import HarmonyStream
from .marked import MarkedText, json_depth_ok
from .policy import CallPolicy
from .request import ToolRequest, ToolSpec
from .results import ToolCall, ToolCallsResult
from .stream import ToolStream
from .syntax import Fmt, LiteralText, any_tokens, const, opt, or_, seq, star, structural_tag

__all__ = ["HarmonyFormat"]


@dataclass(eq=False)
class HarmonyFormat(ToolFormat):
    """OpenAI harmony (gpt-oss): the whole output is messages (see ``reasoning/gptoss.py``)::

        <|channel|>analysis<|message|>...<|end|>
        <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>
        <|start|>assistant to=functions.NAME<|channel|>commentary json<|message|>{...}<|call|>

    (the second is the harmony guide's call, the third the gpt-oss chat template's; every header form
    of a call is accepted, see :meth:`_call_header`).

    The constraint covers the whole output, analysis included (the call's header holds the function
    name, and harmony's header is sampled before any reasoning end): it is marked
    ``covers_reasoning``, so the manager applies it from the first token. ``<|call|>`` and
    ``<|return|>`` are stop tokens, so the grammar ends where they come. Required / named: any
    analysis messages, then exactly one call (a call ends the turn in harmony, so parallel calls
    cannot occur). Auto: analysis messages, then a call or a final message. Analysis messages and
    commentary preambles (no recipient) may come first; the reader returns the preambles and the
    final message as content (joined with newlines, as the reasoning parser does), analysis as
    neither. Builtin tools (``browser.search`` ...) are called with ``to=NAME code``."""

    name: str = "openai"
    aliases: tuple[str, ...] = ("harmony", "gpt_oss", "openai_gptoss")
    covers_reasoning: bool = True
    description: str = "OpenAI gpt-oss harmony messages, to=functions.NAME"
    markers: tuple[str, ...] = ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                                "<|return|>", "<|call|>")
    supports_builtin_tools: bool = True
    START: str = "<|start|>assistant"

    _ARGS = JsonArgs()

    def any_order_tools(self, request: ToolRequest) -> list[str]:
        return [t.name for t in request.tools if not t.builtin and self._ARGS.any_order(t)]

    def _call_header(self, t: ToolSpec, lit: LiteralText) -> Fmt:
        """A call's header after ``<|start|>assistant`` up to ``<|message|>``, in every form gpt-oss
        writes: the recipient in the role (the chat template: `` to=functions.N<|channel|>commentary
        json``) or after the channel (the harmony guide: ``<|channel|>commentary to=functions.N
        <|constrain|>json``); channel ``commentary`` or ``analysis`` (the model calls tools from both);
        the content type as ``<|constrain|>json`` (with or without a space before it), `` json``, or
        left out. Builtin tools are called ``to=NAME`` with ``code`` for ``json``."""
        recipient = const(f" to={t.name}" if t.builtin else f" to=functions.{t.name}")
        kind = "code" if t.builtin else "json"
        channel = seq(lit("<|channel|>"), or_(const("commentary"), const("analysis")))
        hint = or_(const(" " + kind), seq(opt(const(" ")), lit("<|constrain|>"), const(kind)), const(""))
        return seq(or_(seq(recipient, channel), seq(channel, recipient)), hint, lit("<|message|>"))

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        body_ex = self._free_text_excludes(vocabulary, keep=())
        text = any_tokens(body_ex)
        # messages that may come before the call or the final answer: analysis, and commentary
        # preambles (commentary without a recipient, shown to the user)
        analysis = seq(lit("<|channel|>"), or_(const("analysis"), const("commentary")), lit("<|message|>"), text,
                       lit("<|end|>" + self.START))
        calls = []
        for t in request.tools:
            args = self._ARGS.build(t, lit, max_whitespace)
            calls.append(seq(self._call_header(t, lit), args))
        head = opt(lit(self.START))
        if request.mode in ("required", "named"):
            return structural_tag(seq(head, star(analysis), or_(*calls)))
        final = seq(lit("<|channel|>final<|message|>"), text)
        if request.mode == "none" or not request.tools:
            return structural_tag(seq(head, star(analysis), final))
        return structural_tag(seq(head, star(analysis), or_(final, *calls)))

    _RECIPIENT = re.compile(r"to=(\S+?)(?=<\||\s|$)")
    _ENDS = ("<|end|>", "<|call|>", "<|return|>")

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        """Messages are read at their control tokens: a header up to ``<|message|>``, a body up to
        ``<|end|>`` / ``<|call|>`` / ``<|return|>``. A call needs a recipient in a header that has a
        ``<|channel|>``; with token ids, text that only spells these tokens (say, inside an analysis
        message) is part of the message it sits in."""
        policy = policy or CallPolicy(request, builtin=True)
        text = src.text
        content: list[str] = []
        calls: list[ToolCall] = []
        pos = 0
        while pos < len(text):
            h = pos
            if src.marker_at(h, "<|start|>") and text.startswith("assistant", h + len("<|start|>")):
                h += len("<|start|>assistant")
            msg = src.find_marker("<|message|>", h)
            if msg < 0:
                content.append(text[pos:])
                break
            header, body_start = text[h:msg], msg + len("<|message|>")
            ends = [(src.find_marker(e, body_start), e) for e in self._ENDS]
            ends = [(i, e) for i, e in ends if i >= 0]
            body_end, marker = min(ends) if ends else (len(text), "")
            body = text[body_start:body_end]
            channel = src.find_marker("<|channel|>", h, msg)
            r = self._RECIPIENT.search(header)
            if r is not None and channel >= 0 and src.plain(h + r.start(), h + r.end()):
                target = r.group(1)
                name = target[len("functions."):] if target.startswith("functions.") else target
                if self._is_call(src, body_start, body_end, name, policy, len(calls)):
                    calls.append(ToolCall(name, body.strip()))
                else:
                    content.append(body)
            elif "final" in header or "commentary" in header:
                content.append(body)  # the answer, or a preamble shown to the user
            pos = body_end + len(marker)
        return ToolCallsResult(join_content(["\n".join(content)]), tuple(calls))

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        return HarmonyStream(self, request, policy, vocabulary, stream_arguments=stream_arguments)

    @staticmethod
    def _is_call(src: MarkedText, start: int, end: int, name: str, policy: CallPolicy, taken: int) -> bool:
        if policy.tool(name) is None or policy.full(taken) or not src.plain(start, end):
            return False
        body = src.text[start:end]
        if not json_depth_ok(body):
            return False
        try:
            obj = json.loads(body)
        except (json.JSONDecodeError, RecursionError):
            return False
        return isinstance(obj, dict) and policy.arguments_ok(name, body)
