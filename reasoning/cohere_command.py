"""Cohere Command A Reasoning family: ``<|START_THINKING|>`` … ``<|END_THINKING|>``.

Turns start with ``<|START_OF_TURN_TOKEN|>``. The model writes ``<|START_THINKING|>`` itself when it
reasons and then answers in ``<|START_RESPONSE|>`` … ``<|END_RESPONSE|>`` or calls tools in
``<|START_ACTION|>`` … ``<|END_ACTION|>``. With no marker in the prompt the first token decides:
``<|START_THINKING|>`` -> thinking; anything else (``<|START_RESPONSE|>`` ...) -> the model skipped
thinking and that token is content. ``<|START_RESPONSE|>`` / ``<|START_ACTION|>`` while thinking end it
and are content (the structural tags a constraint may start with). A false ``reasoning``,
``enable_thinking`` or ``thinking`` kwarg starts the request with every token content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["CohereCommandReasoningParser"]


@register_reasoning_parser()
class CohereCommandReasoningParser(TokenMarkerParser):
    start_markers = ("<|START_THINKING|>",)
    end_markers = ("<|END_THINKING|>",)
    optional_implicit_end_markers = ("<|START_RESPONSE|>", "<|START_ACTION|>", "<|START_TEXT|>")
    turn_start_markers = ("<|START_OF_TURN_TOKEN|>",)
    default_mode = "first_token"
    enabled_mode = "first_token"
    thinking_kwargs = ("reasoning", "enable_thinking", "thinking")
