"""The pythonic families: calls written as Python call expressions, ``[get_weather(city='Paris'), f(n=1)]``.

One :class:`PythonicFormat` per family, defined by the text around its calls and how it writes values
(``py_values.py``)::

    block        the text around a turn's calls     pythonic '[' ... ']';
                                                    LFM2 '<|tool_call_start|>[' ... ']<|tool_call_end|>';
                                                    Olmo 3 '<function_calls>\\n' ... '\\n</function_calls>'
    call_sep     between two calls                  ', ' (a Python list); Olmo 3 '\\n' (one call a line)
    values       "python" | "olmo"                  (py_values.py)
    whole        the block is the whole output      pythonic, llama4_pythonic: vLLM reads calls only then;
                                                    else the block sits anywhere in free text (a trigger starts it)
    wrapper      reader only: markers that may wrap a whole block (Llama 4: <|python_start|> ... <|python_end|>)
    bare_lines   reader only: without a block, an output made only of call lines is calls (Olmo 3)

The constraint (a structural tag): ``required`` / ``named``: the block with ``call (sep call)*`` (one call
when parallel calls are off or a function is named), each call ``NAME(`` keyword arguments ``)`` in the
tool's schema order (``py_values.py``); a block-in-text family may be preceded by whitespace, a whole-output
family not (vLLM reads its list only at the first character). ``auto`` when strictness asks: a whole-output
family takes the block or text that does not start with the block's first character; a block-in-text
family takes free text in which the trigger (the block's first marker, a token where the vocabulary has it,
else text) can only start a valid block. ``none`` when strictness asks: the trigger cannot start. A tool
name must be a Python (dotted) name, or the request is a ``ValueError``.

The reader parses with Python's own parser (``ast``) as vLLM's pythonic parsers do, and takes values as
:func:`~.py_values.literal_value` does. Read from token ids, the call text must hold no control token.
Calls the request's rules refuse stay content (their text); text outside the block is content.
The streaming reader holds the output and reads it whole at the end (:class:`~.stream.HeldStream`):
a Python expression cannot be told complete before it closes.
"""

from __future__ import annotations

import ast
import keyword
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, LEAD_WHITESPACE, ToolFormat, join_content
from .marked import MarkedText
from .policy import CallPolicy
from .py_values import NotLiteral, PyArgsGrammar, PyValueStyle, call_of
from .request import ToolRequest, ToolSpec
from .results import ToolCall, ToolCallsResult
from .syntax import Fmt, LiteralText, any_tokens, or_, regex, seq, structural_tag, tag

__all__ = ["PythonicFormat", "parse_calls"]

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")

Span = tuple[int, int]


Read = list[tuple[str, str, Span]]
"""Calls read from a text: (name, arguments JSON text, the call's span in the text)."""


