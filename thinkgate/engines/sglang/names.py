"""SGLang 0.5.23's ``--reasoning-parser`` names and the thinkgate family each one is served by.

Kept apart from ``sglang_backend`` (which imports SGLang) so the map can be read and tested without
SGLang installed.
"""

from __future__ import annotations

from thinkgate.reasoning.registry import list_reasoning_parsers

__all__ = ["SGLANG_REASONING_PARSERS", "SGLANG_UNSERVED", "thinkgate_family"]

SGLANG_REASONING_PARSERS: dict[str, str] = {
    "deepseek-r1": "deepseek_r1",
    "deepseek-v3": "deepseek_v3",
    "deepseek-v4": "deepseek_v4",
    "deepseek-v41": "deepseek_v41",
    "qwen3": "qwen3",
    "qwen3-thinking": "qwen3",
    "dots": "qwen3",
    "nanbeige": "qwen3",
    "interns1": "qwen3",
    "mimo": "mimo",
    "glm45": "glm45",
    "ling3": "ling3",
    "hunyuan": "hy_v4",
    "k2_horizon": "k2_horizon",
    "kimi_k2": "kimi_k2",
    "kimi_k3": "kimi_k3",
    "minimax": "minimax_m2",
    "minimax-append-think": "minimax_m2_append_think",
    "minimax-m3": "minimax_m3",
    "poolside_v1": "poolside_v1",
    "step3": "step3",
    "step3p5": "step3p5",
    "gigachat35": "deepseek_r1",
    "nemotron_3": "nemotron_v3",
    "mistral": "mistral",
    "gemma4": "gemma4",
    "gpt-oss": "gpt_oss",
    "granite_thinking_parser": "granite_thinking_parser",
    "inkling": "inkling",
    "cohere_command4": "cohere_command4",
    "beam": "beam",
    "response_template": "hf",
    "muse": "muse_glimmer",
    "kimi": "kimi_vl",
    "apertus2509": "apertus",
    "iquest_q1": "iquest_q1",
}
"""SGLang 0.5.23's ``--reasoning-parser`` names (``ReasoningParser.DetectorMap``) -> thinkgate families.
``muse`` is read with the Glimmer profile's recipients, as SGLang's ``muse`` tool-call name is thinkgate's
``muse_glimmer`` format (``tool_names.py``). ``hunyuan`` is SGLang's detector for the suffixed ``<think…>`` Hunyuan tokens (thinkgate's ``hy_v4``:
thinking unless ``reasoning_effort: no_think``); ``gigachat35`` is served by SGLang with DeepSeek-R1's
detector; ``kimi`` is Kimi-VL's ``◁think▷`` text markers (thinkgate's ``kimi_vl``), ``apertus2509``
Apertus' ``<|inner_prefix|>`` tokens (``apertus``); ``beam`` and ``response_template`` read their markers from the checkpoint's response template, as
thinkgate's ``hf`` family does (the SGLang backend's vocabulary carries the tokenizer's template). SGLang
names with no thinkgate family are in :data:`SGLANG_UNSERVED`; a thinkgate family name
is taken as is."""

SGLANG_UNSERVED: dict[str, str] = {}
"""SGLang 0.5.23 names that thinkgate deliberately does not serve yet, each with its reason."""

def thinkgate_family(name: str) -> str:
    """The thinkgate reasoning family for SGLang's ``--reasoning-parser`` ``name`` (a thinkgate family
    name is returned as is); ``ValueError`` listing both sets of names for an unknown one."""
    if name in SGLANG_REASONING_PARSERS:
        return SGLANG_REASONING_PARSERS[name]
    if name in list_reasoning_parsers():
        return name
    raise ValueError(f"reasoning parser {name!r} has no thinkgate family: SGLang names "
                     f"{sorted(SGLANG_REASONING_PARSERS)}, thinkgate names {list_reasoning_parsers()}")
