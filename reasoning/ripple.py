"""Ripple family: optional ``<think>`` … ``</think>``; the model decides with its first token.

Ripple's template has no thinking switch and opens nothing: the model either starts with ``<think>``
(thinking; the template frames the markers with newlines, which stay reasoning / content text) or
answers at once (that first token is content). ``<tool_call>`` while thinking ends it and is content.
vLLM's gate treats the thinking as over from the first token (its grammar applies at once, so a
constrained Ripple request never thinks); thinkgate's manager masks the undecided first position with
``<think>`` plus the grammar's first tokens instead.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["RippleReasoningParser"]


@register_reasoning_parser()
class RippleReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<tool_call>",)
    turn_start_markers = ("<|im_start|>",)
    default_mode = "first_token"
    enabled_mode = "first_token"
    thinking_kwargs = ()
