"""granite (reasoning/granite.py): text markers "Here is my thought process:" / "Here is my response:"
on the real Qwen3.6 and DeepSeek V4 vocabularies, where each marker is several ordinary tokens.

The oracle below is a brute-force reference written with plain string search over the whole decoded
output (no state machine, no incremental state); the parser's whole-output split, its tracker in any
chunking and its stream in any chunking must all agree with it.
"""

from __future__ import annotations

import codecs
import random
from bisect import bisect_right
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.reasoning.base import ReasoningEnd
from thinkgate.reasoning.granite import END_MARKERS, ENDED, PENDING, START_MARKERS, THINKING, GraniteReasoningParser
from thinkgate.reasoning.vocabulary import Vocabulary

ON = {"thinking": True}
WS = " \t\n\r\x0b\x0c"


@pytest.fixture(scope="module", params=["qwen", "deepseek"])
def parser(request, qwen_vocab, deepseek_vocab) -> GraniteReasoningParser:
    return GraniteReasoningParser(qwen_vocab if request.param == "qwen" else deepseek_vocab)


@pytest.fixture(scope="module")
def qparser(qwen_vocab) -> GraniteReasoningParser:
    return GraniteReasoningParser(qwen_vocab, ON)


@pytest.fixture(scope="module")
def dparser(deepseek_vocab) -> GraniteReasoningParser:
    return GraniteReasoningParser(deepseek_vocab, ON)


# ------------------------------------------------------------------------------------------------
# the oracle: whole-output, string search, then byte offset -> token index


def oracle(vocab: Vocabulary, ids: Sequence[int], mode: int = PENDING, prefix: bytes = b""):
    """(end offset, is_content) or None, reasoning ids, content ids, reasoning text, content text.

    ``prefix``: in THINKING, the prompt's prefilled bytes (an end marker may begin there)."""
    data = vocab.decode_bytes(ids)
    text = data.decode("utf-8")
    starts = [m.encode() for m in START_MARKERS]
    stops = [m.encode() for m in END_MARKERS]
    ends, n = [], 0
    for t in ids:
        n += len(vocab.token_bytes[t])
        ends.append(n)

    def tok(byte_pos: int) -> int:
        return bisect_right(ends, byte_pos) if byte_pos >= 0 else 0

    if mode == ENDED:
        return None, [], list(ids), "", text
    r_from = 0  # byte where the thoughts start
    if mode == PENDING:
        body = data.lstrip(WS.encode())
        lead = len(data) - len(body)
        opened = [m for m in starts if body.startswith(m)]
        closed = [m for m in stops if body.startswith(m)]
        if closed:
            e = lead + len(closed[0])
            k = tok(e - 1)
            return (k, False), [], list(ids[k + 1:]), "", data[e:].decode()
        if not opened:
            if any(m.startswith(body) for m in starts + stops):
                return None, list(ids), [], text, ""  # undecided at the end: never ended
            # the first byte (after the whitespace) that matches no marker prefix
            j = 0
            while any(m.startswith(body[:j + 1]) for m in starts + stops):
                j += 1
            k = tok(lead + j)
            return (k, True), [], list(ids[k:]), "", text
        r_from = lead + len(opened[0])
    else:
        data = prefix + data
        r_from = len(prefix)
    hits = [(data.find(m, r_from - len(m) + 1 if r_from else 0), m) for m in stops]
    hits = [(s, m) for s, m in hits if s >= 0 and s + len(m) > r_from]
    shift = len(prefix) if mode == THINKING else 0
    r_tok = tok(r_from - shift - 1) + 1 if r_from - shift > 0 else 0
    if not hits:
        return None, list(ids[r_tok:]), [], data[r_from:].decode(), ""
    s, m = min(hits)
    e = s + len(m)
    s, e = s - shift, e - shift
    k = tok(e - 1)
    r_ids = list(ids[r_tok:tok(s)]) if tok(s) > r_tok else []
    r_text = data[r_from:s + shift].decode() if s + shift > r_from else ""
    return (k, False), r_ids, list(ids[k + 1:]), r_text, data[e + shift:].decode()


