"""Text-marker families (reasoning/text_markers.py): olmo3 and hunyuan_a13b, whose markers are texts
spelled with ordinary tokens.

No offline package ships the OLMo 3 or Hunyuan tokenizers. Both run here on the real tekken table
(mistral-common), where ``<think>`` / ``</think>`` / ``<answer>`` are ordinary multi-token texts as in
those models, plus each family's turn tokens added as new special ids (``<|im_start|>`` /
``<|im_end|>`` for OLMo 3's ChatML; ``<|startoftext|>`` / ``<|extra_0|>`` / ``<|extra_4|>`` / ``<|eos|>``
for Hunyuan). A naive reference (the first token whose prefix contains the end text) checks the end
offset; hypothesis checks that any chunking matches the whole.
"""

from __future__ import annotations

import codecs
from collections.abc import Sequence
from functools import lru_cache

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import with_specials

from thinkgate.reasoning import get_reasoning_parser, load_vocabulary
from thinkgate.reasoning.base import ReasoningEnd
from thinkgate.reasoning.markers import THINKING
from thinkgate.reasoning.text_markers import TextMarkerParser
from thinkgate.reasoning.vocabulary import Vocabulary


@lru_cache(maxsize=None)
def olmo3() -> TextMarkerParser:
    v = with_specials(load_vocabulary("tekken"), ["<|im_start|>", "<|im_end|>"], "tekken+olmo3")
    return get_reasoning_parser("olmo3")(v)


@lru_cache(maxsize=None)
def hunyuan() -> TextMarkerParser:
    v = with_specials(load_vocabulary("tekken"), ["<|startoftext|>", "<|extra_0|>", "<|extra_4|>", "<|eos|>"],
                      "tekken+hunyuan")
    return get_reasoning_parser("hunyuan_a13b")(v)


def naive_end(vocab: Vocabulary, ids: Sequence[int], end_texts: Sequence[str]) -> int | None:
    """Reference: the first token whose prefix of the output contains an end text (O(n^2))."""
    for k in range(len(ids)):
        data = vocab.decode_bytes(ids[:k + 1])
        if any(m.encode() in data for m in end_texts):
            return k
    return None


def streamed(p: TextMarkerParser, prompt, chunks, kwargs=None) -> tuple[str, str]:
    st_ = p.new_stream(prompt, kwargs)
    deltas = [st_.feed(ch) for ch in chunks] + [st_.finish()]
    return "".join(d.reasoning or "" for d in deltas), "".join(d.content or "" for d in deltas)


def check(p: TextMarkerParser, prompt, text: str, reasoning: str | None, content: str | None, kwargs=None,
          *, ended_before: bool = False) -> None:
    v = p.vocabulary
    ids = v.encode(text)
    assert p.is_reasoning_end(prompt, kwargs) is ended_before
    assert p.extract_reasoning(v.decode(ids), prompt, kwargs) == (reasoning, content)
    assert streamed(p, prompt, [[t] for t in ids], kwargs) == (reasoning or "", content or "")
    s = p.split(ids, prompt, kwargs)
    tr = p.new_tracker(prompt, kwargs)
    ends = [(i, e) for i, t in enumerate(ids) if (e := tr.advance([t])) is not None]
    if ended_before:
        assert s.ended_before and ends == [] and s.content_ids == ids and s.reasoning_ids == []
        return
    k = naive_end(v, ids, p.end_texts)
    assert (s.end.offset if s.end else None) == k
    assert ends == ([] if k is None else [(k, ReasoningEnd(0, False))])
    assert s.content_ids == ([] if k is None else ids[k + 1:])
    assert p.count_reasoning_tokens(ids, prompt, kwargs) == len(s.reasoning_ids)
    if reasoning:  # every reasoning token carries some of the reasoning text
        assert reasoning.strip() in v.decode(s.reasoning_ids)


# ------------------------------------------------------------------------------------------------
# olmo3

OLMO_USER = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"


def test_olmo3_markers_are_not_single_tokens():
    p = olmo3()
    assert len(p.vocabulary.encode("</think>")) > 1
    assert p.reasoning_end_token_ids == frozenset() and p.implicit_reasoning_end_token_ids == frozenset()


def test_olmo3_template_opens_thinking():
    p = olmo3()
    v = p.vocabulary
    prompt = v.encode(OLMO_USER + "<|im_start|>assistant\n<think>")
    assert p.initial_state(prompt) == THINKING
    check(p, prompt, "Let me add: 2+2=4 — état 中文.</think>\n\nThe answer is 4.",
          "Let me add: 2+2=4 — état 中文.", "\n\nThe answer is 4.")


def test_olmo3_model_writes_think_and_no_end():
    p = olmo3()
    v = p.vocabulary
    prompt = v.encode(OLMO_USER + "<|im_start|>assistant\n")
    check(p, prompt, "<think>abc</think>def", "abc", "def")
    check(p, prompt, "<think>still thinking when cut", "still thinking when cut", None)
    check(p, prompt, "a partial marker at the cut </thi", "a partial marker at the cut </thi", None)


