"""The vLLM 0.34 reasoning names added with issue 20 that are not plain rows of test_reasoning_families.py:
aliases, the token-sequence families (Kimi K3 XTML, PLaMo 3), Hunyuan's suffixed markers, K2 Horizon's
three marker pairs, Inkling's typed blocks, MiniMax-M3's ``thinking_mode`` and MiniMax-M2 append-think.

Vocabularies: the real Qwen3.6 / DeepSeek V4 tables, plus each family's special tokens added as new ids
where no offline tokenizer ships them (``with_specials``). Marker texts are the families' own (their
chat templates and vLLM 0.34's parsers); expected splits are written from those texts.
"""

from __future__ import annotations

import random
from functools import lru_cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from support import detokenizer, with_specials

from thinkgate.reasoning import get_reasoning_parser, load_vocabulary
from thinkgate.reasoning.base import ReasoningEnd

XTML = ("<|open|>", "<|close|>", "<|sep|>")
OPEN, CLOSE = "<|open|>think<|sep|>", "<|close|>think<|sep|>"
RESP_OPEN, RESP_CLOSE, MSG_CLOSE = "<|open|>response<|sep|>", "<|close|>response<|sep|>", "<|close|>message<|sep|>"
PLAMO = ("<|plamo:begin_", "<|plamo:end_", ":plamo|>", "<|plamo:tag|>")
P_OPEN, P_CLOSE = "<|plamo:begin_think:plamo|>", "<|plamo:end_think:plamo|>"
P_TOOLS = "<|plamo:begin_tool_requests:plamo|>"


@lru_cache(maxsize=None)
def vocab(extra: tuple[str, ...], base: str = "qwen3_6"):
    return with_specials(load_vocabulary(base), extra, f"{base}+{len(extra)}") if extra else load_vocabulary(base)


@lru_cache(maxsize=None)
def parser(name: str, extra: tuple[str, ...], base: str = "qwen3_6"):
    return get_reasoning_parser(name)(vocab(extra, base))


def run_all_ways(p, prompt, ids, kw=None):
    """Whole split, one-token tracker, random chunkings with scan == advance, streams; all must agree."""
    v = p.vocabulary
    whole = p.split(ids, prompt, kw)
    rng = random.Random(len(ids))
    for trial in range(12):
        cuts = [0] + sorted(rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 5)))) + [len(ids)] \
            if len(ids) > 1 else [0, len(ids)]
        if trial == 0:
            cuts = list(range(len(ids) + 1))
        tr = p.new_tracker(prompt, kw)
        found = None
        st_ = p.new_stream(prompt, kw)
        detok = detokenizer(v)
        r = c = ""
        for a, b in zip(cuts, cuts[1:]):
            chunk = ids[a:b]
            if not chunk:
                continue
            # drafts: scanning any prefix of the chunk changes nothing and agrees with advance
            for k in range(1, len(chunk) + 1):
                e = tr.scan(chunk[:k])
                assert e is None or e.offset == k - 1 or e == tr.scan(chunk)
            peek = tr.scan(chunk)
            e = tr.advance(chunk)
            assert peek == e
            if e is not None:
                assert found is None
                found = ReasoningEnd(a + e.offset, e.is_content)
            d = st_.feed(chunk, detok(chunk))
            r += d.reasoning or ""
            c += d.content or ""
        d = st_.finish()
        r += d.reasoning or ""
        c += d.content or ""
        assert found == whole.end, (cuts, found, whole.end)
        assert (r or None, c or None) == p.extract_reasoning(v.decode(ids), prompt, kw), cuts
    return whole


# -- aliases -------------------------------------------------------------------------------------

@pytest.mark.parametrize("alias, family", [("deepseek_v41", "deepseek_v4"), ("minicpmv", "qwen3")])
def test_aliases_share_their_family(alias, family):
    assert get_reasoning_parser(alias) is get_reasoning_parser(family)


# -- Kimi K3: three-id XTML markers -----------------------------------------------------------------

def k3():
    return parser("kimi_k3", XTML)


