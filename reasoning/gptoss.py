"""openai_gptoss (also ``gpt_oss``): OpenAI gpt-oss and the harmony response format.

A harmony output is a sequence of messages ``<|start|>{header}<|message|>{body}<|end|>``; the prompt
ends with ``<|start|>assistant``, so the first generated message starts with its header::

    <|channel|>analysis<|message|>User asks ... Provide answer.<|end|>
    <|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>

    <|channel|>analysis<|message|>Need to use function get_weather.<|end|>
    <|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location":"SF"}<|call|>

The header holds the role (after ``<|start|>``), the channel (after ``<|channel|>``), an optional
recipient ``to=NAME`` (in the role part or after the channel, both occur) and an optional content type
(``<|constrain|>json`` or a bare ``json``). A body ends at ``<|end|>``, ``<|return|>`` or ``<|call|>``.

Where the reasoning ends (engine core)
--------------------------------------
At the ``<|message|>`` token that closes the header of

- a ``final`` message: the content (what a ``response_format`` grammar constrains) is the body, from
  the token after ``<|message|>``; or
- a ``commentary`` message whose recipient is ``functions.*``: a function call, which ends the
  reasoning; the content is its arguments, from the token after ``<|message|>``.

``ReasoningEnd.offset`` is the index of that ``<|message|>`` and ``is_content`` is False, as for every
token-marker family. The end is a :class:`HarmonyEnd` that also carries ``channel``, ``recipient`` and
``header_token_ids``: the *generated* tokens of that message's header, from its ``<|start|>`` (when it
was generated; the first message's ``<|start|>assistant`` is in the prompt) through ``<|message|>``.
A grammar that describes only the body (a JSON schema for the final answer, or the arguments of the
function named by ``recipient``) is fed from ``content_start``. A tool-choice constraint that must see
the whole call (it checks the function name, as xgrammar's harmony structural tags do with
``<|channel|>commentary to=functions.NAME<|constrain|>json<|message|>``) is first fed
``header_token_ids``, which were sampled before any grammar could apply, and rejects a call it does not
allow. The header cannot be constrained while it is sampled: until ``<|message|>`` nobody knows whether
it opens reasoning or an answer.

Analysis messages (with or without a built-in tool recipient such as ``to=python``), commentary
preambles (no recipient) and messages on any other channel do not end the reasoning. ``<|message|>``
is therefore ``reasoning_end_token_ids`` in the sense of "the token at which the reasoning can end"
(a necessary condition: most ``<|message|>`` tokens open analysis); ``implicit_reasoning_end_token_ids``
is empty.

Robustness, as vLLM's detector: a ``<|channel|>`` outside a header starts a new header even without
``<|start|>`` (models sometimes drop ``<|start|>assistant`` after ``<|end|>``). A header longer than
:data:`MAX_HEADER_BYTES` bytes is malformed and cannot end the reasoning (it keeps the per-request
state bounded).

Prompt shapes (turn-aware)
--------------------------
Only the prompt's last message counts (from its last ``<|start|>``): ``<|start|>assistant`` (the
generation prompt) -> thinking, the header continues in the output; a prefilled
``<|start|>assistant<|channel|>analysis<|message|>`` -> thinking, inside an analysis body; a prefilled
``<|start|>assistant<|channel|>final<|message|>`` (or a function-call header) -> ended. Finals of
earlier turns, and the previous call / tool output of this turn, do not end it.
``include_reasoning: false`` -> ended (the grammar applies from the first token, per DESIGN.md).
gpt-oss has no switch that disables its analysis (``reasoning_effort`` only sets its length).

Text (front end)
----------------
As vLLM's ``parse_chat_output``: reasoning is the bodies of the analysis messages, content the bodies
of the final messages and commentary preambles (commentary without recipient: shown to the user); each
joined with ``"\\n"`` in order. Function-call bodies and headers are in neither (the tool parser reads
them). :meth:`GptOssReasoningParser.extract_reasoning` reads a text in which the special tokens are
written out; the stream is driven by token ids (harmony's structure lives in special tokens, which many
detokenizers skip), so its ``text`` argument is not needed.

``count_reasoning_tokens`` counts analysis-body tokens; ``extract_content_ids`` is every token after the
ending ``<|message|>`` (body, ``<|call|>`` / ``<|return|>``, anything after).
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from thinkgate.reasoning.base import (ENDED, DeltaMessage, ReasoningEnd, ReasoningParser, ReasoningSplit, ReasoningStream,
                   StateTracker, checked_end, ending_ids_among, reasoning_excluded)
from thinkgate.reasoning.registry import register_reasoning_parser

__all__ = ["GptOssReasoningParser", "GptOssTracker", "GptOssStream", "HarmonyEnd",
           "HARMONY_SPECIAL_TOKENS", "MAX_HEADER_BYTES", "parse_header"]

HARMONY_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>")
"""The harmony control tokens this parser reads (the first six must be single tokens)."""
_REQUIRED = HARMONY_SPECIAL_TOKENS[:6]

MAX_HEADER_BYTES = 1024
"""A header longer than this is malformed: it cannot end the reasoning."""

_RECIPIENT = re.compile(r"to=([^\s<]+)")
_SPLIT = re.compile("(" + "|".join(re.escape(s) for s in HARMONY_SPECIAL_TOKENS) + ")")

# machine states
_HEADER: Literal[0] = 0
_BODY: Literal[1] = 1
_OUTSIDE: Literal[2] = 2
_ENDED: Literal[3] = 3

InitialMode = Literal["header", "body", "outside", "ended"]
_MODE_NAMES: tuple[InitialMode, ...] = ("header", "body", "outside", "ended")

# body kinds for the text front end
_R, _C, _X = "r", "c", "x"  # reasoning, content, neither (function call / unknown channel)


def parse_header(header: str) -> tuple[str | None, str | None]:
    """(channel, recipient) of a header's text (special tokens written out)."""
    channel = None
    j = header.find("<|channel|>")
    if j >= 0:
        rest = header[j + len("<|channel|>"):].lstrip()
        m = re.match(r"[^\s<]+", rest)
        channel = m.group(0) if m else None
    r = _RECIPIENT.search(header)
    return channel, (r.group(1) if r else None)


