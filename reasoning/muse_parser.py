"""The reasoning parser of Muse's channel messages (``muse_channels.py`` has the rules), token by token.

A family module (``muse.py``, ``muse_glimmer.py``) subclasses :class:`MuseChannelParser` and names its
:class:`~thinkgate.reasoning.muse_channels.Recipients`.

Where the reasoning ends (engine core)
--------------------------------------
At the token that completes the ``<|message|>`` of the first message whose kind ends it: the answer
(``to=user``) or a tool call. ``ReasoningEnd.offset`` is that token and ``is_content`` is False; the
content ids are the tokens after it (the answer's body, or the call's ``<atem:function_calls>`` block, and
whatever follows). Reasoning messages, commentary (Spark) and dropped messages do not end it. As for
harmony (``gptoss.py``), the header that names the recipient is sampled before the end can be known, so a
tool-call constraint spells the whole output (the ``muse`` tool formats cover the reasoning).

Markers that are special tokens of the vocabulary are matched by id; the others by their text, across
tokens (a bounded tail is held: the longest marker's length minus one). A body's last word that may still
become a header (``... to=weather.get`` before a ``<|message|>``) is held too, at most
:data:`~thinkgate.reasoning.muse_channels.MAX_RECIPIENT_BYTES`: the tracker's state is a small immutable value
(:class:`Channel`), and a step costs O(its tokens) (a step with no marker in it: one join and a few C-level
searches of its bytes).

Prompt (turn-aware)
-------------------
Only the prompt's last message counts (from its last ``<|start|>``): ``<|start|>assistant`` (the
generation prompt) -> thinking, the output starts inside a header; a prefilled reasoning header
(``<|start|>assistant to=self<|message|>``) -> thinking, inside its body; a prefilled answer or call header
-> ended. ``include_reasoning: false`` -> ended. Muse has no switch that turns its reasoning off
(``reasoning_strength`` sets its length).

Text (front end)
----------------
Reasoning is the bodies of the reasoning messages, content the bodies of the content and answer messages,
each concatenated in order (vLLM 0.34's ``muse`` joins them with nothing); tool-call and dropped bodies,
headers and markers are in neither (the tool format reads the calls from the whole output). An unframed
output is all content. A request whose reasoning had ended before its output (a prefilled answer,
``include_reasoning: false``) is all content, markers included. The stream is driven by the token ids
(``text`` is not needed) and equals ``extract_reasoning`` on the decoded text.

``split``: the reasoning ids are the tokens holding a byte of a reasoning body (anywhere in the output, as
``count_reasoning_tokens`` counts them); the content ids every token after the end.

Forced end (a thinking budget): ``<|eom|><|start|>assistant to=user<|message|>`` from a body,
``<|start|>assistant to=user<|message|>`` from between messages (as the vocabulary encodes them).
"""

from __future__ import annotations

import bisect
import codecs
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, NamedTuple, Protocol

from thinkgate.reasoning.base import (ENDED, DeltaMessage, ReasoningEnd, ReasoningParser, ReasoningSplit, ReasoningStream,
                   StateTracker, checked_end, ending_ids_among, reasoning_excluded)
from thinkgate.reasoning.muse_channels import (ANSWER, CONTENT, ENDING_KINDS, EOM, MARKERS, MESSAGE, REASONING, SPARK, START, Recipients,
                            advance_word, header_of, read_messages, recipient_of)

__all__ = ["MuseChannelParser", "MuseTracker", "MuseStream", "Channel"]

class Channel(NamedTuple):
    """The tracker state of a request whose reasoning has not ended (an ended one is ``ENDED``)."""

    body: str | None = None
    """The kind of the body the output is in; None between messages (in a header)."""
    word: bytes | None = b""
    """The held end of the current word that may still become a header (``muse_channels.advance_word``):
    ``b""``, ``b"t"``, ``b"to"``, or ``to=...``; None when the word's ``to=`` ran past the bound."""
    held: bytes = b""
    """A proper prefix of a text marker, held until the next bytes decide."""


_START_STATE = Channel()


