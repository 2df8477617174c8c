"""Muse's channel messages: the one definition the Muse reasoning parsers and the Muse tool formats share.

A Muse turn is a sequence of messages, each addressed to a recipient; the prompt ends with
``<|start|>assistant``, so the first generated message starts inside its header::

     to=self<|message|>The user wants the weather.<|eom|>
    <|start|>assistant to=weather.get<|message|><atem:function_calls>
    <atem:invoke name="weather.get">
    <atem:parameter name="city">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls><|eom|>
    <|start|>assistant to=user<|message|>It is sunny.<|eot|>

Markers: ``<|start|>``, ``<|message|>``, ``<|eom|>`` (end of message; the turn goes on) and ``<|eot|>`` (end of
turn, a stop token). A checkpoint's tokenizer need not have them as single tokens: where the vocabulary has
a marker as a special token only that token is the marker (the same text written with ordinary tokens is
text); where it does not, the marker is its text, whatever tokens spell it.

The rules (both readers, reasoning and tool, follow them; vLLM 0.34's ``muse`` parsers read the same):

- **Messages.** Every ``<|message|>`` closes a header and opens a body. A body ends at ``<|eom|>``,
  ``<|eot|>``, ``<|start|>`` or the next ``<|message|>`` (a model that leaves a channel without ``<|eom|>``
  writes the next header straight into the body: ``...thinking to=get_weather<|message|>...``).
- **The recipient** of a message is read from the text just before its ``<|message|>`` (since the last
  marker): its last word (the run after the last ASCII whitespace or ``<``), from the word's first ``to=``,
  names the recipient (``to=NAME``, NAME not empty, at most :data:`MAX_RECIPIENT_BYTES` bytes). That
  ``to=NAME`` is the header; the text before it is the previous body's (or header text, dropped). No such
  word: the message has no recipient (``<|start|>assistant<|message|>``).
- **Kinds.** A family's :class:`Recipients` maps each recipient to a kind: reasoning (``to=self``), content
  (``to=commentary``: updates shown to the user), the answer (``to=user``: content that ends the reasoning),
  a tool call (any other recipient: its body holds ``<atem:function_calls>``, read by the tool format), or
  dropped. Muse Spark (``muse``, ``musespark``) and the Glimmer compatibility profile (``muse_glimmer``)
  differ here: Spark reads a message without recipient as reasoning, ``commentary`` as content and drops
  ``developer``; Glimmer reads a message without recipient as the answer and every recipient but ``self``
  and ``user`` (``commentary`` included) as a tool.
- **Unframed output.** An output that never writes ``<|message|>`` (and does not start inside a body) is
  plain content, all of it.

This module holds the text-level reading (:func:`read_messages`, over a whole text whose markers are found
by a callable, so the tool reader can find them at control tokens); the token-level machine of the
reasoning parsers is ``muse_parser.py``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import AnyStr, Literal

__all__ = ["START", "MESSAGE", "EOM", "EOT", "MARKERS", "MAX_RECIPIENT_BYTES", "Kind", "REASONING", "CONTENT",
           "ANSWER", "TOOL", "DROPPED", "ENDING_KINDS", "Recipients", "SPARK", "GLIMMER", "header_of", "Message",
           "read_messages", "SEPARATORS", "advance_word", "recipient_of"]

START, MESSAGE, EOM, EOT = "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"
MARKERS: tuple[str, ...] = (START, MESSAGE, EOM, EOT)

MAX_RECIPIENT_BYTES = 256
"""The longest ``to=NAME`` a header may hold (UTF-8 bytes, ``to=`` included); a longer word names no
recipient. It bounds what a streaming reader holds back while a body's last word may still become a header."""

SEPARATORS = " \t\n\r\x0b\x0c<"
"""What ends a word (a recipient never holds one)."""

Kind = Literal["reasoning", "content", "answer", "tool", "dropped"]
REASONING: Kind = "reasoning"
CONTENT: Kind = "content"
ANSWER: Kind = "answer"
TOOL: Kind = "tool"
DROPPED: Kind = "dropped"
ENDING_KINDS: frozenset[str] = frozenset({ANSWER, TOOL})
"""The kinds whose ``<|message|>`` ends the reasoning (the grammar of an answer or a call applies after it)."""


@dataclass(frozen=True)
class Recipients:
    """A family's recipient semantics: which recipients are reasoning, content, the answer, dropped; any
    other recipient is a tool. ``None`` stands for a message without recipient."""

    reasoning: frozenset[str | None]
    content: frozenset[str | None]
    answer: frozenset[str | None]
    dropped: frozenset[str | None] = frozenset()

    def kind(self, recipient: str | None) -> Kind:
        if recipient in self.reasoning:
            return REASONING
        if recipient in self.answer:
            return ANSWER
        if recipient in self.content:
            return CONTENT
        if recipient in self.dropped:
            return DROPPED
        return TOOL

    def is_tool(self, recipient: str | None) -> bool:
        return self.kind(recipient) == TOOL


