"""A constrained request's tool calls stream as they are written: the name first, then argument text.

For a request whose output is generated under thinkgate's tool constraint (tool_choice ``"required"`` or a
named function by default, ``constrained=True`` for an auto request with a strict tool), a call's first
delta (index, id, type, name) goes out as soon as its name is read and allowed, and later deltas carry more
argument text. On real vocabularies and template-rendered calls (``template_render.py`` with the corpus'
tools and examples), for every chunking (hypothesis):

- the fragments of each call concatenate to the whole parse's arguments, exactly (names, indexes, content,
  finish_reason alike), for tool_choice required and for an auto request that opts in (content beside);
- a call's name arrives before the delta that completes the call (the whole parse of the output so far
  first holds the call there), and argument text arrives before it when the arguments are long;
- an output cut by max_tokens: what was sent of each call is a prefix of the uncut output's arguments and
  finish_reason stays ``length``;
- hostile values (unicode, escapes, ``<`` and closing-tag prefixes inside strings, split across deltas).

The ``json`` format (the calls as one JSON document, vLLM's form for required / named) has the same
properties on Qwen3.6 and DeepSeek V4, with the document written in several styles and ``"parameters"``
before ``"name"``; a request it does not constrain (``constrained=False``) still sends nothing before finish.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from support import (EXAMPLES, FAMILIES, JSON_PAIRINGS, JSON_STYLES, PAIRINGS, TOOLS, json_calls_document, json_thinking,
                     parser_for, request_for, stream_chunks, vocab)
from template_render import RENDERERS, render

from thinkgate.structured_output import Parser
from thinkgate.structured_output.frontend.parse_request import RequestParser
from thinkgate.structured_output.tools import MarkedDecoder, get_tool_reader

# formats whose arguments stream before the call ends (all; Gemma 4's for tools whose objects declare their
# keys, as the corpus' get_weather and translate)
HOLDS_CALLS = {"pythonic", "llama4_pythonic", "olmo3", "lfm2", "muse", "muse_glimmer", "minimax_m3"}
"""Renderers whose format's stream holds a call list until it is read whole (``pythonic.py``: a Python call
expression is decided when its list closes; ``muse_stream.py``: a call message is read when it ends;
``elements.py``: MiniMax M3's nested elements go out per call, as vLLM sends them); their calls go out
whole, not as they are written."""
STREAMS_ARGUMENTS = set(RENDERERS) - HOLDS_CALLS


def constrained_request(renderer: str, reasoning: str | None, **kw: Any) -> RequestParser:
    kw.setdefault("tool_choice", "required")
    return request_for(renderer, reasoning, **kw)


@dataclass
class StreamedCall:
    index: int
    id: str
    name: str
    fragments: list[str] = field(default_factory=list)
    first_delta: int = -1  # the delta (position in the list of deltas) of the call's first delta
    text_deltas: list[int] = field(default_factory=list)  # the deltas that carried argument text

    @property
    def arguments(self) -> str:
        return "".join(self.fragments)


def collect_calls(deltas: Sequence[dict[str, Any] | None]) -> list[StreamedCall]:
    """The calls of a stream's deltas, checking the OpenAI shape: a call's first delta has index, id, type
    and name; later ones index and arguments only; indexes count from 0 in order of first deltas."""
    calls: list[StreamedCall] = []
    for k, d in enumerate(deltas):
        for c in (d or {}).get("tool_calls", []):
            i = c["index"]
            if "id" in c:
                assert i == len(calls), "a call's first delta comes once, in order"
                assert c["type"] == "function" and set(c) == {"index", "id", "type", "function"}
                calls.append(StreamedCall(i, c["id"], c["function"]["name"], first_delta=k))
            else:
                assert set(c) == {"index", "function"} and set(c["function"]) == {"arguments"}
                assert 0 <= i < len(calls), "argument text of a call whose first delta went out"
                assert c["function"]["arguments"], "a later delta always carries text"
            if c["function"]["arguments"]:
                calls[i].fragments.append(c["function"]["arguments"])
                calls[i].text_deltas.append(k)
    return calls


def stream(req: RequestParser, ids: Sequence[int], cuts: Sequence[int], give_text: bool,
           finish_reason: str = "stop") -> tuple[list[dict[str, Any] | None], str, str]:
    """(the deltas, the first for ids[:bounds[1]] ..., the last the finish's; content; finish_reason)."""
    deltas, end = stream_chunks(req, ids, cuts, give_text, finish_reason)
    content = "".join((d or {}).get("content", "") for d in deltas)
    return deltas, content, end.finish_reason


@st.composite
def call_outputs(draw: st.DrawFn, renderer: str, content: bool = False) -> tuple[str, int]:
    """(the thinking then calls as the template writes them, with content before them when ``content``,
    the number of calls)."""
    r = RENDERERS[renderer]
    fam = FAMILIES[r.format]
    names = draw(st.lists(st.sampled_from(sorted(EXAMPLES)), min_size=1, max_size=2 if r.parallel else 1,
                          unique=True))
    calls = [(n, draw(st.sampled_from(EXAMPLES[n]))) for n in names]
    text = draw(st.sampled_from(["", "Let me check that.", "  Sure: \n", "Ünïcode ✓ 北京 <b>"])) if content else ""
    try:
        body = render(renderer, calls, text)
    except ValueError:  # a template that writes no content beside calls (Llama 3.1)
        body = render(renderer, calls)
    return fam.thinking + body, len(calls)


SETTINGS = settings(max_examples=10, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


@pytest.mark.parametrize("renderer,reasoning", PAIRINGS, ids=[f"{p}-{r}" for r, p in PAIRINGS])
@SETTINGS
@given(data=st.data())
def test_constrained_calls_stream_fragments_that_join_to_the_whole_arguments(renderer: str, reasoning: str | None,
                                                                             data: st.DataObject) -> None:
    # tool_choice required (no content beside the calls), or auto with a strict tool whose constraint the
    # server applied (constrained=True: content, then calls)
    auto = data.draw(st.booleans())
    kw: dict[str, Any] = {"tool_choice": "auto", "constrained": True} if auto else {}
    text, n_calls = data.draw(call_outputs(renderer, content=auto))
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(text)
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=min(len(ids), 40)))
    give_text = data.draw(st.booleans())
    whole = constrained_request(renderer, reasoning, **kw).parse(ids, v.decode(ids) if give_text else None)
    # a corpus value the syntax cannot hold (its closing tag inside a raw string) is no output of the grammar
    assume(len(whole.tool_calls) == n_calls)
    deltas, content, finish_reason = stream(constrained_request(renderer, reasoning, **kw), ids, cuts, give_text)
    calls = collect_calls(deltas)
    assert [(c.name, c.arguments) for c in calls] == [(c.name, c.arguments) for c in whole.tool_calls]
    assert content == (whole.content or "")
    assert finish_reason == whole.finish_reason == "tool_calls"
    assert all(d is None or d for d in deltas)


