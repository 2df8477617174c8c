"""PLaMo 3 family: ``<|plamo:begin_think:plamo|>`` … ``<|plamo:end_think:plamo|>``, each three ids.

PLaMo's control markers are split into tokens: ``<|plamo:begin_`` / ``<|plamo:end_`` (special), a name
(``think``, ``tool_requests``) and ``:plamo|>``. This family uses
:class:`reasoning.token_sequences.TokenSequenceParser`. Thinking is on unless ``enable_thinking`` is
false (the template then writes no think block); a begin-think the model writes is dropped, and the
thinking ends at the end-think marker, at the end-of-turn ``<|plamo:tag|>``, or at a tool-request block
written straight from the thinking (``<|plamo:begin_tool_requests:plamo|>``: its text is content text for
the tool parser; the grammar applies after it).
"""

from __future__ import annotations

from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.token_sequences import TokenSequenceParser

__all__ = ["Plamo3ReasoningParser"]


@register_reasoning_parser()
class Plamo3ReasoningParser(TokenSequenceParser):
    start_sequences = (("<|plamo:begin_", "think", ":plamo|>"),)
    end_sequences = (("<|plamo:end_", "think", ":plamo|>"), ("<|plamo:tag|>",))
    implicit_end_sequences = (("<|plamo:begin_", "tool_requests", ":plamo|>"),)
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking",)
