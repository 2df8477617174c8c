"""Structural tags whose literals spell control tokens as text (an engine's own tool-call tags) rewritten to ask
for the tokens (structured_output/compilation/control_literals.py): the rewrite rules, what has no rewritten form,
the styles table against xgrammar's, and the compiled grammars on Qwen3.6."""

from __future__ import annotations

import json
import typing

import pytest
import xgrammar as xgr

from thinkgate.structured_output import Compiler, Constraint
from thinkgate.structured_output.compilation.control_literals import (STYLE_MARKERS, control_tokens_as_tokens,
                                                                      engine_structural_tag)
from thinkgate.structured_output.compilation.xgrammar_adapter import ControlSplitter, ControlTextError


@pytest.fixture(scope="module")
def comp(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=1)
    yield c
    c.close()


@pytest.fixture(scope="module")
def sp(comp):
    return comp.control_splitter  # the compiler's, as the engine backends take it


def _tag(fmt):
    return {"type": "structural_tag", "format": fmt}


def test_split_finds_every_control_token_the_longest_first(qwen_vocab, sp):
    tc, etc = qwen_vocab.token_id("<tool_call>"), qwen_vocab.token_id("</tool_call>")
    assert sp.split("a<tool_call>\n{x}</tool_call>") == ["a", tc, "\n{x}", etc]
    assert sp.split("<tool_call></tool_call>") == [tc, etc]
    assert sp.split("<tool_call") == ["<tool_call"] and sp.split("") == []
    assert not sp.has_control("<tool call>") and sp.has_control("x<think>")
    # a vocabulary with one control text inside another: the longer one is the token
    two = ControlSplitter({"<a>": 1, "<a><b>": 2})
    assert two.split("x<a><b><a>") == ["x", 2, 1]
    assert ControlSplitter({}).split("<tool_call>") == ["<tool_call>"]


def test_the_rewrite_rules(qwen_vocab, sp):
    tc, etc = qwen_vocab.token_id("<tool_call>"), qwen_vocab.token_id("</tool_call>")
    schema = {"type": "object"}
    legacy_like = _tag({"type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True,
                        "tags": [{"type": "tag", "begin": '<tool_call>\n{"name": "f", "arguments": ',
                                  "content": {"type": "json_schema", "json_schema": schema}, "end": "}\n</tool_call>"}]})
    out = control_tokens_as_tokens(legacy_like, sp)["format"]
    assert out == {"type": "token_triggered_tags", "trigger_tokens": [tc], "exclude_tokens": [], "at_least_one": True,
                   "tags": [{"type": "tag", "begin": {"type": "token", "token": tc},
                             "content": {"type": "sequence", "elements": [
                                 {"type": "const_string", "value": '\n{"name": "f", "arguments": '},
                                 {"type": "json_schema", "json_schema": schema},
                                 {"type": "const_string", "value": "}\n"}]},
                             "end": {"type": "token", "token": etc}}]}
    assert legacy_like["format"]["type"] == "triggered_tags"  # the caller's tag is not changed
    const = control_tokens_as_tokens(_tag({"type": "const_string", "value": "a<tool_call>b"}), sp)["format"]
    assert const == {"type": "sequence", "elements": [{"type": "const_string", "value": "a"},
                                                      {"type": "token", "token": tc},
                                                      {"type": "const_string", "value": "b"}]}
    only = control_tokens_as_tokens(_tag({"type": "const_string", "value": "<tool_call>"}), sp)["format"]
    assert only == {"type": "token", "token": tc}
    # text before the token in a begin stays the begin (outside triggered_tags)
    tag = control_tokens_as_tokens(_tag({"type": "tag", "begin": "x<tool_call>", "content": {"type": "any_text"},
                                         "end": "</tool_call>"}), sp)["format"]
    assert tag["begin"] == "x" and tag["end"] == {"type": "token", "token": etc}
    assert tag["content"]["elements"][0] == {"type": "token", "token": tc}
    excl = control_tokens_as_tokens(_tag({"type": "triggered_tags", "triggers": ["<tool_call>"], "excludes": ["<think>"],
                                          "tags": [{"type": "tag", "begin": "<tool_call>", "content": {"type": "any_text"},
                                                    "end": "</tool_call>"}]}), sp)["format"]
    assert excl["exclude_tokens"] == [qwen_vocab.token_id("<think>")]


