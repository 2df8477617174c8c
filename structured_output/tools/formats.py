"""Tool-call formats: one declarative spec per format builds both its constraint and its reader.

A :class:`CallFormat` is defined by literals of the model's own call syntax::

    section      optional (begin, end) around all calls of a turn  (DeepSeek, Kimi, MiniMax, DSML)
    call_begin   with {name} (and {index} for Kimi)                 '<tool_call>\\n{"name": "{name}", "arguments": '
    args         JsonArgs() | XmlArgs(...) | GemmaArgs()
    call_end                                                         '}\\n</tool_call>'
    call_sep     between two calls                                   '\\n'

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
- the reader: the calls where the syntax matches exactly, content = the rest (stripped).

Formats whose call syntax does not fit (harmony's messages; a format without any syntax, whose calls
are a JSON array) are their own classes with the same two methods.
"""

from __future__ import annotations

import json
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

from ..constraints import Constraint
from .args import ArgsSyntax, GemmaArgs, JsonArgs, NoMatch, XmlArgs
from .request import ToolRequest, ToolSpec, tool_calls_json_schema
from .results import ToolCall, ToolCallsResult
from .syntax import Fmt, LiteralText, any_tokens, const, opt, or_, regex, seq, star, structural_tag, tag

__all__ = ["ToolFormat", "CallFormat", "HarmonyFormat", "JsonCallsFormat", "register_tool_format",
           "get_tool_format", "list_tool_formats", "DEFAULT_MAX_WHITESPACE"]

DEFAULT_MAX_WHITESPACE = 4
"""Default cap on consecutive whitespace inside JSON arguments, so a model cannot spin on spaces."""

LEAD_WHITESPACE = r"[ \t\r\n]{0,4}"
"""What may precede forced calls (models write ``\\n\\n`` after their thinking)."""


class ToolFormat(ABC):
    """A model family's tool-call format: a constraint builder and a reader from one definition."""

    name: str
    aliases: tuple[str, ...]
    description: str
    markers: tuple[str, ...]
    supports_builtin_tools: bool = False
    covers_reasoning: bool = False
    """The constraint spells the whole output, the thinking included (the manager then applies it
    from the first token)."""

    def constraint(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                   max_whitespace: int | None = DEFAULT_MAX_WHITESPACE) -> Constraint | None:
        """The constraint of ``request`` in this format, or None when the request asks for none."""
        if not request.constrained:
            return None
        self._check_builtin(request)
        tag_dict = self.structural_tag(request, vocabulary=vocabulary, max_whitespace=max_whitespace)
        if tag_dict is None:
            return None
        # the builder is deterministic and Constraint keeps key order (the order of "properties" is
        # the order the arguments must be written in), so equal requests give equal cache keys
        return Constraint.structural_tag(tag_dict, covers_reasoning=self.covers_reasoning)

    def _check_builtin(self, request: ToolRequest) -> None:
        if not self.supports_builtin_tools and request.mode == "named" and request.tools[0].builtin:
            raise ValueError(f"tool format {self.name!r} has no syntax for builtin tools; "
                             f"tool_choice forces builtin tool {request.tools[0].name!r}")

    @abstractmethod
    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_MAX_WHITESPACE) -> dict[str, Any] | None:
        """The structural tag (a dict in xgrammar's format) of a constrained request."""

    @abstractmethod
    def read(self, text: str, request: ToolRequest) -> ToolCallsResult:
        """The content and calls of ``text`` (the output after the thinking)."""

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


