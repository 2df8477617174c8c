"""The front end: one :class:`Parser` per model, from model output to the OpenAI message and stream deltas.

    parser = Parser(vocabulary, reasoning="qwen3", tools="qwen3_6")      # once per model
    req = parser.request(tools=body["tools"], tool_choice="auto", prompt_token_ids=prompt)   # per request
    req.parse(token_ids, finish_reason="stop").to_openai()               # whole output
    delta = req.parse_delta(new_ids)                                     # streaming: a chunk's delta or None
    end = req.finish("stop")                                             # the last delta, finish_reason, usage

Lifetimes
---------
- A **Parser** is composed by name from a reasoning parser (``reasoning/registry.py``) and a tool format
  (``structured_output/tools/formats.py``), either of which may be None, and built once per model. It is
  validated against the vocabulary at construction: the reasoning parser resolves its markers (a missing
  one is a ``ValueError`` naming it) and every marker of the tool format's call syntax must be a single
  token (:attr:`~thinkgate.structured_output.tools.ToolFormat.required_markers`; a missing one is a ``ValueError`` naming it); a
  template-reading format (``hf`` / ``beam``) is first built from the vocabulary's response template. It is
  immutable afterwards and shared by every request and thread.
- A **request view** (:meth:`Parser.request`, a :class:`~.parse_request.RequestParser`) holds one request's
  tools, tool_choice, parallel_tool_calls, include_reasoning, chat_template_kwargs and prompt ids. Its
  ``parse`` is stateless (call it any number of times); its ``parse_delta`` / ``finish`` keep the state of
  one stream. A bad request is a ``ValueError`` naming the cause, at ``request()``; nothing is shared
  between requests, so one request's error touches no other.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.reasoning.base import ReasoningParser
from thinkgate.reasoning.vocabulary import Vocabulary

from ..tools import Strictness, ToolFormat, get_tool_format
from .parse_request import RequestParser

__all__ = ["Parser"]


class Parser:
    """Model output -> OpenAI message / stream deltas for one model (see the module docstring)."""

    def __init__(self, tokenizer: Any, reasoning: str | None = None, tools: str | None = None, *,
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        """``tokenizer``: a :class:`~thinkgate.reasoning.vocabulary.Vocabulary` or a Hugging Face
        tokenizer. ``reasoning``: a reasoning parser name (or plugin path), or None when the model does
        not reason. ``tools``: a tool format name, or None when the model's calls are not read.
        ``chat_template_kwargs``: defaults for every request (a request's own override them)."""
        if chat_template_kwargs is not None and not isinstance(chat_template_kwargs, Mapping):
            raise ValueError("chat_template_kwargs must be a mapping")
        self.vocabulary: Vocabulary = Vocabulary.coerce(tokenizer)
        self.chat_template_kwargs: dict[str, Any] = dict(chat_template_kwargs or {})
        self.reasoning_parser: ReasoningParser | None = None
        if reasoning is not None:
            if not isinstance(reasoning, str):
                raise ValueError(f"reasoning must be a parser name or None, got {type(reasoning).__name__}")
            self.reasoning_parser = get_reasoning_parser(reasoning)(self.vocabulary, self.chat_template_kwargs)
        self.tool_format: ToolFormat | None = None
        if tools is not None:
            fmt = get_tool_format(tools).for_vocabulary(self.vocabulary)  # hf / beam: the vocabulary's template
            for marker in fmt.required_markers:
                if self.vocabulary.token_id(marker) is None:
                    raise ValueError(f"tool format {fmt.name!r}: the vocabulary {self.vocabulary.name!r} has no "
                                     f"single token for the marker {marker!r}")
            self.tool_format = fmt

    def __repr__(self) -> str:
        r = self.reasoning_parser.name if self.reasoning_parser else None
        t = self.tool_format.name if self.tool_format else None
        return f"Parser({self.vocabulary.name!r}, reasoning={r!r}, tools={t!r})"

    def request(self, *, tools: Sequence[Mapping[str, Any]] | None = None,
                tool_choice: str | Mapping[str, Any] | None = "auto", parallel_tool_calls: bool = True,
                include_reasoning: bool = True, chat_template_kwargs: Mapping[str, Any] | None = None,
                prompt_token_ids: Sequence[int] = (), strictness: Strictness = "auto",
                constrained: bool | None = None, read_undeclared: bool = False) -> RequestParser:
        """The view of one request (see :class:`~.parse_request.RequestParser`). ``constrained``: whether the
        output is generated under thinkgate's tool constraint of this request (then calls stream as they
        are written: name first, then argument text); None: true for tool_choice ``"required"`` or a named
        function, false otherwise. ``ValueError`` for a bad request: malformed tools or tool_choice, tools
        that this parser cannot read (no tool format), a prompt id outside the vocabulary, kwargs that are
        not a mapping, ``constrained=True`` for a request that gets no constraint. ``read_undeclared``: read
        calls to tools the request did not declare too (with ``tool_choice`` ``"auto"``, no ``allowed_tools``;
        also when it declares none), as vLLM's own parsers do (the vLLM plugin's default); thinkgate's default
        reads declared tools only."""
        return RequestParser(self, tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel_tool_calls,
                             include_reasoning=include_reasoning, chat_template_kwargs=chat_template_kwargs,
                             prompt_token_ids=prompt_token_ids, strictness=strictness, constrained=constrained,
                             read_undeclared=read_undeclared)
