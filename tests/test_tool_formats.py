"""Every tool format x {required, named, parallel off, auto with a strict tool}, through the manager.

A synthetic stream (thinking, then the calls rendered as the model's chat template writes them) passes
the StructuredOutputManager token by token (every token also allowed by that step's bitmask); the
reader returns the same calls, whose arguments validate against the tool schemas; a stream wrong in one
token (a wrong tool name, text before a required call, a second call when parallel calls are off, a
closing tag inside an XML string value) is rejected exactly at that token; a missing required argument
too where the format keeps one key order, else at the stop token by the key check.

Vocabularies: the real ones where they have the family's markers (Qwen3.6: hermes, qwen3_coder, qwen3_6;
DeepSeek V4: deepseek_v3/v31/v32/v4; magistral: mistral). For kimi_k2, glm47, minimax_m2, gemma4,
openai (harmony) and llama3_json no offline vocabulary has the markers: their vocabulary is the
Qwen3.6 table plus the family's special tokens (labelled "synthetic" in its name).

The families and their renderers (tests/support.py) are written from the models' chat templates,
independently of the library.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import jsonschema
import pytest
from support import (ANCHOR, BY_NAME, EXAMPLES, FAMILIES, FORMATS, QWEN_THINK, STRICT_TOOL, TOOLS, Family,
                     assert_rejected_at, bound, finish, vocab)
from support import add_ready_request as _add

from thinkgate.testing.vocabularies import FORMAT_VOCABULARY, is_synthetic
from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.structured_output.tools import build_tool_constraint, get_tool_format, get_tool_reader


COVERS = {f for f in FORMATS if get_tool_format(f).covers_reasoning}
"""Formats whose constraint and reader take the whole output, the thinking included (harmony, Muse)."""
LEADS = {  # content before a call, in the format's own message where it has one: (the text, the content read)
    "openai": ("<|channel|>commentary<|message|>Let me look that up.<|end|><|start|>assistant", "Let me look that up."),
    "muse": (" to=commentary<|message|>Let me look that up.<|eom|><|start|>assistant", "Let me look that up."),
    "muse_glimmer": ("", None),  # Glimmer's commentary is a tool: nothing precedes a call but reasoning
    "llama3_json": ("", None), "xlam": ("", None),  # llama and xLAM write either text or calls
    "pythonic": ("", None), "llama4_pythonic": ("", None),  # a pythonic list is a call only as the whole output
}
ANSWERS = {"openai": "<|channel|>final<|message|>{}", "muse": " to=user<|message|>{}", "muse_glimmer": " to=user<|message|>{}"}
"""Free text alone, in the format's answer message where it has one."""


