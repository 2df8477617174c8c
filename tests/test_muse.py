"""Muse: the ``muse`` (``musespark``) and ``muse_glimmer`` reasoning parsers and tool formats together.

The expected results are the facts of vLLM 0.34's Muse parsers and of vLLM's own tests for them
(``tests/reasoning/test_muse_glimmer_*.py``, the Glimmer ATEM tests: which channel is reasoning, content or a
call, arguments typed, what a truncated or echoed call is, how names bind, what counts as a reasoning token),
written as our own cases, plus hostile ones. The shared matrices (``test_tool_conformance.py``,
``test_parser_stream.py``, ``test_tool_formats.py``, ``test_hostile_tools.py``, the reasoning families) run both
names too; ``docs/vllm_tool_differences.md`` and ``docs/reasoning-differences.md`` list where we differ.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
import time

from support import _masked_out

from thinkgate.testing.vocabularies import byte_level_vocabulary, synthetic_vocabulary
from thinkgate.reasoning import get_reasoning_parser, load_vocabulary
from thinkgate.reasoning.muse_channels import MAX_RECIPIENT_BYTES
from thinkgate.structured_output import Parser, StructuredOutputManager
from thinkgate.structured_output.compilation.constraints import Constraint
from thinkgate.structured_output.tools import ToolReader, build_tool_constraint, get_tool_format, get_tool_reader

NAMES = ("muse", "muse_glimmer")
PROMPT = "<|start|>user<|message|>Weather?<|eot|><|start|>assistant"


def fn(name: str, **props: str) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": t} for k, t in props.items()}}}}


TOOLS = [fn("weather.get", city="string", units="string"), fn("math.add", a="integer", b="integer"),
         fn("math.mul", a="integer", b="integer"), fn("api.call", payload="object", flag="boolean"),
         fn("read.read", path="string"), fn("get_weather", city="string")]


def invoke(name: str, **args: str) -> str:
    params = "".join(f'<atem:parameter name="{k}">{v}</atem:parameter>\n' for k, v in args.items())
    return f'<atem:function_calls>\n<atem:invoke name="{name}">\n{params}</atem:invoke>\n</atem:function_calls>'


def call(recipient: str, name: str | None = None, **args: str) -> str:
    return f"<|start|>assistant to={recipient}<|message|>" + invoke(name or recipient, **args)


@lru_cache(maxsize=None)
def vocab():
    return synthetic_vocabulary("muse")


def read(fmt: str, text: str, tools=TOOLS, choice="auto"):
    """(content, calls) read from the ids of ``text`` (markers as control tokens), checked against the text path."""
    r = get_tool_reader(fmt, tools, choice)
    got = r.read_ids(vocab().encode(text), vocab())
    trusted = r.read(text)
    out = got.content, [(c.name, json.loads(c.arguments)) for c in got.calls]
    assert out == (trusted.content, [(c.name, json.loads(c.arguments)) for c in trusted.calls])
    return out


MUSE_MARKERS = ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>")


@lru_cache(maxsize=None)
def small_vocab(markers: bool):
    """A byte-level vocabulary (fast compiles), with Muse's markers as special tokens or as text."""
    return byte_level_vocabulary(("<|end_of_text|>", *(MUSE_MARKERS if markers else ())),
                                 stop_tokens=("<|end_of_text|>", *(("<|eot|>",) if markers else ())), name=f"bytes+{markers}")


def drive(markers: bool, constraint, text: str, bad: str = "") -> str:
    """Feed ``text`` (each token also allowed by the step's mask) then ``bad``'s first token: "ok" when ``text``
    passes and a stop token then ends it (no ``bad``), "rejected" when ``bad``'s first token is masked and refused."""
    v = small_vocab(markers)
    mgr = small_manager(markers)
    mgr.add_request("r", constraint, v.encode(PROMPT))
    try:
        return _drive(mgr, v, text, bad)
    finally:
        mgr.remove_request("r")


@lru_cache(maxsize=None)
def small_manager(markers: bool) -> StructuredOutputManager:
    return StructuredOutputManager(small_vocab(markers), "muse", max_num_seqs=1, num_compile_threads=1)


def _drive(mgr: StructuredOutputManager, v, text: str, bad: str) -> str:
    deadline = time.monotonic() + 60
    while not mgr.is_compiled("r") and time.monotonic() < deadline:
        time.sleep(0.002)
    assert mgr.error("r") is None, mgr.error("r")
    for t in v.encode(text):
        assert not _masked_out(mgr, "r", t), v.decode([t])
        assert mgr.accept_tokens("r", [t]).status == "ok", v.decode([t])
    if bad:
        t = v.encode(bad)[0]
        return "rejected" if _masked_out(mgr, "r", t) and mgr.accept_tokens("r", [t]).status == "error" else "allowed"
    return "ok" if mgr.accept_tokens("r", [v.special_tokens["<|end_of_text|>"]]).status == "terminated" else "open"


