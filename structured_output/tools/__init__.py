"""Tool choice: constraints for tool calls in each model's own syntax, and readers for them.

    from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader
    c = build_tool_constraint(tools, "required", format="hermes", parallel_tool_calls=False)
    mgr.add_request(rid, c, prompt_ids)          # c is None when the request asks for no constraint
    ...
    result = get_tool_reader("hermes", tools, "required").read_ids(ids_after_thinking, vocabulary)
    result.content, [call.to_openai() for call in result.calls]

``read_ids`` takes a call marker only where the model produced the control token; ``read(text)`` (for
callers without ids) trusts the text, so marker text in free text reads as a call there.

Formats (``list_tool_formats()``): hermes (qwen3), qwen3_coder, qwen3_5, qwen3_6 (qwen3_xml), llama3_json, mistral,
deepseek_v3, deepseek_v31, deepseek_v32, deepseek_v4, kimi_k2, glm47, minimax_m2, gemma4, openai
(harmony), json (no model syntax: a JSON array of calls), and one format or alias for each of vLLM 0.34's
tool-parser names (``docs/names.md`` lists every name with its syntax and markers; ``python -m
thinkgate.names`` prints it). Each is one declarative definition from which
both its constraint and its reader are built: the table is ``formats.py``, the machinery that builds
them ``call_format.py``; harmony (``harmony.py``), json (``json_calls.py``) and inkling (``inkling.py``: typed blocks)
are classes of their own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.constraints import Constraint
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, CallFormat, ToolFormat
from .formats import get_tool_format, list_tool_formats, register_tool_format
from .harmony import HarmonyFormat
from .json_calls import JsonCallsFormat
from .marked import MAX_ARGUMENT_DEPTH, MarkedText
from .pending import MarkedDecoder
from .policy import CallPolicy
from .request import (MAX_TOOL_SCHEMA_DEPTH, STRICTNESS_LEVELS, KeyOrder, Strictness, ToolChoiceMode, ToolRequest,
                      ToolSpec, normalize_tool_request, tool_calls_json_schema, with_key_order)
from .results import ToolCall, ToolCallsResult
from .call_delta import CallDelta
from .stream import ToolStream, ToolStreamDelta

__all__ = [
    "build_tool_constraint", "get_tool_reader", "ToolReader", "list_tool_formats", "get_tool_format",
    "register_tool_format", "normalize_tool_request", "tool_calls_json_schema",
    "ToolRequest", "ToolSpec", "ToolCall", "ToolCallsResult", "ToolFormat", "CallFormat", "HarmonyFormat",
    "JsonCallsFormat", "Strictness", "KeyOrder", "ToolChoiceMode", "STRICTNESS_LEVELS", "DEFAULT_TOOL_MAX_WHITESPACE",
    "MarkedText", "CallPolicy", "MAX_ARGUMENT_DEPTH", "MAX_TOOL_SCHEMA_DEPTH", "ToolStream", "ToolStreamDelta",
    "MarkedDecoder", "CallDelta", "WARM_UP_TOOL", "tool_format_warm_up",
]


def build_tool_constraint(
    tools: Sequence[Mapping[str, Any]] | None,
    tool_choice: str | Mapping[str, Any] | None = "auto",
    *,
    format: str,
    parallel_tool_calls: bool = True,
    strictness: Strictness = "auto",
    vocabulary: Vocabulary | None = None,
    max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE,
    key_order: KeyOrder = "any",
) -> Constraint | None:
    """The constraint for an OpenAI-shaped tool request in ``format``'s call syntax, or None when the
    request asks for none (``auto`` / ``none`` without a strict tool or a strictness that asks).

    The constraint applies to the output after the thinking (the manager gates it), except for the
    ``openai`` harmony format, which covers the whole output (``Constraint.covers_reasoning``: the
    manager applies it from the first token).
    Markers are named as token strings; the manager resolves them. With ``vocabulary`` the free text
    of ``auto`` excludes every control token but the stop tokens (not only the family's markers), and a
    marker that is ordinary text in that vocabulary is matched as text. ``max_whitespace`` caps
    consecutive whitespace inside JSON arguments (None: no cap). ``key_order``: ``"any"`` (default) admits
    an enforced tool's argument keys in any order where the format's template keeps the caller's order
    (every format but ``gemma4``, whose template sorts): a key written twice or a required key left out
    is then caught by the key check when the output ends (the request ends in ``ERROR``), not masked;
    ``"schema"`` admits the schema's order only, exact token by token (what xgrammar's JSON schemas do).

    Raises ``ValueError`` for a bad request (see :func:`normalize_tool_request`), an unknown format
    (listing the known ones), or a schema the format cannot write. A template-reading format (``hf`` /
    ``beam``) needs ``vocabulary``, whose response template gives its syntax (``ValueError`` without it).
    The caller's tools are never mutated."""
    fmt = get_tool_format(format).for_vocabulary(vocabulary)
    if max_whitespace is not None and (isinstance(max_whitespace, bool) or not isinstance(max_whitespace, int)
                                       or max_whitespace < 1):
        raise ValueError(f"max_whitespace must be a positive integer or None, got {max_whitespace!r}")
    request = normalize_tool_request(tools, tool_choice, parallel_tool_calls=parallel_tool_calls,
                                     strictness=strictness)
    request = with_key_order(request, key_order)
    return fmt.constraint(request, vocabulary=vocabulary, max_whitespace=max_whitespace)


