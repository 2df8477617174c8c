"""MiniMax-M2 "append think" family: M2's tracker, but the front end shows the thinking as content.

For clients that want MiniMax-M2's raw interleaved-thinking text: the engine core tracks the thinking
exactly as ``minimax_m2`` does (the grammar applies after ``</think>``), while the front end returns no
reasoning field: the whole output is content, prefixed with the ``<think>`` the template wrote into the
prompt, so the client sees ``<think>…</think>answer`` as the model produced it. A request whose
thinking had ended before the output (template closed it, ``include_reasoning: false``) gets no prefix.
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from typing import Any

from thinkgate.reasoning.base import ENDED, DeltaMessage, ReasoningStream
from thinkgate.reasoning.minimax_m2 import MiniMaxM2ReasoningParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["MiniMaxM2AppendThinkReasoningParser"]


@register_reasoning_parser()
class MiniMaxM2AppendThinkReasoningParser(MiniMaxM2ReasoningParser):
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
        opened = self.initial_state(prompt_token_ids, chat_template_kwargs) != ENDED
        if not text:  # nothing generated: a stream gets no delta either
            return None, None
        return None, ("<think>" if opened else "") + text

    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningStream:
        opened = self.initial_state(prompt_token_ids, chat_template_kwargs) != ENDED
        return _RawStream(self, "<think>" if opened else "")


class _RawStream(ReasoningStream):
    """Every token's text is content; the first delta carries the prefix."""

    def __init__(self, parser: MiniMaxM2AppendThinkReasoningParser, prefix: str) -> None:
        self._tb = parser.vocabulary.token_bytes
        self._prefix = prefix
        self._dec = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        if not token_ids:
            return DeltaMessage()
        out = self._prefix + self._dec.decode(b"".join(self._tb[t] for t in token_ids))
        self._prefix = ""
        return DeltaMessage(None, out or None)

    def finish(self) -> DeltaMessage:
        return DeltaMessage(None, self._dec.decode(b"", final=True) or None)
