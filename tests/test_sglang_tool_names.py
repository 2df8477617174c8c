"""SGLang 0.5.23's tool-call parser names map onto thinkgate's formats, or are listed as unserved with a reason."""

from __future__ import annotations

import pytest

from thinkgate.engines.sglang.tool_names import (SGLANG_TOOL_PARSERS, SGLANG_TOOL_UNSERVED,
                                                           sglang_tool_coverage, thinkgate_tool_format)
from thinkgate.structured_output.tools import get_tool_format

# FunctionCallParser.ToolCallParserEnum of the sglang 0.5.23 wheel (sglang/srt/function_call/function_call_parser.py)
SGLANG_0_5_23 = {
    "apertus2509", "beam", "cohere_command4", "deepseekv3", "deepseekv31", "deepseekv32", "deepseekv4",
    "deepseekv41", "dots", "glm", "glm45", "glm47", "gpt-oss", "k2_horizon", "kimi_k2", "kimi_k3", "lfm2", "ling3",
    "llama3", "mimo", "minicpm5", "mistral", "muse", "poolside_v1", "pythonic", "qwen", "qwen25", "qwen3_coder",
    "spark25", "step3", "step3p5", "minimax-m2", "minimax-m3", "nanbeige", "trinity", "interns1", "hermes",
    "hunyuan", "gigachat3", "gigachat35", "gemma4", "inkling", "iquest_q1", "response_template",
}


def test_every_sglang_name_is_mapped_or_listed_with_a_reason() -> None:
    assert set(SGLANG_TOOL_PARSERS) | set(SGLANG_TOOL_UNSERVED) == SGLANG_0_5_23
    assert not set(SGLANG_TOOL_PARSERS) & set(SGLANG_TOOL_UNSERVED)
    assert all(reason for reason in SGLANG_TOOL_UNSERVED.values())


@pytest.mark.parametrize(("sglang", "fmt"), [
    ("hermes", "hermes"), ("qwen25", "hermes"), ("qwen3_coder", "qwen3_coder"), ("deepseekv3", "deepseek_v3"),
    ("deepseekv31", "deepseek_v31"), ("deepseekv32", "deepseek_v32"), ("deepseekv4", "deepseek_v4"),
    ("glm", "glm45"), ("glm47", "glm47"), ("gpt-oss", "openai"), ("kimi_k2", "kimi_k2"), ("llama3", "llama3_json"),
    ("mistral", "mistral"), ("minimax-m2", "minimax_m2"), ("gemma4", "gemma4"), ("trinity", "hermes"),
    ("iquest_q1", "iquest_q1"),
])
def test_the_served_sglang_names_resolve_to_their_format(sglang: str, fmt: str) -> None:
    assert thinkgate_tool_format(sglang) == get_tool_format(fmt).name


def test_a_name_not_served_is_a_clear_error() -> None:
    served, missing = sglang_tool_coverage()
    assert set(served) | set(missing) == SGLANG_0_5_23
    for name in missing:
        with pytest.raises(ValueError, match=name):
            thinkgate_tool_format(name)
    with pytest.raises(ValueError, match="unknown tool-call parser"):
        thinkgate_tool_format("nonesuch")
    print(f"\nSGLang tool-call parsers: {len(served)} served, {len(missing)} not yet: {sorted(missing)}")
