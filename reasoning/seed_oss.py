"""Seed-OSS family: ``<seed:think>`` … ``</seed:think>``.

Turns start with ``<seed:bos>``. Seed-OSS thinks by default (its thinking budget, ``thinking_budget``,
bounds the length, it does not turn thinking off; a budget of 0 makes the model close it at once):
the request starts thinking, a ``<seed:think>`` the model writes is dropped, an output without
``</seed:think>`` is all reasoning. ``<seed:tool_call>`` while thinking ends it and is content.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["SeedOssReasoningParser"]


@register_reasoning_parser()
class SeedOssReasoningParser(TokenMarkerParser):
    start_markers = ("<seed:think>",)
    end_markers = ("</seed:think>",)
    optional_implicit_end_markers = ("<seed:tool_call>",)
    turn_start_markers = ("<seed:bos>",)
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking",)
