"""GLM-4.5 / 4.6 / 4.7 family: ``<think>`` … ``</think>``; the model may skip thinking.

Turns start with ``<|system|>``, ``<|user|>``, ``<|assistant|>`` or ``<|observation|>``. The GLM-4.5
template writes ``<|assistant|>`` and the model writes ``<think>`` itself when it thinks; with
``enable_thinking: false`` the template appends ``<think></think>`` (the request starts ended). Newer
templates (GLM-4.7) may open ``<think>`` in the prompt (the request starts thinking). With no marker in
the prompt the first generated token decides: ``<think>`` -> thinking, anything else -> the model
skipped thinking and that token is content. ``<tool_call>`` while thinking ends it and is content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Glm45ReasoningParser"]


@register_reasoning_parser()
class Glm45ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<tool_call>",)
    turn_start_markers = ("<|assistant|>", "<|user|>", "<|system|>", "<|observation|>")
    default_mode = "first_token"
    enabled_mode = "first_token"
    thinking_kwargs = ("enable_thinking", "thinking")
