"""The reasoning families served for SGLang 0.5.23's names that vLLM 0.34 has no name for: ``kimi`` (Kimi-VL,
thinkgate's ``kimi_vl``), ``apertus2509`` (``apertus``) and ``iquest_q1``.

The expected splits are what SGLang's own detectors (``sglang/srt/parser/reasoning_parser.py``:
``KimiDetector``, ``Apertus2509Detector``, ``IQuestQ1ReasoningDetector``) give on the same outputs, whole and
streamed in chunks of 1-4 characters, run in SGLang's venv; where thinkgate reads differently on purpose
(the family docstrings say why), the case says so. Vocabularies: Kimi-VL's markers are text (``◁`` + ``think``
+ ``▷``), spelled here by the Qwen3.6 table with Kimi's turn tokens (``synthetic_vocabulary("kimi")``), where
``◁`` is two byte tokens; Apertus' markers are special tokens (``synthetic_vocabulary("apertus")``); IQuest's
``<think>`` is read as text on the tekken table (``<th`` ``ink`` ``>``) and as one token on the Qwen3.6 table.
"""

from __future__ import annotations

import random
from functools import lru_cache

import pytest
from support import with_specials

from thinkgate.engines.sglang.names import thinkgate_family
from thinkgate.reasoning import get_reasoning_parser, load_vocabulary
from thinkgate.reasoning.base import ReasoningEnd, ReasoningParser
from thinkgate.testing.vocabularies import synthetic_vocabulary


@lru_cache(maxsize=None)
def parser(family: str, table: str = "") -> ReasoningParser:
    if family == "kimi_vl":
        vocab = synthetic_vocabulary("kimi")
    elif family == "apertus":
        vocab = synthetic_vocabulary("apertus")
    elif table == "tekken":
        vocab = with_specials(load_vocabulary("tekken"), ["<|iquest_assistant|>", "<|iquest_end|>"], "tekken+iquest")
    else:
        vocab = with_specials(load_vocabulary("qwen3_6"), ["<|iquest_assistant|>", "<|iquest_end|>"], "qwen3_6+iquest")
    return get_reasoning_parser(family)(vocab)


def streamed(p: ReasoningParser, ids: list[int], cuts: list[int], prompt=(), kwargs=None) -> tuple[str, str]:
    s = p.new_stream(prompt, kwargs)
    deltas = [s.feed(ids[a:b]) for a, b in zip([0, *cuts], [*cuts, len(ids)])] + [s.finish()]
    return "".join(d.reasoning or "" for d in deltas), "".join(d.content or "" for d in deltas)


def check(p: ReasoningParser, text: str, reasoning: str, content: str, prompt_text: str = "", kwargs=None) -> None:
    """Whole text, whole ids, token by token and random chunkings all give (reasoning, content); the
    tracker fed token by token ends where the whole split ends."""
    v = p.vocabulary
    ids = v.encode(text)
    prompt = v.encode(prompt_text) if prompt_text else []
    assert p.extract_reasoning(text, prompt, kwargs) == (reasoning or None, content or None)
    assert streamed(p, ids, list(range(1, len(ids))), prompt, kwargs) == (reasoning, content)
    rng = random.Random(len(text))
    for _ in range(6):
        cuts = sorted(rng.sample(range(1, len(ids)), min(len(ids) - 1, rng.randint(0, 5)))) if len(ids) > 1 else []
        assert streamed(p, ids, cuts, prompt, kwargs) == (reasoning, content)
    split = p.split(ids, prompt, kwargs)
    tracker = p.new_tracker(prompt, kwargs)
    ends = [(i, e) for i, t in enumerate(ids) if (e := tracker.advance([t])) is not None]
    if split.ended_before:
        assert ends == [] and split.content_ids == ids
    elif split.end is None:
        assert ends == [] and split.content_ids == []
    else:
        assert ends == [(split.end.offset, ReasoningEnd(0, split.end.is_content))]
        assert split.content_ids == ids[split.end.content_start:]


def test_sglang_names_map_to_these_families():
    assert thinkgate_family("kimi") == "kimi_vl"
    assert thinkgate_family("apertus2509") == "apertus"
    assert thinkgate_family("iquest_q1") == "iquest_q1"


