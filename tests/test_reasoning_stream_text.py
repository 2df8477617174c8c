"""Streams fed ``(ids, text)``: the ids decide where the reasoning ends, the text only supplies the
characters. A marker written with ordinary tokens (text that looks like the marker) before the real
marker, in the same delta, must not move the split, whatever the engine's detokenizer made of the ids
(our own decoding, or a decoding that skips special tokens).

The reference is the whole-output split on ids (``parser.split``), decoded.
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkgate.reasoning import get_reasoning_parser, load_vocabulary
from thinkgate.reasoning.base import ReasoningParser
from thinkgate.reasoning.vocabulary import Vocabulary


def spelled(v: Vocabulary, marker: str) -> list[int]:
    """``marker`` written with ordinary tokens only (never its special token)."""
    ids = v.encode(marker[:2]) + v.encode(marker[2:])
    assert v.decode(ids) == marker and not set(ids) & set(v.special_token_ids)
    return ids


def own_text(v: Vocabulary) -> Callable[[Sequence[int]], str]:
    """An incremental detokenizer that writes every token (our own decoding)."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    return lambda ids: dec.decode(v.decode_bytes(ids))


def skip_specials_text(v: Vocabulary, keep: frozenset[int] = frozenset()) -> Callable[[Sequence[int]], str]:
    """An incremental detokenizer that skips special tokens (except ``keep``), as engines do by default."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    special = set(v.special_token_ids) - keep
    return lambda ids: dec.decode(v.decode_bytes([t for t in ids if t not in special]))


def run(parser: ReasoningParser, prompt: Sequence[int], chunks: Sequence[Sequence[int]],
        detok: Callable[[Sequence[int]], str] | None) -> tuple[str, str]:
    s = parser.new_stream(prompt)
    deltas = [s.feed(list(ch), None if detok is None else detok(ch)) for ch in chunks]
    deltas.append(s.finish())
    return "".join(d.reasoning or "" for d in deltas), "".join(d.content or "" for d in deltas)


def whole(parser: ReasoningParser, prompt: Sequence[int], ids: Sequence[int],
          drop: frozenset[int] = frozenset()) -> tuple[str, str]:
    v = parser.vocabulary
    sp = parser.split(ids, prompt)
    return (v.decode([t for t in sp.reasoning_ids if t not in drop]),
            v.decode([t for t in sp.content_ids if t not in drop]))


# ------------------------------------------------------------------------------------------------
# token-marker families (TokenMarkerStream): qwen3 on Qwen3.6, deepseek_r1 on DeepSeek V4

TOKEN_FAMILIES = [("qwen3", "qwen3_6"), ("deepseek_r1", "deepseek_v4")]


@pytest.fixture(scope="module", params=TOKEN_FAMILIES, ids=[f for f, _ in TOKEN_FAMILIES])
def token_family(request):
    name, vocab = request.param
    v = load_vocabulary(vocab)
    return get_reasoning_parser(name)(v), v.encode("<think>\n")


def _token_output(v: Vocabulary, end: list[int], content_tail: list[int] = ()) -> list[int]:
    return (v.encode("I could write ") + spelled(v, "</think>") + v.encode(" here, and ")
            + spelled(v, "</think>") + v.encode(" again; done.") + end
            + v.encode('\n\n{"a": "') + spelled(v, "</think>") + v.encode('"}') + list(content_tail))


def test_token_marker_spelled_end_before_the_real_one(token_family):
    parser, prompt = token_family
    v = parser.vocabulary
    ids = _token_output(v, v.encode("</think>"))
    expected = whole(parser, prompt, ids)
    assert expected[0] == "I could write </think> here, and </think> again; done."
    assert run(parser, prompt, [ids], own_text(v)) == expected
    assert run(parser, prompt, [ids], skip_specials_text(v)) == expected
    assert run(parser, prompt, [ids], None) == expected


def test_token_marker_given_characters_are_kept(token_family):
    """The marker's text is in the given text, another special token is not: the split is at the real
    marker and the characters are the given ones (the skipped token has no text)."""
    parser, prompt = token_family
    v = parser.vocabulary
    eos = min(v.stop_token_ids, default=None)
    if eos is None:
        pytest.skip("no stop token")
    ids = _token_output(v, v.encode("</think>"), [eos])
    keep = parser.reasoning_end_token_ids | parser.implicit_reasoning_end_token_ids
    expected = whole(parser, prompt, ids, drop=frozenset({eos}))
    assert run(parser, prompt, [ids], skip_specials_text(v, keep=frozenset(keep))) == expected


def test_token_marker_spelled_implicit_end(qwen_vocab):
    """Qwen's ``<tool_call>`` ends the thinking and starts the content; spelled, it is reasoning text."""
    v = qwen_vocab
    parser = get_reasoning_parser("qwen3")(v)
    prompt = v.encode("<think>\n")
    ids = (v.encode("maybe ") + spelled(v, "<tool_call>") + v.encode(" or ") + spelled(v, "</think>")
           + v.encode("<tool_call>") + v.encode('\n{"name": "f"}\n'))
    expected = whole(parser, prompt, ids)
    assert expected[0] == "maybe <tool_call> or </think>"
    for detok in (own_text(v), skip_specials_text(v), skip_specials_text(v, frozenset(parser.implicit_end_ids))):
        assert run(parser, prompt, [ids], detok) == expected


# ------------------------------------------------------------------------------------------------
# property: random outputs and chunkings, fed with their texts, give the whole split

_PIECES = ["word", " two", ", ", ".", "\n", "</think>", "<think>", "<tool_call>", "</"]


