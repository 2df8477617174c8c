"""Kimi-VL (Thinking) family: ``◁think▷`` … ``◁/think▷``, written with ordinary tokens (text markers).

SGLang 0.5.23 serves it as ``kimi`` (its ``KimiDetector``); vLLM 0.34 has no name for it. The markers are
not special tokens of Kimi-VL's tokenizer (``◁`` + ``think`` + ``▷``), so they are matched on the bytes
(:class:`reasoning.text_markers.TextMarkerParser`). The template opens no thinking: Kimi-VL-Thinking writes
``◁think▷`` itself at the start of its output, a model that does not think answers at once, so the first
generated token decides (``default_mode = "first_token"``: SGLang's detector likewise reads no reasoning
when the output has no ``◁think▷``). An output cut before ``◁/think▷`` is all reasoning. Turns are Kimi's
(``<|im_user|>``, ``<|im_assistant|>``, ``<|im_system|>``); Kimi-VL has no thinking switch.

Deliberate differences from SGLang's detector: a ``◁think▷`` that is not at the start of the output is
content here (SGLang reads the whole output as reasoning once one appears anywhere); the thinking is read
once (SGLang also reads one block).
"""

from __future__ import annotations

from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.text_markers import TextMarkerParser

__all__ = ["KimiVLReasoningParser"]


@register_reasoning_parser()
class KimiVLReasoningParser(TextMarkerParser):
    start_texts = ("◁think▷",)
    end_texts = ("◁/think▷",)
    turn_start_texts = ("<|im_assistant|>", "<|im_user|>", "<|im_system|>")
    default_mode = "first_token"
    thinking_kwargs = ()
