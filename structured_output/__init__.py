"""Structured output for reasoning models: the scheduler-facing manager, constraints and tool choice."""

from reasoning.vocabulary import Vocabulary, load_vocabulary

__all__ = ["Vocabulary", "load_vocabulary"]