def test_kimi_k3_split_exact_across_chunks_and_drafts():
    p = k3()
    v = p.vocabulary
    prompt = v.encode("<|open|>user<|sep|>Q<|close|>user<|sep|><|open|>assistant<|sep|>" + OPEN)
    out = "Let me think 中文 🙂." + CLOSE + RESP_OPEN + '{"a": 1}' + RESP_CLOSE + MSG_CLOSE
    ids = v.encode(out)
    whole = run_all_ways(p, prompt, ids)
    close_ids = v.encode(CLOSE)
    assert whole.end == ReasoningEnd(len(v.encode("Let me think 中文 🙂.")) + len(close_ids) - 1, False)
    assert v.decode(whole.reasoning_ids) == "Let me think 中文 🙂."
    assert p.extract_reasoning(out, prompt) == ("Let me think 中文 🙂.", RESP_OPEN + '{"a": 1}' + RESP_CLOSE + MSG_CLOSE)
    # the model opens the think channel itself: dropped
    ids2 = v.encode(OPEN + "x" + CLOSE + "y")
    assert p.extract_reasoning(v.decode(ids2)) == ("x", "y")
    run_all_ways(p, [], ids2)


def test_kimi_k3_marker_text_spelled_with_ordinary_tokens_never_ends():
    p = k3()
    v = p.vocabulary
    base = load_vocabulary("qwen3_6")
    hostile = base.encode("<|close|>think<|sep|>")  # the text, not the special tokens
    assert all(t not in v.special_token_ids for t in hostile)
    ids = v.encode("a ") + hostile + v.encode(" b")
    tr = p.new_tracker()
    assert tr.advance(ids) is None and not tr.ended
    assert p.split(ids).end is None
    # a half marker (special open, then something else) is reasoning, released when it breaks
    ids = v.encode("<|close|>thin") + v.encode("king" + CLOSE + "ok")
    whole = run_all_ways(p, [], ids)
    assert v.decode(whole.reasoning_ids) == "<|close|>thinking"


def test_kimi_k3_prompt_and_switch():
    p = k3()
    v = p.vocabulary
    assert p.is_reasoning_end(v.encode("<|open|>assistant<|sep|>" + OPEN + "x" + CLOSE))
    assert not p.is_reasoning_end(v.encode("<|open|>assistant<|sep|>" + OPEN))
    assert p.is_reasoning_end(v.encode("<|open|>assistant<|sep|>"), {"thinking": False})
    assert not p.is_reasoning_end(v.encode("<|open|>assistant<|sep|>"))
    # an answer channel straight from the thinking ends it
    ids = v.encode("hmm" + RESP_OPEN + "hi" + RESP_CLOSE)
    whole = run_all_ways(p, [], ids)
    assert v.decode(whole.reasoning_ids) == "hmm" and p.extract_reasoning(v.decode(ids)) == ("hmm", "hi" + RESP_CLOSE)


def test_kimi_k3_forced_end_and_ending_ids():
    p = k3()
    v = p.vocabulary
    tr = p.new_tracker()
    forced = tr.forced_end_token_ids()
    assert v.decode(forced) == CLOSE
    assert tr.ending_token_ids() == frozenset()  # no single next id ends a three-id marker
    assert tr.ending_token_ids(v.encode("<|close|>think")) == {v.token_id("<|sep|>")}
    assert tr.scan(forced) == ReasoningEnd(len(forced) - 1, False)


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(st.sampled_from(["r", "open", "close", "resp", "half", "rclose"]), max_size=10))
def test_kimi_k3_any_stream(parts):
    p = k3()
    v = p.vocabulary
    words = {"r": "ab 中 ", "open": OPEN, "close": CLOSE, "resp": RESP_OPEN, "half": "<|close|>th", "rclose": RESP_CLOSE}
    ids = v.encode("".join(words[x] for x in parts))
    if ids:
        run_all_ways(p, [], ids)


def test_kimi_k3_missing_markers_is_a_clear_error():
    with pytest.raises(ValueError, match=r"'kimi_k3'.*<\|open\|>"):
        get_reasoning_parser("kimi_k3")(load_vocabulary("qwen3_6"))


# -- PLaMo 3 ------------------------------------------------------------------------------------------

