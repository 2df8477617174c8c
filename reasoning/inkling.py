"""Inkling family: typed blocks, ``<|message_model|><|content_thinking|>`` … ``<|end_message|>``.

Every Inkling marker is a special token. The model writes blocks in any order; a thinking block is
``<|message_model|><|content_thinking|>…<|end_message|>``, and the thinking is over at the first block
that is not thinking: ``<|content_text|>`` (a visible answer; the marker is dropped, the grammar applies
after it) or ``<|content_model_end_sampling|>``, or a tool block ``<|content_invoke_tool_json|>`` /
``<|content_invoke_tool_text|>`` / ``<|content_tool_error|>`` (the block opener is the first content
token). Between thinking blocks the framing tokens (``<|end_message|>``, ``<|message_model|>``,
``<|content_thinking|>``) are dropped as markers. The template prefills ``<|message_model|>`` for the
reply, so the request starts thinking (undecided until its block kind, which is dropped or ends it).
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["InklingReasoningParser"]


@register_reasoning_parser()
class InklingReasoningParser(TokenMarkerParser):
    start_markers = ("<|content_thinking|>", "<|message_model|>", "<|end_message|>")
    end_markers = ("<|content_text|>", "<|content_model_end_sampling|>")
    implicit_end_markers = ("<|content_invoke_tool_json|>",)
    optional_implicit_end_markers = ("<|content_invoke_tool_text|>", "<|content_tool_error|>")
    default_mode = "thinking"
    thinking_kwargs = ()
