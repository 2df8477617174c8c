"""The template-reading tool format (vLLM's ``hf`` / ``beam``): the call syntax of the checkpoint's template.

vLLM 0.34's ``hf`` and ``beam`` parsers read calls with the ``tool_calls`` field of the checkpoint's
``response_template`` (``reasoning/response_template.py``: ``tokenizer_config.json``,
``Vocabulary.response_template``). thinkgate builds a :class:`~.call_format.CallFormat` from that field, per
model, so the constraint and both readers come from one definition as for every family:

- **the call's name in its opener** (Gemma 4: ``open_pattern`` ``<\\|tool_call>call:(?P<name>\\w+)`` and
  ``transform`` ``{"function": {"name": "{name}", "arguments": "{content}"}}``): ``call_begin`` is the text
  before the name group, ``{name}``, the text after it; the arguments are the field's content:

  - ``json`` -> a JSON object (:class:`~.args.JsonArgs`, keys in the schema's order under a constraint);
  - ``json`` with ``string_delims`` ``[[Q, Q]]`` and ``unquoted_keys`` -> Gemma's ``{key:Q text Q,...}``
    (:class:`~.args.GemmaArgs` with that quote);
  - ``xml-inline`` with a ``tag_pattern`` ``B(?P<key>...)M(?P<value>...)E`` -> one element per parameter,
    ``B{key}M`` value ``E`` (:class:`~.args.XmlArgs`, values as JSON where they are not strings, as vLLM
    casts them by the schema);

  a tool whose name the name group does not match cannot be written: the constraint refuses it
  (``ValueError`` naming the tool) and the readers do not read it as a call;
- **the name inside the content** (``open`` ``<tool_call>``, ``content`` ``json``, ``transform``
  ``{"function": {"name": "{content.name}", "arguments": "{content.arguments}"}}``): a JSON object with
  those two keys, Hermes' ``{"name": "NAME", "arguments": {...}}``;
- ``call_end`` is the field's closer.

Where a delimiter has several spellings, the first is the one the constraint writes and the readers read.
``ValueError`` names what cannot be derived: no ``tool_calls`` field, no closer, a delimiter that is no
finite set of texts, a content parser or transform of another shape (a list of calls per region, a name
written as a literal). ``hf`` and ``beam`` are one format: vLLM's ``beam`` differs in when it constrains
(every request, through its own grammar), which thinkgate decides per request as for every format.

The registered :class:`ResponseTemplateFormat` holds no syntax of its own: :meth:`ToolFormat.for_vocabulary`
builds (once per vocabulary) the format of that vocabulary's template; the ``Parser``, the constraint
builder and the readers call it, and the format used unbound is a ``ValueError`` saying so.
"""

from __future__ import annotations

import re
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from thinkgate.reasoning.response_template import (TOOL_CALLS, ResponseTemplate, cut_groups, response_template_of,
                                                   side_texts, split_group)
from thinkgate.reasoning.vocabulary import Vocabulary

from ..compilation.constraints import Constraint
from .args import ArgsSyntax, GemmaArgs, JsonArgs, XmlArgs
from .call_format import DEFAULT_TOOL_MAX_WHITESPACE, CallFormat, ToolFormat
from .marked import MarkedText
from .policy import CallPolicy
from .request import ToolRequest
from .results import ToolCallsResult
from .stream import ToolStream
from .tool_table import ToolTable

__all__ = ["ResponseTemplateFormat", "TemplateCallFormat", "template_call_format"]