def prefill_bytes(parser, prompt: Sequence[int]) -> bytes:
    """The prompt's bytes after its last special token."""
    v = parser.vocabulary
    i = len(prompt)
    while i > 0 and prompt[i - 1] not in v.special_token_ids:
        i -= 1
    return v.decode_bytes(prompt[i:])


def chunked(ids: Sequence[int], cuts: Sequence[int]) -> list[list[int]]:
    pos = sorted({c % (len(ids) + 1) for c in cuts} | {0, len(ids)})
    return [list(ids[a:b]) for a, b in zip(pos, pos[1:])]


def run_tracker(parser, ids, chunks, prompt=(), kwargs=None):
    tr = parser.new_tracker(prompt, kwargs)
    base, found = 0, None
    for ch in chunks:
        before = tr.scan(ch)
        assert tr.scan(ch) == before  # scan is pure
        e = tr.advance(ch)
        assert e == before  # advance finds what scan found
        if e is not None:
            assert found is None
            found = (base + e.offset, e.is_content)
            assert tr.ended
        base += len(ch)
    if tr.ended:
        assert tr.advance(ids[:1]) is None and tr.scan(ids) is None  # latched
    return found, tr


def run_stream(parser, ids, chunks, prompt=(), kwargs=None, with_text=True):
    v = parser.vocabulary
    dec = codecs.getincrementaldecoder("utf-8")("strict")
    s = parser.new_stream(prompt, kwargs)
    deltas = [s.feed(ch, dec.decode(v.decode_bytes(ch)) if with_text else None) for ch in chunks]
    deltas.append(s.finish())
    return "".join(d.reasoning or "" for d in deltas), "".join(d.content or "" for d in deltas)


def check_all(parser: GraniteReasoningParser, ids: Sequence[int], chunks=None, prompt=(), kwargs=ON):
    v = parser.vocabulary
    mode = parser.initial_state(prompt, kwargs)
    end, r_ids, c_ids, r_text, c_text = oracle(v, ids, mode, prefill_bytes(parser, prompt))
    sp = parser.split(ids, prompt, kwargs)
    assert (None if sp.end is None else (sp.end.offset, sp.end.is_content)) == end
    if mode == PENDING:  # find_reasoning_end reads the output of a thinking request from its start
        assert parser.find_reasoning_end(ids) == sp.end
    assert sp.reasoning_ids == r_ids
    assert sp.content_ids == c_ids
    assert parser.extract_content_ids(ids, prompt, kwargs) == c_ids
    assert parser.count_reasoning_tokens(ids, prompt, kwargs) == len(r_ids)
    text = v.decode(ids)
    assert parser.extract_reasoning(text, prompt, kwargs) == (r_text or None, c_text or None)
    for ch in ([[t] for t in ids], [list(ids)], *([chunks] if chunks else [])):
        found, _ = run_tracker(parser, ids, ch, prompt, kwargs)
        assert found == end
        assert run_stream(parser, ids, ch, prompt, kwargs) == (r_text, c_text)
        assert run_stream(parser, ids, ch, prompt, kwargs, with_text=False) == (r_text, c_text)
    if end is not None and not end[1]:
        assert ids[end[0]] in parser.reasoning_end_token_ids
    return sp, r_text, c_text


# ------------------------------------------------------------------------------------------------
# exact splits on the real tokenizations


def test_markers_are_several_real_tokens(qwen_vocab, deepseek_vocab):
    for v in (qwen_vocab, deepseek_vocab):
        for m in START_MARKERS + END_MARKERS:
            assert len(v.encode(m)) >= 4, (v.name, m)
            assert v.token_id(m) is None


