"""Kimi K3 family: XTML channels, ``<|open|>think<|sep|>`` … ``<|close|>think<|sep|>`` (three ids each).

Each marker is a sequence of tokens that begins with a special token (``<|open|>`` / ``<|close|>``), so
this family uses :class:`reasoning.token_sequences.TokenSequenceParser`: the end is found on the ids,
across step and draft boundaries, and ``think`` written with ordinary tokens elsewhere never ends it.
Thinking is on unless ``thinking`` / ``enable_thinking`` is false; the template may open the think
channel as the generation prefix (the output then holds only the close marker). The answer channel
``<|open|>response<|sep|>`` written straight from the thinking also ends it (dropped, like vLLM, which
reads it as "no think channel"). The channel wrappers after the thinking (``<|open|>response<|sep|>``,
``<|close|>response<|sep|>``, ``<|close|>message<|sep|>``) are content, ids and text: under vLLM's
serving layer the content after the thinking goes to the tool parser without passing through the
reasoning parser, so stripping them here would make the whole and the streamed answers differ (vLLM's
own ``kimi_k3`` strips them only when the request has no tools).
"""

from __future__ import annotations

from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.token_sequences import TokenSequenceParser

__all__ = ["KimiK3ReasoningParser"]


@register_reasoning_parser()
class KimiK3ReasoningParser(TokenSequenceParser):
    start_sequences = (("<|open|>", "think", "<|sep|>"),)
    end_sequences = (("<|close|>", "think", "<|sep|>"), ("<|open|>", "response", "<|sep|>"))
    default_mode = "thinking"
    thinking_kwargs = ("thinking", "enable_thinking")