@pytest.mark.parametrize("renderer,reasoning", PAIRINGS, ids=[f"{p}-{r}" for r, p in PAIRINGS])
@settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_call_cut_by_max_tokens_keeps_a_prefix_of_its_arguments(renderer: str, reasoning: str | None,
                                                                  data: st.DataObject) -> None:
    """What goes out for a cut call: its first delta if its name was read, and argument text that is a prefix
    of the arguments the uncut output has; finish_reason stays ``length``. (The whole parse of the cut
    output has no such call: its text is content there; the stream has sent the call and drops the rest.)"""
    text, n_calls = data.draw(call_outputs(renderer))
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(text)
    full = constrained_request(renderer, reasoning).parse(ids).tool_calls
    assume(len(full) == n_calls)
    n = data.draw(st.integers(1, len(ids)))
    cuts = data.draw(st.lists(st.integers(0, n), max_size=20))
    deltas, content, finish_reason = stream(constrained_request(renderer, reasoning), ids[:n], cuts, False, "length")
    assert finish_reason == "length"
    calls = collect_calls(deltas)
    assert len(calls) <= len(full)
    for got, want in zip(calls, full):
        assert got.name == want.name
        assert want.arguments.startswith(got.arguments)
    cut_whole = constrained_request(renderer, reasoning).parse(ids[:n], finish_reason="length")
    assert (cut_whole.content or "").startswith(content)


