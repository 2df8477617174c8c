"""Every token-marker family, table-driven: the prompt shapes, the kwargs, implicit ends, skipping, and
any chunking, each checked exact to the token (helpers from tests/support.py).

Vocabularies: deepseek_r1 / deepseek_v3 / deepseek_v4 run on the real DeepSeek V4 table, qwen3 (and
its aliases) on the real Qwen3.6 table, mistral on the real tekken table with Magistral's ``[THINK]`` /
``[/THINK]`` slots (``magistral``). No offline package ships the GLM, Kimi, MiniMax, Seed-OSS, ERNIE,
Step-3, Cohere or Gemma 4 tokenizers, so those families run on the real Qwen3.6 table **plus the
family's own special tokens added as new ids** (``with_specials``, tests/support.py): the marker
texts are the families' real ones, the ids are ours.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import check_chunked, detokenizer, with_specials

from thinkgate.reasoning import get_reasoning_parser, load_vocabulary
from thinkgate.reasoning.base import ReasoningEnd
from thinkgate.reasoning.markers import ENDED, PENDING, THINKING, TokenMarkerParser
from thinkgate.reasoning.vocabulary import Vocabulary


@dataclass(frozen=True)
class Family:
    name: str
    vocab: str  # "qwen3_6" / "deepseek_v4" / "magistral", or "qwen3_6+" (Qwen table + ``specials``)
    start: str | None
    end: str
    implicit: str | None
    user: str  # a complete user turn
    gen: str  # the generation prompt (assistant turn start, no marker)
    eot: str  # what ends an assistant turn
    default: str  # "thinking" / "first_token" / "off"
    kwarg: str | None  # the thinking switch
    enabled: str = "thinking"
    specials: tuple[str, ...] = ()
    label: str = ""


FAMILIES = [
    Family("qwen3", "qwen3_6", "<think>", "</think>", "<tool_call>", "<|im_start|>user\nQ<|im_end|>\n",
           "<|im_start|>assistant\n", "<|im_end|>\n", "thinking", "enable_thinking"),
    Family("deepseek_r1", "deepseek_v4", "<think>", "</think>", None, "<｜User｜>Q", "<｜Assistant｜>",
           "<｜end▁of▁sentence｜>", "thinking", None),
    Family("deepseek_v3", "deepseek_v4", "<think>", "</think>", "<｜tool▁calls▁begin｜>", "<｜User｜>Q",
           "<｜Assistant｜>", "<｜end▁of▁sentence｜>", "off", "thinking"),
    Family("deepseek_v4", "deepseek_v4", "<think>", "</think>", "｜DSML｜", "<｜User｜>Q", "<｜Assistant｜>",
           "<｜end▁of▁sentence｜>", "off", "thinking"),
    Family("glm45", "qwen3_6+", "<think>", "</think>", "<tool_call>", "<|user|>\nQ", "<|assistant|>", "",
           "first_token", "enable_thinking", "first_token",
           specials=("<|assistant|>", "<|user|>", "<|system|>", "<|observation|>")),
    Family("kimi_k2", "qwen3_6+", "<think>", "</think>", "<|tool_calls_section_begin|>",
           "<|im_user|>user<|im_middle|>Q<|im_end|>", "<|im_assistant|>assistant<|im_middle|>", "<|im_end|>",
           "thinking", "thinking",
           specials=("<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>",
                     "<|tool_calls_section_begin|>")),
    Family("minimax_m2", "qwen3_6+", "<think>", "</think>", "<minimax:tool_call>", "]~b]user\nQ[e~[\n",
           "]~b]ai\n", "[e~[\n", "thinking", "enable_thinking",
           specials=("]~b]", "]~!b[", "[e~[", "<minimax:tool_call>")),
    Family("seed_oss", "qwen3_6+", "<seed:think>", "</seed:think>", "<seed:tool_call>",
           "<seed:bos>user\nQ<seed:eos>", "<seed:bos>assistant\n", "<seed:eos>", "thinking", "enable_thinking",
           specials=("<seed:bos>", "<seed:eos>", "<seed:think>", "</seed:think>", "<seed:tool_call>")),
    Family("ernie45", "qwen3_6+", "<think>", "</think>", "<tool_call>", "<|im_start|>user\nQ<|im_end|>\n",
           "<|im_start|>assistant\n", "<|im_end|>\n", "thinking", "enable_thinking",
           specials=("<response>", "</response>")),
    Family("step3", "qwen3_6+", None, "</think>", None, "<|BOT|>user\nQ<|EOT|>", "<|BOT|>assistant\n",
           "<|EOT|>", "thinking", None, specials=("<|BOT|>", "<|EOT|>")),
    Family("cohere_command", "qwen3_6+", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>",
           "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Q<|END_OF_TURN_TOKEN|>",
           "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "first_token", "reasoning",
           "first_token",
           specials=("<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
                     "<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>", "<|END_RESPONSE|>",
                     "<|START_ACTION|>", "<|END_ACTION|>", "<|START_TEXT|>")),
    Family("gemma4", "qwen3_6+", "<|channel>", "<channel|>", "<|tool_call>", "<|turn>user\nQ<turn|>\n",
           "<|turn>model\n", "<turn|>\n", "off", "enable_thinking", "first_token",
           specials=("<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|think|>", "<|tool_call>",
                     "<tool_call|>"), label="thought\n"),
    Family("mistral", "magistral", "[THINK]", "[/THINK]", "[TOOL_CALLS]", "[INST]Q[/INST]", "", "</s>",
           "first_token", "enable_thinking", "first_token"),
    # the vLLM 0.34 names added with issue 20 that are plain token-marker families (the aliases
    # deepseek_v41 -> deepseek_v4 and minicpmv -> qwen3: test_reasoning_new_families.py)
    Family("poolside_v1", "qwen3_6+", "<think>", "</think>", None, "<user>Q", "<assistant>", "", "off", "thinking",
           specials=("<assistant>", "<user>")),
    Family("ling3", "qwen3_6+", "<think>", "</think>", "<tool_call>", "<|user|>\nQ", "<|assistant|>", "",
           "thinking", "thinking", specials=("<|assistant|>", "<|user|>", "<|system|>", "<|observation|>")),
    Family("granite_thinking_parser", "qwen3_6+", "<think>", "</think>", "<tool_call>",
           "<|start_of_role|>user<|end_of_role|>Q<|end_of_text|>", "<|start_of_role|>assistant<|end_of_role|>",
           "<|end_of_text|>", "thinking", "enable_thinking",
           specials=("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>")),
    Family("holo2", "qwen3_6", "<think>", "</think>", None, "<|im_start|>user\nQ<|im_end|>\n",
           "<|im_start|>assistant\n", "<|im_end|>\n", "thinking", "thinking"),
    Family("zaya", "qwen3_6+", "<think>", "</think>", "<zyphra_tool_call>", "<|im_start|>user\nQ<|im_end|>\n",
           "<|im_start|>assistant\n", "<|im_end|>\n", "thinking", "enable_thinking",
           specials=("<zyphra_tool_call>",)),
    Family("step5", "qwen3_6", "<think>", "</think>", None, "<|im_start|>user\nQ<|im_end|>\n",
           "<|im_start|>assistant\n", "<|im_end|>\n", "thinking", None),
    Family("ripple", "qwen3_6", "<think>", "</think>", "<tool_call>", "<|im_start|>user\nQ<|im_end|>\n",
           "<|im_start|>assistant\n", "<|im_end|>\n", "first_token", None, "first_token"),
    Family("minimax_m3", "qwen3_6+", "<mm:think>", "</mm:think>", None, "]~b]user\nQ[e~[\n", "]~b]ai\n",
           "[e~[\n", "first_token", None, "first_token", specials=("<mm:think>", "</mm:think>", "]~b]", "[e~[")),
]
BY_NAME = {f.name: f for f in FAMILIES}
IDS = [f.name for f in FAMILIES]


@lru_cache(maxsize=None)
def vocab_for(name: str) -> Vocabulary:
    f = BY_NAME[name]
    if f.vocab.endswith("+"):
        return with_specials(load_vocabulary(f.vocab[:-1]), f.specials, f"{f.vocab[:-1]}+{f.name}")
    return load_vocabulary(f.vocab)  # type: ignore[arg-type]


@lru_cache(maxsize=None)
def parser_for(name: str) -> TokenMarkerParser:
    return get_reasoning_parser(name)(vocab_for(name))


R = "\nLet me think: 2+2 is 4 — état 中文 🙂.\n"
C = '\n\n{"answer": 4}'


def opened(f: Family) -> list[tuple[str, str]]:
    """What the model writes to open its thinking (marker and label), as dropped parts."""
    return ([("m", f.start)] if f.start else []) + ([("l", f.label)] if f.label else [])


def split_check(parser: TokenMarkerParser, prompt: Sequence[int], parts, kwargs=None, *, ended_before=False):
    """check_split, with two extra part kinds: "l" (a dropped multi-token label) and "s" (a content token
    whose text the front end drops)."""
    v = parser.vocabulary
    ids: list[int] = []
    r_ids: list[int] = []
    c_ids: list[int] = []
    c_text_ids: list[int] = []
    for kind, text in parts:
        piece = v.encode(text)
        ids += piece
        if kind == "r":
            r_ids += piece
        elif kind in ("c", "s"):
            c_ids += piece
            if kind == "c":
                c_text_ids += piece
    s = parser.split(ids, prompt, kwargs)
    assert (s.reasoning_ids, s.content_ids, s.ended_before) == (r_ids, c_ids, ended_before)
    assert parser.count_reasoning_tokens(ids, prompt, kwargs) == len(r_ids)
    assert parser.extract_content_ids(ids, prompt, kwargs) == c_ids
    assert parser.is_reasoning_end(prompt, kwargs) is ended_before
    r_text, c_text = v.decode(r_ids), v.decode(c_text_ids)
    assert parser.extract_reasoning(v.decode(ids), prompt, kwargs) == (r_text or None, c_text or None)
    tr = parser.new_tracker(prompt, kwargs)
    ends = [(i, e) for i, t in enumerate(ids) if (e := tr.advance([t])) is not None]
    if ended_before or s.end is None:
        assert ends == []
    else:
        assert ends == [(s.end.offset, ReasoningEnd(0, s.end.is_content))]
    assert tr.ended == (ended_before or s.end is not None)
    for give_text in (False, True):
        stream = parser.new_stream(prompt, kwargs)
        detok = detokenizer(v)
        deltas = [stream.feed([t], detok([t]) if give_text else None) for t in ids]
        got = ("".join(d.reasoning or "" for d in deltas), "".join(d.content or "" for d in deltas))
        assert got == (r_text, c_text)
    return s


# ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", IDS)
def test_registered_and_markers_resolved(name):
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    assert get_reasoning_parser(name).name == name
    assert p.reasoning_end_token_ids == {v.token_id(f.end)}
    assert p.start_token_ids == ({v.token_id(f.start)} if f.start else set())
    if f.implicit:
        assert v.token_id(f.implicit) in p.implicit_reasoning_end_token_ids
    assert p.turn_start_token_ids, "every family test prompt has a turn marker"


@pytest.mark.parametrize("name", [f.name for f in FAMILIES if f.start])
def test_template_opens_thinking(name):
    """The template wrote the start marker: the request starts thinking; the output ends it.
    (step3 has no start marker: test_step3_end_marker_only.)"""
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    prompt = v.encode(f.user + f.gen + f.start + (f.label if f.label else "\n"))
    assert p.initial_state(prompt) == THINKING
    split_check(p, prompt, [("r", R), ("m", f.end), ("c", C)])
    split_check(p, prompt, [("r", R * 2)])  # cut by max_tokens: all reasoning, no content
    split_check(p, prompt, [("m", f.end), ("c", C)])  # the model closes it at once


@pytest.mark.parametrize("name", IDS)
def test_template_closes_thinking(name):
    """The template wrote an empty thinking block (thinking disabled): ended before the first token."""
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    prompt = v.encode(f.user + f.gen + (f.start or "") + "\n\n" + f.end + "\n\n")
    assert p.is_reasoning_end(prompt)
    split_check(p, prompt, [("c", C + " " + f.end + " more")], ended_before=True)


@pytest.mark.parametrize("name", IDS)
def test_earlier_turn_does_not_end_this_turn(name):
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    past = f.gen + (f.start or "") + "old thoughts" + f.end + "old answer" + f.eot
    history = f.user + past + f.user
    base = f.gen + (f.start + f.label if f.start else "")
    prompt = v.encode(history + base)
    assert not p.is_reasoning_end(prompt)
    split_check(p, prompt, [("r", R), ("m", f.end), ("c", C)])
    # the same history with a neutral generation prompt: the family default, not the old `</think>`
    neutral = v.encode(history + f.gen)
    assert p.initial_state(neutral) == {"thinking": THINKING, "first_token": PENDING, "off": ENDED}[f.default]


@pytest.mark.parametrize("name", IDS)
def test_neutral_prompt_family_default(name):
    """No marker in the prompt and no kwarg: the family's own behaviour, including skipping thinking."""
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    prompt = v.encode(f.user + f.gen)
    if f.default == "thinking":
        split_check(p, prompt, [("r", R), ("m", f.end), ("c", C)])
        split_check(p, prompt, [*opened(f), ("r", R), ("m", f.end), ("c", C)])
        split_check(p, prompt, [*opened(f), ("r", R)])
    elif f.default == "first_token":
        split_check(p, prompt, [*opened(f), ("r", R), ("m", f.end), ("c", C)])
        split_check(p, prompt, [*opened(f), ("r", R)])
        # the model skips thinking: the first token is content, a later end marker is plain content
        split_check(p, prompt, [("c", "Sure. " + f.end + C)])
    else:  # off
        split_check(p, prompt, [("c", (f.start or "") + R + f.end + C)], ended_before=True)