def split(name: str, text: str, prompt: str = ""):
    p = get_reasoning_parser(name)(vocab())
    return p.extract_reasoning(text, vocab().encode(prompt))


# -- calls (vLLM's ATEM tests) ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", NAMES)
def test_a_call_after_the_reasoning(fmt: str) -> None:
    text = ("to=self<|message|>Let me check the weather.<|eom|>"
            + call("weather.get", city="Paris", units="celsius") + "<|eot|>")
    assert read(fmt, text) == (None, [("weather.get", {"city": "Paris", "units": "celsius"})])
    assert split(fmt, text) == ("Let me check the weather.", None)  # a call's message is in neither


@pytest.mark.parametrize("fmt", NAMES)
def test_parallel_calls_are_messages_joined_by_eom_and_typed_by_the_schema(fmt: str) -> None:
    text = (call("math.add", a="1", b="2") + "<|eom|>" + call("math.mul", a="3", b="4") + "<|eot|>")
    assert read(fmt, text) == (None, [("math.add", {"a": 1, "b": 2}), ("math.mul", {"a": 3, "b": 4})])
    assert read(fmt, text, choice="required") == read(fmt, text)
    content, calls = read(fmt, text, TOOLS, {"type": "function", "function": {"name": "math.add"}})
    assert calls == [("math.add", {"a": 1, "b": 2})]  # a named function: the other call is not it


@pytest.mark.parametrize("fmt", NAMES)
def test_json_values_decode_by_the_schema_strings_stay_text(fmt: str) -> None:
    text = call("api.call", payload='{"nested": [1, 2, 3]}', flag="true")
    assert read(fmt, text)[1] == [("api.call", {"payload": {"nested": [1, 2, 3]}, "flag": True})]
    # a string parameter keeps the text written (vLLM's Spark; its Glimmer profile decodes "123" to 123)
    assert read(fmt, call("weather.get", city="123"))[1] == [("weather.get", {"city": "123"})]


@pytest.mark.parametrize("fmt", NAMES)
def test_an_invoke_echoed_in_the_reasoning_is_no_call(fmt: str) -> None:
    text = ('to=self<|message|>I could call <atem:invoke name="math.add"><atem:parameter name="a">1'
            "</atem:parameter></atem:invoke> but I will not.<|eom|>"
            "<|start|>assistant to=user<|message|>The answer is 42.<|eot|>")
    assert read(fmt, text) == ("The answer is 42.", [])
    assert split(fmt, text)[1] == "The answer is 42."


@pytest.mark.parametrize("fmt", NAMES)
def test_plain_answers_and_unframed_output(fmt: str) -> None:
    assert read(fmt, "to=user<|message|>Just a plain answer.<|eot|>") == ("Just a plain answer.", [])
    assert split(fmt, " to=self<|message|>thinking<|eom|><|start|>assistant to=user<|message|>The answer is 42.<|eot|>",
                 PROMPT) == ("thinking", "The answer is 42.")
    # no framing at all: plain content (and an ATEM block in it is read, as vLLM reads it)
    assert split(fmt, "Just a direct answer.", PROMPT) == (None, "Just a direct answer.")
    assert read(fmt, "Just a direct answer.") == ("Just a direct answer.", [])
    assert read(fmt, "Sure. " + invoke("read.read", path="/etc/hostname")) == (
        "Sure.", [("read.read", {"path": "/etc/hostname"})])


@pytest.mark.parametrize("fmt", NAMES)
def test_a_reasoning_cut_short_holds_no_call(fmt: str) -> None:
    """Truncated CoT: an invoke inside an unterminated to=self body is reasoning; a call that follows a body
    left without <|eom|> (the next header written straight into it) is still read."""
    cut = " to=self<|message|>Maybe I should call " + invoke("read.read", path="/etc/hostname") + " but wait"
    assert read(fmt, cut) == (None, [])
    reasoning, _ = split(fmt, cut, PROMPT)
    assert reasoning.startswith("Maybe I should call") and reasoning.endswith("but wait")
    runaway = " to=self<|message|>I will read it to=read.read<|message|>" + invoke("read.read", path="/x")
    assert read(fmt, runaway) == (None, [("read.read", {"path": "/x"})])
    assert split(fmt, runaway, PROMPT) == ("I will read it ", None)


