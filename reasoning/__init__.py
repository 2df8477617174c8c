"""Reasoning parsers: per model family, where the thinking ends, on token ids and on text.

See ``reasoning.base`` for the contract and ``reasoning.registry`` for names and plugins.
"""

from thinkgate.reasoning.base import DeltaMessage, ReasoningEnd, ReasoningParser, ReasoningSplit, ReasoningStream, ReasoningTracker
from thinkgate.reasoning.registry import get_reasoning_parser, list_reasoning_parsers, load_reasoning_plugin, register_reasoning_parser
from thinkgate.reasoning.vocabulary import VOCABULARY_NAMES, Vocabulary, load_vocabulary

__all__ = [
    "DeltaMessage", "ReasoningEnd", "ReasoningParser", "ReasoningSplit", "ReasoningStream", "ReasoningTracker",
    "get_reasoning_parser", "list_reasoning_parsers", "load_reasoning_plugin", "register_reasoning_parser",
    "VOCABULARY_NAMES", "Vocabulary", "load_vocabulary",
]
