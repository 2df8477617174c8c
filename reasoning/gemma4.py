"""Gemma 4 family: ``<|channel>thought\\n`` … ``<channel|>``.

Turns start with ``<|turn>``. Thinking is switched on by ``enable_thinking: true`` (the template then
puts ``<|think|>`` in the system turn); the model opens its thought channel with ``<|channel>`` followed
by the label ``thought\\n``, which belongs to the marker (dropped, not reasoning), and closes it with
``<channel|>``. With thinking off (the default) every token is content. With it on, the first generated
token decides: ``<|channel>`` -> thinking, anything else -> the model skipped thinking. A
``<|tool_call>`` while thinking ends it and is content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Gemma4ReasoningParser"]


@register_reasoning_parser()
class Gemma4ReasoningParser(TokenMarkerParser):
    start_markers = ("<|channel>",)
    end_markers = ("<channel|>",)
    optional_implicit_end_markers = ("<|tool_call>",)
    turn_start_markers = ("<|turn>",)
    start_label = "thought\n"
    default_mode = "off"
    enabled_mode = "first_token"
    thinking_kwargs = ("enable_thinking", "thinking")