def test_plamo3_sequences_end_and_tool_block():
    p = parser("plamo3", PLAMO)
    v = p.vocabulary
    ids = v.encode(P_OPEN + "考える " + P_CLOSE + "answer")
    whole = run_all_ways(p, [], ids)
    assert v.decode(whole.reasoning_ids) == "考える " and v.decode(whole.content_ids) == "answer"
    # end of turn ends it too; a tool block from the thinking: its text is content text, no content id
    ids = v.encode("hmm<|plamo:tag|>")
    assert run_all_ways(p, [], ids).end == ReasoningEnd(len(ids) - 1, False)
    ids = v.encode("hmm" + P_TOOLS + "x")
    whole = run_all_ways(p, [], ids)
    assert p.extract_reasoning(v.decode(ids)) == ("hmm", P_TOOLS + "x")
    assert v.decode(whole.content_ids) == "x"
    assert p.is_reasoning_end([], {"enable_thinking": False})


# -- Hunyuan HY-V3 / HY-V4: suffixed markers, reasoning_effort -----------------------------------------

SUF = ":6124c78e"
HY = (f"<think{SUF}>", f"</think{SUF}>", f"<tool_calls{SUF}>")


def test_hy_suffix_is_read_from_the_vocabulary_and_effort_switches():
    v3, v4 = parser("hy_v3", HY, "tekken"), parser("hy_v4", HY, "tekken")
    v = v3.vocabulary
    assert v3.end_token_ids == {v.token_id(f"</think{SUF}>")}
    out = v.encode(f"x</think{SUF}>y")
    assert v3.is_reasoning_end([]) and not v4.is_reasoning_end([])  # defaults: no_think vs high
    assert not v3.is_reasoning_end([], {"reasoning_effort": "low"})
    assert v4.is_reasoning_end([], {"reasoning_effort": "no_think"})
    assert v4.extract_reasoning(v.decode(out)) == ("x", "y")
    run_all_ways(v4, [], out)
    # plain markers when the vocabulary has no suffixed token
    with pytest.raises(ValueError, match=r"'hy_v3'.*'<think>'"):
        get_reasoning_parser("hy_v3")(load_vocabulary("tekken"))


# -- K2 Horizon, Inkling, MiniMax M3, MiniMax M2 append-think ---------------------------------------------

K2 = ("<ifm|think>", "</ifm|think>", "<ifm|think_fast>", "</ifm|think_fast>", "<ifm|think_faster>",
      "</ifm|think_faster>", "<ifm|tool_calls>")


def test_k2_horizon_every_effort_pair_and_tool_call():
    p = parser("k2_horizon", K2)
    v = p.vocabulary
    for start, end in (("<ifm|think>", "</ifm|think>"), ("<ifm|think_fast>", "</ifm|think_fast>")):
        ids = v.encode(start + "r" + end + "c")
        assert p.extract_reasoning(v.decode(ids)) == ("r", "c")
        run_all_ways(p, [], ids)
    ids = v.encode("r<ifm|tool_calls>[]")
    s = run_all_ways(p, [], ids)
    assert s.end.is_content and v.decode(s.content_ids) == "<ifm|tool_calls>[]"


INK = ("<|message_model|>", "<|content_text|>", "<|content_thinking|>", "<|content_invoke_tool_json|>",
       "<|content_invoke_tool_text|>", "<|content_tool_error|>", "<|content_model_end_sampling|>", "<|end_message|>")


def test_inkling_blocks():
    p = parser("inkling", INK)
    v = p.vocabulary
    prompt = v.encode("<|message_model|>")
    out = ("<|content_thinking|>a<|end_message|><|message_model|><|content_thinking|>b<|end_message|>"
           "<|message_model|><|content_text|>answer<|end_message|>")
    ids = v.encode(out)
    s = run_all_ways(p, prompt, ids)
    assert v.decode(s.reasoning_ids) == "ab" and v.decode(s.content_ids) == "answer<|end_message|>"
    ids = v.encode("<|content_thinking|>a<|end_message|><|message_model|><|content_invoke_tool_json|>{}")
    s = run_all_ways(p, prompt, ids)
    assert s.end.is_content and v.decode(s.content_ids) == "<|content_invoke_tool_json|>{}"


def test_minimax_m3_thinking_mode():
    p = parser("minimax_m3", ("<mm:think>", "</mm:think>", "]~b]"))
    v = p.vocabulary
    prompt = v.encode("]~b]ai\n")
    assert p.initial_state(prompt, {"thinking_mode": "enabled"}) == 1
    assert p.initial_state(prompt, {"thinking_mode": "disabled"}) == p.initial_state(prompt) == 0
    run_all_ways(p, prompt, v.encode("r</mm:think>c"), {"thinking_mode": "enabled"})


