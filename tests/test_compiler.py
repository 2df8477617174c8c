"""The per-model compiler: control tokens never in free text, token-level formats by name, validation
messages, the "allows everything" rows, and the compile pool."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import torch
import xgrammar as xgr

from thinkgate.testing.vocabularies import byte_level_vocabulary
from thinkgate.reasoning import Vocabulary
from thinkgate.structured_output import Compiler, Constraint, StructuredOutputManager
from thinkgate.structured_output.compilation.compiler import control_token_bytes, xgrammar_message


@pytest.fixture(scope="module")
def qwen_compiler(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=2)
    yield c
    c.close()


def _allowed(matcher: xgr.GrammarMatcher, width: int) -> set[int]:
    bm = torch.empty((1, (width + 31) // 32), dtype=torch.int32)
    matcher.fill_next_token_bitmask(bm, 0)
    return set(np.nonzero(np.unpackbits(bm[0].numpy().view(np.uint8), bitorder="little"))[0].tolist())


def test_tokenizer_info_spells_control_tokens_privately(qwen_vocab, qwen_compiler):
    v = qwen_vocab
    ti = qwen_compiler.tokenizer_info
    assert ti.vocab_size == v.logits_width
    assert sorted(ti.stop_token_ids) == sorted(v.stop_token_ids)
    # xgrammar's "special" (never allowed) ids: exactly the padding ids past the tokenizer's size and
    # the ids the tokenizer leaves undefined; control tokens are ordinary ids with private bytes
    undefined = {i for i, b in enumerate(v.token_bytes) if not b}
    assert set(ti.special_token_ids) == undefined | set(range(v.vocab_size, v.logits_width))
    assert ti.decoded_vocab[v.token_id("<tool_call>")] == control_token_bytes(v.token_id("<tool_call>"))


@pytest.mark.parametrize("constraint, prefix", [
    (Constraint.json_schema({"type": "object", "properties": {"s": {"type": "string"}}}), '{"s": "'),
    (Constraint.json_object(), '{"k": ["'),
    (Constraint.regex(r"(.|\n)*"), "free text "),
    (Constraint.grammar('root ::= [^"]* "."'), "any "),
    (Constraint.structural_tag({"type": "any_text"}), "text "),
    # with excludes, xgrammar's any_text reads bytes: the compiler's excluded mark keeps control tokens out
    (Constraint.structural_tag({"type": "sequence", "elements": [
        {"type": "any_text", "excludes": ["</parameter>"]}, {"type": "const_string", "value": "</parameter>"}]}),
     "a raw value </div> "),
])
def test_control_tokens_never_in_free_text(qwen_vocab, qwen_compiler, constraint, prefix):
    v = qwen_vocab
    m = xgr.GrammarMatcher(qwen_compiler.compile(constraint).grammar)
    for t in v.encode(prefix):
        assert m.accept_token(t)
    allowed = _allowed(m, v.logits_width)
    assert len(allowed) > 200_000  # free text: almost everything
    non_stop_controls = v.special_token_ids - v.stop_token_ids
    assert allowed.isdisjoint(non_stop_controls)
    for t in non_stop_controls:
        assert not m.fork().accept_token(t)


def test_token_formats_name_control_tokens(qwen_vocab, qwen_compiler):
    v = qwen_vocab
    tc, etc, stop = v.token_id("<tool_call>"), v.token_id("</tool_call>"), v.token_id("<|im_end|>")
    tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
        {"type": "const_string", "value": "Calling: "},
        {"type": "token", "token": "<tool_call>"},
        {"type": "json_schema", "json_schema": {"type": "object", "properties": {"q": {"type": "string"}},
                                                "required": ["q"]}},
        {"type": "token", "token": etc}]}}
    c = qwen_compiler.compile(Constraint.structural_tag(tag))
    # it names two control tokens; the others (and text) never reach a row: no row allows every id
    assert not c.may_allow_all
    m = xgr.GrammarMatcher(c.grammar)
    for t in v.encode("Calling: "):
        assert m.accept_token(t)
    assert _allowed(m, v.logits_width) == {tc}
    assert m.accept_token(tc)
    for t in v.encode('{"q": "<') + v.encode("tool_call> spelled as text"):
        assert m.accept_token(t)
    assert tc not in _allowed(m, v.logits_width)
    for t in v.encode('"}'):
        assert m.accept_token(t)
    assert _allowed(m, v.logits_width) == {etc}
    assert m.accept_token(etc)
    assert _allowed(m, v.logits_width) == set(v.stop_token_ids)
    assert m.accept_token(stop) and m.is_terminated()


def _accepts(compiled, vocab, text: str) -> bool:
    m = xgr.GrammarMatcher(compiled.grammar)
    return all(m.accept_token(t) for t in vocab.encode(text))


@pytest.mark.parametrize("end", ["\n", "</call>\n", ["\n", "</call>"]])
def test_raw_values_inside_a_text_ended_tag_keep_their_own_excludes(qwen_vocab, qwen_compiler, end):
    """xgrammar adds a tag's text end to every ``any_text`` in its content: a raw value (``any_text`` with its
    closing tag excluded) inside hy_v3's call tag, which ends with ``"\\n"``, could not hold a newline. The
    value holds the tag's end and still stops at its own closing tag; free text that is the tag's whole content
    still ends at the tag's end (xgrammar's meaning)."""
    v = qwen_vocab
    value = {"type": "sequence", "elements": [
        {"type": "const_string", "value": "<v>"}, {"type": "any_text", "excludes": ["</v>"]},
        {"type": "const_string", "value": "</v>"}]}
    tag = {"type": "structural_tag", "format": {"type": "tags_with_separator", "separator": ";",
                                                "at_least_one": True, "stop_after_first": False, "tags": [
        {"type": "tag", "begin": "<call>", "content": {"type": "star", "content": value}, "end": end}]}}
    c = qwen_compiler.compile(Constraint.structural_tag(tag))
    e = end if isinstance(end, str) else end[0]
    assert _accepts(c, v, f"<call><v>a\nb</call>\nc</v><v></v>{e};<call>{e}")
    assert not _accepts(c, v, "<call><v>a</v>b</v>")
    resolved, _ = qwen_compiler.resolve_structural_tag(tag)
    assert "regex" not in json.dumps(resolved)  # still xgrammar's any_text, not its character-class form

    free = {"type": "structural_tag", "format": {"type": "tag", "begin": "<call>",
                                                 "content": {"type": "any_text"}, "end": "</call>"}}
    c = qwen_compiler.compile(Constraint.structural_tag(free))
    assert _accepts(c, v, "<call>a\nb</call>")
    assert not _accepts(c, v, "<call>a</call>b")


def test_resolve_structural_tag_names(qwen_vocab, qwen_compiler):
    v = qwen_vocab
    tag = {"type": "token_triggered_tags", "trigger_tokens": ["<tool_call>"], "exclude_tokens": ["<think>", 5],
           "tags": [{"type": "tag", "begin": {"type": "token", "token": "<tool_call>"},
                     "content": {"type": "any_tokens", "exclude_tokens": ["</tool_call>"]},
                     "end": {"type": "token", "token": "</tool_call>"}}]}
    out, token_level = qwen_compiler.resolve_structural_tag(tag)
    assert token_level
    assert out["type"] == "structural_tag"  # a bare format is wrapped
    f = out["format"]
    assert f["trigger_tokens"] == [v.token_id("<tool_call>")]
    assert f["exclude_tokens"] == [v.token_id("<think>"), 5]
    assert f["tags"][0]["begin"]["token"] == v.token_id("<tool_call>")
    assert f["tags"][0]["content"]["exclude_tokens"] == [v.token_id("</tool_call>")]
    assert tag["trigger_tokens"] == ["<tool_call>"]  # the caller's tag is not mutated
    dispatch = {"type": "token_dispatch", "rules": [["<tool_call>", {"type": "const_string", "value": "x"}]],
                "exclude_tokens": ["<|im_end|>"]}
    out, _ = qwen_compiler.resolve_structural_tag({"type": "structural_tag", "format": dispatch})
    assert out["format"]["rules"][0][0] == v.token_id("<tool_call>")
    # an ordinary single token can be named too
    out, _ = qwen_compiler.resolve_structural_tag({"type": "token", "token": "hello"})
    assert out["format"]["token"] == v.encode("hello")[0]
    _, token_level = qwen_compiler.resolve_structural_tag({"type": "const_string", "value": "tool_call"})
    assert not token_level
    with pytest.raises(ValueError, match=r"\$\.format\.exclude_tokens\[1\]: 'two words' is not a single token"):
        qwen_compiler.resolve_structural_tag({"type": "any_tokens", "exclude_tokens": ["<think>", "two words"]})
    with pytest.raises(ValueError, match="structural_tag"):
        qwen_compiler.resolve_structural_tag({"format": {}})


@pytest.mark.parametrize("fmt, where", [
    ({"type": "const_string", "value": "go <tool_call>"}, "$.format.value"),
    ({"type": "tag", "begin": "<tool_call>\n", "content": {"type": "any_text"}, "end": "</tool_call>"},
     "$.format.begin"),
    ({"type": "tag", "begin": {"type": "token", "token": "<tool_call>"}, "content": {"type": "any_text"},
      "end": ["x", "\n</tool_call>"]}, "$.format.end"),
    ({"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": []}, "$.format.triggers"),
    ({"type": "tags_with_separator", "tags": [], "separator": "<|im_end|>"}, "$.format.separator"),
    ({"type": "dispatch", "rules": [["<think>", {"type": "const_string", "value": "x"}]]}, "$.format.rules[0][0]"),
])
def test_control_token_text_in_literals_is_rejected(qwen_compiler, fmt, where):
    with pytest.raises(ValueError) as e:
        qwen_compiler.compile(Constraint.structural_tag({"type": "structural_tag", "format": fmt}))
    msg = str(e.value)
    assert where in msg and "control token" in msg and '{"type": "token", "token": "<' in msg


def test_the_legacy_structural_tag_form_is_xgrammars_triggered_tags(qwen_vocab, qwen_compiler):
    """``{"structures": [...], "triggers": [...]}`` (what vLLM's and SGLang's servers still take and SGLang's
    tool detectors write): the format xgrammar's own ``StructuralTag.from_legacy_structural_tag`` makes of it
    (the engines' xgrammar backends call it), compiled and matched; a missing or null schema is any JSON."""
    v = qwen_vocab
    weather = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    legacy = {"type": "structural_tag", "triggers": ["<f="], "at_least_one": True,
              "structures": [{"begin": "<f=w>", "schema": weather, "end": "</f>"},
                             {"begin": "<f=any>", "schema": None, "end": "</f>"}]}
    c = Constraint.structural_tag(json.dumps(legacy))
    peer = xgr.StructuralTag.from_legacy_structural_tag(
        [xgr.StructuralTagItem(begin="<f=w>", schema=json.dumps(weather), end="</f>"),
         xgr.StructuralTagItem(begin="<f=any>", schema="{}", end="</f>")], ["<f="])
    peer.format.at_least_one = True
    assert xgr.StructuralTag.model_validate(json.loads(c.spec)).model_dump() == peer.model_dump()
    assert Constraint.structural_tag(json.loads(c.spec)).key == c.key  # one key for both spellings
    g = qwen_compiler.compile(c)
    assert _accepts(g, v, '<f=w>{"city": "Paris"}</f> then <f=any>[1, {"a": null}]</f>')
    assert not _accepts(g, v, '<f=w>{"town": "Paris"}</f>')
    assert not _accepts(g, v, 'ok <f=w>{"city": "Paris"}</f>')  # at_least_one: a call first
    assert _accepts(qwen_compiler.compile(Constraint.structural_tag({**legacy, "at_least_one": False})), v,
                    'ok <f=w>{"city": "Paris"}</f>')
    for bad, what in (({**legacy, "triggers": []}, "triggers"), ({**legacy, "structures": {}}, "structures"),
                      ({**legacy, "at_least_one": "yes"}, "at_least_one"), ({**legacy, "format": {}}, "legacy form"),
                      ({**legacy, "structures": [{"begin": "<f=w>", "end": 3}]}, r"structures\[0\]"),
                      ({**legacy, "structures": [{"begin": "<f=w>", "end": "", "schema": 7}]}, r"structures\[0\].schema"),
                      ({**legacy, "structures": [{"begin": "<f=w>", "end": "", "schema": "{"}]}, "schema")):
        with pytest.raises(ValueError, match=what):
            Constraint.structural_tag(bad)


def test_xgrammar_message_is_clean():
    e = RuntimeError('[12:38:52] /project/cpp/json_schema_converter.cc:5082: Unsupported type "foo"\n')
    assert xgrammar_message(e) == 'Unsupported type "foo"'
    e = RuntimeError("[12:35:45] /project/cpp/grammar_compiler.cc:1318: Check failed: (x) is false: "
                     "Invalid structural tag error: boom")
    assert xgrammar_message(e) == "Invalid structural tag error: boom"


def test_compile_raises_value_error_with_kind(qwen_compiler):
    with pytest.raises(ValueError, match="invalid regex"):
        qwen_compiler.compile(Constraint.regex("[z-a]"))
    with pytest.raises(ValueError, match="expected a Constraint"):
        qwen_compiler.submit("json")  # type: ignore[arg-type]


def test_rows_that_allow_everything_cost_nothing():
    """On a vocabulary without padding, a token-level grammar can allow every id: no row then."""
    v = byte_level_vocabulary(["<|end|>", "<think>", "</think>"], stop_tokens=["<|end|>"])
    assert v.logits_width == v.vocab_size
    comp = Compiler(v, num_threads=1)
    try:
        mgr = StructuredOutputManager(v, None, compiler=comp, num_speculative_tokens=2)
        mgr.add_request("all", Constraint.structural_tag({"type": "any_tokens"}))
        mgr.add_request("some", Constraint.structural_tag({"type": "any_tokens", "exclude_tokens": ["<think>"]}))
        mgr.add_request("text", Constraint.regex("[a-z]+"))
        while not all(mgr.is_ready(r) for r in ("all", "some", "text")):
            time.sleep(0.002)
        batch = mgr.grammar_bitmask(["all", "some", ("text", [ord("a"), ord("b")])])
        assert batch is not None
        got = sorted(zip(batch.logits_indices.tolist(), batch.request_ids))
        assert got == [(1, "some"), (2, "text"), (3, "text"), (4, "text")]
        assert mgr.grammar_bitmask(["all"]) is None
        assert mgr.accept_tokens("all", v.encode("<think>x")).status == "ok"
        assert mgr.accept_tokens("some", v.encode("<think>")).status == "error"
    finally:
        comp.close()


def test_a_tag_that_names_tokens_allows_every_id_only_when_it_names_every_control_token():
    """A token-level tag whose formats only name tokens (``token``) reaches a control token only where it names
    it: where some non-stop control token is never named, no row allows every id and its requests take the
    plain fill. Naming them all, or a format that allows tokens by exclusion, keeps the check (the manager
    then drops the row that allows everything)."""
    v = byte_level_vocabulary(["<|end|>", "<a>", "<b>"], stop_tokens=["<|end|>"])
    assert v.logits_width == v.vocab_size
    both = {"type": "or", "elements": [{"type": "token", "token": "<a>"}, {"type": "token", "token": "<b>"},
                                       {"type": "any_text"}]}
    one = {"type": "or", "elements": [{"type": "token", "token": "<a>"}, {"type": "any_text"}]}
    excluding = {"type": "or", "elements": [{"type": "any_tokens", "exclude_tokens": ["<b>"]}, {"type": "any_text"}]}
    comp = Compiler(v, num_threads=1)
    try:
        flags = {name: comp.compile(Constraint.structural_tag(f)) for name, f in
                 (("both", both), ("one", one), ("excluding", excluding))}
        assert (flags["both"].may_allow_all, flags["one"].may_allow_all, flags["excluding"].may_allow_all) == (
            True, False, True)
        words = (v.logits_width + 31) // 32
        full = np.full(words, -1, dtype=np.int32)
        full[-1] = (1 << (v.logits_width - 32 * (words - 1))) - 1 if v.logits_width % 32 else -1
        def allows_all(c) -> bool:
            return bool(np.array_equal(c.initial_mask & full, full))
        assert allows_all(flags["both"])  # the flag was needed: this first row allows every id
        assert not allows_all(flags["one"])
        mgr = StructuredOutputManager(v, None, compiler=comp)
        mgr.add_request("both", Constraint.structural_tag(both))
        mgr.add_request("one", Constraint.structural_tag(one))
        while not all(mgr.is_ready(r) for r in ("both", "one")):
            time.sleep(0.002)
        batch = mgr.grammar_bitmask(["both", "one"])
        assert batch is not None and batch.request_ids == ["one"]  # the row that masks nothing is dropped
        b = v.token_id("<b>")
        assert not (int(batch.bitmask[0, b >> 5]) >> (b & 31)) & 1
    finally:
        comp.close()


@pytest.mark.parametrize("token", [{"a": 1}, [1, 2], 1.5, None])
def test_a_token_of_the_wrong_type_fails_its_compile_with_xgrammars_message(qwen_compiler, token):
    """The walk that gathers the named tokens takes only ids: another value reaches xgrammar, whose error names it."""
    fut = qwen_compiler.submit(Constraint.structural_tag({"type": "token", "token": token}))
    with pytest.raises(ValueError, match=r"invalid structural tag: .*[Tt]oken.* must be an integer"):
        fut.result(timeout=60)


def test_tool_constraints_that_only_name_tokens_take_the_plain_fill(qwen_vocab, qwen_compiler, deepseek_vocab):
    """The registered formats' tool constraints name their markers as tokens; on Qwen3.6 and DeepSeek V4 they
    leave other control tokens unnamed, so no row can allow every id (and the first row indeed does not)."""
    from thinkgate.structured_output.tools import build_tool_constraint

    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
    for fmt, vocab in (("hermes", qwen_vocab), ("qwen3_6", qwen_vocab), ("deepseek_v31", deepseek_vocab)):
        c = build_tool_constraint([tool], "required", format=fmt, vocabulary=vocab)
        comp = qwen_compiler if vocab is qwen_vocab else Compiler(vocab, num_threads=1)
        try:
            compiled = comp.compile(c)
        finally:
            if comp is not qwen_compiler:
                comp.close()
        assert not compiled.may_allow_all, fmt
        assert len(_allowed(xgr.GrammarMatcher(compiled.grammar), vocab.logits_width)) < vocab.logits_width


@pytest.mark.parametrize("constraint", [
    Constraint.json_schema({"type": "object", "properties": {"a": {"type": "string"}}}),
    Constraint.regex(r"[\s\S]*"),
    Constraint.structural_tag({"type": "structural_tag", "format": {"type": "any_text"}}),
])
def test_text_grammars_never_allow_every_id_where_control_tokens_exist(qwen_vocab, qwen_compiler, deepseek_vocab,
                                                                      constraint):
    """A text grammar's rows leave out every control token that is not a stop token (their private bytes
    match no text rule), so on Qwen3.6 and DeepSeek V4 no row can allow every id: such requests take the
    plain fill (no "allows everything" check per row). With only stop tokens special and no padding, a
    row could, and the flag stays on."""
    assert qwen_vocab.special_token_ids - qwen_vocab.stop_token_ids
    assert not qwen_compiler.compile(constraint).may_allow_all
    comp = Compiler(deepseek_vocab, num_threads=1)
    try:
        assert deepseek_vocab.special_token_ids - deepseek_vocab.stop_token_ids
        assert not comp.compile(constraint).may_allow_all
    finally:
        comp.close()
    stops_only = byte_level_vocabulary(["<|end|>"], stop_tokens=["<|end|>"])
    assert stops_only.logits_width == stops_only.vocab_size
    comp = Compiler(stops_only, num_threads=1)
    try:
        assert comp.compile(constraint).may_allow_all
    finally:
        comp.close()


def test_wait_ready_builds_the_default_whitespace_bounds(qwen_vocab):
    """The tables of both default bounds (JSON responses, tool calls' JSON) are built at start-up, beside
    the workers, so that the first request of each kind does not build them inside its compile."""
    from thinkgate.structured_output.compilation.constraints import DEFAULT_MAX_WHITESPACE, DEFAULT_TOOL_MAX_WHITESPACE
    from thinkgate.structured_output.tools import DEFAULT_TOOL_MAX_WHITESPACE as tools_default

    assert tools_default == DEFAULT_TOOL_MAX_WHITESPACE
    comp = Compiler(qwen_vocab, num_threads=1)
    try:
        assert comp.wait_ready(120)
        assert {DEFAULT_MAX_WHITESPACE, DEFAULT_TOOL_MAX_WHITESPACE} <= set(comp.whitespace._bounds)
    finally:
        comp.close()


def test_compiler_rejects_bad_settings(qwen_vocab):
    with pytest.raises(ValueError, match="num_threads"):
        Compiler(qwen_vocab, num_threads=0)
    with pytest.raises(ValueError, match="cache_limit_bytes"):
        Compiler(qwen_vocab, cache_limit_bytes=-1)
    with pytest.raises(ValueError, match="no stop token"):
        Compiler(Vocabulary("nostop", [b"a", b"b"], {}, []))


@pytest.mark.parametrize("wrap", ["schema", "tag"])
def test_length_bounded_json_strings_stay_json(qwen_vocab, qwen_compiler, wrap):
    """xgrammar 0.2.9 lets raw control characters into strings with minLength / maxLength; the
    compiler narrows that character class (escapes stay out of such strings, as in xgrammar)."""
    v = qwen_vocab
    schema = {"type": "object", "properties": {"s": {"type": "string", "minLength": 1, "maxLength": 4}},
              "required": ["s"]}
    c = (Constraint.json_schema(schema, any_whitespace=False) if wrap == "schema" else
         Constraint.structural_tag({"type": "json_schema", "json_schema": schema}))
    grammar = qwen_compiler.compile(c).grammar

    def accepts(text: str) -> bool:
        m = xgr.GrammarMatcher(grammar)
        return m.accept_string(text) and m.is_completed()

    assert not xgr.GrammarMatcher(grammar).accept_string('{"s": "a\t')
    assert not xgr.GrammarMatcher(grammar).accept_string('{"s": "a\x01')
    assert accepts('{"s": "abcd"}') and not xgr.GrammarMatcher(grammar).accept_string('{"s": "abcde')
    assert accepts('{"s": "\x7fé€x"}')  # 4 characters, multi-byte ones included
    assert not accepts('{"s": ""}')  # minLength
    m = xgr.GrammarMatcher(grammar)
    for t in v.encode('{"s": "'):
        assert m.accept_token(t)
    allowed = _allowed(m, v.logits_width)
    raw_controls = [i for i, b in enumerate(v.token_bytes[:v.vocab_size])
                    if b and i not in v.special_token_ids and any(x < 0x20 for x in b)]
    assert raw_controls and allowed.isdisjoint(raw_controls)


def test_invalid_specs_fail_the_future_not_the_submit(qwen_vocab):
    comp = Compiler(qwen_vocab, num_threads=1)
    try:
        bad = Constraint.json_schema({"type": "object", "properties": {"a": {"type": "foo"}}})
        fut = comp.submit(bad)  # no ValueError here: validation runs with the compile, in a worker
        with pytest.raises(ValueError, match='invalid JSON schema: Unsupported type "foo"'):
            fut.result(30)
        assert comp.stats.failures == 1 and comp.stats.cache_entries == 0
        mgr = StructuredOutputManager(qwen_vocab, None, compiler=comp)
        mgr.add_request("r", bad)
        t0 = time.monotonic()
        while not mgr.is_ready("r"):
            assert time.monotonic() - t0 < 30
            time.sleep(0.002)
        assert mgr.error("r") == 'invalid JSON schema: Unsupported type "foo"'
        good = Constraint.json_schema({"type": "object", "description": "y" * 100})
        assert comp.compile(good, timeout=30).constraint == good
    finally:
        comp.close()


def test_sync_validation_is_opt_in(qwen_vocab):
    comp = Compiler(qwen_vocab, num_threads=1, sync_validate_max_bytes=64)
    try:
        with pytest.raises(ValueError, match="Unsupported type"):
            comp.submit(Constraint.json_schema({"type": "foo"}))  # short: on the caller's thread
        long_bad = Constraint.json_schema({"type": "foo", "description": "x" * 100})
        with pytest.raises(ValueError, match="Unsupported type"):
            comp.submit(long_bad).result(30)  # longer: with the compile
    finally:
        comp.close()