class _Sink(Protocol):
    """What the front end keeps of a walk: text by kind (``None``: between messages), with byte offsets."""

    def text(self, kind: str | None, at: int, data: bytes) -> None: ...

    def marker(self, at: int, data: bytes) -> None: ...


class _Walk:
    """The machine, run in place over token ids (the tracker works on a scratch one made from its
    :class:`Channel`). Byte offsets count from the output's first byte; bytes carried from the prompt
    (a held word, a held marker prefix) have negative offsets."""

    __slots__ = ("p", "body", "word", "word_at", "held", "held_at", "pos", "end", "seen", "sink", "latch")

    def __init__(self, parser: MuseChannelParser, state: Channel, sink: _Sink | None = None, latch: bool = True):
        self.p = parser
        self.body, self.word, self.held = state.body, state.word, state.held
        self.held_at = -len(state.held)
        self.word_at = self.held_at - len(state.word or b"")
        self.pos = 0
        self.end: int | None = None  # the token at which the reasoning ended
        self.seen = False  # a <|message|> was read
        self.sink = sink
        self.latch = latch  # stop at the end (the tracker); else go on (split, stream)

    def freeze(self) -> Channel | int:
        return ENDED if self.end is not None else Channel(self.body, self.word, self.held)

    def text(self, data: bytes, at: int) -> None:
        if not data:
            return
        start = self.word_at if self.word else at
        released, self.word = advance_word(self.word, data)
        if self.sink is not None and released:
            self.sink.text(self.body, start, released)
        self.word_at = start + len(released)

    def flush_word(self) -> None:
        if self.word:
            if self.sink is not None:
                self.sink.text(self.body, self.word_at, self.word)
        self.word = b""

    def marker(self, marker: str, at: int, i: int) -> None:
        if marker == MESSAGE:
            recipient = recipient_of(self.word)
            if recipient is None:
                self.flush_word()
            self.word = b""
            kind = self.p.recipients.kind(recipient)
            self.seen = True
            if self.end is None and kind in ENDING_KINDS:
                self.end = i
            self.body = kind
        else:
            self.flush_word()
            self.body = None
        if self.sink is not None:
            self.sink.marker(at, marker.encode())

    def run(self, token_ids: Sequence[int], base: int = 0) -> None:
        """Walk ``token_ids`` (``base``: the index of the first one in the output)."""
        p = self.p
        tb, by_id, text_markers = p.vocabulary.token_bytes, p._marker_by_id, p._text_markers
        for k, t in enumerate(token_ids):
            if self.end is not None and self.latch:
                return
            i = base + k
            m = by_id.get(t)
            if m is not None:
                if self.held:
                    held, self.held = self.held, b""
                    self.text(held, self.held_at)
                self.marker(m, self.pos, i)
                self.pos += len(tb[t])
                continue
            data = tb[t]
            if text_markers and (self.held or b"<" in data):
                self._lex(data, i)
            else:
                self.text(data, self.pos)
            self.pos += len(data)

    def _lex(self, data: bytes, i: int) -> None:
        """Text that may hold (part of) a text marker."""
        window = self.held + data
        at = self.held_at if self.held else self.pos
        self.held = b""
        markers = self.p._text_markers
        q = 0
        while True:
            best, which = -1, b""
            for m in markers:
                j = window.find(m, q)
                if j >= 0 and (best < 0 or j < best):
                    best, which = j, m
            if best < 0:
                break
            self.text(window[q:best], at + q)
            self.marker(which.decode(), at + best, i)
            q = best + len(which)
            if self.end is not None and self.latch:
                return
        rest = window[q:]
        keep = 0
        for k in range(min(len(rest), self.p._max_text_marker - 1), 0, -1):
            if any(m.startswith(rest[-k:]) for m in markers):
                keep = k
                break
        self.text(rest[:len(rest) - keep], at + q)
        self.held = rest[len(rest) - keep:]
        self.held_at = at + q + len(rest) - keep

    def finish(self) -> None:
        """The end of the output: held marker bytes are text, the held word is text."""
        if self.held:
            held, self.held = self.held, b""
            self.text(held, self.held_at)
        self.flush_word()


