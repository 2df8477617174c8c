"""No model syntax: the calls are a JSON array, constrained by a JSON schema (vLLM's way for required /
named tool choice)."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any, ClassVar

from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.constraints import Constraint
from .args import _DECODER, _skip_ws
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, ToolFormat
from .marked import MAX_ARGUMENT_DEPTH, MarkedText, json_depth_ok
from .policy import CallPolicy
from .request import ToolRequest, tool_calls_json_schema
from .json_calls_stream import JsonCallsStream
from .results import ToolCall, ToolCallsResult
from .stream import HeldStream, ToolStream

__all__ = ["JsonCallsFormat", "parameter_spans"]


def parameter_spans(text: str) -> list[tuple[int, int]]:
    """For a JSON array of objects (``text`` known to parse), each object's ``"parameters"`` value as
    (start, end) in ``text`` (the last one where an object writes the key twice, as ``json.loads`` keeps;
    (0, 0) where it has none). One walk of the two outer levels; values read by the decoder."""
    skip = functools.partial(_skip_ws, text)
    spans: list[tuple[int, int]] = []
    i = skip(skip(0) + 1)  # after "["
    if text[i] == "]":
        return spans
    while True:
        i = skip(i + 1)  # after "{"
        span = (0, 0)
        while text[i] != "}":
            key, i = _DECODER.raw_decode(text, i)
            i = skip(skip(i) + 1)  # after ":"
            _, end = _DECODER.raw_decode(text, i)
            if key == "parameters":
                span = (i, end)
            i = skip(end)
            if text[i] == ",":
                i = skip(i + 1)
        spans.append(span)
        i = skip(i + 1)  # after "}"
        if text[i] != ",":
            return spans
        i = skip(i + 1)


@dataclass(eq=False)
class JsonCallsFormat(ToolFormat):
    """No model syntax: the output is ``[{"name": ..., "parameters": {...}}, ...]`` (a JSON schema
    constraint; vLLM's way for required / named). Auto and none build no constraint (a JSON schema
    cannot also allow free text)."""

    constraint_kind: ClassVar[str] = "JSON schema"
    name: str = "json"
    aliases: tuple[str, ...] = ("openai_json",)
    description: str = "a JSON array of {name, parameters} (a JSON schema constraint)"
    markers: tuple[str, ...] = ()

    def constraint(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                   max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> Constraint | None:
        if request.mode not in ("required", "named"):
            return None
        self._check_builtin(request)
        return Constraint.json_schema(tool_calls_json_schema(request), any_whitespace=True,
                                      max_whitespace=max_whitespace, strict=True)

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        return None

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        """With ``stream_arguments`` and a request this format constrains (required / named), the calls go
        out as the document is written (:class:`~.json_calls_stream.JsonCallsStream`); else the output is
        held and read whole at ``finish`` (an auto request gets no constraint from this format, so its
        output may be any text)."""
        if stream_arguments and request.mode in ("required", "named"):
            return JsonCallsStream(self, request, policy, vocabulary)
        return HeldStream(self, request, policy, vocabulary)

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        """The whole output is the calls or it is content (each call's arguments: its parameters object's
        text as written): one JSON document cannot be split, so a call
        the policy refuses (a tool not allowed, more calls than allowed, arguments against a strict
        schema) leaves all of it content. There are no markers; with token ids, a control token
        anywhere makes the output content."""
        policy = policy or CallPolicy(request)
        text = src.text
        as_content = ToolCallsResult(text.strip() or None, ())
        # the arguments sit two levels down (the array, a call object)
        if not src.plain(0, len(text)) or not json_depth_ok(text, limit=MAX_ARGUMENT_DEPTH + 2):
            return as_content
        try:
            obj = json.loads(text)
        except (json.JSONDecodeError, RecursionError):
            return as_content
        if not (isinstance(obj, list) and all(isinstance(c, dict) and isinstance(c.get("name"), str)
                                              and isinstance(c.get("parameters"), dict) for c in obj)):
            return as_content
        # each call's arguments: its parameters object's text as written (what the stream sends as it comes)
        calls = [ToolCall(c["name"], text[a:b]) for c, (a, b) in zip(obj, parameter_spans(text))]
        if not all(policy.accepts(c.name, c.arguments, i) for i, c in enumerate(calls)):
            return as_content
        return ToolCallsResult(None, tuple(calls))
