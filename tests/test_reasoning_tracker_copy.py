"""``ReasoningTracker.copy()``: an independent tracker in the same state (what the SGLang backend keeps
per accepted thinking token to roll back). At every prefix of a thinking output, a copy taken there
answers like the original would have, whatever the original does next."""

from __future__ import annotations

import pytest

from thinkgate.reasoning import get_reasoning_parser, load_vocabulary

# family -> (vocabulary, prompt, generated text, chat-template kwargs)
CASES = {
    "qwen3": ("qwen3_6", "<|im_start|>assistant\n<think>\n", "a b</think>{\"x\": 1}<tool_call>", None),
    "deepseek_v4": ("deepseek_v4", "<｜Assistant｜>", "plan</think>ok", {"thinking": True}),
    "granite": ("deepseek_v4", "<｜Assistant｜>", "Here is my thought process:\nhm\nHere is my response:\nok",
                {"thinking": True}),
    "olmo3": ("deepseek_v4", "<｜Assistant｜>", "x</think>y", {"enable_thinking": True}),
    "mistral": ("magistral", "", "[THINK]q[/THINK]a", None),
}


@pytest.mark.parametrize("family", list(CASES))
def test_a_copy_keeps_the_state_it_was_taken_in(family):
    vname, prompt, text, kwargs = CASES[family]
    vocab = load_vocabulary(vname)
    parser = get_reasoning_parser(family)(vocab)
    ids = vocab.encode(text)
    for cut in range(len(ids) + 1):
        t = parser.new_tracker(vocab.encode(prompt), kwargs)
        t.advance(ids[:cut])
        c = t.copy()
        assert type(c) is type(t) and c is not t
        rest = ids[cut:]
        want = (t.ended, t.scan(rest), t.keep_thinking_token_ids(), t.ending_token_ids(), t.forced_end_token_ids())
        end = t.advance(rest)  # the original moves on; the copy stays where it was taken
        got = (c.ended, c.scan(rest), c.keep_thinking_token_ids(), c.ending_token_ids(), c.forced_end_token_ids())
        assert got == want, f"{family} at {cut}"
        assert c.advance(rest) == end and c.ended == t.ended  # and then goes the same way
