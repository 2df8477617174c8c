"""Hunyuan HY-V4 family: HY-V3's markers and switch, thinking by default.

As :mod:`reasoning.hy_v3` (per-checkpoint suffixed ``<think…>`` markers read from the vocabulary;
``reasoning_effort: "no_think"`` -> every token is content), but HY-V4's template defaults
``reasoning_effort`` to ``"high"``: with no effort given the request starts thinking.
"""

from __future__ import annotations

from thinkgate.reasoning.hy_v3 import HYV3ReasoningParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["HYV4ReasoningParser"]


@register_reasoning_parser()
class HYV4ReasoningParser(HYV3ReasoningParser):
    default_mode = "thinking"