def _ends_reasoning(channel: str | None, recipient: str | None) -> bool:
    return channel == "final" or (channel == "commentary" and recipient is not None
                                  and recipient.startswith("functions."))


def _body_kind(channel: str | None, recipient: str | None) -> str:
    if channel == "analysis":
        return _R
    if channel == "final" or (channel == "commentary" and recipient is None):
        return _C
    return _X


@dataclass(frozen=True)
class HarmonyEnd(ReasoningEnd):
    """A reasoning end at the ``<|message|>`` of a final or function-call header."""

    channel: str = "final"
    """``"final"`` or ``"commentary"`` (a function call)."""
    recipient: str | None = None
    """``functions.NAME`` for a function call; None for a final answer (or a final addressed oddly)."""
    header_token_ids: tuple[int, ...] = field(default=())
    """The generated tokens of the header, ``<|start|>`` (if generated) .. ``<|message|>``."""


class Harmony(NamedTuple):
    """The tracker state of a request that has not ended (an ended one is ``ENDED``): an immutable
    snapshot of :class:`_State`; bounded (the header buffer is capped)."""

    mode: int = _HEADER
    header: bytes = b""
    header_ids: tuple[int, ...] = ()
    overflow: bool = False
    kind: str = _X


HarmonyState = Harmony | int
"""The tracker state: a :class:`Harmony` snapshot, or ``ENDED``."""


@dataclass
class _State:
    """The machine state the walk updates in place (the split and the stream own one; the tracker's
    step works on a scratch one made from its :class:`Harmony`); bounded (the header is capped)."""

    mode: int = _HEADER
    header: bytearray = field(default_factory=bytearray)
    header_ids: list[int] = field(default_factory=list)
    overflow: bool = False
    kind: str = _X  # body kind while in _BODY

    @classmethod
    def thaw(cls, h: Harmony) -> _State:
        return cls(h.mode, bytearray(h.header), list(h.header_ids), h.overflow, h.kind)

    def freeze(self) -> HarmonyState:
        if self.mode == _ENDED:
            return ENDED
        return Harmony(self.mode, bytes(self.header), tuple(self.header_ids), self.overflow, self.kind)


