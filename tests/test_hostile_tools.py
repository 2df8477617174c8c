"""Hostile outputs for the tool readers and builders.

- Marker text written with ordinary tokens is not a call: ``read_ids`` takes a marker only where the
  model produced the control token (Qwen3.6 for hermes / qwen3_6, Magistral for mistral, DeepSeek V4
  for the deepseek formats, the synthetic harmony and Muse vocabularies for openai and muse); ``read(text)``
  trusts the text.
- The request's rules hold whatever the entry point: ``none`` reads no calls, parallel calls off reads one
  (the rest stays content), a tool outside the allowed ones is content, strict arguments are validated.
- Depth: a tool schema nested past ``MAX_TOOL_SCHEMA_DEPTH`` is a clear ``ValueError``; arguments nested
  past ``MAX_ARGUMENT_DEPTH`` are content, never a ``RecursionError``.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import bound

from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.structured_output.tools import (MAX_ARGUMENT_DEPTH, MAX_TOOL_SCHEMA_DEPTH, build_tool_constraint,
                                               get_tool_reader)
from thinkgate.testing.vocabularies import format_vocabulary

NOTE_PARAMS = {"type": "object", "properties": {"text": {"type": "string"}, "n": {"type": "integer"}},
               "required": ["text"]}
NOTE = {"type": "function", "function": {"name": "note", "parameters": NOTE_PARAMS}}
STRICT_NOTE = {"type": "function", "function": {"name": "note", "parameters": NOTE_PARAMS, "strict": True}}
PING = {"type": "function", "function": {"name": "ping"}}
TOOLS = [NOTE, PING]

# the formats with a real (or, for harmony and Muse, synthetic) vocabulary holding their markers as control tokens
FORMATS = ["hermes", "qwen3_6", "mistral", "deepseek_v4", "deepseek_v31", "openai", "muse"]
MESSAGES = ("openai", "muse")
"""Formats whose calls are messages of their own: a refused call's body is content, its header syntax."""
SECTION = {"deepseek_v4": ("<｜DSML｜tool_calls>\n", "</｜DSML｜tool_calls>"),
           "deepseek_v31": ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")}


def _xml_value(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v)


def one_call(fmt: str, name: str, args: dict[str, Any]) -> str:
    """One call as the model writes it (without the section of the section formats)."""
    if fmt == "hermes":
        return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args)}}}\n</tool_call>'
    if fmt == "qwen3_6":
        params = "".join(f"<parameter={k}>\n{_xml_value(v)}\n</parameter>\n" for k, v in args.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    if fmt == "mistral":
        return f"[TOOL_CALLS]{name}[ARGS]{json.dumps(args)}"
    if fmt == "deepseek_v4":
        params = "".join(f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                         f"{_xml_value(v)}</｜DSML｜parameter>\n" for k, v in args.items())
        return f'<｜DSML｜invoke name="{name}">\n{params}</｜DSML｜invoke>\n'
    if fmt == "deepseek_v31":
        return f"<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>{json.dumps(args)}<｜tool▁call▁end｜>"
    if fmt == "openai":
        return (f"<|start|>assistant<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>"
                f"{json.dumps(args)}<|call|>")
    if fmt == "muse":
        return f"<|start|>assistant to={name}<|message|>{atem_block(name, args)}<|eom|>"
    raise AssertionError(fmt)


def atem_block(name: str, args: dict[str, Any]) -> str:
    params = "".join(f'<atem:parameter name="{k}">{_xml_value(v)}</atem:parameter>\n' for k, v in args.items())
    return f'<atem:function_calls>\n<atem:invoke name="{name}">\n{params}</atem:invoke>\n</atem:function_calls>'


def refused(fmt: str, calls: list[tuple[str, dict[str, Any]]], text: str) -> str:
    """The content a reader leaves of ``text``, the calls ``calls``, when it refuses them all: a message format's
    call bodies (their headers are syntax), any other format's whole text."""
    if fmt == "openai":
        return "".join(json.dumps(a) for _, a in calls)
    if fmt == "muse":
        return "".join(atem_block(n, a) for n, a in calls).strip()
    return text.strip()


def calls_text(fmt: str, calls: list[tuple[str, dict[str, Any]]]) -> str:
    """A block of calls: in one section for the section formats, else one after the other."""
    body = ("\n" if fmt in ("hermes", "qwen3_6") else "").join(one_call(fmt, n, a) for n, a in calls)
    if fmt in SECTION:
        return SECTION[fmt][0] + body + SECTION[fmt][1]
    return body


def final(text: str, fmt: str = "openai") -> str:
    """Harmony / Muse: free text is an answer message (analysis, reasoning are neither content nor calls)."""
    if fmt == "muse":
        return f"<|start|>assistant to=user<|message|>{text}<|eom|>"
    return f"<|channel|>final<|message|>{text}<|return|>"


FINAL_HEADER = {"openai": "<|channel|>final<|message|>", "muse": "<|start|>assistant to=user<|message|>"}


def read_calls(result) -> list[tuple[str, Any]]:
    return [(c.name, json.loads(c.arguments)) for c in result.calls]


@functools.lru_cache(maxsize=None)
def _special_re(vocab: Vocabulary) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(s) for s in sorted(vocab.special_tokens, key=len, reverse=True)))


