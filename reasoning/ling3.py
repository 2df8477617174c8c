"""Ling 3 family: GLM's ``<think>`` … ``</think>`` format, thinking on by default.

vLLM's ``ling3`` reuses the GLM-4.7 grammar (``<tool_call>`` XML calls, GLM turn markers
``<|system|>`` / ``<|user|>`` / ``<|assistant|>`` / ``<|observation|>``) but starts inside the thinking
unless ``thinking`` / ``enable_thinking`` is false. A ``<think>`` the model writes is dropped, an output
without ``</think>`` is all reasoning, and ``<tool_call>`` while thinking ends it and is content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Ling3ReasoningParser"]


@register_reasoning_parser()
class Ling3ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<tool_call>",)
    turn_start_markers = ("<|assistant|>", "<|user|>", "<|system|>", "<|observation|>")
    default_mode = "thinking"
    thinking_kwargs = ("thinking", "enable_thinking")