# -- Kimi-VL: ◁think▷ … ◁/think▷ as text; the first token decides ---------------------------------------

@pytest.mark.parametrize("text, reasoning, content", [
    ("◁think▷Let me see.◁/think▷The answer is 4.", "Let me see.", "The answer is 4."),  # SGLang: same
    ("The answer is 4.", "", "The answer is 4."),                                       # no thinking: same
    ("◁think▷cut here", "cut here", ""),                                                # cut by max_tokens: same
    ("◁think▷◁/think▷Hi", "", "Hi"),                                                    # empty reasoning: same
    # a start text inside the thinking is dropped (SGLang's streaming drops it too; its whole read keeps it)
    ("◁think▷a ◁think▷ b◁/think▷c ◁/think▷ d", "a  b", "c ◁/think▷ d"),
    # markers after an answer began are content (SGLang: reasoning "Hello ◁think▷x" read whole, chunk-dependent
    # streamed); the grammar applies from the first content token
    ("Hello ◁think▷x◁/think▷y", "", "Hello ◁think▷x◁/think▷y"),
    ("◁think▷x◁/think▷y ◁think▷z◁/think▷", "x", "y ◁think▷z◁/think▷"),
])
def test_kimi_vl_splits_as_sglang_reads_it(text, reasoning, content):
    check(parser("kimi_vl"), text, reasoning, content)


def test_kimi_vl_markers_are_text_across_tokens():
    p = parser("kimi_vl")
    ids = p.vocabulary.encode("◁think▷ok◁/think▷done")
    assert len(p.vocabulary.encode("◁think▷")) > 1 and p.reasoning_end_token_ids == frozenset()
    end = p.split(ids).end
    assert end is not None and p.vocabulary.decode(ids[:end.offset + 1]).endswith("◁/think▷")
    assert p.vocabulary.decode(p.split(ids).content_ids) == "done"


@pytest.mark.parametrize("answer", ["“Quoted” answer", "→ arrow first", "— dash first", "▷ not a marker", "● dot"])
def test_kimi_vl_answers_opening_with_lookalike_characters_stay_content(answer):
    """Characters that share ◁'s leading UTF-8 byte (E2) but are whole tokens do not open the thinking."""
    check(parser("kimi_vl"), answer, "", answer)
    assert parser("kimi_vl").split(parser("kimi_vl").vocabulary.encode(answer)).end == ReasoningEnd(0, True)


def test_kimi_vl_prompt_turns_and_include_reasoning():
    p = parser("kimi_vl")
    old = "<|im_assistant|>assistant<|im_middle|>◁think▷old◁/think▷x<|im_end|><|im_user|>user<|im_middle|>q<|im_end|>"
    # an earlier turn's markers do not decide this turn: the model still decides with its first token
    check(p, "◁think▷t◁/think▷a", "t", "a", prompt_text=old + "<|im_assistant|>assistant<|im_middle|>")
    # a template that opened the thinking in the prompt: the request starts thinking
    check(p, "t◁/think▷a", "t", "a", prompt_text="<|im_assistant|>assistant<|im_middle|>◁think▷")
    assert p.is_reasoning_end([], {"include_reasoning": False})
    check(p, "◁think▷t◁/think▷a", "", "◁think▷t◁/think▷a", kwargs={"include_reasoning": False})


def test_kimi_vl_first_token_keepers_and_forced_end():
    p = parser("kimi_vl")
    v = p.vocabulary
    tracker = p.new_tracker()
    keep = tracker.keep_thinking_token_ids()
    first = v.encode("◁think▷")[0]
    assert first in keep and v.encode("The")[0] not in keep
    forced = tracker.forced_end_token_ids()
    assert forced is not None and v.decode(list(forced)) == "◁think▷◁/think▷"
    assert p.split(list(forced)).end.offset == len(forced) - 1


# -- Apertus: <|inner_prefix|> … <|inner_suffix|> tokens; the first token decides ---------------------------

