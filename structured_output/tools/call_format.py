"""The format engine: one declarative spec per format builds both its constraint and its reader.

A :class:`CallFormat` is defined by literals of the model's own call syntax::

    section      optional (begin, end) around all calls of a turn  (DeepSeek, Kimi, MiniMax, DSML)
    call_begin   with {name} (and {index}: Kimi, Cohere)          '<tool_call>\\n{"name": "{name}", "arguments": '
    args         JsonArgs() | XmlArgs(...) | GemmaArgs()
    call_end                                                         '}\\n</tool_call>'
    call_sep     between two calls                                   '\\n'
    alt_sections other (begin, end) spellings only the readers take    (DeepSeek V4.1: V4's name, V4.1's spacing)

and by its ``markers``: the family's control tokens, matched as tokens. From that one definition:

- the constraint (a structural tag over the text *after the thinking*):
  ``required``: optional whitespace, then the calls (one section holding ``call (sep call)*``, or
  ``call (sep call)*``); nothing before them, nothing after; one call when parallel calls are off;
  ``named``: the same with exactly one call of that tool;
  ``auto`` (when strictness asks for a constraint): free text in which the first marker of the syntax
  (the trigger) can only start a valid call block; one block of one call when parallel calls are off;
  ``none`` (when strictness asks): free text in which the trigger cannot occur.
  Free text never contains the family's other control tokens (with a vocabulary: any control token but
  the stop tokens);
- the reader: the calls where the syntax matches exactly, content = the rest (stripped). Read from token
  ids (:class:`~.marked.MarkedText`), a marker matches only where it is a control token; every read
  call then passes the request's rules (:class:`~.policy.CallPolicy`) or stays content.

Formats whose call syntax does not fit (harmony's messages, ``harmony.py``; a format without any
syntax, whose calls are a JSON array, ``json_calls.py``) are their own :class:`ToolFormat` classes
with the same two methods. The table of formats is ``formats.py``.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.constraints import DEFAULT_TOOL_MAX_WHITESPACE, Constraint
from .args import ArgsSyntax, JsonArgs, NoMatch, XmlArgs
from .call_stream import CallFormatStream
from .key_check import keys_check_spec
from .marked import MarkedText, json_depth_ok, loose_separator
from .policy import CallPolicy
from .request import ToolRequest, ToolSpec
from .results import ToolCall, ToolCallsResult
from .stream import HeldStream, ToolStream
from .syntax import Fmt, LiteralText, any_tokens, const, opt, or_, regex, seq, structural_tag, tag
from .tool_table import ToolTable

_JSON_CALL_PRE = re.compile(r'\{\s*"name"\s*:\s*"$')
_JSON_CALL_POST = re.compile(r'"\s*,\s*"(arguments|parameters)"\s*:\s*')
_DECODER = json.JSONDecoder()

__all__ = ["ToolFormat", "CallFormat", "DEFAULT_TOOL_MAX_WHITESPACE", "LEAD_WHITESPACE", "lead_whitespace",
           "join_content"]


LEAD_WHITESPACE = r"[\t\r\n]{0,4}"
"""What may precede forced calls (models write ``\\n\\n`` after their thinking). No space: a bounded run that may
hold a space leaves every token that starts with a space (105,379 of Qwen3.6's 248,077) undecided in each of
its states, and xgrammar keeps those lists: 1.6 MB per grammar, against 0.02 MB without (in-process,
``memory_size_bytes``, Qwen3.6 vocabulary). A model writes no space before its call."""


_WS_RUN = re.compile(r"[ \t\r\n]{2}")


def lead_whitespace(max_whitespace: int | None) -> str:
    """:data:`LEAD_WHITESPACE`, or any whitespace where there is no bound in the grammar (``None``: none at all,
    or one enforced beside it, :meth:`ToolFormat.json_whitespace_beside`)."""
    return LEAD_WHITESPACE if max_whitespace is not None else r"[ \t\r\n]*"


class ToolFormat(ABC):
    """A model family's tool-call format: a constraint builder and a reader from one definition."""

    name: str
    aliases: tuple[str, ...]
    description: str
    markers: tuple[str, ...]
    supports_builtin_tools: bool = False
    constraint_kind: ClassVar[str] = "structural tag"
    """How a constrained request is written for the grammar: ``"structural tag"`` (the model's own call
    syntax) or ``"JSON schema"`` (the calls as a JSON document, where the family has no syntax of its own)."""
    covers_reasoning: bool = False
    """The constraint spells the whole output, the thinking included (the manager then applies it
    from the first token)."""

    def for_vocabulary(self, vocabulary: Vocabulary | None) -> ToolFormat:
        """The format as it reads and constrains the model of ``vocabulary``: itself, for every format with
        a syntax of its own. A template-reading format (``hf`` / ``beam``, ``template.py``) builds the format
        of the vocabulary's response template instead (``ValueError`` when there is no vocabulary, or it has
        no template the format can read). Whoever takes a format by name for a model (``Parser``,
        :func:`~.build_tool_constraint`, :class:`~.ToolReader`) binds it with this first."""
        return self

    def constraint(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                   max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> Constraint | None:
        """The constraint of ``request`` in this format, or None when the request asks for none."""
        if not request.constrained:
            return None
        self._check_builtin(request)
        beside = self.whitespace_cap(max_whitespace) if self.json_whitespace_beside(request) else None
        tag_dict = self.structural_tag(request, vocabulary=vocabulary,
                                       max_whitespace=None if beside is not None else max_whitespace)
        if tag_dict is None:
            return None
        # the builder is deterministic and Constraint keeps key order, so equal requests give equal
        # cache keys
        check = keys_check_spec(self.name, request.tools, self.any_order_tools(request))
        return Constraint.structural_tag(tag_dict, covers_reasoning=self.covers_reasoning, keys_check=check,
                                         json_whitespace=beside)

    def json_whitespace_beside(self, request: ToolRequest) -> bool:
        """Whether every output of ``request``'s constraint is JSON text, whitespace and control tokens
        (``json_text.py``), so that its whitespace bound is enforced beside the grammar, as for a JSON
        response: the tag is then built with free whitespace and the constraint carries the bound
        (:meth:`whitespace_cap`). False unless a format says otherwise; the tests check each format that
        does with :func:`~.json_text.json_text_only`."""
        return False

    def whitespace_cap(self, max_whitespace: int | None) -> int | None:
        """The whitespace bound this format enforces for a request's ``max_whitespace``."""
        return max_whitespace

    def any_order_tools(self, request: ToolRequest) -> list[str]:
        """The names of ``request``'s tools whose top-level argument keys the constraint admits in any
        order, repetition included: the output check enforces each key once and the required ones for
        their calls (``key_check.py``). None unless a format says otherwise."""
        return []

    def _check_builtin(self, request: ToolRequest) -> None:
        if not self.supports_builtin_tools and request.mode == "named" and request.tools[0].builtin:
            raise ValueError(f"tool format {self.name!r} has no syntax for builtin tools; "
                             f"tool_choice forces builtin tool {request.tools[0].name!r}")

    @abstractmethod
    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        """The structural tag (a dict in xgrammar's format) of a constrained request."""

    def read(self, text: str, request: ToolRequest) -> ToolCallsResult:
        """The content and calls of ``text`` (the output after the thinking), trusting the text: a
        marker's characters count as the marker (see :meth:`read_marked` for token ids)."""
        return self.read_marked(MarkedText.trusted(text), request)

    @abstractmethod
    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        """The content and calls of ``src``: calls only where the syntax matches with its markers at
        control tokens (see :class:`~.marked.MarkedText`) and ``policy`` (default: the request's
        :class:`~.policy.CallPolicy`) accepts them; everything else is content. Never raises on model
        output."""

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        """The streaming reader of one request (see :mod:`.stream` for its contract): the same calls and
        content as :meth:`read_marked` on the same ids, for every chunking. ``stream_arguments``: the output
        is written under the request's constraint, so calls may go out as they are written. This default
        holds the whole output and reads it at the end; a format whose calls can be decided one by one
        overrides it."""
        return HeldStream(self, request, policy, vocabulary)

    @property
    def required_markers(self) -> tuple[str, ...]:
        """The markers a model's vocabulary must have as control tokens for this format to be read as
        the model writes it (the front end's ``Parser`` checks them at construction)."""
        return self.markers

    # -- shared helpers
    def _lit(self, vocabulary: Vocabulary | None) -> LiteralText:
        if vocabulary is None:
            return LiteralText(self.markers)
        # a marker that is ordinary text in this vocabulary is matched as text
        return LiteralText([m for m in self.markers if m in vocabulary.special_tokens])

    def _free_text_excludes(self, vocabulary: Vocabulary | None, keep: Iterable[str]) -> list[str]:
        keep = set(keep)
        if vocabulary is None:
            return [m for m in self.markers if m not in keep]
        stops = vocabulary.stop_token_ids
        return sorted(t for t, i in vocabulary.special_tokens.items() if i not in stops and t not in keep)


def _skip_space(src: MarkedText, pos: int) -> int:
    """The position after the whitespace at ``pos`` (text, not control tokens)."""
    text = src.text
    end = pos
    while end < len(text) and text[end] in " \t\r\n":
        end += 1
    return end if src.plain(pos, end) else pos


def join_content(parts: Sequence[str]) -> str | None:
    """The reader's content: the pieces joined and stripped, None when nothing is left."""
    text = "".join(parts).strip()
    return text or None


@dataclass(eq=False)
class CallFormat(ToolFormat):
    """A format defined by literals (see the module docstring)."""

    name: str
    call_begin: str
    call_end: str
    args: ArgsSyntax
    markers: tuple[str, ...] = ()
    section: tuple[str, str] | None = None
    call_sep: str = ""
    aliases: tuple[str, ...] = ()
    description: str = ""
    index_pattern: str = "[0-9]{1,4}"
    text_trigger: str | None = None
    """For a syntax without markers (llama3 JSON): the text that starts a call in free text."""
    call_ids: Callable[[str, int], str] | None = None
    """The family's own call-id scheme (``call_ids.py``), given the call's text and index; None: the default."""
    name_quotes: tuple[str, ...] = ()
    """What the readers also take in place of the quote ``call_begin`` writes around ``{name}`` (MiniMax M3:
    ``'`` and ``""`` for none, ``name='N'`` / ``name=N>``, as vLLM reads them); the grammar writes the
    template's own."""
    optional_markers: tuple[str, ...] = ()
    """Markers of the syntax a vocabulary may hold as control tokens or not (MiniMax M3's ``<tool_call>``
    after its namespace token: one in the Qwen3.6 table, unknown in M3's own tokenizer): matched as a
    token where it is one, as text elsewhere, and not among :attr:`required_markers`."""
    alt_sections: tuple[tuple[str, str], ...] = ()
    """Other (opening, closing) spellings of :attr:`section` that the readers take, never the grammar (vLLM's
    ``deepseek_v41`` also opens a block with V4's ``tool_calls`` name in V4.1's spacing). Each must start with
    the section's trigger; the readers take any of the openings, then any of the closings, an alternative
    one as written (only its surrounding whitespace loose)."""
    _trigger: str = field(init=False, default="")
    _trigger_is_token: bool = field(init=False, default=True)
    _reader_trigger: str = field(init=False, default="")
    """What the readers search for: the trigger, or for a text trigger its first word (``{"name":`` of
    ``{"name": "``), since the reader takes the literal's whitespace as any run, also none."""
    _lead_text: str = field(init=False, default="")

    def __post_init__(self) -> None:
        if "{name}" not in self.call_begin:
            raise ValueError(f"format {self.name!r}: call_begin has no {{name}}")
        block = self.section[0] if self.section else self.call_begin
        parts = LiteralText(self.markers).split(block)
        first_marker = next(((i, p) for i, (m, p) in enumerate(parts) if m), None)
        if first_marker is not None and self.text_trigger is None:
            i, marker = first_marker
            self._trigger, self._trigger_is_token = marker, True
            self._lead_text = "".join(p for _, p in parts[:i])
        else:
            trig = self.text_trigger or block.split("{name}")[0]
            if not trig:
                raise ValueError(f"format {self.name!r}: no trigger")
            self._trigger, self._trigger_is_token, self._lead_text = trig, False, ""
        self._reader_trigger = self._trigger if self._trigger_is_token else self._trigger.split()[0]
        if self.alt_sections:
            if self.section is None:
                raise ValueError(f"format {self.name!r}: alt_sections without a section")
            for begin, _ in self.alt_sections:
                if not begin.startswith(self._lead_text + self._trigger):
                    raise ValueError(f"format {self.name!r}: the section spelling {begin!r} does not start with "
                                     f"the trigger {self._lead_text + self._trigger!r}")

    def match_section_opening(self, src: MarkedText, pos: int, lit: LiteralText, skip: int = 0) -> int:
        """The end of a section's opening at ``pos`` (its first ``skip`` characters, the lead, already read),
        or -1: :attr:`section`'s read generously (as every literal), one of :attr:`alt_sections`' as written
        (only its surrounding whitespace is loose: a second spelling must not widen into a third)."""
        assert self.section is not None
        return self._match_spelling(src, pos, self.section[0][skip:], [b[skip:] for b, _ in self.alt_sections], lit)

    def match_section_closing(self, src: MarkedText, pos: int, lit: LiteralText) -> int:
        """The end of a section's closing at ``pos``, or -1 (any of the spellings, as for the opening)."""
        assert self.section is not None
        return self._match_spelling(src, pos, self.section[1], [e for _, e in self.alt_sections], lit)

    @staticmethod
    def _match_spelling(src: MarkedText, pos: int, literal: str, alternatives: Sequence[str], lit: LiteralText) -> int:
        end = src.match_literal(pos, literal, lit)
        if end >= 0:
            return end
        for alt in alternatives:
            end = src.match_literal(pos, alt, lit)
            if end >= 0 and src.text[pos:end].strip() == alt.strip():
                return end
        return -1

    # -- constraint ------------------------------------------------------------------------------
    def any_order_tools(self, request: ToolRequest) -> list[str]:
        return [t.name for t in request.function_tools if self.args.any_order(t)]

    def _call(self, t: ToolSpec, lit: LiteralText, ws: int | None) -> Fmt:
        pre, post = self.call_begin.split("{name}")
        parts: list[Fmt] = [*self._indexed(pre, lit), const(t.name), *self._indexed(post, lit)]
        parts += [self.args.build(t, lit, ws), lit(self.call_end)]
        return seq(*parts)

    def _indexed(self, literal: str, lit: LiteralText) -> list[Fmt]:
        """A piece of the call's opening, its ``{index}`` (before or after the name) as the index pattern."""
        if "{index}" not in literal:
            return [lit(literal)]
        a, b = literal.split("{index}")
        return [lit(a), regex(self.index_pattern), lit(b)]

    @staticmethod
    def _ends(elements: list[Fmt]) -> tuple[str | Fmt, list[Fmt], str | Fmt]:
        """Split a sequence into (begin, middle, end) as a TagFormat takes them: a leading token or
        const string, a trailing token or const string (else "")."""
        els = list(elements)
        first = els.pop(0) if els and els[0]["type"] in ("token", "const_string") else None
        last = els.pop() if els and els[-1]["type"] in ("token", "const_string") else None
        begin: str | Fmt = "" if first is None else (first if first["type"] == "token" else first["value"])
        end: str | Fmt = "" if last is None else (last if last["type"] == "token" else last["value"])
        return begin, els, end

    def _call_tag(self, t: ToolSpec, lit: LiteralText, ws: int | None) -> Fmt:
        call = self._call(t, lit, ws)
        begin, middle, end = self._ends(call["elements"] if call["type"] == "sequence" else [call])
        return tag(begin, seq(*middle), end)

    def json_whitespace_beside(self, request: ToolRequest) -> bool:
        """Forced calls with JSON arguments: JSON text between the call literals, none of which holds a run of
        two or more whitespace characters (Cohere's indented ``[\\n    {``: a bound below it would refuse it)."""
        literals = (self.call_begin, self.call_end, self.call_sep, *(self.section or ()))
        return (request.mode in ("required", "named") and isinstance(self.args, JsonArgs)
                and not any(_WS_RUN.search(s) for s in literals))

    def _calls(self, tools: Sequence[ToolSpec], lit: LiteralText, ws: int | None, one: bool) -> Fmt:
        tags = [self._call_tag(t, lit, ws) for t in tools]
        if one:
            return or_(*tags)
        return {"type": "tags_with_separator", "tags": tags, "separator": self.call_sep, "at_least_one": True,
                "stop_after_first": False}

    def _section(self, inner: Fmt, lit: LiteralText, *, optional_lead: bool = False) -> Fmt:
        assert self.section is not None
        begin = lit(self.section[0])
        if optional_lead and self._lead_text:
            # DSML: the "<" before the first ｜DSML｜ may sit in the thinking, whose end is that token
            begin = seq(opt(lit(self._lead_text)), lit(self.section[0][len(self._lead_text):]))
        return seq(begin, inner, lit(self.section[1]))

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        if self._trigger_is_token and self._trigger not in lit.markers:
            raise ValueError(f"tool format {self.name!r}: the vocabulary {getattr(vocabulary, 'name', None)!r} "
                             f"has no control token {self._trigger!r}")
        tools = request.function_tools
        ws = max_whitespace
        if request.mode in ("required", "named"):
            calls = self._calls(tools, lit, ws, one=request.max_calls == 1)
            block = self._section(calls, lit, optional_lead=True) if self.section else calls
            return structural_tag(seq(regex(lead_whitespace(ws)), block))
        excludes = self._free_text_excludes(vocabulary, keep=[self._trigger])
        if request.mode == "none" or not tools:
            if self._trigger_is_token:
                return structural_tag(any_tokens([self._trigger, *excludes]))
            return structural_tag({"type": "any_text", "excludes": [self._trigger]})
        one = not request.parallel
        if self.section is None:
            # every call starts with the trigger: the calls are the triggered tags
            tags = [self._call_tag(t, lit, ws) for t in tools]
        else:
            # the section starts with the trigger (DSML: after a "<" of free text) and holds the calls
            sec = self._section(self._calls(tools, lit, ws, one=one), lit)
            els = sec["elements"]
            i = next(k for k, e in enumerate(els) if e["type"] == "token" and e["token"] == self._trigger)
            _, middle, end = self._ends(els[i:])
            tags = [tag(els[i], seq(*middle), end)]
        if self._trigger_is_token:
            return structural_tag({
                "type": "token_triggered_tags",
                "trigger_tokens": [self._trigger],
                "tags": tags,
                "exclude_tokens": excludes,
                "at_least_one": False,
                "stop_after_first": one,
            })
        return structural_tag({
            "type": "triggered_tags",
            "triggers": [self._trigger],
            "tags": tags,
            "at_least_one": False,
            "stop_after_first": one,
        })

    # -- reader ----------------------------------------------------------------------------------
    @property
    def syntax_markers(self) -> tuple[str, ...]:
        """The markers the call syntax writes (a block holds these control tokens, no other)."""
        syntax = (self.call_begin + self.call_end + "".join(self.section or ()) + repr(self.args)
                  + "".join(b + e for b, e in self.alt_sections))
        return tuple(m for m in self.markers if m in syntax)

    @property
    def required_markers(self) -> tuple[str, ...]:
        return tuple(m for m in self.syntax_markers if m not in self.optional_markers)

    def with_id(self, call: ToolCall, call_text: str, index: int) -> ToolCall:
        """``call`` with the family's own id (:attr:`call_ids`), if it has one."""
        return call if self.call_ids is None else replace(call, id=self.call_ids(call_text, index))

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        return CallFormatStream(self, request, policy, vocabulary, stream_arguments=stream_arguments)

    @property
    def _reader_lit(self) -> LiteralText:
        return LiteralText(self.markers)

    def _expect(self, src: MarkedText, pos: int, literal: str, lit: LiteralText) -> int:
        end = src.match_literal(pos, literal, lit)
        if end < 0:
            raise NoMatch(f"expected {literal!r}")
        return end

    def _expect_indexed(self, src: MarkedText, pos: int, literal: str, lit: LiteralText) -> int:
        """:meth:`_expect` of a piece of the call's opening that may hold ``{index}`` (the index pattern)."""
        if "{index}" not in literal:
            return self._expect(src, pos, literal, lit)
        a, b = literal.split("{index}")
        q = self._expect(src, pos, a, lit)
        m = re.compile(self.index_pattern).match(src.text, q)
        if m is None or not src.plain(q, m.end()):
            raise NoMatch("bad call index")
        return self._expect(src, m.end(), b, lit)

    def _openings(self) -> list[tuple[str, str]]:
        """(the text before ``{name}``, the text after it) of a call's opening as the readers take it:
        ``call_begin``'s own, then with each of :attr:`name_quotes` in place of its quote around the name."""
        pre, post = self.call_begin.split("{name}")
        out = [(pre, post)]
        if self.name_quotes and pre[-1:] in ('"', "'") and post[:1] == pre[-1:]:
            out += [(pre[:-1] + q, q + post[1:]) for q in self.name_quotes if q != pre[-1]]
        return out

    def _after_name(self, src: MarkedText, p: int, name: str, lit: LiteralText, post: str) -> int:
        """The end of a call's opening whose name ``name`` starts at ``p`` and is followed by ``post`` (the
        arguments start there)."""
        q = p + len(name)
        if not src.plain(p, q):
            raise NoMatch("a control token inside the name")
        return self._expect_indexed(src, q, post, lit)

    def _names_at(self, src: MarkedText, pos: int, tools: ToolTable, lit: LiteralText,
                  skip: int) -> tuple[int, list[str], str]:
        """(where the name starts, the tools whose name is written there, longest first, the opening's text
        after the name) for a call at ``pos``: the first of :meth:`_openings` that reads with a name."""
        first: tuple[int, list[str], str] | None = None
        last: NoMatch | None = None
        for pre, post in self._openings():
            try:
                p = self._expect_indexed(src, pos, pre[skip:], lit)
            except NoMatch as e:
                last = e
                continue
            names = tools.names_at(src.text, p)
            if names:
                return p, names, post
            first = first or (p, names, post)
        if first is None:
            raise last or NoMatch("expected a call")
        return first

    def read_header(self, src: MarkedText, pos: int, tools: ToolTable, lit: LiteralText,
                    skip: int = 0) -> tuple[str, int]:
        """The opening of a call at ``pos`` -> (its tool's name, where its arguments start), the longest name
        whose opening reads (as :meth:`_read_call` tries them); :class:`NoMatch` otherwise (also when the
        text so far is too short to tell)."""
        p, names, post = self._names_at(src, pos, tools, lit, skip)
        text = src.text
        for name in names:
            try:
                q = self._after_name(src, p, name, lit, post)
            except NoMatch:
                continue
            # a longer name that the text so far may still become is not ruled out (an opening without
            # text after the name, Gemma's ``call:NAME{``): wait for more
            if q >= len(text) or any(len(n) > len(name) and n.startswith(text[p:]) for n in tools):
                raise NoMatch("the name may go on")
            return name, q
        raise NoMatch("unknown tool name")

    def _read_call(self, src: MarkedText, pos: int, tools: ToolTable, lit: LiteralText,
                   skip: int = 0) -> tuple[ToolCall, int]:
        try:
            return self._read_call_as_written(src, pos, tools, lit, skip)
        except NoMatch:
            if self._json_object is None:
                raise
            return self._read_json_object(src, pos, tools, lit, skip)

    @property
    def _json_object(self) -> tuple[str, str] | None:
        """For a call written as one JSON object after its markers (``{"name": "{name}", "arguments": ``
        ... ``}``): (the opening's markers and text before the ``{``, ``call_end`` after its ``}``); else None."""
        pre, post = self.call_begin.split("{name}")
        m = _JSON_CALL_PRE.search(pre)
        if (m is None or not isinstance(self.args, JsonArgs) or not _JSON_CALL_POST.fullmatch(post)
                or not self.call_end.lstrip().startswith("}")):
            return None
        return pre[:m.start()], self.call_end.lstrip()[1:]

    def _read_json_object(self, src: MarkedText, pos: int, tools: ToolTable, lit: LiteralText,
                          skip: int) -> tuple[ToolCall, int]:
        """A call written as a JSON object read by its keys, as models write them beside the template's
        form: ``name``, and ``arguments`` or ``parameters`` (an object, or a JSON string holding one), in
        any order, any spacing."""
        head, tail = self._json_object  # type: ignore[misc]
        text = src.text
        p = self._expect(src, pos, head[skip:], lit)
        while p < len(text) and text[p] in " \t\r\n":
            p += 1
        if not text.startswith("{", p) or not json_depth_ok(text, p):
            raise NoMatch("expected a JSON call object")
        try:
            obj, end = _DECODER.raw_decode(text, p)
        except (ValueError, RecursionError) as e:
            raise NoMatch(str(e)) from None
        if not src.plain(p, end) or not isinstance(obj, dict):
            raise NoMatch("not a JSON call object")
        name = obj.get("name")
        keys = [k for k in ("arguments", "parameters") if k in obj]
        if not isinstance(name, str) or not tools.knows(name) or len(keys) != 1 or set(obj) - {"name", keys[0]}:
            raise NoMatch("not a call object of a known tool")
        args = obj[keys[0]]
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except (ValueError, RecursionError):
                raise NoMatch("arguments are a string that is not JSON") from None
        if not isinstance(args, dict):
            raise NoMatch("arguments are not an object")
        return ToolCall(name, json.dumps(args, ensure_ascii=False)), self._expect(src, end, tail, lit)

    def _read_call_as_written(self, src: MarkedText, pos: int, tools: ToolTable, lit: LiteralText,
                              skip: int = 0) -> tuple[ToolCall, int]:
        p, names, post = self._names_at(src, pos, tools, lit, skip)
        last: NoMatch | None = None
        for name in names:
            t = tools.spec(name)
            try:
                q = self._after_name(src, p, name, lit, post)
                if isinstance(self.args, XmlArgs):
                    args, q = self.args.read_until(src, q, t, self.call_end, lit)
                else:
                    args, q = self.args.read(src, q, t, lit)
                q = self._expect(src, q, self.call_end, lit)
                return ToolCall(name, args), q
            except NoMatch as e:
                last = e
        raise last or NoMatch("unknown tool name")

    def _read_block(self, src: MarkedText, pos: int, tools: ToolTable, lit: LiteralText,
                    skip: int) -> tuple[list[tuple[ToolCall, int, int]], int]:
        """The calls of one block at ``pos`` as (call, start, end), and the block's end."""
        if self.section is None:
            call, end = self._read_call(src, pos, tools, lit, skip)
            return [(call, pos, end)], end
        pos = self.match_section_opening(src, pos, lit, skip)
        if pos < 0:
            raise NoMatch("expected the section's opening")
        calls = []
        call, end = self._read_call(src, pos, tools, lit)
        calls.append((call, pos, end))
        pos = end
        while (close := self.match_section_closing(src, _skip_space(src, pos), lit)) < 0:
            # models put whitespace between the calls of a section, whatever their template's separator
            pos = _skip_space(src, self._expect(src, _skip_space(src, pos), self.call_sep, lit))
            call, end = self._read_call(src, pos, tools, lit)
            calls.append((call, pos, end))
            pos = end
        return calls, close

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        policy = policy or CallPolicy(request)
        text, lit = src.text, self._reader_lit
        # every declared function tool is read, so that a well-formed call the request does not allow
        # is skipped whole (it stays content) rather than searched for triggers inside
        tools = ToolTable(request)
        content: list[str] = []
        calls: list[ToolCall] = []
        pos = scan = 0  # content not yet taken starts at pos; the next trigger is searched from scan
        trig, lead = self._reader_trigger, self._lead_text
        while True:
            idx = src.find_marker(trig, scan)
            if idx < 0:
                break
            has_lead = (bool(lead) and idx - len(lead) >= pos and text.startswith(lead, idx - len(lead))
                        and src.plain(idx - len(lead), idx))
            start = idx - len(lead) if has_lead else idx
            try:
                block, end = self._read_block(src, idx, tools, lit, skip=len(lead))
            except NoMatch:
                scan = idx + len(trig)  # not a call: it stays content
                continue
            except RecursionError:  # pragma: no cover - every reader bounds its nesting
                scan = idx + len(trig)
                continue
            kept: list[ToolCall] = []
            refused: list[str] = []
            for call, cs, ce in block:
                if policy.accepts(call.name, call.arguments, len(calls) + len(kept)):
                    kept.append(self.with_id(call, text[cs:ce], len(calls) + len(kept)))
                else:
                    refused.append(text[cs:ce])
            if not kept:
                scan = end  # well-formed, but the request does not allow it: all of it stays content
                continue
            between = text[pos:start]
            if not (calls and loose_separator(between, self.call_sep)):
                content.append(between)  # a separator between two calls is syntax, not content
            content.extend(refused)
            calls.extend(kept)
            pos = scan = end
        content.append(text[pos:])
        return ToolCallsResult(join_content(content), tuple(calls))
