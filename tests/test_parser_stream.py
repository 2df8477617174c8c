"""The Parser's stream equals its whole parse, for every chunking, on real vocabularies and real call texts.

For every reasoning family x tool format pairing the models use, outputs are written as the model's own
chat template writes them (``template_render.py``, never from thinkgate's format definitions), with the
tools and example arguments of the corpus (``tests/data/tools/corpus.json``), after the family's thinking.
Hypothesis draws the calls, the content around them, the chunking, whether the engine's detokenizer text
is given, and a change to the output: none, cut by max_tokens (``finish_reason="length"``), text after the
calls, or one character deleted (which often makes a call malformed: it must stay content, whole and
streamed alike). The concatenated deltas must equal the whole parse: reasoning, content, each call's name
and arguments, and the finish_reason and usage.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import EXAMPLES, FAMILIES, PAIRINGS, TOOLS, parser_for, request_for, stream_chunks, vocab
from template_render import RENDERERS, render

from thinkgate.structured_output import Parser, ParseResult
from thinkgate.structured_output.frontend.parse_request import RequestParser

def streamed(req: RequestParser, ids: Sequence[int], cuts: Sequence[int], give_text: bool,
             finish_reason: str = "stop") -> tuple[str, str, list[dict[str, Any]], str, dict[str, Any],
                                                   list[dict[str, Any] | None]]:
    """Stream ``ids`` cut at ``cuts``: (reasoning, content, tool-call deltas, finish_reason, usage, deltas)."""
    deltas, end = stream_chunks(req, ids, cuts, give_text, finish_reason)
    reasoning = "".join(d.get("reasoning", "") for d in deltas if d)
    content = "".join(d.get("content", "") for d in deltas if d)
    calls = [c for d in deltas if d for c in d.get("tool_calls", [])]
    return reasoning, content, calls, end.finish_reason, end.usage, deltas


def assert_same(whole: ParseResult, got: tuple) -> None:
    reasoning, content, calls, finish_reason, usage, deltas = got
    assert reasoning == (whole.reasoning or "")
    assert content == (whole.content or "")
    assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
        [(c.name, c.arguments) for c in whole.tool_calls]
    assert [c["index"] for c in calls] == list(range(len(calls)))
    assert all(c["type"] == "function" for c in calls)
    assert finish_reason == whole.finish_reason
    assert usage == whole.usage
    assert all(d is None or d for d in deltas)  # an empty delta is None, never {}


@st.composite
def outputs(draw: st.DrawFn, renderer: str) -> tuple[str, str]:
    """(the assistant's text after its prompt, the change made to it)."""
    r = RENDERERS[renderer]
    fam = FAMILIES[r.format]
    names = draw(st.lists(st.sampled_from(sorted(EXAMPLES)), min_size=1, max_size=2 if r.parallel else 1,
                          unique=True))
    calls = [(n, draw(st.sampled_from(EXAMPLES[n]))) for n in names]
    content = draw(st.sampled_from(["", "Let me check that.", "  Sure: \n", "Ünïcode ✓ 北京"]))
    try:
        body = render(renderer, calls, content)
    except ValueError:  # a template that writes no content beside calls (Llama 3.1)
        body = render(renderer, calls)
    change = draw(st.sampled_from(["none", "after", "delete", "cut"]))
    if change == "after":
        body += draw(st.sampled_from(["\n\nDone.", " ", "\n"]))
    elif change == "delete":
        i = draw(st.integers(0, len(body) - 1))
        body = body[:i] + body[i + 1:]
    return fam.thinking + body, change


SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.mark.parametrize("renderer,reasoning", PAIRINGS, ids=[f"{p}-{r}" for r, p in PAIRINGS])
@SETTINGS
@given(data=st.data())
def test_stream_equals_whole_parse_for_every_chunking(renderer: str, reasoning: str | None,
                                                      data: st.DataObject) -> None:
    text, change = data.draw(outputs(renderer))
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(text)
    finish_reason = "stop"
    if change == "cut":  # max_tokens cut the output
        ids = ids[:data.draw(st.integers(1, len(ids)))]
        finish_reason = "length"
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=min(len(ids), 40)))
    give_text = data.draw(st.booleans())
    whole = request_for(renderer, reasoning).parse(ids, v.decode(ids) if give_text else None, finish_reason)
    got = streamed(request_for(renderer, reasoning), ids, cuts, give_text, finish_reason)
    assert_same(whole, got)
    if finish_reason == "length":
        assert whole.finish_reason == "length"