@pytest.mark.parametrize("fmt, where", [
    ({"type": "triggered_tags", "triggers": ["x<tool_call>"], "tags": [
        {"type": "tag", "begin": "x<tool_call>", "content": {"type": "any_text"}, "end": "y"}]}, "triggers[0]"),
    ({"type": "triggered_tags", "triggers": ["<tool_call>"], "excludes": ["stop"], "tags": [
        {"type": "tag", "begin": "<tool_call>", "content": {"type": "any_text"}, "end": "y"}]}, "excludes"),
    ({"type": "triggered_tags", "triggers": ["<tool_call>", "<f>"], "tags": [
        {"type": "tag", "begin": "<tool_call>", "content": {"type": "any_text"}, "end": "y"}]}, "triggers[1]"),
    ({"type": "tags_with_separator", "separator": "<tool_call>", "tags": []}, "separator"),
    ({"type": "tag", "begin": "a", "content": {"type": "any_text"}, "end": ["</tool_call>", "x"]}, "end"),
    ({"type": "dispatch", "rules": [["<tool_call>", {"type": "const_string", "value": "x"}]]}, "rules[0][0]"),
    ({"type": "sequence", "elements": [{"type": "const_string", "value": "<tool_call>"},
                                       {"type": "json_schema", "json_schema": {}, "style": "no_such_style"}]}, "style"),
])
def test_what_has_no_rewritten_form_is_a_control_text_error(sp, fmt, where):
    with pytest.raises(ControlTextError, match=r"\$\.format.*" + where.replace("[", r"\[").replace("]", r"\]")):
        control_tokens_as_tokens(_tag(fmt), sp)


def test_a_style_whose_own_text_holds_a_control_token_has_no_rewritten_form():
    sp = ControlSplitter({"｜DSML｜": 7, "<tool_call>": 8})
    fmt = {"type": "sequence", "elements": [{"type": "const_string", "value": "<tool_call>"},
                                            {"type": "json_schema", "json_schema": {}, "style": "deepseek_xml"}]}
    with pytest.raises(ControlTextError, match="deepseek_xml"):
        control_tokens_as_tokens(_tag(fmt), sp)
    fmt["elements"][1]["style"] = "qwen_xml"
    assert control_tokens_as_tokens(_tag(fmt), sp)["format"]["elements"][0] == {"type": "token", "token": 8}


def test_the_styles_table_names_every_style_of_the_installed_xgrammar():
    styles = typing.get_args(xgr.structural_tag.JSONSchemaFormat.model_fields["style"].annotation)
    assert set(styles) == set(STYLE_MARKERS), set(styles) ^ set(STYLE_MARKERS)


def test_a_rewritten_tag_asks_for_the_tokens(qwen_vocab, sp, comp):
    """The hermes-style tag on Qwen3.6 (``<tool_call>`` a control token): refused as text, rewritten it takes the
    call the model writes and refuses the same text with the marker spelled by ordinary tokens."""
    v = qwen_vocab
    tag = _tag({"type": "triggered_tags", "triggers": ["<tool_call>"], "at_least_one": True, "tags": [
        {"type": "tag", "begin": '<tool_call>\n{"name": "f", "arguments": ',
         "content": {"type": "json_schema", "json_schema": {"type": "object", "properties": {"a": {"type": "integer"}},
                                                            "required": ["a"]}},
         "end": "}\n</tool_call>"}]})
    with pytest.raises(ValueError, match="control token"):
        comp.compile(Constraint.structural_tag(tag))
    g = comp.compile(Constraint.structural_tag(control_tokens_as_tokens(tag, sp)))
    call = '<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'

    def takes(ids):
        m = xgr.GrammarMatcher(g.grammar)
        return all(m.accept_token(t) for t in ids)

    assert takes(v.encode(call))
    assert not takes(v.encode("<tool") + v.encode("_call>") + v.encode(call[len("<tool_call>"):]))
    assert not takes(v.encode(call.replace('"a": 1', '"a": "x"')))