def _join_content(parts: Sequence[str]) -> str | None:
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
    _trigger: str = field(init=False, default="")
    _trigger_is_token: bool = field(init=False, default=True)
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

    # -- constraint ------------------------------------------------------------------------------
    def _call(self, t: ToolSpec, lit: LiteralText, ws: int | None) -> Fmt:
        pre, post = self.call_begin.split("{name}")
        parts: list[Fmt] = [lit(pre), const(t.name)]
        if "{index}" in post:
            a, b = post.split("{index}")
            parts += [lit(a), regex(self.index_pattern), lit(b)]
        else:
            parts.append(lit(post))
        parts += [self.args.build(t, lit, ws), lit(self.call_end)]
        return seq(*parts)

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
                       max_whitespace: int | None = DEFAULT_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        if self._trigger_is_token and self._trigger not in lit.markers:
            raise ValueError(f"tool format {self.name!r}: the vocabulary {getattr(vocabulary, 'name', None)!r} "
                             f"has no control token {self._trigger!r}")
        tools = request.function_tools
        ws = max_whitespace
        if request.mode in ("required", "named"):
            calls = self._calls(tools, lit, ws, one=request.max_calls == 1)
            block = self._section(calls, lit, optional_lead=True) if self.section else calls
            return structural_tag(seq(regex(LEAD_WHITESPACE), block))
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
    def _expect(self, text: str, pos: int, lit_text: str) -> int:
        if not text.startswith(lit_text, pos):
            raise NoMatch(f"expected {lit_text!r}")
        return pos + len(lit_text)

    def _read_call(self, text: str, pos: int, tools: dict[str, ToolSpec], skip: int = 0) -> tuple[ToolCall, int]:
        pre, post = self.call_begin.split("{name}")
        p = self._expect(text, pos, pre[skip:])
        last: NoMatch | None = None
        for name in sorted((n for n in tools if text.startswith(n, p)), key=len, reverse=True):
            t = tools[name]
            try:
                q = p + len(name)
                if "{index}" in post:
                    a, b = post.split("{index}")
                    m = re.compile(re.escape(a) + f"(?:{self.index_pattern})" + re.escape(b)).match(text, q)
                    if m is None:
                        raise NoMatch("bad call index")
                    q = m.end()
                else:
                    q = self._expect(text, q, post)
                if isinstance(self.args, XmlArgs):
                    args, q = self.args.read_until(text, q, t, self.call_end)
                else:
                    args, q = self.args.read(text, q, t)
                q = self._expect(text, q, self.call_end)
                return ToolCall(name, args), q
            except NoMatch as e:
                last = e
        raise last or NoMatch("unknown tool name")

    def _read_block(self, text: str, pos: int, tools: dict[str, ToolSpec], skip: int) -> tuple[list[ToolCall], int]:
        if self.section is None:
            call, pos = self._read_call(text, pos, tools, skip)
            return [call], pos
        pos = self._expect(text, pos, self.section[0][skip:])
        calls = []
        call, pos = self._read_call(text, pos, tools)
        calls.append(call)
        while not text.startswith(self.section[1], pos):
            pos = self._expect(text, pos, self.call_sep)
            call, pos = self._read_call(text, pos, tools)
            calls.append(call)
        return calls, pos + len(self.section[1])

    def read(self, text: str, request: ToolRequest) -> ToolCallsResult:
        tools = {t.name: t for t in request.all_tools if not t.builtin}
        content: list[str] = []
        calls: list[ToolCall] = []
        pos = scan = 0  # content not yet taken starts at pos; the next trigger is searched from scan
        trig, lead = self._trigger, self._lead_text
        while True:
            idx = text.find(trig, scan)
            if idx < 0:
                break
            has_lead = bool(lead) and idx - len(lead) >= pos and text.startswith(lead, idx - len(lead))
            start = idx - len(lead) if has_lead else idx
            try:
                new_calls, end = self._read_block(text, idx, tools, skip=len(lead))
            except NoMatch:
                scan = idx + len(trig)  # not a call: it stays content
                continue
            between = text[pos:start]
            if not (calls and (between == self.call_sep or not between.strip())):
                content.append(between)  # a separator between two calls is syntax, not content
            calls.extend(new_calls)
            pos = scan = end
        content.append(text[pos:])
        return ToolCallsResult(_join_content(content), tuple(calls))


# --------------------------------------------------------------------------------------------------
# harmony (gpt-oss)

