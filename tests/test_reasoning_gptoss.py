"""openai_gptoss (reasoning/gptoss.py): harmony channels.

No offline vocabulary has the harmony special tokens, so the vocabulary here is SYNTHETIC: the real
Qwen3.6 table with the harmony specials appended as new ids (``<|start|>``, ``<|end|>``,
``<|message|>``, ``<|channel|>``, ``<|constrain|>``, ``<|return|>``, ``<|call|>``; Qwen already has
``<|endoftext|>``), and an encoder that turns those texts into their special ids and the rest into real
Qwen3.6 tokens. The ids differ from o200k_harmony's; the structure is the same.

Expected values are built from the messages themselves (which body is analysis, which message ends
the reasoning, where its header starts), never from the parser.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.reasoning.gptoss import MAX_HEADER_BYTES, GptOssReasoningParser, HarmonyEnd
from thinkgate.reasoning.vocabulary import Vocabulary

HARMONY = ("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>")


@pytest.fixture(scope="module")
def hvocab(qwen_vocab) -> Vocabulary:
    """Qwen3.6 + the harmony specials appended (synthetic, see the module docstring)."""
    tb = list(qwen_vocab.token_bytes)
    specials = dict(qwen_vocab.special_tokens)
    for s in HARMONY:
        assert s not in specials
        specials[s] = len(tb)
        tb.append(s.encode())
    split = re.compile("(" + "|".join(re.escape(s) for s in HARMONY) + ")")

    def encode(text: str) -> list[int]:
        out: list[int] = []
        for seg in split.split(text):
            if seg:
                out.extend([specials[seg]] if seg in HARMONY else qwen_vocab.encode(seg))
        return out

    return Vocabulary("qwen3_6+harmony", tb, specials, [specials["<|return|>"], specials["<|call|>"]],
                      encode=encode, logits_width=len(tb))


@pytest.fixture(scope="module")
def parser(hvocab) -> GptOssReasoningParser:
    return GptOssReasoningParser(hvocab)


def gen_prompt(v: Vocabulary, history: str = "") -> list[int]:
    return v.encode("<|start|>system<|message|>You are ChatGPT.\nReasoning: high<|end|>" + history
                    + "<|start|>user<|message|>What is the weather in SF?<|end|><|start|>assistant")


# ------------------------------------------------------------------------------------------------
# building outputs with their expected split


@dataclass
class Msg:
    head: str  # header text after <|start|>assistant (or the whole header when start is False)
    body: str
    close: str | None = "<|end|>"
    start: bool = True  # write "<|start|>assistant" before the header


# header -> (text kind "r" / "c" / "x", ends the reasoning)
HEADERS = {
    "<|channel|>analysis": ("r", False),
    "<|channel|>analysis to=python code": ("r", False),
    "<|channel|>final": ("c", True),
    "<|channel|>final <|constrain|>json": ("c", True),
    "<|channel|>commentary": ("c", False),
    "<|channel|>commentary to=functions.get_weather <|constrain|>json": ("x", True),
    " to=functions.lookup<|channel|>commentary json": ("x", True),
    "<|channel|>commentary to=browser.search": ("x", False),
    "<|channel|>weird": ("x", False),
}


def build(v: Vocabulary, msgs: Sequence[Msg]):
    """ids, expected end (offset, channel, recipient, header ids) or None, reasoning ids, reasoning
    text, content text. The first message's header continues the prompt's ``<|start|>assistant``."""
    ids: list[int] = []
    end = None
    r_ids: list[int] = []
    texts: dict[str, list[str]] = {"r": [], "c": []}
    for n, m in enumerate(msgs):
        header_start = len(ids)
        if m.start and n > 0:
            ids += v.encode("<|start|>assistant")
        ids += v.encode(m.head)
        kind, ends = HEADERS[m.head]
        msg_at = len(ids)
        ids += v.encode("<|message|>")
        body = v.encode(m.body)
        ids += body
        if m.close:
            ids += v.encode(m.close)
        if kind == "r":
            r_ids += body
        if kind in texts:
            texts[kind].append(m.body)
        if ends and end is None:
            full = ("<|start|>assistant" if n > 0 and m.start else "") + m.head
            channel = "final" if "final" in m.head else "commentary"
            rec = re.search(r"to=(\S+?)(?=<|\s|$)", full)
            end = (msg_at, channel, rec.group(1) if rec else None, tuple(ids[header_start:msg_at + 1]))
    return ids, end, r_ids, "\n".join(texts["r"]), "\n".join(texts["c"])


def chunked(ids: Sequence[int], cuts: Sequence[int]) -> list[list[int]]:
    pos = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    return [list(ids[a:b]) for a, b in zip(pos, pos[1:])]


def as_tuple(e: HarmonyEnd | None):
    return None if e is None else (e.offset, e.channel, e.recipient, e.header_token_ids)


def check(parser: GptOssReasoningParser, msgs: Sequence[Msg], prompt=None, chunks=None):
    v = parser.vocabulary
    prompt = gen_prompt(v) if prompt is None else prompt
    ids, end, r_ids, r_text, c_text = build(v, msgs)
    c_ids = [] if end is None else ids[end[0] + 1:]
    sp = parser.split(ids, prompt)
    assert as_tuple(sp.end) == end
    assert sp.end is None or sp.end.is_content is False
    assert sp.reasoning_ids == r_ids and sp.content_ids == c_ids and not sp.ended_before
    assert parser.count_reasoning_tokens(ids, prompt) == len(r_ids)
    assert parser.extract_content_ids(ids, prompt) == c_ids
    assert as_tuple(parser.find_reasoning_end(ids)) == end
    assert not parser.is_reasoning_end(prompt)
    text = v.decode(ids)
    assert parser.extract_reasoning(text, prompt) == (r_text or None, c_text or None)
    for ch in ([[t] for t in ids], [ids], *([chunks] if chunks else [])):
        tr = parser.new_tracker(prompt)
        base, found = 0, None
        for c in ch:
            before = tr.scan(c)
            assert tr.scan(c) == before
            e = tr.advance(c)
            assert e == before
            if e is not None:
                assert found is None and tr.ended
                found = (base + e.offset, e.channel, e.recipient, e.header_token_ids)
                assert ids[base + e.offset] in parser.reasoning_end_token_ids
            base += len(c)
        assert found == end
        s = parser.new_stream(prompt)
        deltas = [s.feed(c) for c in ch] + [s.finish()]
        assert "".join(d.reasoning or "" for d in deltas) == r_text
        assert "".join(d.content or "" for d in deltas) == c_text
    return ids, sp


# ------------------------------------------------------------------------------------------------
# the shapes of the harmony docs


def test_final_answer(parser, hvocab):
    v = hvocab
    ids, sp = check(parser, [Msg("<|channel|>analysis", 'User asks: "What is 2 + 2?" Simple.', start=False),
                             Msg("<|channel|>final", "2 + 2 = 4.", "<|return|>")])
    assert v.decode(sp.content_ids) == "2 + 2 = 4.<|return|>"
    assert v.decode(sp.end.header_token_ids) == "<|start|>assistant<|channel|>final<|message|>"
    assert sp.end.content_start == sp.end.offset + 1
    assert v.decode(sp.reasoning_ids) == 'User asks: "What is 2 + 2?" Simple.'


def test_function_call_ends_reasoning(parser, hvocab):
    v = hvocab
    ids, sp = check(parser, [
        Msg("<|channel|>analysis", "Need to use function get_weather.", start=False),
        Msg("<|channel|>commentary to=functions.get_weather <|constrain|>json", '{"location":"SF"}', "<|call|>")])
    assert sp.end.channel == "commentary" and sp.end.recipient == "functions.get_weather"
    assert v.decode(sp.end.header_token_ids) == (
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>")
    assert v.decode(sp.content_ids) == '{"location":"SF"}<|call|>'
    # the call body is neither reasoning nor content text: the tool parser reads it
    assert parser.extract_reasoning(v.decode(ids)) == ("Need to use function get_weather.", None)
    # recipient in the role part of the header
    ids, sp = check(parser, [Msg("<|channel|>analysis", "Look it up.", start=False),
                             Msg(" to=functions.lookup<|channel|>commentary json", '{"q": 1}', "<|call|>")])
    assert sp.end.recipient == "functions.lookup"
    assert v.decode(sp.end.header_token_ids) == "<|start|>assistant to=functions.lookup<|channel|>commentary json<|message|>"


def test_first_message_is_the_answer(parser, hvocab):
    """No analysis at all: the header began in the prompt, only its generated tokens are header ids."""
    v = hvocab
    ids, sp = check(parser, [Msg("<|channel|>final", "Hi!", "<|return|>", start=False)])
    assert sp.end.offset == len(v.encode("<|channel|>final"))
    assert v.decode(sp.end.header_token_ids) == "<|channel|>final<|message|>"
    assert sp.reasoning_ids == []


def test_messages_that_do_not_end_reasoning(parser, hvocab):
    v = hvocab
    # a preamble (commentary without recipient) is shown to the user but does not end the reasoning;
    # a built-in tool call on analysis is reasoning
    ids, sp = check(parser, [
        Msg("<|channel|>analysis", "Plan.", start=False),
        Msg("<|channel|>commentary", "**Action plan**: 1. look up"),
        Msg("<|channel|>analysis to=python code", "print(1)", "<|call|>"),
        Msg("<|channel|>commentary to=browser.search", '{"query": "x"}', "<|call|>"),
        Msg("<|channel|>weird", "?"),
        Msg("<|channel|>commentary to=functions.get_weather <|constrain|>json", '{"location":"SF"}', "<|call|>"),
    ])
    assert sp.end.recipient == "functions.get_weather"
    assert parser.extract_reasoning(v.decode(ids)) == ("Plan.\nprint(1)", "**Action plan**: 1. look up")


def test_no_final_is_all_reasoning(parser, hvocab):
    ids, sp = check(parser, [Msg("<|channel|>analysis", "Thinking, thinking... cut by max_tok", None, start=False)])
    assert sp.end is None and sp.content_ids == []
    assert sp.reasoning_ids == hvocab.encode("Thinking, thinking... cut by max_tok")
    # cut inside a header
    v = hvocab
    ids = v.encode("<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>fin")
    assert parser.find_reasoning_end(ids) is None
    assert parser.extract_reasoning(v.decode(ids)) == ("a", None)


def test_missing_start_after_end(parser, hvocab):
    """``<|end|><|channel|>final<|message|>`` without ``<|start|>assistant``: still the answer."""
    ids, sp = check(parser, [Msg("<|channel|>analysis", "x", start=False),
                             Msg("<|channel|>final", "y", "<|return|>", start=False)])
    assert hvocab.decode(sp.end.header_token_ids) == "<|channel|>final<|message|>"


def test_unicode_body_split_across_steps(parser, hvocab):
    v = hvocab
    ids, _ = build(v, [Msg("<|channel|>analysis", "😀 中文 é", start=False), Msg("<|channel|>final", "日本語😀")])[:2]
    s = parser.new_stream(gen_prompt(v))
    deltas = [s.feed([t]) for t in ids] + [s.finish()]
    assert "".join(d.reasoning or "" for d in deltas) == "😀 中文 é"
    assert "".join(d.content or "" for d in deltas) == "日本語😀"
    assert all("\ufffd" not in (d.reasoning or "") + (d.content or "") for d in deltas)


def test_overlong_header_cannot_end(parser, hvocab):
    long_name = "functions." + "x" * (MAX_HEADER_BYTES + 10)
    HEADERS[f"<|channel|>commentary to={long_name}"] = ("x", False)
    try:
        ids, sp = check(parser, [Msg("<|channel|>analysis", "a", start=False),
                                 Msg(f"<|channel|>commentary to={long_name}", "{}", "<|call|>"),
                                 Msg("<|channel|>final", "ok", "<|return|>")])
    finally:
        del HEADERS[f"<|channel|>commentary to={long_name}"]
    assert sp.end.channel == "final"


# ------------------------------------------------------------------------------------------------
# prompt shapes (turn-aware: the prompt's last message only)


def test_prompt_shapes(parser, hvocab):
    v = hvocab
    gen = gen_prompt(v)
    assert parser.initial_mode(gen) == "header" and not parser.is_reasoning_end(gen)
    assert parser.initial_mode([]) == "header" and not parser.is_reasoning_end([])
    # an earlier turn's final answer does not end this turn's reasoning
    prev = gen_prompt(v, "<|start|>user<|message|>2+2?<|end|><|start|>assistant<|channel|>final<|message|>4<|end|>")
    assert not parser.is_reasoning_end(prev)
    # after a call and its output, the turn goes on: thinking again
    after_call = v.encode(
        "<|start|>user<|message|>Weather?<|end|><|start|>assistant<|channel|>analysis<|message|>Need tool.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
        '{"location":"SF"}<|call|><|start|>functions.get_weather to=assistant<|channel|>commentary<|message|>'
        '{"sunny": true}<|end|><|start|>assistant')
    assert not parser.is_reasoning_end(after_call)
    check(parser, [Msg("<|channel|>analysis", "It is sunny.", start=False),
                   Msg("<|channel|>final", "Sunny, 20C.", "<|return|>")], prompt=after_call)
    # a prefilled final header: ended before the output, all of it content
    pre_final = gen + v.encode("<|channel|>final<|message|>")
    assert parser.is_reasoning_end(pre_final) and parser.initial_mode(pre_final) == "ended"
    out = v.encode('{"a": 1}<|return|>')
    sp = parser.split(out, pre_final)
    assert sp.ended_before and sp.content_ids == out and sp.end is None
    assert parser.new_tracker(pre_final).ended
    assert parser.extract_reasoning(v.decode(out), pre_final) == (None, '{"a": 1}<|return|>')
    s = parser.new_stream(pre_final)
    assert "".join(s.feed([t]).content or "" for t in out) == '{"a": 1}<|return|>'
    assert parser.is_reasoning_end(gen + v.encode("<|channel|>commentary to=functions.f <|constrain|>json<|message|>"))
    # a prefilled, closed final is a finished message: the next one may be analysis again
    assert not parser.is_reasoning_end(gen + v.encode("<|channel|>final<|message|>4<|end|>"))
    # a prefilled analysis opener: the output starts inside the analysis body
    pre_an = gen + v.encode("<|channel|>analysis<|message|>")
    assert parser.initial_mode(pre_an) == "body" and not parser.is_reasoning_end(pre_an)
    out = v.encode("more thoughts<|end|><|start|>assistant<|channel|>final<|message|>ok<|return|>")
    sp = parser.split(out, pre_an)
    assert sp.reasoning_ids == v.encode("more thoughts") and v.decode(sp.content_ids) == "ok<|return|>"
    assert parser.extract_reasoning(v.decode(out), pre_an) == ("more thoughts", "ok")
    s = parser.new_stream(pre_an)
    deltas = [s.feed([t]) for t in out]
    assert "".join(d.reasoning or "" for d in deltas) == "more thoughts"
    # include_reasoning: false -> the grammar applies from the first token
    assert parser.is_reasoning_end(gen, {"include_reasoning": False})
    assert GptOssReasoningParser(v, {"include_reasoning": False}).is_reasoning_end(gen)


# ------------------------------------------------------------------------------------------------
# any chunking, same result (hypothesis)

BODIES = ["", "ok", "Need to use function get_weather.", '{"location":"SF"}', "final", "to=functions.x",
          "2 + 2 = 4.", "😀 中文", "line1\nline2", "analysis", " json", "<|endoftext|>"]
CLOSERS = ["<|end|>", "<|return|>", "<|call|>"]


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=st.lists(st.tuples(st.sampled_from(sorted(HEADERS)), st.sampled_from(BODIES),
                               st.sampled_from(CLOSERS), st.booleans()), min_size=1, max_size=6),
       cut_last=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_any_chunking(parser, hvocab, spec, cut_last, seed):
    msgs = []
    for n, (head, body, close, start) in enumerate(spec):
        if n == 0:
            start = False
            if not head.startswith("<|channel|>"):  # a role-part recipient continues "<|start|>assistant"
                pass
        elif not head.startswith("<|channel|>"):
            start = True  # a header without <|channel|> first needs its <|start|>assistant
        msgs.append(Msg(head, body, close, start))
    if cut_last:
        msgs[-1].close = None
    ids = build(hvocab, msgs)[0]
    rng = random.Random(seed)
    check(parser, msgs, chunks=chunked(ids, [rng.randint(0, len(ids)) for _ in range(rng.randint(0, 6))]))


# ------------------------------------------------------------------------------------------------
# contract details


def test_vocabulary_without_harmony_specials_raises(qwen_vocab):
    with pytest.raises(ValueError, match=r"'openai_gptoss'.*'<\|start\|>'"):
        GptOssReasoningParser(qwen_vocab)


def test_registry_names(parser):
    assert get_reasoning_parser("openai_gptoss") is GptOssReasoningParser
    assert get_reasoning_parser("gpt_oss") is GptOssReasoningParser
    assert parser.reasoning_end_token_ids == {parser.vocabulary.special_tokens["<|message|>"]}
    assert parser.implicit_reasoning_end_token_ids == frozenset()


def test_tracker_state_is_bounded(parser, hvocab):
    v = hvocab
    tr = parser.new_tracker(gen_prompt(v))
    tr.advance(v.encode("<|channel|>analysis<|message|>"))
    step = v.encode("a stray <|channel|> opens a header that never closes ")
    for _ in range(500):
        assert tr.advance(step) is None
        assert len(tr._state.header) <= MAX_HEADER_BYTES
    e = tr.advance(v.encode("<|end|><|start|>assistant<|channel|>final<|message|>x"))
    assert e is not None and e.channel == "final"
