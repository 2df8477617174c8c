"""thinkgate's tool-call formats as vLLM 0.34 tool-parser plugins.

Load it with ``vllm serve MODEL --tool-parser-plugin thinkgate.engines.vllm.tool_parsers
--tool-call-parser thinkgate_qwen3_6 --enable-auto-tool-choice`` (the path of this file works too: vLLM's
``import_plugin`` then loads it as a module of its own name, which is why everything below imports
``thinkgate`` absolutely). Importing this module registers every thinkgate tool format with vLLM's
``ToolParserManager`` under ``thinkgate_<name>``, one per name of ``list_tool_formats(aliases=True)``
(``thinkgate_hermes``, ``thinkgate_qwen3_6``, ``thinkgate_deepseek_v4``, ``thinkgate_mistral`` ...).

Why a tool parser, not one of vLLM's unified parsers
----------------------------------------------------
vLLM 0.34 has unified parsers (``vllm/parser/``: ``Parser`` with ``parse`` / ``parse_delta``, and the
declarative ``ParserEngine``), but ``vllm serve`` selects them only by its built-in names: the flags
``--reasoning-parser`` and ``--tool-call-parser`` are composed into a ``DelegatingParser`` over the two
registered halves (``ParserManager._compose_parser``), and no flag or registry takes a whole ``Parser``
class. So thinkgate plugs in as the two halves, both engine-based (fed each delta's token ids), which is
what a unified parser gets too.

What vLLM does with a tool parser, and what each call does here
---------------------------------------------------------------
vLLM's serving layer composes the reasoning parser and the tool parser into one ``DelegatingParser``
per request (``vllm/parser/abstract_parser.py``); the tool parser object is built per request with the
tokenizer and the request's tools, and is given the request (tool_choice, parallel_tool_calls) with
every call. Per model, the plugin builds the vocabulary (``reasoning/vllm_plugin.py``'s
``vocabulary_of``, cached per tokenizer) and a thinkgate :class:`~.parser.Parser` for the format with no
reasoning parser (vLLM's reasoning parser has split the reasoning off already), both once; per request,
one :class:`~.parse_request.RequestParser` view of it. Construction checks the format's markers against
the vocabulary, so ``--tool-call-parser thinkgate_hermes`` on a model without ``<tool_call>`` fails at
startup (vLLM builds the composed parser once with the tokenizer), naming the marker.

- ``adjust_request`` (the front end, before generation; vLLM calls it on a parser object of its own):
  validates the request's tools and tool_choice (a ``ValueError`` naming the cause, for that request
  alone); turns off ``skip_special_tokens`` (the whole path reads the markers from the text); and for
  ``tool_choice`` ``"required"``, a named function, or tools marked ``strict`` puts thinkgate's
  constraint for the format (:func:`~.tools.build_tool_constraint`: a structural tag of the model's own
  call syntax, markers as tokens) into ``request.structured_outputs`` as vLLM 0.34 takes it
  (``structural_tag``, token names resolved to ids, since vLLM validates a tag without a tokenizer),
  replacing a ``response_format`` as vLLM's own tool parsers do. The calls the grammar allows are then
  exactly the calls the reader reads. Argument keys are taken in the schema's order
  (``key_order="schema"``): vLLM runs no check of the finished output, so the any-order grammar, whose
  duplicate and missing keys thinkgate's manager catches at the end, would let them through here.
- ``extract_tool_calls(model_output, request)`` (a whole output): vLLM 0.34's ``DelegatingParser.parse``
  hands a tool parser only the text after the reasoning, never the ids, so the text is encoded with the
  vocabulary (special-token text becomes the control token) and the view's ``parse`` reads those ids:
  the same reader as the stream, so a whole output and its stream give the same message whenever the
  model's ids are its text's encoding. A marker the model spelled with ordinary tokens therefore counts
  as the marker here (as for vLLM's own parsers, which read text), but not in the stream. (A vocabulary
  without an encoder is read as text, ``ToolReader.read``.)
- ``extract_tool_calls_streaming(..., delta_token_ids, request)`` (``engine_based_streaming = True``):
  each delta's token ids go to the view's ``parse_delta``: markers count only where the model wrote the
  control token, the cost is the delta's, the growing text is never read. ``finish_streaming()`` (vLLM
  calls it when the stream ends) returns what the view held back (``finish``).
- vLLM's observable behaviour, which its own unit tests exercise: a stream fed text only
  (``delta_token_ids`` empty) is read from the text's encoding (a tail that may grow into a control
  token held until the next delta); ``request=None`` is a request without tools; calls to tools the request
  did not declare are read, also when it declares none (as vLLM's parsers read any name; with
  ``THINKGATE_VLLM_DECLARED_TOOLS_ONLY=1`` they stay content, thinkgate's own default). Where the answer
  still differs from vLLM 0.34's parser of the same name, ``docs/vllm_tool_differences.md`` says how and why.
- Deltas map to vLLM's ``DeltaMessage`` field by field: ``content``, and each ``tool_calls`` item's
  ``index``, ``id``, ``type``, ``function.name``, ``function.arguments``, each passed on when present, so a
  call given in one delta or in several (its header, then argument fragments) maps the same way.
- ``supports_required_and_named = False``: vLLM then reads required and named calls with this parser
  (its default reads them as a bare JSON list, which is not the model's syntax); the request's rules
  (the named function only, parallel calls off) are the reader's.

Under vLLM's own xgrammar backend the structural tag compiles with vLLM's full-vocabulary tokenizer info
(control tokens are ordinary text there): the markers are matched by id, but JSON strings and free text
are not kept from producing control tokens, and with xgrammar 0.2.8 the DSML tags of ``deepseek_v32`` and
``deepseek_v4`` can reach a state that allows no token after a call's first parameter (seen on a string
parameter followed by an enum one: the model's own second parameter is masked;
``tests/integration/test_vllm_tool_constraint.py`` pins it). With thinkgate's
general plugin (``THINKGATE_VLLM_BACKEND=1``) the tag compiles with thinkgate's compiler
(``vllm_backend.handled_by_xgrammar``: it names its markers as tokens): control tokens never inside
strings or free text, and the DSML calls go through.
The ``openai`` (harmony) and ``muse`` / ``muse_glimmer`` formats' constraints cover the thinking, which vLLM's
gate does not apply a grammar to: their requests get no constraint from this plugin (vLLM serves harmony
through its own path; Muse's calls are read, not constrained, there).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from pydantic import BaseModel
from vllm.entrypoints.generate.base.protocol import (DeltaFunctionCall, DeltaMessage, DeltaToolCall,
                                                     ExtractedToolCallInformation, FunctionCall, ToolCall)
from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.responses.protocol import ResponsesRequest
from vllm.sampling_params import StructuredOutputsParams
from vllm.tool_parsers.abstract_tool_parser import ToolParser, ToolParserManager

from thinkgate.engines.vllm.reasoning_parsers import vocabulary_of
from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.structured_output.frontend.parse_request import RequestParser
from thinkgate.structured_output.frontend.parser import Parser
from thinkgate.structured_output.tools import build_tool_constraint, list_tool_formats
from thinkgate.structured_output.compilation.xgrammar_adapter import GrammarBuilder

from thinkgate.engines.registration import PerModel, register_subclasses

__all__ = ["PREFIX", "REGISTERED", "ThinkgateVllmToolParser", "register_vllm_tool_parsers", "request_tools",
           "to_vllm_delta", "vllm_tool_name"]

PREFIX = "thinkgate_"

def vllm_tool_name(fmt: str) -> str:
    """The name vLLM knows a thinkgate tool format by: ``thinkgate_<format>``."""
    return PREFIX + fmt


_PARSERS: PerModel[Parser] = PerModel(lambda vocab, fmt: Parser(vocab, None, fmt))
"""vocabulary -> format -> its Parser (no reasoning), built once per model (``ValueError`` naming a marker the
vocabulary lacks)"""
_BUILDERS: PerModel[GrammarBuilder] = PerModel(GrammarBuilder)


def _shared_parser(fmt: str, tokenizer: Any) -> Parser:
    return _PARSERS.get(vocabulary_of(tokenizer), fmt)


def _dump(obj: Any) -> Any:
    """A vLLM request field (a pydantic model, or already plain) as plain JSON-like data, None fields dropped."""
    return obj.model_dump(exclude_none=True) if isinstance(obj, BaseModel) else obj


def request_tools(request: Any) -> tuple[list[dict[str, Any]] | None, Any, bool]:
    """(tools, tool_choice, parallel_tool_calls) of a vLLM Chat Completions or Responses request in the
    OpenAI shapes thinkgate's tool requests take (``tools/request.py``). Only a function's ``name``,
    ``description``, ``parameters`` and ``strict`` are kept (vLLM's extensions such as ``defer_loading``
    mean nothing to the call syntax). No request (``None``, as vLLM's own tests pass): no tools, ``auto``."""
    if request is None:
        return None, "auto", True
    tools: list[dict[str, Any]] | None = None
    if request.tools is not None:
        tools = []
        for t in request.tools:
            d = _dump(t)
            fn = d.get("function") if isinstance(d.get("function"), Mapping) else d  # Chat, or flat Responses
            if d.get("type", "function") != "function":
                tools.append(d)  # a builtin tool: the format decides
                continue
            tools.append({"type": "function", "function": {k: fn[k] for k in ("name", "description", "parameters",
                                                                             "strict") if k in fn}})
    tool_choice = _dump(request.tool_choice)
    parallel = request.parallel_tool_calls
    return tools, tool_choice, True if parallel is None else bool(parallel)


def _forced(tool_choice: Any) -> bool:
    return tool_choice not in ("auto", "none", None)


def to_vllm_delta(delta: Mapping[str, Any] | None) -> DeltaMessage | None:
    """A thinkgate stream delta (``content``, ``tool_calls`` items of ``index``, ``id``, ``type``,
    ``function.name``, ``function.arguments``, each optional but the index) as vLLM's ``DeltaMessage``;
    None when it carries nothing. (``reasoning`` is vLLM's reasoning parser's, never the tool parser's.)"""
    if not delta:
        return None
    calls = []
    for c in delta.get("tool_calls", ()):
        fn = c.get("function")
        calls.append(DeltaToolCall(index=c["index"], id=c.get("id"), type=c.get("type"),
                                   function=None if fn is None else DeltaFunctionCall(name=fn.get("name"),
                                                                                    arguments=fn.get("arguments"))))
    content = delta.get("content")
    if content is None and not calls:
        return None
    return DeltaMessage(content=content, tool_calls=calls)


class _TextIds:
    """Token ids for a stream fed text only (``delta_token_ids`` empty, as vLLM's own tests feed parsers):
    each delta's text encoded with the vocabulary (a control token's text becomes the token, as in
    ``extract_tool_calls``), except a tail that may still grow into a control token's text, held until the
    next delta (or the end) shows what it is; the cut never falls inside a control token's text already
    complete. O(the delta) per delta."""

    def __init__(self, vocab: Vocabulary) -> None:
        self._vocab = vocab
        self._prefixes, self._longest, self._specials = _SPECIAL_TEXTS.get(vocab)
        self._held = ""

    def feed(self, text: str) -> list[int]:
        text = self._held + text
        n = len(text)
        start = max(0, n - self._longest)
        inside: set[int] = set()
        if self._specials is not None:
            for m in self._specials.finditer(text, max(0, start - self._longest)):
                inside.update(range(m.start() + 1, m.end()))
        cut = next((p for p in range(start, n) if p not in inside and text[p:] in self._prefixes), n)
        self._held = text[cut:]
        return self._vocab.encode(text[:cut]) if cut else []

    def finish(self) -> list[int]:
        held, self._held = self._held, ""
        return self._vocab.encode(held) if held else []


def _special_texts(vocab: Vocabulary) -> tuple[frozenset[str], int, re.Pattern[str] | None]:
    """(every proper prefix of a control token's text, the longest such text, a pattern finding them)."""
    texts = sorted((t for t in vocab.special_tokens if t), key=len, reverse=True)
    pattern = re.compile("|".join(map(re.escape, texts))) if texts else None
    return frozenset(t[:k] for t in texts for k in range(1, len(t))), max(map(len, texts), default=1), pattern


_SPECIAL_TEXTS: PerModel[tuple[frozenset[str], int, re.Pattern[str] | None]] = PerModel(_special_texts)
"""vocabulary -> its control-token texts, computed once per model"""


def _read_undeclared_default() -> bool:
    return os.environ.get("THINKGATE_VLLM_DECLARED_TOOLS_ONLY", "").strip().lower() not in ("1", "true", "yes")


class ThinkgateVllmToolParser(ToolParser):
    """vLLM's ``ToolParser`` over one thinkgate tool format (``format``, set per registered subclass); one
    object per request, as vLLM builds them (see the module docstring)."""

    format: ClassVar[str] = ""
    supports_required_and_named: bool = False
    structural_tag_model = None
    engine_based_streaming: bool = True

    def __init__(self, tokenizer: Any, tools: Any = None, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, tools)
        if not self.format:
            raise ValueError("ThinkgateVllmToolParser is a base class; use a registered thinkgate_<format>")
        self.parser: Parser = _shared_parser(self.format, tokenizer)
        self.read_undeclared: bool = _read_undeclared_default()
        """Read calls to tools the request did not declare (vLLM's parsers do); False with
        ``THINKGATE_VLLM_DECLARED_TOOLS_ONLY=1``: calls to undeclared tools stay content."""
        self._stream: RequestParser | None = None
        self._text_ids: _TextIds | None = None

    def _view(self, request: Any) -> RequestParser:
        """This request's view (``ValueError`` naming what is wrong with its tools or tool_choice)."""
        tools, tool_choice, parallel = request_tools(request)
        if not tools and self.read_undeclared:
            # a request without tools (vLLM's default tool_choice is then "none"): vLLM calls its tool
            # parser anyway and reads whatever calls the text holds
            tool_choice = "auto"
        return self.parser.request(tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel,
                                   read_undeclared=self.read_undeclared)

    # -- front end: the request ------------------------------------------------------------------
    def adjust_request(self, request: ChatCompletionRequest | ResponsesRequest
                       ) -> ChatCompletionRequest | ResponsesRequest:
        if request is None:
            return request
        tools, tool_choice, parallel = request_tools(request)
        if not tools or tool_choice == "none":
            return request
        self.parser.request(tools=tools, tool_choice=tool_choice, parallel_tool_calls=parallel)  # validates
        request.skip_special_tokens = False  # the whole path reads the markers from the text
        fmt = self.parser.tool_format
        assert fmt is not None  # every registered class names a format
        if fmt.covers_reasoning:
            return request  # vLLM's gate never applies a grammar to the thinking (module docstring)
        if not _forced(tool_choice) and request.extract_structured_outputs() is not None:
            return request  # auto beside the caller's own structured output: theirs applies, as in vLLM
        constraint = build_tool_constraint(tools, tool_choice, format=fmt.name, parallel_tool_calls=parallel,
                                           vocabulary=self.parser.vocabulary, key_order="schema")
        if constraint is None:
            return request
        tag, _ = _BUILDERS.get(self.parser.vocabulary).resolve_structural_tag(json.loads(constraint.spec))
        request.structured_outputs = StructuredOutputsParams(structural_tag=json.dumps(tag, ensure_ascii=False))
        if isinstance(request, ResponsesRequest):
            request.text = None
        else:
            request.response_format = None
        return request

    # -- a whole output --------------------------------------------------------------------------
    def extract_tool_calls(self, model_output: str, request: ChatCompletionRequest) -> ExtractedToolCallInformation:
        view = self._view(request)
        if view.reader is None:
            return ExtractedToolCallInformation(tools_called=False, tool_calls=[], content=model_output or None)
        vocab = self.parser.vocabulary
        if vocab.can_encode:  # the text's ids, markers where the text spells them (module docstring)
            parsed = view.parse(vocab.encode(model_output), model_output)
            content, found = parsed.content, parsed.tool_calls
        else:
            result = view.reader.read(model_output)
            content, found = result.content, result.calls
        calls = [ToolCall(id=c.id, function=FunctionCall(id=c.id, name=c.name, arguments=c.arguments)) for c in found]
        return ExtractedToolCallInformation(tools_called=bool(calls), tool_calls=calls, content=content)

    # -- streaming -------------------------------------------------------------------------------
    def extract_tool_calls_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                     previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                     delta_token_ids: Sequence[int], request: ChatCompletionRequest
                                     ) -> DeltaMessage | None:
        if self._stream is None:
            self._stream = self._view(request)
        if delta_token_ids:
            ids = list(delta_token_ids)
        elif delta_text:  # text only: its encoding (see _TextIds)
            if self._text_ids is None:
                self._text_ids = _TextIds(self.parser.vocabulary)
            ids = self._text_ids.feed(delta_text)
        else:
            return None
        return to_vllm_delta(self._stream.parse_delta(ids))

    def finish_streaming(self) -> DeltaMessage | None:
        """What the stream held back (an undecided call, a partial marker or character), at its end."""
        if self._stream is None:
            return None
        first = None
        if self._text_ids is not None:
            first = self._stream.parse_delta(self._text_ids.finish())
        last = self._stream.finish("stop").delta
        return to_vllm_delta(_merge(first, last))


def _merge(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """Two thinkgate stream deltas as one (content joined, tool-call items in order)."""
    if not a or not b:
        return dict(a or b) if (a or b) else None
    out: dict[str, Any] = {}
    content = (a.get("content") or "") + (b.get("content") or "")
    if content:
        out["content"] = content
    calls = [*a.get("tool_calls", ()), *b.get("tool_calls", ())]
    if calls:
        out["tool_calls"] = calls
    return out or None


def register_vllm_tool_parsers(formats: Iterable[str] | None = None) -> dict[str, type[ThinkgateVllmToolParser]]:
    """Register thinkgate tool formats with vLLM as ``thinkgate_<name>`` (every format name and alias by
    default); returns name -> class."""
    return register_subclasses(list_tool_formats(aliases=True) if formats is None else formats,
                               ThinkgateVllmToolParser, "format", prefix=PREFIX, module=__name__,
                               option="--tool-call-parser",
                               register=lambda name, cls: ToolParserManager.register_module(name, module=cls))


REGISTERED: Mapping[str, type[ThinkgateVllmToolParser]] = register_vllm_tool_parsers()
"""What importing this module registered: ``thinkgate_<format>`` -> its vLLM tool parser class."""