@dataclass(eq=False)
class HarmonyFormat(ToolFormat):
    """OpenAI harmony (gpt-oss): the whole output is messages (see ``reasoning/gptoss.py``)::

        <|channel|>analysis<|message|>...<|end|>
        <|start|>assistant<|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{...}<|call|>

    The constraint covers the whole output, analysis included (the call's header holds the function
    name, and harmony's header is sampled before any reasoning end): it is marked
    ``covers_reasoning``, so the manager applies it from the first token. ``<|call|>`` and ``<|return|>`` are stop tokens, so the grammar ends
    where they come. Required / named: any analysis messages, then exactly one call (a call ends the
    turn in harmony, so parallel calls cannot occur). Auto: analysis messages, then a call or a final
    message. Analysis messages and commentary preambles (no recipient) may come first; the reader
    returns the preambles and the final message as content (joined with newlines, as the reasoning
    parser does), analysis as neither. Builtin tools (``browser.search`` ...) are called with
    ``to=NAME code``."""

    name: str = "openai"
    aliases: tuple[str, ...] = ("harmony", "gpt_oss", "openai_gptoss")
    covers_reasoning: bool = True
    description: str = "OpenAI gpt-oss harmony messages, to=functions.NAME"
    markers: tuple[str, ...] = ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>",
                                "<|return|>", "<|call|>")
    supports_builtin_tools: bool = True
    START: str = "<|start|>assistant"

    def _call_headers(self, t: ToolSpec) -> list[str]:
        if t.builtin:
            return [f"<|channel|>commentary to={t.name} code<|message|>",
                    f" to={t.name}<|channel|>commentary code<|message|>"]
        return [f"<|channel|>commentary to=functions.{t.name} <|constrain|>json<|message|>",
                f" to=functions.{t.name}<|channel|>commentary <|constrain|>json<|message|>"]

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_MAX_WHITESPACE) -> dict[str, Any] | None:
        lit = self._lit(vocabulary)
        body_ex = self._free_text_excludes(vocabulary, keep=())
        text = any_tokens(body_ex)
        # messages that may come before the call or the final answer: analysis, and commentary
        # preambles (commentary without a recipient, shown to the user)
        analysis = seq(lit("<|channel|>"), or_(const("analysis"), const("commentary")), lit("<|message|>"), text,
                       lit("<|end|>" + self.START))
        calls = []
        for t in request.tools:
            args = JsonArgs().build(t, lit, max_whitespace)
            calls.append(or_(*[seq(lit(h), args) for h in self._call_headers(t)]))
        head = opt(lit(self.START))
        if request.mode in ("required", "named"):
            return structural_tag(seq(head, star(analysis), or_(*calls)))
        final = seq(lit("<|channel|>final<|message|>"), text)
        if request.mode == "none" or not request.tools:
            return structural_tag(seq(head, star(analysis), final))
        return structural_tag(seq(head, star(analysis), or_(final, *calls)))

    _HEADER = re.compile(r"(?:<\|start\|>assistant)?(?P<h>(?:(?!<\|message\|>).)*)<\|message\|>", re.S)
    _RECIPIENT = re.compile(r"to=(\S+?)(?=<\||\s|$)")

    def read(self, text: str, request: ToolRequest) -> ToolCallsResult:
        tools = {t.name: t for t in request.all_tools}
        content: list[str] = []
        calls: list[ToolCall] = []
        pos = 0
        while pos < len(text):
            m = self._HEADER.match(text, pos)
            if m is None:
                content.append(text[pos:])
                break
            header, body_start = m.group("h"), m.end()
            ends = [(text.find(e, body_start), e) for e in ("<|end|>", "<|call|>", "<|return|>")]
            ends = [(i, e) for i, e in ends if i >= 0]
            body_end, marker = min(ends) if ends else (len(text), "")
            body = text[body_start:body_end]
            r = self._RECIPIENT.search(header)
            if r is not None:
                target = r.group(1)
                name = target[len("functions."):] if target.startswith("functions.") else target
                tool = tools.get(name)
                try:
                    obj = json.loads(body)
                except json.JSONDecodeError:
                    obj = None
                if tool is not None and isinstance(obj, dict):
                    calls.append(ToolCall(name, body.strip()))
                else:
                    content.append(body)
            elif "final" in header or "commentary" in header:
                content.append(body)  # the answer, or a preamble shown to the user
            pos = body_end + len(marker)
        return ToolCallsResult(_join_content(["\n".join(content)]), tuple(calls))


# --------------------------------------------------------------------------------------------------
# no syntax: a JSON array of calls

