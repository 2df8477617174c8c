"""Kimi-K2 (Thinking) family: ``<think>`` … ``</think>``; a tool-call section ends the thinking.

Turns start with ``<|im_system|>``, ``<|im_user|>`` or ``<|im_assistant|>``. Kimi-K2-Thinking starts
inside its thinking (a ``<think>`` it writes is dropped) and may call a tool without closing it:
``<|tool_calls_section_begin|>`` ends the thinking and is the first content token. ``thinking: false``
(Kimi's switch; ``enable_thinking`` is accepted too) starts the request with every token content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["KimiK2ReasoningParser"]


@register_reasoning_parser()
class KimiK2ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<|tool_calls_section_begin|>",)
    turn_start_markers = ("<|im_assistant|>", "<|im_user|>", "<|im_system|>")
    default_mode = "thinking"
    thinking_kwargs = ("thinking", "enable_thinking")