def test_olmo3_template_closes_thinking_and_earlier_turns():
    p = olmo3()
    v = p.vocabulary
    closed = v.encode(OLMO_USER + "<|im_start|>assistant\n<think></think>")
    check(p, closed, "4</think>x", None, "4</think>x", ended_before=True)
    history = OLMO_USER + "<|im_start|>assistant\n<think>old</think>old answer<|im_end|>\n" + OLMO_USER
    prompt = v.encode(history + "<|im_start|>assistant\n")
    assert not p.is_reasoning_end(prompt)
    check(p, prompt, "new</think>answer", "new", "answer")


def test_olmo3_kwargs():
    p = olmo3()
    v = p.vocabulary
    prompt = v.encode(OLMO_USER + "<|im_start|>assistant\n")
    check(p, prompt, "4", None, "4", {"enable_thinking": False}, ended_before=True)
    check(p, prompt, "r</think>c", None, "r</think>c", {"include_reasoning": False}, ended_before=True)
    assert p.initial_state(prompt, {"enable_thinking": True}) == THINKING


def test_end_marker_inside_a_token_and_tail_is_bounded():
    p = olmo3()
    v = p.vocabulary
    ids = v.encode("x</think>\n\n{}")
    end = p.find_reasoning_end(ids)
    assert end is not None and v.decode(ids[:end.offset + 1]).startswith("x</think>")
    tr = p.new_tracker()
    for t in v.encode("long reasoning " * 200 + "</thi"):
        tr.advance([t])
        assert len(tr._state.tail) < len("</think>")
    assert not tr.ended and tr.advance(v.encode("nk>ok")) is not None and tr.ended


def test_marker_the_vocabulary_cannot_spell():
    tiny = Vocabulary("ab", [b"a", b"b"], {}, [], encode=lambda s: [0 if c == "a" else 1 for c in s])
    with pytest.raises(ValueError, match=r"'olmo3'.*'<think>'"):
        get_reasoning_parser("olmo3")(tiny)


# ------------------------------------------------------------------------------------------------
# hunyuan_a13b

HY_USER = "<|startoftext|>You are helpful.<|extra_4|>What is 2+2?<|extra_0|>"


def test_hunyuan_think_then_answer():
    p = hunyuan()
    v = p.vocabulary
    prompt = v.encode(HY_USER)
    check(p, prompt, "<think>\nAdd them.\n</think>\n<answer>\n{\"a\": 4}\n</answer>",
          "\nAdd them.\n\n", "\n{\"a\": 4}\n</answer>")
    check(p, prompt, "<think>\ncut here", "\ncut here", None)


def test_hunyuan_enable_thinking_false_template():
    """The template appends `<think>\\n\\n</think>\\n`: still before `<answer>`, the reasoning is empty."""
    p = hunyuan()
    v = p.vocabulary
    prompt = v.encode(HY_USER + "<think>\n\n</think>\n")
    assert p.initial_state(prompt) == THINKING
    check(p, prompt, "<answer>\n4\n</answer>", None, "\n4\n</answer>")


def test_hunyuan_earlier_turn():
    p = hunyuan()
    v = p.vocabulary
    history = HY_USER + "<answer>4</answer><|eos|><|startoftext|>and 3+3?<|extra_0|>"
    prompt = v.encode(history)
    assert not p.is_reasoning_end(prompt)
    check(p, prompt, "<think>\n6\n</think>\n<answer>6</answer>", "\n6\n\n", "6</answer>")
    check(p, prompt, "x", None, "x", {"include_reasoning": False}, ended_before=True)


# ------------------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.sampled_from(["<think>", "</think>", "</thi", "nk>", "<answer>", "<ans", "wer>",
                                       "ab 中", "\n", "{}"]), max_size=12),
       cuts=st.lists(st.integers(0, 80), max_size=10), family=st.sampled_from(["olmo3", "hunyuan"]))
def test_any_chunking_matches_whole(parts, cuts, family):
    p = olmo3() if family == "olmo3" else hunyuan()
    v = p.vocabulary
    text = "".join(parts)
    ids = v.encode(text)
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(ids))), len(ids)]
    chunks = [ids[a:b] for a, b in zip(bounds, bounds[1:])]
    whole = p.split(ids)
    assert (whole.end.offset if whole.end else None) == naive_end(v, ids, p.end_texts)
    tr = p.new_tracker()
    found, pos = None, 0
    for ch in chunks:
        assert tr.scan(ch) == (e := tr.advance(ch))
        if e is not None:
            assert found is None
            found = pos + e.offset
        pos += len(ch)
    assert found == (whole.end.offset if whole.end else None)
    r, c = p.extract_reasoning(v.decode(ids))
    assert streamed(p, (), chunks) == (r or "", c or "")
    assert tr.ended == (whole.end is not None)


def test_stream_decodes_split_characters():
    p = olmo3()
    v = p.vocabulary
    ids = v.encode("𓀀𝔘</think>ꙮ")
    dec = codecs.getincrementaldecoder("utf-8")()
    assert dec.decode(v.decode_bytes(ids)) == "𓀀𝔘</think>ꙮ"
    assert streamed(p, (), [[t] for t in ids]) == ("𓀀𝔘", "ꙮ")
