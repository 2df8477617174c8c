"""The JSON-call formats' whitespace bound beside the grammar (``tools/json_text.py``): each format that declares
it (``ToolFormat.json_whitespace_beside``) builds tags that are JSON text, whitespace and control tokens, and
the checker refuses what the bound's lexer would misread."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from thinkgate.structured_output.tools import build_tool_constraint, list_tool_formats
from thinkgate.structured_output.tools.json_text import json_text_only
from thinkgate.testing.vocabularies import FORMAT_VOCABULARY, format_vocabulary

CORPUS = json.loads((Path(__file__).parent / "data" / "tools" / "corpus.json").read_text(encoding="utf-8"))
TOOLS = [e["tool"] for e in CORPUS["tools"] if "shapes" not in e][:12]
FORMATS = [f for f in list_tool_formats() if f in FORMAT_VOCABULARY and f != "json"]
BESIDE = {"hermes", "llama3_json", "mistral", "kimi_k2", "deepseek_v3", "granite", "jamba", "xlam", "internlm"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_declared_bound_beside_the_grammar_holds_for_the_tags_built(fmt):
    vocab = format_vocabulary(fmt)
    named = {"type": "function", "function": {"name": TOOLS[3]["function"]["name"]}}
    for choice in ("required", named, "auto"):
        c = build_tool_constraint(TOOLS, choice, format=fmt, vocabulary=vocab)
        if c is None or c.whitespace_bound is None:
            assert fmt not in BESIDE or choice == "auto"
            continue
        assert choice != "auto"
        assert json_text_only(json.loads(c.spec)), (fmt, choice)
        free = build_tool_constraint(TOOLS, choice, format=fmt, vocabulary=vocab, max_whitespace=None)
        assert free.whitespace_bound is None and free.spec == c.spec  # the grammar is the unbounded one


def _const(v):
    return {"type": "const_string", "value": v}


@pytest.mark.parametrize("tag, ok", [
    ({"type": "sequence", "elements": [_const('{"id": "'), {"type": "regex", "pattern": "[0-9]{1,4}"},
                                       _const('", "args": '), {"type": "json_schema", "json_schema": {}},
                                       _const("}")]}, True),
    ({"type": "sequence", "elements": [{"type": "regex", "pattern": "[ \\t\\r\\n]*"},
                                       {"type": "token", "token": "<tool_call>"}]}, True),
    ({"type": "tag", "begin": _const('"'), "content": {"type": "json_schema", "json_schema": {}}, "end": '"'},
     False),  # JSON inside a string
    ({"type": "sequence", "elements": [_const('x"'), _const("y")]}, False),  # ends inside a string
    (_const('a\\b"c\\"d"'), True),  # a backslash outside strings is no escape, inside one it is
    ({"type": "or", "elements": [_const('"a"'), _const('"a')]}, False),  # branches end apart
    ({"type": "star", "content": _const('"')}, False),
    ({"type": "any_text"}, False),
    ({"type": "regex", "pattern": "[a-z]+"}, False),
    ({"type": "sequence", "elements": [_const('"'), {"type": "regex", "pattern": "[ \\t\\r\\n]*"}, _const('"')]},
     False),  # a whitespace run inside a string
    ({"type": "tags_with_separator", "separator": "\n", "at_least_one": True, "stop_after_first": False,
      "tags": [{"type": "tag", "begin": {"type": "token", "token": "<a>"},
                "content": {"type": "json_schema", "json_schema": {}}, "end": {"type": "token", "token": "</a>"}}]},
     True),
])
def test_json_text_only(tag, ok):
    assert json_text_only({"type": "structural_tag", "format": tag}) is ok


@pytest.mark.parametrize("bad", [0, -1, "4", True, 2.5])
def test_a_bad_json_whitespace_bound_is_a_value_error(bad):
    from thinkgate.structured_output import Constraint

    with pytest.raises(ValueError, match="max_whitespace|json_whitespace"):
        Constraint.structural_tag({"type": "structural_tag", "format": _const("x")}, json_whitespace=bad)
