"""A tool call as an OpenAI stream sends it: the call's first delta, then more argument text.

The first :class:`CallDelta` of a call carries its ``index`` (its position among the output's calls),
``id``, ``name`` and the argument text known by then (maybe ``""``); each later one carries the ``index``
and more argument text. The concatenation of a call's ``arguments`` is the call's whole arguments string.
A call decided whole goes out as one first delta holding all of its arguments.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .results import ToolCall

__all__ = ["CallDelta", "whole_call_deltas", "merge_call_deltas"]


@dataclass(frozen=True)
class CallDelta:
    """One piece of one call in a stream (see the module docstring); ``name`` and ``id`` are set on the
    call's first delta only."""

    index: int
    arguments: str = ""
    name: str | None = None
    id: str | None = None

    @property
    def is_first(self) -> bool:
        return self.name is not None

    def to_openai(self) -> dict[str, Any]:
        """The Chat Completions chunk's ``tool_calls`` item."""
        if self.name is not None:
            return {"index": self.index, "id": self.id, "type": "function",
                    "function": {"name": self.name, "arguments": self.arguments}}
        return {"index": self.index, "function": {"arguments": self.arguments}}


def whole_call_deltas(calls: Sequence[ToolCall], first_index: int) -> tuple[CallDelta, ...]:
    """Calls decided whole, numbered from ``first_index``: one first delta each, all arguments in it."""
    return tuple(CallDelta(first_index + i, c.arguments, c.name, c.id) for i, c in enumerate(calls))


def merge_call_deltas(deltas: Sequence[CallDelta]) -> tuple[CallDelta, ...]:
    """Adjacent deltas of one call joined (a first delta absorbs the argument text after it), and deltas
    that say nothing (a later delta without text) dropped: what one chunk sends."""
    out: list[CallDelta] = []
    for d in deltas:
        if not d.is_first and not d.arguments:
            continue
        if out and out[-1].index == d.index and not d.is_first:
            last = out[-1]
            out[-1] = CallDelta(last.index, last.arguments + d.arguments, last.name, last.id)
        else:
            out.append(d)
    return tuple(out)