def _decided_at(req_for, ids: Sequence[int], k_calls: int) -> list[int]:
    """For each of the first ``k_calls`` calls, the first n such that the whole parse of ids[:n+1] holds it."""
    out: list[int] = []
    for n in range(len(ids)):
        if len(req_for().parse(ids[:n + 1]).tool_calls) > len(out):
            out.append(n)
            if len(out) == k_calls:
                break
    return out


LONG = ("Zürich, \"quoted\" \\ back\\slash, tab\t, newline\n, <b>tag</b>, </param and </parameter-ish, "
        "emoji 🌦 and 北京 — " * 3)


@pytest.mark.parametrize("renderer,reasoning", PAIRINGS, ids=[f"{p}-{r}" for r, p in PAIRINGS])
def test_the_name_and_argument_text_arrive_before_the_call_ends(renderer: str, reasoning: str | None) -> None:
    """One token per delta: each call's first delta comes before the delta whose ids complete the call
    (the whole parse of the output so far first holds it there); where arguments stream, a long string
    argument goes out in several fragments before then, and the fragments join to the whole arguments."""
    if renderer in HOLDS_CALLS:
        pytest.skip("this format's stream holds its calls until they are read whole (HOLDS_CALLS)")
    r = RENDERERS[renderer]
    calls = [("translate", {"text": LONG, "source_lang": LONG, "target_lang": "de"})]
    if r.parallel:
        calls.append(("get_weather", {"location": "北京 <x>", "unit": "celsius"}))
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(FAMILIES[r.format].thinking + render(renderer, calls))
    whole = constrained_request(renderer, reasoning).parse(ids)
    assert [c.name for c in whole.tool_calls] == [n for n, _ in calls]
    assert json.loads(whole.tool_calls[0].arguments)["text"] == LONG
    deltas, _, _ = stream(constrained_request(renderer, reasoning), ids, range(len(ids)), False)
    got = collect_calls(deltas)
    assert [(c.name, c.arguments) for c in got] == [(c.name, c.arguments) for c in whole.tool_calls]
    decided = _decided_at(lambda: constrained_request(renderer, reasoning), ids, len(calls))
    for call, at in zip(got, decided):
        assert call.first_delta < at, f"{call.name}: the name came with the call's end"
        early = [k for k in call.text_deltas if k < at]
        if renderer in STREAMS_ARGUMENTS and call.name == "translate":
            assert len(early) > 5, f"{call.name}: its argument text waited for the call's end"
            # both long strings (the first and a later parameter) went out as they came
            sent = "".join(call.fragments[:len(early)])
            for key in ("text", "source_lang"):
                assert re.search(f'"{key}": ?"Zürich, \\\\"quoted', sent), f"{key} waited for the call's end"


XML_HOSTILE = ["a </paramete b", "</", "<", "x <parameter=y>\nz", "\\u00e9 \\\"", "\"quoted\"", "tab\tnl\n",
               "🌦 北京", "ends with <", "ends with </", "ends with </parameter", "a</arg_value", "&lt;"]


@pytest.mark.parametrize("renderer", sorted(STREAMS_ARGUMENTS))
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_hostile_string_values_split_anywhere_stream_exactly(renderer: str, data: st.DataObject) -> None:
    """Values with unicode, escapes, ``<`` and prefixes of the closing tag, split across deltas anywhere:
    the fragments join to the whole parse's arguments (for XML formats, JSON built incrementally)."""
    fmt = RENDERERS[renderer].format
    reasoning = FAMILIES[fmt].parser
    v = parser_for(renderer, reasoning).vocabulary
    value = "".join(data.draw(st.lists(st.sampled_from(XML_HOSTILE), min_size=1, max_size=4)))
    fam = FAMILIES[fmt]
    if fam.xml is not None and fam.xml[1] in value and not fam.close_ends_value:
        value = value.replace(fam.xml[1], "")
    ids = v.encode(fam.thinking + render(renderer, [("get_weather", {"location": value, "unit": "celsius"})]))
    whole = constrained_request(renderer, reasoning).parse(ids)
    if not whole.tool_calls:  # a value that this syntax cannot hold (its closing tag): nothing to compare
        return
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=len(ids)))
    deltas, content, _ = stream(constrained_request(renderer, reasoning), ids, cuts, data.draw(st.booleans()))
    got = collect_calls(deltas)
    assert [(c.name, c.arguments) for c in got] == [(c.name, c.arguments) for c in whole.tool_calls]
    assert content == (whole.content or "")


