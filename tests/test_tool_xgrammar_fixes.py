"""Where xgrammar 0.2.9's model structural tags are wrong, and that our construction is not.

Each test runs the same stream through xgrammar's own tag (``get_model_structural_tag``, compiled the
way xgrammar is usually deployed: a TokenizerInfo with the control tokens' real text) and through ours
(via the StructuredOutputManager), and shows the bug on theirs and the fix on ours.
"""

from __future__ import annotations

import functools
import json

import pytest
import xgrammar as xgr
from xgrammar.builtin_structural_tag import get_model_structural_tag, normalize_tool_choice
from support import BY_NAME, FAMILIES, assert_rejected_at, manager, run_stream, vocab

from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.structured_output.tools import build_tool_constraint


@functools.lru_cache(maxsize=None)
def xgr_compiler(vocab_name: str) -> xgr.GrammarCompiler:
    """xgrammar as usually deployed: control tokens keep their text."""
    v = vocab(vocab_name)
    info = xgr.TokenizerInfo(list(v.token_bytes), xgr.VocabType.RAW, vocab_size=v.logits_width,
                             stop_token_ids=sorted(v.stop_token_ids))
    return xgr.GrammarCompiler(info, max_threads=1)


def xgr_accepts(vocab_name: str, tag: xgr.StructuralTag, ids: list[int]) -> bool:
    m = xgr.GrammarMatcher(xgr_compiler(vocab_name).compile_structural_tag(tag))
    return all(m.accept_token(t) for t in ids)


def _strip(tool: dict) -> dict:
    t = json.loads(json.dumps(tool))
    t["function"].pop("strict", None)
    return t


WEATHER = _strip(BY_NAME["get_weather"])
USER = _strip(BY_NAME["create_user"])


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_harmony_required_and_named_are_enforced(choice) -> None:
    """xgrammar's harmony tag accepts an empty output (and an analysis message with no call) for
    required and named; ours needs the call."""
    v: Vocabulary = vocab("harmony")
    stop = v.token_id("<|call|>")
    assert stop is not None and stop in v.stop_token_ids
    theirs = get_model_structural_tag("harmony", tools=[WEATHER], tool_choice=choice)
    assert xgr_accepts("harmony", theirs, [stop])  # the bug: no call at all
    analysis_only = v.encode("<|channel|>analysis<|message|>No need.<|end|>") + [v.token_id("<|return|>")]
    assert xgr_accepts("harmony", theirs, analysis_only)

    fam = FAMILIES["openai"]
    ours = build_tool_constraint([WEATHER], choice, format="openai")
    assert run_stream(fam, ours, [stop]) == 0
    assert_rejected_at(fam, ours, "<|channel|>analysis<|message|>No need.", "<|return|>")
    call = '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"location": "Oslo"}'
    assert run_stream(fam, ours, v.encode(call) + [stop]) is None


def test_required_with_only_builtin_tools_is_an_error() -> None:
    search = {"type": "web_search_preview", "name": "browser.search",
              "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}}
    _, builtin, mode = normalize_tool_choice([search], "required")  # xgrammar: fine
    assert mode == "required" and len(builtin) == 1
    with pytest.raises(ValueError, match=r"every available tool is builtin"):
        build_tool_constraint([search], "required", format="openai")


def test_nested_json_string_cannot_hold_the_parameters_closing_tag() -> None:
    """Qwen3.6 XML: a JSON object parameter whose string holds ``</parameter>``. xgrammar's tag
    accepts it, and a reader that cuts the parameter at ``</parameter>`` (vLLM's, ours) then gets
    broken JSON. Ours forbids ``</`` in nested JSON strings (JSON writes it ``<\\/``)."""
    fam = FAMILIES["qwen3_6"]
    v = vocab(fam.vocab)
    head = "<tool_call>\n<function=create_user>\n<parameter=user>\n"
    value = '{"name": "a</parameter>b", "address": {"city": "Bern"}}'
    tail = "\n</parameter>\n</function>\n</tool_call>"
    theirs = get_model_structural_tag("qwen_3_coder", tools=[USER], tool_choice="required", reasoning="disabled")
    assert xgr_accepts(fam.vocab, theirs, v.encode(head + value + tail) + [min(v.stop_token_ids)])

    ours = build_tool_constraint([BY_NAME["create_user"]], "required", format="qwen3_6")
    prefix = fam.thinking + head + '{"name": "a'
    assert_rejected_at(fam, ours, prefix, "</parameter>b")
    escaped = value.replace("</", "<\\/")  # the same JSON value, written safely
    assert run_stream(fam, ours, v.encode(fam.thinking + head + escaped + tail) + [min(v.stop_token_ids)]) is None


@pytest.mark.parametrize("control", ["<|im_start|>", "<tool_call>", "</think>"])
def test_control_tokens_never_inside_arguments(control: str) -> None:
    """xgrammar's qwen_3 tag lets a control token into a JSON string argument (its text is allowed
    there); ours never (control tokens have no text for the compiler)."""
    fam = FAMILIES["hermes"]
    v = vocab(fam.vocab)
    call = '<tool_call>\n{"name": "get_weather", "arguments": {"location": "Paris' + control + '"}}\n</tool_call>'
    ids = v.encode(call)
    assert v.token_id(control) in ids
    theirs = get_model_structural_tag("qwen_3", tools=[WEATHER], tool_choice="required", reasoning="disabled")
    assert xgr_accepts(fam.vocab, theirs, ids)

    ours = build_tool_constraint([WEATHER], "required", format="hermes")
    k = ids.index(v.token_id(control), 1)  # the one inside the argument
    assert run_stream(fam, ours, v.encode(fam.thinking) + ids) == len(v.encode(fam.thinking)) + k


def test_dsml_marker_is_a_token_in_deepseek_v4() -> None:
    """DeepSeek V4 writes ``｜DSML｜`` as one control token; xgrammar's deepseek_v4 tag spells it as text,
    so the model's real stream is rejected at that token once control tokens are kept out of text
    (as they must be: see above). Ours matches the token."""
    fam = FAMILIES["deepseek_v4"]
    v = vocab(fam.vocab)
    block = fam.block([("get_weather", {"location": "Paris"})])
    ids = v.encode(block)
    dsml = v.token_id("｜DSML｜")
    assert dsml in ids
    theirs = get_model_structural_tag("deepseek_v4", tools=[WEATHER], tool_choice="required", reasoning="disabled")
    with pytest.raises(ValueError, match=r"control token"):
        # the manager refuses a literal that holds a control token's text: it could never match
        from thinkgate.structured_output import Constraint
        fam_mgr = manager(fam.vocab, fam.parser)
        fam_mgr.compiler.validate(Constraint.structural_tag(theirs.model_dump_json()))
    ours = build_tool_constraint([WEATHER], "required", format="deepseek_v4")
    assert run_stream(fam, ours, v.encode(fam.thinking) + ids + [min(v.stop_token_ids)]) is None
