"""Template-reading (vLLM's ``hf`` / ``beam``): the markers come from the checkpoint's ``response_template``.

No fixed family: the thinking field of the checkpoint's response template (``reasoning/response_template.py``:
``tokenizer_config.json``, ``Vocabulary.response_template``) says what opens and closes the thinking, and
its start anchors where the assistant message starts. thinkgate reads each of them as a control token of
the vocabulary (plus the text a template writes after an opener, as Gemma 4's ``<|channel>thought\\n``), so
the ids decide where the thinking ends, as for every :class:`~thinkgate.reasoning.markers.TokenMarkerParser` family.

What the template becomes (``template_markers``):

- **end markers**: the thinking field's closers (``close``, or a ``close_pattern`` spelling finitely many
  texts), each a control token, optionally followed by whitespace (which then reads as the content's);
- **start markers**: its openers, each a control token followed by a label text (one label for all, the
  text after the token: ``thought\\n``), dropped with the label;
- **turn starts**: the control token each start anchor begins with (the current turn starts after the last
  one in the prompt; an anchor that begins with ordinary text is not used);
- **mode**: an opener -> the model's first token decides whether it thinks (an opener starts the thinking,
  a closer ends it unwritten, anything else is content: vLLM's text parser reads the same); no opener (the
  thinking is the template's implicit field) -> the output starts thinking, and the opener of another
  field (a control token) also ends it, as content. ``enable_thinking: false`` ends it before the first
  token; the prompt's current turn decides first (its last marker: a closer ends, an opener opens).

Construction raises ``ValueError`` naming the problem when the vocabulary has no template (or an invalid
one), when it has no thinking field, when that field repeats (interleaved thinking: thinkgate ends the
thinking once per turn), has no closer, or a delimiter is no finite set of texts, when a marker does not
begin with a control token, or when the thinking's opener shares its control token with another field's
opener (only the text after the token would tell them apart). ``hf`` and ``beam`` are one family: what
vLLM's ``beam`` adds is on the tool side (a grammar for every constrained request), not in the reasoning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from thinkgate.reasoning.base import ENDED
from thinkgate.reasoning.markers import PENDING, TokenMarkerParser
from thinkgate.reasoning.registry import register_reasoning_parser
from thinkgate.reasoning.response_template import (CONTENT, THINKING, TOOL_CALLS, Delimiter, ResponseTemplate, response_template_of,
                                split_group)
from thinkgate.reasoning.vocabulary import Vocabulary

__all__ = ["ResponseTemplateReasoningParser", "TemplateMarkers", "template_markers"]


@dataclass(frozen=True)
class TemplateMarkers:
    """The reasoning markers a response template gives (see the module docstring)."""

    start_markers: tuple[str, ...]
    start_label: str
    end_markers: tuple[str, ...]
    implicit_end_markers: tuple[str, ...]
    turn_start_markers: tuple[str, ...]
    first_token: bool
    """True: the model's first token decides whether it thinks (the thinking has an opener)."""
    content_closers: tuple[str, ...]
    """The content field's closers that are one control token each (``<turn|>``): delimiters, not text,
    so the front end drops their text from the content (the ids stay)."""


def _uniq(xs: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(xs))


def _leading_control(text: str, vocabulary: Vocabulary) -> tuple[str, str] | None:
    """(the longest control token ``text`` begins with, the rest of ``text``), or None."""
    best = max((s for s in vocabulary.special_tokens if s and text.startswith(s)), key=len, default=None)
    return None if best is None else (best, text[len(best):])


