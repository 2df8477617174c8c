"""MiniMax-M3 family: ``<mm:think>`` … ``</mm:think>``; the model decides unless the template opened it.

Turns start with ``]~b]``. With ``thinking_mode: "enabled"`` the template writes ``<mm:think>`` after the
assistant header and the request starts thinking. Otherwise (the default) the first generated token
decides: ``<mm:think>`` -> thinking, anything else -> the model answered without thinking and that token
is content. A ``<mm:think>`` or ``</mm:think>`` the template wrote in the current turn decides first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["MiniMaxM3ReasoningParser"]


@register_reasoning_parser()
class MiniMaxM3ReasoningParser(TokenMarkerParser):
    start_markers = ("<mm:think>",)
    end_markers = ("</mm:think>",)
    turn_start_markers = ("]~b]",)
    default_mode = "first_token"
    thinking_kwargs = ("thinking_mode",)

    def thinking_requested(self, kwargs: Mapping[str, Any]) -> bool | None:
        # "enabled" opens the thinking in the prompt; any other value leaves the choice to the model
        return True if kwargs.get("thinking_mode") == "enabled" else None