@pytest.mark.parametrize("renderer", sorted(RENDERERS))
def test_every_corpus_example_streams_exactly_one_token_per_delta(renderer: str) -> None:
    """Every example call of the corpus (nested objects, arrays, numbers, null, enums, unicode), as the
    template writes it, fed one token per delta: the fragments join to the whole parse's arguments, and
    the first delta carries the name. (Examples whose text the syntax cannot hold are not read whole.)"""
    fmt = RENDERERS[renderer].format
    reasoning = FAMILIES[fmt].parser
    v = parser_for(renderer, reasoning).vocabulary
    read = 0
    for name in sorted(EXAMPLES):
        for args in EXAMPLES[name]:
            ids = v.encode(FAMILIES[fmt].thinking + render(renderer, [(name, args)]))
            whole = constrained_request(renderer, reasoning).parse(ids).tool_calls
            if not whole:
                continue
            read += 1
            deltas, _, _ = stream(constrained_request(renderer, reasoning), ids, range(len(ids)), False)
            assert [(c.name, c.arguments) for c in collect_calls(deltas)] == [(whole[0].name, whole[0].arguments)]
    assert read >= 40


def test_the_default_follows_tool_choice_and_auto_opts_in_only_with_a_constraint() -> None:
    p = Parser(vocab("qwen3_6"), "qwen3", "qwen3_6")
    named = {"type": "function", "function": {"name": "get_weather"}}
    assert p.request(tools=TOOLS, tool_choice="required").constrained
    assert p.request(tools=TOOLS, tool_choice=named).constrained
    assert not p.request(tools=TOOLS).constrained
    assert not p.request(tools=TOOLS, tool_choice="required", constrained=False).constrained
    plain = [t for t in TOOLS if t["function"].get("strict") is not True]
    with pytest.raises(ValueError, match="no tool constraint"):
        p.request(tools=plain, constrained=True)  # auto without a strict tool: nothing guarantees the calls
    with pytest.raises(ValueError, match="constrained"):
        p.request(tools=TOOLS, constrained="yes")  # type: ignore[arg-type]
    strict = [dict(t, function={**t["function"], "strict": True}) for t in TOOLS
              if t["function"]["name"] == "get_weather"]
    assert p.request(tools=strict, constrained=True).constrained
    # constrained=False: a call goes out whole, in the delta that decides it
    ids = p.vocabulary.encode("</think>\n\n" + render("qwen3_6", [("get_weather", {"location": "Paris"})]))
    req = p.request(tools=TOOLS, tool_choice="required", constrained=False)
    deltas = [req.parse_delta([t]) for t in ids] + [req.finish().delta]
    items = [c for d in deltas if d for c in d.get("tool_calls", [])]
    assert len(items) == 1 and items[0]["function"]["arguments"] == '{"location": "Paris"}'


def test_an_auto_request_that_opts_in_keeps_a_call_that_breaks_after_its_name() -> None:
    """Where the grammar was not in force after all (auto, ``constrained=True``), a call whose first delta
    went out and whose text then breaks stays a call with the argument text sent; its text is not content,
    and the text after it streams on."""
    p = Parser(vocab("qwen3_6"), "qwen3", "hermes")
    strict = [{"type": "function", "function": {**t["function"], "strict": True}} for t in TOOLS
              if t["function"]["name"] == "get_weather"]
    broken = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Zür'
    ids = p.vocabulary.encode("</think>\n\nChecking. " + broken + "</tool_call> And more.")
    req = p.request(tools=strict, constrained=True)
    deltas, content, finish_reason = stream(req, ids, range(len(ids)), False)
    [call] = collect_calls(deltas)
    assert call.name == "get_weather" and call.arguments == '{"location": "Zür'
    assert "Zür" not in content and content.startswith("Checking.") and content.endswith("And more.")
    assert finish_reason == "tool_calls"
    # the whole parse cannot know what the stream sent: the broken call is content there
    assert p.request(tools=strict, constrained=True).parse(ids).tool_calls == ()


