"""DeepSeek-V3.1 / V3.2 family: ``<think>`` … ``</think>``, thinking only when the kwargs ask.

The hybrid DeepSeek-V3.1/V3.2 chat template writes ``<｜Assistant｜><think>`` when the request sets
``thinking: true`` (``enable_thinking`` is accepted too) and ``<｜Assistant｜></think>`` otherwise, so the
prompt's current turn (after the last ``<｜Assistant｜>`` / ``<｜User｜>``) decides when it has a marker.
With no marker in the prompt: ``thinking`` / ``enable_thinking`` true -> thinking (the output ends it with
``</think>``; without one all of it is reasoning), otherwise -> no thinking (every token is content),
as in non-thinking chat mode. ``<｜tool▁calls▁begin｜>`` while thinking ends it and is content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["DeepSeekV3ReasoningParser"]


@register_reasoning_parser()
class DeepSeekV3ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<｜tool▁calls▁begin｜>",)
    turn_start_markers = ("<｜Assistant｜>", "<｜User｜>")
    default_mode = "off"
    thinking_kwargs = ("thinking", "enable_thinking")