@pytest.mark.parametrize("text, reasoning, content", [
    ("<|inner_prefix|>Plan.<|inner_suffix|>Answer.", "Plan.", "Answer."),   # SGLang: same
    ("Answer only.", "", "Answer only."),                                     # same
    ("<|inner_prefix|>cut", "cut", ""),                                       # same
    ("<|inner_prefix|><|inner_suffix|>Hi", "", "Hi"),                         # same
    # a call from the thinking ends it and is content (SGLang moves the call to the content as well, and reads
    # the thoughts after it, "t2", as reasoning again; here they are content)
    ('<|inner_prefix|>t1<|tools_prefix|>[{"f": {}}]<|tools_suffix|>t2<|inner_suffix|>done', "t1",
     '<|tools_prefix|>[{"f": {}}]<|tools_suffix|>t2<|inner_suffix|>done'),
    # one thought block: a second one is content (SGLang: reasoning "ac", content "bd")
    ("<|inner_prefix|>a<|inner_suffix|>b<|inner_prefix|>c<|inner_suffix|>d", "a",
     "b<|inner_prefix|>c<|inner_suffix|>d"),
    # hostile: the markers' text written with ordinary tokens is neither marker
    ("<|inner_prefix|>think about <|inner_suffix|> as text", "think about <|inner_suffix|> as text", ""),
])
def test_apertus_splits_as_sglang_reads_it(text, reasoning, content):
    p = parser("apertus")
    if "about" in text:  # spell the marker texts inside the thinking with ordinary tokens
        v = p.vocabulary
        ids = [v.token_id("<|inner_prefix|>")] + load_vocabulary("qwen3_6").encode(text[len("<|inner_prefix|>"):])
        assert streamed(p, ids, list(range(1, len(ids)))) == (reasoning, content)
        assert p.split(ids).end is None
        return
    check(p, text, reasoning, content)


def test_apertus_prompt_shapes():
    p = parser("apertus")
    dev = "<|developer_start|>Deliberation: enabled\nTool Capabilities: disabled<|developer_end|>"
    prompt = f"{dev}<|user_start|>q<|user_end|><|assistant_start|>"
    check(p, "<|inner_prefix|>t<|inner_suffix|>a", "t", "a", prompt_text=prompt)
    check(p, "t<|inner_suffix|>a", "t", "a", prompt_text=prompt + "<|inner_prefix|>")  # opened by the template
    old = "<|assistant_start|><|inner_prefix|>x<|inner_suffix|>y<|assistant_end|><|user_start|>q<|user_end|>"
    check(p, "a", "", "a", prompt_text=old + "<|assistant_start|>")  # an earlier turn's markers do not count
    assert p.new_tracker(p.vocabulary.encode(prompt)).keep_thinking_token_ids() == frozenset(
        {p.vocabulary.token_id("<|inner_prefix|>"), p.vocabulary.token_id("<|inner_suffix|>")})


# -- IQuest-Q1: <think> … </think>; thinking unless both switches are off -----------------------------------

@pytest.mark.parametrize("table", ["tekken", "qwen3_6"])
@pytest.mark.parametrize("kwargs, text, reasoning, content", [
    ({}, "Plan.</think>Answer.", "Plan.", "Answer."),                                # SGLang: same
    ({}, "<think>Plan.</think>Answer.", "Plan.", "Answer."),                         # same
    ({}, "cut", "cut", ""),                                                          # same
    ({}, "</think>Hi", "", "Hi"),                                                    # same
    ({}, "a <think> b</think>c</think>d", "a  b", "c</think>d"),                     # as SGLang streams it
    ({"thinking": False}, "Plan.</think>Answer.", "", "Plan.</think>Answer."),       # same
    ({"enable_thinking": False}, "cut", "", "cut"),                                  # same
    ({"thinking": False, "enable_thinking": True}, "Plan.</think>Answer.", "Plan.", "Answer."),  # either on: same
    ({"thinking": True}, "cut", "cut", ""),                                          # same
    ({"thinking": None, "enable_thinking": None}, "x</think>y", "x", "y"),           # unset: same
])
def test_iquest_q1_splits_as_sglang_reads_it(table, kwargs, text, reasoning, content):
    check(parser("iquest_q1", table), text, reasoning, content, kwargs=kwargs)