def real_ids(vocab: Vocabulary, text: str) -> list[int]:
    """``text`` tokenized as the model writes it: control-token text becomes the control token."""
    return vocab.encode(text)


def spelled_ids(vocab: Vocabulary, text: str) -> list[int]:
    """``text`` with every control token's text written with ordinary tokens (each one split in two
    halves encoded apart, e.g. ``<tool`` + ``_call>``): the same characters, no control token."""
    ids: list[int] = []
    pos = 0
    for m in _special_re(vocab).finditer(text):
        if m.start() > pos:
            ids += vocab.encode(text[pos:m.start()])
        s = m.group()
        k = len(s) // 2
        ids += vocab.encode(s[:k]) + vocab.encode(s[k:])
        pos = m.end()
    if pos < len(text):
        ids += vocab.encode(text[pos:])
    assert vocab.decode(ids) == text
    assert not set(ids) & vocab.special_token_ids
    return ids


def vocab_of(fmt: str) -> Vocabulary:
    return format_vocabulary(fmt)


def test_marker_spellings_are_ordinary_tokens_in_the_real_vocabularies() -> None:
    for fmt, marker in [("hermes", "<tool_call>"), ("mistral", "[TOOL_CALLS]"), ("deepseek_v4", "｜DSML｜"),
                        ("deepseek_v31", "<｜tool▁call▁begin｜>"), ("openai", "<|channel|>"), ("muse", "<|message|>")]:
        v = vocab_of(fmt)
        assert v.encode(marker) == [v.special_tokens[marker]]
        ids = spelled_ids(v, marker)
        assert v.decode(ids) == marker and len(ids) >= 2
    q = vocab_of("hermes")
    fake = q.encode("<tool") + q.encode("_call>")
    assert q.decode(fake) == "<tool_call>" and q.special_tokens["<tool_call>"] not in fake


# -- 1. marker text written with ordinary tokens -----------------------------------------------------

@pytest.mark.parametrize("fmt", FORMATS)
def test_read_ids_takes_only_calls_made_of_control_tokens(fmt: str) -> None:
    v = vocab_of(fmt)
    call = calls_text(fmt, [("note", {"text": "hi"})])
    lead = "I could write "
    reader = get_tool_reader(fmt, TOOLS, **bound(fmt))
    if fmt in MESSAGES:
        real = final("Let me see.", fmt) + call
        assert read_calls(reader.read_ids(real_ids(v, real), v)) == [("note", {"text": "hi"})]
        # the call spelled out inside a final message is that message's text
        fake_ids = real_ids(v, FINAL_HEADER[fmt] + lead) + spelled_ids(v, call)
        got = reader.read_ids(fake_ids, v)
        assert got.calls == () and got.content == lead + call
        return
    got = reader.read_ids(real_ids(v, lead + call), v)
    assert read_calls(got) == [("note", {"text": "hi"})] and got.content == lead.strip()
    fake_ids = real_ids(v, lead) + spelled_ids(v, call)
    for got in (reader.read_ids(fake_ids, v), reader.read(token_ids=fake_ids, vocabulary=v)):
        assert got.calls == () and got.content == (lead + call).strip()
    # read(text) trusts the text (documented): the same characters read as a call there
    assert read_calls(reader.read(v.decode(fake_ids))) == [("note", {"text": "hi"})]


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_6", "deepseek_v4", "openai"])
def test_a_call_needs_every_marker_as_a_control_token(fmt: str) -> None:
    """A real opening marker with a spelled-out closing one is not a call."""
    v = vocab_of(fmt)
    call = calls_text(fmt, [("note", {"text": "hi"})])
    closing = {"hermes": "</tool_call>", "qwen3_6": "</tool_call>", "deepseek_v4": "</｜DSML｜tool_calls>",
               "openai": "<|call|>"}[fmt]
    head, tail = call[:call.rindex(closing)], call[call.rindex(closing):]
    ids = real_ids(v, head) + spelled_ids(v, tail)
    got = get_tool_reader(fmt, TOOLS, **bound(fmt)).read_ids(ids, v)
    assert got.calls == ()


