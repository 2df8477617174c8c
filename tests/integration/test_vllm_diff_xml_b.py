"""Differential check of the xml_b tool formats against vLLM 0.34's own parsers (issue 20 item 2).

For each vLLM tool-parser name of the group that thinkgate serves (:data:`NAMES`: the vLLM name, the
renderer that writes its model's calls), the same outputs go through vLLM's own parser (by that name, through
its serving ``Parser``, as ``vllm serve --tool-call-parser NAME`` composes it) and through thinkgate's
``Parser`` for the format ``NAME``, whole and streamed token by token. The outputs are the chat template's
calls of the corpus (``tool_serving.cases``: well formed, text after the calls, a character deleted, cut
short) plus the variants of :data:`VARIANTS` (what vLLM's own tests feed these parsers). The tool call is
compared after the thinking: vLLM's parser runs with the template's thinking switched off, thinkgate's
without a reasoning parser.

Every output is classified (:func:`classify`); a difference must fall in a class of :data:`CLASSES`, whose
reason says why thinkgate's answer is the one it gives. The counts per name and class are printed
(``-s``) and recorded in the report of the branch. An output no class explains fails the test.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from support import FAMILIES, TOOLS, detokenizer, request_for, vocab
from template_render import RENDERERS
from tool_serving import Message, cases, chat_request, norm, parser_cls, streamed, tokenizer, whole

NAMES: dict[str, str] = {
    # vLLM name: the renderer of its model's calls (its format is the thinkgate format served for the name)
    "ling3": "glm47", "poolside_v1": "glm45", "deepseek_v41": "deepseek_v41", "dots": "dots", "ripple": "ripple",
    "plamo3": "plamo3", "k2_horizon": "k2_horizon",
}
VALUE_TAGS: dict[str, tuple[str, str]] = {
    "ling3": ("<arg_value>", "</arg_value>"), "poolside_v1": ("<arg_value>", "</arg_value>"),
    "dots": ("<parameter name=", "</parameter>"), "k2_horizon": ("<ifm|arg_value>", "</ifm|arg_value>"),
    "deepseek_v41": ("<｜DSML｜ parameter name=", "</｜DSML｜ parameter>"),
}
KWARGS: dict[str, dict[str, Any]] = {
    # the template's thinking switched off, so that vLLM's parser starts in the content
    "ling3": {"enable_thinking": False}, "poolside_v1": {"enable_thinking": False},
    "plamo3": {"enable_thinking": False}, "deepseek_v41": {"thinking": False},
}
VARIANTS: dict[str, list[str]] = {
    # outputs vLLM's own tests give these parsers (tests/tool_parsers/test_<name>_tool_parser.py)
    "poolside_v1": ['<tool_call>get_weather<arg_key>location</arg_key><arg_value>Paris</arg_value></tool_call>',
                    '<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>'],
    "dots": ['ok<dots_function_call><invoke name="get_weather"><parameter name="location">Paris</parameter>'
             '<parameter name="days">3</parameter></invoke></dots_function_call>',
             '<dots_function_call><invoke name="get_weather"><parameter name="location">Paris</parameter></invoke>'
             '<invoke name="get_time"><parameter name="tz">UTC</parameter></invoke></dots_function_call>'],
    "k2_horizon": ["Before <ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>location</ifm|arg_key>"
                   "<ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls> after."],
    "ripple": ['<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris"}}\n</tool_call>',
               'Sure.\n<tool_call>\n{"arguments": {"location": "Paris"}, "name": "get_weather"}\n</tool_call>'],
}

CLASSES: dict[str, str] = {
    "agree": "the same content and calls",
    "content_whitespace": "the same calls; the content differs in whitespace only (thinkgate strips the content "
                          "and drops the template's newline framing of calls, vLLM's parsers keep some of it)",
    "text_after_calls": "the same calls; vLLM drops the text written after the calls, thinkgate keeps it as content",
    "damaged_call": "a damaged output (a character deleted, or cut short): vLLM returns a call whose text does "
                    "not follow the syntax (arguments that are not JSON, a call without its end marker) or drops "
                    "the broken text; thinkgate leaves text that does not read as content",
    "value_typing": "the same calls but for a value typed by the schema: thinkgate follows a $ref (an object "
                    "behind \"$ref\": \"#/$defs/Money\") and returns the JSON value the template wrote, vLLM's "
                    "parser does not follow it and returns the text as a string, which the schema does not admit",
    "vllm_stream_inconsistent": "vLLM's stream reads other calls than vLLM's own whole parse, which thinkgate's "
                                "answer matches (thinkgate's stream equals its whole parse)",
    "value_holds_closing_tag": "a string value holds the closing tag of a raw value, which the template writes "
                               "unescaped (test_tool_conformance.py's CANNOT_EXPRESS): vLLM cuts the value at it "
                               "and returns a wrong argument; thinkgate reads no call there (the block stays content)",
    "layout_variant": "a layout vLLM's tests feed its parser that the model's template does not write (no newlines "
                      "where the template writes them, JSON keys in another order): vLLM reads it, thinkgate's "
                      "exact reader does not yet (the lenient reading of branch 'loose' is to cover it)",
    "vllm_stream_protocol": "vLLM's stream broke the OpenAI delta protocol (a call's first delta without its "
                            "id, type or name, or a call named twice)",
}


def _calls(m: Message) -> list[tuple[str, Any]]:
    out = []
    for name, args in m.calls:
        try:
            out.append((name, json.loads(args)))
        except (json.JSONDecodeError, TypeError):
            out.append((name, ("not JSON", args)))
    return out


def _same_but_typing(a: Any, b: Any) -> bool:
    """``a`` equals ``b``, where a string that is the JSON text of the other side's value counts as equal."""
    if isinstance(a, str) and not isinstance(b, str):
        try:
            return json.loads(a) == b
        except json.JSONDecodeError:
            return False
    if isinstance(b, str) and not isinstance(a, str):
        return _same_but_typing(b, a)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_but_typing(a[k], b[k]) for k in a)
    return a == b


