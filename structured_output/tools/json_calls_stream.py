"""The streaming reader of the ``json`` format (:class:`~.json_calls.JsonCallsFormat`) for a constrained
request: each call goes out as the JSON document of calls is written.

The document is ``[{"name": ..., "parameters": {...}}, ...]`` under a JSON schema constraint. A small
incremental scanner walks its two outer levels (the array, each call object: whitespace, keys, ``:``, ``,``)
and, inside a value, only what finds its end: a string's closing quote (escapes skipped), an object's
closing bracket (:class:`~.arg_stream.BracketDepth`). Per call object:

- ``"name"``: its string is held until its closing quote, then decoded (escapes, ``\\uXXXX``); when the
  request allows a call of that tool at that index (``CallPolicy.tool`` / ``full``) the call's first delta
  goes out, with the parameters text held so far (``"parameters"`` written before ``"name"``);
- ``"parameters"``: its object's text as written, from ``{`` to its closing ``}``, goes out as it comes once
  the name is out (held until then). The whole reader returns the same text (``parameter_spans``), so every
  concatenation of a call's fragments is a prefix of its whole arguments, and all of them are those.

Whatever the scanner cannot take (a control token, a key other than these two or one written twice, a name
not allowed, text that is not this document) stops the early sending: the rest is decided at ``finish`` by
the whole reader on the whole output, held as :class:`~.stream.HeldStream` holds it. There, calls whose first
delta went out get the rest of their arguments when the whole read has them (same name, arguments starting
with the text sent), else they keep the text sent, and the output's text is theirs, not content. Before
``finish`` no content goes out: one JSON document is the calls or it is content.

Per feed: O(the feed) (each character is examined once by the scanner; a held name or parameters text is
joined once); ``finish`` reads the whole output once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from thinkgate.reasoning.vocabulary import Vocabulary

from .arg_stream import BracketDepth
from .args import _skip_ws
from .call_delta import CallDelta, merge_call_deltas, whole_call_deltas
from .live_block import LiveCall
from .pending import PendingText, Piece
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCall, new_call_id
from .stream import EMPTY, ToolStream, ToolStreamDelta

if TYPE_CHECKING:
    from .call_format import ToolFormat

__all__ = ["JsonCallsStream"]

_STRING_STOP = re.compile(r'[\\"]')
MAX_KEY = 64
"""A key's raw text longer than this is neither ``name`` nor ``parameters`` (``\\u`` escapes included)."""

# scanner states
_DOC, _ITEM_OR_END, _ITEM, _KEY_OR_CLOSE, _KEY_NEXT, _KEY, _COLON, _VALUE, _NAME, _PARAMS, _AFTER_VALUE, \
    _AFTER_ITEM, _DONE = range(13)


