"""The table of tool-call formats: one declarative definition per model family, and the registry.

This is the file to edit for a new model family: a :class:`~.engine.CallFormat` of literals of the
model's own call syntax (see ``engine.py``) usually suffices; a format it cannot express is a
:class:`~.engine.ToolFormat` class of its own (``harmony.py``, ``json_calls.py``).
"""

from __future__ import annotations

import threading

from .alternatives import AlternativeFormats
from .args import GemmaArgs, JsonArgs, XmlArgs
from .call_ids import WrittenCallId, mistral_call_id
from .dsml import DsmlArgs
from .engine import CallFormat, ToolFormat
from .harmony import HarmonyFormat
from .json_calls import JsonCallsFormat
from .pythonic import PythonicFormat
from .xml_values import ValueStyle

__all__ = ["register_tool_format", "get_tool_format", "list_tool_formats"]

# --------------------------------------------------------------------------------------------------
# the registry

_FORMATS: dict[str, ToolFormat] = {}
_PRIMARY: dict[str, ToolFormat] = {}
_LOCK = threading.Lock()


def register_tool_format(fmt: ToolFormat) -> ToolFormat:
    """Register ``fmt`` under its name and aliases (a name already taken is a ``ValueError``)."""
    with _LOCK:
        for n in (fmt.name, *fmt.aliases):
            if n in _FORMATS and _FORMATS[n] is not fmt:
                raise ValueError(f"tool format name {n!r} is already registered")
        for n in (fmt.name, *fmt.aliases):
            _FORMATS[n] = fmt
        _PRIMARY[fmt.name] = fmt
    return fmt


def get_tool_format(name: str) -> ToolFormat:
    """The format registered as ``name``; ``ValueError`` listing the known names otherwise."""
    fmt = _FORMATS.get(name) if isinstance(name, str) else None
    if fmt is None:
        raise ValueError(f"unknown tool format {name!r}; known: {', '.join(list_tool_formats(aliases=True))}")
    return fmt


def list_tool_formats(*, aliases: bool = False) -> list[str]:
    """The registered format names (primary names only unless ``aliases``)."""
    return sorted(_FORMATS if aliases else _PRIMARY)



# -- the built-in formats ---------------------------------------------------------------------------

_THINK = ("<think>", "</think>")

register_tool_format(CallFormat(
    name="hermes", aliases=("qwen3", "qwen2_5", "qwen3_json"),
    description="Hermes / Qwen3: JSON in <tool_call> tokens",
    markers=("<tool_call>", "</tool_call>", *_THINK),
    call_begin='<tool_call>\n{"name": "{name}", "arguments": ', args=JsonArgs(), call_end="}\n</tool_call>",
    call_sep="\n"))

# One call syntax, three ways to write a value that is not a string (xml_values.py), as the three
# generations' chat templates do: Qwen3-Coder `args_value | string` (True, None, ['a', 1]); Qwen3.5
# `tojson` for mappings / sequences, `| string` for the rest (True, None, ["a", 1]); Qwen3.6 `tojson`
# for every value that is not a string (true, null, ["a", 1]).
def _qwen_xml(name: str, aliases: tuple[str, ...], models: str, values: ValueStyle) -> CallFormat:
    return CallFormat(
        name=name, aliases=aliases,
        description=f"{models}: <function=NAME><parameter=KEY>value</parameter>, non-string values {values}",
        markers=("<tool_call>", "</tool_call>", *_THINK),
        call_begin="<tool_call>\n<function={name}>\n",
        args=XmlArgs("<parameter={key}>\n", "\n</parameter>\n", "</parameter>", values=values),
        call_end="</function>\n</tool_call>", call_sep="\n")


register_tool_format(_qwen_xml("qwen3_coder", (), "Qwen3-Coder (30B-A3B, 480B-A35B Instruct)", "python"))
register_tool_format(_qwen_xml("qwen3_5", ("qwen3.5",), "Qwen3.5", "py_scalars"))
register_tool_format(_qwen_xml("qwen3_6", ("qwen3.6", "qwen3_xml"), "Qwen3.6", "json"))

register_tool_format(CallFormat(
    name="llama3_json", aliases=("llama3", "llama", "llama4_json"),
    description='Llama 3.x JSON calls: {"name": ..., "parameters": {...}} separated by "; "',
    markers=("<|python_tag|>", "<|eom_id|>", "<|eot_id|>", "<|start_header_id|>", "<|end_header_id|>"),
    call_begin='{"name": "{name}", "parameters": ', args=JsonArgs(), call_end="}", call_sep="; ",
    text_trigger='{"name": "'))

