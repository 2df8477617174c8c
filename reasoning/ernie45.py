"""ERNIE-4.5 (Thinking) family: ``<think>`` … ``</think>``, content optionally in ``<response>`` tags.

The ERNIE-4.5 thinking models start inside their thinking (output ``abc\\n</think>\\n\\n<response>\\n
def\\n</response>\\n`` or ``abc\\n</think>\\ndef``): the request starts thinking, a ``<think>`` the model
writes is dropped, an output without ``</think>`` is all reasoning. ``<response>`` / ``</response>``
stay in the content ids (a grammar may name them) but the front end drops their text from the content.
Turns start with ``<|im_start|>`` where the vocabulary has it.
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["Ernie45ReasoningParser"]


@register_reasoning_parser()
class Ernie45ReasoningParser(TokenMarkerParser):
    start_markers = ("<think>",)
    end_markers = ("</think>",)
    optional_implicit_end_markers = ("<tool_call>",)
    turn_start_markers = ("<|im_start|>",)
    content_strip_markers = ("<response>", "</response>")
    default_mode = "thinking"
    thinking_kwargs = ("enable_thinking",)
