"""The template-reading families ``hf`` / ``beam``: markers and call syntax from the checkpoint's ``response_template``.

The facts are vLLM 0.34's (``vllm/parser/response_template.py``, ``vllm/parser/chat_parsing/``; its
``tests/parser/test_response_template.py``): where the template comes from on a tokenizer, which templates
serving refuses, where the reasoning of the current message ends (a prompt that opened the thinking, one
whose prefill began the content, ``enable_thinking: false``), and how Gemma 4's public template splits
its outputs and calls (which text is a call, its arguments typed, what stays content). The templates are
our own fixtures in the shape those tests use (Gemma 4's is ``thinkgate.testing.vocabularies.GEMMA4_RESPONSE_TEMPLATE``, the
shared matrices' ``hf`` family). Hostile cases: no template, an invalid one, one without a thinking or a
tool_calls field, or whose markers and call syntax thinkgate cannot read at a token.
"""

from __future__ import annotations

import copy
import json
import random
import time
from types import SimpleNamespace

import pytest
from support import vocab

from thinkgate.testing.vocabularies import GEMMA4_RESPONSE_TEMPLATE

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.reasoning.hf import ResponseTemplateReasoningParser
from thinkgate.reasoning.base import ENDED
from thinkgate.reasoning.markers import PENDING, THINKING
from thinkgate.reasoning.response_template import ResponseTemplate, spellings, split_group
from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.reasoning.vocabulary_adapters import hf_response_template
from thinkgate.structured_output import Constraint, Parser, StructuredOutputManager
from thinkgate.structured_output.tools import build_tool_constraint, get_tool_format, get_tool_reader
from thinkgate.structured_output.step.request import RequestStatus

# Gemma 4's response template (its instruction checkpoints' tokenizer_config.json, as vLLM's test holds it)
GEMMA4 = GEMMA4_RESPONSE_TEMPLATE
PREFIX = "<|turn>user\nhi<turn|>\n<|turn>model\n"
THOUGHT = "<|channel>thought\nplan<channel|>"
CALL = '<|tool_call>call:set_alarm{hour:7,label:<|"|>morning<|"|>}<tool_call|>'

# a Qwen-style template whose thinking is the implicit field (the output starts thinking) and whose calls
# are JSON objects in <tool_call> tokens (vLLM's test of a name read from the region's content)
IMPLICIT = {
    "start_anchor": "<|im_start|>assistant\n",
    "fields": {
        "thinking": {"close": "</think>"},
        "tool_calls": {"open": "<tool_call>", "close": "</tool_call>", "content": "json", "repeats": True,
                       "transform": {"type": "function",
                                     "function": {"name": "{content.name}", "arguments": "{content.arguments}"}}},
    },
}


def gemma(template=GEMMA4) -> Vocabulary:
    """The synthetic Gemma 4 vocabulary carrying ``template`` (Gemma 4's own: the shared, cached one)."""
    return vocab("gemma_template") if template is GEMMA4 else vocab("gemma").with_response_template(template)


@pytest.fixture(scope="module")
def manager():
    """One manager for the module's gating tests (its compiler is built once per vocabulary: seconds)."""
    mgr = StructuredOutputManager(gemma(), "hf", max_num_seqs=4, num_compile_threads=1)
    yield mgr
    mgr.close()


def compiled(mgr, rid: str) -> None:
    t0 = time.monotonic()
    while not mgr.is_compiled(rid):
        assert time.monotonic() - t0 < 60, "compile did not finish"
        time.sleep(0.002)


def hf(template=GEMMA4, kwargs=None, name: str = "hf") -> ResponseTemplateReasoningParser:
    return get_reasoning_parser(name)(gemma(template), kwargs)


def edited(change) -> dict:
    t = copy.deepcopy(GEMMA4)
    change(t)
    return t


# -- where the template comes from --------------------------------------------------------------------


