"""Qwen3 family: ``<think>`` … ``</think>``; ``<tool_call>`` ends the thinking implicitly.

Registered as ``qwen3`` and the models that share its format: ``mimo`` (Xiaomi MiMo), ``nemotron_v3``
(NVIDIA Nemotron 3, ChatML turns and Qwen-style think/tool tags) ``step3p5`` (StepFun Step-3.5) and ``minicpmv`` (MiniCPM-V 4.x: Qwen3's grammar; with
``enable_thinking: false`` vLLM drops a stray ``<think>…</think>`` from the content, here it stays content).

Prompt shapes (ChatML: the current turn starts after the last ``<|im_start|>``):

- Qwen3.5/3.6 and Qwen3-*-Thinking-2507 templates open the thinking in the prompt
  (``<|im_start|>assistant\\n<think>\\n``): the request starts thinking, the output has only ``</think>``.
- ``enable_thinking: false`` makes the template write ``<think>\\n\\n</think>\\n\\n``: it starts ended.
- The original hybrid Qwen3 template writes neither; the model writes ``<think>`` itself (dropped as a
  marker). With no marker in the prompt and no kwarg the request is read as thinking, so an output cut
  by ``max_tokens`` before ``</think>`` is all reasoning.
- A ``<tool_call>`` token while thinking ends the thinking and is the first token of the content (the
  model may call a tool without closing its thinking).
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Qwen3ReasoningParser"]


@register_reasoning_parser()
class Qwen3ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<tool_call>",)
    turn_start_markers = ("<|im_start|>",)
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking", "thinking")
