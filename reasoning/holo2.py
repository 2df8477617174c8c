"""Holo2 family: ``<think>`` … ``</think>``, thinking unless the kwargs turn it off.

vLLM serves Holo2 with DeepSeek-V3's parser defaulting to thinking: ``thinking`` / ``enable_thinking``
false -> every token is content; otherwise the request starts thinking (a ``<think>`` the model writes
is dropped, an output without ``</think>`` is all reasoning). Holo2 is built on Qwen3-VL, so turns are
ChatML (the current turn starts after the last ``<|im_start|>``).
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Holo2ReasoningParser"]


@register_reasoning_parser()
class Holo2ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    turn_start_markers = ("<|im_start|>",)
    default_mode = "thinking"
    thinking_kwargs = ("thinking", "enable_thinking")
