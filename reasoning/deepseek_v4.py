"""DeepSeek-V4 family: ``<think>`` … ``</think>``, thinking switched by the kwargs, DSML tool calls.

Registered as ``deepseek_v4`` and ``deepseek_v41`` (DeepSeek V4.1: the same thinking format and prompt
shapes; only its DSML tool-call spelling gains spaces, ``<｜DSML｜ calls>``, and starts with the same
``｜DSML｜`` token).

Prompt shapes as DeepSeek-V3.1 (``<｜Assistant｜><think>`` opens the thinking, ``<｜Assistant｜></think>``
closes it; with no marker in the current turn, ``thinking`` / ``enable_thinking`` decide and the default
is no thinking). DeepSeek-V4 may start a DSML tool-call block (``<｜DSML｜tool_calls>``) straight from
its thinking: the ``｜DSML｜`` special token then ends the thinking and is the first content token. The
``<`` written just before it is an ordinary token that was already committed as reasoning when
``｜DSML｜`` arrives, so on token ids (and therefore in the text too, to stay exact to the token) it is
the last reasoning token; a tool parser reading the content sees ``｜DSML｜tool_calls>…``.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["DeepSeekV4ReasoningParser"]


@register_reasoning_parser()
class DeepSeekV4ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("｜DSML｜", "<｜tool▁calls▁begin｜>")
    turn_start_markers = ("<｜Assistant｜>", "<｜User｜>")
    default_mode = "off"
    thinking_kwargs = ("thinking", "enable_thinking")