class MuseChannelParser(ReasoningParser):
    """Muse's channel messages (see the module docstring); a family sets ``recipients``.

    Construction reads each marker from the vocabulary: a special token of it, or text it can spell
    (``ValueError`` naming the parser and the marker when it can do neither)."""

    recipients: ClassVar[Recipients] = SPARK
    framed_after_end: ClassVar[bool] = True
    """The text after the end is framed too (later messages: reasoning again, more calls, an answer): a front
    end must split all of the output with this parser's stream, not pass what follows the end through as
    content (vLLM's plugin maps it to ``opens_reasoning_in_content``)."""

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None) -> None:
        super().__init__(tokenizer, chat_template_kwargs)
        v = self.vocabulary
        self.marker_ids: dict[str, int] = {}
        text_markers: list[bytes] = []
        for m in MARKERS:
            tid = v.token_id(m)
            if tid is not None and tid in v.special_token_ids:
                self.marker_ids[m] = tid
                continue
            if v.can_encode and v.decode(v.encode(m)) != m:
                raise ValueError(f"reasoning parser {self.name!r}: the vocabulary {v.name!r} has no special token "
                                 f"for the marker {m!r} and cannot spell it")
            text_markers.append(m.encode())
        self._marker_by_id = {t: m for m, t in self.marker_ids.items()}
        self._marker_id_set = frozenset(self._marker_by_id)
        self._text_markers = tuple(text_markers)
        self._max_text_marker = max((len(m) for m in text_markers), default=0)
        self._forced: tuple[tuple[int, ...], tuple[int, ...]] | None = None
        if v.can_encode:
            opening = f"{START}assistant to=user{MESSAGE}"
            self._forced = (tuple(v.encode(EOM + opening)), tuple(v.encode(opening)))

    # -- contract: engine core -------------------------------------------------------------------
    @property
    def reasoning_end_token_ids(self) -> frozenset[int]:
        """``{<|message|>}`` when it is a special token: the token at which the reasoning can end (when its
        header names the answer or a tool); necessary, not sufficient. Empty when it is text."""
        tid = self.marker_ids.get(MESSAGE)
        return frozenset() if tid is None else frozenset({tid})

    def _initial(self, prompt_token_ids: Sequence[int] = (),
                 chat_template_kwargs: Mapping[str, Any] | None = None) -> Channel | int:
        if reasoning_excluded(self._kwargs(chat_template_kwargs)):
            return ENDED
        prompt = list(prompt_token_ids)
        start_id = self.marker_ids.get(START)
        if start_id is not None:
            if start_id not in prompt:
                return _START_STATE
            i = len(prompt) - 1 - prompt[::-1].index(start_id)
            w = _Walk(self, _START_STATE, latch=False)
            w.run(prompt[i:])
        else:
            data = self.vocabulary.decode_bytes(prompt)
            i = data.rfind(START.encode())
            if i < 0:
                return _START_STATE
            w = _Walk(_TextOnly(self), _START_STATE, latch=False)  # type: ignore[arg-type]
            w._lex(data[i:], 0)
        if w.body in ENDING_KINDS:
            return ENDED
        return Channel(w.body, w.word, w.held)

    def is_reasoning_end(self, prompt_token_ids: Sequence[int],
                         chat_template_kwargs: Mapping[str, Any] | None = None) -> bool:
        return self._initial(prompt_token_ids, chat_template_kwargs) == ENDED

    def find_reasoning_end(self, token_ids: Sequence[int]) -> ReasoningEnd | None:
        """The first answer / tool ``<|message|>`` in ``token_ids``, read as an output that starts inside
        the header of its first message (the prompt ended with ``<|start|>assistant``)."""
        return self.step(_START_STATE, token_ids)[1]

    def split(self, token_ids: Sequence[int], prompt_token_ids: Sequence[int] = (),
              chat_template_kwargs: Mapping[str, Any] | None = None) -> ReasoningSplit:
        state = self._initial(prompt_token_ids, chat_template_kwargs)
        ids = list(token_ids)
        if state == ENDED:
            return ReasoningSplit([], ids, None, True)
        sink = _Ranges()
        w = _Walk(self, state, sink, latch=False)  # type: ignore[arg-type]
        w.run(ids)
        w.finish()
        tb = self.vocabulary.token_bytes
        ends: list[int] = []
        total = 0
        for t in ids:
            total += len(tb[t])
            ends.append(total)
        marked = set()
        for a, b in sink.ranges:  # the tokens overlapping a reasoning byte range
            k = bisect.bisect_right(ends, a)
            while k < len(ids) and (ends[k - 1] if k else 0) < b:
                marked.add(k)
                k += 1
        reasoning = [t for k, t in enumerate(ids) if k in marked]
        end = None if w.end is None else ReasoningEnd(w.end, False)
        return ReasoningSplit(reasoning, [] if end is None else ids[end.offset + 1:], end, False)

    def new_tracker(self, prompt_token_ids: Sequence[int] = (),
                    chat_template_kwargs: Mapping[str, Any] | None = None) -> MuseTracker:
        return MuseTracker(self, self._initial(prompt_token_ids, chat_template_kwargs))

    def step(self, state: Channel | int, token_ids: Sequence[int]) -> tuple[Channel | int, ReasoningEnd | None]:
        """The tracker's step (:class:`~reasoning.base.Stepper`)."""
        if state == ENDED:
            return ENDED, None
        assert isinstance(state, Channel)
        if not state.held and self._marker_id_set.isdisjoint(token_ids):
            tb = self.vocabulary.token_bytes
            data = b"".join([tb[t] for t in token_ids])
            if not self._text_markers or b"<" not in data:  # the common step: no marker can be in it
                word = advance_word(state.word, data)[1]
                return (state if word == state.word else state._replace(word=word)), None
        w = _Walk(self, state)
        w.run(token_ids)
        return w.freeze(), (None if w.end is None else ReasoningEnd(w.end, False))

    def keep_thinking_ids(self, state: Channel | int) -> frozenset[int] | None:
        return None  # the recipient in the header decides, not one token

    def ending_ids(self, state: Channel | int) -> frozenset[int] | None:
        if state == ENDED:
            return frozenset()
        if MESSAGE not in self.marker_ids:
            return None  # ordinary tokens can complete the text marker
        return ending_ids_among(self, state, self.reasoning_end_token_ids)

    def forced_end_ids(self, state: Channel | int) -> tuple[int, ...] | None:
        if state == ENDED:
            return ()
        if self._forced is None:
            return None
        in_body, between = self._forced
        for c in ((in_body, between) if state.body is not None else (between,)):  # type: ignore[union-attr]
            found = checked_end(self, state, c)
            if found is not None:
                return found
        return None

    def reopening_ids(self, text: str) -> list[int]:
        """``text`` is an output's text through the ``<|message|>`` at which its reasoning ended: the ids that open
        that message again (`` to=NAME<|message|>``, or a bare ``<|message|>``), for a reader that takes the output
        over after the end and must know whose body follows (an engine that hands the tool reader only the text
        after the reasoning: ``thinkgate/engines/vllm/reasoning_parsers.py``)."""
        i = text.rfind(MESSAGE)
        recipient = header_of(text[:i] if i >= 0 else text)[1]
        return self.vocabulary.encode(MESSAGE if recipient is None else f" to={recipient}{MESSAGE}")

    # -- contract: front end ---------------------------------------------------------------------
    def extract_reasoning(self, text: str, prompt_token_ids: Sequence[int] = (),
                          chat_template_kwargs: Mapping[str, Any] | None = None) -> tuple[str | None, str | None]:
        """Split a whole generated text (markers written out, each marker's text taken as the marker)."""
        state = self._initial(prompt_token_ids, chat_template_kwargs)
        if state == ENDED:
            return None, text or None
        assert isinstance(state, Channel)
        carried = ((state.word or b"") + state.held).decode("utf-8", "replace")
        full = carried + text
        messages, framed = read_messages(full, self.recipients, in_body=state.body)  # type: ignore[arg-type]
        if not framed and state.body is None:
            return None, text or None
        parts: dict[str, list[str]] = {REASONING: [], CONTENT: []}
        n = len(carried)
        for m in messages:
            kind = CONTENT if m.kind == ANSWER else m.kind
            if kind in parts and m.end > n:
                parts[kind].append(full[max(m.start, n):m.end])
        return "".join(parts[REASONING]) or None, "".join(parts[CONTENT]) or None

    def new_stream(self, prompt_token_ids: Sequence[int] = (),
                   chat_template_kwargs: Mapping[str, Any] | None = None) -> MuseStream:
        return MuseStream(self, self._initial(prompt_token_ids, chat_template_kwargs))