def test_a_long_literal_with_many_control_tokens_is_rewritten_in_one_pass(qwen_vocab, sp):
    lit = "x<tool_call>" * 20000
    out = control_tokens_as_tokens(_tag({"type": "const_string", "value": lit}), sp)["format"]
    assert len(out["elements"]) == 40000
    assert json.dumps(out)  # plain data


# xgrammar's own model tags (get_model_structural_tag, what vLLM's tool parsers send): markers written as text
XGRAMMAR_MODELS = ["llama", "kimi", "kimi_k3", "deepseek_r1", "deepseek_v3_1", "qwen_3_coder", "qwen_3_5", "mimo",
                   "qwen_3", "harmony", "deepseek_v3_2", "minimax", "minimax_m3", "glm_4_7", "gemma_4", "deepseek_v4",
                   "deepseek_v4_1", "cohere", "exaone"]
# with no rewritten form in that vocabulary (the engines hand them to their own xgrammar backend)
NO_FORM = {"deepseek_v4": {"deepseek_v3_2", "deepseek_v4", "deepseek_v4_1"},  # DSML parameter styles
           "qwen3_6": {"mimo", "minimax_m3", "glm_4_7"}}                          # text excludes beside token triggers


def _text_view(v) -> xgr.GrammarCompiler:
    """xgrammar's default view of the vocabulary: every control token is its text."""
    text = {i: t.encode() for t, i in v.special_tokens.items()}
    info = xgr.TokenizerInfo([text.get(i, b) for i, b in enumerate(v.token_bytes)], xgr.VocabType.RAW,
                             vocab_size=v.logits_width, stop_token_ids=sorted(v.stop_token_ids))
    return xgr.GrammarCompiler(info, cache_enabled=False)


