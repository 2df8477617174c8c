"""Structured output for reasoning models: the scheduler-facing manager, constraints and tool choice.

    from structured_output import StructuredOutputManager, Constraint
    mgr = StructuredOutputManager(load_vocabulary("qwen3_6"), "qwen3")
    mgr.add_request("r1", Constraint.json_schema(schema), prompt_token_ids)
    ...  # every step: batch = mgr.grammar_bitmask(schedule); apply; sample; mgr.accept_tokens(...)

See :class:`StructuredOutputManager` for lifetimes, thread-safety and the step protocol.
"""

from reasoning.vocabulary import Vocabulary, load_vocabulary

from .compiler import CompiledConstraint, Compiler, CompilerStats
from .constraints import Constraint, ConstraintKind
from .manager import AcceptResult, BitmaskBatch, RequestStatus, ScheduleEntry, StructuredOutputManager

__all__ = [
    "Vocabulary", "load_vocabulary",
    "Constraint", "ConstraintKind",
    "Compiler", "CompiledConstraint", "CompilerStats",
    "StructuredOutputManager", "RequestStatus", "AcceptResult", "BitmaskBatch", "ScheduleEntry",
]
