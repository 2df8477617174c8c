"""thinkgate.names' copy of vLLM 0.34's registries is the installed vLLM's, and each served name is
registered with vLLM as ``thinkgate_NAME`` by the two plugins."""

from __future__ import annotations

import thinkgate.engines.vllm.reasoning_parsers  # noqa: F401  (registers the reasoning parsers)
import thinkgate.engines.vllm.tool_parsers  # noqa: F401  (registers the tool parsers)
from thinkgate.names import VLLM_REASONING_PARSERS, VLLM_TOOL_PARSERS, unserved_vllm_names


def test_name_lists_are_the_installed_vllms():
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    assert sorted(ReasoningParserManager.lazy_parsers) == sorted(VLLM_REASONING_PARSERS)
    assert sorted(ToolParserManager.lazy_parsers) == sorted(VLLM_TOOL_PARSERS)


def test_every_served_vllm_name_is_registered_as_thinkgate_name():
    from vllm.reasoning import ReasoningParserManager
    from vllm.tool_parsers import ToolParserManager

    missing = unserved_vllm_names()
    reasoning = set(ReasoningParserManager.list_registered())
    tools = set(ToolParserManager.list_registered())
    assert [n for n in VLLM_REASONING_PARSERS
            if n not in missing["reasoning"] and f"thinkgate_{n}" not in reasoning] == []
    assert [n for n in VLLM_TOOL_PARSERS if n not in missing["tool"] and f"thinkgate_{n}" not in tools] == []