def test_exact_split_qwen(qparser, qwen_vocab):
    v = qwen_vocab
    text = "Here is my thought process:\nThe user wants JSON.\n\nHere is my response:\n{\"a\": 1}"
    ids = v.encode(text)
    # Qwen3.6 splits ":" from "\n": the marker ends on a token boundary
    assert [v.token_bytes[t] for t in ids[:6]] == [b"Here", b" is", b" my", b" thought", b" process", b":"]
    sp, r_text, c_text = check_all(qparser, ids)
    k = ids.index(v.encode(":")[0], 10)
    assert sp.end == ReasoningEnd(k, False)
    assert v.decode(sp.content_ids) == "\n{\"a\": 1}" == c_text
    assert r_text == "\nThe user wants JSON.\n\n"
    assert v.decode(sp.reasoning_ids) == r_text
    assert qparser.extract_reasoning(text) == ("\nThe user wants JSON.\n\n", "\n{\"a\": 1}")


def test_straddling_marker_token_deepseek(dparser, deepseek_vocab):
    """DeepSeek V4 writes ":\\n" as one token: it completes the marker and carries a newline. The grammar
    starts at the next token, so that newline is content text but not a content id."""
    v = deepseek_vocab
    text = "Here is my thought process:\nI think.\n\nHere is my response:\nThe answer"
    ids = v.encode(text)
    sp, r_text, c_text = check_all(dparser, ids)
    k = sp.end.offset
    assert v.token_bytes[ids[k]] == b":\n"
    assert sp.end.is_content is False
    assert c_text == "\nThe answer"
    tail = v.token_bytes[ids[k]][1:].decode()
    assert c_text == tail + v.decode(sp.content_ids)
    assert v.decode(sp.content_ids) == "The answer"
    # the opening's ":\n" straddles too: its newline is reasoning text, not a reasoning id
    assert r_text == "\nI think.\n\n" and v.decode(sp.reasoning_ids) == "I think.\n\n"
    assert dparser.count_reasoning_tokens(ids) == len(v.encode("I think.\n\n"))


def test_heres_variant_and_marker_not_at_token_start(parser):
    v = parser.vocabulary
    text = "Here's my thought process: let me see. Here's my response: done"
    sp, r_text, c_text = check_all(parser, v.encode(text))
    assert (r_text, c_text) == (" let me see. ", " done")
    # " Here" is one token holding the reasoning's space: it belongs to the marker span, not reasoning
    assert v.decode(sp.reasoning_ids) == " let me see."


def test_no_end_marker_is_all_reasoning(parser):
    v = parser.vocabulary
    ids = v.encode("Here is my thought process:\nstep 1, step 2, and then the max_tokens cut")
    sp, r_text, c_text = check_all(parser, ids)
    assert sp.end is None and sp.content_ids == [] and c_text == ""
    assert r_text == "\nstep 1, step 2, and then the max_tokens cut"
    assert parser.extract_content_ids(ids, (), ON) == []
    # cut inside the end marker, or inside the opening: still never ended
    for cut in ("Here is my thought process: x Here is my resp", "Here is my tho", "  \n"):
        sp, r_text, c_text = check_all(parser, v.encode(cut))
        assert sp.end is None and c_text == ""


def test_near_misses_do_not_end(parser):
    v = parser.vocabulary
    for miss in ("Here is my response.", "here is my response:", "Here is my  response:", "Here is my response",
                 "Here is my responses:", "Here is the response:", "Here’s my response:"):
        text = "Here is my thought process: a " + miss + " b"
        sp, r_text, c_text = check_all(parser, v.encode(text))
        assert sp.end is None, miss
        assert c_text == "" and r_text.endswith(miss + " b")
    # a second opening inside the thoughts is just reasoning
    sp, r_text, c_text = check_all(parser, v.encode(
        "Here is my thought process: x Here is my thought process: y Here is my response: z"))
    assert r_text == " x Here is my thought process: y " and c_text == " z"


