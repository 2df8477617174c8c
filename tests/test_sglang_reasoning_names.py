"""Every reasoning-parser name SGLang 0.5.23 registers maps onto a thinkgate family, or is listed as
deliberately unserved with a reason.

``SGLANG_0_5_23_NAMES`` is ``sglang.srt.parser.reasoning_parser_names.REASONING_PARSER_NAMES`` as the
0.5.23 wheel ships it (read from the wheel; the SGLang integration test,
engine_sglang/test_sglang_plugin_loading.py, checks the same against the installed package)."""

from __future__ import annotations

import pytest

from thinkgate.reasoning import get_reasoning_parser, list_reasoning_parsers
from thinkgate.engines.sglang.names import SGLANG_REASONING_PARSERS, SGLANG_UNSERVED, thinkgate_family

SGLANG_0_5_23_NAMES = frozenset({
    "apertus2509", "beam", "cohere_command4", "deepseek-r1", "deepseek-v3", "deepseek-v4", "deepseek-v41", "dots",
    "gemma4", "gigachat35", "glm45", "gpt-oss", "granite_thinking_parser", "hunyuan", "inkling", "interns1",
    "iquest_q1", "k2_horizon", "kimi", "kimi_k2", "kimi_k3", "ling3", "mimo", "minimax", "minimax-append-think",
    "minimax-m3", "mistral", "muse", "nanbeige", "nemotron_3", "poolside_v1", "qwen3", "qwen3-thinking",
    "response_template", "step3", "step3p5",
})


def test_every_sglang_name_is_served_or_listed_unserved():
    assert set(SGLANG_REASONING_PARSERS) | set(SGLANG_UNSERVED) == SGLANG_0_5_23_NAMES
    assert not set(SGLANG_REASONING_PARSERS) & set(SGLANG_UNSERVED)
    assert all(reason.strip() for reason in SGLANG_UNSERVED.values())


@pytest.mark.parametrize("name", sorted(SGLANG_REASONING_PARSERS))
def test_served_names_resolve_to_a_registered_family(name):
    family = thinkgate_family(name)
    assert family in list_reasoning_parsers()
    assert get_reasoning_parser(family).name  # importable, registered


@pytest.mark.parametrize("name", sorted(SGLANG_UNSERVED) or ["kimi_vl_typo"])
def test_unserved_names_are_refused_clearly(name):
    """Every SGLang 0.5.23 name is served now (kimi, apertus2509, iquest_q1 were the last): an unknown name
    stands in for the unserved ones while the list is empty."""
    with pytest.raises(ValueError, match="has no thinkgate family"):
        thinkgate_family(name)


def test_every_sglang_name_is_served():
    assert SGLANG_UNSERVED == {}