SPARK = Recipients(reasoning=frozenset({None, "self"}), content=frozenset({"commentary"}),
                   answer=frozenset({"user"}), dropped=frozenset({"developer"}))
"""Muse Spark (vLLM's ``muse`` / ``musespark``)."""

GLIMMER = Recipients(reasoning=frozenset({"self"}), content=frozenset(), answer=frozenset({None, "user"}))
"""Muse Glimmer's compatibility profile (vLLM's ``muse_glimmer``): every recipient but ``self`` and ``user``
is a tool, ``commentary`` included."""


_B_SEPS = tuple(c.encode() for c in SEPARATORS)


def advance_word(word: AnyStr | None, data: AnyStr) -> tuple[AnyStr, AnyStr | None]:
    """:func:`header_of`'s rule, incrementally: ``data`` (text without a marker) follows the held ``word``
    (the current word's end that may still become a header: empty, ``t``, ``to`` or ``to=...``; None when the
    word's ``to=...`` ran past :data:`MAX_RECIPIENT_BYTES`, so it names no recipient until the word ends).
    Returns (the text now known not to be a header, the new held word); the two together are ``word + data``.
    On ``str`` (the tool stream) or ``bytes`` (the token machine) alike. O(len(data) + len(word))."""
    if isinstance(data, bytes):
        seps, to, t, tt, size = _B_SEPS, b"to=", b"t", b"to", len
    else:
        seps, to, t, tt, size = SEPARATORS, "to=", "t", "to", _utf8_len
    last = max(data.rfind(c) for c in seps)  # type: ignore[arg-type]
    if last >= 0:
        released = (word or data[:0]) + data[:last + 1]
        rest = data[last + 1:]
    elif word is None:
        return data, None
    else:
        released, rest = data[:0], word + data
    j = rest.find(to)  # type: ignore[arg-type]
    if j < 0:
        keep = 2 if rest.endswith(tt) else 1 if rest.endswith(t) else 0  # type: ignore[arg-type]
        return released + rest[:len(rest) - keep], rest[len(rest) - keep:]
    if size(rest[j:]) > MAX_RECIPIENT_BYTES:
        return released + rest, None
    return released + rest[:j], rest[j:]


def recipient_of(word: AnyStr | None) -> str | None:
    """The recipient a held word (:func:`advance_word`) names when a ``<|message|>`` follows it, or None."""
    if not word or len(word) <= 3 or word[:3] not in ("to=", b"to="):
        return None
    return word[3:] if isinstance(word, str) else word[3:].decode("utf-8", "replace")


def _utf8_len(s: str) -> int:
    return len(s.encode("utf-8"))


def _word_start(text: str) -> int:
    """Where the last word of ``text`` starts (after the last separator)."""
    return max(text.rfind(c) for c in SEPARATORS) + 1


def header_of(text: str) -> tuple[int, str | None]:
    """``text`` is what comes before a ``<|message|>`` since the last marker: (where its header starts, the
    recipient). The header is the last word from its first ``to=`` (see the module docstring);
    ``(len(text), None)`` when there is none."""
    w = _word_start(text)
    j = text.find("to=", w)
    if j < 0 or j + 3 == len(text) or len(text[j:].encode("utf-8")) > MAX_RECIPIENT_BYTES:
        return len(text), None
    return j, text[j + 3:]


@dataclass(frozen=True)
class Message:
    """A message of a whole text: its recipient, kind and body ``text[start:end]``."""

    recipient: str | None
    kind: Kind
    start: int
    end: int


def read_messages(text: str, recipients: Recipients, find: Callable[[str, int], int] | None = None, *,
                  in_body: Kind | None = None) -> tuple[list[Message], bool]:
    """The messages of ``text`` in order, and whether any ``<|message|>`` occurs (False: unframed output).

    ``find(marker, start)``: the first position >= start where ``marker`` is, or -1 (default: its text,
    ``text.find``). ``in_body``: the text starts inside a body of that kind (the prompt opened it; its
    message is the first, with recipient None). O(len(text))."""
    if find is None:
        find = text.find
    next_at: dict[str, int] = {}

    def first(pos: int) -> tuple[int, str]:
        best, which = -1, ""
        for m in MARKERS:
            i = next_at.get(m, -2)
            if i == -2 or (0 <= i < pos):
                i = find(m, pos)
                next_at[m] = i
            if i >= 0 and (best < 0 or i < best):
                best, which = i, m
        return best, which

    out: list[Message] = []
    framed = False
    body: tuple[str | None, Kind, int] | None = (None, in_body, 0) if in_body is not None else None
    pos = 0
    while True:
        i, m = first(pos)
        if i < 0:
            if body is not None:
                out.append(Message(body[0], body[1], body[2], len(text)))
            return out, framed
        if m == MESSAGE:
            cut, recipient = header_of(text[pos:i])
            if body is not None:
                out.append(Message(body[0], body[1], body[2], pos + cut))
            body = (recipient, recipients.kind(recipient), i + len(m))
            framed = True
        else:
            if body is not None:
                out.append(Message(body[0], body[1], body[2], i))
            body = None
        pos = i + len(m)