def test_iquest_q1_markers_are_text_across_tokens():
    p = parser("iquest_q1", "tekken")
    assert len(p.vocabulary.encode("</think>")) > 1
    ids = p.vocabulary.encode("a</think>b")
    end = p.split(ids).end
    assert end is not None and p.vocabulary.decode(ids[:end.offset + 1]) == "a</think>"


@pytest.mark.parametrize("table", ["tekken", "qwen3_6"])
def test_iquest_q1_prompt_decides_before_the_switches(table):
    p = parser("iquest_q1", table)
    # the template opens the thought, or closes it when thinking is off
    check(p, "t</think>a", "t", "a", prompt_text="<|iquest_assistant|><think>", kwargs={"thinking": False})
    check(p, "a", "", "a", prompt_text="<|iquest_assistant|><think></think>")
    # an earlier turn's closed thought does not close this one
    check(p, "t</think>a", "t", "a", prompt_text="<|iquest_assistant|><think></think>x<|iquest_end|><|iquest_assistant|>")


def test_sglang_facts_hold_for_chunked_unicode_reasoning():
    """Multi-byte reasoning text streamed in byte-level pieces joins to the whole read."""
    check(parser("kimi_vl"), "◁think▷思考 ◁ ▷ ◀◁/think▷答え", "思考 ◁ ▷ ◀", "答え")
    check(parser("iquest_q1", "tekken"), "思考 <thin k></think>答え", "思考 <thin k>", "答え")


# -- the engine core: the grammar applies from the first content token ---------------------------------------

@pytest.fixture(scope="module")
def managers():
    """One vocabulary holding every family's special tokens (the Qwen3.6 table, where the Kimi-VL markers are
    text), one compiler, a manager per family."""
    from thinkgate.structured_output import StructuredOutputManager
    from thinkgate.structured_output.compilation.compiler import Compiler
    specials = ["<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>", "<|assistant_start|>",
                "<|inner_prefix|>", "<|inner_suffix|>", "<|tools_prefix|>", "<|iquest_assistant|>"]
    v = with_specials(load_vocabulary("qwen3_6"), specials, "qwen3_6+sglang_families")
    compiler = Compiler(v, num_threads=1)
    made = {f: StructuredOutputManager(v, get_reasoning_parser(f)(v), compiler=compiler, max_num_seqs=1)
            for f in ("kimi_vl", "apertus", "iquest_q1")}
    yield made
    for m in made.values():
        m.close()
    compiler.close()


@pytest.mark.parametrize("family, prompt, output, rejected_at", [
    # Kimi-VL thinks: ◁think▷ (three tokens here) opens it, no token of the thinking is masked
    ("kimi_vl", "", '◁think▷Any {text] here.◁/think▷{"a": 1}', None),
    ("kimi_vl", "", '{"a": 1}', None),                   # answers at once: the first token is the grammar's
    ("kimi_vl", "", "Plain text.", 0),                   # neither thinking nor the grammar's first token
    ("apertus", "<|assistant_start|>", '<|inner_prefix|>Any {text] here.<|inner_suffix|>{"a": 1}', None),
    ("apertus", "<|assistant_start|>", '{"a": 1}', None),
    ("iquest_q1", "<|iquest_assistant|><think>", 'Any {text] here.</think>{"a": 1}', None),
])
def test_the_grammar_applies_from_the_first_content_token(managers, family, prompt, output, rejected_at):
    from thinkgate.structured_output.compilation.constraints import Constraint
    from thinkgate.testing.streams import replay, wait_compiled
    mgr = managers[family]
    v = mgr.vocabulary
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
    rid = f"{family}:{output}"
    mgr.add_request(rid, Constraint.json_schema(schema), v.encode(prompt) if prompt else [])
    try:
        wait_compiled(mgr, rid)
        got = replay(mgr, rid, v.encode(output) + [min(v.stop_token_ids)])
        assert got.disagreement is None, got  # the mask allows each token exactly when the grammar takes it
        if rejected_at is None:
            assert got.status == "terminated", got
        else:
            assert got.status == "error" and got.accepted == rejected_at, got
    finally:
        mgr.remove_request(rid)