def _bits(m: xgr.GrammarMatcher, width: int):
    import numpy as np
    import torch

    bm = torch.full((1, (width + 31) // 32), -1, dtype=torch.int32)
    m.fill_next_token_bitmask(bm)
    return np.unpackbits(bm[0].numpy().view(np.uint8), bitorder="little")[:width].astype(bool)


@pytest.mark.parametrize("vocab_name", ["qwen3_6", "deepseek_v4"])
def test_xgrammars_model_tags_rewritten_only_narrow_its_text_view(vocab_name, qwen_vocab, deepseek_vocab):
    """Every xgrammar model tag for ``tool_choice="required"`` compiles as thinkgate's once rewritten (the pinned
    ones have no such form); along random walks through thinkgate's rows (control tokens preferred, to get through
    the markers, :func:`_next`) every row lies within the row of the same tag in xgrammar's text view, and both
    accept each token taken."""
    import random

    from xgrammar.builtin_structural_tag import get_model_structural_tag

    v = qwen_vocab if vocab_name == "qwen3_6" else deepseek_vocab
    tool = {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
        "type": "object", "properties": {"location": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["location"]}}}
    comp = Compiler(v, num_threads=1)
    sp = ControlSplitter(v.special_tokens)
    view = _text_view(v)
    specials = sorted(v.special_token_ids - v.stop_token_ids)
    closers = [ids[0] for ids in map(v.encode, ['"', "}", "]", ",", "\n", ">", "0", "a", '"}', "}\n"]) if len(ids) == 1]
    no_form = set()
    try:
        for model in XGRAMMAR_MODELS:
            spec = get_model_structural_tag(model, tools=[tool], tool_choice="required", reasoning=False).model_dump_json()
            try:
                c = engine_structural_tag(spec, sp)
            except ControlTextError:
                no_form.add(model)
                continue
            ours_g, theirs_g = comp.compile(c).grammar, view.compile_structural_tag(spec)
            for seed in range(2):
                rng = random.Random(seed)
                ours, theirs = xgr.GrammarMatcher(ours_g), xgr.GrammarMatcher(theirs_g)
                for step in range(80):
                    a = _bits(ours, v.logits_width)
                    assert not (a & ~_bits(theirs, v.logits_width)).any(), (model, seed, step)
                    t = _next(rng, ours, a, v, specials, closers)
                    if t is None:
                        break
                    assert ours.accept_token(t) and theirs.accept_token(t), (model, step, t)
    finally:
        comp.close()
    assert no_form == NO_FORM[vocab_name]


def _next(rng, matcher: xgr.GrammarMatcher, allowed, v, specials: list[int], closers: list[int]) -> int | None:
    """A walk's next token among the allowed ones, steered to get through a call: the text the grammar forces
    next where there is one, else often a control token or a closing character, else any allowed token; None
    at the end (nothing but a stop token)."""
    import numpy as np

    forced = matcher.find_jump_forward_string()
    if forced:
        first = v.encode(forced)[:1]
        if first and allowed[first[0]]:
            return first[0]
    r = rng.random()
    ctl = [i for i in specials if allowed[i]]
    if ctl and r < 0.4:
        return rng.choice(ctl)
    close = [i for i in closers if allowed[i]]
    if close and r < 0.8:
        return rng.choice(close)
    ids = np.flatnonzero(allowed)
    ids = [int(i) for i in ids if int(i) not in v.stop_token_ids]
    return rng.choice(ids) if ids else None


def test_engine_structural_tag_leaves_other_problems_to_the_compile(qwen_vocab, sp, comp):
    tag = {"type": "structural_tag", "format": {"type": "any_tokens", "exclude_tokens": ["two words"]}}
    c = engine_structural_tag(json.dumps(tag), sp)
    with pytest.raises(ValueError, match="not a single token"):
        comp.compile(c)
    with pytest.raises(ValueError, match="expected an object"):
        engine_structural_tag("[1]", sp)


def test_excludes_that_name_control_tokens(qwen_vocab, sp, comp):
    """Free text behind text triggers excludes a control token by its private spelling (xgrammar's text view
    excludes its text); a JSON schema's or an any_text's excludes stay as they are (those never hold a control
    token here); in free text an exclude of text and a token together, or of a token whose id begins another's,
    has no form."""
    v = qwen_vocab
    think = v.token_id("<think>")
    fmt = {"type": "triggered_tags", "triggers": ["{\"f\":"], "excludes": ["<think>", "oops"],
           "tags": [{"type": "tag", "begin": '{"f":', "content": {"type": "json_schema", "json_schema": {},
                                                                  "excludes": ["<think>", "x"]}, "end": "}"}]}
    out = control_tokens_as_tokens(_tag(fmt), sp)["format"]
    assert out["excludes"] == [sp.private_text(think), "oops"]
    assert out["tags"][0]["content"]["excludes"] == ["<think>", "x"]
    g = comp.compile(engine_structural_tag(_tag(fmt), sp))
    m = xgr.GrammarMatcher(g.grammar)
    assert all(m.accept_token(t) for t in v.encode("hello "))
    assert not m.accept_token(think)  # excluded, as the text view excludes its text
    assert m.accept_token(v.token_id("<tool_call>"))  # another control token is free text there, as in that view
    with pytest.raises(ControlTextError, match="text and a control token"):
        control_tokens_as_tokens(_tag({**fmt, "excludes": ["a<think>"]}), sp)
    ambiguous = ControlSplitter({"<s>": 1, "<x>": 12})
    assert ambiguous.private_text(12) is not None and ambiguous.private_text(1) is None
    with pytest.raises(ControlTextError, match="begins another"):
        control_tokens_as_tokens(_tag({"type": "dispatch", "rules": [], "excludes": ["<s>"]}), ambiguous)
    # a tag with no control-token text is the same constraint
    plain = _tag({"type": "const_string", "value": "<tool call>"})
    assert engine_structural_tag(plain, sp).key == Constraint.structural_tag(plain).key
