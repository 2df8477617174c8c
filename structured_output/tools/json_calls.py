"""No model syntax: the calls are a JSON array, constrained by a JSON schema (vLLM's way for required /
named tool choice)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from ..constraints import Constraint
from .engine import DEFAULT_TOOL_MAX_WHITESPACE, ToolFormat
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

    def read(self, text: str, request: ToolRequest) -> ToolCallsResult:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return ToolCallsResult(text.strip() or None, ())
        names = {t.name for t in request.all_tools}
        if not (isinstance(obj, list) and all(isinstance(c, dict) and c.get("name") in names
                                              and isinstance(c.get("parameters"), dict) for c in obj)):
            return ToolCallsResult(text.strip() or None, ())
        return ToolCallsResult(None, tuple(ToolCall(c["name"], json.dumps(c["parameters"], ensure_ascii=False))
                                           for c in obj))