def _work(fmt: str, vocab_name: str, n: int) -> tuple[float, int]:
    """(characters examined per character of output, the most examined by one delta) for one call whose
    string argument is ``n`` repetitions of a phrase, fed one token per delta, arguments streaming."""
    v = vocab(vocab_name)
    text = render(fmt, [("get_weather", {"location": "Zürich <b> " * n})])
    ids = v.encode(text)
    reader = get_tool_reader(fmt, TOOLS, "required")
    dec, s = MarkedDecoder(v), reader.stream(v, stream_arguments=True)
    most = last = 0
    sent, calls = 0, []
    for t in ids:
        d = s.feed(dec.feed([t]))
        sent += sum(len(f.arguments) for f in d.fragments)
        calls += d.calls
        if not d.calls:  # the delta that completes the call reads it whole, once
            most = max(most, s.scanned - last)
        last = s.scanned
    d = s.finish()
    calls += d.calls
    sent += sum(len(f.arguments) for f in d.fragments)
    assert len(calls) == 1 and sent == len(calls[0].arguments)
    assert json.loads(calls[0].arguments)["location"] == "Zürich <b> " * n
    return s.scanned / len(text), most


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_6", "deepseek_v4", "mistral", "llama3_json", "kimi_k2", "glm47",
                                 "minimax_m2", "gemma4", "openai"])
def test_streamed_arguments_cost_grows_with_the_deltas_not_with_the_call_so_far(fmt: str) -> None:
    small, small_most = _work(fmt, FAMILIES[fmt].vocab, 20)
    large, large_most = _work(fmt, FAMILIES[fmt].vocab, 800)
    # per character of output the work is flat (re-reading the call so far at each delta would be 40x),
    # and no delta examines more than a bounded tail (a held closing-tag prefix, an incomplete opening)
    assert large < small * 1.5 + 1
    assert large_most <= small_most + 8


@pytest.mark.parametrize("renderer,reasoning", PAIRINGS, ids=[f"{p}-{r}" for r, p in PAIRINGS])
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_constrained_view_fed_malformed_output_keeps_the_openai_shape(renderer: str, reasoning: str | None,
                                                                       data: st.DataObject) -> None:
    """Output the grammar would not have allowed (a character deleted or a junk token inserted) never raises,
    and the deltas keep the OpenAI shape (first deltas in index order, later ones text for a sent call), and
    finish_reason says tool_calls exactly when a call went out."""
    text, _ = data.draw(call_outputs(renderer))
    i = data.draw(st.integers(0, len(text) - 1))
    text = text[:i] + data.draw(st.sampled_from(["", "<", "}", "\"", "</", "\n"])) + text[i + 1:]
    v = parser_for(renderer, reasoning).vocabulary
    ids = v.encode(text)
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=30))
    deltas, _, finish_reason = stream(constrained_request(renderer, reasoning), ids, cuts, False)
    got = collect_calls(deltas)
    assert finish_reason == ("tool_calls" if got else "stop")


@pytest.mark.parametrize("fmt,unit", [
    ("hermes", '<tool_call>\n{"name": "get_weather", "arguments": {"location": "x'),
    ("hermes", "<tool_call>x "),
    ("qwen3_6", "<tool_call>\n<function=get_weather>\n<parameter=location>\nx </param"),
    ("deepseek_v4", '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
                    '<｜DSML｜parameter name="location" '),
    ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"),
    ("mistral", "[TOOL_CALLS]get_weather[ARGS]{ "),
    ("gemma4", '<|tool_call>call:get_weather{location:<|"|>x'),
    ("gemma4", "<|tool_call>call:get_weather{location:12345"),
    ("openai", "<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{"),
])
def test_a_hostile_run_in_one_delta_costs_linear_work_with_streamed_arguments(fmt: str, unit: str) -> None:
    """Calls that start and never read, many in one delta and one token per delta, with arguments
    streaming: the work per character stays flat (an opening read again at each feed is bounded)."""
    v = vocab(FAMILIES[fmt].vocab)
    work = []
    for k in (100, 400):
        ids = v.encode(unit * k)
        for step in (len(ids), 1):
            reader = get_tool_reader(fmt, TOOLS, "required")
            dec, s = MarkedDecoder(v), reader.stream(v, stream_arguments=True)
            for a in range(0, len(ids), step):
                s.feed(dec.feed(ids[a:a + step]))
            s.finish()
            work.append(s.scanned / len(unit * k))
    # [one delta at 100, one token per delta at 100, one delta at 400, one token per delta at 400]
    assert work[2] < work[0] * 1.5 + 1 and work[3] < work[1] * 1.5 + 1


