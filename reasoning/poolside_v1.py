"""Poolside (Laguna) family: ``<think>`` … ``</think>``, thinking only when the kwargs ask.

vLLM's ``poolside_v1`` is DeepSeek-V3's parser with the prompt scoped to the current assistant turn,
which starts after the last ``<assistant>`` token (a ``</think>`` in an earlier turn, a few-shot example
or a tool description never ends this one). As for DeepSeek-V3: ``thinking`` / ``enable_thinking`` true
-> thinking (a ``<think>`` the model writes is dropped; no ``</think>`` means all reasoning), otherwise
every token is content; a ``<think>`` or ``</think>`` the template wrote in the current turn decides first.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["PoolsideV1ReasoningParser"]


@register_reasoning_parser()
class PoolsideV1ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    turn_start_markers = ("<assistant>",)
    default_mode = "off"
    thinking_kwargs = ("thinking", "enable_thinking")
