"""ZAYA1 family: Qwen3's ``<think>`` … ``</think>``; ``<zyphra_tool_call>`` ends the thinking implicitly.

ZAYA1 uses Qwen3's grammar (ChatML turns, thinking on unless ``enable_thinking`` is false) but wraps its
tool calls in ``<zyphra_tool_call>``: written while thinking it ends the thinking and is the first
content token.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["ZayaReasoningParser"]


@register_reasoning_parser()
class ZayaReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<zyphra_tool_call>",)
    turn_start_markers = ("<|im_start|>",)
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking",)
