"""What a tool reader returns."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolCall", "ToolCallsResult", "new_call_id"]


def new_call_id() -> str:
    """``chatcmpl-tool-<32 hex digits>``, as vLLM names tool calls."""
    return f"chatcmpl-tool-{uuid.uuid4().hex}"


@dataclass(frozen=True)
class ToolCall:
    """One call: the function name, its arguments as a JSON object text, and an id."""

    name: str
    arguments: str
    id: str = field(default_factory=new_call_id)

    def to_openai(self) -> dict[str, Any]:
        """The Chat Completions ``tool_calls`` item."""
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class ToolCallsResult:
    """A read output: ``content`` (the text outside the calls, stripped; None when empty) and the
    calls in order."""

    content: str | None
    calls: tuple[ToolCall, ...]

    @property
    def tools_called(self) -> bool:
        return bool(self.calls)
