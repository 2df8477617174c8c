"""One request's view of a :class:`~.parser.Parser`: its whole output parsed, or its stream, delta by delta.

How an output is split (whole and streamed alike):

- **reasoning**: the reasoning parser's text split (its stream, fed the output; markers removed), driven by
  the token ids (``text``, when given, supplies the characters, see ``ReasoningStream.feed``). With
  ``include_reasoning=False`` the reasoning is not returned (the message's ``reasoning`` is None and a delta
  holding only reasoning is None); the split itself does not change. (The request's chat_template_kwargs
  reach the reasoning parser: ``enable_thinking``, and ``include_reasoning: false`` there, which makes the
  whole output content, as the engine core's manager reads it.)
- **content and tool_calls**, when the request has tools (and tool_choice is not ``"none"``): the tool
  format's reader on the token ids after the reasoning (for a format whose constraint covers the reasoning,
  harmony: on the whole output). The whole path is ``ToolReader.read_ids``; the streaming path is the
  format's streaming reader (``tools/stream.py``), which gives the same content and calls for every chunking.
  Without tools, the content is the reasoning parser's content text (all the text without a reasoning
  parser).
- **how a call streams** depends on ``constrained`` (whether the output was generated under thinkgate's tool
  constraint of this request; default: true when tool_choice is ``"required"`` or names a function, false
  otherwise; true for an ``auto`` request with a strict tool, or a strictness, when the server applied its
  constraint):

  - constrained: a call that starts is well-formed, so it streams as it is written, in the OpenAI form: its
    first delta (index, id, type, name; arguments ``""`` or what is known) as soon as its name is read and
    the request allows a call of that tool there, then deltas of more argument text (index, arguments).
    Every concatenation of a call's argument fragments is a prefix of its arguments in the whole parse, and
    all of them are those arguments. A call cut by max_tokens keeps its first delta and the argument text
    sent before the cut (finish_reason ``length`` tells the client that it is incomplete; the whole parse
    has no such call, its text is content there); the rest of its text is dropped.
  - not constrained (``auto``): a call goes out in one delta once decided (index, id, type, name and its
    whole arguments), since a call that turns out malformed must stay content and a stream cannot take a
    call back.
- **finish_reason**: ``tool_calls`` when calls were read and the engine stopped normally (``stop``); any
  other reason kept (``length``: the client sees that the output, and maybe a call in it, was cut).
- **stop tokens** (the vocabulary's, e.g. ``<|im_end|>``, harmony's ``<|call|>``) that the engine leaves in the
  output ids are not part of the message (they end the output, as a detokenizer drops them); they count in
  ``completion_tokens``.
- **usage**: ``completion_tokens`` (ids of the output) and ``completion_tokens_details.reasoning_tokens``
  (the reasoning parser's count, markers excluded).

Cost: ``parse_delta`` is O(its delta) (plus the read of a call its delta completes, once per call, and for a
constrained request an incomplete opening of a call or parameter read again, bounded);
``parse`` and ``finish`` are O(the output).
"""

from __future__ import annotations

import codecs
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from thinkgate.reasoning.base import ReasoningParser, ReasoningStream, ReasoningTracker
from thinkgate.reasoning.vocabulary import Vocabulary

from ..step.report import ConstraintReport
from ..tools import MarkedDecoder, Strictness, ToolCall, ToolFormat, ToolReader, ToolStream
from ..tools.call_delta import CallDelta, merge_call_deltas
from .parse_result import ParseResult, StreamEnd, chunk_delta, finish_reason_for

__all__ = ["RequestParser", "ModelSetup"]


class ModelSetup(Protocol):
    """What a request's view reads of its model's :class:`~.parser.Parser` (declared here: ``parser.py``
    builds the views, so this module does not import it)."""

    vocabulary: Vocabulary
    chat_template_kwargs: dict[str, Any]
    reasoning_parser: ReasoningParser | None
    tool_format: ToolFormat | None