_NAME_BY_OPENER = {"name": "{name}", "arguments": "{content}"}
_CONTENT_KEY = re.compile(r"\{content\.([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(eq=False)
class TemplateCallFormat(CallFormat):
    """A :class:`~.call_format.CallFormat` built from a response template; ``name_pattern`` is the opener's
    name group (None when the name is inside the content): a name it does not match is no call."""

    name_pattern: re.Pattern[str] | None = field(default=None)

    def _unwritable(self, request: ToolRequest) -> list[str]:
        if self.name_pattern is None:
            return []
        return [t.name for t in request.function_tools if not self.name_pattern.fullmatch(t.name)]

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        bad = self._unwritable(request)
        if bad:
            raise ValueError(f"tool format {self.name!r}: the tool name {bad[0]!r} cannot be written in this "
                             f"checkpoint's calls (its template's name pattern is {self.name_pattern.pattern!r})")
        return super().structural_tag(request, vocabulary=vocabulary, max_whitespace=max_whitespace)

    def _names_at(self, src: MarkedText, pos: int, tools: ToolTable, lit: Any,
                  skip: int) -> tuple[int, list[str], str]:
        p, names, post = super()._names_at(src, pos, tools, lit, skip)
        if self.name_pattern is not None:
            names = [n for n in names if self.name_pattern.fullmatch(n)]
        return p, names, post


def _control_tokens_in(texts: list[str], vocabulary: Vocabulary) -> tuple[str, ...]:
    """The control tokens of ``vocabulary`` that ``texts`` spell, read leftmost-longest."""
    specials = sorted((s for s in vocabulary.special_tokens if s), key=len, reverse=True)
    found: dict[str, None] = {}
    for text in texts:
        i = 0
        while i < len(text):
            hit = next((s for s in specials if text.startswith(s, i)), None)
            if hit is None:
                i += 1
            else:
                found[hit] = None
                i += len(hit)
    return tuple(found)


def _first(texts: tuple[str, ...] | None, what: str, who: str) -> str:
    if not texts:
        raise ValueError(f"{who}: the tool_calls field's {what} is no finite set of texts")
    return texts[0]


def _args(content: str, content_args: dict[str, Any], who: str) -> tuple[ArgsSyntax, list[str]]:
    """The arguments' syntax of a call whose name is in its opener, and its literal texts."""
    if content == "json" and not content_args:
        return JsonArgs(caller_order=False), []
    if content == "json" and set(content_args) == {"string_delims", "unquoted_keys"}:
        delims = content_args["string_delims"]
        if (content_args["unquoted_keys"] is True and isinstance(delims, list) and len(delims) == 1
                and isinstance(delims[0], list) and len(delims[0]) == 2 and delims[0][0] == delims[0][1]
                and isinstance(delims[0][0], str) and delims[0][0]):
            return GemmaArgs(quote=delims[0][0]), [delims[0][0]]
    if content == "xml-inline" and set(content_args) <= {"tag_pattern", "value_parser"}:
        parser = content_args.get("value_parser") or {"name": "text"}
        pattern = content_args.get("tag_pattern")
        if isinstance(pattern, str) and isinstance(parser, dict) and parser.get("name") in ("text", "json") \
                and not parser.get("args"):
            cut = cut_groups(pattern, "key", "value")
            texts = None if cut is None else [side_texts(cut[0]), side_texts(cut[2]), side_texts(cut[4])]
            if cut is not None and texts is not None and None not in texts and texts[2] != ("",):
                begin = texts[0][0] + "{key}" + texts[1][0]  # type: ignore[index]
                end = texts[2][0]  # type: ignore[index]
                close = end.strip() or end  # what a value never holds: the closing tag, not its whitespace
                return XmlArgs(begin, end, close, key_pattern=cut[1], values="json", caller_order=False), \
                    [begin, end]
    raise ValueError(f"{who}: the tool_calls field's arguments (content {content!r}, content_args "
                     f"{content_args!r}) are no syntax thinkgate derives: JSON, Gemma's quoted JSON, or XML "
                     "elements of a tag_pattern with key and value groups")


def template_call_format(template: ResponseTemplate, vocabulary: Vocabulary, name: str,
                         aliases: tuple[str, ...] = ()) -> TemplateCallFormat:
    """The call format of ``template``'s ``tool_calls`` field for ``vocabulary`` (see the module docstring);
    ``ValueError`` naming what cannot be derived."""
    who = f"tool format {name!r}"
    f = template.field(TOOL_CALLS)
    if f is None:
        raise ValueError(f"{who}: the response_template has no {TOOL_CALLS!r} field, so the checkpoint writes no "
                         "tool calls to read")
    if f.open is None:
        raise ValueError(f"{who}: the {TOOL_CALLS!r} field has no opener (it is the template's implicit field): "
                         "nothing marks where a call starts")
    if f.close is None:
        raise ValueError(f"{who}: the {TOOL_CALLS!r} field has no close: nothing marks where a call ends")
    close = _first(f.close.texts, "close", who)
    function = f.transform.get("function") if isinstance(f.transform, dict) else None
    if f.transform_each or not isinstance(function, dict):
        raise ValueError(f"{who}: the {TOOL_CALLS!r} field's transform {f.transform!r} does not map one region to "
                         "one call ({'function': {'name': ..., 'arguments': ...}})")
    fn = {k: function.get(k) for k in ("name", "arguments")}
    if fn == _NAME_BY_OPENER:  # the name is the opener's group
        cut = split_group(f.open.pattern, "name") if not f.open.literal else None
        if cut is None:
            raise ValueError(f"{who}: the {TOOL_CALLS!r} opener {f.open.pattern!r} has no (?P<name>...) group between "
                             "texts thinkgate can read")
        before, name_pattern, after = cut
        call_begin = before[0] + "{name}" + after[0]
        args, arg_texts = _args(f.content, dict(f.content_args), who)
        call_end = close
    else:
        keys = [_CONTENT_KEY.fullmatch(v) if isinstance(v, str) else None for v in fn.values()]
        if f.content != "json" or f.content_args or None in keys:
            raise ValueError(f"{who}: the {TOOL_CALLS!r} field's transform {f.transform!r} names the call neither "
                             "by the opener's name group nor by keys of its JSON content")
        name_key, args_key = (m.group(1) for m in keys)  # type: ignore[union-attr]
        opener = _first(f.open.texts, "opener", who)
        call_begin = opener + '{"' + name_key + '": "{name}", "' + args_key + '": '
        args, arg_texts, name_pattern = JsonArgs(caller_order=False), [], None
        call_end = "}" + close
    delimiters = [t for fl in template.fields.values() for d in (fl.open, fl.close) if d is not None
                  for t in (d.texts or ())]
    markers = _control_tokens_in([call_begin, call_end, *arg_texts, *delimiters], vocabulary)
    return TemplateCallFormat(
        name=name, aliases=aliases, markers=markers, call_begin=call_begin, args=args, call_end=call_end,
        description=f"the checkpoint's response_template: {call_begin}...{call_end}", name_pattern=name_pattern)


class ResponseTemplateFormat(ToolFormat):
    """The registered ``hf`` / ``beam`` format: unbound, it holds no syntax; :meth:`for_vocabulary` gives
    the :class:`TemplateCallFormat` of that vocabulary's response template (built once per vocabulary,
    weakly cached, so a vocabulary that goes takes its format along)."""

    constraint_kind = "structural tag"

    def __init__(self, name: str, aliases: tuple[str, ...] = ()) -> None:
        self.name = name
        self.aliases = aliases
        self.markers = ()
        self.description = ("the call syntax of the checkpoint's response_template (its tool_calls field), "
                            "read per model")
        self._bound: weakref.WeakKeyDictionary[Vocabulary, TemplateCallFormat] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def for_vocabulary(self, vocabulary: Vocabulary | None) -> ToolFormat:
        if vocabulary is None:
            raise ValueError(self._unbound())
        with self._lock:
            fmt = self._bound.get(vocabulary)
        if fmt is None:
            template = response_template_of(vocabulary, who=f"tool format {self.name!r}")
            fmt = template_call_format(template, vocabulary, self.name, self.aliases)
            with self._lock:
                fmt = self._bound.setdefault(vocabulary, fmt)
        return fmt

    def _unbound(self) -> str:
        return (f"tool format {self.name!r} takes its call syntax from the checkpoint's response_template: "
                "give the vocabulary that carries it (Parser(vocabulary, tools=...), build_tool_constraint(..., "
                "vocabulary=...), get_tool_reader(..., vocabulary=...))")

    def constraint(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                   max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> Constraint | None:
        return self.for_vocabulary(vocabulary).constraint(request, vocabulary=vocabulary,
                                                          max_whitespace=max_whitespace)

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_TOOL_MAX_WHITESPACE) -> dict[str, Any] | None:
        return self.for_vocabulary(vocabulary).structural_tag(request, vocabulary=vocabulary,
                                                              max_whitespace=max_whitespace)

    def read_marked(self, src: MarkedText, request: ToolRequest, policy: CallPolicy | None = None) -> ToolCallsResult:
        raise ValueError(self._unbound())

    def new_stream(self, request: ToolRequest, policy: CallPolicy, vocabulary: Vocabulary, *,
                   stream_arguments: bool = False) -> ToolStream:
        return self.for_vocabulary(vocabulary).new_stream(request, policy, vocabulary,
                                                          stream_arguments=stream_arguments)