def test_the_template_is_read_where_vllm_reads_it() -> None:
    # transformers 5 keeps it as an attribute; earlier versions leave the config field in init_kwargs
    assert hf_response_template(SimpleNamespace(response_template=GEMMA4, init_kwargs={})) == GEMMA4
    assert hf_response_template(SimpleNamespace(init_kwargs={"response_template": GEMMA4})) == GEMMA4
    assert hf_response_template(SimpleNamespace(response_template=None, init_kwargs={})) is None
    assert hf_response_template(SimpleNamespace(response_template="not an object", init_kwargs={})) is None


def test_a_vocabulary_carries_its_template_and_an_explicit_one_wins() -> None:
    base = vocab("gemma")
    v = base.with_response_template(GEMMA4)
    assert base.response_template is None and v.response_template == GEMMA4
    assert v.token_bytes is base.token_bytes and v.special_tokens == base.special_tokens
    v.response_template["fields"]["thinking"]["close"] = "changed"  # a copy: the caller's dict is untouched
    assert GEMMA4["fields"]["thinking"]["close"] == "<channel|>"
    other = edited(lambda t: t["fields"]["thinking"].update(open="<|channel>reasoning\n"))
    p = ResponseTemplateReasoningParser(gemma(), response_template=other)
    assert p.markers.start_label == "reasoning\n"
    with pytest.raises(ValueError, match="response_template must be a mapping"):
        base.with_response_template(["fields"])  # type: ignore[arg-type]


# -- reading delimiters as texts ---------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "texts"), [
    (r"<\|channel>thought\n", ("<|channel>thought\n",)),
    (r"^<think>\n?", ("<think>", "<think>\n")),
    (r"(?:<a>|<b>)x", ("<a>x", "<b>x")),
    (r"a[|]b", ("a|b",)),
    (r"\w+", None), (r".*</think>", None), (r"(?P<name>x)", None), (r"(?i)think", None), (r"x(?=y)", None),
])
def test_a_pattern_is_read_as_the_texts_it_spells(pattern: str, texts) -> None:
    assert spellings(pattern) == texts


def test_the_call_opener_is_cut_around_its_name() -> None:
    before, name, after = split_group(r"<\|tool_call>call:(?P<name>\w+)", "name")
    assert (before, after) == (("<|tool_call>call:",), ("",)) and name.fullmatch("set_alarm")
    assert split_group(r"<\|tool_call>call:(?P<name>\w+)", "key") is None
    assert split_group(r"(?:a|(?P<name>\w+))", "name") is None  # nested: no text before it to read