@pytest.mark.parametrize("name", IDS)
def test_chat_template_kwargs(name):
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    prompt = v.encode(f.user + f.gen)
    if f.kwarg is None:  # no switch: the kwargs are not read
        assert p.initial_state(prompt, {"enable_thinking": False, "thinking": False}) == p.initial_state(prompt)
        return
    split_check(p, prompt, [("c", C)], {f.kwarg: False}, ended_before=True)
    on = {f.kwarg: True}
    assert p.initial_state(prompt, on) == {"thinking": THINKING, "first_token": PENDING}[f.enabled]
    split_check(p, prompt, [*opened(f), ("r", R), ("m", f.end), ("c", C)], on)
    # kwargs given at construction are the default; per-request kwargs override them
    off = type(p)(v, chat_template_kwargs={f.kwarg: False})
    assert off.is_reasoning_end(prompt) and not off.is_reasoning_end(prompt, on)
    assert off.is_reasoning_end(prompt, {f.kwarg: "false"})


@pytest.mark.parametrize("name", IDS)
def test_include_reasoning_false(name):
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    prompt = v.encode(f.user + f.gen + (f.start or ""))
    kw = {"include_reasoning": False}
    assert p.new_tracker(prompt, kw).ended
    split_check(p, prompt, [("c", R + f.end + C)], kw, ended_before=True)


