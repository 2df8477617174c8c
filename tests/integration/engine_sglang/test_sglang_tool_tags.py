"""SGLang's own tool-call tags under thinkgate's backend. For ``tool_choice="required"`` (and a named function,
and strict ``auto``) SGLang's chat server hands the grammar backend the structural tag its tool detector writes
(``FunctionCallParser.get_structure_constraint``), which spells the format's markers as text. Where a marker is a
control token (DeepSeek V4's ``｜DSML｜``), thinkgate's compiler cannot take the tag (text never produces a control
token there), so the backend hands that key to SGLang's own ``XGrammarGrammarBackend`` in its
``ReasonerGrammarBackend``, built beside it on first need, as vLLM's backend does with vLLM's: those requests get
exactly what ``--grammar-backend xgrammar`` gives them, in the same batches as thinkgate's grammars."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from sglang.srt.constrained.base_grammar_backend import GrammarRow
from sglang_driver import accept, allowed, create_grammar, is_invalid

from thinkgate.engines.sglang.backend import ThinkgateGrammar

V4 = "<｜User｜>Weather?<｜Assistant｜>"
WEATHER = {"type": "object", "properties": {"location": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["location", "unit"]}
CALL = ('Short.</think>\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
        '<｜DSML｜parameter name="location" string="true">Zürich</｜DSML｜parameter>\n'
        '<｜DSML｜parameter name="unit" string="true">celsius</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')


def _tag_key(parser: str, choice: str = "required") -> tuple[str, str]:
    """The key SGLang's chat server gives the backend (serialized as ``to_sampling_params`` does)."""
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    tool = Tool(type="function", function={"name": "get_weather", "parameters": WEATHER, "strict": True})
    kind, tag = FunctionCallParser([tool], parser).get_structure_constraint(choice)
    assert kind == "structural_tag"
    return "structural_tag", json.dumps(tag.model_dump(by_alias=True))


@pytest.fixture(scope="module")
def sglang_v4(ds_tokenizer):
    """SGLang's own stack for ``--grammar-backend xgrammar --reasoning-parser deepseek-v4``."""
    from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    xb = XGrammarGrammarBackend(ds_tokenizer, vocab_size=129280, model_eos_token_ids=[1], any_whitespace=True,
                                max_whitespace_cnt=16)
    return ReasonerGrammarBackend(xb, ReasoningParser(model_type="deepseek-v4", stream_reasoning=False,
                                                      tokenizer=ds_tokenizer), ds_tokenizer)


def _row(g, width: int) -> np.ndarray:
    m = g.allocate_vocab_mask(width, 1, "cpu")
    if not g.is_terminated():
        g.fill_vocab_mask(m, 0)
    return m[0].numpy().copy()


def test_a_tool_tag_that_spells_control_tokens_is_sglangs_own_grammar_row_for_row(backends, sglang_v4):
    """DeepSeek V4's DSML tag: the request's grammar is SGLang's (xgrammar in its reasoner), and at every position
    of a thinking-then-call stream its row equals the row SGLang's own stack gives (free while thinking)."""
    b = backends("deepseek_v4", "deepseek-v4")
    v = b.vocabulary
    key = _tag_key("deepseekv4")
    with pytest.raises(ValueError, match="control token"):  # what thinkgate's compiler says of it
        b.compiler.compile(b.constraint(key))
    prompt = v.encode(V4)
    ours = create_grammar(b, key, prompt, True)
    assert not is_invalid(ours) and not isinstance(ours, ThinkgateGrammar), ours
    theirs, _ = sglang_v4.get_cached_or_future_value(key, True)
    theirs = theirs.result() if hasattr(theirs, "result") else theirs
    ids = v.encode(CALL)
    end = ids.index(v.encode("</think>")[0]) if v.encode("</think>")[0] in ids else None
    for i, t in enumerate(ids):
        a, c = _row(ours, b.vocab_size), _row(theirs, b.vocab_size)
        assert np.array_equal(a, c), (i, v.decode(ids[:i]))
        if end is not None and i <= end:
            assert (a == -1).all()  # the thinking is free
        assert accept(ours, [t]) == ([t], None)
        theirs.accept_token(t)
    row = allowed(torch.from_numpy(_row(ours, b.vocab_size)), b.vocab_size)
    assert row[1]  # the call is complete: the end of the turn may follow


def test_a_batch_mixes_thinkgates_grammars_and_sglangs(backends):
    """One batch holds a thinkgate JSON grammar and an SGLang tool grammar: whichever is first allocates, fills
    (SGLang's per-row loop) and applies the mask; every row is the row its grammar fills alone."""
    b = backends("deepseek_v4", "deepseek-v4")
    v = b.vocabulary
    prompt = v.encode(V4)
    tool = create_grammar(b, _tag_key("deepseekv4"), prompt, True)
    schema = create_grammar(b, ("json", json.dumps(WEATHER)), prompt, True)
    for g in (tool, schema):  # both past their thinking, into their grammar
        for t in v.encode("Short.</think>"):
            assert accept(g, [t]) == ([t], None)
    alone = [_row(g, b.vocab_size) for g in (tool, schema)]
    assert all((r != -1).any() for r in alone)
    for first in (tool, schema):
        mask = first.allocate_vocab_mask(b.vocab_size, 3, "cpu")
        first.fill_vocab_mask_batched([GrammarRow(row=0, grammar=tool), GrammarRow(row=2, grammar=schema)], mask)
        mask = first.move_vocab_mask(mask, "cpu")
        assert np.array_equal(mask[0].numpy(), alone[0]) and np.array_equal(mask[2].numpy(), alone[1])
        assert (mask[1].numpy() == -1).all()
        logits = torch.randn(3, b.vocab_size)
        want = logits.clone()
        for r, row in ((0, alone[0]), (2, alone[1])):
            want[r, ~torch.from_numpy(allowed(torch.from_numpy(row), b.vocab_size))] = float("-inf")
        first.apply_vocab_mask(logits, mask)
        assert torch.equal(logits, want)


def test_sglangs_grammars_are_cached_by_sglangs_backend_and_its_failures_stay_with_the_request(backends):
    """A second request of the same tag is a copy from SGLang's cache (thinkgate's cache holds none of those);
    a control-token tag that SGLang's xgrammar cannot compile is SGLang's InvalidGrammarObject for that request
    alone; a thinkgate request beside it goes on."""
    b = backends("deepseek_v4", "deepseek-v4")
    v = b.vocabulary
    prompt = v.encode(V4)
    key = _tag_key("deepseekv4")
    first = create_grammar(b, key, prompt, True)
    again, hit = b.get_cached_or_future_value(key, True)
    assert hit and again is not first and not isinstance(again, ThinkgateGrammar)
    assert key not in b.cache and key in b._xgrammar.cache
    bad = ("structural_tag", json.dumps({"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "<｜DSML｜x"}, {"type": "json_schema", "json_schema": {"type": "nope"}}]}}))
    g = create_grammar(b, bad, prompt, True)
    assert is_invalid(g), g
    good = create_grammar(b, ("json", json.dumps(WEATHER)), prompt, True)
    assert isinstance(good, ThinkgateGrammar)
    assert accept(good, v.encode('ok</think>{"location": "Oslo", "unit": "celsius"}') + [1])[1] is None
