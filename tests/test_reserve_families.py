"""Answer reservation beyond one-token ends and JSON schemas (structured_output/step/reserve.py): families whose
forced end of thinking spans several tokens (harmony's channel switch, Granite's "Here is my response:",
Hunyuan's ``</think>\\n<answer>``), and tool calls (``tool_choice`` required / named) whose format starts with a
control token (Qwen3.6's ``<tool_call>``, DeepSeek V4's DSML block). A stand-in model that never stops thinking
still ends with a valid answer from the smallest ``max_tokens`` the reservation accepts upwards, within it; one
position fewer fails that request with a ``ReservationError``. A tool constraint whose keys come in any order
(checked after the fact) is refused with a clear error.
"""

from __future__ import annotations

import json
import random
import time

import jsonschema
import pytest

from thinkgate.reasoning.vocabulary import load_vocabulary
from thinkgate.structured_output import Constraint, RequestStatus, StructuredOutputManager
from thinkgate.structured_output.step.reserve import ReservationError
from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader
from thinkgate.testing.standin import run_stand_in
from thinkgate.testing.vocabularies import synthetic_vocabulary
from thinkgate.testing.workload import SCHEMAS

_VOCABS: dict = {}


def _vocab(name):
    if name not in _VOCABS:
        _VOCABS[name] = synthetic_vocabulary(name) if name == "harmony" else load_vocabulary(name)
    return _VOCABS[name]


def _ready(mgr, rid):
    t0 = time.monotonic()
    while not mgr.is_ready(rid):
        assert time.monotonic() - t0 < 120
        time.sleep(0.002)


def _fits(mgr, rid, constraint, prompt, n, **kw) -> bool:
    """Whether add_request takes max_tokens=n: a ReservationError at once (compile and start search known), or
    the request in ERROR with it as its cause once they are."""
    try:
        mgr.add_request(rid, constraint, prompt, max_tokens=n, reserve_answer=True, **kw)
    except ReservationError:
        assert rid not in mgr
        return False
    _ready(mgr, rid)
    ok = mgr.status(rid) is not RequestStatus.ERROR
    if not ok:
        assert isinstance(mgr._requests[rid].cause, ReservationError), mgr.error(rid)
    mgr.remove_request(rid)
    return ok


def _smallest(mgr, rid, constraint, prompt, **kw) -> int:
    """The smallest max_tokens the reservation takes (a bisection: the start search is shared per constraint)."""
    lo, hi = 1, 400
    assert _fits(mgr, rid, constraint, prompt, hi, **kw)
    while lo < hi:
        mid = (lo + hi) // 2
        if _fits(mgr, rid, constraint, prompt, mid, **kw):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _runs(mgr, rid, constraint, prompt, think, **kw):
    """(max_tokens, output tokens) from the smallest accepted budget upwards, each run terminated within it."""
    n0 = _smallest(mgr, rid, constraint, prompt, **kw)
    assert n0 > 1 and not _fits(mgr, rid, constraint, prompt, n0 - 1, **kw)
    for n in (n0, n0 + 1, n0 + 5, n0 + 30):
        mgr.add_request(rid, constraint, prompt, max_tokens=n, reserve_answer=True, **kw)
        _ready(mgr, rid)
        run = run_stand_in(mgr, rid, n, think_token=think, rng=random.Random(n))
        assert run.status == "terminated", (n, run.message)
        assert len(run.tokens) <= n
        mgr.remove_request(rid)
        yield n, run.tokens


# (reasoning parser, vocabulary, prompt (thinking open), the forced end of thinking, chat template kwargs)
MULTI = [
    ("openai_gptoss", "harmony", "<|start|>user<|message|>Who?<|end|><|start|>assistant<|channel|>analysis<|message|>",
     "<|channel|>final<|message|>", {}),
    ("granite", "qwen3_6", "<|im_start|>assistant\nHere is my thought process:\n", "Here is my response:",
     {"thinking": True}),
    ("hunyuan_a13b", "qwen3_6", "<|startoftext|>Who?<|extra_0|><think>\n", "</think>\n<answer>", {}),
]


@pytest.mark.parametrize("parser, vname, prompt, marker, kwargs", MULTI, ids=[m[0] for m in MULTI])
def test_multi_token_end_of_thinking(parser, vname, prompt, marker, kwargs):
    v = _vocab(vname)
    schema = SCHEMAS[1][0]
    c = Constraint.json_schema(schema)
    think = v.encode(" hmm")[0]
    with StructuredOutputManager(v, parser, max_num_seqs=2) as mgr:
        forced = None
        for n, tokens in _runs(mgr, "r", c, v.encode(prompt), think, chat_template_kwargs=kwargs):
            text = v.decode([t for t in tokens if t not in v.stop_token_ids])
            assert marker in text, (n, text[-120:])
            jsonschema.validate(json.loads(text.split(marker, 1)[1]), schema)
            forced = forced or n
        assert forced is not None


_TOOL_SET = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add_todo", "parameters": {
        "type": "object", "properties": {"title": {"type": "string", "minLength": 3},
                                         "priority": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["title", "priority"], "additionalProperties": False}}},
]

