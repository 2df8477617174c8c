"""Tool-call ids: the OpenAI-style default, and the schemes of the families that have their own.

A format names its scheme (``CallFormat.call_ids``); the whole reader and the streaming reader both give
each call ``call_ids(call_text, index)`` (``call_text``: the call as the model wrote it, markers included;
``index``: its position among the output's calls). None means the default, :func:`~.results.new_call_id`
(``chatcmpl-tool-<32 hex digits>``).

- Kimi K2 writes the id itself: ``functions.NAME:INDEX`` between ``<|tool_call_begin|>`` and
  ``<|tool_call_argument_begin|>`` (its chat template sends the id back in the tool message, so the id
  is what the model wrote): :class:`WrittenCallId`.
- Cohere Command writes the id in its action (``"tool_call_id": "0"``), the one its tool results refer to:
  :class:`WrittenCallId` (as cohere_melody, vLLM's Cohere parser, returns it).
- Mistral's tokenizer (mistral-common) takes only ids of 9 letters and digits when the call is sent back
  in the next turn: :func:`mistral_call_id`.
"""

from __future__ import annotations

import secrets
import string
from dataclasses import dataclass

from .results import new_call_id

__all__ = ["WrittenCallId", "mistral_call_id"]

_ALNUM = string.ascii_letters + string.digits


def mistral_call_id(call_text: str, index: int) -> str:
    """9 random letters and digits, the only ids mistral-common's tokenizer accepts."""
    return "".join(secrets.choice(_ALNUM) for _ in range(9))


@dataclass(frozen=True)
class WrittenCallId:
    """The id is the text the model wrote between ``after`` and ``before`` (Kimi K2); the default id when
    that text is missing or empty."""

    after: str
    before: str

    def __call__(self, call_text: str, index: int) -> str:
        i = call_text.find(self.after)
        if i >= 0:
            i += len(self.after)
            j = call_text.find(self.before, i)
            if j > i:
                return call_text[i:j].strip()
        return new_call_id()