@dataclass(eq=False)
class JsonCallsFormat(ToolFormat):
    """No model syntax: the output is ``[{"name": ..., "parameters": {...}}, ...]`` (a JSON schema
    constraint; vLLM's way for required / named). Auto and none build no constraint (a JSON schema
    cannot also allow free text)."""

    name: str = "json"
    aliases: tuple[str, ...] = ("openai_json",)
    description: str = "a JSON array of {name, parameters} (a JSON schema constraint)"
    markers: tuple[str, ...] = ()

    def constraint(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                   max_whitespace: int | None = DEFAULT_MAX_WHITESPACE) -> Constraint | None:
        if request.mode not in ("required", "named"):
            return None
        self._check_builtin(request)
        return Constraint.json_schema(tool_calls_json_schema(request), any_whitespace=True,
                                      max_whitespace=max_whitespace, strict=True)

    def structural_tag(self, request: ToolRequest, *, vocabulary: Vocabulary | None = None,
                       max_whitespace: int | None = DEFAULT_MAX_WHITESPACE) -> dict[str, Any] | None:
        return None

    def read(self, text: str, request: ToolRequest) -> ToolCallsResult:
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            return ToolCallsResult(text.strip() or None, ())
        names = {t.name for t in request.all_tools}
        if not (isinstance(obj, list) and all(isinstance(c, dict) and c.get("name") in names
                                              and isinstance(c.get("parameters"), dict) for c in obj)):
            return ToolCallsResult(text.strip() or None, ())
        return ToolCallsResult(None, tuple(ToolCall(c["name"], json.dumps(c["parameters"], ensure_ascii=False))
                                           for c in obj))


# --------------------------------------------------------------------------------------------------
# the registry

_FORMATS: dict[str, ToolFormat] = {}
_PRIMARY: dict[str, ToolFormat] = {}
_LOCK = threading.Lock()


def register_tool_format(fmt: ToolFormat) -> ToolFormat:
    """Register ``fmt`` under its name and aliases (a name already taken is a ``ValueError``)."""
    with _LOCK:
        for n in (fmt.name, *fmt.aliases):
            if n in _FORMATS and _FORMATS[n] is not fmt:
                raise ValueError(f"tool format name {n!r} is already registered")
        for n in (fmt.name, *fmt.aliases):
            _FORMATS[n] = fmt
        _PRIMARY[fmt.name] = fmt
    return fmt


def get_tool_format(name: str) -> ToolFormat:
    """The format registered as ``name``; ``ValueError`` listing the known names otherwise."""
    fmt = _FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None:
        raise ValueError(f"unknown tool format {name!r}; known: {', '.join(list_tool_formats(aliases=True))}")
    return fmt


def list_tool_formats(*, aliases: bool = False) -> list[str]:
    """The registered format names (primary names only unless ``aliases``)."""
    return sorted(_FORMATS if aliases else _PRIMARY)


# -- the built-in formats ---------------------------------------------------------------------------

_THINK = ("<think>", "</think>")

register_tool_format(CallFormat(
    name="hermes", aliases=("qwen3", "qwen2_5", "qwen3_json"),
    description="Hermes / Qwen3: JSON in <tool_call> tokens",
    markers=("<tool_call>", "</tool_call>", *_THINK),
    call_begin='<tool_call>\n{"name": "{name}", "arguments": ', args=JsonArgs(), call_end="}\n</tool_call>",
    call_sep="\n"))

register_tool_format(CallFormat(
    name="qwen3_coder", aliases=("qwen3_xml", "qwen3_5", "qwen3_6"),
    description="Qwen3-Coder / Qwen3.5+: <function=NAME><parameter=KEY>value</parameter>",
    markers=("<tool_call>", "</tool_call>", *_THINK),
    call_begin="<tool_call>\n<function={name}>\n",
    args=XmlArgs("<parameter={key}>\n", "\n</parameter>\n", "</parameter>"),
    call_end="</function>\n</tool_call>", call_sep="\n"))

register_tool_format(CallFormat(
    name="llama3_json", aliases=("llama3", "llama"),
    description='Llama 3.x JSON calls: {"name": ..., "parameters": {...}} separated by "; "',
    markers=("<|python_tag|>", "<|eom_id|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"),
    call_begin='{"name": "{name}", "parameters": ', args=JsonArgs(), call_end="}", call_sep="; ",
    text_trigger='{"name": "'))

register_tool_format(CallFormat(
    name="mistral", aliases=("magistral",),
    description="Mistral v11+ / Magistral: [TOOL_CALLS]NAME[ARGS]{...}",
    markers=("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]", "[INST]", "[/INST]"),
    call_begin="[TOOL_CALLS]{name}[ARGS]", args=JsonArgs(), call_end=""))

