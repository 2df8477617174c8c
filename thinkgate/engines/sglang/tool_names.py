"""SGLang 0.5.23's ``--tool-call-parser`` names (``FunctionCallParser.ToolCallParserEnum``) -> thinkgate tool formats.

Each SGLang name is declared with the thinkgate (vLLM) format name of the same call syntax, read from
SGLang's detector (``sglang/srt/function_call/*_detector.py``: its markers, and the detector class a name
shares with another); :func:`thinkgate_tool_format` resolves it against the formats registered now, so a
family added later (issue 20's families) is served under its SGLang names too, with no change here.
Names with no counterpart at all are in :data:`SGLANG_TOOL_UNSERVED` with the reason. No SGLang import.
"""

from __future__ import annotations

from thinkgate.structured_output.tools import get_tool_format, list_tool_formats

__all__ = ["SGLANG_TOOL_PARSERS", "SGLANG_TOOL_UNSERVED", "thinkgate_tool_format", "sglang_tool_coverage"]

SGLANG_TOOL_PARSERS: dict[str, str] = {
    "hermes": "hermes", "qwen": "hermes", "qwen25": "hermes",          # Qwen25Detector: <tool_call> JSON
    "qwen3_coder": "qwen3_coder", "nanbeige": "qwen3_coder",           # Qwen3CoderDetector
    "step3p5": "qwen3_coder",                                          # SGLang reads it with Qwen3CoderDetector
    "deepseekv3": "deepseek_v3", "deepseekv31": "deepseek_v31", "deepseekv32": "deepseek_v32",
    "deepseekv4": "deepseek_v4", "deepseekv41": "deepseek_v41",
    "glm": "glm45", "glm45": "glm45", "glm47": "glm47",                # Glm4MoeDetector / Glm47MoeDetector
    "gpt-oss": "openai", "kimi_k2": "kimi_k2", "kimi_k3": "kimi_k3", "k2_horizon": "k2_horizon",
    "llama3": "llama3_json",                                           # Llama32Detector: <|python_tag|> / JSON
    "mistral": "mistral", "minimax-m2": "minimax_m2", "minimax-m3": "minimax_m3", "gemma4": "gemma4",
    "apertus2509": "apertus", "beam": "beam", "cohere_command4": "cohere_command4", "dots": "dots",
    "lfm2": "lfm2", "ling3": "ling3", "mimo": "mimo", "minicpm5": "minicpm5", "muse": "muse_glimmer",
    "poolside_v1": "poolside_v1", "pythonic": "pythonic", "step3": "step3",
    "interns1": "internlm",                                            # InternlmDetector: <|action_start|><|plugin|>
    "hunyuan": "hunyuan_a13b", "gigachat3": "gigachat3", "inkling": "inkling",
    "response_template": "hf",                                         # the checkpoint's response_template
    "trinity": "hermes",       # TrinityDetector: Qwen25Detector's <tool_call> JSON after dropping <think> tags
    "iquest_q1": "iquest_q1",  # IQuestQ1Detector: GLM-4.7's keyed arguments in <iquest_tool_call>
    "gigachat35": "gigachat35",                                        # GigaChat35Detector: GCML (DSML's syntax)
    "spark25": "spark25",                                              # Spark25Detector: <tool_call>N\n<arg_key>...
}
"""SGLang name -> the thinkgate format of the same syntax (served once that format is registered)."""

SGLANG_TOOL_UNSERVED: dict[str, str] = {
}
"""SGLang names thinkgate does not serve, with the reason."""


def thinkgate_tool_format(name: str) -> str:
    """The registered thinkgate format for SGLang's ``--tool-call-parser`` ``name`` (a thinkgate format name
    is taken as is); ``ValueError`` saying why for a name not served (yet)."""
    known = list_tool_formats(aliases=True)
    target = SGLANG_TOOL_PARSERS.get(name)
    if target is not None:
        if target in known:
            return get_tool_format(target).name
        raise ValueError(f"SGLang tool-call parser {name!r} is thinkgate's {target!r} format, which is not "
                         f"registered in this build")
    if name in SGLANG_TOOL_UNSERVED:
        raise ValueError(f"SGLang tool-call parser {name!r} is not served: {SGLANG_TOOL_UNSERVED[name]}")
    if name in known:
        return get_tool_format(name).name
    raise ValueError(f"unknown tool-call parser {name!r}; SGLang names: "
                     f"{sorted({*SGLANG_TOOL_PARSERS, *SGLANG_TOOL_UNSERVED})}")


def sglang_tool_coverage() -> tuple[dict[str, str], dict[str, str]]:
    """(SGLang name -> thinkgate format served now, SGLang name -> why not served now)."""
    served: dict[str, str] = {}
    missing: dict[str, str] = dict(SGLANG_TOOL_UNSERVED)
    for name in SGLANG_TOOL_PARSERS:
        try:
            served[name] = thinkgate_tool_format(name)
        except ValueError as e:
            missing[name] = str(e)
    return served, missing
