"""How an SGLang 0.5.23 server gets the thinkgate backend: the ``sglang.srt.plugins`` entry point, run
by SGLang's ``load_plugins`` (what ``python -m sglang.launch_server`` and the scheduler process call),
registers ``thinkgate`` and adds it to ``--grammar-backend``'s choices; SGLang's own
``create_grammar_backend`` then builds our backend, not wrapped in its ``ReasonerGrammarBackend``."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace as NS

import pytest

ARGS = ["--model-path", "/nonexistent-model", "--grammar-backend", "thinkgate", "--reasoning-parser", "deepseek-v4"]


def test_load_plugins_registers_thinkgate_and_the_cli_takes_it():
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES
    from sglang.srt.constrained.base_grammar_backend import GRAMMAR_BACKEND_REGISTRY
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args

    from thinkgate.engines.sglang.backend import create_backend

    load_plugins()
    assert GRAMMAR_BACKEND_REGISTRY.get("thinkgate") is create_backend
    assert GRAMMAR_BACKEND_CHOICES.count("thinkgate") == 1
    args = prepare_server_args(ARGS)
    assert (args.grammar_backend, args.reasoning_parser) == ("thinkgate", "deepseek-v4")


def test_without_the_plugin_sglang_refuses_the_name():
    """SGLANG_PLUGINS names the general plugins SGLang may run: leaving ours out, the name is unknown."""
    code = ("from sglang.srt.plugins import load_plugins; load_plugins(); "
            "from sglang.srt.server_args import prepare_server_args; "
            f"prepare_server_args({ARGS!r})")
    env = dict(os.environ, SGLANG_PLUGINS="some_other_plugin")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300, cwd="/")
    assert r.returncode != 0
    assert "invalid choice: 'thinkgate'" in r.stderr, r.stderr[-2000:]


def _serving(**kw):
    base = dict(reasoning_parser="deepseek-v4", constrained_json_disable_any_whitespace=False,
                constrained_json_max_whitespace_cnt=None, enable_strict_thinking=False)
    base.update(kw)
    return NS(**base)


@pytest.mark.parametrize("flags, any_ws, max_ws", [({}, True, 16), ({"constrained_json_max_whitespace_cnt": 4}, True, 4),
                                                   ({"constrained_json_disable_any_whitespace": True}, False, 16)])
def test_sglang_create_grammar_backend_builds_ours_without_its_reasoner_wrapper(flags, any_ws, max_ws, ds_tokenizer,
                                                                                monkeypatch):
    import sglang.srt.constrained.base_grammar_backend as base
    import sglang.srt.runtime_context as ctx

    from thinkgate.engines.sglang.backend import ThinkgateGrammarBackend, register

    register()
    serving = _serving(**flags)
    monkeypatch.setattr(base, "get_exec", lambda: NS(kernel=NS(grammar_backend="thinkgate")))
    monkeypatch.setattr(base, "get_serving", lambda: serving)
    monkeypatch.setattr(ctx, "get_serving", lambda: serving)
    think_end = ds_tokenizer.convert_tokens_to_ids("</think>")
    b = base.create_grammar_backend(None, ds_tokenizer, 129280, {1}, think_end_ids=[think_end])
    try:
        assert type(b) is ThinkgateGrammarBackend  # SGLang's ReasonerGrammarBackend is not around it
        assert b.parser.name == "deepseek_v4" and b.vocab_size == 129280 and b.vocabulary.stop_token_ids == {1}
        c = b.constraint(("json", '{"type": "object"}'))
        assert (c.option("any_whitespace"), c.option("max_whitespace")) == (any_ws, max_ws)
    finally:
        b.close()


def test_an_unknown_reasoning_parser_fails_at_server_start_naming_the_known_ones(ds_tokenizer):
    from thinkgate.engines.sglang.backend import ThinkgateGrammarBackend

    with pytest.raises(ValueError, match=r"reasoning parser 'no-such-parser' has no thinkgate family.*deepseek-v4"):
        ThinkgateGrammarBackend(ds_tokenizer, 129280, "no-such-parser")


def test_the_parser_name_map_goes_from_sglangs_names_to_thinkgates():
    from sglang.srt.parser.reasoning_parser_names import REASONING_PARSER_NAMES

    from thinkgate.reasoning.registry import list_reasoning_parsers
    from thinkgate.engines.sglang.backend import SGLANG_REASONING_PARSERS, thinkgate_family

    assert set(SGLANG_REASONING_PARSERS) <= set(REASONING_PARSER_NAMES)
    assert set(SGLANG_REASONING_PARSERS.values()) <= set(list_reasoning_parsers())
    assert thinkgate_family("olmo3") == "olmo3"  # a thinkgate name is taken as is
    from thinkgate.engines.sglang.backend import SGLANG_UNSERVED

    # every name SGLang registers is served or deliberately unserved, never both
    assert set(REASONING_PARSER_NAMES) == set(SGLANG_REASONING_PARSERS) | set(SGLANG_UNSERVED)
    assert not set(SGLANG_REASONING_PARSERS) & set(SGLANG_UNSERVED)
