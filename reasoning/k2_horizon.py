"""K2 Horizon family: ``<ifm|think>`` … ``</ifm|think>`` (and the faster efforts' pairs).

The chat template picks the thinking markers by ``reasoning_effort``: ``high`` -> ``<ifm|think>`` /
``</ifm|think>``, ``medium`` -> ``<ifm|think_fast>`` / ``</ifm|think_fast>``, ``low`` ->
``<ifm|think_faster>`` / ``</ifm|think_faster>``. One parser serves every request of the model, so all
three pairs are markers (a model writes only its own). The request starts thinking (the template may
have opened it; a start marker the model writes is dropped); ``<ifm|tool_calls>`` while thinking ends
it and is content (a tool call straight from the thinking).
"""

from __future__ import annotations

from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["K2HorizonReasoningParser"]


@register_reasoning_parser()
class K2HorizonReasoningParser(TokenMarkerParser):
    start_markers = ("<ifm|think>", "<ifm|think_fast>", "<ifm|think_faster>")
    end_markers = ("</ifm|think>", "</ifm|think_fast>", "</ifm|think_faster>")
    optional_implicit_end_markers = ("<ifm|tool_calls>",)
    default_mode = "thinking"
    thinking_kwargs = ()
