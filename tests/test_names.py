"""Every name vLLM 0.34 registers is served, and docs/names.md is the table of what is."""

from __future__ import annotations

from pathlib import Path

from thinkgate.names import VLLM_REASONING_PARSERS, VLLM_TOOL_PARSERS, names_markdown, unserved_vllm_names
from thinkgate.reasoning.registry import get_reasoning_parser
from thinkgate.structured_output.tools.formats import get_tool_format

DOC = Path(__file__).resolve().parents[1] / "docs" / "names.md"


def test_vllm_name_lists_are_vllm_034s_sizes() -> None:
    # vLLM 0.34.0 registers 44 reasoning and 62 tool-parser names (tests/integration checks them against the wheel)
    assert len(set(VLLM_REASONING_PARSERS)) == len(VLLM_REASONING_PARSERS) == 44
    assert len(set(VLLM_TOOL_PARSERS)) == len(VLLM_TOOL_PARSERS) == 62


# Every vLLM 0.34 name is served; the list is kept (exact) so that a name vLLM adds and thinkgate does not
# serve shows up here.
NOT_YET: dict[str, list[str]] = {"reasoning": [], "tool": []}


def test_every_vllm_name_is_served_but_the_listed_ones() -> None:
    assert unserved_vllm_names() == NOT_YET


def test_every_vllm_name_resolves_to_a_parser_or_format() -> None:
    served = unserved_vllm_names()
    for n in VLLM_REASONING_PARSERS:
        if n not in served["reasoning"]:
            assert get_reasoning_parser(n).name
    for n in VLLM_TOOL_PARSERS:
        if n not in served["tool"]:
            assert n in (get_tool_format(n).name, *get_tool_format(n).aliases)


def test_docs_names_page_is_the_generated_table() -> None:
    assert DOC.read_text(encoding="utf-8") == names_markdown(), (
        "docs/names.md is stale: run `python -m thinkgate.names > docs/names.md`")
