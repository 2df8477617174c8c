"""Step-3 family: only an end marker, ``</think>``; everything before it is reasoning.

Step-3 starts inside its thinking and never writes a start marker, so there is none to drop: the
request starts thinking, the first ``</think>`` ends it, an output without it is all reasoning. Turns
start with ``<|BOT|>`` where the vocabulary has it (otherwise the whole prompt is the current turn).
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Step3ReasoningParser"]


@register_reasoning_parser()
class Step3ReasoningParser(TokenMarkerParser):
    start_markers = ()
    end_markers = ("</think>",)
    turn_start_markers = ("<|BOT|>",)
    default_mode = "thinking"
    thinking_kwargs = ()
