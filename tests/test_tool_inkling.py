"""The ``inkling`` tool format: Inkling's typed blocks, a call a block of its own.

Expected results are the facts of vLLM 0.34's own tests for its Inkling parser
(``tests/parser/engine/test_inkling.py``: which block is a call, where its name and arguments are read from,
which blocks are visible text, what a header is), written as our own cases; the template's layout is
``template_render.py``'s renderer (vLLM's Inkling encoder). The shared matrices (``test_tool_conformance.py``,
``test_parser_stream.py``, ``test_tool_formats.py``) run the family too; the differential against vLLM's own
parser is ``tests/integration/test_vllm_tool_differential.py``. Vocabulary: the synthetic Inkling table
(``thinkgate.testing.vocabularies``): every Inkling marker is a control token.
"""

from __future__ import annotations

import json
import random

import pytest
from support import FAMILIES, assert_rejected_at, finish, stream_chunks, vocab
from template_render import render

from thinkgate.structured_output import Parser
from thinkgate.structured_output.tools import (CallPolicy, MarkedDecoder, build_tool_constraint, get_tool_format,
                                              get_tool_reader)

M, J, E, S = "<|message_model|>", "<|content_invoke_tool_json|>", "<|end_message|>", "<|content_model_end_sampling|>"
TEXT, THINK = "<|content_text|>", "<|content_thinking|>"
FAM = FAMILIES["inkling"]
V = vocab("inkling")


def _fn(name: str, props: dict, required: tuple[str, ...] = ()) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": props, **({"required": list(required)} if required else {})}}}


