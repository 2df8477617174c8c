"""Inkling: a turn is typed blocks, and a tool call is a block of its own (vLLM 0.34's ``inkling`` name).

Every marker is a special token. The generation prompt ends with ``<|message_model|>``; each later block
opens with another, then an optional header (a call's function name), then the block's kind; a block
ends with ``<|end_message|>`` (the model may also end one with ``<|content_model_end_sampling|>``, the
token that ends the turn). As vLLM 0.34's renderer writes an assistant turn (``inkling_encoding.py``)::

    <|content_thinking|>...<|end_message|>
    <|message_model|><|content_text|>visible text<|end_message|>
    <|message_model|>NAME<|content_invoke_tool_json|>{"name":"NAME","args":{...}}<|end_message|>
    <|content_model_end_sampling|>

(the arguments with sorted keys and compact separators). The thinking ends at the first block that is
not thinking (``reasoning/inkling.py``): a call's ``<|content_invoke_tool_json|>`` is the first token of
the content, so the first call's ``<|message_model|>NAME`` lies in the thinking, ungated.

**Constraint** (after the thinking): ``required`` / ``named``: the calls, each
``<|content_invoke_tool_json|>{"name":"NAME","args":ARGS}<|end_message|>`` as the template writes it; a call
after the first opens with ``<|message_model|>NAME``, its header being its own name; the first may too, or
with ``<|end_message|><|message_model|>NAME`` (a model that opened a text block, whose kind token ended the
thinking, closes it and opens its call), or with ``NAME`` alone (no thinking: the header follows the
prompt's opener). Parallel calls off or a named function: one call. ``auto`` (when a strict tool or a strictness asks for a constraint):
free text, Inkling's framing tokens included, in which ``<|content_invoke_tool_json|>`` can only start a
valid call; ``none``: free text without it.

**Readers** (``inkling_stream.py``, one walk for the whole output and its stream): the content is the text
of the visible blocks (``<|content_text|>``, ``<|content_invoke_tool_text|>``, ``<|content_tool_error|>``,
text outside any block) with every framing token dropped; a header is dropped when a block kind follows
it, and is text when the block ends instead (vLLM's rule); a thinking block after the thinking ended is
dropped (the reasoning split is latched: it cannot become reasoning, and is not shown as content). A call
block's body is read as vLLM reads it, generously: one JSON object with ``name`` and its arguments under
``args``, ``arguments`` or ``parameters`` (an object, or a JSON string holding one; missing: ``{}``), keys
in any order, any whitespace. The body ends at the next framing token (its ``<|end_message|>`` /
``<|content_model_end_sampling|>`` is consumed) or at the end of the output. A body that does not read so,
or whose call the request's rules refuse, stays content (its text, without the framing token).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from json.decoder import scanstring
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from .args import JsonArgs
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, LEAD_WHITESPACE, ToolFormat
from .marked import MAX_ARGUMENT_DEPTH, MarkedText, json_depth_ok
from .policy import CallPolicy
from .request import ToolRequest, ToolSpec
from .results import ToolCallsResult
from .stream import ToolStream
from .syntax import Fmt, LiteralText, any_tokens, const, opt, or_, regex, seq, star, structural_tag, tag

__all__ = ["InklingFormat", "MESSAGE", "CALL", "THINKING", "VISIBLE", "ENDS", "ARGUMENT_KEYS"]

MESSAGE = "<|message_model|>"
CALL = "<|content_invoke_tool_json|>"
THINKING = "<|content_thinking|>"
VISIBLE = ("<|content_text|>", "<|content_invoke_tool_text|>", "<|content_tool_error|>")
"""Block kinds whose text is shown (vLLM 0.34 renders raw tool text and tool errors as visible text)."""
END = "<|end_message|>"
END_SAMPLING = "<|content_model_end_sampling|>"
ENDS = (END, END_SAMPLING)
ARGUMENT_KEYS = ("args", "arguments", "parameters")
"""Where a call's body may hold its arguments: the template's ``args``, and the two keys vLLM's parser
also looks under."""

_WS = " \t\r\n"


def _skip_ws(text: str, i: int) -> int:
    while i < len(text) and text[i] in _WS:
        i += 1
    return i


def _members(body: str) -> list[tuple[str, int, int]] | None:
    """The top-level members of the JSON object ``body`` (surrounding whitespace allowed) as (key, value
    start, value end), or None when ``body`` is not exactly one object."""
    decoder = json.JSONDecoder()
    i = _skip_ws(body, 0)
    if not body.startswith("{", i):
        return None
    out: list[tuple[str, int, int]] = []
    try:
        i = _skip_ws(body, i + 1)
        if body.startswith("}", i):
            i += 1
        else:
            while True:
                if not body.startswith('"', i):
                    return None
                key, i = scanstring(body, i + 1)
                i = _skip_ws(body, i)
                if not body.startswith(":", i):
                    return None
                start = _skip_ws(body, i + 1)
                _, end = decoder.raw_decode(body, start)
                out.append((key, start, end))
                i = _skip_ws(body, end)
                if body.startswith("}", i):
                    i += 1
                    break
                if not body.startswith(",", i):
                    return None
                i = _skip_ws(body, i + 1)
    except (ValueError, RecursionError):
        return None
    return out if _skip_ws(body, i) == len(body) else None


@dataclass(eq=False)
class InklingFormat(ToolFormat):
    """Inkling's typed blocks (see the module docstring)."""

    name: str = "inkling"
    aliases: tuple[str, ...] = ()
    description: str = ('Inkling: <|message_model|>NAME<|content_invoke_tool_json|>{"name":"NAME","args":{...}}'
                        "<|end_message|>, one block per call")
    markers: tuple[str, ...] = (MESSAGE, CALL, END, THINKING, *VISIBLE, END_SAMPLING)
    call_end: str = "}" + END
    """What ends a call as the template writes it (the body's closing brace, the block's end)."""

    _ARGS = JsonArgs()

    @property
    def required_markers(self) -> tuple[str, ...]:
        return (MESSAGE, CALL, END)

    def any_order_tools(self, request: ToolRequest) -> list[str]:
        return [t.name for t in request.function_tools if self._ARGS.any_order(t)]

    # -- constraint ------------------------------------------------------------------------------
    def _body(self, t: ToolSpec, lit: LiteralText, ws: int | None) -> Fmt:
        """A call's block from its kind token:
        ``<|content_invoke_tool_json|>{"name":"T","args":ARGS}<|end_message|>``."""
        head = '{"name":' + json.dumps(t.name, ensure_ascii=False) + ',"args":'
        return seq(lit(CALL), const(head), self._ARGS.build(t, lit, ws), lit(self.call_end))

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        missing = [m for m in self.required_markers if m not in lit.markers]
        if missing:
            raise ValueError(f"tool format {self.name!r}: the vocabulary {getattr(vocabulary, 'name', None)!r} "
                             f"has no control token {missing[0]!r}")
        tools = request.function_tools
        ws = max_whitespace
        if request.mode in ("required", "named"):
            # the first call's opening before its kind token may lie in the thinking (its header, or all of it when
            # the kind token ended the thinking); after a text block's kind ended the thinking, the block's end
            # and the call's opener come first; with no thinking, the header follows the prompt's opener
            first = or_(*[seq(opt(seq(opt(seq(opt(lit(END)), lit(MESSAGE))), const(t.name))), self._body(t, lit, ws))
                          for t in tools])
            if request.max_calls == 1:
                return structural_tag(seq(regex(LEAD_WHITESPACE), first))
            more = or_(*[seq(lit(MESSAGE), const(t.name), self._body(t, lit, ws)) for t in tools])
            return structural_tag(seq(regex(LEAD_WHITESPACE), first, star(more)))
        # free text is blocks: it keeps Inkling's framing tokens (and the stop token that ends the turn)
        framing = [m for m in self.markers if m != CALL]
        excludes = self._free_text_excludes(vocabulary, keep=[CALL, *framing])
        if request.mode == "none" or not tools:
            return structural_tag(any_tokens([CALL, *excludes]))
        tags = []
        for t in tools:
            body = self._body(t, lit, ws)["elements"]
            tags.append(tag(body[0], seq(*body[1:-1]), body[-1]))
        return structural_tag({
            "type": "token_triggered_tags",
            "trigger_tokens": [CALL],
            "tags": tags,
            "exclude_tokens": excludes,
            "at_least_one": False,
            "stop_after_first": not request.parallel,
        })

    # -- readers ---------------------------------------------------------------------------------
    def read_payload(self, src: MarkedText, start: int, end: int) -> tuple[str, str] | None:
        """The call of a block whose body is ``src.text[start:end]``: (name, arguments JSON text), or None
        when the body is not a call (see the module docstring). The arguments are the object's text as
        written; a JSON string holding an object is decoded and written back (``json.dumps``)."""
        if not src.plain(start, end):
            return None
        body = src.text[start:end]
        if not json_depth_ok(body, _skip_ws(body, 0), limit=MAX_ARGUMENT_DEPTH + 1):
            return None
        members = _members(body)
        if members is None:
            return None
        keys = [k for k, _, _ in members]
        arg_keys = [k for k in keys if k in ARGUMENT_KEYS]
        if len(set(keys)) != len(keys) or len(arg_keys) > 1 or set(keys) - {"name", *arg_keys}:
            return None
        values = {k: (a, b) for k, a, b in members}
        if "name" not in values:
            return None
        name = json.loads(body[slice(*values["name"])])
        if not isinstance(name, str):
            return None
        if not arg_keys:
            return name, "{}"
        a, b = values[arg_keys[0]]
        if body[a] == "{":
            return name, body[a:b]
        if body[a] != '"':
            return None
        try:
            args = json.loads(json.loads(body[a:b]))
        except (ValueError, RecursionError):
            return None
        return (name, json.dumps(args, ensure_ascii=False)) if isinstance(args, dict) else None

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        from .inkling_stream import InklingStream  # the stream reads this module's definitions

        stream = InklingStream(self, request, policy or CallPolicy(request), src.special_tokens)
        d1 = stream.feed(src.pieces())
        d2 = stream.finish()
        return ToolCallsResult(d1.content + d2.content or None, d1.calls + d2.calls)

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        from .inkling_stream import InklingStream

        return InklingStream(self, request, policy, frozenset(vocabulary.special_tokens),
                             stream_arguments=stream_arguments)