class RequestParser:
    """The parse of one request's output (see the module docstring); built by ``Parser.request``.

    ``parse`` keeps no state. ``parse_delta`` / ``finish`` keep the state of one stream: call them from one
    thread at a time, in the order of the output (a view per request; views share nothing but the Parser)."""

    def __init__(self, parser: ModelSetup, *, tools: Sequence[Mapping[str, Any]] | None,
                 tool_choice: str | Mapping[str, Any] | None, parallel_tool_calls: bool, include_reasoning: bool,
                 chat_template_kwargs: Mapping[str, Any] | None, prompt_token_ids: Sequence[int],
                 strictness: Strictness, constrained: bool | None = None, read_undeclared: bool = False) -> None:
        if not isinstance(include_reasoning, bool):
            raise ValueError(f"include_reasoning must be a bool, got {type(include_reasoning).__name__}")
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, Mapping):
            raise ValueError("chat_template_kwargs must be a mapping")
        self.parser = parser
        self.vocabulary = parser.vocabulary
        self.include_reasoning = include_reasoning
        self.kwargs: dict[str, Any] = {**parser.chat_template_kwargs, **(chat_template_kwargs or {})}
        self.prompt_token_ids: list[int] = self._ids(prompt_token_ids, "prompt_token_ids")
        self._stops = self.vocabulary.stop_token_ids
        self.reader: ToolReader | None = None
        fmt = parser.tool_format
        forced = tool_choice not in ("auto", "none", None)  # "required", a named function, allowed tools
        wants_calls = ((bool(tools) or read_undeclared) and tool_choice != "none") or forced
        if wants_calls and fmt is None and (tools or forced):
            raise ValueError("the request asks for tool calls (tools or tool_choice), but this Parser has no tool "
                             "format to read them with")
        if fmt is not None and (tools is not None or forced or read_undeclared):
            reader = ToolReader(fmt.name, tools, tool_choice, parallel_tool_calls=parallel_tool_calls,
                                strictness=strictness, read_undeclared=read_undeclared)  # validates the request
            # even when no call is read
            if wants_calls:
                self.reader = reader
        if constrained is not None and not isinstance(constrained, bool):
            raise ValueError(f"constrained must be a bool or None, got {type(constrained).__name__}")
        if constrained and self.reader is not None and not self.reader.request.constrained:
            raise ValueError("constrained=True, but this request gets no tool constraint (tool_choice auto without "
                             "a strict tool and with strictness 'auto'), so its calls are not guaranteed "
                             "well-formed")
        mode = self.reader.request.mode if self.reader is not None else None
        self.constrained: bool = (mode in ("required", "named")) if constrained is None else constrained
        self._covers = fmt is not None and fmt.covers_reasoning
        # stream state (built on the first parse_delta)
        self._started = False
        self._finished = False
        self._rstream: ReasoningStream | None = None
        self._tracker: ReasoningTracker | None = None
        self._decoder: MarkedDecoder | None = None
        self._tstream: ToolStream | None = None
        self._text_decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._ids_seen: list[int] = []  # the output's ids but stop tokens (for the reasoning count at the end)
        self._count = 0
        self._calls_sent = 0

    # -- input checks ----------------------------------------------------------------------------
    def _ids(self, token_ids: Sequence[int], what: str = "token_ids") -> list[int]:
        if isinstance(token_ids, (str, bytes)) or not isinstance(token_ids, Sequence):
            raise ValueError(f"{what} must be a sequence of ints")
        n = len(self.vocabulary.token_bytes)
        ids = list(token_ids)
        for t in ids:
            if isinstance(t, bool) or not isinstance(t, int) or not 0 <= t < n:
                raise ValueError(f"{what}: token id {t!r} is not in vocabulary {self.vocabulary.name!r} (size {n})")
        return ids

    @staticmethod
    def _text(text: str | None, what: str) -> str | None:
        if text is not None and not isinstance(text, str):
            raise ValueError(f"{what} must be a str or None, got {type(text).__name__}")
        return text

    @staticmethod
    def _reason(finish_reason: str) -> str:
        if not isinstance(finish_reason, str) or not finish_reason:
            raise ValueError(f"finish_reason must be a non-empty str, got {finish_reason!r}")
        return finish_reason

    # -- whole output ----------------------------------------------------------------------------
    def parse(self, token_ids: Sequence[int], text: str | None = None, finish_reason: str = "stop", *,
              constraint: ConstraintReport | None = None) -> ParseResult:
        """The whole generated output (``text``: its decoded text, optional) -> :class:`ParseResult`.
        ``constraint``: the request's constraint report (``StructuredOutputManager.constraint_report``), carried
        in the response as the ``thinkgate_constraint`` extension field."""
        self._report(constraint)
        all_ids = self._ids(token_ids)
        ids = [t for t in all_ids if t not in self._stops]
        text = self._text(text, "text")
        finish_reason = self._reason(finish_reason)
        rp = self.parser.reasoning_parser
        if rp is not None:
            stream = rp.new_stream(self.prompt_token_ids, self.kwargs)
            d1, d2 = stream.feed(ids, text), stream.finish()
            reasoning = (d1.reasoning or "") + (d2.reasoning or "")
            content_text = (d1.content or "") + (d2.content or "")
            split = rp.split(ids, self.prompt_token_ids, self.kwargs)
            content_ids, reasoning_tokens = split.content_ids, len(split.reasoning_ids)
        else:
            reasoning, reasoning_tokens = "", 0
            content_text = text if text is not None else self.vocabulary.decode(ids)
            content_ids = ids
        calls: tuple[ToolCall, ...] = ()
        if self.reader is not None:
            result = self.reader.read_ids(ids if self._covers else content_ids, self.vocabulary)
            content, calls = result.content, result.calls
        else:
            content = content_text or None
        return ParseResult(reasoning=(reasoning or None) if self.include_reasoning else None, content=content,
                           tool_calls=calls, finish_reason=finish_reason_for(finish_reason, bool(calls)),
                           completion_tokens=len(all_ids), reasoning_tokens=reasoning_tokens, constraint=constraint)

    @staticmethod
    def _report(constraint: object) -> None:
        if constraint is not None and not isinstance(constraint, ConstraintReport):
            raise ValueError(f"constraint must be a ConstraintReport (StructuredOutputManager.constraint_report) or "
                             f"None, got {type(constraint).__name__}")

    # -- streaming -------------------------------------------------------------------------------
    def _start(self) -> None:
        rp = self.parser.reasoning_parser
        if rp is not None:
            self._rstream = rp.new_stream(self.prompt_token_ids, self.kwargs)
            if self.reader is not None and not self._covers:
                self._tracker = rp.new_tracker(self.prompt_token_ids, self.kwargs)
        if self.reader is not None:
            self._decoder = MarkedDecoder(self.vocabulary)
            self._tstream = self.reader.stream(self.vocabulary, stream_arguments=self.constrained)
        self._started = True

    def parse_delta(self, delta_ids: Sequence[int], delta_text: str | None = None) -> dict[str, Any] | None:
        """The next generated ids (``delta_text``: their decoded text, optional) -> the chunk's ``delta``
        (``reasoning``, ``content``, ``tool_calls``) or None when there is nothing new to send.
        ``ValueError`` for bad ids, or after :meth:`finish`."""
        if self._finished:
            raise ValueError("this stream has finished; a request view streams one output")
        all_ids = self._ids(delta_ids, "delta_ids")
        ids = [t for t in all_ids if t not in self._stops]
        delta_text = self._text(delta_text, "delta_text")
        if not self._started:
            self._start()
        self._count += len(all_ids)
        self._ids_seen.extend(ids)
        reasoning: str | None = None
        if self._rstream is not None:
            d = self._rstream.feed(ids, delta_text)
            reasoning, content = d.reasoning, d.content
        else:
            content = delta_text if delta_text is not None else self._text_decoder.decode(
                self.vocabulary.decode_bytes(ids))
        calls: tuple[CallDelta, ...] = ()
        if self._tstream is not None:
            content_ids = ids
            if self._tracker is not None:
                was_ended = self._tracker.ended
                end = self._tracker.advance(ids)
                content_ids = ids if was_ended else ids[end.content_start:] if end is not None else []
            td = self._tstream.feed(self._decoder.feed(content_ids))  # type: ignore[union-attr]
            content, calls = td.content, td.fragments
        return self._delta(reasoning, content, calls)

    def finish(self, finish_reason: str = "stop", *, constraint: ConstraintReport | None = None) -> StreamEnd:
        """The end of the stream: the last delta (text held back until now), the finish_reason, the usage,
        and the request's constraint report when given (see :meth:`parse`). The view streams one output:
        afterwards ``parse_delta`` raises."""
        finish_reason = self._reason(finish_reason)
        self._report(constraint)
        if self._finished:
            raise ValueError("this stream has already finished")
        if not self._started:
            self._start()
        self._finished = True
        reasoning: str | None = None
        content: str | None = None
        if self._rstream is not None:
            d = self._rstream.finish()
            reasoning, content = d.reasoning, d.content
        else:
            content = self._text_decoder.decode(b"", final=True)
        calls: tuple[CallDelta, ...] = ()
        if self._tstream is not None:
            d1 = self._tstream.feed(self._decoder.feed([], final=True))  # type: ignore[union-attr]
            d2 = self._tstream.finish()
            content, calls = d1.content + d2.content, merge_call_deltas(d1.fragments + d2.fragments)
        delta = self._delta(reasoning, content, calls)
        rp = self.parser.reasoning_parser
        reasoning_tokens = 0 if rp is None else rp.count_reasoning_tokens(self._ids_seen, self.prompt_token_ids,
                                                                           self.kwargs)
        return StreamEnd(delta, finish_reason_for(finish_reason, self._calls_sent > 0), self._count,
                         reasoning_tokens, constraint)

    def _delta(self, reasoning: str | None, content: str | None, calls: tuple[CallDelta, ...]) -> dict[str, Any] | None:
        self._calls_sent += sum(1 for c in calls if c.is_first)
        return chunk_delta(reasoning if self.include_reasoning else None, content, calls)