def template_markers(template: ResponseTemplate, vocabulary: Vocabulary, who: str) -> TemplateMarkers:
    """The reasoning markers of ``template`` for ``vocabulary``; ``ValueError`` naming the problem (``who``:
    the family, for the message)."""
    field = template.field(THINKING)
    if field is None:
        raise ValueError(f"{who}: the response_template has no {THINKING!r} field, so its output holds no "
                         "reasoning to split (serve it without a reasoning parser)")
    if field.repeats:
        raise ValueError(f"{who}: the response_template's {THINKING!r} field repeats (interleaved thinking); "
                         "thinkgate ends the thinking once per turn")
    if field.close is None:
        raise ValueError(f"{who}: the response_template's {THINKING!r} field has no close: nothing in it says "
                         "where the thinking ends")

    def texts(kind: str, delim: Delimiter) -> tuple[str, ...]:
        if delim.texts is None:
            raise ValueError(f"{who}: the {THINKING!r} field's {kind} pattern {delim.pattern!r} is no finite set "
                             "of texts, so no token can stand for it")
        return delim.texts

    ends: list[str] = []
    for text in texts("close", field.close):
        lead = _leading_control(text, vocabulary)
        if lead is None or lead[1].strip():
            raise ValueError(f"{who}: the {THINKING!r} closer {text!r} is not a control token of the vocabulary "
                             f"{vocabulary.name!r} (optionally followed by whitespace)")
        ends.append(lead[0])
    starts: list[str] = []
    labels: set[str] = set()
    if field.open is not None:
        for text in texts("open", field.open):
            lead = _leading_control(text, vocabulary)
            if lead is None:
                raise ValueError(f"{who}: the {THINKING!r} opener {text!r} does not begin with a control token of "
                                 f"the vocabulary {vocabulary.name!r}")
            starts.append(lead[0])
            labels.add(lead[1])
        if len(labels) > 1:
            raise ValueError(f"{who}: the {THINKING!r} openers write different texts after their token "
                             f"({sorted(labels)!r}); thinkgate reads one")
    others: list[str] = []  # the control tokens that open the other fields
    for name in (CONTENT, TOOL_CALLS):
        other = template.field(name)
        if other is None or other.open is None:
            continue
        opens = other.open.texts
        if opens is None:  # a pattern with a hole (the tool-call name): its text before the hole
            cut = split_group(other.open.pattern, "name")
            opens = cut[0] if cut is not None else None
        if opens is None:
            if field.open is None:
                raise ValueError(f"{who}: the {name!r} opener pattern {other.open.pattern!r} is no finite set of "
                                 "texts, so no token can end the thinking there")
            continue
        for text in opens:
            lead = _leading_control(text, vocabulary)
            if lead is None:
                if field.open is None:
                    raise ValueError(f"{who}: the {name!r} opener {text!r} does not begin with a control token; "
                                     "it would end the thinking (the template's implicit field) on text")
                continue
            if lead[0] in starts:
                raise ValueError(f"{who}: the {THINKING!r} opener and the {name!r} opener begin with the same "
                                 f"control token {lead[0]!r}; thinkgate decides at the token")
            others.append(lead[0])
    turns = []
    for text in template.start_anchor.texts or ():
        lead = _leading_control(text, vocabulary)
        if lead is not None:
            turns.append(lead[0])
    content = template.field(CONTENT)
    closers = [t for t in ((content.close.texts or ()) if content and content.close else ())
               if t in vocabulary.special_tokens]
    return TemplateMarkers(_uniq(starts), labels.pop() if labels else "", _uniq(ends),
                           () if field.open is not None else _uniq(others), _uniq(turns), field.open is not None,
                           _uniq(closers))


@register_reasoning_parser()
class ResponseTemplateReasoningParser(TokenMarkerParser):
    """The reasoning parser of a checkpoint's response template (see the module docstring). Built once
    per model like every family: ``ResponseTemplateReasoningParser(vocabulary, chat_template_kwargs,
    response_template=None)``; ``response_template`` overrides the vocabulary's (vLLM's parsers take
    the same keyword). The markers it reads are instance attributes, set before the token-marker
    machinery resolves them, so everything else is :class:`~thinkgate.reasoning.markers.TokenMarkerParser`'s."""

    thinking_kwargs = ("enable_thinking",)  # what vLLM's hf / beam read

    def __init__(self, tokenizer: Any, chat_template_kwargs: Mapping[str, Any] | None = None, *,
                 response_template: Mapping[str, Any] | ResponseTemplate | None = None) -> None:
        vocabulary = Vocabulary.coerce(tokenizer)
        who = f"reasoning parser {self.name!r}"
        self.response_template: ResponseTemplate = response_template_of(vocabulary, response_template, who=who)
        m = template_markers(self.response_template, vocabulary, who)
        # the family's markers, read from the template: instance attributes in place of the class
        # attributes a fixed family declares (TokenMarkerParser reads them through self)
        self.start_markers = m.start_markers  # type: ignore[misc]
        self.start_label = m.start_label  # type: ignore[misc]
        self.end_markers = m.end_markers  # type: ignore[misc]
        self.implicit_end_markers = m.implicit_end_markers  # type: ignore[misc]
        self.turn_start_markers = m.turn_start_markers  # type: ignore[misc]
        self.content_strip_markers = m.content_closers  # type: ignore[misc]
        mode = "first_token" if m.first_token else "thinking"
        self.default_mode = self.enabled_mode = mode  # type: ignore[misc]
        self.markers = m
        thinking_open = self.response_template.fields[THINKING].open
        self._anchors = tuple(t.encode("utf-8") for t in self.response_template.start_anchor.texts or ())
        self._openers = tuple(t.encode("utf-8") for t in (thinking_open.texts or ())) if thinking_open else ()
        super().__init__(vocabulary, chat_template_kwargs)

    def initial_state(self, prompt_token_ids: Sequence[int] = (),
                      chat_template_kwargs: Mapping[str, Any] | None = None) -> int:
        """:class:`~thinkgate.reasoning.markers.TokenMarkerParser`'s rules, and one more, as vLLM reads a prefill: when the
        model would decide with its first token but the prompt already wrote text after the start anchor
        of the current message (an assistant prefill: the content has begun), the thinking has ended. Text
        that may still become the thinking's opener does not count. Reads only the current turn."""
        state = super().initial_state(prompt_token_ids, chat_template_kwargs)
        if state != PENDING or not self._anchors or not prompt_token_ids:
            return state
        turns = self.turn_start_token_ids
        start = next((i for i in range(len(prompt_token_ids) - 1, -1, -1) if prompt_token_ids[i] in turns), None)
        if start is None:
            return state
        data = self.vocabulary.decode_bytes(prompt_token_ids[start:])
        ends = [data.rfind(a) + len(a) for a in self._anchors if data.rfind(a) >= 0]
        if not ends:
            return state
        rest = data[max(ends):]
        if rest and not any(o.startswith(rest) for o in self._openers):
            return ENDED
        return state
