"""How ``vllm serve`` loads the tool plugin (``--tool-parser-plugin``), checks its name, and fails on a wrong model.

``vllm serve`` calls ``init_parser_plugin(args)`` (``ToolParserManager.import_tool_parser(value)``: vLLM's
``import_plugin``, a module path, or else a file path loaded as a module of its file's name), then
``validate_api_server_args(args)`` (the ``--tool-call-parser`` name against ``list_registered()``), then
builds the composed parser once with the tokenizer (``ParserManager.get_parser(..., tokenizer=)``), so a
format whose markers the model lacks fails at startup. A bad request fails in ``adjust_request`` with a
``ValueError`` naming the cause (vLLM's server answers it with a 400), touching no other request.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from support import TOOLS
from tool_serving import chat_request, parser_cls

import thinkgate.engines.vllm.tool_parsers as plugin
from thinkgate.structured_output.tools import list_tool_formats

ROOT = Path(__file__).resolve().parents[2]


def test_every_format_is_registered_under_its_thinkgate_name():
    from vllm.tool_parsers import ToolParserManager

    names = set(ToolParserManager.list_registered())
    want = {f"thinkgate_{f}" for f in list_tool_formats(aliases=True)}
    assert want <= names, sorted(want - names)
    assert set(plugin.REGISTERED) == want
    for name in want:
        cls = ToolParserManager.get_tool_parser(name)
        assert cls.format == name.removeprefix("thinkgate_")
        # vLLM reads required / named calls with this parser, deltas from the token ids
        assert cls.supports_required_and_named is False and cls.engine_based_streaming is True
        assert cls.structural_tag_model is None  # the constraint is ours (adjust_request), not vLLM's builtin


@pytest.mark.parametrize("how", ["module", "file"])
def test_vllm_serve_loads_the_plugin_and_accepts_its_names(how):
    """A fresh interpreter, as ``vllm serve`` starts: the CLI's own plugin import and argument check."""
    value = ("thinkgate.engines.vllm.tool_parsers" if how == "module"
             else str(ROOT / "thinkgate" / "engines" / "vllm" / "tool_parsers.py"))
    code = (
        "from types import SimpleNamespace as NS\n"
        "from vllm.entrypoints.common.cli_args import init_parser_plugin, validate_api_server_args\n"
        "from vllm.tool_parsers import ToolParserManager as M\n"
        f"args = NS(tool_parser_plugin={value!r}, reasoning_parser_plugin='thinkgate.engines.vllm.reasoning_parsers',\n"
        "          enable_auto_tool_choice=True, tool_call_parser='thinkgate_qwen3_6',\n"
        "          structured_outputs_config=NS(reasoning_parser='thinkgate_qwen3'))\n"
        "init_parser_plugin(args)\n"
        "validate_api_server_args(args)\n"
        "args.tool_call_parser = 'thinkgate_nonesuch'\n"
        "try:\n"
        "    validate_api_server_args(args)\n"
        "    raise SystemExit('an unknown name passed')\n"
        "except KeyError:\n"
        "    pass\n"
        "print(sum(n.startswith('thinkgate_') for n in M.list_registered()))\n"
    )
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert int(out.stdout.split()[-1]) == len(list_tool_formats(aliases=True))


def test_a_model_without_the_markers_fails_at_startup_naming_them(vllm_tokenizers):
    """thinkgate_mistral on DeepSeek V4's tokenizer: vLLM's startup check raises, naming the flag, and the
    cause is thinkgate's message naming the format and the missing marker."""
    tok, _ = vllm_tokenizers["deepseek_v4"]
    with pytest.raises(TypeError) as e:
        parser_cls(tok, "thinkgate_mistral", None)
    assert "--tool-call-parser thinkgate_mistral" in str(e.value)
    assert "[TOOL_CALLS]" in str(e.value.__cause__) and "mistral" in str(e.value.__cause__)


def test_per_request_objects_share_the_per_model_parser(vllm_tokenizers):
    tok, vocab = vllm_tokenizers["qwen3_6"]
    cls = plugin.REGISTERED["thinkgate_hermes"]
    a, b = cls(tok), cls(tok, [])
    assert a.parser is b.parser and a.parser.vocabulary.token_bytes == vocab.token_bytes


@pytest.mark.parametrize("tools,cause", [
    (TOOLS + [TOOLS[0]], "duplicate tool name"),
    ([{"type": "function", "function": {"name": "a b<c>", "parameters": {"type": "object"}}}], "tool name 'a b<c>'"),
    ([{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}], "type 'object'"),
], ids=["duplicate", "name", "not-an-object"])
def test_a_bad_request_fails_alone_naming_its_cause(vllm_tokenizers, tools, cause):
    """Requests vLLM's own validation lets through (``ChatCompletionRequest`` builds them)."""
    tok, _ = vllm_tokenizers["qwen3_6"]
    cls = parser_cls(tok, "thinkgate_qwen3_6", "thinkgate_qwen3")
    bad = chat_request(tools, "auto")
    with pytest.raises(ValueError, match=cause):
        cls(tok, bad.tools).adjust_request(bad)
    good = chat_request(TOOLS, "required")  # the next request is served as if nothing happened
    assert cls(tok, good.tools).adjust_request(good).structured_outputs.structural_tag


def test_a_stream_given_an_id_outside_the_vocabulary_fails_alone(vllm_tokenizers):
    """A delta with an id the vocabulary does not define: a ``ValueError`` naming it, for that stream; a
    stream of the same server beside it goes on."""
    tok, vocab = vllm_tokenizers["qwen3_6"]
    cls = parser_cls(tok, "thinkgate_hermes", None)
    req = chat_request(TOOLS, "auto")
    bad, good = cls(tok, req.tools), cls(tok, req.tools)
    call = vocab.encode('<tool_call>\n{"name": "ping", "arguments": {}}\n</tool_call>')
    assert good.parse_delta("", call[:3], req, [], finished=False) is None  # a call being written
    with pytest.raises(ValueError, match=str(len(vocab.token_bytes) + 7)):
        bad.parse_delta("", [len(vocab.token_bytes) + 7], req, [], finished=False)
    end = good.parse_delta("", call[3:], req, [], finished=True)
    assert [(c.function.name, c.function.arguments) for c in end.tool_calls] == [("ping", "{}")]