# strings without length bounds: a raw XML / DSML string value does not enforce minLength / maxLength
# (docs/limits.md), and a strict tool's reader refuses a call that breaks them
_RAW_TOOL_SET = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add_todo", "parameters": {
        "type": "object", "properties": {"title": {"type": "string"}, "note": {"type": "string"},
                                         "priority": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["title", "note", "priority"], "additionalProperties": False}}},
]

# no string parameter: enums, integers, booleans
_TYPED_TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"unit": {"enum": ["celsius", "fahrenheit"]},
                                         "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["unit", "days"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add_todo", "parameters": {
        "type": "object", "properties": {"priority": {"type": "integer", "minimum": 1, "maximum": 5},
                                         "done": {"type": "boolean"}},
        "required": ["priority", "done"], "additionalProperties": False}}},
]

_QWEN = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"

# (tool format, vocabulary, reasoning parser, prompt, tools)
_DS = "<｜User｜>hi<｜Assistant｜><think>"
# the XML and DSML formats write a string parameter as raw text ended by a closing tag (the search tries the
# grammar's closers, shortest.py)
TOOLS = [
    ("hermes", "qwen3_6", "qwen3", _QWEN, _TOOL_SET),
    ("qwen3_6", "qwen3_6", "qwen3", _QWEN, _RAW_TOOL_SET),
    ("qwen3_6", "qwen3_6", "qwen3", _QWEN, _TYPED_TOOLS),
    ("qwen3_coder", "qwen3_6", "qwen3", _QWEN, _RAW_TOOL_SET),
    ("deepseek_v4", "deepseek_v4", "deepseek_v4", _DS, _RAW_TOOL_SET),
    ("deepseek_v4", "deepseek_v4", "deepseek_v4", _DS, _TYPED_TOOLS),
]


@pytest.mark.parametrize("fmt, vname, parser, prompt, tool_set", TOOLS,
                         ids=[t[0] + ("-typed" if t[4] is _TYPED_TOOLS else "") for t in TOOLS])
@pytest.mark.parametrize("choice", ["required", "named"])
def test_tool_calls_are_reserved(fmt, vname, parser, prompt, tool_set, choice):
    v = _vocab(vname)
    tools = [dict(t, function=dict(t["function"], strict=True)) for t in tool_set]
    tc = "required" if choice == "required" else {"type": "function", "function": {"name": "add_todo"}}
    c = build_tool_constraint(tools, tc, format=fmt, parallel_tool_calls=False, vocabulary=v, key_order="schema")
    reader = get_tool_reader(fmt, tools, tc, parallel_tool_calls=False)
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
    kwargs = {"thinking": True} if parser == "deepseek_v4" else {}
    with StructuredOutputManager(v, parser, max_num_seqs=2) as mgr:
        for n, tokens in _runs(mgr, "t", c, v.encode(prompt), v.encode(" hmm")[0], chat_template_kwargs=kwargs):
            text = v.decode([t for t in tokens if t not in v.stop_token_ids])
            answer = text.split("</think>", 1)[1]
            calls = list(reader.read(answer).calls)
            assert len(calls) == 1, (n, answer)
            if choice == "named":
                assert calls[0].name == "add_todo"
            jsonschema.validate(json.loads(calls[0].arguments), schemas[calls[0].name])


def test_tools_with_keys_in_any_order_are_refused_clearly():
    v = _vocab("qwen3_6")
    tools = [dict(t, function=dict(t["function"], strict=True)) for t in _TOOL_SET]
    c = build_tool_constraint(tools, "required", format="qwen3_6", parallel_tool_calls=False, vocabulary=v)
    with StructuredOutputManager(v, "qwen3", max_num_seqs=2) as mgr:
        with pytest.raises(ValueError, match='key_order="schema"'):
            mgr.add_request("k", c, v.encode(_QWEN), max_tokens=200, reserve_answer=True)
        assert "k" not in mgr
        mgr.add_request("k", c, v.encode(_QWEN), max_tokens=200)  # without reservation: as before
        assert "k" in mgr


def test_a_grammar_the_search_cannot_complete_fails_that_request_fast():
    """In free text the byte-level search tries a few bytes, the grammar's closers and the printable ASCII bytes
    that change the state, never a UTF-8 character no candidate begins (docs/limits.md): ``[a-zé]*é`` is not
    completed. Such a request fails alone, with a ReservationError, in seconds (the search's budget of tries),
    not at the compile deadline."""
    v = _vocab("qwen3_6")
    c = Constraint.regex("[a-zé]*é")
    ok = Constraint.json_schema(SCHEMAS[1][0])
    with StructuredOutputManager(v, "qwen3", max_num_seqs=2, compile_timeout_s=120) as mgr:
        mgr.add_request("ok", ok, v.encode(_QWEN), max_tokens=200, reserve_answer=True)
        t0 = time.monotonic()
        mgr.add_request("x", c, v.encode(_QWEN), max_tokens=400, reserve_answer=True)
        _ready(mgr, "x")
        assert time.monotonic() - t0 < 60
        assert mgr.status("x") is RequestStatus.ERROR
        assert isinstance(mgr._requests["x"].cause, ReservationError), mgr.error("x")
        assert "no complete output" in mgr.error("x")
        _ready(mgr, "ok")
        run = run_stand_in(mgr, "ok", 200, think_token=v.encode(" hmm")[0], rng=random.Random(0))
        assert run.status == "terminated"
