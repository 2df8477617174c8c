"""Granite 4.2 thinking family (``granite_thinking_parser``): ``<think>`` … ``</think>``, Nemotron-3 style.

Granite 4.2 writes its thinking between the special tokens ``<think>`` and ``</think>`` (the template
writes ``\\n</think>\\n``) and calls tools with ``<tool_call>`` XML, as Nemotron 3 does; turns start
with ``<|start_of_role|>``. Thinking is on unless ``enable_thinking`` is false; a ``<tool_call>`` while
thinking ends it and is content. vLLM's parser also strips the newlines that open the content; here
those newline tokens stay content (they were generated after the thinking ended).
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["GraniteThinkingReasoningParser"]


@register_reasoning_parser()
class GraniteThinkingReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<tool_call>",)
    turn_start_markers = ("<|start_of_role|>", "<|im_start|>")
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking",)