def test_harmony_call_spelled_inside_analysis_is_not_a_call() -> None:
    v = vocab_of("openai")
    fake = one_call("openai", "ping", {})
    analysis_ids = (real_ids(v, "<|channel|>analysis<|message|>Maybe <|end|>")[:-1]
                    + spelled_ids(v, "<|end|>" + fake) + real_ids(v, "<|end|>"))
    real = one_call("openai", "note", {"text": "hi"})
    for choice in ("required", "auto"):
        reader = get_tool_reader("openai", TOOLS, choice)
        got = reader.read_ids(analysis_ids + real_ids(v, real), v)
        assert read_calls(got) == [("note", {"text": "hi"})], choice
        got = reader.read_ids(analysis_ids + real_ids(v, final("Done.")), v)
        assert got.calls == () and got.content == "Done."


def test_harmony_required_second_call_breaking_the_strict_schema_is_content() -> None:
    text = one_call("openai", "note", {"text": "hi"}) + one_call("openai", "note", {"n": 1})
    for reader in (get_tool_reader("openai", TOOLS, "required"), get_tool_reader("openai", [STRICT_NOTE, PING])):
        got = reader.read(text)
        assert read_calls(got) == [("note", {"text": "hi"})]
        assert got.content == '{"n": 1}'


# -- the request's rules, whatever the entry point ----------------------------------------------------

def _both_entry_points(fmt: str, reader, text: str):
    v = vocab_of(fmt)
    return [reader.read(text), reader.read_ids(real_ids(v, text), v)]


@pytest.mark.parametrize("fmt", FORMATS)
def test_tool_choice_none_reads_no_calls(fmt: str) -> None:
    text = calls_text(fmt, [("note", {"text": "hi"})])
    for got in _both_entry_points(fmt, get_tool_reader(fmt, TOOLS, "none", **bound(fmt)), text):
        assert got.calls == ()
        # a message format: the refused call's body, as for any refused call
        assert got.content == refused(fmt, [("note", {"text": "hi"})], text)


@pytest.mark.parametrize("fmt", FORMATS)
def test_parallel_calls_off_returns_the_first_call_and_the_rest_stays_content(fmt: str) -> None:
    if fmt in MESSAGES:
        text = one_call(fmt, "note", {"text": "a"}) + one_call(fmt, "ping", {})
        rest = refused(fmt, [("ping", {})], text)
    elif fmt in SECTION:
        text = calls_text(fmt, [("note", {"text": "a"}), ("ping", {})])
        rest = one_call(fmt, "ping", {}).strip()
    else:
        first, second = one_call(fmt, "note", {"text": "a"}), one_call(fmt, "ping", {})
        text = first + "\n" + second
        rest = second
    reader = get_tool_reader(fmt, TOOLS, parallel_tool_calls=False, **bound(fmt))
    for got in _both_entry_points(fmt, reader, text):
        assert read_calls(got) == [("note", {"text": "a"})]
        assert got.content == rest
    named = get_tool_reader(fmt, TOOLS, {"type": "function", "function": {"name": "note"}}, **bound(fmt))
    assert read_calls(named.read(text)) == [("note", {"text": "a"})]
    # parallel calls on: both
    assert [c.name for c in get_tool_reader(fmt, TOOLS, **bound(fmt)).read(text).calls] == ["note", "ping"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_call_to_a_tool_outside_the_allowed_ones_is_content(fmt: str) -> None:
    text = calls_text(fmt, [("ping", {})])
    allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": [
        {"type": "function", "function": {"name": "note"}}]}}
    named_other = {"type": "function", "function": {"name": "note"}}
    for choice in (allowed, named_other):
        for got in _both_entry_points(fmt, get_tool_reader(fmt, TOOLS, choice, **bound(fmt)), text):
            assert got.calls == ()
            assert got.content == refused(fmt, [("ping", {})], text)
    # undeclared
    for got in _both_entry_points(fmt, get_tool_reader(fmt, [NOTE], **bound(fmt)), text):
        assert got.calls == ()


