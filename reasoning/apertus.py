"""Apertus (2509) family: ``<|inner_prefix|>`` … ``<|inner_suffix|>``; the model decides with its first token.

SGLang 0.5.23 serves it as ``apertus2509`` (``Apertus2509Detector``); vLLM 0.34 has no reasoning name for
it. The markers are special tokens of Apertus' tokenizer. The template writes ``Deliberation: enabled`` /
``disabled`` in its developer turn and opens no thinking after ``<|assistant_start|>``: the model writes
``<|inner_prefix|>`` as its first token when it thinks, anything else is the first content token
(``default_mode = "first_token"``; SGLang's detector likewise reads reasoning only after the start token,
whatever the switches say, so no kwarg is read). A prompt that ends with ``<|inner_prefix|>`` (a template
that opens the thinking) starts thinking. ``<|tools_prefix|>`` while thinking ends the thinking and is the
first content token: a call written from the thinking is read as a call (SGLang moves it to the content too).

Deliberate differences from SGLang's detector, which reads several thought blocks in one output: thinking
here is one block at the start (the grammar applies from its end), so thoughts written after a call or after
the first answer text are content, markers included.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["ApertusReasoningParser"]


@register_reasoning_parser()
class ApertusReasoningParser(TokenMarkerParser):
    start_markers = ("<|inner_prefix|>",)
    end_markers = ("<|inner_suffix|>",)
    optional_implicit_end_markers = ("<|tools_prefix|>",)
    turn_start_markers = ("<|assistant_start|>", "<|user_start|>", "<|system_start|>", "<|developer_start|>")
    default_mode = "first_token"
    thinking_kwargs = ()