@pytest.mark.parametrize(("spec", "why"), [
    (["fields"], "must be a JSON object"),
    ({**GEMMA4, "version": 2}, "version 2"),
    ({**GEMMA4, "extra": 1}, "unknown keys"),
    ({"start_anchor": "x", "fields": {}}, "non-empty"),
    ({**GEMMA4, "defaults": {"role": "assistant", "name": "bot"}}, "defaults"),
    (edited(lambda t: t["fields"].update(citations={"open": "<c>", "close": "</c>"})), "citations"),
    (edited(lambda t: t["fields"]["content"].update(content="json")), "plain text"),
    (edited(lambda t: t["fields"]["thinking"].update(transform="{content}")), "plain text"),
    (edited(lambda t: t["fields"]["thinking"].update(open_pattern="x")), "not both"),
    (edited(lambda t: t["fields"]["thinking"].update(close="")), "non-empty"),
    (edited(lambda t: t["fields"]["thinking"].pop("open")), "at most one field"),
    (edited(lambda t: t["fields"]["tool_calls"].update(open_pattern="(")), "not a valid regex"),
    (edited(lambda t: t["fields"]["content"].update(content="yaml")), "unknown content parser"),
    (edited(lambda t: t["fields"]["thinking"].update(repeats="yes")), "boolean"),
    ({"fields": GEMMA4["fields"]}, "start_anchor"),
])
def test_an_invalid_template_is_refused_naming_its_problem(spec, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        ResponseTemplate.load(spec)
    with pytest.raises(ValueError, match="reasoning parser 'hf': invalid response_template"):
        ResponseTemplateReasoningParser(vocab("gemma"), response_template=spec)


# -- the reasoning family -------------------------------------------------------------------------------


def test_hf_and_beam_are_one_family_whose_markers_come_from_the_template() -> None:
    assert get_reasoning_parser("hf") is get_reasoning_parser("beam") is ResponseTemplateReasoningParser
    m = hf(name="beam").markers
    assert (m.start_markers, m.start_label, m.end_markers) == (("<|channel>",), "thought\n", ("<channel|>",))
    assert m.turn_start_markers == ("<|turn>", "<tool_response|>") and m.first_token
    assert m.content_closers == ("<turn|>", "<|tool_response>")  # <eos> is no token of this vocabulary


@pytest.mark.parametrize(("text", "reasoning", "content"), [
    ("Hello<turn|>", None, "Hello"),
    (THOUGHT + "The answer is 42.<turn|>", "plan", "The answer is 42."),
    (THOUGHT + CALL, "plan", CALL),
    ("Let me check." + CALL, None, "Let me check." + CALL),
    ("<|channel>thought\nnever ends", "never ends", None),
    ("<channel|>The rest", None, "The rest"),
])
def test_gemma4s_template_splits_its_outputs_as_vllm_reads_them(text: str, reasoning, content) -> None:
    p = hf()
    prompt = gemma().encode(PREFIX)
    assert p.extract_reasoning(text, prompt) == (reasoning, content)
    ids = gemma().encode(text)
    split = p.split(ids, prompt)
    assert gemma().decode(split.reasoning_ids) == (reasoning or "")
    stream = p.new_stream(prompt)
    out = [stream.feed([t]) for t in ids] + [stream.finish()]
    assert "".join(d.reasoning or "" for d in out) == (reasoning or "")
    assert "".join(d.content or "" for d in out) == (content or "")


def test_the_models_first_token_decides_whether_it_thinks() -> None:
    v, p = gemma(), hf()
    prompt = v.encode(PREFIX)
    tracker = p.new_tracker(prompt)
    assert tracker.keep_thinking_token_ids() == {v.token_id("<|channel>"), v.token_id("<channel|>")}
    end = tracker.scan(v.encode("Hello"))
    assert end is not None and end.offset == 0 and end.is_content  # content from its first token
    assert tracker.scan(v.encode("<|channel>thought\nhm")) is None
    assert tracker.forced_end_token_ids() == (v.token_id("<|channel>"), v.token_id("<channel|>"))


@pytest.mark.parametrize(("prompt", "kwargs", "state"), [
    (PREFIX + "<|channel>thought\n", {}, THINKING),             # the template opened the thinking
    (PREFIX + "<|channel>thought\nplan<channel|>", {}, ENDED),  # ... and closed it
    (PREFIX, {}, PENDING),                                      # the model's first token decides
    (PREFIX + "answer", {}, ENDED),                             # a prefill began the content
    (PREFIX + "prefill ", {}, ENDED),
    (PREFIX, {"enable_thinking": False}, ENDED),
    (PREFIX + "<|channel>thought\n", {"enable_thinking": False}, THINKING),  # the prompt decides first
    (PREFIX, {"include_reasoning": False}, ENDED),
    # an earlier turn's closed thinking does not end this one's
    ("<|turn>model\n" + THOUGHT + "done<turn|>\n" + PREFIX + "<|channel>thought\n", {}, THINKING),
    # after a tool response the message goes on: the anchor <tool_response|> starts its current part
    (PREFIX + THOUGHT + CALL + "<|tool_response>response:x<tool_response|>", {}, PENDING),
])
def test_the_current_message_of_the_prompt_decides_as_vllm_reads_it(prompt: str, kwargs, state: int) -> None:
    p = hf()
    ids = gemma().encode(prompt)
    assert p.new_tracker(ids, kwargs).state == state
    assert p.is_reasoning_end(ids, kwargs) is (state == ENDED)


def test_streaming_gives_the_whole_split_at_every_chunking() -> None:
    v, p = gemma(), hf()
    rng = random.Random(7)
    for prompt, text in [(PREFIX, THOUGHT + "Answer é 😀<turn|>"), (PREFIX + "<|channel>thought\n", "a<channel|>b"),
                         (PREFIX, "plain<turn|>more"), (PREFIX, THOUGHT + CALL + "Done.<turn|>")]:
        pids, ids = v.encode(prompt), v.encode(text)
        whole = p.extract_reasoning(text, pids)
        for _ in range(12):
            cuts = sorted(rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 4))))
            stream = p.new_stream(pids)
            out = [stream.feed(ids[a:b], v.decode(ids[a:b])) for a, b in zip([0, *cuts], [*cuts, len(ids)])]
            out.append(stream.finish())
            got = ("".join(d.reasoning or "" for d in out) or None, "".join(d.content or "" for d in out) or None)
            assert got == whole


