"""thinkgate's reasoning parsers as a vLLM 0.34 reasoning-parser plugin.

Load it with ``vllm serve MODEL --reasoning-parser-plugin thinkgate.engines.vllm.reasoning_parsers
--reasoning-parser thinkgate_qwen3`` (the path of this file works too: vLLM's ``import_plugin`` then
loads it as a module of its own name, which is why everything below imports ``thinkgate`` absolutely).
Importing this module registers every thinkgate family with vLLM's ``ReasoningParserManager`` under
``thinkgate_<name>`` (``thinkgate_qwen3``, ``thinkgate_deepseek_r1``, ... one per name of
``thinkgate.reasoning.list_reasoning_parsers()``); the family's own module is imported only when vLLM
builds a parser.

What vLLM does with a reasoning parser, and what each call does here
--------------------------------------------------------------------
vLLM builds one parser object **per request**, twice: the engine core's structured-output manager
(``vllm/v1/structured_output/__init__.py``) builds one to gate the grammar, and the serving layer
(``vllm/parser/abstract_parser.py``'s ``DelegatingParser``) one to split the text it streams. Both pass
the tokenizer and the request's ``chat_template_kwargs``. The per-model objects are shared: the
thinkgate ``Vocabulary`` is built once per tokenizer object and the family's parser once per
vocabulary (both cached here, weakly), so a request costs one small object and its tracker.

Engine core (the gate):

- ``is_reasoning_end(prompt_ids)``: called once with the prompt; builds this request's tracker from the
  prompt and the kwargs (only the current turn of the prompt counts) and answers whether it starts
  with its thinking ended.
- ``reasoning_end_token_ids`` / ``implicit_reasoning_end_token_ids``: for families whose thinking ends
  on one special token (``TokenMarkerParser``: the qwen3, deepseek, glm, ling3, kimi_k2, minimax,
  seed, ernie, step, cohere, gemma4, mistral, hy, holo2, poolside, zaya, ripple, inkling, k2_horizon
  families) the end ids *and* the implicit ends (Qwen's ``<tool_call>``); vLLM then asks
  ``find_reasoning_end(step_ids)`` and splits the step exactly, feeding an implicit end to the grammar
  as its first token. Empty for families that end on text (olmo3, hunyuan_a13b, granite), on a
  sequence of ids (kimi_k3, plamo3: ``TokenSequenceParser``) or on a header (gpt-oss): vLLM then asks
  ``is_reasoning_end_streaming`` instead, which the tracker answers across step boundaries.
- ``find_reasoning_end(ids)``: the first end in ``ids`` read as thinking (exact while the request
  thinks: only an end id can end it). None while the request has not yet decided whether it thinks at
  all (a first-token family before its first token), so vLLM asks ``is_reasoning_end_streaming``.
- ``is_reasoning_end_streaming(input_ids, delta_ids)``: whether the thinking ends inside ``delta_ids``,
  from the tracker's state after the committed tokens before them. The tracker is brought up to date
  with the tokens committed since the last call, which are the ``delta_ids`` of the previous call at
  that position (vLLM's commit is the last call there); only when that is not so are they read from
  ``input_ids``. A step costs O(tokens of the step).

Serving (the text): ``engine_based_streaming = True``, so vLLM calls ``extract_reasoning_streaming``
with each delta, asks ``has_engine_confirmed_reasoning_end()`` (this request's tracker, advanced by the
same deltas) when to hand over to the tool parser, and ``finish_streaming()`` for the text held back
(a partial marker, an incomplete UTF-8 character). Streaming feeds the family's ``ReasoningStream``
the delta's token ids and text: O(delta), never the text so far. ``extract_reasoning(text)`` splits a
whole output from the state the prompt gave (``set_prompt_token_ids``); ``extract_content_ids`` and
``count_reasoning_tokens`` split whole outputs exactly to the token.

Families framed after their end (Muse's messages, ``framed_after_end``): the text after the end is still
messages (more reasoning, more calls, the answer), so the plugin sets vLLM's ``opens_reasoning_in_content``
(without a tool parser, every delta goes through the family's stream, as the whole output does); a tool
parser that takes over reads the whole output (``extract_reasoning`` of a request with tools hands it the
whole text) or, in a stream, the ending message's header ids before its content (``extract_content_ids`` of
the delta where the stream's end came: ``reopening_ids``), so the tool reader knows whose body follows.

What vLLM's gate cannot express (so the plugin cannot either): a first-token family (mistral,
glm45, cohere_command, gemma4 with thinking on, granite) decides with its first generated token
whether it thinks; vLLM leaves that token unmasked, and when it starts the content (the model skipped
thinking) vLLM's fallback starts the grammar *after* it, so that one token is never checked.
thinkgate's own manager masks the undecided position with the start marker plus the grammar's first
tokens and feeds the token to the grammar.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from vllm.entrypoints.generate.base.protocol import DeltaMessage as VllmDeltaMessage
from vllm.parser.engine.parser_engine import ReasoningEnd as VllmReasoningEnd
from vllm.reasoning.abs_reasoning_parsers import ReasoningParser as VllmReasoningParser
from vllm.reasoning.abs_reasoning_parsers import ReasoningParserManager

from thinkgate.reasoning.base import DeltaMessage, ReasoningParser, ReasoningStream, ReasoningTracker
from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.registry import get_reasoning_parser, list_reasoning_parsers
from thinkgate.reasoning.vocabulary import Vocabulary

from thinkgate.engines.registration import PerModel, register_subclasses

if TYPE_CHECKING:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.entrypoints.openai.responses.protocol import ResponsesRequest

__all__ = ["EMPTY_REASONING_AS_TEXT", "PREFIX", "ThinkgateVllmReasoningParser", "register_vllm_reasoning_parsers", "vllm_name", "vocabulary_of"]

PREFIX = "thinkgate_"

def vllm_name(family: str) -> str:
    """The name vLLM knows a thinkgate family by: ``thinkgate_<family>``."""
    return PREFIX + family


_MISTRAL: PerModel[Vocabulary] = PerModel(lambda tokenizer: Vocabulary.from_tekken(tokenizer.tokenizer.file_path,
                                                                                   name="mistral"))
"""tokenizer -> its vocabulary read from the tekken file"""


def vocabulary_of(tokenizer: Any, logits_width: int | None = None) -> Vocabulary:
    """The thinkgate vocabulary of a vLLM tokenizer. vLLM's ``MistralTokenizer`` over a tekken file is
    read from that file (its ``get_vocab`` pieces lose the bytes of partial UTF-8 tokens); any other
    is read as a Hugging Face tokenizer. Without ``logits_width`` the result is cached per tokenizer."""
    from vllm.utils.mistral import is_mistral_tokenizer

    if is_mistral_tokenizer(tokenizer) and tokenizer.is_tekken:
        if logits_width is not None:
            return Vocabulary.from_tekken(tokenizer.tokenizer.file_path, logits_width=logits_width, name="mistral")
        return _MISTRAL.get(tokenizer)
    if logits_width is not None:
        return Vocabulary.from_hf_tokenizer(tokenizer, logits_width=logits_width, name="vllm")
    return Vocabulary.coerce(tokenizer)


_PARSERS: PerModel[ReasoningParser] = PerModel(lambda vocab, family: get_reasoning_parser(family)(vocab))
"""vocabulary -> family -> its parser, built once per model (construction checks the markers: ``ValueError``
naming the parser and the missing marker)"""


def _shared_parser(family: str, tokenizer: Any) -> ReasoningParser:
    return _PARSERS.get(vocabulary_of(tokenizer), family)


EMPTY_REASONING_AS_TEXT: frozenset[str] = frozenset(
    {"deepseek_r1", "deepseek_v3", "holo2", "poolside_v1", "step5", "hy_v3", "hy_v4"})
"""Families whose vLLM 0.34 parser (DeepSeek-R1's text split) returns ``""``, not None, as the reasoning
of an output that starts inside the thinking and has none (``</think>answer``, an empty output)."""


def _to_vllm(delta: DeltaMessage) -> VllmDeltaMessage | None:
    if delta.reasoning is None and delta.content is None:
        return None
    return VllmDeltaMessage(reasoning=delta.reasoning, content=delta.content)


class ThinkgateVllmReasoningParser(VllmReasoningParser):
    """vLLM's ``ReasoningParser`` over one thinkgate family (``family``, set per registered subclass);
    one object per request, as vLLM builds them (see the module docstring)."""

    family: ClassVar[str] = ""
    engine_based_streaming: bool = True

    def __init__(self, tokenizer: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(tokenizer, *args, **kwargs)
        if not self.family:
            raise ValueError("ThinkgateVllmReasoningParser is a base class; use a registered thinkgate_<family>")
        self.parser: ReasoningParser = _shared_parser(self.family, tokenizer)
        self.chat_template_kwargs: dict[str, Any] = dict(kwargs.get("chat_template_kwargs") or {})
        # exact single-token ends: vLLM may split a step with find_reasoning_end
        self._token_ends = isinstance(self.parser, TokenMarkerParser)
        self._prompt: Sequence[int] | None = None
        # engine core: the ids is_reasoning_end was last given (the gate's own prompt: never the
        # serving prompt), the gate's tracker, the absolute position up to which it has consumed
        # tokens, and the last call's (position, delta ids)
        self._gate_prompt: Sequence[int] = ()
        self._gate: ReasoningTracker | None = None
        self._gate_pos = 0
        self._last: tuple[int, tuple[int, ...]] | None = None
        # serving: the stream and a tracker fed the same deltas (when to hand over to the tool parser)
        self._stream: ReasoningStream | None = None
        self._stream_end: ReasoningTracker | None = None
        # the delta in which the stream's thinking ended, and where its content starts in it
        self._stream_split: tuple[tuple[int, ...], int] | None = None
        # a family framed after its end (Muse): the ids that reopen the ending message, before that content, and
        # the last bytes of the stream (where that message's header is)
        self._reopen: list[int] = []
        self._tail = b""
        # count_reasoning_tokens: (ids counted, their count) once the end is among them
        self._counted: tuple[int, int] | None = None

    @property
    def opens_reasoning_in_content(self) -> bool:
        """vLLM's flag: without a tool parser, its serving layer feeds every delta to this parser (not only
        those before the end). True for the families whose text after the end is framed too (Muse's
        messages: ``framed_after_end``), so the stream splits all of it as the whole output is split."""
        return bool(getattr(self.parser, "framed_after_end", False))

    # -- prompt ----------------------------------------------------------------------------------
    def _set_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self._prompt = list(prompt_token_ids)

    def set_prompt_token_ids(self, prompt_token_ids: Sequence[int]) -> None:
        self._set_prompt(prompt_token_ids)

    def adjust_initial_state_from_prompt(self, prompt_token_ids: Sequence[int]) -> None:
        self._set_prompt(prompt_token_ids)
        self._stream = self._stream_end = self._stream_split = None

    def _prompt_ids(self) -> Sequence[int]:
        return self._prompt if self._prompt is not None else ()

    # -- engine core -----------------------------------------------------------------------------
    @property
    def reasoning_end_token_ids(self) -> frozenset[int]:
        if not self._token_ends:
            return frozenset()
        return self.parser.reasoning_end_token_ids | self.parser.implicit_reasoning_end_token_ids

    @property
    def implicit_reasoning_end_token_ids(self) -> frozenset[int]:
        return self.parser.implicit_reasoning_end_token_ids if self._token_ends else frozenset()

    def is_reasoning_end(self, input_ids: Sequence[int]) -> bool:
        """Does the thinking end within ``input_ids``, read as the start of this turn? vLLM 0.34's
        engine core passes the prompt, once per request (the answer then says whether the turn starts
        with its thinking ended); its unit tests pass outputs too. It (re)starts the gate's tracker from
        ``input_ids`` and changes nothing the text side reads: the prompt that ``extract_reasoning`` and
        ``extract_content_ids`` start from is only ever set by ``set_prompt_token_ids``."""
        self._gate_prompt = list(input_ids)
        self._gate = self.parser.new_tracker(self._gate_prompt, self.chat_template_kwargs)
        self._gate_pos = len(self._gate_prompt)
        self._last = None
        return self._gate.ended

    def _gate_tracker(self) -> ReasoningTracker:
        if self._gate is None:  # vLLM was told the state by the front end and never showed the prompt
            self._gate_prompt = list(self._prompt_ids())
            self._gate = self.parser.new_tracker(self._gate_prompt, self.chat_template_kwargs)
            self._gate_pos = -1  # the position is fixed by the first streaming call
        return self._gate

    def find_reasoning_end(self, token_ids: Sequence[int]) -> VllmReasoningEnd | None:
        if not self._token_ends:
            return None
        gate = self._gate_tracker()
        if gate.keep_thinking_token_ids() is not None:
            return None  # the next token decides whether it thinks: only the tracker's state can tell
        end = self.parser.find_reasoning_end(token_ids)
        if end is None:
            return VllmReasoningEnd(len(token_ids), False)
        return VllmReasoningEnd(end.offset, end.is_content)

    def is_reasoning_end_streaming(self, input_ids: Sequence[int], delta_ids: Iterable[int]) -> bool:
        delta = tuple(delta_ids)
        self._gate_tracker()
        start = len(input_ids) - len(delta)  # the absolute position of delta[0]
        if self._gate_pos < 0:
            self._gate_pos = start
        if start != self._gate_pos:
            self._catch_up(input_ids, start)
        last = self._last
        # vLLM narrows a call to find the end (the same ids, shorter): keep the longer, its prefix is the same
        if not (last is not None and last[0] == start and last[1][:len(delta)] == delta):
            self._last = (start, delta)
        gate = self._gate_tracker()
        return gate.ended or gate.scan(delta) is not None

    def _catch_up(self, input_ids: Sequence[int], start: int) -> None:
        """Advance the gate over the tokens committed between its position and ``start``."""
        if start < self._gate_pos:  # tokens taken back (never in vLLM 0.34): start over from the prompt
            self.is_reasoning_end(self._gate_prompt)
        gate = self._gate_tracker()
        n = start - self._gate_pos
        last = self._last
        if last is not None and last[0] == self._gate_pos and len(last[1]) >= n:
            ids: Sequence[int] = last[1][:n]  # the previous call at this position was the commit
        else:
            ids = list(input_ids[self._gate_pos:start])
        gate.advance(ids)
        self._gate_pos = start

    def extract_content_ids(self, input_ids: list[int]) -> list[int]:
        """The content ids of a whole output, from the prompt's state. vLLM's serving layer also calls it
        with the one delta in which the stream's thinking ended (to hand its content to the tool parser):
        that delta is split where the stream's tracker saw the end, not read as an output's start."""
        split = self._stream_split
        if split is not None and tuple(input_ids) == split[0]:
            return self._reopen + list(input_ids[split[1]:])
        return self.parser.extract_content_ids(input_ids, self._prompt_ids(), self.chat_template_kwargs)

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """Reasoning tokens of a whole output (markers excluded). Once the end is among the ids counted,
        a longer output of the same request answers at once; before it, a call reads the whole output."""
        counted = self._counted
        if counted is not None and len(token_ids) >= counted[0]:
            return counted[1]
        split = self.parser.split(token_ids, self._prompt_ids(), self.chat_template_kwargs)
        if split.end is not None or split.ended_before:
            self._counted = (len(token_ids), len(split.reasoning_ids))
        return len(split.reasoning_ids)

    # -- serving ---------------------------------------------------------------------------------
    def extract_reasoning(self, model_output: str,
                          request: ChatCompletionRequest | ResponsesRequest) -> tuple[str | None, str | None]:
        """The whole output split from the prompt's state. Families whose vLLM namesake answers an
        empty thinking with ``""`` (a reasoning part that exists and is empty, e.g. ``</think>answer``)
        rather than None (``EMPTY_REASONING_AS_TEXT``) get ``""`` whenever the output starts inside the
        thinking, as vLLM gives."""
        reasoning, content = self.parser.extract_reasoning(model_output, self._prompt_ids(), self.chat_template_kwargs)
        if self.opens_reasoning_in_content and _reads_tools(request):
            # framed after its end (Muse): the tool parser reads the calls and the content from the whole output,
            # as thinkgate's own reader does (vLLM hands it this content); the reasoning stays ours
            return reasoning, model_output or None
        if reasoning is None and self.family in EMPTY_REASONING_AS_TEXT and not self.parser.is_reasoning_end(
                self._prompt_ids(), self.chat_template_kwargs):
            reasoning = ""
        return reasoning, content

    def extract_reasoning_streaming(self, previous_text: str, current_text: str, delta_text: str,
                                    previous_token_ids: Sequence[int], current_token_ids: Sequence[int],
                                    delta_token_ids: Sequence[int]) -> VllmDeltaMessage | None:
        if self._stream is None or self._stream_end is None:
            self._stream = self.parser.new_stream(self._prompt_ids(), self.chat_template_kwargs)
            self._stream_end = self.parser.new_tracker(self._prompt_ids(), self.chat_template_kwargs)
        end = self._stream_end.advance(delta_token_ids)
        framed = self.opens_reasoning_in_content
        if end is not None:
            self._stream_split = (tuple(delta_token_ids), end.content_start)
            if framed:  # the tool parser that takes over reads the ending message's header
                head = self._tail + self.parser.vocabulary.decode_bytes(delta_token_ids[:end.offset + 1])
                self._reopen = self.parser.reopening_ids(head.decode("utf-8", "replace"))  # type: ignore[attr-defined]
        elif framed:  # the text a header can span (bounded)
            self._tail = (self._tail + self.parser.vocabulary.decode_bytes(delta_token_ids))[-_TAIL_BYTES:]
        return _to_vllm(self._stream.feed(delta_token_ids, delta_text))

    def has_engine_confirmed_reasoning_end(self) -> bool:
        return self._stream_end is not None and self._stream_end.ended

    def finish_streaming(self) -> VllmDeltaMessage | None:
        """The text the stream held back (vLLM calls it when the thinking ends and at the end)."""
        if self._stream is None:
            return None
        return _to_vllm(self._stream.finish())

    def adjust_request(self, request: ChatCompletionRequest | ResponsesRequest
                       ) -> ChatCompletionRequest | ResponsesRequest:
        # markers are special tokens: the detokenizer must keep them for the text to be split
        request.skip_special_tokens = False
        return request


_TAIL_BYTES = 1024
"""The stream's last bytes a framed family's plugin keeps: more than a header can hold (``MAX_RECIPIENT_BYTES``)."""


def _reads_tools(request: Any) -> bool:
    """Whether vLLM will hand this request's content to a tool parser (it declares tools and does not say none)."""
    return bool(getattr(request, "tools", None)) and getattr(request, "tool_choice", None) != "none"


def register_vllm_reasoning_parsers(families: Iterable[str] | None = None) -> dict[str, type[ThinkgateVllmReasoningParser]]:
    """Register thinkgate families with vLLM as ``thinkgate_<family>`` (every known family by default,
    a plugin family of thinkgate's registry too once it is registered); returns name -> class."""
    return register_subclasses(list_reasoning_parsers() if families is None else families,
                               ThinkgateVllmReasoningParser, "family", prefix=PREFIX, module=__name__,
                               option="--reasoning-parser",
                               register=lambda name, cls: ReasoningParserManager.register_module(name, module=cls))


REGISTERED: Mapping[str, type[ThinkgateVllmReasoningParser]] = register_vllm_reasoning_parsers()
"""What importing this module registered: ``thinkgate_<family>`` -> its vLLM parser class."""
