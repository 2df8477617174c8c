"""The template-reading families ``hf`` / ``beam``: markers from the checkpoint's ``response_template``.

The facts are vLLM 0.34's (``vllm/parser/response_template.py``, ``vllm/parser/chat_parsing/``; its
``tests/parser/test_response_template.py``): where the template comes from on a tokenizer, which templates
serving refuses, where the reasoning of the current message ends (a prompt that opened the thinking, one
whose prefill began the content, ``enable_thinking: false``), and how Gemma 4's public template splits
its outputs. The templates below are written as our own fixtures in the shape those tests use. Hostile
cases: no template, an invalid one, one without a thinking field or without markers thinkgate can read at
a token.
"""

from __future__ import annotations

import copy
import random
import time
from types import SimpleNamespace

import pytest
from support import vocab

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.reasoning.hf import ResponseTemplateReasoningParser
from thinkgate.reasoning.base import ENDED
from thinkgate.reasoning.markers import PENDING, THINKING
from thinkgate.reasoning.response_template import ResponseTemplate, spellings, split_group
from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.reasoning.vocabulary_adapters import hf_response_template
from thinkgate.structured_output import Constraint, StructuredOutputManager
from thinkgate.structured_output.request_state import RequestStatus

# Gemma 4's response template (the instruction checkpoints' tokenizer_config.json, as vLLM's test holds it)
GEMMA4 = {
    "defaults": {"role": "assistant"},
    "fields": {
        "content": {"close": ["<turn|>", "<|tool_response>", "<eos>"], "content": "text"},
        "thinking": {"close": "<channel|>", "content": "text", "open": "<|channel>thought\n"},
        "tool_calls": {
            "close": "<tool_call|>", "content": "json",
            "content_args": {"string_delims": [['<|"|>', '<|"|>']], "unquoted_keys": True},
            "open_pattern": r"<\|tool_call>call:(?P<name>\w+)", "repeats": True,
            "transform": {"function": {"arguments": "{content}", "name": "{name}"}, "type": "function"},
        },
    },
    "start_anchor": ["<|turn>model\n", "<tool_response|>"],
}
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
    return vocab("gemma").with_response_template(template)


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


def test_the_manager_gates_its_grammar_at_the_templates_closer() -> None:
    v = gemma()
    mgr = StructuredOutputManager(v, "hf", max_num_seqs=2, num_compile_threads=1)
    try:
        mgr.add_request("r", Constraint.json_schema({"type": "object"}), v.encode(PREFIX),
                        chat_template_kwargs={"enable_thinking": True})
        t0 = time.monotonic()
        while not mgr.is_compiled("r"):
            assert time.monotonic() - t0 < 60, "compile did not finish"
            time.sleep(0.002)
        assert mgr.accept_tokens("r", v.encode("<|channel>thought\nnot {json")).status == "ok"
        assert mgr.status("r") is RequestStatus.THINKING
        assert mgr.accept_tokens("r", v.encode('<channel|>{"a": 1}')).status == "ok"
        assert mgr.status("r") is RequestStatus.CONSTRAINED
        assert mgr.accept_tokens("r", [v.token_id("<turn|>")]).status == "terminated"
        mgr.add_request("s", Constraint.json_schema({"type": "object"}), v.encode(PREFIX))
        assert mgr.accept_tokens("s", v.encode("Sure")).status == "error"  # content from the first token
    finally:
        mgr.close()