@pytest.mark.parametrize("renderer,reasoning", PAIRINGS, ids=[f"{p}-{r}" for r, p in PAIRINGS])
def test_every_call_is_read_whole_and_streamed_token_by_token(renderer: str, reasoning: str | None) -> None:
    """The clean case, one token per delta: the calls the template wrote come back, with finish_reason
    tool_calls, and reasoning the family's thinking."""
    r = RENDERERS[renderer]
    calls = [("get_weather", {"location": "Zürich", "unit": "celsius"})]
    if r.parallel:
        calls.append(("get_weather", {"location": "北京"}))
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(FAMILIES[r.format].thinking + render(renderer, calls))
    whole = request_for(renderer, reasoning).parse(ids)
    assert [c.name for c in whole.tool_calls] == [n for n, _ in calls]
    assert whole.finish_reason == "tool_calls"
    if reasoning is not None:
        assert "should call a tool" in (whole.reasoning or "")
        assert whole.reasoning_tokens > 0
    got = streamed(request_for(renderer, reasoning), ids, range(len(ids)), False)
    assert_same(whole, got)


@pytest.mark.parametrize("renderer,reasoning", [p for p in PAIRINGS if p[1] is not None],
                         ids=[f"{p}-{r}" for r, p in PAIRINGS if p is not None])
@settings(max_examples=5, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_include_reasoning_false_drops_reasoning_only(renderer: str, reasoning: str, data: st.DataObject) -> None:
    text, _ = data.draw(outputs(renderer))
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(text)
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=30))
    with_r = request_for(renderer, reasoning).parse(ids)
    whole = request_for(renderer, reasoning, include_reasoning=False).parse(ids)
    assert whole.reasoning is None
    assert (whole.content, whole.finish_reason, whole.usage) == (with_r.content, with_r.finish_reason, with_r.usage)
    assert [(c.name, c.arguments) for c in whole.tool_calls] == [(c.name, c.arguments) for c in with_r.tool_calls]
    got = streamed(request_for(renderer, reasoning, include_reasoning=False), ids, cuts, False)
    assert_same(whole, got)
    assert all(d is None or "reasoning" not in d for d in got[5])
    # a delta of reasoning only sends nothing
    think = v.encode(FAMILIES[RENDERERS[renderer].format].thinking)
    req = request_for(renderer, reasoning, include_reasoning=False)
    first = req.parse_delta(think[:3])
    assert first is None or "reasoning" not in first


@pytest.mark.parametrize("renderer", [r for r, x in RENDERERS.items() if x.parallel])
def test_parallel_calls_off_keeps_the_first_call_and_the_rest_as_content(renderer: str) -> None:
    fmt = RENDERERS[renderer].format
    reasoning = FAMILIES[fmt].parser
    calls = [("get_weather", {"location": "Zürich"}), ("get_weather", {"location": "Paris"})]
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(FAMILIES[fmt].thinking + render(renderer, calls))
    both = request_for(renderer, reasoning).parse(ids)
    assert len(both.tool_calls) == 2
    whole = request_for(renderer, reasoning, parallel_tool_calls=False).parse(ids)
    assert [c.name for c in whole.tool_calls] == ["get_weather"]
    assert "Paris" in (whole.content or "")
    for step in (1, 2, 5):
        got = streamed(request_for(renderer, reasoning, parallel_tool_calls=False), ids,
                       range(0, len(ids), step), False)
        assert_same(whole, got)


MALFORMED = {
    # renderer -> a call with its syntax broken (its end token comes, so it is decided there)
    "hermes": '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Zürich"\n</tool_call>',
    "qwen3_6": "<tool_call>\n<function=get_weather>\n<parameter=location>\nZürich\n</function>\n</tool_call>",
    "deepseek_v4": ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="location" '
                    'string="true">Zürich</｜DSML｜invoke>\n</｜DSML｜tool_calls>'),
    "kimi_k2": ("<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
                '{"location": "Zürich",}<|tool_call_end|><|tool_calls_section_end|>'),
    "gemma4": '<|tool_call>call:get_weather{location:<|"|>Zürich}<tool_call|>',
    "hf_gemma4": '<|tool_call>call:get_weather{location:<|"|>Zürich}<tool_call|>',
}


@pytest.mark.parametrize("renderer", sorted(MALFORMED))
def test_a_malformed_call_stays_content_and_is_released_when_its_end_comes(renderer: str) -> None:
    fmt = RENDERERS[renderer].format
    reasoning = FAMILIES[fmt].parser
    call = MALFORMED[renderer]
    v = parser_for(renderer, reasoning).vocabulary
    thinking = FAMILIES[fmt].thinking
    ids = v.encode(thinking + "Checking. " + call + " And more text.")
    whole = request_for(renderer, reasoning).parse(ids)
    assert whole.tool_calls == () and whole.finish_reason == "stop"
    assert "Zürich" in (whole.content or "") and (whole.content or "").endswith("And more text.")
    req = request_for(renderer, reasoning)
    got = streamed(req, ids, range(len(ids)), False)
    assert_same(whole, got)
    # the held call text went out as content at the delta of its end token, not at the end of the output
    at = next(k for k in range(len(ids) + 1) if v.decode(ids[:k]).endswith(call))
    sent_by_then = "".join((d or {}).get("content", "") for d in got[5][:at])
    assert "Zürich" in sent_by_then


