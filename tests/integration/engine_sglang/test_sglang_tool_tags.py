"""SGLang's own tool-call tags under thinkgate's backend. For ``tool_choice="required"`` (and a named function,
and strict ``auto``) SGLang's chat server hands the grammar backend the structural tag its tool detector writes
(``FunctionCallParser.get_structure_constraint``), with the format's markers spelled as text. thinkgate's
compiler gives control tokens no text, so the backend rewrites such a tag to ask for the tokens
(``structured_output/compilation/control_literals.py``); a tag with no such form goes to SGLang's own
``XGrammarGrammarBackend`` in its ``ReasonerGrammarBackend``, built beside it on first need.

The reference is xgrammar's default view, where a control token is its text (what SGLang's backend compiles
these tags with): along random walks, thinkgate's row never allows a token that view refuses, and the calls
the models write (markers as their tokens) pass both."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
import xgrammar as xgr
from sglang.srt.constrained.base_grammar_backend import GrammarRow
from sglang_driver import accept, allowed, create_grammar, is_invalid

from thinkgate.engines.sglang.backend import ThinkgateGrammar
from thinkgate.structured_output.compilation._compile_worker import cache_safe
from thinkgate.structured_output import Constraint

V4 = "<｜User｜>Weather?<｜Assistant｜>"
QWEN = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n"
WEATHER = {"type": "object", "properties": {"location": {"type": "string"},
                                            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
           "required": ["location", "unit"]}
# calls in the syntax of SGLang's tags (markers that are control tokens written as tokens)
ARGS = '{"location": "Zürich", "unit": "celsius"}'
CALLS = {
    ("deepseek_v4", "deepseekv3"): "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                                   f"{ARGS}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    ("deepseek_v4", "deepseekv31"): f"<｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜>",
    ("qwen3_6", "qwen"): f'<tool_call>\n{{"name":"get_weather", "arguments":{ARGS}}}\n</tool_call>',
    ("qwen3_6", "qwen3_coder"): '<tool_call>\n<function=get_weather>\n<parameter=location>\nZürich\n</parameter>\n'
                                '<parameter=unit>\ncelsius\n</parameter>\n</function>\n</tool_call>',
}
DSML_CALL = ('\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n'
             '<｜DSML｜parameter name="location" string="true">Zürich</｜DSML｜parameter>\n'
             '<｜DSML｜parameter name="unit" string="true">celsius</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
# SGLang's tags with no token-level form in that vocabulary (they go to SGLang's own backend): DeepSeek's DSML
# parameter styles are xgrammar's own text around the values, holding the ｜DSML｜ token; GLM-4.7's tag excludes
# the text '<arg_key>' beside its <tool_call> token trigger
NO_TOKEN_FORM = {("deepseek_v4", "deepseekv32"), ("deepseek_v4", "deepseekv4"), ("deepseek_v4", "deepseekv41"),
                 ("qwen3_6", "glm47")}


def _tag_key(parser: str, choice: str = "required") -> tuple[str, str] | None:
    """The key SGLang's chat server gives the backend (serialized as ``to_sampling_params`` does); None where
    the detector constrains with a JSON schema or not at all."""
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    tool = Tool(type="function", function={"name": "get_weather", "parameters": WEATHER, "strict": True})
    try:
        r = FunctionCallParser([tool], parser).get_structure_constraint(choice)
    except ValueError:  # response_template: needs a template
        return None
    if r is None or r[0] != "structural_tag":
        return None
    return "structural_tag", json.dumps(r[1].model_dump(by_alias=True))


def _tag_parsers() -> list[str]:
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    return sorted(FunctionCallParser.ToolCallParserEnum)


def _text_view(v) -> xgr.GrammarCompiler:
    """xgrammar's default view of the vocabulary: every control token is its text."""
    text = {i: t.encode() for t, i in v.special_tokens.items()}
    info = xgr.TokenizerInfo([text.get(i, b) for i, b in enumerate(v.token_bytes)], xgr.VocabType.RAW,
                             vocab_size=v.logits_width, stop_token_ids=sorted(v.stop_token_ids))
    return xgr.GrammarCompiler(info, cache_enabled=False)