class _TextOnly:
    """A view of a parser whose every marker is text (the prompt read from its bytes)."""

    def __init__(self, parser: MuseChannelParser) -> None:
        self.recipients = parser.recipients
        self.vocabulary = parser.vocabulary
        self._marker_by_id: dict[int, str] = {}
        self._text_markers = tuple(m.encode() for m in MARKERS)
        self._max_text_marker = max(len(m) for m in MARKERS)


class _Ranges(_Sink):
    """The byte ranges of reasoning bodies (the split)."""

    def __init__(self) -> None:
        self.ranges: list[tuple[int, int]] = []

    def text(self, kind: str | None, at: int, data: bytes) -> None:
        if kind == REASONING and at + len(data) > 0:
            self.ranges.append((max(at, 0), at + len(data)))

    def marker(self, at: int, data: bytes) -> None:
        pass


class MuseTracker(StateTracker):
    """Engine-core state of one request: the shared :class:`~reasoning.base.StateTracker` over a
    :class:`Channel` or ``ENDED``."""

    __slots__ = ()


class _Text(_Sink):
    """The front end's text of a walk: reasoning and content bytes, and, until the first message, every
    byte (an output that never frames a message is all content)."""

    def __init__(self) -> None:
        self.r: list[bytes] = []
        self.c: list[bytes] = []
        self.unframed: list[bytes] = []
        self.framed = False

    def text(self, kind: str | None, at: int, data: bytes) -> None:
        if at + len(data) <= 0:
            return  # carried from the prompt
        if at < 0:
            data = data[-at:]
        if kind == REASONING:
            self.r.append(data)
        elif kind in (CONTENT, ANSWER):
            self.c.append(data)
        elif kind is None and not self.framed:
            self.unframed.append(data)

    def marker(self, at: int, data: bytes) -> None:
        if not self.framed and at >= 0:
            self.unframed.append(data)


