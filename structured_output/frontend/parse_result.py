"""What the front-end :class:`~.parser.Parser` returns: the OpenAI message, stream deltas, finish_reason, usage.

- :class:`ParseResult`: a whole output as a Chat Completions choice: ``message`` (``role``, ``content``,
  ``reasoning``, ``tool_calls``), ``finish_reason`` and ``usage``.
- :func:`chunk_delta`: one streamed chunk's ``delta`` (None when it says nothing).
- :class:`StreamEnd`: the last chunk of a stream: what was held back, the finish_reason and the usage.
- :func:`finish_reason_for`: ``"tool_calls"`` when the message has calls and the engine stopped normally;
  any other reason (``"length"`` when max_tokens cut the output, ``"abort"`` ...) is kept, so a client
  sees that an output cut short is incomplete.

The extension field ``thinkgate_constraint`` (:data:`CONSTRAINT_FIELD`): when the caller passes the request's
constraint report (``StructuredOutputManager.constraint_report``, :mod:`..step.report`), the choice
(:meth:`ParseResult.to_openai`) and the stream's last chunk (:meth:`StreamEnd.to_openai`) carry it as
``{"outcome", "cause", "checked_keywords", "reservation"}``: how the output was constrained. Without one
the field is absent (a client of plain OpenAI sees nothing new).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..step.report import ConstraintReport
from ..tools.call_delta import CallDelta
from ..tools.results import ToolCall

__all__ = ["ParseResult", "StreamEnd", "chunk_delta", "finish_reason_for", "usage_dict", "CONSTRAINT_FIELD"]

CONSTRAINT_FIELD = "thinkgate_constraint"
"""The name of the extension field that carries the constraint report in a choice and a stream's last chunk."""


def finish_reason_for(finish_reason: str, has_calls: bool) -> str:
    """The choice's finish_reason given the engine's (see the module docstring)."""
    return "tool_calls" if has_calls and finish_reason == "stop" else finish_reason


def usage_dict(completion_tokens: int, reasoning_tokens: int) -> dict[str, Any]:
    return {"completion_tokens": completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": reasoning_tokens}}


def chunk_delta(reasoning: str | None, content: str | None, calls: Sequence[CallDelta]) -> dict[str, Any] | None:
    """A stream chunk's ``delta``: ``reasoning`` and ``content`` text when not empty, and ``tool_calls``: for
    each call in ``calls``, its first delta (``index``, ``id``, ``type``, ``function.name`` and the
    ``function.arguments`` known then) or more of its arguments (``index``, ``function.arguments``). None
    when there is nothing."""
    delta: dict[str, Any] = {}
    if reasoning:
        delta["reasoning"] = reasoning
    if content:
        delta["content"] = content
    if calls:
        delta["tool_calls"] = [c.to_openai() for c in calls]
    return delta or None


@dataclass(frozen=True)
class ParseResult:
    """A whole output, parsed."""

    reasoning: str | None
    content: str | None
    tool_calls: tuple[ToolCall, ...]
    finish_reason: str
    completion_tokens: int
    reasoning_tokens: int
    constraint: ConstraintReport | None = None
    """How the output was constrained (the manager's report, passed to ``parse``), or None."""

    @property
    def message(self) -> dict[str, Any]:
        return {"role": "assistant", "content": self.content, "reasoning": self.reasoning,
                "tool_calls": [c.to_openai() for c in self.tool_calls]}

    @property
    def usage(self) -> dict[str, Any]:
        return usage_dict(self.completion_tokens, self.reasoning_tokens)

    def to_openai(self) -> dict[str, Any]:
        """The choice: ``{"message": ..., "finish_reason": ...}`` plus ``usage`` (of this output), and
        ``thinkgate_constraint`` when a constraint report was given."""
        out = {"message": self.message, "finish_reason": self.finish_reason, "usage": self.usage}
        if self.constraint is not None:
            out[CONSTRAINT_FIELD] = self.constraint.as_dict()
        return out


@dataclass(frozen=True)
class StreamEnd:
    """The end of a stream: the last ``delta`` (what was held back; None when nothing), the
    ``finish_reason`` and the ``usage``."""

    delta: dict[str, Any] | None
    finish_reason: str
    completion_tokens: int
    reasoning_tokens: int
    constraint: ConstraintReport | None = None
    """How the output was constrained (the manager's report, passed to ``finish``), or None."""

    @property
    def usage(self) -> dict[str, Any]:
        return usage_dict(self.completion_tokens, self.reasoning_tokens)

    def to_openai(self) -> dict[str, Any]:
        """The last chunk's choice: ``{"delta": ..., "finish_reason": ...}`` plus ``usage``, and
        ``thinkgate_constraint`` when a constraint report was given."""
        out = {"delta": self.delta or {}, "finish_reason": self.finish_reason, "usage": self.usage}
        if self.constraint is not None:
            out[CONSTRAINT_FIELD] = self.constraint.as_dict()
        return out