@functools.lru_cache(maxsize=None)
def windows() -> dict[str, tuple[str, ...]]:
    """Each format's share of the corpus: consecutive windows that together cover it. A tool none of whose
    examples its format can write (a value spelling one of that vocabulary's control tokens, a raw XML value
    holding its closing tag: each tested on its own) moves to the next format that can write one, so the
    formats still cover the whole corpus as windows shift when formats are added."""
    names = [t["function"]["name"] for t in TOOLS]
    size = -(-len(names) // len(FORMATS)) + 1
    chosen: dict[str, list[str]] = {f: [] for f in FORMATS}
    for k, fmt in enumerate(FORMATS):
        for j in range(size):
            name = names[(k * (size - 1) + j) % len(names)]
            for f in FORMATS[k:] + FORMATS[:k]:
                if any(renderable(FAMILIES[f], ex) for ex in EXAMPLES[name]):
                    chosen[f].append(name)
                    break
    return {f: tuple(dict.fromkeys([ANCHOR, *chosen[f], STRICT_TOOL])) for f in FORMATS}


def window(fmt: str) -> list[str]:
    """This format's tools: its window of the corpus, the anchor tool and the strict tool."""
    return list(windows()[fmt])


CALL_IDS = {"kimi_k2": r"functions\..+:[0-9]+", "mistral": r"[A-Za-z0-9]{9}", "cohere_command3": r"[0-9]+"}


def renderable(fam: Family, args: dict[str, Any]) -> bool:
    """Whether a model of the family can write ``args``: a raw XML value cannot hold its own closing tag, and
    no value may hold a control token's text of the vocabulary (it encodes to that token, which no grammar
    lets a value hold). Each has tests of its own; the windows of tools shift as formats are added, so the
    examples are filtered here rather than listed."""
    text = json.dumps(args, ensure_ascii=False)
    if fam.xml is not None and fam.xml[1] in text:
        return False
    return not any(m in text for m in vocab(fam.vocab).special_tokens if m)


def check_reader(fam: Family, tools, choice, output: str, expected: list[tuple[str, dict[str, Any]]], *,
                 parallel: bool = True, content: str | None = None, **kw: Any) -> None:
    got = get_tool_reader(fam.fmt, tools, choice, parallel_tool_calls=parallel, **kw, **bound(fam.fmt)).read(output)
    assert [(c.name, json.loads(c.arguments)) for c in got.calls] == expected
    assert got.content == content
    for c in got.calls:  # the family's own id scheme where it has one (tools/call_ids.py)
        assert re.fullmatch(CALL_IDS.get(fam.fmt, r"chatcmpl-tool-[0-9a-f]{32}"), c.id)
        params = BY_NAME[c.name]["function"].get("parameters") or {"type": "object"}
        jsonschema.validate(json.loads(c.arguments), params, cls=jsonschema.Draft202012Validator)


def is_token_prefix(v: Vocabulary, ids: list[int], text: str) -> bool:
    """Whether ``ids`` can start ``text`` as the grammar sees it: control tokens only where ``text``
    has that marker, ordinary tokens only over ordinary text."""
    pos = 0
    markers = sorted(v.special_tokens, key=len, reverse=True)
    for i in ids:
        piece = v.decode([i])
        if i in v.special_token_ids:
            if not text.startswith(piece, pos):
                return False
        else:
            seg = text[pos:pos + len(piece)]
            if seg != piece:
                return False
            if any(text.startswith(m, q) for q in range(pos, pos + len(seg)) for m in markers):
                return False
        pos += len(piece)
    return True


def example(name: str, k: int = 0) -> dict[str, Any]:
    ex = EXAMPLES[name]
    return ex[k % len(ex)]


def example_for(fam: Family, name: str, k: int = 0) -> dict[str, Any]:
    ex = [e for e in EXAMPLES[name] if renderable(fam, e)]
    return ex[k % len(ex)]


# --------------------------------------------------------------------------------------------------
# constraints, compiled once per module (the manager's compile cache keeps them)

@functools.lru_cache(maxsize=None)
def constraint(fmt: str, mode: str, parallel: bool = True):
    names = window(fmt)
    tools = [BY_NAME[n] for n in names]
    if mode == "named":
        choice: Any = {"type": "function", "function": {"name": names[1]}}
    elif mode == "auto":
        choice = "auto"
    else:
        choice = "required"
    c = build_tool_constraint(tools, choice, format=fmt, parallel_tool_calls=parallel, **bound(fmt))
    assert c is not None
    return c, tools, choice


# --------------------------------------------------------------------------------------------------
# the tests

# the four whole-stream tests run every format in the default run; with -m "not slow", hermes only
FORMATS_SLOW_BUT_HERMES = [f if f == "hermes" else pytest.param(f, marks=pytest.mark.slow) for f in FORMATS]


@pytest.mark.parametrize("fmt", FORMATS_SLOW_BUT_HERMES)
def test_required_parallel(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c, tools, choice = constraint(fmt, "required")
    names = window(fmt)
    calls = [(names[1], example_for(fam, names[1])), (names[2], example_for(fam, names[2], 1))]
    if fmt == "openai":  # a harmony turn ends at its call
        calls = calls[:1]
    out = fam.thinking + fam.block(calls)
    finish(fam, c, out)
    check_reader(fam, tools, choice, out if fmt in COVERS else fam.block(calls), calls)
    # every window tool, one call each, through the same constraint
    for n in names:
        one = fam.block([(n, example_for(fam, n))])
        v = vocab(fam.vocab)
        mgr, rid = _add(fam, c)
        try:  # the manager still feeds these to the grammar one by one; one call is just cheaper here
            res = mgr.accept_tokens(rid, v.encode(fam.thinking + one) + [min(v.stop_token_ids)])
            assert res.status == "terminated", (n, res.message)
        finally:
            mgr.remove_request(rid)
        check_reader(fam, tools, choice, one, [(n, example_for(fam, n))])


@pytest.mark.parametrize("fmt", FORMATS_SLOW_BUT_HERMES)
def test_named(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c, tools, choice = constraint(fmt, "named")
    names = window(fmt)
    calls = [(names[1], example_for(fam, names[1]))]
    out = fam.block(calls)
    finish(fam, c, fam.thinking + out)
    check_reader(fam, tools, choice, out, calls)
    # another tool's name is rejected at the first token where it stops being the named one's
    head = fam.call("\x00", {}, 0).split("\x00")[0]
    v = vocab(fam.vocab)
    bad = v.encode(ANCHOR)
    k = next(k for k in range(len(bad)) if not names[1].startswith(v.decode(bad[:k + 1])))
    assert_rejected_at(fam, c, fam.thinking + fam.section[0] + head, ANCHOR, offset=k)


@pytest.mark.parametrize("fmt", FORMATS_SLOW_BUT_HERMES)
def test_parallel_off(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c, tools, choice = constraint(fmt, "required", parallel=False)
    names = window(fmt)
    one = [(names[1], example_for(fam, names[1]))]
    out = fam.block(one)
    finish(fam, c, fam.thinking + out)
    check_reader(fam, tools, choice, out, one, parallel=False)
    # a second call is rejected at its first token
    if fmt == "openai":
        second = "<|start|>assistant" + fam.call(names[2], example_for(fam, names[2]), 1)
    else:
        second = fam.sep + fam.call(names[2], example_for(fam, names[2]), 1)
    body = fam.section[0] + fam.call(*one[0], 0)
    v = vocab(fam.vocab)
    bad = v.encode(second)
    # rejected at the first token that is not the start of what may legitimately follow (the section end)
    k = next(k for k in range(len(bad)) if not is_token_prefix(v, bad[:k + 1], fam.section[1]))
    assert_rejected_at(fam, c, fam.thinking + body, second, offset=k)


@pytest.mark.parametrize("fmt", FORMATS_SLOW_BUT_HERMES)
def test_auto_with_strict_tool(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c, tools, choice = constraint(fmt, "auto")
    calls = [(STRICT_TOOL, example(STRICT_TOOL))]
    lead, content = LEADS.get(fmt, ("Let me look that up.", "Let me look that up."))
    out = lead + fam.block(calls)
    finish(fam, c, fam.thinking + out)
    check_reader(fam, tools, choice, out, calls, content=content)
    # free text alone is fine too
    if fmt in ANSWERS:
        text_only = ANSWERS[fmt].format("It is sunny.")
        finish(fam, c, fam.thinking + text_only)
        assert get_tool_reader(fmt, tools, choice, **bound(fmt)).read(fam.thinking + text_only).content == "It is sunny."
    else:
        finish(fam, c, fam.thinking + "It is sunny in Zürich.")
        assert get_tool_reader(fmt, tools, choice, **bound(fmt)).read("It is sunny in Zürich.").content == "It is sunny in Zürich."
    # a call of the strict tool with a wrong argument type is rejected
    bad = fam.block([(STRICT_TOOL, {"key": "α-β", "exact": "yes"})])
    good = fam.block(calls)
    d = next(i for i, (x, y) in enumerate(zip(bad, good)) if x != y)
    assert_rejected_at(fam, c, fam.thinking + lead + bad[:d], bad[d:])


@pytest.mark.parametrize("fmt", FORMATS)
def test_text_before_required_call(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c, _, _ = constraint(fmt, "required")
    assert_rejected_at(fam, c, fam.thinking, "Sure, let me check.")


@pytest.mark.parametrize("fmt", FORMATS)
def test_missing_required_argument(fmt: str) -> None:
    """Where the grammar keeps one order (gemma4, json) the missing key is rejected at its token; where
    it takes the caller's order (top-level keys in any order) the call ends, and the key check puts the
    request in ERROR at the stop token, naming the key."""
    fam = FAMILIES[fmt]
    c, _, _ = constraint(fmt, "required")
    good = fam.block([(ANCHOR, {"location": "Paris", "unit": "celsius"})])
    bad = fam.block([(ANCHOR, {"unit": "celsius"})])
    if c.schema_check is None:
        d = next(i for i, (x, y) in enumerate(zip(bad, good)) if x != y)
        assert_rejected_at(fam, c, fam.thinking + bad[:d], bad[d:])
        return
    assert fmt not in ("gemma4", "json")
    v = vocab(fam.vocab)
    mgr, rid = _add(fam, c)
    try:
        res = mgr.accept_tokens(rid, v.encode(fam.thinking + bad))
        assert res.status == "ok", res.message
        res = mgr.accept_tokens(rid, [min(v.stop_token_ids)])
        assert res.status == "error" and "'location'" in res.message and ANCHOR in res.message, res.message
    finally:
        mgr.remove_request(rid)


@pytest.mark.parametrize("fmt", FORMATS)
def test_wrong_tool_name(fmt: str) -> None:
    fam = FAMILIES[fmt]
    c, _, _ = constraint(fmt, "required")
    head = fam.call("\x00", {}, 0).split("\x00")[0]
    assert_rejected_at(fam, c, fam.thinking + fam.section[0] + head, "zzz_not_a_tool")


@pytest.mark.parametrize("fmt", [f for f in FORMATS if FAMILIES[f].xml])
def test_closing_tag_inside_string_value(fmt: str) -> None:
    """The value's closing tag written inside the value: rejected at the token that completes it (or,
    where that text is the real closing tag, at the first token after it, which cannot follow)."""
    fam = FAMILIES[fmt]
    c, _, _ = constraint(fmt, "required")
    value_head, close = fam.xml  # type: ignore[misc]
    start = fam.thinking + fam.block([(ANCHOR, {"location": "\x00"})])
    start = start[:start.index("\x00")]
    assert start.endswith(value_head)
    v = vocab(fam.vocab)
    # spell the closing tag with ordinary tokens, one character at a time, then more text
    chars = [i for ch in close for i in v.encode(ch)]
    spelled = chars + v.encode("x and more")
    assert not set(spelled) & v.special_token_ids
    # rejected at the token that completes the closing tag (where that text is the real closing tag,
    # the value ends there and the token after it is rejected)
    offset = len(chars) - 1 + (1 if fam.close_ends_value else 0)
    assert_rejected_at(fam, c, start + "Paris", "", offset=offset, bad_ids=spelled)


IMPLICIT = {"hermes": "I should call a tool.\n", "qwen3_coder": "I should call a tool.\n",
            "qwen3_6": "I should call a tool.\n",
            "deepseek_v32": "I should call a tool.", "deepseek_v4": "I should call a tool.",
            "deepseek_v3": "I should call a tool.", "deepseek_v31": "I should call a tool.",
            "kimi_k2": "<think>I should call a tool.", "glm47": "<think>I should call a tool.",
            "glm45": "<think>I should call a tool.",
            "minimax_m2": "<think>\nI should call a tool.\n", "gemma4": "<|channel>thought\nI should call a tool.",
            "mistral": "[THINK]I should call a tool.", "inkling": "<|content_thinking|>I should call a tool."}


@pytest.mark.parametrize("fmt", list(IMPLICIT))
def test_call_that_ends_the_thinking_implicitly(fmt: str) -> None:
    """The call's first marker ends the thinking without its end marker (Qwen's <tool_call>, DeepSeek
    V4's ｜DSML｜ after a "<" still in the thinking ...): the grammar starts at that token."""
    fam = FAMILIES[fmt]
    c, tools, choice = constraint(fmt, "required")
    names = window(fmt)
    # a call whose example spells none of the vocabulary's control tokens (the corpus window moves as
    # formats are added; a value holding a control token is what the grammar never writes)
    specials = [m for m in vocab(fam.vocab).special_tokens if len(m) > 1]
    name = next(n for n in names[1:] + names[:1] if not any(m in str(example_for(fam, n)) for m in specials))
    calls = [(name, example_for(fam, name))]
    block = fam.block(calls)
    finish(fam, c, IMPLICIT[fmt] + block)
    content = block.split("<｜DSML｜", 1)[1] if "DSML" in block else block
    check_reader(fam, tools, choice, ("｜DSML｜" + content) if "DSML" in block else content, calls)


def test_family_vocabularies() -> None:
    for fmt, fam in FAMILIES.items():
        assert FORMAT_VOCABULARY[fmt] == fam.vocab
        v = vocab(fam.vocab)
        assert ("synthetic" in v.name) == is_synthetic(fam.vocab)
        # the family's prompt and thinking markers are single control tokens of its vocabulary
        ids = v.encode(fam.prompt + fam.thinking)
        assert v.decode(ids) == fam.prompt + fam.thinking


def test_corpus_covered() -> None:
    used = {n for f in FORMATS for n in window(f)}
    assert used == set(BY_NAME), sorted(set(BY_NAME) - used)
    assert len(TOOLS) >= 50


def test_vocabulary_aware_constraints() -> None:
    """With the vocabulary, auto's free text excludes every control token but the stop tokens and the
    trigger; a format whose trigger is not a control token of the vocabulary is a clear error."""
    v = vocab("qwen3_6")
    c = build_tool_constraint([BY_NAME[STRICT_TOOL]], "auto", format="hermes", vocabulary=v)
    assert c is not None
    fmt = json.loads(c.spec)["format"]
    assert fmt["type"] == "token_triggered_tags" and fmt["trigger_tokens"] == ["<tool_call>"]
    excluded = set(fmt["exclude_tokens"])
    assert "<|im_start|>" in excluded and "</think>" in excluded and "<tool_call>" not in excluded
    assert not excluded & {"<|im_end|>", "<|endoftext|>"}
    finish(FAMILIES["hermes"], c, QWEN_THINK + "Sure." + FAMILIES["hermes"].block([(STRICT_TOOL, example(STRICT_TOOL))]))
    assert_rejected_at(FAMILIES["hermes"], c, QWEN_THINK + "Sure.", "<|im_start|>")
    with pytest.raises(ValueError, match=r"has no control token '｜DSML｜'"):
        build_tool_constraint([BY_NAME[ANCHOR]], "required", format="deepseek_v4", vocabulary=v)


def test_json_format_through_the_manager() -> None:
    fam = FAMILIES["hermes"]
    tools = [BY_NAME[n] for n in window("hermes")]
    c = build_tool_constraint(tools, "required", format="json", parallel_tool_calls=False)
    assert c is not None and c.kind == "json_schema"
    out = json.dumps([{"name": ANCHOR, "parameters": example(ANCHOR)}], ensure_ascii=False)
    thinking = fam.thinking.rstrip("\n")  # a JSON-schema constraint starts at the JSON itself
    finish(fam, c, thinking + out)
    got = get_tool_reader("json", tools, "required").read(out)
    assert [(x.name, json.loads(x.arguments)) for x in got.calls] == [(ANCHOR, example(ANCHOR))]
    two = json.dumps([{"name": ANCHOR, "parameters": example(ANCHOR)}] * 2, ensure_ascii=False)
    k = two.index("}, {") + 1
    assert_rejected_at(fam, c, thinking + two[:k], two[k:])


def test_harmony_builtin_tool() -> None:
    """Harmony is the one format with builtin tools: forcing one constrains its ``to=NAME code`` call."""
    fam = FAMILIES["openai"]
    search = {"type": "web_search_preview", "name": "browser.search",
              "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}
    tools = [BY_NAME[ANCHOR], search]
    c = build_tool_constraint(tools, {"type": "web_search_preview"}, format="openai")
    call = '<|channel|>commentary to=browser.search code<|message|>{"query": "weather Oslo"}'
    finish(fam, c, fam.thinking + call)
    got = get_tool_reader("openai", tools).read(fam.thinking + call)
    assert [(x.name, json.loads(x.arguments)) for x in got.calls] == [("browser.search", {"query": "weather Oslo"})]
    head = "<|channel|>commentary to="
    assert_rejected_at(fam, c, fam.thinking + head, "functions.get_weather", offset=0)