def test_model_skips_thinking(parser):
    v = parser.vocabulary
    # straight to JSON: the first token is content, the grammar applies from it
    ids = v.encode('{"a": 1}')
    sp, r_text, c_text = check_all(parser, ids)
    assert sp.end == ReasoningEnd(0, True) and sp.content_ids == ids and c_text == '{"a": 1}'
    # leading whitespace, then an answer: the whitespace was sampled before the decision
    ids = v.encode("\n\nThe capital is Paris.")
    sp, r_text, c_text = check_all(parser, ids)
    assert sp.end.is_content and c_text == "\n\nThe capital is Paris."
    assert c_text.startswith(v.decode(ids[:sp.end.offset]))
    # an answer that begins like the marker: "Here is" were sampled unconstrained, content from " the"
    ids = v.encode("Here is the answer: 4")
    sp, r_text, c_text = check_all(parser, ids)
    assert sp.end == ReasoningEnd(2, True)
    assert v.decode(ids[:2]) == "Here is" and v.decode(sp.content_ids) == " the answer: 4"
    assert c_text == "Here is the answer: 4" and r_text == ""
    # the response marker first (no thoughts): it and the whitespace before it are dropped
    for text in ("Here is my response: 4", "\nHere is my response: 4"):
        sp, r_text, c_text = check_all(parser, v.encode(text))
        assert sp.end.is_content is False and (r_text, c_text) == ("", " 4")
        assert sp.reasoning_ids == []


def test_marker_split_mid_token_across_steps(qparser, qwen_vocab):
    """A non-canonical tokenization cuts the marker inside words, and the steps cut it again."""
    v = qwen_vocab
    pieces = ["Here is my thought process:", " x. Her", "e is my res", "p", "onse", ":", " {}"]
    ids = [t for p in pieces for t in v.encode(p)]
    assert v.decode(ids) == "".join(pieces)
    k = len([t for p in pieces[:-1] for t in v.encode(p)]) - 1  # the ":" token
    for cut in range(1, len(ids)):
        chunks = [ids[:cut], ids[cut:]]
        found, _ = run_tracker(qparser, ids, chunks)
        assert found == (k, False)
    sp, r_text, c_text = check_all(qparser, ids, chunked(ids, [7, 9, 10, 11]))
    assert (r_text, c_text) == (" x. ", " {}")


def test_speculative_drafts_scan_then_commit(qparser, qwen_vocab):
    v = qwen_vocab
    ids = v.encode("Here is my thought process: hmm. Here is my response: ok")
    k = qparser.find_reasoning_end(ids).offset
    tr = qparser.new_tracker((), ON)
    assert tr.advance(ids[:k - 2]) is None
    draft = ids[k - 2:k + 2]
    assert tr.scan(draft) == ReasoningEnd(2, False)
    assert not tr.ended  # scan changed nothing
    assert tr.scan(draft[:2]) is None
    assert tr.advance(draft[:2]) is None
    assert tr.advance(draft[2:]) == ReasoningEnd(0, False) and tr.ended


# ------------------------------------------------------------------------------------------------
# prompt shapes and chat_template_kwargs


def _chatml(v: Vocabulary, turns: str) -> list[int]:
    return v.encode(turns)


