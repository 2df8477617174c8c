"""thinkgate's SGLang backend beside SGLang's own: its ``XGrammarGrammarBackend`` wrapped in its
``ReasonerGrammarBackend`` (what ``--grammar-backend xgrammar --reasoning-parser ...`` builds), on the
real DeepSeek V4 tokenizer, the same token streams fed to both; every position's rows compared and
every difference classified.

Each stream is fed token by token; before each token both grammars fill their row, then both accept
it. A differing token id falls in one of these classes, and in no other (the test fails on any other):

- ``implicit_end``: while thinking, thinkgate bans an implicit reasoning end that the grammar could
  not start with (DeepSeek V4's ``｜DSML｜``: it would end the thinking into a JSON schema that rejects
  it); SGLang's wrapper leaves the thinking unmasked.
- ``whitespace``: thinkgate bounds a JSON whitespace gap (16 characters); SGLang's xgrammar, without
  ``--constrained-json-max-whitespace-cnt``, does not.
- ``control``: thinkgate keeps control tokens (special tokens) out of JSON strings and text.
- ``prompt_thinks``: with ``require_reasoning=False`` (the /generate API's default) on a prompt whose
  template opened the thinking, SGLang constrains the thinking from its first token; thinkgate reads
  the prompt and leaves the thinking free.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from sglang_driver import allowed, create_grammar

from thinkgate.structured_output.compilation.jsonws.bound import BoundedMatcher

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
          "required": ["city", "temp"], "additionalProperties": False}
SCHEMA2 = {"type": "object", "properties": {"ok": {"type": "boolean"}, "n": {"type": "array", "items": {"type": "integer"}}},
           "required": ["ok", "n"], "additionalProperties": False}
R1 = "<｜User｜>Weather?<｜Assistant｜><think>\n"
V4 = "<｜User｜>Weather?<｜Assistant｜>"

# (reasoning parser, prompt, require_reasoning, schema, generated text)
STREAMS = [
    ("deepseek-r1", R1, True, SCHEMA, 'The user wants {"city"? and }}} then</think>{"city": "Paris", "temp": 18}'),
    ("deepseek-r1", R1, True, SCHEMA, 'ok</think>{"city":' + " " * 10 + '"Rome",\n  "temp": 20}'),
    ("deepseek-v4", V4, True, SCHEMA2, 'Short.</think>{"ok": true, "n": [1, 2]}'),
    ("deepseek-v4", V4, True, SCHEMA, 'Plan: {"ok": maybe}</think>{"city": "Oslo", "temp": -3}'),
]


@pytest.fixture(scope="module")
def sglang_backends(ds_tokenizer):
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    def make(name: str):
        xb = XGrammarGrammarBackend(ds_tokenizer, vocab_size=129280, model_eos_token_ids=[1], any_whitespace=True,
                                    max_whitespace_cnt=None)
        return ReasonerGrammarBackend(xb, ReasoningParser(model_type=name, stream_reasoning=False,
                                                          tokenizer=ds_tokenizer), ds_tokenizer)

    return {name: make(name) for name in ("deepseek-r1", "deepseek-v4")}


def _row(g, width: int, V: int) -> np.ndarray:
    m = g.allocate_vocab_mask(width, 1, "cpu")
    if not g.is_terminated():
        g.fill_vocab_mask(m, 0)
    return allowed(m[0], V)


def _classify(d: int, ours, implicit: frozenset[int], vocab) -> str:
    if ours.thinking:
        return "implicit_end" if d in implicit else "other"
    if d in vocab.special_token_ids:
        return "control"
    m = ours.state.matcher
    if isinstance(m, BoundedMatcher) and m.breaks_bound(d):  # this token would overrun the gap's bound
        return "whitespace"
    return "other"


def _compare(ours, theirs, ids: list[int], vocab, implicit, width: int) -> Counter:
    V = vocab.vocab_size
    found: Counter = Counter()
    for pos, t in enumerate(ids):
        mine, sg = _row(ours, width, V), _row(theirs, width, V)
        for d in np.flatnonzero(mine != sg).tolist():
            cls = _classify(d, ours, implicit, vocab)
            direction = "thinkgate bans" if sg[d] else "thinkgate allows"
            found[(cls, direction)] += 1
            assert cls != "other", (f"position {pos}: token {d} {vocab.token_bytes[d]!r} "
                                    f"{direction} it, SGLang {'allows' if sg[d] else 'bans'} it")
        assert mine[t] and sg[t], f"position {pos}: token {t} {vocab.token_bytes[t]!r} refused"
        ours.accept_token(t)
        theirs.accept_token(t)
    return found


@pytest.mark.parametrize("n", range(len(STREAMS)))
def test_rows_beside_sglangs_xgrammar_and_reasoner_differ_only_by_class(n, backends, sglang_backends):
    parser, prompt_text, rr, schema, text = STREAMS[n]
    ours_b = backends("deepseek_v4", parser)
    vocab = ours_b.vocabulary
    prompt = vocab.encode(prompt_text)
    key = ("json", json.dumps(schema))
    ours = create_grammar(ours_b, key, prompt, rr)
    theirs = create_grammar(sglang_backends[parser], key, prompt, rr)
    assert type(theirs).__name__ == "ReasonerGrammarObject"
    ids = vocab.encode(text) + [1]
    found = _compare(ours, theirs, ids, vocab, ours_b.parser.implicit_reasoning_end_token_ids, ours_b.vocab_size)
    assert ours.is_terminated() and theirs.is_terminated()
    print(f"\nstream {n} ({parser}): {len(ids)} positions; differing ids by class: {dict(found)}")
    assert all(d == "thinkgate bans" for _, d in found)  # thinkgate only ever narrows SGLang's rows here
    if parser == "deepseek-v4":
        assert found[("implicit_end", "thinkgate bans")] > 0
    if " " * 10 in text:
        assert found[("whitespace", "thinkgate bans")] > 0


def test_a_prompt_that_opened_the_thinking_stays_free_where_sglang_constrains_it(backends, sglang_backends):
    ours_b = backends("deepseek_v4", "deepseek-r1")
    vocab = ours_b.vocabulary
    prompt = vocab.encode(R1)
    key = ("json", json.dumps(SCHEMA))
    ours = create_grammar(ours_b, key, prompt, False)
    theirs = create_grammar(sglang_backends["deepseek-r1"], key, prompt, False)
    V = vocab.vocab_size
    mine, sg = _row(ours, ours_b.vocab_size, V), _row(theirs, ours_b.vocab_size, V)
    assert ours.thinking and mine.all()  # prompt_thinks: thinkgate leaves the thinking free
    assert not sg[vocab.encode("The")[0]] and sg[vocab.encode("{")[0]]  # SGLang: JSON from the first token
