"""The Parser's construction, request validation, whole-output fields, and the work of a stream.

- built by name, validated against the vocabulary: a marker the vocabulary lacks is a ``ValueError`` naming it;
- a bad request or bad ids are a ``ValueError`` naming the cause, for that request alone;
- the whole parse: message, finish_reason (tool_calls / length kept), usage.reasoning_tokens;
- the work of a streaming tool reader per delta grows with the delta, not with the output so far: counted
  (characters the reader examined, ``ToolStream.scanned``), never timed.
"""

from __future__ import annotations

import pytest
from support import FAMILIES, TOOLS, vocab
from template_render import render

from thinkgate.structured_output import Parser
from thinkgate.structured_output.tools import MarkedDecoder, get_tool_reader, list_tool_formats

WEATHER = [("get_weather", {"location": "Paris"})]


def qwen() -> Parser:
    return Parser(vocab("qwen3_6"), "qwen3", "qwen3_6")


# -- construction ------------------------------------------------------------------------------------

def test_a_tool_format_whose_marker_the_vocabulary_lacks_is_refused_naming_the_marker() -> None:
    with pytest.raises(ValueError, match=r"kimi_k2.*<\|tool_calls_section_begin\|>"):
        Parser(vocab("qwen3_6"), "qwen3", "kimi_k2")
    with pytest.raises(ValueError, match=r"\[TOOL_CALLS\]"):
        Parser(vocab("deepseek_v4"), None, "mistral")


def test_a_reasoning_family_whose_marker_the_vocabulary_lacks_is_refused_naming_the_marker() -> None:
    with pytest.raises(ValueError, match=r"\[THINK\]|\[/THINK\]"):
        Parser(vocab("qwen3_6"), "mistral", None)


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(ValueError, match="known: .*qwen3"):
        Parser(vocab("qwen3_6"), "no_such_family")
    with pytest.raises(ValueError, match="known: .*hermes"):
        Parser(vocab("qwen3_6"), "qwen3", "no_such_format")


def test_every_registered_format_builds_a_parser_on_its_vocabulary() -> None:
    from thinkgate.testing.vocabularies import FORMAT_VOCABULARY
    for fmt in list_tool_formats():
        p = Parser(vocab(FORMAT_VOCABULARY[fmt]), None, fmt)
        assert p.tool_format is not None and p.tool_format.name == fmt


# -- requests ----------------------------------------------------------------------------------------