def test_prompt_shapes(qwen_vocab):
    v = qwen_vocab
    p = GraniteReasoningParser(v)
    gen = _chatml(v, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    # the template thinks only when asked: default off -> the grammar applies from the first token
    assert p.is_reasoning_end(gen) and p.initial_state(gen) == ENDED
    assert p.extract_reasoning("Here is my thought process: a Here is my response: b", gen) == (
        None, "Here is my thought process: a Here is my response: b")
    assert p.new_tracker(gen).ended
    for kw in ({"thinking": True}, {"enable_thinking": True}, {"thinking": "true"}):
        assert not p.is_reasoning_end(gen, kw) and p.initial_state(gen, kw) == PENDING
    assert p.is_reasoning_end(gen, {"thinking": False})
    assert p.is_reasoning_end(gen, {"thinking": True, "include_reasoning": False})
    # construction kwargs are the default, per-request kwargs override them
    p_on = GraniteReasoningParser(v, ON)
    assert not p_on.is_reasoning_end(gen) and p_on.is_reasoning_end(gen, {"thinking": False})
    # an earlier turn's markers do not count
    hist = _chatml(v, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHere is my thought process: a "
                      "Here is my response: b<|im_end|>\n<|im_start|>user\nAgain<|im_end|>\n<|im_start|>assistant\n")
    assert p.initial_state(hist, ON) == PENDING
    # a prefilled opening: thinking from the first token (no opening expected in the output)
    pre = gen + v.encode("Here is my thought process:\n")
    assert p.initial_state(pre) == THINKING and p.initial_state(pre, {"thinking": False}) == THINKING
    out = v.encode("still thinking. Here is my response: yes")
    sp, r_text, c_text = check_all(p, out, prompt=pre, kwargs=None)
    assert (r_text, c_text) == ("still thinking. ", " yes")
    # prefilled thoughts already closed: ended before the output, all of it content
    closed = gen + v.encode("Here is my thought process: a\nHere is my response:\n")
    assert p.is_reasoning_end(closed, ON)
    sp, r_text, c_text = check_all(p, out, prompt=closed, kwargs=ON)
    assert sp.ended_before and sp.content_ids == out and r_text == ""
    # a prefill that stops inside the end marker: the output completes it
    part = gen + v.encode("Here is my thought process: a Here is my resp")
    out2 = v.encode("onse: b")
    assert p.initial_state(part) == THINKING
    sp, r_text, c_text = check_all(p, out2, prompt=part, kwargs=None)
    assert sp.end == ReasoningEnd(len(v.encode("onse:")) - 1, False)
    assert (r_text, c_text) == ("", " b")


def test_deepseek_style_prompt(deepseek_vocab):
    v = deepseek_vocab
    p = GraniteReasoningParser(v)
    prompt = v.encode("<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜>")
    assert p.initial_state(prompt, ON) == PENDING and p.is_reasoning_end(prompt)
    check_all(p, v.encode("Here is my thought process: ok Here is my response: fine"), prompt=prompt)


# ------------------------------------------------------------------------------------------------
# any chunking, any tokenization, same result (hypothesis)

FRAGMENTS = ["Here is my thought process:", "Here's my thought process:", "Here is my response:",
             "Here's my response:", "Here", " is", " my", " response", " thought", "Here is my resp",
             "onse:", ":", ":\n", "\n", "\n\n", " ", "  ", "Here is", "'s my", "{\"a\": 1}", "ok.",
             "é", "中文", "😀", " here is my response:", "Here is my response"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(frags=st.lists(st.sampled_from(FRAGMENTS), max_size=14), seed=st.integers(0, 2**32 - 1),
       vocab_name=st.sampled_from(["qwen", "deepseek"]),
       prompt_shape=st.sampled_from(["on", "off", "prefill_open", "prefill_closed"]),
       canonical=st.booleans())
def test_any_chunking_any_tokenization(qparser, dparser, frags, seed, vocab_name, prompt_shape, canonical):
    p = qparser if vocab_name == "qwen" else dparser
    v = p.vocabulary
    rng = random.Random(seed)
    text = "".join(frags)
    if canonical:
        ids = v.encode(text)
    else:  # cut the text at random characters and encode each piece: markers split mid-token
        cuts = sorted(rng.sample(range(1, len(text)), min(len(text) - 1, rng.randint(0, 6)))) if len(text) > 1 else []
        bounds = [0, *cuts, len(text)]
        ids = [t for a, b in zip(bounds, bounds[1:]) for t in v.encode(text[a:b])]
    assert v.decode(ids) == text
    gen = v.encode("<|im_start|>assistant\n") if vocab_name == "qwen" else v.encode("<｜Assistant｜>")
    prompt, kwargs = {
        "on": (gen, ON), "off": (gen, {"thinking": False}),
        "prefill_open": (gen + v.encode("Here is my thought process:"), {}),
        "prefill_closed": (gen + v.encode("Here is my thought process: Here is my response:"), ON),
    }[prompt_shape]
    chunks = chunked(ids, [rng.randint(0, len(ids)) for _ in range(rng.randint(0, 5))])
    check_all(p, ids, chunks, prompt, kwargs)


# ------------------------------------------------------------------------------------------------
# contract details


def test_bounded_state_on_long_thoughts(qparser, qwen_vocab):
    v = qwen_vocab
    step = v.encode("Let me think about this carefully, Here is my resp and more. ")
    tr = qparser.new_tracker((), ON)
    tr.advance(v.encode("Here is my thought process:"))
    for _ in range(2000):
        assert tr.advance(step) is None
        assert len(tr._state.part) <= max(len(m) for m in END_MARKERS) - 1
    assert tr.state == THINKING
    e = tr.advance(v.encode("Here is my response: x"))
    assert e is not None and tr.ended


def test_reasoning_end_token_ids(qparser, dparser, qwen_vocab, deepseek_vocab):
    assert qwen_vocab.encode(":")[0] in qparser.reasoning_end_token_ids
    assert deepseek_vocab.encode(":\n")[0] in dparser.reasoning_end_token_ids
    assert qwen_vocab.encode("Here")[0] not in qparser.reasoning_end_token_ids
    assert not (qparser.reasoning_end_token_ids & qwen_vocab.special_token_ids)
    for t in qparser.reasoning_end_token_ids:
        b = qwen_vocab.token_bytes[t]
        head = b[:b.index(b":") + 1]
        assert any(m.encode().endswith(head) for m in END_MARKERS)
    assert qparser.implicit_reasoning_end_token_ids == frozenset()


def test_vocabulary_without_markers_raises():
    v = Vocabulary("tiny", [b"a", b"b", b"H", b"e", b"<|end|>"], {"<|end|>": 4}, [4],
                   encode=lambda s: [])
    with pytest.raises(ValueError, match=r"'granite'.*Here is my thought process:"):
        GraniteReasoningParser(v)
    # specials never count as spelling a marker
    tb = [bytes([i]) for i in range(256) if i != ord(":")] + [b":"]
    v2 = Vocabulary("no-colon", tb, {":": len(tb) - 1}, [])
    with pytest.raises(ValueError, match=r"granite.*marker"):
        GraniteReasoningParser(v2)


def test_registry_and_stream_misuse(qwen_vocab):
    assert get_reasoning_parser("granite") is GraniteReasoningParser
    s = GraniteReasoningParser(qwen_vocab, ON).new_stream()
    s.feed(qwen_vocab.encode("Here is my tho"))
    assert s.finish().reasoning == "Here is my tho"
    with pytest.raises(ValueError):
        s.feed([1])


@pytest.mark.parametrize("prefix", ["", "\n", "Here", "Here is my", "  Here's my re", "Here is my thought process"])
def test_pending_keep_token_ids_match_the_tracker(qparser, qwen_vocab, prefix):
    """While pending, ``keep_thinking_token_ids`` is exactly the set of next tokens that do not make
    the output content (checked against ``scan`` on every kept token and a random sample of the rest)."""
    v = qwen_vocab
    tr = qparser.new_tracker((), ON)
    assert tr.advance(v.encode(prefix) if prefix else []) is None
    assert tr.state == PENDING
    keep = tr.keep_thinking_token_ids()
    rng = random.Random(len(prefix))
    sample = set(rng.sample(range(v.vocab_size), 4000)) | set(keep) | set(v.special_token_ids)
    for t in sample:
        e = tr.scan([t])
        assert (t in keep) == (e is None or not e.is_content), (prefix, v.token_bytes[t])
    assert v.encode("Here")[0] in qparser.new_tracker((), ON).keep_thinking_token_ids()
    assert v.encode("{")[0] not in keep
    tr.advance(v.encode("{"))
    assert tr.keep_thinking_token_ids() is None  # ended
    assert qparser.new_tracker((), {"thinking": False}).keep_thinking_token_ids() is None
