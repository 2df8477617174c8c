"""Hunyuan-A13B family: ``<think>`` … ``</think>`` then ``<answer>`` … ``</answer>`` (text markers).

Hunyuan writes ``<think>\\n…\\n</think>\\n<answer>\\n…\\n</answer>`` with ordinary tokens (its markers
are not special tokens), so this family uses :class:`reasoning.text_markers.TextMarkerParser`. The
reasoning ends where ``<answer>`` completes: that is where the answer (the part a grammar constrains)
begins. ``<think>`` and ``</think>`` written while thinking are dropped. The current turn starts after
the last ``<|extra_0|>`` (the template ends each user turn with it) or ``<|startoftext|>``.

Prompt shapes: with ``enable_thinking: false`` the template appends ``<think>\\n\\n</think>\\n``; the
request is still before ``<answer>``, so it is read as thinking and ends at the ``<answer>`` the model
writes next (an empty reasoning). The fast-think output ``<think>\\n\\n</think>\\n<answer>…`` likewise
gives an empty reasoning. The content keeps the closing ``\\n</answer>`` (its tokens are generated
after the answer; a front end may strip it).
"""

from __future__ import annotations

from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.text_markers import TextMarkerParser

__all__ = ["HunyuanA13BReasoningParser"]


@register_reasoning_parser()
class HunyuanA13BReasoningParser(TextMarkerParser):
    start_texts = ("<think>", "</think>")
    end_texts = ("<answer>",)
    turn_start_texts = ("<|extra_0|>", "<|startoftext|>")
    default_mode = "thinking"
    thinking_kwargs = ()
    forced_end_text = "\n</think>\n<answer>"  # a thinking budget closes the thinking as the model does
