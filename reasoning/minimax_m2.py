"""MiniMax-M2 family: ``<think>`` … ``</think>``, always thinking (interleaved thinking).

Turns start with ``]~b]`` (``]~b]ai\\n`` for the assistant). The M2 template opens ``<think>\\n`` in the
prompt, so the output usually holds only ``</think>``; a ``<think>`` the model writes is dropped, and an
output without ``</think>`` is all reasoning. ``<minimax:tool_call>`` while thinking ends it and is
content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["MiniMaxM2ReasoningParser"]


@register_reasoning_parser()
class MiniMaxM2ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<minimax:tool_call>",)
    turn_start_markers = ("]~b]",)
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking",)
