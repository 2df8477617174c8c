"""Vocabularies for tests, benchmarks and synthetic token streams, built offline (no model hub).

One section per kind of vocabulary, each with its own header: a vocabulary per tool format (real where an
offline package has the family's markers, else *synthetic*: the Qwen3.6 table plus the family's markers as
control tokens), and a tiny byte-level vocabulary for fast unit tests.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence

from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary

__all__ = ["SYNTHETIC_FAMILIES", "RESPONSE_TEMPLATES", "GEMMA4_RESPONSE_TEMPLATE", "is_synthetic",
           "synthetic_vocabulary", "format_vocabulary", "FORMAT_VOCABULARY",
           "byte_level_vocabulary"]

# --------------------------------------------------------------------------------------------------
# tool-format vocabularies: a vocabulary with each tool format's markers as control tokens
#
# Real offline vocabularies where one has the family's markers: Qwen3.6 (`hermes`, `qwen3_coder`,
# `qwen3_5`, `qwen3_6`),
# DeepSeek V4 (`deepseek_v3`, `deepseek_v31`, `deepseek_v32`, `deepseek_v4`), Magistral's tekken
# (`mistral`). No offline vocabulary has the markers of Kimi K2, Kimi K3, GLM-4.7, MiniMax M2, Gemma 4, gpt-oss
# (harmony), Llama 3, Jamba, Granite 3, InternLM2 or Muse: for those, `synthetic_vocabulary` is the Qwen3.6 table plus that family's
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
    # MiniMax M3: its namespace token ]<]minimax[>[ is one added token (vLLM's parser: "the M3 markers are
    # non-special added tokens"; xgrammar's minimax_m3 tag and MiniMax's own M3 parser call it the namespace
    # token), <mm:think> / </mm:think> whole vocabulary entries (vLLM's M3 reasoning parser); turns ]~b] ... [e~[
    "minimax_m3": (("]~!b[", "]~b]", "[e~[", "<mm:think>", "</mm:think>", "]<]minimax[>["), ("[e~[",)),
    "gemma": (("<|turn>", "<turn|>", "<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>',
               "<|tool_response>", "<tool_response|>"), ("<turn|>",)),
    "llama": (("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
               "<|python_tag|>"), ("<|eot_id|>", "<|eom_id|>")),
    "harmony": (("<|start|>", "<|end|>", "<|message|>", "<|channel|>", "<|constrain|>", "<|return|>", "<|call|>"),
                ("<|return|>", "<|call|>")),
    # -- json_lists
    "jamba": (("<|startoftext|>", "<|bom|>", "<|eom|>", "<tool_calls>", "</tool_calls>"), ("<|eom|>",)),
    "granite": (("<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>", "<|tool_call|>"), ("<|end_of_text|>",)),
    "internlm": (("<|action_start|>", "<|action_end|>", "<|plugin|>", "<|interpreter|>"), ("<|im_end|>",)),
    # -- xml_a: Seed-OSS, ZAYA1, LongCat-Flash, Hunyuan-A13B, Hy3 / Hy4 (unsuffixed tokens), Step3
    "seed": (("<seed:bos>", "<seed:eos>", "<seed:think>", "</seed:think>", "<seed:tool_call>", "</seed:tool_call>"),
             ("<seed:eos>",)),
    "zaya": (("<zyphra_tool_call>", "</zyphra_tool_call>"), ("<|im_end|>",)),
    "longcat": (("<longcat_tool_call>", "</longcat_tool_call>"), ("<|im_end|>",)),
    "hunyuan": (("<|startoftext|>", "<|extra_0|>", "<|extra_4|>", "<|eos|>", "<tool_calls>", "</tool_calls>"),
                ("<|eos|>",)),
    "hy": (("<tool_calls>", "</tool_calls>", "<tool_sep>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
           ("<|im_end|>",)),
    "step3": (("<|BOT|>", "<|EOT|>", "<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>",
               "<｜tool_call_end｜>", "<｜tool_sep｜>"), ("<|EOT|>",)),
    # -- xml_b
    "dots": (("<dots_function_call>", "</dots_function_call>", "<|endofresponse|>"), ("<|endofresponse|>",)),
    # PLaMo 3's tool markers are three tokens each ("<|plamo:begin_" + name + ":plamo|>"); <|plamo:tag|> ends a turn
    "plamo": (("<|plamo:begin_", "<|plamo:end_", ":plamo|>", "<|plamo:constrain|>", "<|plamo:msg|>", "<|plamo:tag|>"),
              ("<|plamo:tag|>",)),
    "ifm": (("<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>", "<ifm|arg_key>",
             "</ifm|arg_key>", "<ifm|arg_type>", "</ifm|arg_type>", "<ifm|arg_value>", "</ifm|arg_value>"),
            ("<|im_end|>",)),
    "cohere": (("<|START_OF_TURN_TOKEN|>", "<|END_OF_TURN_TOKEN|>", "<|USER_TOKEN|>", "<|CHATBOT_TOKEN|>",
                "<|SYSTEM_TOKEN|>", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_ACTION|>", "<|END_ACTION|>",
                "<|START_RESPONSE|>", "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"),
               ("<|END_OF_TURN_TOKEN|>",)),
    # -- pythonic group (Llama 4, LFM2, FunctionGemma, GigaChat3, Apertus)
    "llama4": (("<|begin_of_text|>", "<|header_start|>", "<|header_end|>", "<|eot|>", "<|eom|>", "<|python_start|>",
                "<|python_end|>"), ("<|eot|>", "<|eom|>")),
    "lfm2": (("<|startoftext|>", "<|tool_list_start|>", "<|tool_list_end|>", "<|tool_call_start|>", "<|tool_call_end|>",
              "<|tool_response_start|>", "<|tool_response_end|>"), ("<|im_end|>",)),
    "functiongemma": (("<start_of_turn>", "<end_of_turn>", "<start_function_declaration>", "<end_function_declaration>",
                       "<start_function_call>", "<end_function_call>", "<start_function_response>",
                       "<end_function_response>", "<escape>"), ("<end_of_turn>", "<start_function_response>")),
    "gigachat": (("<|message_sep|>", "<|role_sep|>", "<|function_call|>", "</s>"), ("</s>",)),
    "apertus": (("<|system_start|>", "<|system_end|>", "<|developer_start|>", "<|developer_end|>", "<|user_start|>",
                 "<|user_end|>", "<|assistant_start|>", "<|assistant_end|>", "<|inner_prefix|>", "<|inner_suffix|>",
                 "<|tools_prefix|>", "<|tools_suffix|>"), ("<|assistant_end|>",)),
    # Inkling: every marker of vLLM 0.34's renderer (vllm/renderers/inkling_encoding.py); the turn ends with
    # <|content_model_end_sampling|> (the renderer closes an assistant turn with it)
    "inkling": (("<|message_user|>", "<|message_model|>", "<|message_system|>", "<|message_tool|>", "<|content_text|>",
                 "<|content_image|>", "<|content_model_end_sampling|>", "<|content_thinking|>",
                 "<|content_audio_input|>", "<|content_tool_error|>", "<|content_xml|>",
                 "<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>", "<|end_message|>", "<|audio_end|>"),
                ("<|content_model_end_sampling|>",)),
    # IQuest-Q1 (SGLang's iquest_q1): its turn and call tokens; <think> / </think> are the Qwen3.6 table's
    "iquest": (("<|iquest_assistant|>", "<|iquest_end|>", "<iquest_tool_call>", "</iquest_tool_call>", "<arg_key>",
                "</arg_key>", "<arg_value>", "</arg_value>"), ("<|iquest_end|>",)),
    # Kimi K3's XTML: every marker is <|open|> / <|close|>, a word, <|sep|>; a message ends with <|end_of_msg|>
    "kimi_k3": (("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"), ("<|end_of_msg|>",)),
    # -- Muse (Spark, Glimmer): the GGUF metadata's control tokens (<|eom|> ends a message and the turn goes
    # on, so only <|eot|> and <|end_of_text|> stop); the <atem:...> tags are plain text
    "muse": (("<|begin_of_text|>", "<|end_of_text|>", "<|start|>", "<|message|>", "<|eom|>", "<|eot|>"),
             ("<|eot|>", "<|end_of_text|>")),
    # -- SGLang-only names. GigaChat 3.5: ｜GCML｜ is one token inside every GCML tag (llama.cpp's preserved tokens);
    # its template ends an assistant message with </s>, or <|message_sep|> when a message follows (a function
    # result after calls), so both stop here. Spark-X2.5: GLM-4.5's <arg_key> / <arg_value> tags as tokens
    # (its tokenizer is not public offline; the Qwen3.6 table has <tool_call> already)
    "gigachat35": (("<|message_sep|>", "<|role_sep|>", "｜GCML｜", "</s>"), ("</s>", "<|message_sep|>")),
    "spark": (("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"), ("<|im_end|>",)),
}

# Template vocabularies: a synthetic family's table carrying a checkpoint's response_template (the
# template-reading formats hf / beam take their syntax from it). Gemma 4's is the public metadata of its
# instruction checkpoints (tokenizer_config.json), as vLLM's tests/parser/test_response_template.py holds it.
GEMMA4_RESPONSE_TEMPLATE: dict = {
    "defaults": {"role": "assistant"},
    "fields": {
        "content": {"close": ["<turn|>", "<|tool_response>", "<eos>"], "content": "text"},
        "thinking": {"close": "<channel|>", "content": "text", "open": "<|channel>thought\n"},
        "tool_calls": {
            "close": "<tool_call|>", "content": "json",
            "content_args": {"string_delims": [['<|"|>', '<|"|>']], "unquoted_keys": True},
            "open_pattern": r"<\|tool_call>call:(?P<name>\w+)", "repeats": True,
            "transform": {"function": {"arguments": "{content}", "name": "{name}"}, "type": "function"},
        },
    },
    "start_anchor": ["<|turn>model\n", "<tool_response|>"],
}

RESPONSE_TEMPLATES: dict[str, tuple[str, dict]] = {
    # name: (synthetic family, response template)
    "gemma_template": ("gemma", GEMMA4_RESPONSE_TEMPLATE),
}

FORMAT_VOCABULARY: dict[str, str] = {
    "hermes": "qwen3_6", "qwen3_coder": "qwen3_6", "qwen3_5": "qwen3_6", "qwen3_6": "qwen3_6", "json": "qwen3_6",
    "deepseek_v3": "deepseek_v4", "deepseek_v31": "deepseek_v4", "deepseek_v32": "deepseek_v4",
    "deepseek_v4": "deepseek_v4", "mistral": "magistral",
    "kimi_k2": "kimi", "glm47": "glm", "glm45": "glm", "minimax_m2": "minimax", "minimax_m3": "minimax_m3", "gemma4": "gemma", "llama3_json": "llama",
    "openai": "harmony",
    "phi4_mini_json": "qwen3_6", "xlam": "qwen3_6", "granite_20b_fc": "qwen3_6", "jamba": "jamba", "granite": "granite",
    "internlm": "internlm",
    "seed_oss": "seed", "zaya": "zaya", "mimo": "qwen3_6", "longcat": "longcat", "hunyuan_a13b": "hunyuan",
    "hy_v3": "hy", "hy_v4": "hy", "step3": "step3", "minicpm5": "qwen3_6",
    # -- xml_b (ripple's markers are plain text: DeepSeek V4's table has no <tool_call> token)
    "deepseek_v41": "deepseek_v4", "dots": "dots", "ripple": "deepseek_v4", "plamo3": "plamo",
    "k2_horizon": "ifm", "cohere_command3": "cohere",
    "pythonic": "llama", "llama4_pythonic": "llama4", "olmo3": "qwen3_6", "lfm2": "lfm2", "functiongemma": "functiongemma",
    "gigachat3": "gigachat", "apertus": "apertus", "inkling": "inkling", "kimi_k3": "kimi_k3",
    "muse": "muse", "muse_glimmer": "muse",
    "hf": "gemma_template",
    "iquest_q1": "iquest",
    "gigachat35": "gigachat35", "spark25": "spark",
}
"""Format -> the vocabulary its tests and benchmarks use (a real name or a synthetic family)."""

_SYNTHETIC_CACHE: dict[str, Vocabulary] = {}
_SYNTHETIC_LOCK = threading.Lock()


def is_synthetic(name: str) -> bool:
    """Whether ``name`` is a synthetic vocabulary (a family of :data:`SYNTHETIC_FAMILIES`, or one of those
    carrying a template, :data:`RESPONSE_TEMPLATES`), not a real one."""
    return name in SYNTHETIC_FAMILIES or name in RESPONSE_TEMPLATES


def synthetic_vocabulary(family: str) -> Vocabulary:
    """The Qwen3.6 table plus ``family``'s special tokens (cached); for a name of
    :data:`RESPONSE_TEMPLATES`, its family's table with that response template. ``ValueError`` for an
    unknown family."""
    if not is_synthetic(family):
        raise ValueError(f"unknown synthetic family {family!r}; known: "
                         f"{', '.join([*SYNTHETIC_FAMILIES, *RESPONSE_TEMPLATES])}")
    if family in RESPONSE_TEMPLATES:
        base, template = RESPONSE_TEMPLATES[family]
        built = synthetic_vocabulary(base)
    with _SYNTHETIC_LOCK:
        v = _SYNTHETIC_CACHE.get(family)
        if v is None:
            if family in RESPONSE_TEMPLATES:
                v = built.with_response_template(template)
            else:
                v = _build_synthetic(family, *SYNTHETIC_FAMILIES[family])
            _SYNTHETIC_CACHE[family] = v
        return v


def format_vocabulary(format_name: str) -> Vocabulary:
    """The vocabulary for ``format_name`` (see :data:`FORMAT_VOCABULARY`)."""
    name = FORMAT_VOCABULARY.get(format_name)
    if name is None:
        raise ValueError(f"no vocabulary known for tool format {format_name!r}; known: {', '.join(FORMAT_VOCABULARY)}")
    return synthetic_vocabulary(name) if is_synthetic(name) else load_vocabulary(name)  # type: ignore[arg-type]


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


# ==================================================================================================
# Byte-level vocabularies (reasoning markers, small JSON pieces): ``byte_level_vocabulary``
# ==================================================================================================


def byte_level_vocabulary(
    specials: Sequence[str] = ("<|end|>",),
    *,
    stop_tokens: Sequence[str] | None = None,
    extra_tokens: Sequence[str] = (),
    logits_width: int | None = None,
    name: str = "bytes",
) -> Vocabulary:
    """A tiny vocabulary for unit tests: ids 0..255 are the single bytes, then ``extra_tokens``
    (multi-byte ordinary tokens), then ``specials``. Encoding is greedy longest match.

    ``stop_tokens`` defaults to the first special.
    """
    token_bytes: list[bytes] = [bytes([i]) for i in range(256)]
    for t in extra_tokens:
        token_bytes.append(t.encode("utf-8"))
    special_map: dict[str, int] = {}
    for s in specials:
        special_map[s] = len(token_bytes)
        token_bytes.append(s.encode("utf-8"))
    stops = [special_map[s] for s in (stop_tokens if stop_tokens is not None else specials[:1])]
    ordinary = {t.encode("utf-8"): 256 + k for k, t in enumerate(extra_tokens)}
    max_len = max([len(b) for b in ordinary] + [1])
    specials_sorted = sorted(special_map, key=len, reverse=True)

    def encode(text: str) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(text):
            for s in specials_sorted:
                if text.startswith(s, i):
                    out.append(special_map[s])
                    i += len(s)
                    break
            else:
                # greedy longest ordinary token over the UTF-8 bytes of the next chunk
                j = i + 1
                while j < len(text) and not any(text.startswith(s, j) for s in specials_sorted):
                    j += 1
                out.extend(_greedy_bytes(text[i:j].encode("utf-8"), ordinary, max_len))
                i = j
        return out

    return Vocabulary(name, token_bytes, special_map, stops, logits_width=logits_width, encode=encode)


def _greedy_bytes(data: bytes, ordinary: Mapping[bytes, int], max_len: int) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(data):
        for L in range(min(max_len, len(data) - i), 1, -1):
            tid = ordinary.get(data[i:i + L])
            if tid is not None:
                out.append(tid)
                i += L
                break
        else:
            out.append(data[i])
            i += 1
    return out