@st.composite
def token_outputs(draw, v: Vocabulary, implicit: bool):
    def part(n):
        out: list[int] = []
        for p in draw(st.lists(st.sampled_from(_PIECES), max_size=n)):
            out += spelled(v, p) if p.startswith("<") and p.endswith(">") else v.encode(p)
        return out

    reasoning = part(8)
    if draw(st.booleans()):
        reasoning += v.encode("<think>")  # a real start marker inside the thinking: dropped
        reasoning += part(4)
    ends = ["</think>"] + (["<tool_call>"] if implicit else [])
    end = v.encode(draw(st.sampled_from(ends)))
    ids = reasoning + end + part(8)
    cuts = draw(st.lists(st.integers(0, len(ids)), max_size=6))
    bounds = [0, *sorted(set(cuts)), len(ids)]
    return ids, [ids[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@pytest.mark.parametrize("name,vocab", TOKEN_FAMILIES)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_token_marker_chunked_with_text_property(name, vocab, data):
    v = load_vocabulary(vocab)
    parser = get_reasoning_parser(name)(v)
    prompt = v.encode("<think>\n")
    ids, chunks = data.draw(token_outputs(v, bool(parser.implicit_end_ids)))
    expected = whole(parser, prompt, ids)
    assert run(parser, prompt, chunks, None) == expected
    assert run(parser, prompt, chunks, own_text(v)) == expected
    assert run(parser, prompt, chunks, skip_specials_text(v)) == expected


# ------------------------------------------------------------------------------------------------
# granite (text markers written with ordinary tokens): the marker the ids complete is the real one;
# text that only the detokenizer made look like a marker (cleaned-up spaces, a skipped special token
# between the pieces) ends nothing

GRANITE_ON = {"thinking": True}


def cleanup_text(v: Vocabulary) -> Callable[[Sequence[int]], str]:
    """A detokenizer that cleans up tokenization spaces (" 's" -> "'s", as HF's clean_up_tokenization)."""
    own = own_text(v)
    return lambda ids: own(ids).replace(" 's", "'s")


@pytest.fixture(scope="module", params=["qwen3_6", "deepseek_v4"])
def granite(request):
    v = load_vocabulary(request.param)
    return get_reasoning_parser("granite")(v, GRANITE_ON)


def _granite_output(v: Vocabulary, look_alike: list[int]) -> list[int]:
    return (v.encode("Here is my thought process:") + v.encode("\nI think ") + look_alike
            + v.encode(" is not it. ") + v.encode("Here is my response:") + v.encode("\n\nAnswer."))


def test_granite_cleaned_up_look_alike_marker(granite):
    v = granite.vocabulary
    look_alike = v.encode("Here") + v.encode(" 's my response:")
    assert v.decode(look_alike) == "Here 's my response:"
    ids = _granite_output(v, look_alike)
    expected = whole(granite, (), ids)
    assert expected == ("\nI think Here 's my response: is not it. ", "\n\nAnswer.")
    assert run(granite, (), [ids], own_text(v)) == expected
    assert run(granite, (), [ids], cleanup_text(v)) == expected
    assert run(granite, (), [ids], None) == expected


def test_granite_look_alike_marker_split_by_a_skipped_special(granite):
    v = granite.vocabulary
    special = min(v.stop_token_ids)
    look_alike = v.encode("Here is my") + [special] + v.encode(" response:")
    ids = _granite_output(v, look_alike)
    expected = whole(granite, (), ids)
    assert expected[1] == "\n\nAnswer."
    assert run(granite, (), [ids], own_text(v)) == expected
    assert run(granite, (), [ids], skip_specials_text(v)) == expected
    assert run(granite, (), [ids], None) == expected


@st.composite
def granite_outputs(draw, v: Vocabulary):
    special = min(v.stop_token_ids)
    pool = {"word": v.encode("word"), " x": v.encode(" x"), "\n": v.encode("\n"),
            "cleanup": v.encode("Here") + v.encode(" 's my response:"),
            "split": v.encode("Here is my") + [special] + v.encode(" response:")}
    reasoning = [t for k in draw(st.lists(st.sampled_from(sorted(pool)), max_size=6)) for t in pool[k]]
    content = [t for k in draw(st.lists(st.sampled_from(sorted(pool)), max_size=4)) for t in pool[k]]
    end = v.encode("Here is my response:") if draw(st.booleans()) else []
    ids = v.encode("Here is my thought process:") + reasoning + end + content
    cuts = draw(st.lists(st.integers(0, len(ids)), max_size=6))
    bounds = [0, *sorted(set(cuts)), len(ids)]
    return ids, [ids[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]


@pytest.mark.parametrize("vocab", ["qwen3_6", "deepseek_v4"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_granite_chunked_with_text_property(vocab, data):
    """Any chunking, any of the detokenizers: the split is the ids' (the characters of a skipped
    special token, or cleaned-up spaces, may come from the given text, so both sides are normalized)."""
    v = load_vocabulary(vocab)
    parser = get_reasoning_parser("granite")(v, GRANITE_ON)
    ids, chunks = data.draw(granite_outputs(v))
    expected = whole(parser, (), ids)
    assert run(parser, (), chunks, None) == expected
    assert run(parser, (), chunks, own_text(v)) == expected
    special = v.decode([min(v.stop_token_ids)])
    for detok, norm in ((skip_specials_text(v), lambda s: s.replace(special, "")),
                        (cleanup_text(v), lambda s: s.replace(" 's", "'s"))):
        got = run(parser, (), chunks, detok)
        assert tuple(map(norm, got)) == tuple(map(norm, expected))