def classify(change: str, theirs: Message | None, ours: Message, their_whole: Message | None = None,
             value_tags: tuple[str, str] | None = None, text: str = "") -> str:
    """The class of one output (:data:`CLASSES`); ``their_whole``: for a stream, vLLM's whole answer;
    ``value_tags``: the (opening, closing) tags of a raw XML value in ``text``."""
    if theirs is None:
        return "vllm_stream_protocol"
    tc, oc = _calls(theirs), _calls(ours)
    tcontent, ocontent = " ".join((theirs.content or "").split()), " ".join((ours.content or "").split())
    if tc == oc and theirs.content == ours.content:
        return "agree"
    if tc == oc and tcontent == ocontent:
        return "content_whitespace"
    if their_whole is not None and _calls(their_whole) != tc and \
            classify(change, their_whole, ours) in ("agree", "content_whitespace", "text_after_calls"):
        return "vllm_stream_inconsistent"
    if tc == oc and change == "after" and ocontent.endswith("Done.") and tcontent == ocontent[:-len("Done.")].strip():
        return "text_after_calls"
    if change in ("delete", "cut"):
        return "damaged_call"
    if value_tags is not None and text.count(value_tags[1]) > text.count(value_tags[0]) and tc and not oc:
        return "value_holds_closing_tag"
    if change == "variant" and not oc and tc:
        return "layout_variant"
    if len(tc) == len(oc) and all(a[0] == b[0] and _same_but_typing(a[1], b[1]) for a, b in zip(tc, oc)) \
            and tcontent == ocontent:
        return "value_typing"
    return "unexplained"


def _outputs(name: str) -> list[tuple[str, str]]:
    renderer = NAMES[name]
    fam = FAMILIES[RENDERERS[renderer].format]
    out = [(text[len(fam.thinking):], change) for text, change in cases(renderer, 12, seed=20)]
    return out + [(t, "variant") for t in VARIANTS.get(name, [])]


COUNTS: dict[str, Counter] = {}


@pytest.mark.parametrize("name", list(NAMES))
def test_vllm_parser_and_thinkgate_agree_or_differ_for_a_reason(name: str) -> None:
    renderer = NAMES[name]
    fam = FAMILIES[RENDERERS[renderer].format]
    v = vocab(fam.vocab)
    tok = tokenizer(fam.vocab)
    cls = parser_cls(tok, name, None)
    counts: Counter = Counter()
    unexplained = []
    for text, change in _outputs(name):
        ids = v.encode(text)
        req = request_for(renderer, None, tool_choice="auto")
        r = req.parse(ids)
        ours = Message(None, norm(r.content), tuple((c.name, c.arguments) for c in r.tool_calls))
        request = chat_request(TOOLS, "auto")
        theirs = whole(cls, tok, request, [], ids, v.decode(ids), KWARGS.get(name))
        tags = VALUE_TAGS.get(name)
        k = classify(change, Message(None, theirs.content, theirs.calls), ours, None, tags, text)
        counts["whole:" + k] += 1
        try:
            got = streamed(cls, tok, request, [], ids, range(len(ids)), detokenizer(v), KWARGS.get(name))
            got = Message(None, got.content, got.calls)
        except AssertionError:
            got = None
        ks = classify(change, got, ours, Message(None, theirs.content, theirs.calls), tags, text)
        counts["stream:" + ks] += 1
        for how, kk, m in (("whole", k, theirs), ("stream", ks, got)):
            if kk == "unexplained":
                unexplained.append((how, change, text, m, ours))
    COUNTS[name] = counts
    print(f"\n{name}: " + ", ".join(f"{k} {n}" for k, n in sorted(counts.items())))
    assert not unexplained, "\n".join(f"{h} {c} {t!r}\n  vLLM {m}\n  ours {o}" for h, c, t, m, o in unexplained[:5])
    assert counts["whole:agree"] >= 1


def test_every_name_of_the_group_is_a_thinkgate_tool_parser_in_vllm() -> None:
    """The plugin registers ``thinkgate_<name>`` for each of the group's vLLM names (and the formats' aliases)."""
    import thinkgate.structured_output.vllm_tool_plugin  # noqa: F401
    from vllm.tool_parsers import ToolParserManager

    for name in [*NAMES, "deepseek_v4_1"]:
        assert ToolParserManager.get_tool_parser(f"thinkgate_{name}") is not None
