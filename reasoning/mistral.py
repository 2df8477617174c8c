"""Mistral (Magistral) family: ``[THINK]`` … ``[/THINK]``.

The assistant turn starts after the last ``[/INST]`` (``[INST]`` starts a user turn): Magistral's system
prompt itself contains ``[THINK]`` … ``[/THINK]`` as an example, which must not count. The model writes
``[THINK]`` itself when it reasons, so the first generated token decides: ``[THINK]`` -> thinking,
anything else -> no thinking and that token is content. ``[TOOL_CALLS]`` while thinking ends it and is
content. Build it with the ``magistral`` vocabulary (the tekken table with ``[THINK]`` = 34 and
``[/THINK]`` = 35); the plain ``tekken`` table predates those tokens and is refused.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["MistralReasoningParser"]


@register_reasoning_parser()
class MistralReasoningParser(TokenMarkerParser):
    start_markers = ("[THINK]",)
    end_markers = ("[/THINK]",)
    optional_implicit_end_markers = ("[TOOL_CALLS]",)
    turn_start_markers = ("[/INST]", "[INST]")
    default_mode = "first_token"
    enabled_mode = "first_token"
    thinking_kwargs = ("enable_thinking", "thinking")