@pytest.mark.parametrize("name", [f.name for f in FAMILIES if f.implicit])
def test_implicit_end_is_content(name):
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    prompt = v.encode(f.user + f.gen + (f.start + f.label if f.start else ""))
    if p.initial_state(prompt) != THINKING:
        prompt = v.encode(f.user + f.gen + f.start + f.label)
    call = f.implicit + 'tool_calls>{"name": "add"}'
    s = split_check(p, prompt, [("r", R), ("c", call)])
    assert s.end is not None and s.end.is_content and s.end.content_start == s.end.offset


def test_step3_end_marker_only():
    p = parser_for("step3")
    v = p.vocabulary
    prompt = v.encode("<|BOT|>user\nQ<|EOT|><|BOT|>assistant\n")
    # `<think>` is no marker for step3: written by the model it is reasoning text
    split_check(p, prompt, [("r", "<think>" + R), ("m", "</think>"), ("c", C)])
    with pytest.raises(ValueError, match="'step3'.*'</think>'"):
        get_reasoning_parser("step3")(load_vocabulary("tekken"))


def test_ernie45_response_tags():
    """ERNIE answers in `<response>` tags: in the content ids, not in the content text."""
    p = parser_for("ernie45")
    v = p.vocabulary
    prompt = v.encode("<|im_start|>assistant\n")
    split_check(p, prompt, [("r", "abc\n"), ("m", "</think>"), ("c", "\n\n"), ("s", "<response>"),
                            ("c", '\n{"a": 1}\n'), ("s", "</response>"), ("c", "\n")])
    split_check(p, prompt, [("r", "abc\n"), ("m", "</think>"), ("c", "\ndef")])


