"""Bad specs, rejected tokens, dead ends and odd prompts under the SGLang backend: each one fails that
request alone, the way SGLang expects (``InvalidGrammarObject`` with the message, a ``ValueError`` from
``accept_token``), and the other requests of the batch go on."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
from sglang_driver import accept, allowed, create_grammar, fill_batch, is_invalid

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
          "additionalProperties": False}
R1_PROMPT = "<｜User｜>Weather?<｜Assistant｜><think>\n"
V4_PROMPT = "<｜User｜>Weather?<｜Assistant｜>"

BAD = [
    (("json", "{not json"), "not valid JSON"),
    (("json", '{"type": "object", "properties": {}, "required": ["a"], "additionalProperties": false}'), "required"),
    (("json", '{"$ref": "https://example.com/x.json"}'), "ref"),
    (("regex", "(unclosed"), "parenthesis"),
    (("ebnf", "root ::= ("), "grammar"),
    (("structural_tag", "[1, 2]"), "structural tag"),
    (("json", '{"type": "string", "pattern": "a\\u0000b"}'), ""),
    (("lark", "start: 'a'"), "not supported by the thinkgate backend"),
]


def test_bad_specs_are_invalid_grammar_objects_for_their_request_alone(backends):
    b = backends("deepseek_v4", "deepseek-r1")
    v = b.vocabulary
    prompt = v.encode(R1_PROMPT)
    good = create_grammar(b, ("json", json.dumps(SCHEMA)), prompt, True)
    for key, words in BAD:
        g = create_grammar(b, key, prompt, True)
        if key[1] == '{"type": "string", "pattern": "a\\u0000b"}' and not isinstance(g, InvalidGrammarObject):
            continue  # a NUL in a pattern compiles in thinkgate's worker processes (a crash there is contained)
        assert isinstance(g, InvalidGrammarObject), f"{key}: {g!r}"
        assert words.lower() in g.error_message.lower(), (key, g.error_message)
        # the next request with the same spec hits SGLang's cache of the invalid marker (set_cache above)
        again = create_grammar(b, key, prompt, True)
        assert isinstance(again, InvalidGrammarObject) and again.error_message == g.error_message
    # the good request of the same batch goes on: it thinks, ends, answers
    for t in v.encode('x {"a"</think>{"city": "Oslo"}') + [1]:
        assert accept(good, [t]) == ([t], None)
    assert good.is_terminated()


def test_a_rejected_token_raises_for_sglang_to_abort_and_moves_nothing(backends):
    b = backends("deepseek_v4", "deepseek-v4")
    v = b.vocabulary
    prompt = v.encode(V4_PROMPT)
    g = create_grammar(b, ("json", json.dumps(SCHEMA)), prompt, False)  # no thinking: constrained at once
    other = create_grammar(b, ("json", json.dumps(SCHEMA)), prompt, False)
    assert not g.thinking
    kept, err = accept(g, v.encode('{"city": 5'))
    assert err is not None and "is not allowed by the json_schema constraint" in err and "'5'" in err
    assert kept == v.encode('{"city": ')
    kept2, err2 = accept(g, v.encode('"Rome"}') + [1])  # the same grammar still takes a valid continuation
    assert err2 is None and g.is_terminated()
    mask = fill_batch([other], b.vocab_size)
    assert allowed(mask.vocab_mask[0], v.vocab_size)[v.encode("{")[0]]  # the other request: untouched
    for bad in (-1, b.vocab_size, 2.0, True):
        with pytest.raises(ValueError, match="is not a token id"):
            other.accept_token(bad)
    with pytest.raises(ValueError, match="cannot roll back 3 tokens"):
        other.rollback(3)


def test_the_whitespace_bound_rejects_with_its_reason(backends):
    b = backends("deepseek_v4", "deepseek-v4")
    v = b.vocabulary
    g = create_grammar(b, ("json", json.dumps(SCHEMA)), v.encode(V4_PROMPT), False)
    kept, err = accept(g, v.encode('{"city":') + v.encode(" " * 40))
    assert err is not None and "whitespace characters in a gap" in err


def test_an_output_the_schema_check_refuses_cannot_end_and_its_dead_end_allows_only_stops(backends):
    """``uniqueItems`` is checked on the finished output: the stop token stays allowed only where the
    output so far passes. Where nothing else is allowed (the root array closed), the grammar goes into
    error: its row allows only the stop tokens (never an empty row: the sampler gets something), it
    reports itself terminated (SGLang ends the request; the message is logged and kept in ``error``),
    a non-stop token raises, a stop token is ignored as SGLang's xgrammar grammar ignores it."""
    b = backends("deepseek_v4", "deepseek-v4")
    v = b.vocabulary
    schema = json.dumps({"type": "array", "items": {"type": "integer"}, "uniqueItems": True})
    prompt = v.encode(V4_PROMPT)
    ok = create_grammar(b, ("json", schema), prompt, False)
    bad = create_grammar(b, ("json", schema), prompt, False)
    assert accept(ok, v.encode("[1, 2]")) == (v.encode("[1, 2]"), None)
    assert accept(bad, v.encode("[1, 1]")) == (v.encode("[1, 1]"), None)
    assert not bad.is_terminated() and bad.error is None
    mask = fill_batch([ok, bad], b.vocab_size)
    rows = [allowed(mask.vocab_mask[i], v.vocab_size) for i in range(2)]
    assert rows[0][1] and ok.error is None  # eos (id 1) after [1, 2]
    assert np.flatnonzero(rows[1]).tolist() == sorted(v.stop_token_ids)
    assert bad.is_terminated() and "uniqueItems" in bad.error
    with pytest.raises(ValueError, match="uniqueItems"):
        bad.accept_token(v.encode("x")[0])
    bad.accept_token(1)
    assert accept(ok, [1]) == ([1], None) and ok.is_terminated() and ok.error is None
    # SGLang's draft-tree walk may reach a dead end on a path it then undoes: the rollback clears it
    bad.rollback(2)  # the stop token, then "]"
    assert not bad.is_terminated() and bad.error is None
    assert accept(bad, v.encode("0]") + [1]) == (v.encode("0]") + [1], None)  # [1, 10]
    assert bad.is_terminated() and bad.error is None