@pytest.mark.parametrize("fmt", FORMATS)
def test_strict_arguments_are_validated_against_the_schema(fmt: str) -> None:
    bad = calls_text(fmt, [("note", {"n": 1})])          # "text" is required
    good = calls_text(fmt, [("note", {"text": "x", "n": 1})])
    readers = [get_tool_reader(fmt, [STRICT_NOTE, PING], **bound(fmt)),
               get_tool_reader(fmt, TOOLS, strictness="parameter", **bound(fmt)),
               get_tool_reader(fmt, TOOLS, "required", **bound(fmt))]
    for reader in readers:
        for got in _both_entry_points(fmt, reader, bad):
            assert got.calls == ()
            assert got.content == refused(fmt, [("note", {"n": 1})], bad)
        assert read_calls(reader.read(good)) == [("note", {"text": "x", "n": 1})]
    # not strict, not forced: any arguments (XML formats then read values as raw text)
    assert [c.name for c in get_tool_reader(fmt, TOOLS, **bound(fmt)).read(bad).calls] == ["note"]


def test_json_format_refuses_the_whole_array_when_a_call_is_refused() -> None:
    two = json.dumps([{"name": "note", "parameters": {"text": "a"}}, {"name": "ping", "parameters": {}}])
    assert get_tool_reader("json", TOOLS, "none").read(two).calls == ()
    got = get_tool_reader("json", TOOLS, "required", parallel_tool_calls=False).read(two)
    assert got.calls == () and got.content == two
    allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "required", "tools": [{"type": "function", "name": "note"}]}}
    assert get_tool_reader("json", TOOLS, allowed).read(two).calls == ()
    bad = json.dumps([{"name": "note", "parameters": {"n": 1}}])
    assert get_tool_reader("json", TOOLS, "required").read(bad).calls == ()
    assert [c.name for c in get_tool_reader("json", TOOLS, "required").read(two).calls] == ["note", "ping"]


# -- 2. depth ----------------------------------------------------------------------------------------