_DS_MARKERS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
               "<｜tool▁sep｜>", *_THINK)

register_tool_format(CallFormat(
    name="deepseek_v3", aliases=("deepseek_r1",),
    description="DeepSeek V3 / R1: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json ...```",
    markers=_DS_MARKERS, section=("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    call_begin="<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n", args=JsonArgs(),
    call_end="\n```<｜tool▁call▁end｜>", call_sep="\n"))

register_tool_format(CallFormat(
    name="deepseek_v31", aliases=("deepseek_v3_1",),
    description="DeepSeek V3.1: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>",
    markers=_DS_MARKERS, section=("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    call_begin="<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>", args=JsonArgs(), call_end="<｜tool▁call▁end｜>"))

_DSML_ARGS = XmlArgs('<｜DSML｜parameter name="{key}" string="{string}">', "</｜DSML｜parameter>\n",
                     "</｜DSML｜parameter>")

register_tool_format(CallFormat(
    name="deepseek_v32", aliases=("deepseek_v3_2",),
    description="DeepSeek V3.2 DSML: <｜DSML｜function_calls> <｜DSML｜invoke name=...> <｜DSML｜parameter ...>",
    markers=("｜DSML｜", *_THINK), section=("<｜DSML｜function_calls>\n", "</｜DSML｜function_calls>"),
    call_begin='<｜DSML｜invoke name="{name}">\n', args=_DSML_ARGS, call_end="</｜DSML｜invoke>\n"))

register_tool_format(CallFormat(
    name="deepseek_v4",
    description="DeepSeek V4 DSML: <｜DSML｜tool_calls> <｜DSML｜invoke name=...> <｜DSML｜parameter ...>",
    markers=("｜DSML｜", *_THINK), section=("<｜DSML｜tool_calls>\n", "</｜DSML｜tool_calls>"),
    call_begin='<｜DSML｜invoke name="{name}">\n', args=_DSML_ARGS, call_end="</｜DSML｜invoke>\n"))

register_tool_format(CallFormat(
    name="kimi_k2", aliases=("kimi",),
    description="Kimi K2: <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}",
    markers=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
             "<|tool_call_argument_begin|>", "<|tool_call_end|>", *_THINK),
    section=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
    call_begin="<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>", args=JsonArgs(),
    call_end="<|tool_call_end|>"))

register_tool_format(CallFormat(
    name="glm47", aliases=("glm4_7", "glm5"),
    description="GLM-4.7 / GLM-5: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>",
    markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", *_THINK),
    call_begin="<tool_call>{name}", args=XmlArgs("<arg_key>{key}</arg_key><arg_value>", "</arg_value>",
                                                 "</arg_value>"),
    call_end="</tool_call>"))

register_tool_format(CallFormat(
    name="glm45", aliases=("glm4_5", "glm4_6"),
    description="GLM-4.5 / 4.6: <tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n</tool_call>",
    markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", *_THINK),
    call_begin="<tool_call>{name}\n", args=XmlArgs("<arg_key>{key}</arg_key>\n<arg_value>", "</arg_value>\n",
                                                   "</arg_value>"),
    call_end="</tool_call>", call_sep="\n"))

register_tool_format(CallFormat(
    name="minimax_m2", aliases=("minimax",),
    description='MiniMax M2: <minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter>',
    markers=("<minimax:tool_call>", "</minimax:tool_call>", *_THINK),
    section=("<minimax:tool_call>\n", "</minimax:tool_call>"),
    call_begin='<invoke name="{name}">\n',
    args=XmlArgs('<parameter name="{key}">', "</parameter>\n", "</parameter>"),
    call_end="</invoke>\n"))

register_tool_format(CallFormat(
    name="gemma4", aliases=("gemma_4",),
    description='Gemma 4: <|tool_call>call:NAME{key:<|"|>v<|"|>}<tool_call|>',
    markers=("<|tool_call>", "<tool_call|>", '<|"|>', "<|channel>", "<channel|>", "<|turn>", "<turn|>"),
    call_begin="<|tool_call>call:{name}", args=GemmaArgs(), call_end="<tool_call|>"))

register_tool_format(HarmonyFormat())
register_tool_format(JsonCallsFormat())