TOOLS = [_fn("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}}, ("city",)),
         _fn("search", {"q": {"type": "string"},
                        "filters": {"type": "object", "properties": {"max": {"type": "integer"}}}}),
         _fn("ping", {})]
FORCED = [TOOLS[0], TOOLS[2]]  # the tools of the forced constraints


def block(name: str, args: str, header: str = "") -> str:
    """A call's block as vLLM's tests write it: ``<|content_invoke_tool_json|>{"name":N,"args":A}<|end_message|>``,
    after ``<|message_model|>`` + ``header`` when ``header`` is given."""
    return (M + header if header else "") + f'{J}{{"name":"{name}","args":{args}}}{E}'


def read(text: str, tools=TOOLS, choice="auto", ids: bool = True):
    """(content, [(name, arguments)]) of ``text`` read from its token ids (markers at control tokens), or as
    trusted text (``ids=False``: every marker's characters are the marker)."""
    r = get_tool_reader("inkling", tools, choice)
    got = r.read_ids(V.encode(text), V) if ids else r.read(text)
    return got.content, [(c.name, json.loads(c.arguments)) for c in got.calls]


# -- which block is a call (vLLM's facts)


@pytest.mark.parametrize(("text", "content", "calls"), [
    (block("get_weather", '{"city":"SF"}'), None, [("get_weather", {"city": "SF"})]),
    # the header (between the opener and the kind) is the call's name as metadata: not content
    (block("get_weather", '{"city":"SF"}', header="get_weather"), None, [("get_weather", {"city": "SF"})]),
    # parallel blocks, with or without a header
    (block("ping", "{}") + M + block("search", '{"q":"x"}'), None, [("ping", {}), ("search", {"q": "x"})]),
    (block("ping", "{}") + block("search", '{"q":"x"}', header="search"), None, [("ping", {}), ("search", {"q": "x"})]),
    # braces inside strings, nested arguments
    (block("search", '{"q":"a}b","filters":{"deep":{"list":[{"k":"v"}]}}}'), None,
     [("search", {"q": "a}b", "filters": {"deep": {"list": [{"k": "v"}]}}})]),
    # text blocks around calls; the framing tokens are never content
    (f"{TEXT}Let me check.{E}" + block("get_weather", '{"city":"SF"}', header="get_weather"), "Let me check.",
     [("get_weather", {"city": "SF"})]),
    (block("ping", "{}") + f"{M}{TEXT}done{E}", "done", [("ping", {})]),
    (f"{TEXT}intro{E}" + block("ping", "{}"), "intro", [("ping", {})]),  # a block opened without the opener
    # raw tool text and tool errors are visible text
    (f"<|content_invoke_tool_text|>do something{E}", "do something", []),
    (f"<|content_tool_error|>boom{E}", "boom", []),
    # <|content_model_end_sampling|> ends a block too (a call's, a text block's)
    (f'{J}{{"name":"ping","args":{{}}}}{S}', None, [("ping", {})]),
    (f"{TEXT}hi{S}", "hi", []),
    # a header that no block kind follows is text
    (f"{M}hdr{E}after", "hdrafter", []),
    # a thinking block after the thinking ended is neither content nor a call
    (f"{TEXT}mid{E}{M}{THINK}two{E}{M}{TEXT}more{E}", "midmore", []),
    ("hello world", "hello world", []),
])
def test_blocks_read_as_vllm_reads_them(text: str, content: str | None, calls: list) -> None:
    assert read(text) == (content, calls)
    assert read(text, ids=False) == (content, calls)


@pytest.mark.parametrize(("body", "calls"), [
    ('{"name":"args","args":{"k":1}}', [("args", {"k": 1})]),       # "args" as the name is just a name
    ('{ "name" : "ping" , "args" : {} }', [("ping", {})]),           # any whitespace
    ('\n{"args":{"city":"Rome"},"name":"get_weather"}\n', [("get_weather", {"city": "Rome"})]),  # keys in any order
    ('{"name":"ping"}', [("ping", {})]),                             # no arguments: {}
    ('{"name":"get_weather","arguments":{"city":"Rome"}}', [("get_weather", {"city": "Rome"})]),
    ('{"name":"get_weather","parameters":{"city":"Rome"}}', [("get_weather", {"city": "Rome"})]),
    ('{"name":"get_weather","args":"{\\"city\\": \\"Rome\\"}"}', [("get_weather", {"city": "Rome"})]),
])
def test_the_call_body_is_read_generously(body: str, calls: list) -> None:
    tools = TOOLS + [_fn("args", {"k": {"type": "integer"}})]
    assert read(J + body + E, tools) == (None, calls)


def test_a_complete_body_at_the_end_of_the_output_is_a_call_and_a_cut_one_is_content() -> None:
    """The stop token <|content_model_end_sampling|> is not in the ids a reader gets: a body that reads whole
    there is a call. A body cut short stays content (vLLM returns a call with partial arguments)."""
    assert read(f'{J}{{"name":"get_weather","args":{{"city":"SF"}}}}') == (None, [("get_weather", {"city": "SF"})])
    cut = f'{J}{{"name":"get_weather","args":{{"city":"S'
    assert read(cut) == ('{"name":"get_weather","args":{"city":"S', [])


def test_the_template_turn_reads_back() -> None:
    calls = [("get_weather", {"days": 2, "city": "Zürich"}), ("search", {"q": "x", "filters": {"b": 1, "a": [None]}})]
    assert read(render("inkling", calls, "Checking.")) == ("Checking.", calls)


# -- hostile bodies: never a call, never an exception, the text stays content


@pytest.mark.parametrize("body", [
    "not a call",
    '{"name":"get_weather","args":[1]}',                              # arguments not an object
    '{"name":3,"args":{}}',                                           # name not a string
    '{"name":"ping","args":{},"id":"c1"}',                            # a key that is neither
    '{"name":"ping","args":{},"arguments":{}}',                       # two places for the arguments
    '{"name":"ping","name":"search","args":{}}',                      # the name twice
    '{"name":"get_weather","args":{"city":"a","city":"b"}}',          # an argument twice
    '{"name":"get_weather","args":"[1]"}',                            # a string that holds no object
    '{"name":"ping","args":{}} trailing',                             # text after the object
    '{"name":"nope","args":{}}',                                      # a tool the request does not declare
    '{"name":"ping","args":' + "[" * 300 + "]" * 300 + "}",           # nested deeper than the bound
])
def test_a_body_that_is_no_call_stays_content(body: str) -> None:
    content, calls = read(f"{TEXT}before{E}{J}{body}{E}{M}{TEXT}after{E}")
    assert calls == [] and content == "before" + body + "after"


def test_control_tokens_end_a_body_and_spelled_markers_are_text() -> None:
    # a real <|end_message|> inside a string ends the body there: what came before is no call
    text = f'{J}{{"name":"search","args":{{"q":"{E}"}}}}{E}'
    assert read(text) == ('{"name":"search","args":{"q":""}}', [])
    # the same characters in ordinary tokens are part of the string
    ids = V.encode(f'{J}{{"name":"search","args":{{"q":"') + [t for ch in E for t in V.encode(ch)] \
        + V.encode(f'"}}}}{E}')
    got = get_tool_reader("inkling", TOOLS).read_ids(ids, V)
    assert [(c.name, json.loads(c.arguments)) for c in got.calls] == [("search", {"q": E})] and got.content is None
    # trusted text (no ids) takes every marker's characters as the marker, as vLLM's text lexer does
    assert read(f"{TEXT}see {TEXT} token{E}", ids=False) == ("see  token", [])
    # another opener inside a body ends it too: the block is no call
    assert read(f'{J}{{"name":"ping",{M}"args":{{}}}}{E}')[1] == []


def test_many_framing_tokens_cost_linear_work() -> None:
    """A hostile run of openers and block ends: read whole and streamed in O(the output)."""
    text = (M + "x" + E) * 3000 + block("ping", "{}")
    ids = V.encode(text)
    assert read(text)[1] == [("ping", {})]
    r = get_tool_reader("inkling", TOOLS)
    s = get_tool_format("inkling").new_stream(r.request, CallPolicy(r.request), V)
    dec = MarkedDecoder(V)
    for t in ids:
        s.feed(dec.feed([t]))
    s.finish()
    assert s.scanned < 4 * len(text)


# -- streaming: every chunking reads what the whole output reads


OUTPUTS = [
    render("inkling", [("get_weather", {"city": "Paris"}), ("ping", {})], "Let me look."),
    f"{TEXT}a{E}" + block("get_weather", '{"city":"x"}') + f"{M}{THINK}later{E}{M}{TEXT}b{E}",
    f"{TEXT}x{E}{J}not json{E}{M}hdr{E}" + block("ping", "{}", header="ping") + "  \n" + block("ping", "{}"),
    f'{J}{{"name":"get_weather","args":{{"city":"Pa',
    f"{M}header only",
]


@pytest.mark.parametrize("text", OUTPUTS)
def test_stream_equals_whole_read_for_random_chunkings(text: str) -> None:
    p = Parser(V, "inkling", "inkling")
    prompt = V.encode(FAM.prompt)
    ids = V.encode(FAM.thinking + text)
    whole = p.request(tools=TOOLS, prompt_token_ids=prompt).parse(ids)
    rng = random.Random(len(text))
    for cuts in [range(len(ids)), *(sorted(rng.sample(range(len(ids)), min(8, len(ids)))) for _ in range(6))]:
        deltas, end = stream_chunks(p.request(tools=TOOLS, prompt_token_ids=prompt), ids, cuts, rng.random() < 0.5)
        content = "".join(d.get("content", "") for d in deltas if d)
        calls = [c for d in deltas if d for c in d.get("tool_calls", [])]
        assert content == (whole.content or "")
        assert [(c["function"]["name"], c["function"]["arguments"]) for c in calls] == \
            [(c.name, c.arguments) for c in whole.tool_calls]


def test_constrained_calls_stream_name_first_then_argument_text() -> None:
    p = Parser(V, "inkling", "inkling")
    ids = V.encode(FAM.thinking + render("inkling", [("search", {"q": "chairs", "filters": {"max": 3}})]))
    req = p.request(tools=TOOLS, tool_choice="required", prompt_token_ids=V.encode(FAM.prompt))
    deltas, end = stream_chunks(req, ids, range(len(ids)), False)
    frags = [c for d in deltas if d for c in d.get("tool_calls", [])]
    whole = '{"filters":{"max":3},"q":"chairs"}'
    assert frags[0]["function"]["name"] == "search" and whole.startswith(frags[0]["function"]["arguments"])
    assert len(frags) > 3  # the argument text went out as it was written, token by token
    assert "".join(f["function"]["arguments"] for f in frags) == whole
    assert end.finish_reason == "tool_calls"


def test_a_call_right_after_the_thinking_block() -> None:
    """The call's kind token ends the thinking: the header before it lies in the thinking (thinkgate's reasoning
    split), the call is read from the kind token on."""
    p = Parser(V, "inkling", "inkling")
    ids = V.encode(f"{THINK}I should call a tool.{E}" + block("ping", "{}", header="ping"))
    got = p.request(tools=TOOLS, prompt_token_ids=V.encode(FAM.prompt)).parse(ids)
    assert [(c.name, c.arguments) for c in got.tool_calls] == [("ping", "{}")]
    assert got.content is None and got.finish_reason == "tool_calls"
    assert got.reasoning is not None and got.reasoning.startswith("I should call a tool.")


# -- the constraint


def test_required_takes_the_template_forms_of_the_first_call() -> None:
    c = build_tool_constraint(FORCED, "required", format="inkling")
    call = f'{J}{{"name":"get_weather","args":{{"city":"Rome"}}}}{E}'
    # after the thinking block: the header in the thinking, the call from its kind token
    finish(FAM, c, f"{THINK}r{E}{M}get_weather" + call)
    # after a text block's kind (it ends the thinking): the block's end and the call's opener, or either left out
    for lead in (f"{E}{M}get_weather", f"{M}get_weather", "get_weather", ""):
        finish(FAM, c, FAM.thinking + lead + call, check_mask=not lead)  # (each token checked once above)
    # two calls: the second's header is its own name
    finish(FAM, c, FAM.thinking + call + block("ping", "{}", header="ping"), check_mask=False)


def test_required_rejects_what_the_template_never_writes() -> None:
    c = build_tool_constraint(FORCED, "required", format="inkling")
    call = f'{J}{{"name":"get_weather","args":{{"city":"Rome"}}}}{E}'
    assert_rejected_at(FAM, c, FAM.thinking, "Sure, let me check.")                 # text before the call
    assert_rejected_at(FAM, c, FAM.thinking + f'{M}get_weather{J}{{"name":"', "ping")  # a name not its header's
    assert_rejected_at(FAM, c, FAM.thinking + call + f'{M}ping{J}{{"name":"', "get_weather")  # the second, likewise
    assert_rejected_at(FAM, c, FAM.thinking + call, "", bad_ids=V.encode(J))        # a second call needs its opener
    assert_rejected_at(FAM, c, FAM.thinking + call, "", bad_ids=V.encode(f"{M}{TEXT}"), offset=1)  # no text after


def test_named_and_parallel_off_take_one_call() -> None:
    named = build_tool_constraint(FORCED, {"type": "function", "function": {"name": "ping"}}, format="inkling")
    finish(FAM, named, FAM.thinking + block("ping", "{}", header="ping"))
    assert_rejected_at(FAM, named, FAM.thinking + M, "get_weather")
    one = build_tool_constraint(FORCED, "required", format="inkling", parallel_tool_calls=False)
    assert_rejected_at(FAM, one, FAM.thinking + block("ping", "{}", header="ping"), "", bad_ids=V.encode(M))


def test_auto_with_a_strict_tool_keeps_inklings_free_text() -> None:
    """Free text is blocks: text, thinking and raw-text blocks stay allowed; after the call kind token only a
    valid call of the request's tools follows."""
    tools = [_fn("get_weather", {"city": {"type": "string"}}, ("city",))]
    tools[0]["function"]["strict"] = True
    c = build_tool_constraint(tools, "auto", format="inkling", vocabulary=V)
    finish(FAM, c, FAM.thinking + f"It is sunny.{E}{M}{THINK}more thought{E}{M}{TEXT}Bye.{E}")
    finish(FAM, c, FAM.thinking + f'Checking.{E}{M}get_weather{J}{{"name":"get_weather","args":{{"city":"Rome"}}}}{E}')
    assert_rejected_at(FAM, c, FAM.thinking + f'{E}{M}get_weather{J}{{"name":"get_weather","args":{{"city":', "3")


def test_none_with_a_strictness_keeps_the_call_kind_out() -> None:
    c = build_tool_constraint(TOOLS, "none", format="inkling", strictness="function", vocabulary=V)
    finish(FAM, c, FAM.thinking + f"Just text.{E}{M}{TEXT}More.{E}")
    assert_rejected_at(FAM, c, FAM.thinking + f"Just text.{E}{M}ping", "", bad_ids=V.encode(J))


def test_a_vocabulary_without_inklings_tokens_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"'inkling'.*<\|message_model\|>"):
        build_tool_constraint(TOOLS, "required", format="inkling", vocabulary=vocab("qwen3_6"))


def test_the_constraint_spells_the_template_payload_and_the_header_as_the_name() -> None:
    els = json.loads(build_tool_constraint(TOOLS[2:], "required", format="inkling").spec)["format"]["elements"]
    # lead whitespace, the first call's optional opening ([[<|end_message|>] <|message_model|>] ping), its block
    assert els[1]["content"]["elements"][-1] == {"type": "const_string", "value": "ping"}
    assert els[2:4] == [{"type": "token", "token": J}, {"type": "const_string", "value": '{"name":"ping","args":'}]
    assert els[5:7] == [{"type": "const_string", "value": "}"}, {"type": "token", "token": E}]
    # later calls: <|message_model|>, the call's own name as its header, its block
    assert els[7]["type"] == "star" and els[7]["content"]["elements"][:3] == [
        {"type": "token", "token": M}, {"type": "const_string", "value": "ping"}, {"type": "token", "token": J}]