def test_gemma4_thought_label():
    """`<|channel>thought\\n` opens the thought channel; the label is part of the marker."""
    p = parser_for("gemma4")
    v = p.vocabulary
    prompt = v.encode("<|turn>user\nQ<turn|>\n<|turn>model\n")
    on = {"enable_thinking": True}
    s = split_check(p, prompt, [("m", "<|channel>"), ("l", "thought\n"), ("r", "I think"), ("m", "<channel|>"),
                                ("c", "Answer")], on)
    assert v.decode(s.reasoning_ids) == "I think"
    # a channel that does not start with the label: nothing is dropped but the marker
    split_check(p, prompt, [("m", "<|channel>"), ("r", "Hmm"), ("m", "<channel|>"), ("c", "A")], on)
    # thinking off (the default): everything is content, even a stray channel marker
    split_check(p, prompt, [("c", "<|channel>x<channel|>y")], ended_before=True)
    tr = p.new_tracker(prompt, on)
    ids = v.encode("<|channel>thought\nabc<channel|>d")
    assert tr.scan(ids) == ReasoningEnd(len(ids) - 2, False)


def test_mistral_system_prompt_think_example_does_not_count():
    """Magistral's system prompt shows `[THINK]`…`[/THINK]`; only the turn after `[/INST]` counts."""
    p = parser_for("mistral")
    v = p.vocabulary
    prompt = v.encode("<s>[SYSTEM_PROMPT]Draft your thinking in [THINK]your thoughts[/THINK] first."
                      "[/SYSTEM_PROMPT][INST]What is 2+2?[/INST]")
    assert p.initial_state(prompt) == PENDING
    split_check(p, prompt, [("m", "[THINK]"), ("r", R), ("m", "[/THINK]"), ("c", C)])
    split_check(p, prompt, [("c", "4")])


