"""vLLM 0.34's own tool parsers beside thinkgate's plugin parsers (``thinkgate_<name>``), for the pythonic group.

For each name (pythonic, llama4_pythonic, olmo3, lfm2, functiongemma, gigachat3, apertus, llama4_json) the same
outputs go through vLLM's serving ``Parser`` composed with vLLM's built-in tool parser of that name and with
``thinkgate_<name>``, whole (``parse``) and streamed token by token (``parse_delta``), ``tool_choice="auto"``.
The outputs: the model's template writing calls (``template_render.py``), the variations models write
(whitespace, compact, unicode, escapes, empty and nested arguments, text around the calls, cut outputs) and
the inputs of vLLM's own tests for these parsers (tests/tool_parsers/test_<name>_tool_parser.py, read for
their facts). Answers are compared as calls (name, arguments as JSON values) and content (whitespace-
normalised). Each case names the kind of difference it must show (``same`` unless the table says
otherwise); a difference that is not the one declared fails. The kinds, with their reasons:

- ``same``: the same calls and content;
- ``content-newlines`` (convention): the same calls, content equal but for whitespace (vLLM's whole LFM2
  answer joins the text before and after the block with a newline, its stream does not; Apertus's stream
  keeps the space before the block; thinkgate keeps the text as written, stripped);
- ``leading-space`` (thinkgate generous): a whole-output call list after whitespace; vLLM's parser matches
  its list only at the first character (its regex ``match``), thinkgate strips first;
- ``text-around-calls`` (vLLM drops text): Olmo 3: vLLM returns no content once it reads calls (the text
  before ``<function_calls>`` is lost); FunctionGemma: its whole answer loses the text after the last call
  (its stream keeps it);
- ``positional-arguments`` (thinkgate strict): ``f('Paris')``: vLLM's stream drops positional arguments
  silently and sends the call with ``{}``; thinkgate keeps such a call as content (its arguments would be wrong);
- ``repeated-keyword`` (thinkgate strict): ``f(city='a', city='b')`` (Python's parser takes it; its compiler
  would not): vLLM keeps the last value (its stream the first); thinkgate keeps the call as content;
- ``non-finite`` (thinkgate strict): ``x=1e999``: vLLM returns ``Infinity`` in the arguments, which no JSON
  parser reads; thinkgate keeps the call as content;
- ``lfm2-repair`` (vLLM generous): vLLM's LFM2 parser rewrites Python it cannot parse (a raw line break or
  a leading-zero integer) before parsing; thinkgate reads what Python reads;
- ``lfm2-echo`` (vLLM generous): text after the block that ends with a second ``<|tool_call_end|>`` (LFM2
  echoing its call) is dropped by vLLM; thinkgate keeps it as content;
- ``vllm-misses-calls`` (vLLM's bug): ``[tools.get_time()]``: vLLM's whole parse refuses a dotted name (its
  regex), its stream reads it; thinkgate reads it on both paths (the plugin reads undeclared tools);
- ``vllm-stream-differs``: vLLM's own stream disagrees with its whole answer (its bug), thinkgate's does not:
  it sends a call its whole parse does not read (a call list followed by text, a dotted name its whole
  parse's regex refuses (above), a call cut by the end of the output, sent as far as it got), or drops the text
  of a list its whole parse keeps as content; Olmo 3's stream reads calls only after a ``<`` (its
  whole parse also reads bare call lines).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from support import FAMILIES, detokenizer, vocab
from template_render import render
from tool_serving import Message, chat_request, parser_cls, streamed, tokenizer, whole

import thinkgate.engines.vllm.tool_parsers  # noqa: F401  (registers thinkgate_<format>)


def _fn(name: str, props: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props}}}


TOOLS = [
    _fn("get_weather", {"city": {"type": "string"}, "metric": {"type": "string"}}),
    _fn("register_user", {"name": {"type": "string"}, "age": {"type": "integer"}, "address": {"type": "object"},
                          "role": {"type": ["string", "null"]}, "passed_test": {"type": "boolean"},
                          "aliases": {"type": "array"}}),
    _fn("get_time", {}),
    _fn("do_something_cool", {"additional_data": {"type": "object"}, "steps": {"type": "array"}}),
]

SIMPLE = "get_weather(city='San Francisco', metric='celsius')"
MORE = ("register_user(name='John Doe', age=37, address={'city': 'San Francisco', 'state': 'CA'}, role=None, "
        "passed_test=True, aliases=['John', 'Johnny'])")
MORE_JSON = MORE.replace("role=None", "role=null").replace("passed_test=True", "passed_test=true")
ESCAPED = r"""get_weather(city='Martha\'s Vineyard', metric='\"cool units\"')"""
T_CALLS = [("get_weather", {"city": "Zürich", "metric": "celsius"}),
           ("register_user", {"name": "Ann", "age": 3, "aliases": ["a"], "passed_test": False, "role": None})]
T_ONE = [("get_weather", {"city": "北京 ✓", "metric": "celsius"})]
GIGA = json.dumps({"name": "get_weather", "arguments": {"city": "Paris"}})

# name -> [(output, kind of the whole answers, kind of the streamed answers or None: the same)]
CASES: dict[str, list[tuple[str, str, str | None]]] = {
    "pythonic": [
        (render("pythonic", T_CALLS), "same", None),
        (render("pythonic", T_ONE), "same", None),
        (f"[{SIMPLE}]", "same", None), (f"[{MORE}]", "same", None), (f"[{ESCAPED}]", "same", None),
        (f"[{SIMPLE}, {MORE}]", "same", None), (f"[{SIMPLE},{MORE}]", "same", None),
        ("[get_time()]", "same", None), ("[do_something_cool(additional_data={}, steps=[])]", "same", None),
        ("[get_weather(city='Paris')]\n", "same", None), ("How can I help you today?", "same", None),
        ("Sure: [get_time()]", "same", None), ("[get_time()] and then", "same", "vllm-stream-differs"),
        (f"[{MORE_JSON}]", "same", None), ("[tools.get_time()]", "vllm-misses-calls", "same"),
        ("[get_weather(city='a', city='b')]", "repeated-keyword", None),
        ("[bad(x=b'z'), get_time()]", "same", "vllm-stream-differs"),
        (" [get_time()]", "leading-space", None),
        ("[get_weather('Paris')]", "same", "positional-arguments"),
        ("[get_weather(city=1e999)]", "non-finite", None),
        ("[get_weather(city='Par", "same", "vllm-stream-differs"),
    ],
    "llama4_pythonic": [
        (render("llama4_pythonic", T_CALLS), "same", None),
        (f"[{SIMPLE}, {MORE}]", "same", None), ("[get_time()]", "same", None),
        ("<|python_start|>[get_weather(city=\"Vancouver\")]<|python_end|>", "same", None),
        ("<|python_start|>[get_time()]", "same", None),
        ("How can I help you today?", "same", None), ("[get_weather(city='Par", "same", "vllm-stream-differs"),
    ],
    "olmo3": [
        (render("olmo3", T_CALLS), "same", None),
        (f"<function_calls>{SIMPLE}</function_calls>", "same", None),
        (f"<function_calls>{MORE}</function_calls>", "same", None),
        (f"<function_calls>{MORE_JSON}</function_calls>", "same", None),
        (f"<function_calls>{ESCAPED}</function_calls>", "same", None),
        (f"<function_calls>{SIMPLE}\n{MORE}</function_calls>", "same", None),
        ("<function_calls>get_time()</function_calls>", "same", None),
        ("get_time()", "same", "vllm-stream-differs"), (f"{SIMPLE}\n{MORE_JSON}", "same", "vllm-stream-differs"),
        ("How can I help you today?", "same", None), ("hello (world)", "same", None),
        ("I will check.\n<function_calls>\nget_time()\n</function_calls>", "text-around-calls", None),
    ],
    "lfm2": [
        (render("lfm2", T_CALLS), "same", None),
        (render("lfm2", T_ONE, "Checking the weather."), "same", None),
        ('<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>', "same", None),
        (f"<|tool_call_start|>[{SIMPLE}, {MORE}]<|tool_call_end|>", "same", None),
        ("<|tool_call_start|>[get_time()]", "same", None),
        ("[get_time()]", "same", None), ("How can I help you today?", "same", None),
        ('I will check.<|tool_call_start|>[get_weather(city="Paris")]<|tool_call_end|>Checking now.',
         "content-newlines", "same"),
        ('<|tool_call_start|>[get_weather(city="a\nb")]<|tool_call_end|>', "lfm2-repair", None),
        ("<|tool_call_start|>[register_user(name='x', age=07)]<|tool_call_end|>", "lfm2-repair", None),
        ("<|tool_call_start|>[get_time()]<|tool_call_end|>[get_time()]<|tool_call_end|>", "lfm2-echo", None),
    ],
    "functiongemma": [
        (render("functiongemma", T_CALLS), "same", None),
        (render("functiongemma", T_ONE), "same", None),
        ("<start_function_call>call:get_weather{city:<escape>Paris, FR<escape>,metric:<escape>celsius<escape>}"
         "<end_function_call>", "same", None),
        ("Let me check.<start_function_call>call:get_time{}<end_function_call>", "same", None),
        ("How can I help you today?", "same", None),
        ("<start_function_call>call:get_time{}<end_function_call>Done.", "text-around-calls", "same"),
    ],
    "gigachat3": [
        (render("gigachat3", T_ONE), "same", None),
        (render("gigachat3", T_ONE, "I'll check that for you."), "same", None),
        ("<|message_sep|>\n\nfunction call<|role_sep|>\n" + GIGA, "same", None),
        ("I'll check that for you.<|message_sep|>\n\nfunction call<|role_sep|>\n" + GIGA, "same", None),
        ('<|function_call|>{"name": "get_time", "arguments": {}}', "same", None),
        ("How can I help you today?", "same", None),
    ],
    "apertus": [
        (render("apertus", T_CALLS), "same", None),
        (render("apertus", T_ONE, "Let me see. "), "same", "content-newlines"),
        ('<|tools_prefix|>[{"get_weather": {"city": "Paris"}}]<|tools_suffix|>', "same", None),
        ('<|tools_prefix|>[{"get_weather":{"city":"Paris"}},{"get_time":{}}]<|tools_suffix|>', "same", None),
        ("How can I help you today?", "same", None),
    ],
    "llama4_json": [
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}', "same", None),
        ('{"name": "get_weather", "parameters": {"city": "Paris"}}; {"name": "get_time", "parameters": {}}', "same",
         None),
        ("How can I help you today?", "same", None),
    ],
}

VOCAB = {"llama4_json": "llama4"}


def _calls(m: Message) -> list[tuple[str, Any]]:
    out = []
    for n, a in m.calls:
        try:
            out.append((n, json.loads(a)))
        except ValueError:
            out.append((n, a))
    return out


def _ws(s: str | None) -> str:
    return " ".join((s or "").split())


def relation(theirs: Message, ours: Message) -> str:
    """``same``, ``content-newlines`` (content equal but for whitespace) or ``differ``."""
    if _calls(theirs) != _calls(ours):
        return "differ"
    if (theirs.content or None) == (ours.content or None):
        return "same"
    return "content-newlines" if _ws(theirs.content) == _ws(ours.content) else "differ"


@pytest.mark.parametrize("name", list(CASES))
def test_every_difference_from_vllm_is_the_declared_one(name: str) -> None:
    fmt = "llama3_json" if name == "llama4_json" else name
    fam = FAMILIES.get(fmt)
    vname = VOCAB.get(name) or fam.vocab
    v = vocab(vname)
    tok = tokenizer(vname)
    theirs_cls = parser_cls(tok, name, None)
    ours_cls = parser_cls(tok, f"thinkgate_{name}", None)
    request = chat_request(TOOLS, "auto")
    prompt = v.encode(fam.prompt if name != "llama4_json" else "<|header_start|>assistant<|header_end|>\n\n")
    counts: dict[str, Counter[str]] = {"whole": Counter(), "streamed": Counter()}
    wrong = []
    for text, kind_whole, kind_stream in CASES[name]:
        ids = v.encode(text)
        results = {}
        for path in ("whole", "streamed"):
            got = []
            for cls in (theirs_cls, ours_cls):
                if path == "whole":
                    got.append(whole(cls, tok, request, prompt, ids, v.decode(ids), None))
                else:
                    got.append(streamed(cls, tok, request, prompt, ids, range(len(ids)), detokenizer(v), None))
            results[path] = got
        rw = relation(*results["whole"])
        rs = relation(*results["streamed"])
        want_w = kind_whole
        want_s = kind_stream or kind_whole
        # a declared difference is one that is not "same": the relation must then be a difference
        ok_w = (rw == "same") if want_w == "same" else (rw != "same")
        ok_s = (rs == "same") if want_s == "same" else (rs != "same")
        counts["whole"][want_w if ok_w else f"UNEXPLAINED({rw})"] += 1
        counts["streamed"][want_s if ok_s else f"UNEXPLAINED({rs})"] += 1
        # thinkgate's own whole and streamed answers agree
        assert _calls(results["whole"][1]) == _calls(results["streamed"][1]), (name, text)
        if not (ok_w and ok_s):
            wrong.append((text, want_w, want_s, results))
    print(f"\n[vllm {name} vs thinkgate_{name} on {vname}] "
          + "; ".join(f"{p}: " + ", ".join(f"{k} {n}" for k, n in sorted(c.items())) for p, c in counts.items()))
    assert not wrong, "\n".join(
        f"{t!r} (declared whole {w}, streamed {s})\n  vLLM whole {r['whole'][0]}\n  ours whole {r['whole'][1]}\n"
        f"  vLLM stream {r['streamed'][0]}\n  ours stream {r['streamed'][1]}" for t, w, s, r in wrong)