@register_reasoning_parser()
class GptOssReasoningParser(ReasoningParser):
    """gpt-oss harmony channels (see the module docstring). The vocabulary must have the harmony
    special tokens ``<|start|>``, ``<|channel|>``, ``<|message|>``, ``<|end|>``, ``<|return|>`` and
    ``<|call|>`` as single tokens, else ``ValueError`` names the parser and the missing marker."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        ids = {m: self._require(m) for m in _REQUIRED}
        self.start_id = ids["<|start|>"]
        self.channel_id = ids["<|channel|>"]
        self.message_id = ids["<|message|>"]
        self.close_ids: frozenset[int] = frozenset(ids[m] for m in ("<|end|>", "<|return|>", "<|call|>"))
        self._leave_body = self.close_ids | {self.start_id, self.channel_id}  # tokens that end a body
        # the forced end of thinking (a thinking budget): open the final channel, from wherever we are
        v = self.vocabulary
        if v.can_encode:
            final = (self.channel_id, *v.encode("final"), self.message_id)
            restart = (self.start_id, *v.encode("assistant"), *final)
            self._forced: dict[int, tuple[tuple[int, ...], ...]] = {
                _BODY: ((ids["<|end|>"], *restart),),  # close the analysis message first
                _OUTSIDE: (restart,),
                _HEADER: (final, restart),  # finish this header as a final one, else start a new message
            }
        else:
            self._forced = {}

    # -- contract: engine core -------------------------------------------------------------------
    @property
    def reasoning_end_token_ids(self) -> frozenset[int]:
        """``{<|message|>}``: the token at which the reasoning can end (when its header is a final or a
        function call); necessary, not sufficient."""
        return frozenset({self.message_id})

    @property
    def implicit_reasoning_end_token_ids(self) -> frozenset[int]:
        return frozenset()

    def _initial(self, prompt_token_ids: Sequence[int] = (),
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> _State:
        kw = self._kwargs(chat_template_kwargs)
        if reasoning_excluded(kw):
            return _State(_ENDED)
        i = len(prompt_token_ids) - 1
        while i >= 0 and prompt_token_ids[i] != self.start_id:
            i -= 1
        if i < 0:
            return _State(_HEADER)
        st = _State(_OUTSIDE)
        found = self._walk(st, prompt_token_ids[i:], keep_going=True)
        if found is not None and st.mode == _BODY:
            return _State(_ENDED)  # a prefilled final / call header whose body is still open
        st.header_ids = []  # header tokens from the prompt are not generated tokens
        return st

    def initial_mode(self, prompt_token_ids: Sequence[int] = (),
                     chat_template_kwargs: Mapping[str, Any] | None = None) -> InitialMode:
        """Where the output starts: inside a header, a body, between messages, or with reasoning ended."""
        return _MODE_NAMES[self._initial(prompt_token_ids, chat_template_kwargs).mode]

    def is_reasoning_end(self, prompt_token_ids: Sequence[int],
                         chat_template_kwargs: Mapping[str, Any] | None = None) -> bool:
        return self._initial(prompt_token_ids, chat_template_kwargs).mode == _ENDED

    def find_reasoning_end(self, token_ids: Sequence[int]) -> HarmonyEnd | None:
        """The first final / function-call ``<|message|>`` in ``token_ids``, read as an output that
        starts inside the header of its first message (the prompt ended with ``<|start|>assistant``)."""
        return self._walk(_State(_HEADER), token_ids)

    def split(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
              chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningSplit:
        """Split a whole generated output (state from the prompt / kwargs, as for a tracker).
        Reasoning ids: the analysis-body tokens; content ids: every token after the ending
        ``<|message|>`` (all of them when the reasoning had ended before the output)."""
        st = self._initial(prompt_token_ids, chat_template_kwargs)
        ids = list(token_ids)
        if st.mode == _ENDED:
            return ReasoningSplit([], ids, None, True)
        reasoning: list[int] = []
        end: HarmonyEnd | None = None
        not_body = self._leave_body
        for i, t in enumerate(ids):
            if st.mode == _BODY and t not in not_body:
                if st.kind == _R:
                    reasoning.append(t)
                continue
            e = self._walk(st, (t,), base=i, keep_going=True)
            if end is None:
                end = e
        content = [] if end is None else ids[end.content_start:]
        return ReasoningSplit(reasoning, content, end, False)


    def new_tracker(self, prompt_token_ids: Sequence[int] = (),
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> GptOssTracker:
        return GptOssTracker(self, self._initial(prompt_token_ids, chat_template_kwargs).freeze())

    def step(self, state: HarmonyState, token_ids: Sequence[int]) -> tuple[HarmonyState, HarmonyEnd | None]:
        """The tracker's step (:class:`~reasoning.base.Stepper`): O(len(token_ids)), plus a copy of the
        capped header when the call holds a harmony control token."""
        if state == ENDED:
            return ENDED, None
        if state.mode == _BODY and self._leave_body.isdisjoint(token_ids):  # type: ignore[union-attr]
            return state, None  # the common step: more body text (a C-level set test, no Python loop)
        st = _State.thaw(state)  # type: ignore[arg-type]
        end = self._walk(st, token_ids)
        return st.freeze(), end

    def keep_thinking_ids(self, state: HarmonyState) -> frozenset[int] | None:
        return None  # harmony's channel header, not one token, decides (its constraint covers the header)

    def ending_ids(self, state: HarmonyState) -> frozenset[int] | None:
        if state == ENDED:
            return frozenset()
        return ending_ids_among(self, state, self.reasoning_end_token_ids)  # <|message|> after a final header

    def forced_end_ids(self, state: HarmonyState) -> tuple[int, ...] | None:
        """From an analysis body: ``<|end|><|start|>assistant<|channel|>final<|message|>``; between
        messages: the same without ``<|end|>``; inside a header: ``<|channel|>final<|message|>`` when
        that makes it a final header, else a new final message. None without an encoder."""
        if state == ENDED:
            return ()
        for c in self._forced.get(state.mode, ()):  # type: ignore[union-attr]
            found = checked_end(self, state, c)
            if found is not None:
                return found
        return None

    # -- the token machine -----------------------------------------------------------------------
    def _walk(self, st: _State, token_ids: Sequence[int], base: int = 0,
              keep_going: bool = False) -> HarmonyEnd | None:
        """Run ``token_ids`` through ``st`` (in place). Returns the reasoning end among them, if any.

        ``keep_going``: after the end, keep following messages (for the whole-output split and the
        stream); otherwise stop at the end (``st.mode`` becomes ``_ENDED``, latched)."""
        if st.mode == _BODY and self._leave_body.isdisjoint(token_ids):
            return None  # the common step: more body text (a C-level set test, no Python loop)
        tb = self.vocabulary.token_bytes
        start_id, channel_id, message_id, close = self.start_id, self.channel_id, self.message_id, self.close_ids
        found: HarmonyEnd | None = None
        for i, t in enumerate(token_ids):
            mode = st.mode
            if mode == _ENDED and not keep_going:
                break
            if t == start_id or (t == channel_id and mode != _HEADER):
                st.mode = _HEADER
                st.header = bytearray(tb[t])
                st.header_ids = [t]
                st.overflow = False
                continue
            if mode == _HEADER:
                if t == message_id:
                    channel, recipient = parse_header(st.header.decode("utf-8", "replace"))
                    if st.overflow:
                        channel = recipient = None
                    st.header_ids.append(t)
                    if found is None and _ends_reasoning(channel, recipient):
                        found = HarmonyEnd(base + i, False, channel or "final", recipient, tuple(st.header_ids))
                    st.kind = _body_kind(channel, recipient)
                    st.mode = _BODY
                    if found is not None and not keep_going:
                        st.mode = _ENDED
                        break
                elif t in close:
                    st.mode = _OUTSIDE
                elif not st.overflow:
                    b = tb[t]
                    if len(st.header) + len(b) > MAX_HEADER_BYTES:
                        st.overflow = True
                        st.header = bytearray()
                        st.header_ids = []
                    else:
                        st.header += b
                        st.header_ids.append(t)
            elif mode == _BODY:
                if t in close:
                    st.mode = _OUTSIDE
            # _OUTSIDE: stray text between messages is ignored
        return found

    # -- contract: front end ---------------------------------------------------------------------
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None
                          ) -> tuple[str | None, str | None]:
        """Split a whole generated text (special tokens written out) into (reasoning, content)."""
        st = self._initial(prompt_token_ids, chat_template_kwargs)
        if st.mode == _ENDED:
            return None, text or None
        parts: dict[str, list[str]] = {_R: [], _C: []}
        mode = st.mode
        header = bytes(st.header).decode("utf-8", "replace")
        overflow = st.overflow
        kind = st.kind
        if mode == _BODY and kind in parts:
            parts[kind].append("")  # the prefilled message is a part (its prompt text is not output)
        for seg in _SPLIT.split(text):
            if not seg:
                continue
            if seg == "<|start|>" or (seg == "<|channel|>" and mode != _HEADER):
                mode, header, overflow = _HEADER, seg, False
            elif mode == _HEADER:
                if seg == "<|message|>":
                    overflow = overflow or len(header.encode()) > MAX_HEADER_BYTES
                    channel, recipient = (None, None) if overflow else parse_header(header)
                    kind = _body_kind(channel, recipient)
                    if kind in parts:
                        parts[kind].append("")
                    mode = _BODY
                elif seg in ("<|end|>", "<|return|>", "<|call|>"):
                    mode = _OUTSIDE
                else:
                    header += seg
            elif mode == _BODY:
                if seg in ("<|end|>", "<|return|>", "<|call|>"):
                    mode = _OUTSIDE
                elif kind in parts:
                    parts[kind][-1] += seg
        reasoning = "\n".join(parts[_R])
        content = "\n".join(parts[_C])
        return reasoning or None, content or None

    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> GptOssStream:
        return GptOssStream(self, self._initial(prompt_token_ids, chat_template_kwargs))


class GptOssTracker(StateTracker[HarmonyState]):
    """Engine-core state of one request: the shared :class:`~reasoning.base.StateTracker` over a
    :class:`Harmony` or ``ENDED``; O(len(step)) per call; state bounded by the header cap."""

    __slots__ = ()


class GptOssStream(ReasoningStream):
    """Front-end streaming splitter of one request, driven by token ids (``text`` is not needed: the
    special tokens that carry harmony's structure are often skipped by detokenizers). Body bytes are
    decoded incrementally, so a character split across calls comes out whole. ``feed`` costs
    O(len(token_ids)). The concatenated deltas equal ``extract_reasoning`` on the whole decoded text."""

    def __init__(self, parser: GptOssReasoningParser, state: _State) -> None:
        self._parser = parser
        self._all_content = state.mode == _ENDED
        self._st = state if state.mode != _ENDED else _State(_OUTSIDE)
        self._count = {_R: 0, _C: 0}
        if self._st.mode == _BODY and self._st.kind in self._count:
            self._count[self._st.kind] = 1
        self._dec = {_R: codecs.getincrementaldecoder("utf-8")("replace"),
                     _C: codecs.getincrementaldecoder("utf-8")("replace")}

    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        p = self._parser
        tb = p.vocabulary.token_bytes
        if self._all_content:
            out = self._dec[_C].decode(b"".join([tb[t] for t in token_ids]))
            return DeltaMessage(None, out or None)
        st = self._st
        out: dict[str, list[str]] = {_R: [], _C: []}
        body: list[bytes] = []

        def flush(final: bool) -> None:
            if st.kind in out:
                s = self._dec[st.kind].decode(b"".join(body), final=final)
                if s:
                    out[st.kind].append(s)
            body.clear()

        for t in token_ids:
            mode = st.mode
            if mode == _BODY and t not in p._leave_body:
                body.append(tb[t])
                continue
            if mode == _BODY:
                flush(True)
            p._walk(st, (t,), keep_going=True)
            if mode == _HEADER and st.mode == _BODY and st.kind in out:
                if self._count[st.kind]:
                    out[st.kind].append("\n")
                self._count[st.kind] += 1
        if st.mode == _BODY:
            flush(False)
        return DeltaMessage("".join(out[_R]) or None, "".join(out[_C]) or None)

    def finish(self) -> DeltaMessage:
        """End of generation: flush an incomplete UTF-8 tail (nothing else is ever held back)."""
        r = self._dec[_R].decode(b"", final=True)
        c = self._dec[_C].decode(b"", final=True)
        return DeltaMessage(r or None, c or None)
