"""The streaming tool-call reader contract, shared by every format.

A format's streaming reader (``ToolFormat.new_stream(request, policy, vocabulary)``) is built per request
from the same definition as its constraint and its whole reader. It is fed the output after the thinking
(for a format whose constraint covers the reasoning, harmony: the whole output) as :data:`~.pending.Piece` s
(:class:`~.pending.MarkedDecoder` makes them from token ids) and returns, per feed, a
:class:`ToolStreamDelta`: new content text, the calls completed in that feed, and what the OpenAI stream
sends of the calls (:class:`~.call_delta.CallDelta` s: a call's first delta, then more argument text).

The contract, for every chunking of an output:

- the concatenation of the content of every delta (``finish`` included) is the whole reader's ``content``
  (``read_marked`` on the ids: stripped, separators between calls dropped), ``""`` where it says None;
- the calls, in order, are the whole reader's calls (name and ``arguments`` equal);
- by default a call goes out when it is decided: its end read and the request's rules (:mod:`.policy`)
  applied. A call that turns out malformed, or that the rules refuse, stays content (its held text is
  released then). The OpenAI stream cannot take a call back, so no call is sent before it is known to
  stand; its arguments go out whole, in the delta that decides it;
- with ``stream_arguments`` (the output was written under the request's tool constraint, so a call that
  starts is well-formed), a stream whose format can tell sends a call's first delta as soon as its name is
  read and allowed, then its argument text as it is written: every concatenation of a call's fragments is
  a prefix of its whole arguments string, and all of them are that string. A call whose first delta went
  out and that then does not read (cut by max_tokens, or malformed where the grammar was not in force)
  stays a call with the argument text sent so far; the rest of its text is dropped, not content;
- the work of a feed grows with the feed, not with the output so far; text that may still turn out to be
  a call is held (a call's text until its end; a tail that may start a call marker).

:class:`ContentGate` applies the whole reader's content rules to streamed text: leading and trailing
whitespace dropped (held until more text shows it is not trailing), and text between two calls dropped
when it is only whitespace or the format's separator. :class:`HeldStream` is the reader of a format
without a streaming reader of its own (or of this request): it holds everything and reads it whole at
``finish``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from thinkgate.reasoning.vocabulary import Vocabulary

from .call_delta import CallDelta, whole_call_deltas
from .marked import loose_separator
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCall

if TYPE_CHECKING:
    from .call_format import ToolFormat

__all__ = ["ToolStream", "ToolStreamDelta", "ContentGate", "HeldStream"]


@dataclass(frozen=True)
class ToolStreamDelta:
    """What one feed adds: content text (``""`` when none), the calls completed in it (whole, as the
    whole reader gives them), and ``fragments``: what the stream sends of its calls in this feed (each
    call's first delta and more argument text, in order; a call decided whole is one first delta)."""

    content: str = ""
    calls: tuple[ToolCall, ...] = ()
    fragments: tuple[CallDelta, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.content or self.calls or self.fragments)


EMPTY = ToolStreamDelta()


class ToolStream(ABC):
    """One request's streaming tool reader (see the module docstring)."""

    @abstractmethod
    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        """Read the next pieces of the output; O(their length) plus the read of a call they complete."""

    @abstractmethod
    def finish(self) -> ToolStreamDelta:
        """The end of the output: decide what was held (a call cut short stays content)."""

    @property
    @abstractmethod
    def scanned(self) -> int:
        """Characters this stream has examined so far, in total (each feed adds O(its length) when no call
        completes; a completed call adds its own length once). Tests count work with it."""


class ContentGate:
    """The whole reader's content rules, applied to text as it streams (see the module docstring).

    Held text is kept as parts and joined once, when it goes out: a long run of whitespace fed piece by
    piece costs O(its length)."""

    __slots__ = ("_sep", "_sep_core", "_started", "_ws", "_between", "_between_core")

    def __init__(self, call_sep: str = "") -> None:
        self._sep = call_sep
        self._sep_core = "".join(call_sep.split())  # the separator read generously: its words, any spacing
        self._started = False
        self._ws: list[str] = []  # trailing whitespace, held until more text shows it is not trailing
        self._between: list[str] | None = None  # text after the last call, while it may still be a separator
        self._between_core = ""  # its text but whitespace (at most the separator's, while held)

    def text(self, s: str) -> str:
        """Content text; returns what can go out now."""
        if not s:
            return ""
        if self._between is not None:
            self._between.append(s)
            self._between_core += "".join(s.split())
            if self._sep_core.startswith(self._between_core):  # whitespace, or a separator still coming
                return ""
            s = "".join(self._between)
            self._between = None
        return self._strip(s)

    def call(self) -> str:
        """A call block is read: text held since the previous block is dropped when it is only whitespace
        or the separator, else it goes out. Returns what can go out now."""
        parts, self._between = self._between, None
        if parts is None:
            return ""
        b = "".join(parts)
        if loose_separator(b, self._sep):
            return ""
        return self._strip(b)

    def after_call(self) -> None:
        self._between, self._between_core = [], ""

    def finish(self) -> str:
        parts, self._between = self._between, None
        out = self._strip("".join(parts)) if parts else ""
        self._ws = []
        return out

    def _strip(self, s: str) -> str:
        if not self._started:
            s = s.lstrip()
            if not s:
                return ""
            self._started = True
        core = s.rstrip()
        if not core:
            self._ws.append(s)
            return ""
        out = "".join(self._ws) + core if self._ws else core
        self._ws = [s[len(core):]] if len(core) < len(s) else []
        return out


class HeldStream(ToolStream):
    """Holds the whole output and reads it with the format's whole reader at ``finish`` (a format whose
    calls cannot be split, such as the ``json`` format's document of calls for a request not constrained).
    O(the feed) per feed."""

    def __init__(self, fmt: ToolFormat, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary) -> None:
        self._fmt, self._request, self._policy = fmt, request, policy
        self._pending = PendingText(frozenset(vocabulary.special_tokens))
        self._scanned = 0

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        self._pending.extend(pieces)
        self._scanned += sum(len(t) for t, _ in pieces)
        return EMPTY

    def finish(self) -> ToolStreamDelta:
        src = self._pending.marked()
        self._scanned += len(src.text)
        self._pending.clear()
        result = self._fmt.read_marked(src, self._request, self._policy)
        return ToolStreamDelta(result.content or "", result.calls, whole_call_deltas(result.calls, 0))
