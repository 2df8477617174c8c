"""Muse Glimmer's compatibility profile: ``muse_glimmer``, Muse's channel messages with Glimmer's recipients.

The same messages as Muse Spark (``muse.py``, ``muse_channels.py``); the recipients read differently, as
vLLM 0.34's ``muse_glimmer`` reads them: ``self`` is reasoning; ``user`` and a message without recipient
are the answer (their ``<|message|>`` ends the reasoning); every other recipient, ``commentary`` and
``developer`` included, is a tool call (its ``<|message|>`` ends the reasoning too).
"""

from __future__ import annotations

from thinkgate.reasoning.muse_channels import GLIMMER
from thinkgate.reasoning.muse_parser import MuseChannelParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["MuseGlimmerReasoningParser"]


@register_reasoning_parser()
class MuseGlimmerReasoningParser(MuseChannelParser):
    recipients = GLIMMER
