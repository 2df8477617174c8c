"""The reasoning-parser contract shared by every family.

Lifetimes
---------
- A parser **class** is chosen by name from the registry (:func:`reasoning.get_reasoning_parser`).
- A parser **instance** is built once per model: ``Parser(vocabulary_or_hf_tokenizer,
  chat_template_kwargs=None)``. Construction resolves the family's marker token ids and raises
  ``ValueError`` naming the parser and the missing marker when the vocabulary lacks them. Instances are
  immutable and shared by all requests and threads.
- Per request, the engine core holds a :class:`ReasoningTracker` (``parser.new_tracker(prompt_ids)``),
  and the front end a :class:`ReasoningStream` (``parser.new_stream(prompt_ids)``). Both are small, and
  the cost of each call grows with the tokens/text of that call, never with the output so far.

Offsets
-------
``find_reasoning_end(token_ids)`` and the trackers return a :class:`ReasoningEnd`: ``offset`` is the
index (into the ids given) of the token that ends the reasoning. Content starts at ``offset + 1``, or at
``offset`` when ``is_content`` is true (an *implicit* end: a token that is also the first token of the
content, such as Qwen's ``<tool_call>`` written without ``</think>``).
``content_start`` gives that index directly.

Trackers
--------
Every built-in family writes its tracker the same way: its per-request state is a small immutable
value (an int, or a named tuple of bytes and ints; :data:`ENDED` once the reasoning has ended, the same
value for every family), and the parser has one pure step ``step(state, ids) -> (state, end)`` and
``keep_thinking_ids(state)``, ``ending_ids(state)`` and ``forced_end_ids(state)`` (:class:`Stepper`).
:class:`StateTracker` holds the state and is the only implementation of ``scan`` (step, keep nothing),
``advance`` (step, keep the state), ``keep_thinking_token_ids(after)``, ``ending_token_ids(after)`` and
``forced_end_token_ids(after)`` (step over ``after``, then ask). An immutable state is what lets a
scan cost only its step: there is nothing to copy to keep the committed state safe.

Per-request ``chat_template_kwargs`` (``enable_thinking``, ``thinking``, ``include_reasoning`` ...) may be
passed to ``is_reasoning_end``, ``new_tracker`` and ``new_stream``; they override those given at
construction.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from thinkgate.reasoning.vocabulary import Vocabulary

__all__ = ["ReasoningEnd", "ReasoningSplit", "ReasoningParser", "ReasoningTracker", "ReasoningStream",
           "DeltaMessage", "StateTracker", "Stepper", "ENDED", "ending_ids_among", "checked_end", "truthy", "reasoning_excluded", "thinking_switch"]

_FALSE_STRINGS = frozenset({"false", "0", "no", "off", "none", "disabled"})


def truthy(value: Any) -> bool:
    """A chat-template kwarg as a boolean (``"false"`` and ``"none"`` strings count as false; a mapping
    such as ``{"type": "enabled"}`` / ``{"type": "disabled"}`` is read by its ``type``)."""
    if isinstance(value, str):
        return value.strip().lower() not in _FALSE_STRINGS
    if isinstance(value, Mapping):
        kind = value.get("type", value.get("enabled", True))
        return truthy(kind) and str(kind).lower() != "disabled"
    return bool(value)


def reasoning_excluded(kwargs: Mapping[str, Any]) -> bool:
    """True when the kwargs say ``include_reasoning: false``: for every family the request then starts
    with its reasoning ended (the grammar applies from the first generated token, all text is content)."""
    return "include_reasoning" in kwargs and not truthy(kwargs["include_reasoning"])


def thinking_switch(kwargs: Mapping[str, Any], keys: Sequence[str]) -> bool | None:
    """The first of the thinking switches ``keys`` (``enable_thinking``, ``thinking`` ...) set in the
    kwargs, as a boolean; None when none is set (a None value counts as unset)."""
    for key in keys:
        value = kwargs.get(key)
        if value is not None:
            return truthy(value)
    return None


@dataclass(frozen=True)
class ReasoningEnd:
    """Where reasoning ends inside a list of token ids."""

    offset: int
    """Index of the token that ends the reasoning."""
    is_content: bool = False
    """True when that token is also the first token of the content (implicit end)."""

    @property
    def content_start(self) -> int:
        return self.offset if self.is_content else self.offset + 1


@dataclass(frozen=True)
class ReasoningSplit:
    """A whole generated output split exactly to the token (what each family counts as reasoning is
    in its ``split`` docstring)."""

    reasoning_ids: list[int]
    """The reasoning tokens (markers excluded)."""
    content_ids: list[int]
    """The content tokens (an implicit end token included, as the first; all of them when the
    reasoning had ended before the output; none when it never ends)."""
    end: ReasoningEnd | None
    """Where the reasoning ended inside the output (None: it never ended there, or ended before it)."""
    ended_before: bool
    """True when the reasoning had ended before the first generated token (prompt, kwargs, family)."""


@dataclass(frozen=True)
class DeltaMessage:
    """What one ``ReasoningStream.feed`` call adds: reasoning and content text (None when nothing)."""

    reasoning: str | None = None
    content: str | None = None


class ReasoningTracker(ABC):
    """Engine-core, per-request state: has the thinking of this turn ended? (latched once true)

    ``advance`` commits tokens; ``scan`` answers the same question for tokens that are not committed
    (speculative drafts) and changes nothing. Both cost O(len(token_ids)) (plus a bounded tail for
    text-marker families), never O(tokens so far).
    """

    @property
    @abstractmethod
    def ended(self) -> bool:
        """True once the reasoning of this turn has ended (or never started)."""

    @abstractmethod
    def scan(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        """Where the reasoning would end inside ``token_ids`` if they followed the committed tokens;
        None if it would not end there (or has ended already). Pure: changes no state."""

    @abstractmethod
    def advance(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        """Commit ``token_ids``; return where the reasoning ended among them, if it did in this call."""

    @abstractmethod
    def copy(self) -> ReasoningTracker:
        """An independent tracker in this tracker's state: advancing one leaves the other as it was.
        O(1) for the built-in families (their state is an immutable value). What an engine that rolls
        back committed tokens keeps per token (SGLang's grammar objects: ``thinkgate/engines/sglang/backend.py``)."""

    @abstractmethod
    def keep_thinking_token_ids(self, after: Sequence[int] = ()) -> frozenset[int] | None:
        """Is the model still deciding whether it thinks, after the committed tokens and ``after``?

        For a family whose model may skip its thinking (it writes the start marker itself, or not),
        the next token can decide: then this is the exact set of next token ids that keep thinking
        possible (a start or end marker, a token that continues a text marker); any other token would
        start the content. None when the next token does not decide (the request is thinking, its
        thinking has ended, or ``after`` decided it). Pure: changes no state. The manager masks an
        undecided position with these ids plus the grammar's first tokens."""

    def ending_token_ids(self, after: Sequence[int] = ()) -> frozenset[int] | None:
        """The next token ids that would end the thinking, after the committed tokens and ``after``.

        The exact set (empty when no next token can end it, e.g. once it has ended). None when the
        thinking can end on text that ordinary tokens spell (a text marker), or when the next token
        decides whether the model thinks at all (``keep_thinking_token_ids`` is not None): then no set
        of ids holds the thinking open. The manager bans these ids while a thinking request's
        constraint is still compiling, so the thinking cannot end before its grammar exists. Pure.
        This default says the tracker cannot tell; every built-in family answers."""
        return None

    def forced_end_token_ids(self, after: Sequence[int] = ()) -> tuple[int, ...] | None:
        """The family's end-of-thinking sequence from the state after the committed tokens and ``after``.

        The token ids that, written next, end the thinking exactly at their last token (that token not
        being content): ``</think>``; ``[THINK] [/THINK]`` for a model still deciding whether it thinks;
        ``<|end|><|start|>assistant<|channel|>final<|message|>`` in a harmony analysis body; a text
        marker's tokens. Empty once the thinking has ended. None when the family cannot force its end
        from there. The manager forces them, one row per token, when a request reaches its
        ``max_thinking_tokens``. Pure: changes no state. This default says the family cannot force its
        end; every built-in family answers."""
        return None


def ending_ids_among(stepper: Stepper[S], state: S, candidates: frozenset[int]) -> frozenset[int]:
    """The ids of ``candidates`` (a superset of the ids that can end the thinking from ``state``) whose
    step from ``state`` ends it: a family's exact :meth:`Stepper.ending_ids` when such a superset is
    small."""
    return frozenset(t for t in candidates if stepper.step(state, (t,))[1] is not None)


ENDED: Literal[2] = 2
"""The state of a request whose reasoning has ended, the same value for every family: once ended, a
request's state carries nothing more (the state is latched), so one shared value lets the tracker answer
``ended`` without asking its family."""

S = TypeVar("S")


class Stepper(Protocol[S]):
    """What a family gives :class:`StateTracker`: a pure step over an immutable state."""

    def step(self, state: S, token_ids: Sequence[int]) -> tuple[S, ReasoningEnd | None]:
        """Run ``token_ids`` from ``state``: (the state after them, where the reasoning ended among
        them or None). Pure: ``state`` is an immutable value and is not changed; the state after an
        end is :data:`ENDED`, and from :data:`ENDED` the step returns ``(ENDED, None)``. Costs
        O(len(token_ids)) (plus a bounded tail for text-marker families)."""
        ...

    def keep_thinking_ids(self, state: S) -> frozenset[int] | None:
        """``ReasoningTracker.keep_thinking_token_ids`` for a request in ``state``."""
        ...

    def ending_ids(self, state: S) -> frozenset[int] | None:
        """``ReasoningTracker.ending_token_ids`` for a request in ``state``."""
        ...

    def forced_end_ids(self, state: S) -> tuple[int, ...] | None:
        """``ReasoningTracker.forced_end_token_ids`` for a request in ``state``."""
        ...


class StateTracker(ReasoningTracker, Generic[S]):
    """The tracker of every built-in family: an immutable state plus its family's pure ``step``.

    ``scan`` steps without keeping the new state, ``advance`` keeps it, and
    ``keep_thinking_token_ids(after)`` steps over ``after`` and asks the family about the state it
    reaches (``ending_token_ids(after)`` likewise). A family writes only ``step``, ``keep_thinking_ids``
    and ``ending_ids`` (see :class:`Stepper`); the
    per-call cost is the cost of its step, and no state is copied for a scan because none is mutated.
    """

    __slots__ = ("_parser", "_state")

    def __init__(self, parser: Stepper[S], state: S) -> None:
        self._parser = parser
        self._state = state

    @property
    def ended(self) -> bool:
        return self._state == ENDED

    def scan(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        return self._parser.step(self._state, token_ids)[1]

    def advance(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        self._state, end = self._parser.step(self._state, token_ids)
        return end

    def copy(self) -> StateTracker[S]:
        new = object.__new__(type(self))  # family trackers add no slots: the parser and the state are all
        new._parser = self._parser
        new._state = self._state
        return new

    def keep_thinking_token_ids(self, after: Sequence[int] = ()) -> frozenset[int] | None:
        state = self._state
        if len(after):
            state = self._parser.step(state, after)[0]
        return self._parser.keep_thinking_ids(state)

    def ending_token_ids(self, after: Sequence[int] = ()) -> frozenset[int] | None:
        state = self._state
        if len(after):
            state = self._parser.step(state, after)[0]
        return self._parser.ending_ids(state)

    def forced_end_token_ids(self, after: Sequence[int] = ()) -> tuple[int, ...] | None:
        state = self._state
        if len(after):
            state = self._parser.step(state, after)[0]
        return self._parser.forced_end_ids(state)


def checked_end(stepper: Stepper[S], state: S, candidate: Sequence[int] | None) -> tuple[int, ...] | None:
    """``candidate`` as the end-of-thinking sequence from ``state``, if stepping it from there ends the
    thinking (not on a content token); cut after the token that ends it. None otherwise (the family
    cannot force its end with it). What every family's :meth:`Stepper.forced_end_ids` returns, so a
    forced sequence is exact by construction: the tracker ends on its last token, never before."""
    if state == ENDED:
        return ()
    if not candidate:
        return None
    end = stepper.step(state, candidate)[1]
    if end is None or end.is_content:
        return None
    return tuple(candidate[:end.offset + 1])


class ReasoningStream(ABC):
    """Front-end, per-request streaming splitter of generated text into reasoning and content."""

    @abstractmethod
    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        """Add the next generated tokens (``text`` is their decoded text; decoded from the vocabulary
        when None) and return the new reasoning / content text."""

    def finish(self) -> DeltaMessage:
        """The end of the output: return what was held back (a partial marker prefix, an incomplete
        UTF-8 sequence). Families that hold nothing back return an empty delta."""
        return DeltaMessage()


class ReasoningParser(ABC):
    """Base class of every reasoning parser family (see the module docstring for lifetimes)."""

    name: ClassVar[str] = ""
    """Primary registry name, set by ``register_reasoning_parser``."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        self.vocabulary: Vocabulary = Vocabulary.coerce(tokenizer)
        self.chat_template_kwargs: dict[str, Any] = dict(chat_template_kwargs or {})

    # -- engine core: token ids ------------------------------------------------------------------
    @property
    @abstractmethod
    def reasoning_end_token_ids(self) -> frozenset[int]:
        """Token ids that end the reasoning and are not content."""

    @property
    def implicit_reasoning_end_token_ids(self) -> frozenset[int]:
        """Token ids that end the reasoning *and* are the first token of the content."""
        return frozenset()

    @abstractmethod
    def is_reasoning_end(self, prompt_token_ids: Sequence[int],
                         chat_template_kwargs: Mapping[str, Any] | None = None) -> bool:
        """True when, given this prompt, the current assistant turn starts with its reasoning ended
        (template closed it, thinking disabled, ``include_reasoning: false``). Only the current turn
        counts: an end marker in an earlier turn does not end this one."""

    @abstractmethod
    def find_reasoning_end(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        """The first reasoning end inside generated ``token_ids`` (no prompt state), or None."""

    @abstractmethod
    def split(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
              chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningSplit:
        """Split a whole generated output into reasoning ids and content ids, exact to the token (the
        state at its first token derived from the prompt and kwargs, as for a tracker)."""

    def extract_content_ids(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
                            chat_template_kwargs: Mapping[str, Any] | None = None) -> list[int]:
        """The content ids of a whole generated output (all of it when the reasoning had ended before
        it; none when it never ends)."""
        return self.split(token_ids, prompt_token_ids, chat_template_kwargs).content_ids

    def count_reasoning_tokens(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
                               chat_template_kwargs: Mapping[str, Any] | None = None) -> int:
        """Tokens of a whole generated output that belong to the reasoning (markers excluded)."""
        return len(self.split(token_ids, prompt_token_ids, chat_template_kwargs).reasoning_ids)

    @abstractmethod
    def new_tracker(self, prompt_token_ids: Sequence[int] = (),
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningTracker:
        """A tracker for one request, its state derived from the prompt."""

    # -- front end: text -------------------------------------------------------------------------
    @abstractmethod
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
        """Split a whole generated text into (reasoning, content); None for an empty part. The state
        before the text comes from the prompt and kwargs, as for a tracker."""

    @abstractmethod
    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningStream:
        """A streaming splitter for one request."""

    # -- helpers ---------------------------------------------------------------------------------
    def _kwargs(self, override: Mapping[str, Any] | None) -> dict[str, Any]:
        if not override:
            return self.chat_template_kwargs
        merged = dict(self.chat_template_kwargs)
        merged.update(override)
        return merged

    def _require(self, text: str) -> int:
        """The id of marker ``text``; ValueError naming the parser and the marker when missing."""
        tid = self.vocabulary.token_id(text)
        if tid is None:
            raise ValueError(
                f"reasoning parser {self.name!r}: the vocabulary {self.vocabulary.name!r} has no "
                f"single token for the marker {text!r}"
            )
        return tid
