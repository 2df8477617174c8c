"""Muse Spark: ``muse`` (also ``musespark``), channel-scoped messages addressed ``to=RECIPIENT``.

A turn is a sequence of messages (``muse_channels.py``), the first written after the prompt's
``<|start|>assistant``::

     to=self<|message|>The user wants the weather.<|eom|><|start|>assistant to=user<|message|>Sunny.<|eot|>

Spark's recipients: ``self`` and a message without recipient are reasoning; ``user`` is the answer (its
``<|message|>`` ends the reasoning); ``commentary`` is content shown to the user between tool calls (it
does not end the reasoning); ``developer`` is dropped; any other recipient is a tool call (its
``<|message|>`` ends the reasoning; the ``muse`` tool format reads its ``<atem:function_calls>``).
The markers ``<|start|>``, ``<|message|>``, ``<|eom|>``, ``<|eot|>`` are matched as special tokens where
the vocabulary has them, else as text (``muse_parser.py``).
"""

from __future__ import annotations

from thinkgate.reasoning.muse_channels import SPARK
from thinkgate.reasoning.muse_parser import MuseChannelParser
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["MuseReasoningParser"]


@register_reasoning_parser()
class MuseReasoningParser(MuseChannelParser):
    recipients = SPARK