class MuseStream(ReasoningStream):
    """Front-end streaming splitter of one request, driven by token ids (see the module docstring). Text
    before the first ``<|message|>`` is held (it is a header, or, when no message ever comes, the content);
    a body's last word that may become a header is held up to ``MAX_RECIPIENT_BYTES``. O(the feed)."""

    def __init__(self, parser: MuseChannelParser, state: Channel | int) -> None:
        self._parser = parser
        self._all_content = state == ENDED
        self._sink = _Text()
        self._walk = _Walk(parser, _START_STATE if state == ENDED else state, self._sink,  # type: ignore[arg-type]
                           latch=False)
        self._sink.framed = self._walk.body is not None
        self._dec = (codecs.getincrementaldecoder("utf-8")("replace"), codecs.getincrementaldecoder("utf-8")("replace"))

    def feed(self, token_ids: Sequence[int], text: str | None = None) -> DeltaMessage:
        if self._all_content:
            tb = self._parser.vocabulary.token_bytes
            return self._out([], [b"".join([tb[t] for t in token_ids])], False)
        w, s = self._walk, self._sink
        w.run(token_ids)
        if w.seen and not s.framed:
            s.framed = True
            s.unframed = []
        r, c = s.r, s.c
        s.r, s.c = [], []
        return self._out(r, c, False)

    def finish(self) -> DeltaMessage:
        if self._all_content:
            return self._out([], [], True)
        w, s = self._walk, self._sink
        w.finish()
        r, c = s.r, s.c
        if not s.framed:
            c = s.unframed
        s.r, s.c, s.unframed = [], [], []
        return self._out(r, c, True)

    def _out(self, r: list[bytes], c: list[bytes], final: bool) -> DeltaMessage:
        rs = self._dec[0].decode(b"".join(r), final=final)
        cs = self._dec[1].decode(b"".join(c), final=final)
        return DeltaMessage(rs or None, cs or None)
