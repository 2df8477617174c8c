"""DeepSeek-R1 family: ``<think>`` … ``</think>``, always thinking.

The current turn starts after the last ``<｜Assistant｜>`` (or ``<｜User｜>``). DeepSeek-R1's first
release writes no ``<think>`` (its output starts inside the thinking); R1-0528's template opens it in
the prompt (``<｜Assistant｜><think>\\n``); either way the request starts thinking, a ``<think>`` the
model writes is dropped as a marker, and an output without ``</think>`` is all reasoning. R1 has no
switch to turn thinking off, so ``enable_thinking`` / ``thinking`` are not read (``include_reasoning:
false`` still makes every token content).
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["DeepSeekR1ReasoningParser"]


@register_reasoning_parser()
class DeepSeekR1ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    turn_start_markers = ("<｜Assistant｜>", "<｜User｜>")
    default_mode = "thinking"
    thinking_kwargs = ()