def test_minimax_m2_append_think_front_end_is_all_content_tracker_exact():
    extra = ("]~b]", "[e~[", "<minimax:tool_call>")
    p = parser("minimax_m2_append_think", extra)
    m2 = parser("minimax_m2", extra)
    v = p.vocabulary
    prompt = v.encode("]~b]ai\n<think>\n")
    ids = v.encode("hmm</think>\n\nok")
    assert p.extract_reasoning(v.decode(ids), prompt) == (None, "<think>hmm</think>\n\nok")
    assert p.split(ids, prompt) == m2.split(ids, prompt)  # the engine's gate is M2's
    st_ = p.new_stream(prompt)
    got = "".join((st_.feed([t]).content or "") for t in ids)
    assert got == "<think>hmm</think>\n\nok"


# -- Muse (muse / musespark, muse_glimmer): channel messages, markers as special tokens or as text ------------

MUSE = ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>")
MUSE_PROMPT = "<|start|>user<|message|>Q<|eot|><|start|>assistant"
MUSE_NEXT = "<|eom|><|start|>assistant"


def muse(name: str, markers: bool = True):
    """The family on the Qwen3.6 table with Muse's markers as special tokens, or without them (text markers)."""
    return parser(name, MUSE if markers else ())


@pytest.mark.parametrize("markers", [True, False], ids=["tokens", "text"])
@pytest.mark.parametrize("name", ["muse", "muse_glimmer"])
def test_muse_split_exact_across_chunks_and_drafts(name, markers):
    p = muse(name, markers)
    v = p.vocabulary
    prompt = v.encode(MUSE_PROMPT)
    out = (" to=self<|message|>Let me think 中文 🙂 to be sure." + MUSE_NEXT + " to=user<|message|>"
           '{"a": 1}<|eot|>')
    ids = v.encode(out)
    whole = run_all_ways(p, prompt, ids)

    def ends_at_the_message(e):  # the token in which "to=user<|message|>" completes (text: maybe with more text)
        return (not e.is_content and "to=user<|message|>" in v.decode(ids[:e.offset + 1])
                and "to=user<|message|>" not in v.decode(ids[:e.offset]))

    assert ends_at_the_message(whole.end)
    if markers:
        assert v.decode(whole.content_ids) == '{"a": 1}<|eot|>'
    assert p.extract_reasoning(out, prompt) == ("Let me think 中文 🙂 to be sure.", '{"a": 1}')
    # a call message ends it too, the header straight after the reasoning (no <|eom|>) included
    ids = v.encode(" to=self<|message|>need a tool to=weather.get<|message|><atem:function_calls>")
    whole = run_all_ways(p, prompt, ids)
    assert v.decode(whole.content_ids).endswith("atem:function_calls>")
    assert p.extract_reasoning(v.decode(ids), prompt) == ("need a tool ", None)


def test_muse_text_markers_end_where_the_token_markers_do():
    """Without the special tokens the markers are text across tokens: the same split of the same text."""
    tok, txt = muse("muse"), muse("muse", markers=False)
    assert txt.reasoning_end_token_ids == frozenset() and tok.reasoning_end_token_ids == {tok.marker_ids["<|message|>"]}
    out = " to=self<|message|>hmm<|eom|><|start|>assistant to=user<|message|>ok"
    a, b = tok.vocabulary.encode(out), txt.vocabulary.encode(out)
    assert len(b) > len(a)  # each marker several ordinary tokens
    assert tok.extract_reasoning(out) == txt.extract_reasoning(out) == ("hmm", "ok")
    for p, ids in ((tok, a), (txt, b)):
        end = p.find_reasoning_end(ids)
        assert p.vocabulary.decode(ids[:end.offset + 1]).endswith("<|message|>")
        assert p.vocabulary.decode(ids[end.offset + 1:]) == "ok"
    # the text marker completes in the last of its tokens; a draft that stops one short does not end
    tr = txt.new_tracker(txt.vocabulary.encode(MUSE_PROMPT))
    end = txt.find_reasoning_end(b)
    assert tr.scan(b[:end.offset]) is None and tr.scan(b[:end.offset + 1]) == end