def test_the_prompt_decides_before_sglangs_thinking_switch(backends):
    """A prompt whose template opened the thinking thinks even when SGLang's ``require_reasoning`` is
    False (the /generate API's default; SGLang's own wrapper would constrain the thinking); without a
    marker in the prompt, the switch decides; a full-assistant grammar applies from the first token."""
    b = backends("deepseek_v4", "deepseek-v4")
    v = b.vocabulary
    key = ("json", json.dumps(SCHEMA))
    assert create_grammar(b, key, v.encode(R1_PROMPT), False).thinking
    assert create_grammar(b, key, v.encode(V4_PROMPT), True).thinking
    assert not create_grammar(b, key, v.encode(V4_PROMPT), False).thinking
    closed = create_grammar(b, key, v.encode(V4_PROMPT + "</think>"), True)
    assert not closed.thinking
    full = create_grammar(b, ("full_assistant_ebnf", 'root ::= "<think>" [a-z]* "</think>" "ok"'),
                          v.encode(R1_PROMPT), True)
    assert not full.thinking


def test_rollback_across_the_end_of_thinking_restores_the_thinking_state(backends):
    b = backends("qwen3_6", "qwen3")
    v = b.vocabulary
    g = create_grammar(b, ("json", json.dumps(SCHEMA)), v.encode(
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n"), True)
    before = g.allocate_vocab_mask(b.vocab_size, 2, "cpu")
    g.fill_vocab_mask(before, 0)
    toks = v.encode('hmm</think>{"city"')
    for t in toks:
        g.accept_token(t)
    assert not g.thinking
    g.rollback(len(toks))
    assert g.thinking
    g.fill_vocab_mask(before, 1)
    assert np.array_equal(before[0].numpy(), before[1].numpy())  # the same thinking row as at the start
    tc = v.token_id("<tool_call>")  # Qwen's implicit end: it cannot start a JSON object, so it is banned
    row = allowed(before[0], v.vocab_size)
    assert not row[tc] and row.sum() >= v.vocab_size - len(b.parser.implicit_reasoning_end_token_ids)
    for t in toks:
        g.accept_token(t)
    assert accept(g, v.encode(': "Oslo"}') + [v.token_id("<|im_end|>")])[1] is None and g.is_terminated()


def test_a_prompt_the_parser_cannot_read_fails_its_request_alone(backends):
    """Ids past the vocabulary in a prompt (SGLang's /generate takes input_ids as given): that request
    gets an ``InvalidGrammarObject`` (a cache hit: SGLang aborts it at once); nothing raises into the
    scheduler, and the next request is served."""
    b = backends("deepseek_v4", "olmo3")
    v = b.vocabulary
    key = ("json", json.dumps(SCHEMA))
    assert not is_invalid(create_grammar(b, key, v.encode(V4_PROMPT), True))
    for prompt in ([10**9], v.encode(V4_PROMPT) + [v.vocab_size + 5]):
        k = b.get_request_grammar_key(key, input_ids=prompt, thinking_budget=None)
        value, hit = b.get_cached_or_future_value(k, True)
        assert hit and isinstance(value, InvalidGrammarObject) and "cannot read the prompt" in value.error_message
    assert create_grammar(b, key, v.encode(V4_PROMPT), True).thinking


def _sglang_tool_tag(parser: str) -> tuple[str, str]:
    """The key SGLang's chat server gives the grammar backend for ``tool_choice="required"`` with one tool
    (``FunctionCallParser.get_structure_constraint``, serialized as ``ChatCompletionRequest.to_sampling_params``
    does)."""
    from sglang.srt.entrypoints.openai.protocol import Tool
    from sglang.srt.function_call.function_call_parser import FunctionCallParser

    tool = Tool(type="function", function={"name": "get_weather", "parameters": SCHEMA, "strict": True})
    kind, tag = FunctionCallParser([tool], parser).get_structure_constraint("required")
    assert kind == "structural_tag" and "structures" in tag.model_dump(by_alias=True)  # the legacy form
    return "structural_tag", json.dumps(tag.model_dump(by_alias=True))


def test_sglangs_legacy_tool_tag_is_thinkgates_with_its_markers_as_text_or_as_tokens(backends):
    """SGLang's Qwen tool detector writes the legacy tag form (``structures`` / ``triggers``): thinkgate reads it
    as the ``triggered_tags`` it stands for. On DeepSeek V4's vocabulary ``<tool_call>`` is ordinary text; on
    Qwen3.6's it is a control token, which the rewritten tag asks for as the token (test_sglang_tool_tags.py).
    Either way the call is constrained by thinkgate's grammar, and a wrong key is refused."""
    from thinkgate.engines.sglang.backend import ThinkgateGrammar

    key = _sglang_tool_tag("qwen")
    call = '<tool_call>\n{"name":"get_weather", "arguments":{"city": "Oslo"}}\n</tool_call>'
    for vocab, parser, prompt, thinking in (("deepseek_v4", "deepseek-v4", V4_PROMPT, False),
                                            ("qwen3_6", "qwen3", "<|im_start|>assistant\n", False)):
        b = backends(vocab, parser)
        v = b.vocabulary
        g = create_grammar(b, key, v.encode(prompt), thinking)
        assert isinstance(g, ThinkgateGrammar), (vocab, g)
        assert accept(g, v.encode(call)) == (v.encode(call), None)
        kept, err = accept(create_grammar(b, key, v.encode(prompt), thinking),
                           v.encode('<tool_call>\n{"name":"get_weather", "arguments":{"town"'))
        assert err is not None, vocab
