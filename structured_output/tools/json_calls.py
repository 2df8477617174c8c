"""No model syntax: the calls are a JSON array, constrained by a JSON schema (vLLM's way for required /
named tool choice)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from ..constraints import Constraint
from .engine import DEFAULT_TOOL_MAX_WHITESPACE, ToolFormat
from .marked import MAX_ARGUMENT_DEPTH, MarkedText, json_depth_ok
from .policy import CallPolicy
from .request import ToolRequest, tool_calls_json_schema
from .results import ToolCall, ToolCallsResult

__all__ = ["JsonCallsFormat"]


@dataclass(eq=False)
class JsonCallsFormat(ToolFormat):
    """No model syntax: the output is ``[{"name": ..., "parameters": {...}}, ...]`` (a JSON schema
    constraint; vLLM's way for required / named). Auto and none build no constraint (a JSON schema
    cannot also allow free text)."""

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

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        """The whole output is the calls or it is content: one JSON document cannot be split, so a call
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
        calls = [ToolCall(c["name"], json.dumps(c["parameters"], ensure_ascii=False)) for c in obj]
        if not all(policy.accepts(c.name, c.arguments, i) for i, c in enumerate(calls)):
            return as_content
        return ToolCallsResult(None, tuple(calls))