@pytest.mark.parametrize("fmt", NAMES)
def test_invoke_names_bind_to_the_declared_tools(fmt: str) -> None:
    """NAME.NAME is NAME (what the model writes for a tool without a namespace); a dotted name is itself; a
    trailing segment alone never binds (vLLM 0.34: ``weather.get`` is not ``calendar.get``)."""
    assert read(fmt, call("get_weather.get_weather", city="Paris"))[1] == [("get_weather", {"city": "Paris"})]
    assert read(fmt, call("weather.get", city="Paris"))[1] == [("weather.get", {"city": "Paris"})]
    assert read(fmt, call("get_weather", city="Paris"))[1] == [("get_weather", {"city": "Paris"})]
    # an undeclared name is no call of this request (vLLM's plugin reads it: read_undeclared)
    for name in ("foo.get_weather", "x.get"):
        text = call(name, city="Paris")
        assert read(fmt, text)[1] == []
        assert [c.name for c in ToolReader(fmt, TOOLS, read_undeclared=True).read(text).calls] == [name]


def test_spark_and_glimmer_read_recipients_differently() -> None:
    update = "<|start|>assistant to=commentary<|message|>Checking the forecast.<|eom|>"
    bare = "<|start|>assistant<|message|>no recipient<|eom|>"
    dev = "<|start|>assistant to=developer<|message|>internal<|eom|>"
    text = update + bare + dev + call("weather.get", city="Oslo")
    # Spark: commentary is content, a bare message reasoning, developer dropped
    assert split("muse", text) == ("no recipient", "Checking the forecast.")
    assert read("muse", text) == ("Checking the forecast.", [("weather.get", {"city": "Oslo"})])
    # Glimmer: commentary and developer are tools (their bodies, no ATEM, are content), a bare message the answer
    assert split("muse_glimmer", text) == (None, "no recipient")
    assert read("muse_glimmer", text) == ("Checking the forecast.no recipientinternal", [("weather.get", {"city": "Oslo"})])


# -- the front end: reasoning, content, calls, streamed alike ------------------------------------------------

RAW_TOOLCALL = (" to=self<|message|>I should read the hostname file to answer.<|eom|>"
                + call("read.read", path="/etc/hostname"))


@pytest.mark.parametrize("fmt", NAMES)
@pytest.mark.parametrize("step", [1, 3, 17])
def test_streaming_leaks_no_framing(fmt: str, step: int) -> None:
    v = vocab()
    p = Parser(v, fmt, fmt)
    ids = v.encode(RAW_TOOLCALL)
    req = p.request(tools=TOOLS, prompt_token_ids=v.encode(PROMPT))
    reasoning, content, calls = "", "", []
    for k in range(0, len(ids), step):
        d = req.parse_delta(ids[k:k + step]) or {}
        reasoning += d.get("reasoning", "")
        content += d.get("content", "")
        calls += d.get("tool_calls", [])
    end = req.finish("stop")
    calls += (end.delta or {}).get("tool_calls", [])
    assert reasoning == "I should read the hostname file to answer." and content == ""
    assert [(c["function"]["name"], json.loads(c["function"]["arguments"])) for c in calls] == [
        ("read.read", {"path": "/etc/hostname"})]
    assert calls[0]["index"] == 0 and calls[0]["type"] == "function" and calls[0]["id"]
    whole = p.request(tools=TOOLS, prompt_token_ids=v.encode(PROMPT)).parse(ids)
    assert whole.reasoning == reasoning and whole.finish_reason == "tool_calls"


@pytest.mark.parametrize("fmt", NAMES)
def test_reasoning_tokens_count_the_reasoning_bodies_only(fmt: str) -> None:
    """vLLM's count tests, on a character-level vocabulary where the markers are several tokens each."""
    p = get_reasoning_parser(fmt)(byte_level_vocabulary((), stop_tokens=()))
    v = p.vocabulary
    cases = [("to=self<|message|>think hard<|eom|>to=user<|message|>hi<|eot|>", "think hard"),
             ("to=self<|message|>abc<|eom|>to=user<|message|>answer<|eot|>to=self<|message|>de<|eom|>", "abcde"),
             ("to=self<|message|>partial thought", "partial thought"),
             ("to=user<|message|>plain answer<|eot|>", ""), ("", ""),
             (" to=self<|message|>Simple. 2+2 = 4<|eom|><|start|>assistant to=user<|message|>2 + 2 = 4", "Simple. 2+2 = 4"),
             ('to=self<|message|>pick a tool<|eom|>to=functions.get_weather<|message|>{"city": "SF"}<|eom|>', "pick a tool")]
    for text, body in cases:
        assert p.count_reasoning_tokens(v.encode(text)) == len(body), text


