"""The plugin's engine-core answers under any order of vLLM's calls, against a fresh tracker.

vLLM's manager asks ``is_reasoning_end_streaming(input_ids, delta)`` for drafts (not committed: the
view holds the committed tokens plus the drafts), for commits (committed: ``input_ids`` already ends
with them), and narrows a call to find the end (the same ids, shorter). Here random schedules of
those calls (drafts right or wrong, narrowed calls, steps where the manager asked nothing) must get the
answer of a tracker built from the prompt and advanced over exactly the committed tokens. Families
whose state the ids alone cannot tell: granite (text markers over several tokens, a first token that
decides) and olmo3 (text markers), on Qwen3.6.
"""

from __future__ import annotations

import random

import pytest

import thinkgate.engines.vllm.reasoning_parsers as plugin
from thinkgate.reasoning import get_reasoning_parser

SCRIPTS = {
    "granite": ("<|im_start|>assistant\n", {"thinking": True},
                "Here is my thought process:\nI think {\"a\": 1} here is my response: no.\nHere is my response:\nDone."),
    "olmo3": ("<|im_start|>assistant\n", None, "I think </thin k> not yet </think> The answer."),
}


@pytest.mark.parametrize("family", list(SCRIPTS))
@pytest.mark.parametrize("seed", range(6))
def test_streaming_answers_match_a_fresh_tracker(family, seed, vllm_tokenizers):
    tok, vocab = vllm_tokenizers["qwen3_6"]
    prompt_text, kw, out_text = SCRIPTS[family]
    prompt, out = vocab.encode(prompt_text), vocab.encode(out_text)
    parser = get_reasoning_parser(family)(vocab)
    gate = plugin.REGISTERED[f"thinkgate_{family}"](tok, chat_template_kwargs=kw)
    assert gate.reasoning_end_token_ids == frozenset()  # vLLM goes straight to the streaming query
    assert gate.is_reasoning_end(prompt) is False
    rng = random.Random(seed)
    committed: list[int] = []
    while len(committed) < len(out):
        p = len(committed)
        nxt = out[p:p + rng.randint(1, 4)]
        drafts = list(nxt[:-1])
        if drafts and rng.random() < 0.4:  # a wrong draft
            drafts[-1] = vocab.encode(" zebra")[0]
        ref = parser.new_tracker(prompt, kw)
        ref.advance(committed)
        for ask in range(rng.randint(0, 2)):  # the drafts, maybe narrowed, maybe not asked at all
            d = drafts[:len(drafts) - ask]
            if d:
                want = ref.ended or ref.scan(d) is not None
                assert gate.is_reasoning_end_streaming(prompt + committed + d, d) == want, (p, d)
        if rng.random() < 0.8 or len(committed) + len(nxt) == len(out):  # the commit, usually asked
            want = ref.ended or ref.scan(nxt) is not None
            assert gate.is_reasoning_end_streaming(prompt + committed + list(nxt), nxt) == want, (p, nxt)
            if want:
                return  # vLLM latches the end and asks no more
        committed += nxt
    pytest.fail("the thinking never ended")
