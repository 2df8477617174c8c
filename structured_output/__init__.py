"""Structured output for reasoning models: the scheduler-facing manager, constraints and tool choice.

    from thinkgate.structured_output import StructuredOutputManager, Constraint
    mgr = StructuredOutputManager(load_vocabulary("qwen3_6"), "qwen3")
    mgr.add_request("r1", Constraint.json_schema(schema), prompt_token_ids)
    ...  # every step: batch = mgr.grammar_bitmask(schedule); apply; sample; mgr.accept_tokens(...)

    # tool_choice "required" / named, in the model's own call syntax, read back the same way
    c = build_tool_constraint(tools, "required", format="qwen3", parallel_tool_calls=False)
    calls = get_tool_reader("qwen3", tools, "required").read(text_after_thinking).calls

    # the front end: model output -> OpenAI message / stream deltas
    parser = Parser(vocabulary, reasoning="qwen3", tools="qwen3_6")
    parser.request(tools=tools, prompt_token_ids=prompt).parse(output_ids).message

See :class:`StructuredOutputManager` for lifetimes, thread-safety and the step protocol.
"""

from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary

from .compilation.compiler import CompiledConstraint, Compiler, CompilerStats
from .compilation.constraints import Constraint, ConstraintKind
from .frontend.parse_request import RequestParser
from .frontend.parse_result import ParseResult, StreamEnd
from .frontend.parser import Parser
from .step.manager import AcceptResult, BitmaskBatch, RequestStatus, ScheduleEntry, StructuredOutputManager
from .step.overlap import PendingBitmask
from .step.report import ConstraintReport
from .step.reserve import ReservationError
from .tools import (ToolCall, ToolCallsResult, ToolReader, ToolRequest, build_tool_constraint, get_tool_format,
                    get_tool_reader, list_tool_formats, normalize_tool_request, register_tool_format,
                    tool_format_warm_up)

__all__ = [
    "Vocabulary", "load_vocabulary",
    "Constraint", "ConstraintKind",
    "Compiler", "CompiledConstraint", "CompilerStats",
    "StructuredOutputManager", "RequestStatus", "AcceptResult", "BitmaskBatch", "ScheduleEntry",
    "PendingBitmask", "ConstraintReport", "ReservationError",
    "build_tool_constraint", "get_tool_reader", "ToolReader", "list_tool_formats", "get_tool_format",
    "register_tool_format", "normalize_tool_request", "ToolRequest", "ToolCall", "ToolCallsResult",
    "tool_format_warm_up", "Parser", "RequestParser", "ParseResult", "StreamEnd",
]