# -- the json format: the calls as one JSON document ------------------------------------------------

_JSON_PARSERS: dict[tuple[str, str], Parser] = {}


def json_request(vocab_name: str, reasoning: str, **kw: Any) -> RequestParser:
    key = (vocab_name, reasoning)
    if key not in _JSON_PARSERS:
        _JSON_PARSERS[key] = Parser(vocab(vocab_name), reasoning, "json")
    p = _JSON_PARSERS[key]
    kw.setdefault("tools", TOOLS)
    kw.setdefault("tool_choice", "required")
    return p.request(prompt_token_ids=p.vocabulary.encode(json_thinking(vocab_name)[0]), **kw)


NAMED = {"type": "function", "function": {"name": "translate"}}


@st.composite
def json_outputs(draw: st.DrawFn, vocab_name: str, named: bool = False) -> tuple[str, list[tuple[str, Any]]]:
    """(the thinking then a document of corpus calls in a drawn style, the calls)."""
    names = ["translate"] if named else draw(st.lists(st.sampled_from(sorted(EXAMPLES)), min_size=1, max_size=3,
                                                      unique=True))
    calls = [(n, draw(st.sampled_from(EXAMPLES[n]))) for n in names]
    doc = json_calls_document(calls, draw(st.sampled_from(JSON_STYLES)), params_first=draw(st.booleans()),
                              ascii_escapes=draw(st.booleans()))
    return json_thinking(vocab_name)[1] + doc, calls


@pytest.mark.parametrize("vocab_name,reasoning", JSON_PAIRINGS)
@SETTINGS
@given(data=st.data())
def test_json_document_streams_fragments_that_join_to_the_whole_arguments(vocab_name: str, reasoning: str,
                                                                          data: st.DataObject) -> None:
    named = data.draw(st.booleans())
    kw: dict[str, Any] = {"tool_choice": NAMED} if named else {}
    text, calls = data.draw(json_outputs(vocab_name, named))
    v = vocab(vocab_name)
    ids = v.encode(text)
    give_text = data.draw(st.booleans())
    whole = json_request(vocab_name, reasoning, **kw).parse(ids, v.decode(ids) if give_text else None)
    assume(len(whole.tool_calls) == len(calls))  # an example the tool's schema refuses is content
    assert [json.loads(c.arguments) for c in whole.tool_calls] == [a for _, a in calls]
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=min(len(ids), 40)))
    deltas, content, finish_reason = stream(json_request(vocab_name, reasoning, **kw), ids, cuts, give_text)
    got = collect_calls(deltas)
    assert [(c.name, c.arguments) for c in got] == [(c.name, c.arguments) for c in whole.tool_calls]
    assert content == (whole.content or "") == ""
    assert finish_reason == whole.finish_reason == "tool_calls"
    assert all(d is None or d for d in deltas)
    # the arguments are the parameters object's text as written (what went out as it came)
    for c in whole.tool_calls:
        assert c.arguments in text


@pytest.mark.parametrize("vocab_name,reasoning", JSON_PAIRINGS)
@pytest.mark.parametrize("params_first", [False, True])
def test_json_document_sends_the_name_and_argument_text_before_the_document_ends(
        vocab_name: str, reasoning: str, params_first: bool) -> None:
    """One token per delta: each call's first delta comes before the document's end; its parameters go
    out in many fragments as they are written (name first), or, written before the name, whole in the
    first delta once the name is read, and the next call streams on its own index."""
    calls = [("translate", {"text": LONG, "source_lang": LONG, "target_lang": "de"}),
             ("get_weather", {"location": "北京 <x>", "unit": "celsius"})]
    v = vocab(vocab_name)
    doc = json_calls_document(calls, params_first=params_first)
    ids = v.encode(json_thinking(vocab_name)[1] + doc)
    whole = json_request(vocab_name, reasoning).parse(ids)
    assert [(c.name, json.loads(c.arguments)) for c in whole.tool_calls] == calls
    deltas, _, _ = stream(json_request(vocab_name, reasoning), ids, range(len(ids)), False)
    got = collect_calls(deltas)
    assert [(c.name, c.arguments) for c in got] == [(c.name, c.arguments) for c in whole.tool_calls]
    end = len(deltas) - 1  # the finish's delta
    last_token = len(ids) - 1
    for call in got:
        assert call.first_delta < last_token, f"{call.name}: the name waited for the document's end"
        early = [k for k in call.text_deltas if k < last_token]
        if params_first:
            assert call.text_deltas and call.text_deltas[0] == call.first_delta  # held, then sent with the name
        elif call.name == "translate":
            assert len(early) > 20, "the argument text waited for the document's end"
        assert all(k < end for k in call.text_deltas)
    # the second call's first delta comes after the first call's last fragment (the document's order)
    assert got[1].first_delta >= got[0].text_deltas[-1]


