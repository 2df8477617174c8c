"""IQuest-Q1 family: ``<think>`` … ``</think>``, thinking unless both switches are turned off.

SGLang 0.5.23 serves it as ``iquest_q1`` (``IQuestQ1ReasoningDetector``); vLLM 0.34 has no name for it.
The generation prompt opens the thought (``<|iquest_assistant|><think>``), or closes it at once when the
thinking is off (``<|iquest_assistant|><think></think>``): the current turn starts after the last
``<|iquest_assistant|>``, and its last marker decides. With no marker there, the switches decide as SGLang
reads them: thinking when neither ``thinking`` nor ``enable_thinking`` is set, else when either one is true
(``thinking: false, enable_thinking: true`` thinks). A ``<think>`` the model writes is dropped; an output
without ``</think>`` is all reasoning. The markers are matched as text, so the family reads them whether
the tokenizer holds them as single tokens or spells them with ordinary ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from thinkgate.reasoning.base import truthy
from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.text_markers import TextMarkerParser

__all__ = ["IQuestQ1ReasoningParser"]


@register_reasoning_parser()
class IQuestQ1ReasoningParser(TextMarkerParser):
    start_texts = ("<think>",)
    end_texts = ("</think>",)
    turn_start_texts = ("<|iquest_assistant|>",)
    default_mode = "thinking"
    thinking_kwargs = ("thinking", "enable_thinking")

    def thinking_requested(self, kwargs: Mapping[str, Any]) -> bool | None:
        """None when neither switch is set (then the family default: thinking), else whether either is on."""
        values = [kwargs.get(k) for k in self.thinking_kwargs]
        if all(v is None for v in values):
            return None
        return any(v is not None and truthy(v) for v in values)