def test_deepseek_v4_dsml_tool_call_from_thinking():
    p = parser_for("deepseek_v4")
    v = p.vocabulary
    prompt = v.encode("<｜User｜>Q<｜Assistant｜><think>")
    out = v.encode("need a tool\n\n<｜DSML｜tool_calls>\n")
    end = p.find_reasoning_end(out)
    assert end is not None and end.is_content and v.decode(out[end.offset:]) == "｜DSML｜tool_calls>\n"
    split_check(p, prompt, [("r", "need a tool\n\n<"), ("c", "｜DSML｜tool_calls>\n")])
    # non-thinking chat mode (the default) is all content
    assert p.is_reasoning_end(v.encode("<｜User｜>Q<｜Assistant｜></think>"))
    assert p.is_reasoning_end(v.encode("<｜User｜>Q<｜Assistant｜>"))


@pytest.mark.parametrize("name", IDS)
def test_missing_marker_is_a_clear_error(name, byte_vocab, tekken_vocab):
    f = BY_NAME[name]
    vocab = byte_vocab if name == "mistral" else tekken_vocab
    missing = f.start if f.start and vocab.token_id(f.start) is None else f.end
    with pytest.raises(ValueError, match=rf"reasoning parser '{name}'.*" + re.escape(repr(missing))):
        get_reasoning_parser(name)(vocab)


# ------------------------------------------------------------------------------------------------
# any chunking of any stream gives the same split as parsing it whole, in every family


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.sampled_from(["r", "end", "start", "implicit", "c", "label"]), max_size=10),
       cuts=st.lists(st.integers(0, 120), max_size=10), give_text=st.booleans(), prompt_kind=st.sampled_from(
           ["neutral", "opened", "closed", "on", "off"]))
@pytest.mark.parametrize("name", IDS)
def test_any_chunking_matches_whole(name, shape, cuts, give_text, prompt_kind):
    f, p = BY_NAME[name], parser_for(name)
    v = p.vocabulary
    words = {"r": "ab 中𓀀 ", "end": f.end, "start": f.start or "", "implicit": f.implicit or "",
             "c": '{"k": 1} ', "label": f.label or "thought\n"}
    ids = v.encode("".join(words[s] for s in shape))
    prompt_text = {"neutral": f.gen, "opened": f.gen + (f.start or ""), "closed": f.gen + (f.start or "") + f.end,
                   "on": f.gen, "off": f.gen}[prompt_kind]
    kwargs = {"on": {f.kwarg or "enable_thinking": True}, "off": {f.kwarg or "enable_thinking": False}}.get(prompt_kind)
    check_chunked(p, v.encode(f.user + prompt_text), ids, cuts, kwargs, give_text=give_text)