JSON_HOSTILE = ["\\", "\"", "\\\"", "\n", "\t", "🌦", "北京", "é", "\u00e9", "}", "]", "{", "[", "\",\"", ": ",
                '"name": "x"', '"parameters": {', "</", "<|im_end|>", "  "]


@pytest.mark.parametrize("vocab_name,reasoning", JSON_PAIRINGS)
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_json_document_hostile_values_and_escaped_names_stream_exactly(vocab_name: str, reasoning: str,
                                                                        data: st.DataObject) -> None:
    """Strings with quotes, backslashes, brackets, key-like text, unicode and ``\\u`` escapes (in the values
    and in the name), split across deltas anywhere: the fragments join to the whole parse's arguments."""
    value = "".join(data.draw(st.lists(st.sampled_from(JSON_HOSTILE), min_size=1, max_size=6)))
    calls = [("get_weather", {"location": value, "unit": "celsius"})]
    doc = json_calls_document(calls, data.draw(st.sampled_from(JSON_STYLES)), params_first=data.draw(st.booleans()),
                              ascii_escapes=data.draw(st.booleans()))
    if data.draw(st.booleans()):
        doc = doc.replace('"get_weather"', '"get\\u005fweather"')  # the name with an escape in it
    v = vocab(vocab_name)
    ids = v.encode(json_thinking(vocab_name)[1] + doc)
    whole = json_request(vocab_name, reasoning).parse(ids)
    assert [(c.name, json.loads(c.arguments)) for c in whole.tool_calls] == calls
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=len(ids)))
    deltas, content, _ = stream(json_request(vocab_name, reasoning), ids, cuts, data.draw(st.booleans()))
    got = collect_calls(deltas)
    assert [(c.name, c.arguments) for c in got] == [(c.name, c.arguments) for c in whole.tool_calls]
    assert content == ""


@pytest.mark.parametrize("vocab_name,reasoning", JSON_PAIRINGS)
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_json_document_cut_by_max_tokens_keeps_a_prefix_of_its_arguments(vocab_name: str, reasoning: str,
                                                                        data: st.DataObject) -> None:
    text, calls = data.draw(json_outputs(vocab_name))
    v = vocab(vocab_name)
    ids = v.encode(text)
    full = json_request(vocab_name, reasoning).parse(ids).tool_calls
    assume(len(full) == len(calls))
    n = data.draw(st.integers(1, len(ids) - 1))
    cuts = data.draw(st.lists(st.integers(0, n), max_size=20))
    deltas, content, finish_reason = stream(json_request(vocab_name, reasoning), ids[:n], cuts, False, "length")
    assert finish_reason == "length"
    got = collect_calls(deltas)
    assert len(got) <= len(full)
    for g, want in zip(got, full):
        assert g.name == want.name and want.arguments.startswith(g.arguments)
    cut_whole = json_request(vocab_name, reasoning).parse(ids[:n], finish_reason="length")
    assert cut_whole.tool_calls == ()  # a cut document is content there
    # nothing announced: the cut document is content, as the whole parse says; else it is the calls' text
    assert content == ("" if got else (cut_whole.content or ""))