WARM_UP_TOOL: Mapping[str, Any] = {"type": "function", "function": {
    "name": "warm_up", "strict": True, "parameters": {
        "type": "object", "required": ["s", "n", "i", "b", "e", "a", "o"],
        "properties": {"s": {"type": "string"}, "n": {"type": "number"}, "i": {"type": "integer"},
                       "b": {"type": "boolean"}, "e": {"type": "string", "enum": ["x", "y"]},
                       "a": {"type": "array", "items": {"type": "string"}},
                       "o": {"type": "object", "properties": {"k": {"type": "string"}}},
                       "f": {"type": "object"}, "u": {"type": "array", "items": {"type": "integer"}}}}}}
"""The tool of :func:`tool_format_warm_up`: a parameter of each value kind the formats write differently."""


def tool_format_warm_up(format: str, *, vocabulary: Vocabulary | None = None,
                        max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> tuple[Constraint, ...]:
    """The constraints to warm a compiler with (``Compiler(vocabulary, warm_up=...)``) for a model served with
    tool format ``format``: :data:`WARM_UP_TOOL` forced (``"required"``) and in free text (``"auto"``, the tool
    strict), built as :func:`build_tool_constraint` builds a request's (pass the same ``vocabulary`` and
    ``max_whitespace``). Compiling them at start-up puts the rules every tool set of the format repeats (its
    markers, its raw and quoted string values, its free text) in each compile worker's xgrammar cache, so the
    first tool request of each worker computes only its own tools' rules (``python -m bench tools``:
    ``cold_warm_ms``). ``ValueError`` as :func:`build_tool_constraint` raises it."""
    out = []
    for choice in ("required", "auto"):
        c = build_tool_constraint([WARM_UP_TOOL], choice, format=format, vocabulary=vocabulary,
                                  max_whitespace=max_whitespace)
        if c is not None:
            out.append(c)
    return tuple(out)


class ToolReader:
    """Reads the calls of one request's output in one format (the same definition as its constraint).

    Two entry points, the same result type (content and calls; text that does not follow the call
    syntax stays content; the reader never raises on model output):

    - ``read_ids(token_ids, vocabulary)`` (or ``read(token_ids=..., vocabulary=...)``): the generated
      ids after the thinking (for ``openai``: the whole output). A marker of the call syntax that is a
      control token in ``vocabulary`` is taken only where the model produced that token; the same
      characters written with ordinary tokens are content. Use this whenever you have the ids.
    - ``read(text)``: the decoded text (control tokens written out). It *trusts the text*: a marker's
      characters count as the marker, so free text that spells ``<tool_call>`` with ordinary tokens
      reads as a call. For callers without ids.

    Whatever the entry point, the request's rules apply (:mod:`.policy`): ``tool_choice="none"`` gives
    no calls; with parallel calls off (or a named function) only the first call is returned and later
    ones stay content; a call to a tool the request does not allow (outside ``allowed_tools``, another
    than the named one, or not declared) stays content; the arguments of a tool the constraint checks
    (``strict: true``, strictness ``"parameter"``, or a forced call without ``strict: false``) are
    validated against its JSON schema, and a violating call stays content. Arguments nested deeper than
    :data:`MAX_ARGUMENT_DEPTH` are not read as a call. ``read_undeclared``: calls to tools the request did
    not declare are read too (``tool_table.py``; ``auto`` without ``allowed_tools`` only), as vLLM's
    parsers read them. Stateless after construction; safe to share."""

    def __init__(self, format: str, tools: Sequence[Mapping[str, Any]] | None,
                 tool_choice: str | Mapping[str, Any] | None = "auto", *, parallel_tool_calls: bool = True,
                 strictness: Strictness = "auto", read_undeclared: bool = False,
                 vocabulary: Vocabulary | None = None) -> None:
        fmt = get_tool_format(format)
        self.format = fmt if vocabulary is None else fmt.for_vocabulary(vocabulary)
        self.request = normalize_tool_request(tools, tool_choice, parallel_tool_calls=parallel_tool_calls,
                                              strictness=strictness, read_undeclared=read_undeclared)
        self.policy = CallPolicy(self.request, builtin=self.format.supports_builtin_tools)

    def read(self, text: str | None = None, *, token_ids: Iterable[int] | None = None,
             vocabulary: Vocabulary | None = None) -> ToolCallsResult:
        """Read ``text`` (trusted, see the class docstring), or ``token_ids`` decoded with ``vocabulary``
        (markers only at control tokens). ``ValueError`` for a wrong call: both or neither of text and
        ids, ids without a vocabulary, an id the vocabulary does not define."""
        if token_ids is not None:
            if text is not None:
                raise ValueError("pass text or token_ids, not both")
            if vocabulary is None:
                raise ValueError("token_ids need the vocabulary that decodes them")
            return self.read_ids(token_ids, vocabulary)
        if vocabulary is not None:
            raise ValueError("vocabulary is only used with token_ids")
        if not isinstance(text, str):
            raise ValueError(f"text must be a str, got {type(text).__name__}")
        return self.format.read_marked(MarkedText.trusted(text), self.request, self.policy)

    def read_ids(self, token_ids: Iterable[int], vocabulary: Vocabulary) -> ToolCallsResult:
        """Read the output given as token ids: call markers count only where they are control tokens."""
        if isinstance(token_ids, (str, bytes)):
            raise ValueError("token_ids must be a sequence of ints")
        fmt = self.format.for_vocabulary(vocabulary)
        return fmt.read_marked(MarkedText.from_ids(token_ids, vocabulary), self.request, self.policy)

    def stream(self, vocabulary: Vocabulary, *, stream_arguments: bool = False) -> ToolStream:
        """A streaming reader for one output of this request (:mod:`.stream`): fed the pieces
        :class:`MarkedDecoder` makes of the ids, it gives the calls and content ``read_ids`` gives.
        ``stream_arguments``: the output was written under this request's constraint, so each call may go
        out as it is written (its name, then its arguments' text) rather than once decided."""
        return self.format.for_vocabulary(vocabulary).new_stream(self.request, self.policy, vocabulary,
                                                                 stream_arguments=stream_arguments)


def get_tool_reader(format: str, tools: Sequence[Mapping[str, Any]] | None,
                    tool_choice: str | Mapping[str, Any] | None = "auto", *, parallel_tool_calls: bool = True,
                    strictness: Strictness = "auto", vocabulary: Vocabulary | None = None) -> ToolReader:
    """A :class:`ToolReader` for ``format`` and this request (same arguments as the constraint)."""
    return ToolReader(format, tools, tool_choice, parallel_tool_calls=parallel_tool_calls, strictness=strictness,
                      vocabulary=vocabulary)