register_tool_format(CallFormat(
    name="mistral", aliases=("magistral",),
    description="Mistral v11+ / Magistral: [TOOL_CALLS]NAME[ARGS]{...}",
    markers=("[TOOL_CALLS]", "[ARGS]", "[CALL_ID]", "[THINK]", "[/THINK]", "[INST]", "[/INST]"),
    call_begin="[TOOL_CALLS]{name}[ARGS]", args=JsonArgs(), call_end="", call_ids=mistral_call_id))

_DS_MARKERS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>", "<｜tool▁call▁begin｜>", "<｜tool▁call▁end｜>",
               "<｜tool▁sep｜>", *_THINK)

register_tool_format(CallFormat(
    name="deepseek_v3", aliases=("deepseek_r1",),
    description="DeepSeek V3 / R1: <｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME ```json ...```",
    markers=_DS_MARKERS, section=("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    call_begin="<｜tool▁call▁begin｜>function<｜tool▁sep｜>{name}\n```json\n", args=JsonArgs(),
    call_end="\n```<｜tool▁call▁end｜>", call_sep="\n"))

register_tool_format(CallFormat(
    name="deepseek_v31", aliases=("deepseek_v3_1",),
    description="DeepSeek V3.1: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>",
    markers=_DS_MARKERS, section=("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"),
    call_begin="<｜tool▁call▁begin｜>{name}<｜tool▁sep｜>", args=JsonArgs(), call_end="<｜tool▁call▁end｜>"))

_DSML_ARGS = DsmlArgs()  # parameters as DeepSeek's encoder writes them (dsml.py)

register_tool_format(CallFormat(
    name="deepseek_v32", aliases=("deepseek_v3_2",),
    description="DeepSeek V3.2 DSML: <｜DSML｜function_calls> <｜DSML｜invoke name=...> <｜DSML｜parameter ...>",
    markers=("｜DSML｜", *_THINK), section=("<｜DSML｜function_calls>\n", "</｜DSML｜function_calls>"),
    call_begin='<｜DSML｜invoke name="{name}">\n', args=_DSML_ARGS, call_end="</｜DSML｜invoke>\n"))

register_tool_format(CallFormat(
    name="deepseek_v4",
    description="DeepSeek V4 DSML: <｜DSML｜tool_calls> <｜DSML｜invoke name=...> <｜DSML｜parameter ...>",
    markers=("｜DSML｜", *_THINK), section=("<｜DSML｜tool_calls>\n", "</｜DSML｜tool_calls>"),
    call_begin='<｜DSML｜invoke name="{name}">\n', args=_DSML_ARGS, call_end="</｜DSML｜invoke>\n"))

register_tool_format(CallFormat(
    name="kimi_k2", aliases=("kimi",),
    description="Kimi K2: <|tool_call_begin|>functions.NAME:IDX<|tool_call_argument_begin|>{...}",
    markers=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
             "<|tool_call_argument_begin|>", "<|tool_call_end|>", *_THINK),
    section=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"),
    call_begin="<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>", args=JsonArgs(),
    call_end="<|tool_call_end|>", call_ids=WrittenCallId("<|tool_call_begin|>", "<|tool_call_argument_begin|>")))

register_tool_format(CallFormat(
    name="glm47", aliases=("glm4_7", "glm5"),
    description="GLM-4.7 / GLM-5: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>",
    markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", *_THINK),
    call_begin="<tool_call>{name}", args=XmlArgs("<arg_key>{key}</arg_key><arg_value>", "</arg_value>",
                                                 "</arg_value>"),
    call_end="</tool_call>"))

register_tool_format(CallFormat(
    name="glm45", aliases=("glm4_5", "glm4_6"),
    description="GLM-4.5 / 4.6: <tool_call>NAME\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n</tool_call>",
    markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", *_THINK),
    call_begin="<tool_call>{name}\n", args=XmlArgs("<arg_key>{key}</arg_key>\n<arg_value>", "</arg_value>\n",
                                                   "</arg_value>"),
    call_end="</tool_call>", call_sep="\n"))

register_tool_format(CallFormat(
    name="minimax_m2", aliases=("minimax",),
    description='MiniMax M2: <minimax:tool_call><invoke name="NAME"><parameter name="K">V</parameter>',
    markers=("<minimax:tool_call>", "</minimax:tool_call>", *_THINK),
    section=("<minimax:tool_call>\n", "</minimax:tool_call>"),
    call_begin='<invoke name="{name}">\n',
    args=XmlArgs('<parameter name="{key}">', "</parameter>\n", "</parameter>"),
    call_end="</invoke>\n"))

register_tool_format(CallFormat(
    name="gemma4", aliases=("gemma_4",),
    description='Gemma 4: <|tool_call>call:NAME{key:<|"|>v<|"|>}<tool_call|>',
    markers=("<|tool_call>", "<tool_call|>", '<|"|>', "<|channel>", "<channel|>", "<|turn>", "<turn|>"),
    call_begin="<|tool_call>call:{name}", args=GemmaArgs(), call_end="<tool_call|>"))

register_tool_format(HarmonyFormat())
register_tool_format(JsonCallsFormat())


# -- pythonic --------------------------------------------------------------------------------------
# llama4_json (above, an alias of llama3_json): vLLM 0.34 serves it with llama3_json's parser module, and
# Llama 4's JSON template writes the same {"name": ..., "parameters": ...} objects (no marker in the syntax).

_LLAMA3 = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", "<|eom_id|>",
           "<|python_tag|>")
_LLAMA4 = ("<|begin_of_text|>", "<|header_start|>", "<|header_end|>", "<|eot|>", "<|eom|>", "<|python_start|>",
           "<|python_end|>")

register_tool_format(PythonicFormat(
    name="pythonic", description="Llama 3.2 pythonic: the whole output is [f(a='x', b=1), g()]", markers=_LLAMA3))

register_tool_format(PythonicFormat(
    name="llama4_pythonic", wrapper=("<|python_start|>", "<|python_end|>"), markers=_LLAMA4,
    description="Llama 4 pythonic: [f(a=\"x\"), g()] as the whole output (reader: also in <|python_start|>)"))

register_tool_format(PythonicFormat(
    name="olmo3", block=("<function_calls>\n", "\n</function_calls>"), call_sep="\n", values="olmo",
    whole=False, bare_lines=True, markers=("<|im_start|>", "<|im_end|>"),  # the tags are text (the template's prompt)
    description="Olmo 3: <function_calls>\\nf(a='x', b=true)\\ng()\\n</function_calls>, one call a line"))

register_tool_format(PythonicFormat(
    name="lfm2", block=("<|tool_call_start|>[", "]<|tool_call_end|>"), whole=False,
    markers=("<|tool_call_start|>", "<|tool_call_end|>", "<|im_end|>"),
    description="LFM2 / LFM2.5: <|tool_call_start|>[f(a=\"x\")]<|tool_call_end|> in the text"))

register_tool_format(CallFormat(
    name="functiongemma", description="FunctionGemma: <start_function_call>call:NAME{key:<escape>v<escape>}"
                                      "<end_function_call>",
    markers=("<start_function_call>", "<end_function_call>", "<escape>", "<start_function_response>",
             "<start_of_turn>", "<end_of_turn>"),
    call_begin="<start_function_call>call:{name}", args=GemmaArgs(quote="<escape>"), call_end="<end_function_call>"))

register_tool_format(CallFormat(
    name="apertus", description='Apertus: <|tools_prefix|>[{"NAME": {...}}, ...]<|tools_suffix|>',
    markers=("<|tools_prefix|>", "<|tools_suffix|>", "<|inner_prefix|>", "<|inner_suffix|>", "<|assistant_end|>"),
    section=("<|tools_prefix|>[", "]<|tools_suffix|>"), call_begin='{"{name}": ', args=JsonArgs(), call_end="}",
    call_sep=", "))

# GigaChat 3.1 writes <|function_call|>{json}, GigaChat 3 a new "function call" message after <|message_sep|>;
# vLLM's gigachat3 reads both (tests/tool_parsers/test_gigachat3_tool_parser.py), one call per turn
_GIGACHAT = ("<|message_sep|>", "<|role_sep|>", "<|function_call|>", "</s>")
register_tool_format(AlternativeFormats(
    name="gigachat3", description='GigaChat 3 / 3.1: <|function_call|>{"name": ..., "arguments": {...}} '
                                  '(3: <|message_sep|>\\n\\nfunction call<|role_sep|>\\n{...})',
    alternatives=(
        CallFormat(name="gigachat3_1", markers=_GIGACHAT,
                   call_begin='<|function_call|>{"name": "{name}", "arguments": ', args=JsonArgs(), call_end="}"),
        CallFormat(name="gigachat3_0", markers=_GIGACHAT,
                   call_begin='<|message_sep|>\n\nfunction call<|role_sep|>\n{"name": "{name}", "arguments": ',
                   args=JsonArgs(), call_end="}"))))
