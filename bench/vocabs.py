"""Vocabularies for tests and benchmarks only (no model hub; ``bench/`` is not installed).

One section per kind of vocabulary, each with its own header.
"""

from __future__ import annotations

import re
import threading

from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary

__all__ = ["SYNTHETIC_FAMILIES", "synthetic_vocabulary", "format_vocabulary", "FORMAT_VOCABULARY"]


# --------------------------------------------------------------------------------------------------
# tool-format vocabularies: a vocabulary with each tool format's markers as control tokens
#
# Real offline vocabularies where one has the family's markers: Qwen3.6 (`hermes`, `qwen3_coder`),
# DeepSeek V4 (`deepseek_v3`, `deepseek_v31`, `deepseek_v32`, `deepseek_v4`), Magistral's tekken
# (`mistral`). No offline vocabulary has the markers of Kimi K2, GLM-4.7, MiniMax M2, Gemma 4, gpt-oss
# (harmony) or Llama 3: for those, `synthetic_vocabulary` is the Qwen3.6 table plus that family's
# special tokens appended as control tokens (its name says `synthetic`). Token ids of the appended
# markers are therefore not the real model's; the grammar and the readers only ever see them as tokens.

SYNTHETIC_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # family: (special tokens, stop tokens)
    "kimi": (("<|im_user|>", "<|im_assistant|>", "<|im_system|>", "<|im_middle|>", "<|tool_calls_section_begin|>",
              "<|tool_calls_section_end|>", "<|tool_call_begin|>", "<|tool_call_argument_begin|>",
              "<|tool_call_end|>"), ("<|im_end|>",)),
    "glm": (("[gMASK]", "<sop>", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>", "<arg_key>",
             "</arg_key>", "<arg_value>", "</arg_value>"), ("<|endoftext|>", "<|user|>", "<|observation|>")),
    "minimax": (("]~b]", "[e~[", "<minimax:tool_call>", "</minimax:tool_call>"), ("[e~[",)),
    "gemma": (("<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>',
               "<|tool_response>", "<tool_response|>"), ("<turn|>",)),
    "llama": (("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
               "<|python_tag|>"), ("<|eot_id|>", "<|eom_id|>")),
    "harmony": (("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"),
                ("<|return|>", "<|call|>")),
}

FORMAT_VOCABULARY: dict[str, str] = {
    "hermes": "qwen3_6", "qwen3_coder": "qwen3_6", "json": "qwen3_6",
    "deepseek_v3": "deepseek_v4", "deepseek_v31": "deepseek_v4", "deepseek_v32": "deepseek_v4",
    "deepseek_v4": "deepseek_v4", "mistral": "magistral",
    "kimi_k2": "kimi", "glm47": "glm", "glm45": "glm", "minimax_m2": "minimax", "gemma4": "gemma", "llama3_json": "llama",
    "openai": "harmony",
}
"""Format -> the vocabulary its tests and benchmarks use (a real name or a synthetic family)."""

_SYNTHETIC_CACHE: dict[str, Vocabulary] = {}
_SYNTHETIC_LOCK = threading.Lock()


def synthetic_vocabulary(family: str) -> Vocabulary:
    """The Qwen3.6 table plus ``family``'s special tokens (cached). ``ValueError`` for an unknown family."""
    if family not in SYNTHETIC_FAMILIES:
        raise ValueError(f"unknown synthetic family {family!r}; known: {', '.join(SYNTHETIC_FAMILIES)}")
    with _SYNTHETIC_LOCK:
        v = _SYNTHETIC_CACHE.get(family)
        if v is None:
            v = _build_synthetic(family, *SYNTHETIC_FAMILIES[family])
            _SYNTHETIC_CACHE[family] = v
        return v


def format_vocabulary(format_name: str) -> Vocabulary:
    """The vocabulary for ``format_name`` (see :data:`FORMAT_VOCABULARY`)."""
    name = FORMAT_VOCABULARY.get(format_name)
    if name is None:
        raise ValueError(f"no vocabulary known for tool format {format_name!r}; known: {', '.join(FORMAT_VOCABULARY)}")
    return synthetic_vocabulary(name) if name in SYNTHETIC_FAMILIES else load_vocabulary(name)  # type: ignore[arg-type]


def _build_synthetic(family: str, specials: tuple[str, ...], stops: tuple[str, ...]) -> Vocabulary:
    base = load_vocabulary("qwen3_6")
    token_bytes = list(base.token_bytes)
    special_map = dict(base.special_tokens)
    for s in specials:
        if s not in special_map:
            special_map[s] = len(token_bytes)
            token_bytes.append(s.encode("utf-8"))
    pattern = re.compile("|".join(re.escape(s) for s in sorted(special_map, key=len, reverse=True)))

    def encode(text: str) -> list[int]:
        out: list[int] = []
        pos = 0
        for m in pattern.finditer(text):
            if m.start() > pos:
                out.extend(base.encode(text[pos:m.start()]))
            out.append(special_map[m.group()])
            pos = m.end()
        if pos < len(text):
            out.extend(base.encode(text[pos:]))
        return out

    width = max(base.logits_width, len(token_bytes))
    return Vocabulary(f"qwen3_6+{family} (synthetic)", token_bytes, special_map, [special_map[s] for s in stops],
                      logits_width=width, encode=encode)