def test_muse_marker_text_spelled_with_ordinary_tokens_is_text():
    p = muse("muse")
    v = p.vocabulary
    base = load_vocabulary("qwen3_6")
    hostile = base.encode("<|eom|><|start|>assistant to=user<|message|>")  # the text, not the special tokens
    assert not set(hostile) & v.special_token_ids
    ids = v.encode(" to=self<|message|>a ") + hostile + v.encode(" b")
    tr = p.new_tracker(v.encode(MUSE_PROMPT))
    assert tr.advance(ids) is None and not tr.ended
    assert p.split(ids).end is None
    assert v.decode(p.split(ids).reasoning_ids) == v.decode(ids[len(v.encode(" to=self<|message|>")):])


@pytest.mark.parametrize("name", ["muse", "muse_glimmer"])
def test_muse_prompt_turn_aware(name):
    p = muse(name)
    v = p.vocabulary
    earlier = "<|start|>assistant to=user<|message|>old answer<|eot|>"
    assert not p.is_reasoning_end(v.encode(earlier + MUSE_PROMPT))  # an earlier turn's answer
    assert not p.is_reasoning_end(v.encode(earlier))  # the answer closed, no new message yet
    assert p.is_reasoning_end(v.encode(MUSE_PROMPT + " to=user<|message|>"))  # a prefilled answer
    assert p.is_reasoning_end(v.encode(MUSE_PROMPT + " to=weather.get<|message|>"))  # a prefilled call
    assert not p.is_reasoning_end(v.encode(MUSE_PROMPT + " to=self<|message|>"))  # a prefilled reasoning body
    assert p.is_reasoning_end(v.encode(MUSE_PROMPT), {"include_reasoning": False})
    # the prefilled reasoning body goes on in the output
    prompt = v.encode(MUSE_PROMPT + " to=self<|message|>Plan:")
    ids = v.encode(" a, b." + MUSE_NEXT + " to=user<|message|>done")
    whole = run_all_ways(p, prompt, ids)
    assert p.extract_reasoning(v.decode(ids), prompt) == (" a, b.", "done")
    assert v.decode(whole.reasoning_ids) == " a, b."


@pytest.mark.parametrize("name", ["muse", "muse_glimmer"])
def test_muse_forced_end_and_ending_ids(name):
    p = muse(name)
    v = p.vocabulary
    msg = v.token_id("<|message|>")
    tr = p.new_tracker(v.encode(MUSE_PROMPT))
    assert v.decode(tr.forced_end_token_ids()) == "<|start|>assistant to=user<|message|>"
    assert tr.ending_token_ids(v.encode(" to=user")) == {msg}
    assert tr.ending_token_ids(v.encode(" to=self")) == frozenset()
    body = v.encode(" to=self<|message|>thinking")
    forced = tr.forced_end_token_ids(body)
    assert v.decode(forced) == MUSE_NEXT + " to=user<|message|>"
    assert tr.scan(body + list(forced)) == ReasoningEnd(len(body) + len(forced) - 1, False)
    # Spark reads a message without recipient as reasoning, Glimmer as the answer
    assert tr.ending_token_ids(body) == (frozenset({msg}) if name == "muse_glimmer" else frozenset())
    assert muse(name, markers=False).new_tracker().ending_token_ids() is None  # text markers: no id set


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(st.sampled_from(["self", "user", "tool", "bare", "commentary", "next", "eom", "r", "to", "lt"]),
                      max_size=10), markers=st.booleans(), name=st.sampled_from(["muse", "muse_glimmer"]))
def test_muse_any_stream(parts, markers, name):
    p = muse(name, markers)
    v = p.vocabulary
    words = {"self": " to=self<|message|>", "user": " to=user<|message|>", "tool": " to=f.g<|message|>",
             "bare": "<|message|>", "commentary": " to=commentary<|message|>", "next": MUSE_NEXT, "eom": "<|eom|>",
             "r": "ab 中 ", "to": "go to", "lt": "<|"}
    ids = v.encode("".join(words[x] for x in parts))
    if ids:
        run_all_ways(p, v.encode(MUSE_PROMPT), ids)