def test_bad_requests_are_refused_naming_the_cause_and_other_requests_go_on() -> None:
    p = qwen()
    good = p.request(tools=TOOLS)
    with pytest.raises(ValueError):
        p.request(tools=[{"type": "function", "function": {"name": 3}}])
    with pytest.raises(ValueError, match="include_reasoning"):
        p.request(include_reasoning="no")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="prompt_token_ids"):
        p.request(prompt_token_ids=[10**9])
    with pytest.raises(ValueError, match="no tool format"):
        Parser(vocab("qwen3_6"), "qwen3").request(tools=TOOLS)
    with pytest.raises(ValueError, match="no tool format"):
        Parser(vocab("qwen3_6"), "qwen3").request(tool_choice="required")
    with pytest.raises(ValueError, match="required"):
        p.request(tools=[], tool_choice="required")
    with pytest.raises(ValueError, match="nope"):
        p.request(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "nope"}})
    req = p.request(tools=TOOLS)
    with pytest.raises(ValueError, match="delta_ids"):
        req.parse_delta([-1])
    with pytest.raises(ValueError, match="delta_ids"):
        req.parse_delta("abc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="finish_reason"):
        req.parse([1], finish_reason="")
    # the bad deltas changed nothing: the same request still streams, and other requests are untouched
    ids = p.vocabulary.encode("</think>\n\n" + render("qwen3_6", WEATHER))
    deltas = [req.parse_delta([t]) for t in ids]
    end = req.finish()
    assert end.finish_reason == "tool_calls"
    names = [c["function"]["name"] for d in deltas + [end.delta] if d for c in d.get("tool_calls", [])]
    assert names == ["get_weather"]
    with pytest.raises(ValueError, match="finished"):
        req.parse_delta([1])
    assert good.parse(ids).tool_calls[0].name == "get_weather"


def test_tool_choice_none_and_no_tools_read_no_calls() -> None:
    p = qwen()
    ids = p.vocabulary.encode("</think>\n\n" + render("qwen3_6", WEATHER))
    for req in (p.request(), p.request(tools=TOOLS, tool_choice="none")):
        r = req.parse(ids)
        assert r.tool_calls == () and r.finish_reason == "stop"
        assert "<function=get_weather>" in (r.content or "")


# -- whole output ------------------------------------------------------------------------------------

def test_whole_parse_gives_the_openai_message_finish_reason_and_usage() -> None:
    p = qwen()
    fam = FAMILIES["qwen3_6"]
    prompt = p.vocabulary.encode(fam.prompt)
    ids = p.vocabulary.encode(fam.thinking + render("qwen3_6", WEATHER, "Let me look."))
    r = p.request(tools=TOOLS, prompt_token_ids=prompt).parse(ids)
    out = r.to_openai()
    assert out["finish_reason"] == "tool_calls"
    msg = out["message"]
    assert msg["role"] == "assistant" and msg["content"] == "Let me look."
    assert msg["reasoning"] == fam.thinking.split("</think>")[0]
    [call] = msg["tool_calls"]
    assert call["type"] == "function"
    assert call["function"] == {"name": "get_weather", "arguments": '{"location": "Paris"}'}
    think_ids = p.vocabulary.encode(fam.thinking.split("</think>")[0])
    assert out["usage"] == {"completion_tokens": len(ids),
                            "completion_tokens_details": {"reasoning_tokens": len(think_ids)}}
    # max_tokens cut the call: finish_reason stays length, the cut call is content
    cut = p.request(tools=TOOLS, prompt_token_ids=prompt).parse(ids[:-4], finish_reason="length")
    assert cut.finish_reason == "length" and cut.tool_calls == ()
    assert "<function=get_weather>" in (cut.content or "")


def test_no_reasoning_parser_and_no_format_gives_all_text_as_content() -> None:
    p = Parser(vocab("qwen3_6"))
    ids = p.vocabulary.encode("plain answer ✓")
    r = p.request().parse(ids)
    assert (r.reasoning, r.content, r.tool_calls, r.reasoning_tokens) == (None, "plain answer ✓", (), 0)
    req = p.request()
    text = "".join((req.parse_delta([t]) or {}).get("content", "") for t in ids) + \
        ((req.finish().delta or {}).get("content") or "")
    assert text == "plain answer ✓"


# -- work per delta ----------------------------------------------------------------------------------

def _work_per_char(fmt: str, vocab_name: str, n: int) -> tuple[float, int]:
    """(characters examined per character of output, the most examined by one delta) for a stream of
    ``n`` repetitions of content, one call, and content again, fed one token per delta."""
    v = vocab(vocab_name)
    call = render(fmt, WEATHER)
    before, after = "Some words < and > text. " * n, " more [text] {here}. " * n
    if fmt == "openai":  # harmony: content is a message's body (text outside one is a header); a call ends
        before = f"<|channel|>commentary<|message|>{before}<|end|><|start|>assistant"  # the turn
        after = "<|call|>"
    text = before + call + after
    ids = v.encode(text)
    reader = get_tool_reader(fmt, TOOLS, "auto")
    dec, s = MarkedDecoder(v), reader.stream(v)
    most = last = 0
    for t in ids:
        s.feed(dec.feed([t]))
        most, last = max(most, s.scanned - last), s.scanned
    s.finish()
    return s.scanned / len(text), most


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_6", "deepseek_v4", "mistral", "llama3_json", "kimi_k2",
                                 "gemma4", "openai"])
def test_stream_work_grows_with_the_deltas_not_with_the_output_so_far(fmt: str) -> None:
    from thinkgate.testing.vocabularies import FORMAT_VOCABULARY
    small, small_most = _work_per_char(fmt, FORMAT_VOCABULARY[fmt], 50)
    large, large_most = _work_per_char(fmt, FORMAT_VOCABULARY[fmt], 2000)
    # the characters examined per character of output do not grow with the output (a quadratic reader
    # would examine 40x more per character at 40x the length), and no delta examines more than the call
    assert large < small * 1.5 + 1
    assert large_most <= small_most + 8


HOSTILE_RUNS = [  # (format, a unit repeated many times in ONE delta: calls that never read, or never end)
    ("hermes", "<tool_call>x</tool_call> "),
    ("hermes", "<tool_call>x "),
    ("mistral", "[TOOL_CALLS]x}{} "),
    ("mistral", "[TOOL_CALLS]x{ "),
    ("llama3_json", '{"name": "x'),
    ("deepseek_v4", "<｜DSML｜tool_calls>x</｜DSML｜tool_calls> "),
    ("kimi_k2", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{"),
    ("openai", "<|channel|>final<|message|>hi<|end|>"),
    ("openai", "<|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{"),
]


@pytest.mark.parametrize("fmt,unit", HOSTILE_RUNS)
def test_a_run_of_broken_calls_in_one_delta_costs_linear_work_and_stays_content(fmt: str, unit: str) -> None:
    from thinkgate.testing.vocabularies import FORMAT_VOCABULARY
    v = vocab(FORMAT_VOCABULARY[fmt])
    work = []
    for k in (200, 800):
        ids = v.encode(unit * k)
        reader = get_tool_reader(fmt, TOOLS, "auto")
        whole = reader.read_ids(ids, v)
        dec, s = MarkedDecoder(v), reader.stream(v)
        d1 = s.feed(dec.feed(ids))
        d2 = s.finish()
        assert d1.content + d2.content == (whole.content or "")
        assert d1.calls + d2.calls == whole.calls == ()
        work.append(s.scanned / len(whole.content or "x"))
    assert work[1] < work[0] * 1.5 + 1  # per character: flat (quadratic work would be 4x at 4x the length)
