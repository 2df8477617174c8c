"""Hunyuan HY-V3 family: ``<think{suffix}>`` … ``</think{suffix}>``, thinking chosen by ``reasoning_effort``.

Hunyuan checkpoints may suffix their structural special tokens per checkpoint (``<think:6124c78e>``);
the suffix is read from the vocabulary's special tokens (the first ``<think…>``, ``<tool_calls…>``,
``<tool_call…>``, ``<arg_key…>`` or ``<arg_value…>`` token), as vLLM reads it, and the markers are built
from it (no such token: the plain ``<think>`` / ``</think>``, which must then be special tokens).

``reasoning_effort`` (a chat-template kwarg) switches the thinking: ``"no_think"`` -> every token is
content; any other effort -> the request starts thinking (the template opens ``<think…>`` at the end of
the prompt; one the model writes is dropped, an output without the end marker is all reasoning).
HY-V3's default, with no effort given, is ``no_think``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.vocabulary import Vocabulary

__all__ = ["HYV3ReasoningParser", "hunyuan_token_suffix"]

_STRUCTURAL = re.compile(r"<(?:think|tool_calls|tool_call|arg_key|arg_value)(:[^\s>]+)?>")


def hunyuan_token_suffix(vocabulary: Vocabulary) -> str:
    """The checkpoint's structural-token suffix (``":6124c78e"``), or ``""`` for plain tokens."""
    for text in sorted(vocabulary.special_tokens):
        m = _STRUCTURAL.fullmatch(text)
        if m:
            return m.group(1) or ""
    return ""


@register_reasoning_parser()
class HYV3ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    default_mode = "off"
    thinking_kwargs = ("reasoning_effort",)

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        vocabulary = Vocabulary.coerce(tokenizer)
        suffix = hunyuan_token_suffix(vocabulary)
        self.start_markers = (f"<think{suffix}>",)
        self.end_markers = (f"</think{suffix}>",)
        super().__init__(vocabulary, chat_template_kwargs)

    def thinking_requested(self, kwargs: Mapping[str, Any]) -> bool | None:
        effort = kwargs.get("reasoning_effort")
        if not effort:
            return None
        return str(effort).strip().lower() != "no_think"
