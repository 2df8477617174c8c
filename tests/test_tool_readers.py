"""The readers: content and calls from the text after the thinking, and agreement with the constraint.

Property tests: for random argument values, what the grammar accepts is exactly what the reader
returns (raw XML / Gemma string values with any characters, the closing tag included: the grammar
rejects a value that contains it, and otherwise the reader gives the value back unchanged).
"""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
import xgrammar as xgr
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from thinkgate.testing.vocabularies import format_vocabulary
from thinkgate.structured_output.compilation.compiler import Compiler
from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader

NOTE = {"type": "function", "function": {"name": "note", "parameters": {
    "type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}}, "required": ["text"]}}}
PING = {"type": "function", "function": {"name": "ping"}}
TOOLS = [NOTE, PING]


def calls(result) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in result.calls]


# -- readers on hand-written outputs ----------------------------------------------------------------

def test_hermes_content_and_calls() -> None:
    r = get_tool_reader("qwen3", TOOLS)
    text = ('Let me write that down.\n<tool_call>\n{"name": "note", "arguments": {"text": "a}b", "n": 2}}\n</tool_call>\n'
            '<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>')
    got = r.read(text)
    assert got.content == "Let me write that down."
    assert calls(got) == [("note", {"text": "a}b", "n": 2}), ("ping", {})]
    assert got.calls[0].arguments == '{"text": "a}b", "n": 2}'  # as the model wrote it
    assert len({c.id for c in got.calls}) == 2
    assert got.calls[0].to_openai() == {"id": got.calls[0].id, "type": "function",
                                         "function": {"name": "note", "arguments": got.calls[0].arguments}}


@pytest.mark.parametrize("text", [
    '<tool_call>\n{"name": "unknown", "arguments": {}}\n</tool_call>',      # not a declared tool
    '<tool_call>\n{"name": "note", "arguments": {"text": "x"}\n</tool_call>',  # broken JSON
    '<tool_call>\n{"name": "note", "arguments": {"text": "x"}}',              # unterminated
    "just text",
])
def test_malformed_calls_stay_content(text: str) -> None:
    got = get_tool_reader("hermes", TOOLS).read(text)
    assert got.calls == () and got.content == text.strip()


def test_a_broken_block_does_not_hide_later_calls() -> None:
    text = ('<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>\n'
            '<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>')
    got = get_tool_reader("hermes", TOOLS).read(text)
    assert calls(got) == [("ping", {})]
    assert got.content == '<tool_call>\n{"name": "nope", "arguments": {}}\n</tool_call>'


def test_qwen3_coder_values_are_exact() -> None:
    text = ("<tool_call>\n<function=note>\n<parameter=text>\nline 1\n</function> is fine here\n\n</parameter>\n"
            "<parameter=n>\n7\n</parameter>\n</function>\n</tool_call>")
    got = get_tool_reader("qwen3_coder", TOOLS, "required").read(text)
    assert calls(got) == [("note", {"text": "line 1\n</function> is fine here\n", "n": 7})] and got.content is None


def test_dsml_reads_string_attribute_and_strips_its_lead() -> None:
    text = ('Checking.\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="note">\n'
            '<｜DSML｜parameter name="text" string="true">42</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="n" string="false">42</｜DSML｜parameter>\n'
            "</｜DSML｜invoke>\n</｜DSML｜tool_calls>")
    got = get_tool_reader("deepseek_v4", TOOLS).read(text)
    assert calls(got) == [("note", {"text": "42", "n": 42})] and got.content == "Checking."


def test_kimi_sections_and_indices() -> None:
    text = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.note:0<|tool_call_argument_begin|>"
            '{"text": "a"}<|tool_call_end|><|tool_call_begin|>functions.ping:1<|tool_call_argument_begin|>{}'
            "<|tool_call_end|><|tool_calls_section_end|>")
    assert calls(get_tool_reader("kimi_k2", TOOLS).read(text)) == [("note", {"text": "a"}), ("ping", {})]


def test_llama_separators_are_not_content() -> None:
    text = '{"name": "note", "parameters": {"text": "a"}}; {"name": "ping", "parameters": {}}'
    got = get_tool_reader("llama3_json", TOOLS).read(text)
    assert calls(got) == [("note", {"text": "a"}), ("ping", {})] and got.content is None


def test_gemma_nested_values() -> None:
    t = {"type": "function", "function": {"name": "cfg", "parameters": {"type": "object", "properties": {
        "a": {"type": "object", "properties": {"b": {"type": "array", "items": {"type": "string"}}}},
        "x": {"type": "number"}, "ok": {"type": "boolean"}, "z": {"type": "null"}}}}}
    text = '<|tool_call>call:cfg{a:{b:[<|"|>p, q<|"|>,<|"|><|"|>]},x:-1.5e3,ok:true,z:null}<tool_call|>'
    got = get_tool_reader("gemma4", [t]).read(text)
    assert calls(got) == [("cfg", {"a": {"b": ["p, q", ""]}, "x": -1500.0, "ok": True, "z": None})]


def test_harmony_messages() -> None:
    text = ("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary to=functions.note "
            '<|constrain|>json<|message|>{"text": "hi"}<|call|>')
    got = get_tool_reader("openai", TOOLS).read(text)
    assert calls(got) == [("note", {"text": "hi"})] and got.content is None
    got = get_tool_reader("openai", TOOLS).read("<|channel|>final<|message|>Hello there.<|return|>")
    assert got.calls == () and got.content == "Hello there."
    pre = ("<|channel|>analysis<|message|>Think.<|end|><|start|>assistant<|channel|>commentary<|message|>Checking."
           "<|end|><|start|>assistant<|channel|>commentary to=functions.ping <|constrain|>json<|message|>{}")
    got = get_tool_reader("openai", TOOLS).read(pre)
    assert calls(got) == [("ping", {})] and got.content == "Checking."
    alt = ('<|start|>assistant to=functions.ping<|channel|>commentary <|constrain|>json<|message|>{}')
    assert calls(get_tool_reader("openai", TOOLS).read(alt)) == [("ping", {})]


def test_reader_rejects_non_text() -> None:
    with pytest.raises(ValueError, match="text must be a str"):
        get_tool_reader("hermes", TOOLS).read(b"x")  # type: ignore[arg-type]


# -- the constraint lets through exactly what the reader returns -----------------------------------

@functools.lru_cache(maxsize=None)
def compiled(fmt: str):
    v = format_vocabulary(fmt)
    c = build_tool_constraint([NOTE], "required", format=fmt)
    return v, Compiler(v, num_threads=1).compile(c)


RENDER = {
    "qwen3_coder": (lambda s: f"<tool_call>\n<function=note>\n<parameter=text>\n{s}\n</parameter>\n</function>\n</tool_call>",
                    "</parameter>"),
    "deepseek_v32": (lambda s: '<｜DSML｜function_calls>\n<｜DSML｜invoke name="note">\n<｜DSML｜parameter name="text" '
                     f'string="true">{s}</｜DSML｜parameter>\n</｜DSML｜invoke>\n</｜DSML｜function_calls>',
                     "</｜DSML｜parameter>"),
    "glm47": (lambda s: f"<tool_call>note<arg_key>text</arg_key><arg_value>{s}</arg_value></tool_call>", "</arg_value>"),
    "minimax_m2": (lambda s: f'<minimax:tool_call>\n<invoke name="note">\n<parameter name="text">{s}</parameter>\n'
                   "</invoke>\n</minimax:tool_call>", "</parameter>"),
    "gemma4": (lambda s: f'<|tool_call>call:note{{text:<|"|>{s}<|"|>}}<tool_call|>', '<|"|>'),
}
# characters that make closing tags likely, plus unicode and whitespace
PIECES = list("</>paremtrgvlu_|\"=｜DSMLé中 \n") + ["</parameter>", "</arg_value>", '<|"|>', "</｜DSML｜parameter>"]
VALUES = st.lists(st.sampled_from(PIECES), max_size=10).map("".join)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", list(RENDER))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=VALUES)
def test_grammar_and_reader_agree_on_raw_values(fmt: str, value: str) -> None:
    render, close = RENDER[fmt]
    v, cc = compiled(fmt)
    text = render(value)
    # the model writes the markers as tokens; text inside the value is ordinary tokens only
    pre, post = render("\x00").split("\x00")
    ids = v.encode(pre) + [t for ch in value for t in v.encode(ch)] + v.encode(post)
    m = xgr.GrammarMatcher(cc.grammar)
    accepted = all(m.accept_token(t) for t in ids) and m.accept_token(min(v.stop_token_ids))
    got = get_tool_reader(fmt, [NOTE], "required").read(text)
    if close in value:
        # the first closing tag ends the value, for the grammar and the reader alike: a value that
        # holds it can never come back whole
        assert not accepted or calls(got)[0][1].get("text") != value
    else:
        assert accepted, (fmt, value)
        assert calls(got) == [("note", {"text": value})] and got.content is None


JSON_RENDER = {
    "hermes": lambda a: f'<tool_call>\n{{"name": "note", "arguments": {a}}}\n</tool_call>',
    "deepseek_v31": lambda a: f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>note<｜tool▁sep｜>{a}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "mistral": lambda a: f"[TOOL_CALLS]note[ARGS]{a}",
}


@pytest.mark.parametrize("fmt", list(JSON_RENDER))
@settings(max_examples=30, deadline=None)
@given(value=st.text(max_size=12), n=st.one_of(st.none(), st.integers(-10**6, 10**6)), ascii_only=st.booleans())
def test_grammar_and_reader_agree_on_json_arguments(fmt: str, value: str, n: int | None, ascii_only: bool) -> None:
    v, cc = compiled(fmt)
    args: dict[str, Any] = {"text": value} if n is None else {"text": value, "n": n}
    body = json.dumps(args, ensure_ascii=ascii_only)
    # control-token text inside a value is written by the tokenizer as that token, which never belongs
    # inside arguments (tests/test_hostile_tools.py covers it): not a case of this property
    assume(not any(sp and sp in body for sp in v.special_tokens))
    text = JSON_RENDER[fmt](body)
    m = xgr.GrammarMatcher(cc.grammar)
    assert all(m.accept_token(t) for t in v.encode(text)) and m.accept_token(min(v.stop_token_ids)), text
    got = get_tool_reader(fmt, [NOTE], "required").read(text)
    assert calls(got) == [("note", args)] and got.content is None