class JsonCallsStream(ToolStream):
    """One constrained request's streaming reader of the ``json`` format (see the module docstring)."""

    def __init__(self, fmt: ToolFormat, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary) -> None:
        self._fmt, self._request, self._policy = fmt, request, policy
        self._pending = PendingText(frozenset(vocabulary.special_tokens))
        names = [t.name for t in request.tools]
        self._max_name = 12 * max((len(n) for n in names), default=0)  # its raw text: \uXXXX (pairs) per char
        self._scanned = 0
        self._broken = False
        self._state = _DOC
        self._escape = False       # inside a string: the last character was a backslash
        self._str: list[str] = []  # the raw text of the key or name string being read
        self._str_len = 0
        self._key = ""
        self._depth = BracketDepth()
        self._calls: list[LiveCall] = []
        # the call object being read
        self._call: LiveCall | None = None
        self._held: list[str] = []  # parameters text read before the name
        self._params = False        # its parameters object has been read to its end

    @property
    def scanned(self) -> int:
        return self._scanned

    def feed(self, pieces: Sequence[Piece]) -> ToolStreamDelta:
        self._pending.extend(pieces)
        out: list[CallDelta] = []
        for text, control in pieces:
            self._scanned += len(text)
            if self._broken:
                continue
            if control:
                self._broken = True  # the whole reader makes such an output content
            else:
                self._scan(text, out)
        return ToolStreamDelta("", (), merge_call_deltas(out)) if out else EMPTY

    def finish(self) -> ToolStreamDelta:
        src = self._pending.marked()
        self._scanned += len(src.text)
        self._pending.clear()
        result = self._fmt.read_marked(src, self._request, self._policy)
        sent = self._calls
        if not sent:
            return ToolStreamDelta(result.content or "", result.calls, whole_call_deltas(result.calls, 0))
        if len(result.calls) < len(sent):
            return EMPTY  # announced calls that do not read: they keep the text sent, the output is theirs
        frags: list[CallDelta] = []
        calls: list[ToolCall] = []
        for i, c in enumerate(result.calls):
            if i < len(sent):
                rest, decided = sent[i].decided(c)
                frags.append(rest)
                calls.append(decided)
            else:
                frags.append(CallDelta(i, c.arguments, c.name, c.id))
                calls.append(c)
        return ToolStreamDelta("", tuple(calls), merge_call_deltas(frags))

    # -- the scanner -----------------------------------------------------------------------------
    def _string(self, t: str, i: int) -> int:
        """Read a string's text from ``i``: the position after its closing quote, or -1 (all of ``t`` read)."""
        n = len(t)
        while i < n:
            if self._escape:
                self._escape = False
                i += 1
                continue
            m = _STRING_STOP.search(t, i)
            if m is None:
                return -1
            if m.group() == "\\":
                self._escape = True
                i = m.end()
                continue
            return m.end()
        return -1

    def _scan(self, t: str, out: list[CallDelta]) -> None:
        i, n = 0, len(t)
        while i < n and not self._broken:
            st = self._state
            if st == _KEY or st == _NAME:
                e = self._string(t, i)
                piece = t[i:] if e < 0 else t[i:e - 1]
                self._str.append(piece)
                self._str_len += len(piece)
                if self._str_len > (MAX_KEY if st == _KEY else self._max_name):
                    self._broken = True  # no key this scanner takes, or no tool's name
                    return
                if e < 0:
                    return
                i = e
                raw, self._str, self._str_len = "".join(self._str), [], 0
                try:
                    value = json.loads('"' + raw + '"')
                except ValueError:
                    self._broken = True
                    return
                if st == _KEY:
                    self._key, self._state = value, _COLON
                else:
                    self._named(value, out)
                    self._state = _AFTER_VALUE
                continue
            if st == _PARAMS:
                close = self._depth.first_close(t, 0, i)
                end = n if close < 0 else close
                self._parameters(t[i:end], out)
                i = end
                if close >= 0:
                    self._params, self._state = True, _AFTER_VALUE
                continue
            i = _skip_ws(t, i)
            if i == n:
                return
            c = t[i]
            if st == _DOC and c == "[":
                self._state = _ITEM_OR_END
            elif st in (_ITEM_OR_END, _ITEM) and c == "{":
                self._call, self._held, self._params = None, [], False
                self._state = _KEY_OR_CLOSE
            elif st == _ITEM_OR_END and c == "]":
                self._state = _DONE
            elif st in (_KEY_OR_CLOSE, _KEY_NEXT) and c == '"':
                self._state = _KEY
            elif st == _COLON and c == ":":
                self._state = _VALUE
            elif st == _VALUE and c == '"' and self._key == "name" and self._call is None:
                self._state = _NAME
            elif st == _VALUE and c == "{" and self._key == "parameters" and not self._params:
                self._depth = BracketDepth()
                self._state = _PARAMS
                continue  # the bracket is the parameters' first character
            elif st == _AFTER_VALUE and c == ",":
                self._state = _KEY_NEXT
            elif st == _AFTER_VALUE and c == "}" and self._call is not None and self._params:
                self._state = _AFTER_ITEM
            elif st == _AFTER_ITEM and c == ",":
                self._state = _ITEM
            elif st == _AFTER_ITEM and c == "]":
                self._state = _DONE
            else:  # not this document (or not one the scanner follows): the whole reader decides at finish
                self._broken = True
                return
            i += 1

    def _named(self, name: str, out: list[CallDelta]) -> None:
        index = len(self._calls)
        if self._policy.tool(name) is None or self._policy.full(index):
            self._broken = True  # the whole reader leaves such a document content
            return
        call = LiveCall(index, new_call_id(), name, self._held)
        self._calls.append(call)
        self._call = call
        out.append(CallDelta(index, "".join(self._held), name, call.id))

    def _parameters(self, text: str, out: list[CallDelta]) -> None:
        if not text:
            return
        if self._call is None:
            self._held.append(text)
        else:
            self._call.sent.append(text)
            out.append(CallDelta(self._call.index, text))
