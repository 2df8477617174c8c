"""One tool-parser name, several call syntaxes of one family's generations (GigaChat 3 writes
``function call<|role_sep|>\\n{...}``, GigaChat 3.1 ``<|function_call|>{...}``; vLLM's ``gigachat3`` reads both).

:class:`AlternativeFormats` is a format made of others (each usually a :class:`~.call_format.CallFormat`):

- the constraint is the first alternative's whose markers are all control tokens of the vocabulary
  (the model's own generation: its vocabulary has its markers); without a vocabulary, the first one;
  ``ValueError`` when the vocabulary has the markers of none;
- the reader reads with each alternative in order and returns the first result that has calls (all
  content when none reads a call): one output is written in one generation's syntax;
- the streaming reader: for an output written under this format's constraint (``stream_arguments``), the
  constrained alternative's own stream (calls go out as they are written); otherwise the output is held
  and read whole at the end (either syntax may come).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, ToolFormat
from .marked import MarkedText
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCallsResult
from .stream import HeldStream, ToolStream

__all__ = ["AlternativeFormats"]


@dataclass(eq=False)
class AlternativeFormats(ToolFormat):
    """See the module docstring. ``alternatives``: the syntaxes, newest generation first."""

    name: str
    alternatives: tuple[ToolFormat, ...]
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if not self.alternatives:
            raise ValueError(f"format {self.name!r}: no alternatives")
        self.markers = tuple(dict.fromkeys(m for f in self.alternatives for m in f.markers))

    @property
    def required_markers(self) -> tuple[str, ...]:
        # a vocabulary needs the markers of one alternative; the first one's are the newest generation's
        return self.alternatives[0].required_markers

    def any_order_tools(self, request: ToolRequest) -> list[str]:
        # the key check reads the output back with this format (both syntaxes); every alternative writes
        # its arguments alike, so the first one says which tools take their keys in any order
        return self.alternatives[0].any_order_tools(request)

    def _for(self, vocabulary: Vocabulary | None) -> ToolFormat:
        if vocabulary is None:
            return self.alternatives[0]
        for f in self.alternatives:
            if all(m in vocabulary.special_tokens for m in f.required_markers):
                return f
        raise ValueError(f"tool format {self.name!r}: the vocabulary {vocabulary.name!r} has the control tokens of "
                         f"none of its syntaxes ({', '.join(repr(f.required_markers) for f in self.alternatives)})")

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        return self._for(vocabulary).structural_tag(request, vocabulary=vocabulary, max_whitespace=max_whitespace)

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        if stream_arguments:
            return self._for(vocabulary).new_stream(request, policy, vocabulary, stream_arguments=True)
        return HeldStream(self, request, policy, vocabulary)

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        policy = policy or CallPolicy(request)
        first: ToolCallsResult | None = None
        for f in self.alternatives:
            result = f.read_marked(src, request, policy)
            if result.calls:
                return result
            first = first or result
        assert first is not None
        return first