def test_a_template_whose_thinking_is_the_implicit_field_starts_thinking() -> None:
    v = vocab("qwen3_6").with_response_template(IMPLICIT)
    p = get_reasoning_parser("hf")(v)
    assert (p.markers.end_markers, p.markers.implicit_end_markers, p.markers.first_token) == (
        ("</think>",), ("<tool_call>",), False)
    prompt = v.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert p.extract_reasoning("reason</think>answer", prompt) == ("reason", "answer")
    call = '<tool_call>{"name": "f", "arguments": {}}</tool_call>'
    assert p.extract_reasoning("need a tool" + call, prompt) == ("need a tool", call)  # the opener is content
    assert not p.is_reasoning_end(prompt)


# -- hostile: what the family cannot serve is a ValueError at construction ---------------------------------


def test_a_vocabulary_without_a_template_names_what_is_missing() -> None:
    with pytest.raises(ValueError, match=r"reasoning parser 'hf' takes its markers from the checkpoint's "
                                         r"response_template .*qwen3_6\+gemma"):
        get_reasoning_parser("hf")(vocab("gemma"))


@pytest.mark.parametrize(("change", "why"), [
    (lambda t: t["fields"].pop("thinking"), "no 'thinking' field"),
    (lambda t: t["fields"]["thinking"].pop("close"), "has no close"),
    (lambda t: t["fields"]["thinking"].update(repeats=True), "repeats"),
    (lambda t: t["fields"]["thinking"].update(close="[/THINK]"), "closer .\\[/THINK\\]. is not a control token"),
    (lambda t: t["fields"]["thinking"].update(close="<channel|>done"), "is not a control token"),
    (lambda t: (t["fields"]["thinking"].pop("close"), t["fields"]["thinking"].update(close_pattern=r"<channel\|>\w*")),
     "no finite set of texts"),
    (lambda t: t["fields"]["thinking"].update(open="thinking:"), "does not begin with a control token"),
    (lambda t: t["fields"]["thinking"].update(open=["<|channel>thought\n", "<|channel>reason\n"]),
     "different texts after their token"),
    # vLLM's test of a content opener held by the prompt: <|channel> opens both the thinking and the content
    (lambda t: t["fields"]["content"].update(open_pattern=r"<\|channel>final\n"), "same control token '<|channel>'"),
])
def test_a_template_without_markers_it_can_read_is_refused(change, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        hf(edited(change))


def test_the_reasoning_side_does_not_need_the_tool_calls_field() -> None:
    p = hf(edited(lambda t: t["fields"].pop("tool_calls")))
    assert p.extract_reasoning(THOUGHT + "x", gemma().encode(PREFIX)) == ("plan", "x")


def test_the_manager_gates_its_grammar_at_the_templates_closer(manager) -> None:
    v = gemma()
    manager.add_request("r", Constraint.json_schema({"type": "object"}), v.encode(PREFIX),
                        chat_template_kwargs={"enable_thinking": True})
    compiled(manager, "r")
    assert manager.accept_tokens("r", v.encode("<|channel>thought\nnot {json")).status == "ok"
    assert manager.status("r") is RequestStatus.THINKING
    assert manager.accept_tokens("r", v.encode('<channel|>{"a": 1}')).status == "ok"
    assert manager.status("r") is RequestStatus.CONSTRAINED
    assert manager.accept_tokens("r", [v.token_id("<turn|>")]).status == "terminated"
    manager.add_request("s", Constraint.json_schema({"type": "object"}), v.encode(PREFIX))
    compiled(manager, "s")
    assert manager.accept_tokens("s", v.encode("Sure")).status == "error"  # content from the first token
    for rid in ("r", "s"):
        manager.remove_request(rid)


# -- the tool format ------------------------------------------------------------------------------------

TOOLS = [
    {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object", "properties": {
        "hour": {"oneOf": [{"type": "integer"}, {"type": "null"}]}, "label": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "complex_function", "parameters": {"type": "object", "properties": {
        "nested": {"type": "object", "properties": {"inner": {"type": "string"}}},
        "list": {"type": "array", "items": {"type": "string"}}}}}},
    {"type": "function", "function": {"name": "configure", "parameters": {"type": "object", "properties": {
        "enabled": {"type": "boolean"}, "ratio": {"type": "number"}, "label": {"type": "string"},
        "value": {"type": ["string", "null"]}}}}},
    {"type": "function", "function": {"name": "get-weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}},
]
ALARM = ("set_alarm", {"hour": 7, "label": "morning"})


def message(v: Vocabulary, text: str, tools=TOOLS, choice="auto", prompt: str = PREFIX, **kw):
    """(reasoning, content, calls) of ``text`` read whole, after checking that every stream gives the same."""
    p = Parser(v, "hf", "hf")
    pids, ids = v.encode(prompt), v.encode(text)
    req = p.request(tools=tools, tool_choice=choice, prompt_token_ids=pids, **kw)
    whole = req.parse(ids)
    got = (whole.reasoning, whole.content, [(c.name, json.loads(c.arguments)) for c in whole.tool_calls])
    for step in (1, 3):
        s = p.request(tools=tools, tool_choice=choice, prompt_token_ids=pids, **kw)
        deltas = [s.parse_delta(ids[i:i + step]) for i in range(0, len(ids), step)] + [s.finish().delta]
        reasoning = "".join((d or {}).get("reasoning") or "" for d in deltas) or None
        content = "".join((d or {}).get("content") or "" for d in deltas)
        calls: dict[int, list[str]] = {}
        for d in deltas:
            for c in (d or {}).get("tool_calls", ()):
                slot = calls.setdefault(c["index"], ["", ""])
                slot[0] += c.get("function", {}).get("name") or ""
                slot[1] += c.get("function", {}).get("arguments") or ""
        assert reasoning == got[0] and content.strip() == (got[1] or "")
        assert [(n, json.loads(a)) for n, a in calls.values()] == got[2]
    return got


def test_gemma4s_template_gives_gemma4s_call_syntax() -> None:
    v = gemma()
    bound, own = get_tool_format("hf").for_vocabulary(v), get_tool_format("gemma4")
    assert get_tool_format("beam") is get_tool_format("hf") and bound.name == "hf"
    assert (bound.call_begin, bound.call_end, bound.args) == (own.call_begin, own.call_end, own.args)
    assert bound.required_markers == ("<|tool_call>", "<tool_call|>", '<|"|>')
    assert get_tool_format("hf").for_vocabulary(v) is bound  # built once per vocabulary
    for choice in ("required", {"type": "function", "function": {"name": "set_alarm"}}):
        ours = build_tool_constraint(TOOLS[:4], choice, format="hf", vocabulary=v)
        assert ours == build_tool_constraint(TOOLS[:4], choice, format="gemma4", vocabulary=v)


@pytest.mark.parametrize(("text", "expected"), [
    ("Hello<turn|>", (None, "Hello", [])),
    (THOUGHT + "The answer is 42.<turn|>", ("plan", "The answer is 42.", [])),
    (THOUGHT + CALL, ("plan", None, [ALARM])),
    ("Let me check." + CALL, (None, "Let me check.", [ALARM])),
    ('<|tool_call>call:get_weather{city:<|"|>Paris<|"|>,unit:<|"|>celsius<|"|>}<tool_call|>' + CALL,
     (None, None, [("get_weather", {"city": "Paris", "unit": "celsius"}), ALARM])),
    ('<|tool_call>call:complex_function{nested:{inner:<|"|>value<|"|>},list:[<|"|>a<|"|>,<|"|>b<|"|>]}<tool_call|>',
     (None, None, [("complex_function", {"nested": {"inner": "value"}, "list": ["a", "b"]})])),
    ("<|tool_call>call:configure{enabled:false,ratio:5.0,label:null,value:null}<tool_call|>",
     (None, None, [("configure", {"enabled": False, "ratio": 5.0, "label": None, "value": None})])),
    (CALL + "Done.<turn|>", (None, "Done.", [ALARM])),
    # the name pattern \w+ cannot hold a hyphen: no call (vLLM's hf drops it as malformed; ours keeps the text)
    ('<|tool_call>call:get-weather{city:<|"|>London<|"|>}<tool_call|>',
     (None, '<|tool_call>call:get-weather{city:<|"|>London<|"|>}<tool_call|>', [])),
])
def test_gemma4s_template_reads_calls_as_vllm_reads_them(text: str, expected) -> None:
    assert message(gemma(), text, chat_template_kwargs={"enable_thinking": True}) == expected


def test_what_the_request_does_not_allow_stays_content() -> None:
    v = gemma()
    assert message(v, CALL, choice="none") == (None, CALL, [])
    unknown = CALL.replace("set_alarm", "unknown")
    assert message(v, unknown) == (None, unknown, [])  # thinkgate reads declared tools only ...
    assert message(v, unknown, read_undeclared=True)[2] == [("unknown", ALARM[1])]  # ... vLLM's plugin all


def test_the_required_constraint_writes_the_templates_calls(manager) -> None:
    v = gemma()
    c = build_tool_constraint(TOOLS[:1], "required", format="hf", vocabulary=v)
    for rid, text, status in (("ok", THOUGHT + CALL, "terminated"), ("bad", THOUGHT + "Sure." + CALL, "error")):
        manager.add_request(rid, c, v.encode(PREFIX))
        compiled(manager, rid)
        res = manager.accept_tokens(rid, v.encode(text))
        if res.status == "ok":
            res = manager.accept_tokens(rid, [v.token_id("<turn|>")])
        assert res.status == status, res.message
        manager.remove_request(rid)


def test_a_name_inside_the_json_content_reads_hermes_calls() -> None:
    v = vocab("qwen3_6").with_response_template(IMPLICIT)
    fmt = get_tool_format("hf").for_vocabulary(v)
    assert (fmt.call_begin, fmt.call_end) == ('<tool_call>{"name": "{name}", "arguments": ', "}</tool_call>")
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    as_written = 'ok</think><tool_call>{"name": "set_alarm", "arguments": {"hour": 7, "label": "morning"}}</tool_call>'
    assert message(v, as_written, prompt=prompt) == ("ok", None, [ALARM])
    spaced = 'ok</think>Sure.<tool_call>\n{"arguments": {"hour": 7, "label": "morning"}, "name": "set_alarm"}\n</tool_call>'
    assert message(v, spaced, prompt=prompt) == ("ok", "Sure.", [ALARM])
    c = build_tool_constraint(TOOLS[:1], "required", format="hf", vocabulary=v)
    # keys in the schema's order, exact: no output check, which would look the format up by name unbound
    assert c.schema_check is None
    spec = c.spec
    consts: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("type") == "const_string":
                consts.append(node["value"])
            for x in node.values():
                walk(x)
        elif isinstance(node, list):
            for x in node:
                walk(x)

    walk(json.loads(spec))
    assert "".join(consts).startswith('{"name": "set_alarm", "arguments": ')


XML = {"start_anchor": "<|im_start|>assistant\n", "fields": {
    "thinking": {"open": "<think>", "close": "</think>"},
    "tool_calls": {"open_pattern": r"<tool_call>\n<function=(?P<name>[^>\n]+)>\n", "close": "</function>\n</tool_call>",
                   "content": "xml-inline", "repeats": True,
                   "content_args": {"tag_pattern": r"<parameter=(?P<key>[^>\n]+)>\n(?P<value>.*?)\n</parameter>\n"},
                   "transform": {"type": "function", "function": {"name": "{name}", "arguments": "{content}"}}}}}


def test_xml_parameters_of_a_tag_pattern_are_typed_by_the_schema() -> None:
    v = vocab("qwen3_6").with_response_template(XML)
    fmt = get_tool_format("hf").for_vocabulary(v)
    assert fmt.call_begin == "<tool_call>\n<function={name}>\n"
    assert (fmt.args.param_begin, fmt.args.param_end, fmt.args.close) == (
        "<parameter={key}>\n", "\n</parameter>\n", "</parameter>")
    text = ("<think>x</think><tool_call>\n<function=configure>\n<parameter=enabled>\ntrue\n</parameter>\n"
            "<parameter=ratio>\n0.5\n</parameter>\n<parameter=label>\n7\n</parameter>\n</function>\n</tool_call>")
    prompt = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    assert message(v, text, prompt=prompt) == ("x", None, [("configure", {"enabled": True, "ratio": 0.5, "label": "7"})])
    assert build_tool_constraint(TOOLS[3:4], "required", format="hf", vocabulary=v) is not None


# -- hostile: a call syntax that cannot be derived, or a format used without its vocabulary -----------------


def _tool_calls(change) -> dict:
    return edited(lambda t: change(t["fields"]["tool_calls"]))


@pytest.mark.parametrize(("template", "why"), [
    (edited(lambda t: t["fields"].pop("tool_calls")), "no 'tool_calls' field"),
    (_tool_calls(lambda f: f.pop("close")), "has no close"),
    (_tool_calls(lambda f: f.update(open_pattern=r"<\|tool_call>call:\w+")), r"has no \(\?P<name>"),
    (_tool_calls(lambda f: f.update(open_pattern=r"<\|tool_call>.*call:(?P<name>\w+)")), r"has no \(\?P<name>"),
    (_tool_calls(lambda f: f.update(transform_each=True)), "does not map one region to one call"),
    (_tool_calls(lambda f: f.pop("transform")), "does not map one region to one call"),
    (_tool_calls(lambda f: f.update(transform={"function": {"name": "set_alarm", "arguments": "{content}"}})),
     "names the call neither"),
    (_tool_calls(lambda f: f.update(content="kv-lines")), "no syntax thinkgate derives"),
    (_tool_calls(lambda f: f.update(content="xml-inline",
                                    content_args={"tag_pattern": r"<(?P<key>\w+)>(?P<value>.*?)</\w+>(?=<|$)"})),
     "no syntax thinkgate derives"),
])
def test_a_call_syntax_that_cannot_be_derived_is_refused_at_construction(template, why: str) -> None:
    v = gemma(template)
    with pytest.raises(ValueError, match=why):
        Parser(v, None, "hf")
    Parser(v, "hf")  # the reasoning side stands on its own


def test_the_format_without_its_vocabulary_says_what_it_needs() -> None:
    with pytest.raises(ValueError, match="takes its call syntax from the checkpoint's response_template"):
        build_tool_constraint(TOOLS[:1], "required", format="hf")
    with pytest.raises(ValueError, match="takes its call syntax from the checkpoint's response_template"):
        get_tool_reader("beam", TOOLS).read(CALL)
    with pytest.raises(ValueError, match="tool format 'hf' takes its markers from the checkpoint's response_template"):
        Parser(vocab("gemma"), None, "hf")
    v = gemma()  # given the vocabulary, every entry point works
    assert get_tool_reader("hf", TOOLS, vocabulary=v).read(CALL).calls[0].name == "set_alarm"
    assert get_tool_reader("hf", TOOLS).read_ids(v.encode(CALL), v).calls[0].name == "set_alarm"


def test_a_tool_name_the_template_cannot_write_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"tool name 'get-weather' cannot be written .*\\\\w\+"):
        build_tool_constraint(TOOLS, "required", format="hf", vocabulary=gemma())
