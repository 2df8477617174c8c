"""OLMo 3 family: ``<think>`` … ``</think>`` written with ordinary tokens (text markers).

OLMo 3's tokenizer has no special think tokens: the markers are texts that span several tokens, so
this family uses :class:`reasoning.text_markers.TextMarkerParser` (markers matched on the bytes with a
bounded tail). Turns are ChatML (the current turn starts after the last ``<|im_start|>``). OLMo-3-Think
starts inside its thinking (its template may already have written ``<think>``; one the model writes is
dropped); an output without ``</think>`` is all reasoning. ``enable_thinking: false`` starts the
request with every token content. The token in which ``</think>`` completes ends the reasoning.
"""

from __future__ import annotations

from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.text_markers import TextMarkerParser

__all__ = ["Olmo3ReasoningParser"]


@register_reasoning_parser()
class Olmo3ReasoningParser(TextMarkerParser):
    start_texts = ("<think>",)
    end_texts = ("</think>",)
    turn_start_texts = ("<|im_start|>",)
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking",)
