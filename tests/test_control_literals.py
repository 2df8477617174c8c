"""Structural tags whose literals spell control tokens as text (an engine's own tool-call tags) rewritten to ask
for the tokens (structured_output/compilation/control_literals.py): the rewrite rules, what has no rewritten form,
the styles table against xgrammar's, and the compiled grammars on Qwen3.6."""

from __future__ import annotations

import json
import typing

import pytest
import xgrammar as xgr

from thinkgate.structured_output import Compiler, Constraint
from thinkgate.structured_output.compilation.control_literals import (STYLE_MARKERS, ControlSplitter,
                                                                      control_tokens_as_tokens)
from thinkgate.structured_output.compilation.xgrammar_adapter import ControlTextError


@pytest.fixture(scope="module")
def sp(qwen_vocab):
    return ControlSplitter(qwen_vocab.special_tokens)


@pytest.fixture(scope="module")
def comp(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=1)
    yield c
    c.close()


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