def _nested_schema(levels: int) -> dict[str, Any]:
    s: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        s = {"type": "object", "properties": {"a": s}}
    return s


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_6", "json"])
def test_tool_schema_nested_past_the_limit_is_a_clear_error(fmt: str) -> None:
    deep = [{"type": "function", "function": {"name": "f", "parameters": _nested_schema(250)}}]
    with pytest.raises(ValueError, match=f"deeper than {MAX_TOOL_SCHEMA_DEPTH} levels"):
        build_tool_constraint(deep, "required", format=fmt, **bound(fmt))
    with pytest.raises(ValueError, match="MAX_TOOL_SCHEMA_DEPTH"):
        get_tool_reader(fmt, deep)
    # the limit counts objects / arrays: two per property level, the innermost {"type": "string"} one
    at_limit = [{"type": "function", "function": {"name": "f", "parameters": _nested_schema(MAX_TOOL_SCHEMA_DEPTH // 2 - 1)}}]
    assert build_tool_constraint(at_limit, "required", format=fmt) is not None
    over = [{"type": "function", "function": {"name": "f", "parameters": _nested_schema(MAX_TOOL_SCHEMA_DEPTH // 2)}}]
    with pytest.raises(ValueError, match="MAX_TOOL_SCHEMA_DEPTH"):
        build_tool_constraint(over, "required", format=fmt)


TRIGGERS = {
    "hermes": '<tool_call>\n{"name": "f", "arguments": ',
    "llama3_json": '{"name": "f", "parameters": ',
    "mistral": "[TOOL_CALLS]f[ARGS]",
    "deepseek_v3": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n",
    "deepseek_v31": "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>",
    "kimi_k2": "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>",
    "openai": "<|channel|>commentary to=functions.f <|constrain|>json<|message|>",
    "json": '[{"name": "f", "parameters": ',
    "qwen3_6": "<tool_call>\n<function=f>\n<parameter=x>\n",
    "qwen3_coder": "<tool_call>\n<function=f>\n<parameter=x>\n",  # a Python literal: ast, bounded
    "deepseek_v4": '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="f">\n<｜DSML｜parameter name="x" string="false">',
    "glm47": "<tool_call>f<arg_key>x</arg_key><arg_value>",
    "minimax_m2": '<minimax:tool_call>\n<invoke name="f">\n<parameter name="x">',
    "gemma4": "<|tool_call>call:f{x:",
    "hf": "<|tool_call>call:f{x:",  # Gemma 4's response template: its calls
    "kimi_k3": '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|><|open|>argument key="x" type="array"<|sep|>',
    "muse": ' to=f<|message|><atem:function_calls>\n<atem:invoke name="f">\n<atem:parameter name="x">',
}
HEADERS = {"openai": TRIGGERS["openai"], "muse": " to=f<|message|>"}
"""A message format's call header: syntax, not content."""
F = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "x": {"type": "array"}}}}}


@pytest.mark.parametrize("fmt", sorted(TRIGGERS))
@pytest.mark.parametrize("closed", [False, True])
def test_arguments_nested_5000_deep_are_content_not_a_crash(fmt: str, closed: bool) -> None:
    text = TRIGGERS[fmt] + "[" * 5000 + ("]" * 5000 + "}" if closed else "")
    for choice in ("auto", "required"):
        got = get_tool_reader(fmt, [F], choice, **bound(fmt)).read(text)
        # harmony, Muse: a refused call's body is content (its header is syntax)
        assert got.calls == () and got.content == text[len(HEADERS.get(fmt, "")):]


def test_arguments_nested_5000_deep_from_ids_are_content() -> None:
    v = vocab_of("hermes")
    text = TRIGGERS["hermes"] + "[" * 5000
    got = get_tool_reader("hermes", [F]).read_ids(real_ids(v, text), v)
    assert got.calls == () and got.content == text


@pytest.mark.parametrize("fmt", ["hermes", "mistral", "openai", "json"])
def test_arguments_at_the_depth_limit_are_read_and_past_it_are_content(fmt: str) -> None:
    def args(depth: int) -> dict[str, Any]:  # the arguments object is level 1
        v: Any = []
        for _ in range(depth - 2):
            v = [v]
        return {"x": v}

    def output(a: dict[str, Any]) -> str:
        if fmt == "json":
            return json.dumps([{"name": "f", "parameters": a}])
        return calls_text(fmt, [("f", a)]).replace("note", "f")

    reader = get_tool_reader(fmt, [{"type": "function", "function": {"name": "f"}}])
    assert reader.read(output(args(MAX_ARGUMENT_DEPTH))).calls != ()
    assert reader.read(output(args(MAX_ARGUMENT_DEPTH + 1))).calls == ()


# -- property: only real marker tokens start calls ----------------------------------------------------

PLAIN = st.text(alphabet="abc xyz.,:\n", max_size=12)
SEGMENT = st.one_of(
    st.tuples(st.just("text"), PLAIN),
    st.tuples(st.sampled_from(["real", "fake", "half"]), st.sampled_from(["note", "ping"]),
              st.text(alphabet="abcdef xyz", max_size=8)),
)


@pytest.mark.parametrize("fmt", ["hermes", "qwen3_6", "mistral", "deepseek_v4"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(SEGMENT, max_size=6))
def test_only_calls_made_of_control_tokens_are_read(fmt: str, segments: list[tuple]) -> None:
    v = vocab_of(fmt)
    ids: list[int] = []
    expected: list[tuple[str, dict[str, Any]]] = []
    refused: list[str] = []
    for seg in segments:
        if seg[0] == "text":
            ids += spelled_ids(v, " " + seg[1] + " ")
            continue
        kind, name, value = seg
        args = {"text": value} if name == "note" else {}
        call = calls_text(fmt, [(name, args)])
        if kind == "real":
            ids += real_ids(v, call)
            expected.append((name, args))
        elif kind == "fake":
            ids += spelled_ids(v, call)
            refused.append(call)
        else:  # the opening marker real, the rest spelled out
            first = _special_re(v).search(call)
            assert first is not None
            ids += real_ids(v, call[:first.end()]) + spelled_ids(v, call[first.end():])
    got = get_tool_reader(fmt, TOOLS, **bound(fmt)).read_ids(ids, v)
    assert read_calls(got) == expected
    for call in refused:
        assert call.strip() in (got.content or "")