CALL_IDS = {
    "kimi_k2": re.compile(r"functions\.get_weather:[0-9]+"),
    "mistral": re.compile(r"[A-Za-z0-9]{9}"),
    "cohere_command3": re.compile(r"[0-9]+"),  # the tool_call_id the model wrote (as cohere_melody returns it)
}


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
def test_call_ids_follow_the_family_scheme(renderer: str) -> None:
    fmt = RENDERERS[renderer].format
    reasoning = FAMILIES[fmt].parser
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(FAMILIES[fmt].thinking + render(renderer, [("get_weather", {"location": "Paris"})]))
    pattern = CALL_IDS.get(fmt, re.compile(r"chatcmpl-tool-[0-9a-f]{32}"))
    whole = request_for(renderer, reasoning).parse(ids)
    streamed_calls = streamed(request_for(renderer, reasoning), ids, range(0, len(ids), 3), False)[2]
    for cid in [c.id for c in whole.tool_calls] + [c["id"] for c in streamed_calls]:
        assert pattern.fullmatch(cid), cid
    if fmt == "kimi_k2":  # the id the model wrote
        assert whole.tool_calls[0].id == streamed_calls[0]["id"] == "functions.get_weather:0"


def test_json_array_format_whole_and_streamed() -> None:
    """The ``json`` format (no model syntax: a JSON array of calls) with Qwen3 reasoning."""
    p = Parser(vocab("qwen3_6"), "qwen3", "json")
    fam = FAMILIES["hermes"]
    prompt = p.vocabulary.encode(fam.prompt)
    text = fam.thinking + '[{"name": "get_weather", "parameters": {"location": "Zürich"}}]'
    for tail, calls in (("", 1), (" trailing", 0)):
        ids = p.vocabulary.encode(text + tail)
        whole = p.request(tools=TOOLS, tool_choice="required", prompt_token_ids=prompt).parse(ids)
        assert len(whole.tool_calls) == calls
        # constrained=False: calls go out whole once decided (the constrained stream, which sends the name
        # first, is tests/test_parser_arguments.py's)
        got = streamed(p.request(tools=TOOLS, tool_choice="required", prompt_token_ids=prompt, constrained=False),
                       ids, range(0, len(ids), 2), False)
        assert_same(whole, got)


@pytest.mark.parametrize("renderer", ["hermes", "qwen3_6"])
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_call_that_ends_the_thinking_implicitly(renderer: str, data: st.DataObject) -> None:
    """Qwen3 may call a tool without closing its thinking: ``<tool_call>`` ends it and starts the content."""
    v = parser_for(renderer, "qwen3").vocabulary
    ids = v.encode("I need the weather.\n" + render(renderer, [("get_weather", {"location": "Paris"})]))
    whole = request_for(renderer, "qwen3").parse(ids)
    assert whole.reasoning == "I need the weather.\n"
    assert [c.name for c in whole.tool_calls] == ["get_weather"]
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=20))
    assert_same(whole, streamed(request_for(renderer, "qwen3"), ids, cuts, data.draw(st.booleans())))


@pytest.mark.parametrize("renderer,reasoning", PAIRINGS, ids=[f"{p}-{r}" for r, p in PAIRINGS])
def test_a_stop_token_left_in_the_output_is_not_part_of_the_message(renderer: str, reasoning: str | None) -> None:
    r = RENDERERS[renderer]
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(FAMILIES[r.format].thinking + render(renderer, [("get_weather", {"location": "Paris"})]))
    stop = min(v.stop_token_ids)
    without = request_for(renderer, reasoning).parse(ids)
    whole = request_for(renderer, reasoning).parse(ids + [stop])
    assert (whole.reasoning, whole.content, whole.finish_reason) == (without.reasoning, without.content,
                                                                    without.finish_reason)
    assert [(c.name, c.arguments) for c in whole.tool_calls] == [(c.name, c.arguments) for c in without.tool_calls]
    assert whole.completion_tokens == without.completion_tokens + 1
    assert_same(whole, streamed(request_for(renderer, reasoning), ids + [stop], range(0, len(ids), 2), False))
