"""Step 5 family: ``<think>`` … ``</think>``, always thinking (vLLM serves it with DeepSeek-R1's parser).

The request starts thinking: a ``<think>`` the model (or the template) writes is dropped, the first
``</think>`` ends the thinking, an output without one is all reasoning; there is no switch. The current
turn starts after the last ``<|im_start|>`` or ``<|BOT|>`` (StepFun's turn markers) where the vocabulary
has them.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Step5ReasoningParser"]


@register_reasoning_parser()
class Step5ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    turn_start_markers = ("<|im_start|>", "<|BOT|>")
    default_mode = "thinking"
    thinking_kwargs = ()