def parse_calls(text: str, pieces: Sequence[Span], sep: str = "", bracket: bool = False) -> Read | None:
    """The calls of the Python list ``"[" * bracket + sep.join(text[a:b] for a, b in pieces) + "]" * bracket``,
    each as (name, arguments JSON text, its span in ``text``), or None when that is not a non-empty list of
    calls with literal keyword arguments. Never raises on model output."""
    code_parts: list[str] = []
    where: list[int] = []  # code character -> text position (-1: added by the join)
    if bracket:
        code_parts.append("[")
        where.append(-1)
    for k, (a, b) in enumerate(pieces):
        if k:
            code_parts.append(sep)
            where.extend([-1] * len(sep))
        code_parts.append(text[a:b])
        where.extend(range(a, b))
    if bracket:
        code_parts.append("]")
        where.append(-1)
    code = "".join(code_parts)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escape sequences
            tree = ast.parse(code, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return None
    body = tree.body
    if not isinstance(body, ast.List) or not body.elts:
        return None
    lines = code.split("\n")
    starts = [0]
    for ln in lines[:-1]:
        starts.append(starts[-1] + len(ln) + 1)

    def char_at(lineno: int, col: int) -> int:
        line = lines[lineno - 1]
        return starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8", errors="ignore"))

    out: list[tuple[str, str, Span]] = []
    for node in body.elts:
        try:
            name, args = call_of(node)
        except (NotLiteral, RecursionError, ValueError, TypeError, OverflowError):
            return None
        a = char_at(node.lineno, node.col_offset)
        b = char_at(node.end_lineno or node.lineno, node.end_col_offset or 0)
        out.append((name, args, (where[a], where[b - 1] + 1)))
    return out


@dataclass(eq=False)
class PythonicFormat(ToolFormat):
    """A pythonic family (see the module docstring)."""

    name: str
    block: tuple[str, str] = ("[", "]")
    call_sep: str = ", "
    values: PyValueStyle = "python"
    whole: bool = True
    wrapper: tuple[str, str] | None = None
    bare_lines: bool = False
    markers: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    description: str = ""

    def __post_init__(self) -> None:
        if self.whole and self.block[0][:1] != "[":
            raise ValueError(f"format {self.name!r}: a whole-output block starts with '['")

    @property
    def required_markers(self) -> tuple[str, ...]:
        return tuple(m for m in self.markers if m in "".join(self.block))

    # -- constraint ------------------------------------------------------------------------------
    def _call_tag(self, t: ToolSpec, grammar: PyArgsGrammar) -> Fmt:
        if not _DOTTED.fullmatch(t.name) or any(keyword.iskeyword(p) for p in t.name.split(".")):
            raise ValueError(f"tool format {self.name!r}: tool name {t.name!r} is not a Python name, "
                             "so it cannot be written as a call")
        return tag(t.name + "(", grammar.keywords(t), ")")

    def _calls(self, tools: Sequence[ToolSpec], one: bool, ws: int | None) -> Fmt:
        grammar = PyArgsGrammar(self.values, max_whitespace=ws)
        tags = [self._call_tag(t, grammar) for t in tools]
        if one:
            return or_(*tags)
        return {"type": "tags_with_separator", "tags": tags, "separator": self.call_sep, "at_least_one": True,
                "stop_after_first": False}

    def _block(self, calls: Fmt, lit: LiteralText) -> Fmt:
        return seq(lit(self.block[0]), calls, lit(self.block[1]))

    def _trigger(self, lit: LiteralText) -> tuple[str, bool]:
        """(the trigger, whether it is a token) of a block-in-text family under ``lit``."""
        is_marker, piece = lit.split(self.block[0])[0]
        return (piece, True) if is_marker else (self.block[0], False)

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        for m in self.required_markers:
            if m not in lit.markers:
                raise ValueError(f"tool format {self.name!r}: the vocabulary {getattr(vocabulary, 'name', None)!r} "
                                 f"has no control token {m!r}")
        tools = request.function_tools
        if request.mode in ("required", "named"):
            block = self._block(self._calls(tools, request.max_calls == 1, max_whitespace), lit)
            return structural_tag(block if self.whole else seq(regex(LEAD_WHITESPACE), block))
        if self.whole:
            # text that does not start the block: its first character is not the block's
            free = {"type": "optional", "content": seq(regex("[^" + re.escape(self.block[0][0]) + "]"),
                                                       {"type": "any_text"})}
            if request.mode == "none" or not tools:
                return structural_tag(free)
            return structural_tag(or_(self._block(self._calls(tools, not request.parallel, max_whitespace), lit), free))
        trigger, is_token = self._trigger(lit)
        excludes = self._free_text_excludes(vocabulary, keep=[trigger])
        if request.mode == "none" or not tools:
            if is_token:
                return structural_tag(any_tokens([trigger, *excludes]))
            return structural_tag({"type": "any_text", "excludes": [trigger]})
        parts = lit.split(self.block[0])[1:]
        end_parts = lit.split(self.block[1])
        *end_body, (end_is_token, end_piece) = end_parts
        begin: str | Fmt = {"type": "token", "token": trigger} if is_token else trigger
        content = seq(*[{"type": "token", "token": p} if m else {"type": "const_string", "value": p}
                        for m, p in (parts if is_token else [])],
                      self._calls(tools, not request.parallel, max_whitespace),
                      *[{"type": "token", "token": p} if m else {"type": "const_string", "value": p}
                        for m, p in end_body])
        end: str | Fmt = {"type": "token", "token": end_piece} if end_is_token else end_piece
        block_tag = tag(begin, content, end)
        if is_token:
            return structural_tag({"type": "token_triggered_tags", "trigger_tokens": [trigger], "tags": [block_tag],
                                   "exclude_tokens": excludes, "at_least_one": False,
                                   "stop_after_first": not request.parallel})
        return structural_tag({"type": "triggered_tags", "triggers": [trigger], "tags": [block_tag],
                               "at_least_one": False, "stop_after_first": not request.parallel})

    # -- reader ----------------------------------------------------------------------------------
    def _calls_in(self, src: MarkedText, a: int, b: int) -> list[tuple[str, str, Span]] | None:
        """The calls of the block body ``text[a:b]`` (between the block's tags), or None."""
        text = src.text
        if not src.plain(a, b):
            return None
        if self.block[0].endswith("["):  # a Python list: the body holds its brackets
            return parse_calls(text, [(a, b)])
        # one call a line (Olmo 3): lines joined as list items, else the body as the items of a list
        lines: list[Span] = []
        p = a
        for line in text[a:b].split("\n"):
            q = p + len(line)
            if line.strip():
                lines.append((p, q))
            p = q + 1
        if not lines:
            return None
        return parse_calls(text, lines, sep=", ", bracket=True) or parse_calls(text, [(a, b)], bracket=True)

    def _whole_calls(self, src: MarkedText) -> list[tuple[str, str, Span]] | None:
        text = src.text
        a, b = 0, len(text)
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        lit = LiteralText(self.markers)
        if self.wrapper is not None:
            w0, w1 = self.wrapper
            if src.match_literal(a, w0, lit) >= 0:
                a += len(w0)
                if b - len(w1) >= a and src.match_literal(b - len(w1), w1, lit) == b:
                    b -= len(w1)
        if a >= b or text[a] != "[" or not src.plain(a, b):
            return None
        return parse_calls(text, [(a, b)])

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        policy = policy or CallPolicy(request)
        text = src.text
        found: list[tuple[list[tuple[str, str, Span]], Span]] = []  # (calls, block span)
        if self.whole:
            calls = self._whole_calls(src)
            if calls:
                found.append((calls, (0, len(text))))
        else:
            lit = LiteralText(self.markers)
            begin, end = self.block
            open_ = begin.rstrip("[\n ")  # a list-bodied block's bracket belongs to the list
            close = end.lstrip("]\n ")
            scan = 0
            while True:
                i = src.find_literal(open_, scan, lit)
                if i < 0:
                    break
                a = i + len(open_)
                j = src.find_literal(close, a, lit)
                b, stop = (j, j + len(close)) if j >= 0 else (len(text), len(text))
                body_a, body_b = _strip_span(text, a, b)
                calls = self._calls_in(src, body_a, body_b) if body_a < body_b else None
                if calls:
                    found.append((calls, (i, stop)))
                    scan = stop
                else:
                    scan = a
            if not found and self.bare_lines:
                a, b = _strip_span(text, 0, len(text))
                calls = self._calls_in(src, a, b) if a < b else None
                if calls:
                    found.append((calls, (0, len(text))))
        content: list[str] = []
        out: list[ToolCall] = []
        pos = 0
        for calls, (s, e) in found:
            kept: list[ToolCall] = []
            refused: list[str] = []
            for name, args, (cs, ce) in calls:
                if policy.accepts(name, args, len(out) + len(kept)):
                    kept.append(ToolCall(name, args))
                else:
                    refused.append(text[cs:ce])
            if not kept:
                continue  # all of the block stays content
            content.append(text[pos:s])
            content.extend(refused)
            out.extend(kept)
            pos = e
        content.append(text[pos:])
        return ToolCallsResult(join_content(content), tuple(out))


def _strip_span(text: str, a: int, b: int) -> Span:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b