@pytest.mark.parametrize("name", IDS)
def test_keep_thinking_tokens_agree_with_scan(name):
    """The contract the manager relies on: while a tracker is undecided, a token keeps the thinking
    possible exactly when ``scan`` says it does not start the content; once decided, it answers None,
    with drafts too."""
    f, parser = BY_NAME[name], parser_for(name)
    v = parser.vocabulary
    probes = sorted(v.special_token_ids) + v.encode("Sure, {\"a\": 1} ok")
    undecided = parser.new_tracker(v.encode(f.user), {f.kwarg: True} if f.kwarg else {})
    keep = undecided.keep_thinking_token_ids()
    if f.enabled != "first_token":  # thinking enabled means thinking: nothing to decide
        assert keep is None
        return
    assert keep, name
    for t in probes:
        end = undecided.scan([t])
        assert (t in keep) == (end is None or not end.is_content), (name, t, v.token_bytes[t])
        assert undecided.keep_thinking_token_ids([t]) is None
    assert undecided.keep_thinking_token_ids() == keep  # pure
    thinking = parser.new_tracker(v.encode(f.user + f.gen + f.start))
    assert thinking.keep_thinking_token_ids() is None


# ------------------------------------------------------------------------------------------------
# Muse's channel messages (muse, muse_glimmer): no start / end pair; the reasoning ends at the <|message|>
# of the answer's (or a call's) header. The same prompt shapes and rules, exact to the token.

MUSE_SPECIALS = ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>")
MUSE_USER, MUSE_GEN = "<|start|>user<|message|>Q<|eot|>", "<|start|>assistant"
TO_SELF, TO_USER = " to=self<|message|>", "<|eom|><|start|>assistant to=user<|message|>"


@lru_cache(maxsize=None)
def muse_parser(name: str):
    return get_reasoning_parser(name)(with_specials(load_vocabulary("qwen3_6"), MUSE_SPECIALS, "qwen3_6+muse"))


@pytest.mark.parametrize("name", ["muse", "muse_glimmer"])
def test_muse_channels_prompt_shapes(name):
    p = muse_parser(name)
    v = p.vocabulary
    assert get_reasoning_parser(name).name == name
    prompt = v.encode(MUSE_USER + MUSE_GEN)
    assert not p.is_reasoning_end(prompt)
    split_check(p, prompt, [("m", TO_SELF), ("r", R), ("m", TO_USER), ("c", C)])
    split_check(p, prompt, [("m", TO_SELF), ("r", R * 2)])  # cut by max_tokens: all reasoning
    split_check(p, prompt, [("m", " to=user<|message|>"), ("c", C)])  # the model answers at once
    # an earlier turn's answer does not end this turn
    past = MUSE_GEN + TO_SELF + "old" + TO_USER + "old answer<|eot|>"
    history = v.encode(MUSE_USER + past + MUSE_USER + MUSE_GEN)
    assert not p.is_reasoning_end(history)
    split_check(p, history, [("m", TO_SELF), ("r", R), ("m", TO_USER), ("c", C)])
    # a prefilled reasoning body goes on; a prefilled answer has ended it (all content, markers included)
    split_check(p, v.encode(MUSE_USER + MUSE_GEN + TO_SELF), [("r", R), ("m", TO_USER), ("c", C)])
    split_check(p, v.encode(MUSE_USER + MUSE_GEN + " to=user<|message|>"), [("c", C + TO_USER + " x")],
                ended_before=True)
    # include_reasoning: false: all content; no switch turns Muse's reasoning off
    split_check(p, prompt, [("c", TO_SELF + R + TO_USER + C)], {"include_reasoning": False}, ended_before=True)
    assert p.is_reasoning_end(prompt, {"enable_thinking": False, "thinking": False}) is False


def test_muse_missing_marker_is_a_clear_error(byte_vocab):
    """A vocabulary with neither the special token nor the text of a marker (a byte vocabulary spells any
    text, so the markers are text there: only a vocabulary that cannot spell one fails)."""
    assert get_reasoning_parser("muse")(byte_vocab).marker_ids == {}
    v = load_vocabulary("qwen3_6")  # no Muse special token; an encoder that cannot write "<|eot|>"
    broken = Vocabulary("no-eot", v.token_bytes, v.special_tokens, v.stop_token_ids,
                        encode=lambda text: v.encode(text.replace("<|eot|>", "")))
    with pytest.raises(ValueError, match=r"reasoning parser 'muse'.*'<\|eot\|>'"):
        get_reasoning_parser("muse")(broken)