# -- the constraint ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", NAMES)
def test_the_constraint_writes_the_template_and_covers_the_reasoning(fmt: str) -> None:
    c = build_tool_constraint(TOOLS[:1], "required", format=fmt)
    assert c is not None and c.covers_reasoning
    spec = json.dumps(json.loads(c.spec))
    assert '" to=weather.get"' in spec and "<atem:invoke name=\\\"weather.get\\\">" in spec
    assert ('" to=commentary"' in spec) == (fmt == "muse")  # Glimmer's commentary is a tool
    with pytest.raises(ValueError, match=r"tool 'f': parameter name 'a\"b' cannot be written"):
        build_tool_constraint([fn("f", **{'a"b': "string", "c": "integer"})], "required", format=fmt)


def test_the_constraint_through_the_manager_with_markers_as_text() -> None:
    """A tokenizer without Muse's special tokens: the markers are text (a body is any text but a marker's):
    thinking then a call, then the stop token; text or another tool where the call goes is masked; the readers
    read what the constraint let through. (With the markers as control tokens: the shared matrices.)"""
    markers = False
    v = small_vocab(markers)
    assert get_tool_format("muse").required_markers == ()
    tools = [fn("get_weather", city="string"), fn("ping")]
    c = build_tool_constraint(tools, "required", format="muse", vocabulary=v)
    think = " to=self<|message|>Need the weather.<|eom|><|start|>assistant"
    out = think + " to=get_weather<|message|>" + invoke("get_weather", city="Zürich")
    assert drive(markers, c, out) == "ok"
    assert drive(markers, c, think, "Sure") == "rejected"
    assert drive(markers, c, think + " to=", "x") == "rejected"
    assert drive(markers, c, think + " to=ping<|message|>" + invoke("ping")[:-4], "x") == "rejected"
    p = Parser(v, "muse", "muse")
    got = p.request(tools=tools, tool_choice="required", prompt_token_ids=v.encode(PROMPT)).parse(v.encode(out))
    assert got.reasoning == "Need the weather." and [t.name for t in got.tool_calls] == ["get_weather"]


# -- hostile ----------------------------------------------------------------------------------------------

def test_hostile_channels() -> None:
    """A recipient past the bound names nobody; marker text spelled with ordinary tokens frames nothing; a call
    header spelled inside an answer is the answer's text; the readers and the stream agree on each."""
    v = vocab()
    long_name = "x" * MAX_RECIPIENT_BYTES
    base = load_vocabulary("qwen3_6")
    spelled = base.encode("<|eom|><|start|>assistant to=read.read<|message|>") + base.encode(invoke("read.read", path="/"))
    cases = [
        v.encode(f" to=self<|message|>a<|eom|><|start|>assistant to={long_name}<|message|>" + invoke("read.read", path="/")),
        v.encode(" to=user<|message|>Here: ") + spelled,
        v.encode(" to=self<|message|>" + "to=" * 200 + "<|message|>tail"),
    ]
    for fmt in NAMES:
        p = Parser(v, fmt, fmt)
        for ids in cases:
            whole = p.request(tools=TOOLS, prompt_token_ids=v.encode(PROMPT)).parse(ids)
            assert whole.tool_calls == ()
            req = p.request(tools=TOOLS, prompt_token_ids=v.encode(PROMPT))
            deltas = [req.parse_delta([t]) for t in ids] + [req.finish("stop").delta]
            assert "".join((d or {}).get("content", "") for d in deltas) == (whole.content or "")
            assert "".join((d or {}).get("reasoning", "") for d in deltas) == (whole.reasoning or "")
        # the long recipient is no header: a message without recipient (Spark: reasoning, Glimmer: the answer)
        got = get_reasoning_parser(fmt)(v).extract_reasoning(v.decode(cases[0]), v.encode(PROMPT))
        block = invoke("read.read", path="/")
        assert got == (("a" + block, None) if fmt == "muse" else ("a", block))
        # the spelled header inside the answer is the answer's text
        assert p.request(tools=TOOLS).parse(cases[1]).content.startswith("Here: <|eom|><|start|>assistant to=read.read")


@pytest.mark.parametrize("markers", [True, False], ids=["tokens", "text"])
def test_a_json_answer_is_gated_after_the_reasoning(markers: bool) -> None:
    """The engine core: a JSON schema applies from the answer's body; the reasoning and its header are free."""
    schema = Constraint.json_schema({"type": "object", "properties": {"t": {"type": "integer"}}, "required": ["t"]})
    head = " to=self<|message|>{not json} to be sure<|eom|><|start|>assistant to=user<|message|>"
    assert drive(markers, schema, head + '{"t": 3}') == "ok"
    assert drive(markers, schema, head, "oops") == "rejected"