def test_json_document_a_name_the_request_does_not_allow_streams_nothing() -> None:
    """A call of a tool the request does not allow (a named choice of another one): nothing goes out early,
    and at the end the whole parse decides (content). A control token inside a call already sent (no output
    of the grammar) stops its text there: the call keeps what was sent, the document is not content."""
    v = vocab("qwen3_6")
    think = json_thinking("qwen3_6")[1]
    ids = v.encode(think + json_calls_document([("get_weather", {"location": "Paris", "unit": "celsius"})]))
    whole = json_request("qwen3_6", "qwen3", tool_choice=NAMED).parse(ids)
    assert whole.tool_calls == () and whole.content
    deltas, content, reason = stream(json_request("qwen3_6", "qwen3", tool_choice=NAMED), ids, range(len(ids)), False)
    assert collect_calls(deltas) == []
    assert not any((d or {}).get("content") for d in deltas[:-1])  # the document is held until the end
    assert content == whole.content and reason == "stop"
    ids = v.encode(think + '[{"name": "get_weather", "parameters": {"location": "Par<|im_start|>is"}}]')
    deltas, content, reason = stream(json_request("qwen3_6", "qwen3"), ids, range(len(ids)), False)
    [call] = collect_calls(deltas)
    assert (call.name, call.arguments, content, reason) == ("get_weather", '{"location": "Par', "", "tool_calls")
    # the named tool is streamed by name, its document one item
    named = think + json_calls_document([("translate", {"text": "hi", "target_lang": "de"})])
    ids = v.encode(named)
    deltas, _, reason = stream(json_request("qwen3_6", "qwen3", tool_choice=NAMED), ids, range(len(ids)), False)
    [call] = collect_calls(deltas)
    assert call.name == "translate" and call.first_delta < len(ids) - 1 and reason == "tool_calls"


def test_json_document_unconstrained_sends_nothing_before_finish() -> None:
    v = vocab("deepseek_v4")
    ids = v.encode(json_thinking("deepseek_v4")[1]
                   + json_calls_document([("get_weather", {"location": "Paris", "unit": "celsius"})]))
    req = json_request("deepseek_v4", "deepseek_v4", constrained=False)
    assert not any(d and d.get("tool_calls") for d in (req.parse_delta([t]) for t in ids))
    [item] = req.finish().delta["tool_calls"]
    assert item["function"]["arguments"] == '{"location": "Paris", "unit": "celsius"}'


@pytest.mark.parametrize("vocab_name,reasoning", JSON_PAIRINGS)
@settings(max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_json_document_malformed_keeps_the_openai_shape(vocab_name: str, reasoning: str, data: st.DataObject) -> None:
    text, _ = data.draw(json_outputs(vocab_name))
    i = data.draw(st.integers(0, len(text) - 1))
    text = text[:i] + data.draw(st.sampled_from(["", "}", "]", "\"", ",", "\\", "x", "<|im_start|>"])) + text[i + 1:]
    ids = vocab(vocab_name).encode(text)
    cuts = data.draw(st.lists(st.integers(0, len(ids)), max_size=30))
    deltas, _, finish_reason = stream(json_request(vocab_name, reasoning), ids, cuts, False)
    got = collect_calls(deltas)
    assert finish_reason == ("tool_calls" if got else "stop")


def _json_work(n: int, params_first: bool) -> tuple[float, int]:
    """(characters examined per character of output, the most examined by one delta) for a document of one
    call whose string argument is ``n`` repetitions of a phrase, fed one token per delta."""
    v = vocab("qwen3_6")
    text = json_calls_document([("get_weather", {"location": "Zürich {[\"]} " * n})], params_first=params_first)
    ids = v.encode(text)
    reader = get_tool_reader("json", TOOLS, "required")
    dec, s = MarkedDecoder(v), reader.stream(v, stream_arguments=True)
    most = last = 0
    sent = 0
    for t in ids:
        d = s.feed(dec.feed([t]))
        sent += sum(len(f.arguments) for f in d.fragments)
        most = max(most, s.scanned - last)
        last = s.scanned
    d = s.finish()
    sent += sum(len(f.arguments) for f in d.fragments)
    assert len(d.calls) == 1 and sent == len(d.calls[0].arguments)
    return s.scanned / len(text), most


@pytest.mark.parametrize("params_first", [False, True])
def test_json_document_streaming_cost_grows_with_the_deltas_not_with_the_document_so_far(params_first: bool) -> None:
    """Flat per character from 20 to 800 repetitions (re-reading the document so far at each delta would be
    40x), and no delta but the last (the whole read at finish is not a feed) examines more than its own
    text; parameters held until a late name cost the same."""
    small, small_most = _json_work(20, params_first)
    large, large_most = _json_work(800, params_first)
    assert large < small * 1.5 + 1
    assert large_most <= small_most