def _bits(m: xgr.GrammarMatcher, width: int) -> np.ndarray:
    bm = torch.full((1, (width + 31) // 32), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(bm)
    return allowed(bm[0], width)


@pytest.fixture(scope="module")
def vocab_backends(backends):
    return {"deepseek_v4": backends("deepseek_v4", "deepseek-v4"), "qwen3_6": backends("qwen3_6", "qwen3")}


@pytest.mark.parametrize("vocab", ["deepseek_v4", "qwen3_6"])
def test_sglangs_tool_tags_ask_for_control_tokens_and_only_narrow_xgrammars_text_view(vocab_backends, vocab):
    """Every SGLang detector's tag is thinkgate's (the listed ones excepted); along random walks through
    thinkgate's rows (control tokens preferred, to get through the markers) every row is within the text view's
    row; the models' calls pass both, and spelling a marker with ordinary tokens passes only the text view."""
    b = vocab_backends[vocab]
    v, width = b.vocabulary, b.vocab_size
    view = _text_view(v)
    specials = sorted(v.special_token_ids)
    seen = 0
    for parser in _tag_parsers():
        key = _tag_key(parser)
        if key is None:
            continue
        if (vocab, parser) in NO_TOKEN_FORM:
            with pytest.raises(ValueError, match="control token"):
                b.constraint(key)
            continue
        seen += 1
        compiled = b.compiler.compile(b.constraint(key))
        # through xgrammar's cache: its text reads back as the same grammar (_compile_worker.round_trips), for
        # required and for strict auto (a token dispatch that xgrammar's parser moves into a rule of its own)
        for k in (key, _tag_key(parser, "auto")):
            if k is not None and (vocab, parser) not in NO_TOKEN_FORM:
                assert cache_safe("structural_tag", b.compiler.validate(b.constraint(k))[0]), (parser, k[1][:80])
        # (a legacy tag as xgrammar's from_legacy_structural_tag reads it: test_compiler checks ours is the same)
        theirs_grammar = view.compile_structural_tag(Constraint.structural_tag(key[1]).spec)
        for seed in range(3):
            rng = random.Random(seed)
            ours, theirs = xgr.GrammarMatcher(compiled.grammar), xgr.GrammarMatcher(theirs_grammar)
            for step in range(60):
                a = _bits(ours, width)
                assert not (a & ~_bits(theirs, width)).any(), (parser, seed, step)
                ids = np.flatnonzero(a)
                if not len(ids) or ours.is_terminated():
                    break
                ctl = [i for i in specials if a[i] and i not in v.stop_token_ids]
                t = rng.choice(ctl) if ctl and rng.random() < 0.5 else int(rng.choice(list(ids)))
                if t in v.stop_token_ids:
                    break
                assert ours.accept_token(t) and theirs.accept_token(t), (parser, step, t)
        call = CALLS.get((vocab, parser))
        if call is not None:
            ours, theirs = xgr.GrammarMatcher(compiled.grammar), xgr.GrammarMatcher(theirs_grammar)
            assert all(ours.accept_token(t) for t in v.encode(call)), parser
            assert all(theirs.accept_token(t) for t in v.encode(call)), parser
            # the first marker spelled with ordinary tokens: the text view takes it, thinkgate's grammar does not
            marker = min((t for t in v.special_tokens if t and t in call), key=call.index)
            head = call.split(marker, 1)[0]
            spelled = v.encode(head) + v.encode(marker[:2]) + v.encode(marker[2:])
            assert not set(spelled) & v.special_token_ids
            m = xgr.GrammarMatcher(theirs_grammar)
            assert all(m.accept_token(t) for t in spelled), parser
            m = xgr.GrammarMatcher(compiled.grammar)
            assert not all(m.accept_token(t) for t in spelled), parser
    assert seen >= 15



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


def test_a_tag_with_no_token_form_is_sglangs_own_grammar_row_for_row(vocab_backends, sglang_v4):
    """DeepSeek V4's DSML tag: the request's grammar is SGLang's (xgrammar in its reasoner), and at every position
    of a thinking-then-call stream its row equals the row SGLang's own stack gives (free while thinking)."""
    b = vocab_backends["deepseek_v4"]
    v = b.vocabulary
    key = _tag_key("deepseekv4")
    with pytest.raises(ValueError, match="control token"):  # what thinkgate says of it
        b.constraint(key)
    ours = create_grammar(b, key, v.encode(V4), True)
    assert not is_invalid(ours) and not isinstance(ours, ThinkgateGrammar), ours
    theirs, _ = sglang_v4.get_cached_or_future_value(key, True)
    theirs = theirs.result() if hasattr(theirs, "result") else theirs
    ids = v.encode("Short.</think>" + DSML_CALL)
    end = ids.index(v.encode("</think>")[0])
    for i, t in enumerate(ids):
        a, c = _row(ours, b.vocab_size), _row(theirs, b.vocab_size)
        assert np.array_equal(a, c), (i, v.decode(ids[:i]))
        if i <= end:
            assert (a == -1).all()  # the thinking is free
        assert accept(ours, [t]) == ([t], None)
        theirs.accept_token(t)
    assert allowed(torch.from_numpy(_row(ours, b.vocab_size)), b.vocab_size)[1]  # the end of the turn may follow


def test_a_batch_mixes_thinkgates_grammars_and_sglangs(vocab_backends):
    """One batch holds a thinkgate grammar (a rewritten SGLang tool tag), a thinkgate JSON grammar and an SGLang
    grammar: whichever is first allocates, fills (SGLang's per-row loop) and applies the mask; every row is the row
    its grammar fills alone."""
    b = vocab_backends["deepseek_v4"]
    v = b.vocabulary
    prompt = v.encode(V4)
    grammars = [create_grammar(b, _tag_key("deepseekv4"), prompt, True),
                create_grammar(b, ("json", json.dumps(WEATHER)), prompt, True),
                create_grammar(b, _tag_key("deepseekv31"), prompt, True)]
    assert [isinstance(g, ThinkgateGrammar) for g in grammars] == [False, True, True]
    for g in grammars:  # past their thinking, into their grammar
        for t in v.encode("Short.</think>"):
            assert accept(g, [t]) == ([t], None)
    alone = [_row(g, b.vocab_size) for g in grammars]
    assert all((r != -1).any() for r in alone)
    rows = [0, 2, 3]
    for first in grammars:
        mask = first.allocate_vocab_mask(b.vocab_size, 4, "cpu")
        first.fill_vocab_mask_batched([GrammarRow(row=r, grammar=g) for r, g in zip(rows, grammars)], mask)
        mask = first.move_vocab_mask(mask, "cpu")
        for r, want in zip(rows, alone):
            assert np.array_equal(mask[r].numpy(), want)
        assert (mask[1].numpy() == -1).all()
        logits = torch.randn(4, b.vocab_size)
        want = logits.clone()
        for r, row in zip(rows, alone):
            want[r, ~torch.from_numpy(allowed(torch.from_numpy(row), b.vocab_size))] = float("-inf")
        first.apply_vocab_mask(logits, mask)
        assert torch.equal(logits, want)


def test_sglangs_grammars_are_cached_by_sglangs_backend_and_its_failures_stay_with_the_request(vocab_backends):
    """A second request of a tag with no token form is a copy from SGLang's cache (thinkgate's cache holds none
    of those); such a tag that SGLang's xgrammar cannot compile is SGLang's InvalidGrammarObject for that request
    alone; a thinkgate request beside it goes on. A backend with no Hugging Face tokenizer (built from a thinkgate
    Vocabulary) cannot make SGLang's: there the request is refused, naming the control token."""
    b = vocab_backends["deepseek_v4"]
    v = b.vocabulary
    prompt = v.encode(V4)
    key = _tag_key("deepseekv4")
    first = create_grammar(b, key, prompt, True)
    again, hit = b.get_cached_or_future_value(key, True)
    assert hit and again is not first and not isinstance(again, ThinkgateGrammar)
    assert key not in b.cache and key in b._xgrammar.cache
    bad = ("structural_tag", json.dumps({"type": "structural_tag", "format": {"type": "triggered_tags",
           "triggers": ["<｜DSML｜x"], "tags": [{"type": "tag", "begin": "<｜DSML｜x", "content": {
               "type": "json_schema", "json_schema": {"type": "nope"}}, "end": ""}]}}))
    with pytest.raises(ValueError, match="control token"):
        b.constraint(bad)
    assert is_invalid(create_grammar(b, bad, prompt, True))
    good = create_grammar(b, ("json", json.dumps(WEATHER)), prompt, True)
    assert isinstance(good, ThinkgateGrammar)
    assert accept(good, v.encode('ok</think>{"location": "Oslo", "unit": "celsius"}') + [1])[1] is None
    q = vocab_backends["qwen3_6"]
    refused = create_grammar(q, _tag_key("glm47"), q.vocabulary.encode(QWEN), True)
    assert is_invalid(refused) and "control token" in refused.error_message


def test_a_new_keys_spec_is_read_off_the_scheduler_thread(vocab_backends, monkeypatch):
    """``get_cached_or_future_value`` (SGLang's scheduler thread) returns a pending future for a new key at once;
    reading the spec (parsing, the control-token rewrite) runs on the backend's reader thread."""
    import threading

    from thinkgate.engines.sglang.backend import ThinkgateGrammarBackend

    b = vocab_backends["qwen3_6"]
    seen: list[int] = []
    orig = ThinkgateGrammarBackend.constraint

    def spy(self, key):
        seen.append(threading.get_ident())
        return orig(self, key)

    monkeypatch.setattr(ThinkgateGrammarBackend, "constraint", spy)
    key = _tag_key("qwen3_coder", "required")
    key = (key[0], key[1].replace("get_weather", "get_weather_now"))  # a key no other test compiled
    fut, hit = b.get_cached_or_future_value(key, True)
    assert not hit
    g = fut.result(timeout=300)
    assert isinstance(g, ThinkgateGrammar)
    assert seen and threading.get_ident() not in seen
