"""The table of tool-call formats: one declarative definition per model family, and the registry.

This is the file to edit for a new model family: a :class:`~.call_format.CallFormat` of literals of the
model's own call syntax (see ``call_format.py``) usually suffices; a format it cannot express is a
:class:`~.call_format.ToolFormat` class of its own (``harmony.py``, ``json_calls.py``).
"""

from __future__ import annotations

import threading

from thinkgate.reasoning.muse_channels import GLIMMER, SPARK

from .alternatives import AlternativeFormats
from .args import GemmaArgs, JsonArgs, XmlArgs
from .call_ids import WrittenCallId, mistral_call_id
from .dsml import DsmlArgs
from .elements import ElementArgs
from .call_format import CallFormat, ToolFormat
from .harmony import HarmonyFormat
from .inkling import InklingFormat
from .json_calls import JsonCallsFormat
from .marked_json import MarkedJsonFormat
from .muse import MuseFormat
from .pythonic import PythonicFormat
from .template import ResponseTemplateFormat
from .xml_values import ValueStyle
from .xtml import XtmlCalls, XtmlFormat
from .xtml_args import XtmlArgs

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
    name="hermes", aliases=("qwen3", "qwen2_5", "qwen3_json", "granite4"),
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


register_tool_format(_qwen_xml("qwen3_coder", ("granite_toolcall_parser",), "Qwen3-Coder (30B-A3B, 480B-A35B Instruct)",
                               "python"))
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
    name="glm47", aliases=("glm4_7", "glm5", "ling3"),
    description="GLM-4.7 / GLM-5: <tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>",
    markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", *_THINK),
    call_begin="<tool_call>{name}", args=XmlArgs("<arg_key>{key}</arg_key><arg_value>", "</arg_value>",
                                                 "</arg_value>"),
    call_end="</tool_call>"))

register_tool_format(CallFormat(
    name="glm45", aliases=("glm4_5", "glm4_6", "poolside_v1"),
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


# -- json_lists --------------------------------------------------------------------------------------
# JSON call objects inside optional markers (marked_json.py). Aliases of formats above, same syntax:
# granite4 (Granite 4.0 writes hermes' <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>) and
# granite_toolcall_parser (Granite 4.2: Qwen3-Coder's XML calls; vLLM runs its Qwen3 parser for it).

_PRETTY = 1 + 4 * 8  # tojson(indent=4): a newline and four spaces per level, eight levels deep

register_tool_format(MarkedJsonFormat(
    name="phi4_mini_json", description='Phi-4-mini: functools[{"name": ..., "arguments": {...}}, ...]',
    open="functools", body="list", arg_keys=("arguments", "parameters")))

register_tool_format(MarkedJsonFormat(
    name="xlam", description='xLAM: the output is [{"name": ..., "arguments": {...}}, ...]',
    open="", body="list", string_args=True))

register_tool_format(MarkedJsonFormat(
    name="jamba", description='Jamba: <tool_calls>[{"name": ..., "arguments": {...}}, ...]</tool_calls>',
    markers=("<tool_calls>", "</tool_calls>"), open="<tool_calls>", body="list", close="</tool_calls>",
    indent_whitespace=_PRETTY))

register_tool_format(MarkedJsonFormat(
    name="granite", description='Granite 3.x: <|tool_call|>[{"name": ..., "arguments": {...}}, ...] (3.1: <tool_call>)',
    markers=("<|tool_call|>", "<tool_call>"), open="<|tool_call|>", body="list", alt_opens=("<tool_call>",),
    indent_whitespace=_PRETTY, arguments_first=True))  # vLLM's tests: "granite emits arguments before name"

register_tool_format(MarkedJsonFormat(
    name="granite_20b_fc", aliases=("granite-20b-fc",),
    description='granite-20b-functioncalling: <function_call> {"name": ..., "arguments": {...}} per call',
    open="<function_call> ", body="object"))

register_tool_format(MarkedJsonFormat(
    name="internlm", aliases=("internlm2",),
    description='InternLM2: <|action_start|><|plugin|>\n{"name": ..., "arguments": {...}}<|action_end|>',
    markers=("<|action_start|>", "<|plugin|>", "<|action_end|>"), open="<|action_start|><|plugin|>\n",
    body="object", close="<|action_end|>", arg_keys=("arguments", "parameters")))
# -- xml_a --------------------------------------------------------------------------------------------
# vLLM 0.34 names whose call syntax is one already above are aliases (``ernie45`` of hermes: JSON in
# <tool_call> lines; ``step3p5`` / ``step5`` of qwen3_6: vLLM runs its Qwen3 XML engine for both, and the
# Step-3.5 outputs of vLLM's tests write JSON spellings, ``true``). The others are new literals of the
# same machinery.

def _add_aliases(name: str, *aliases: str) -> None:
    fmt = _FORMATS[name]
    fmt.aliases = (*fmt.aliases, *aliases)
    register_tool_format(fmt)


_add_aliases("hermes", "ernie45")
_add_aliases("qwen3_6", "step3p5", "step5")

_QWEN_XML_ARGS = XmlArgs("<parameter={key}>\n", "\n</parameter>\n", "</parameter>", values="json")

register_tool_format(CallFormat(
    name="seed_oss",
    description="Seed-OSS: <seed:tool_call>\\n<function=NAME>\\n<parameter=KEY>value</parameter>\\n...",
    markers=("<seed:tool_call>", "</seed:tool_call>", "<seed:think>", "</seed:think>"),
    call_begin="<seed:tool_call>\n<function={name}>\n",
    args=XmlArgs("<parameter={key}>", "</parameter>\n", "</parameter>", values="json"),
    call_end="</function>\n</seed:tool_call>", call_sep="\n"))

register_tool_format(CallFormat(
    name="zaya", aliases=("zaya_xml",),
    description="ZAYA1: Qwen3 XML calls in <zyphra_tool_call> tokens",
    markers=("<zyphra_tool_call>", "</zyphra_tool_call>", *_THINK),
    call_begin="<zyphra_tool_call>\n<function={name}>\n", args=_QWEN_XML_ARGS,
    call_end="</function>\n</zyphra_tool_call>", call_sep="\n"))

register_tool_format(CallFormat(
    name="mimo",
    description="MiMo-V2.6: compact <tool_call><function=NAME><parameter=KEY>value</parameter></function></tool_call>",
    markers=("<tool_call>", "</tool_call>", *_THINK),
    call_begin="<tool_call><function={name}>",
    args=XmlArgs("<parameter={key}>", "</parameter>", "</parameter>", values="json"),
    call_end="</function></tool_call>"))

register_tool_format(CallFormat(
    name="longcat",
    description="LongCat-Flash: hermes JSON calls in <longcat_tool_call> tokens",
    markers=("<longcat_tool_call>", "</longcat_tool_call>", *_THINK),
    call_begin='<longcat_tool_call>\n{"name": "{name}", "arguments": ', args=JsonArgs(),
    call_end="}\n</longcat_tool_call>", call_sep="\n"))

register_tool_format(CallFormat(
    name="hunyuan_a13b",
    description='Hunyuan-A13B: <tool_calls>[{"name": NAME, "arguments": {...}}, ...]</tool_calls>',
    markers=("<tool_calls>", "</tool_calls>", *_THINK),
    section=("<tool_calls>[", "]</tool_calls>"),
    call_begin='{"name": "{name}", "arguments": ', args=JsonArgs(), call_end="}", call_sep=", "))

register_tool_format(CallFormat(
    name="hy_v3",
    description="Hy3: <tool_calls>\\n<tool_call>NAME<tool_sep>\\n<arg_key>K</arg_key>\\n<arg_value>V</arg_value>\\n",
    markers=("<tool_calls>", "</tool_calls>", "<tool_call>", "</tool_call>", "<tool_sep>", "<arg_key>",
             "</arg_key>", "<arg_value>", "</arg_value>", *_THINK),
    section=("<tool_calls>\n", "</tool_calls>"),
    call_begin="<tool_call>{name}<tool_sep>\n",
    args=XmlArgs("<arg_key>{key}</arg_key>\n<arg_value>", "</arg_value>\n", "</arg_value>"),
    call_end="</tool_call>\n"))

register_tool_format(CallFormat(
    name="hy_v4",
    description="Hy4: <tool_calls><tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call></tool_calls>",
    markers=("<tool_calls>", "</tool_calls>", "<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>",
             "<arg_value>", "</arg_value>", *_THINK),
    section=("<tool_calls>", "</tool_calls>"),
    call_begin="<tool_call>{name}",
    args=XmlArgs("<arg_key>{key}</arg_key><arg_value>", "</arg_value>", "</arg_value>"),
    call_end="</tool_call>"))

register_tool_format(CallFormat(
    name="step3",
    description='Step3: <｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="NAME"> <steptml:parameter ...>',
    markers=("<｜tool_calls_begin｜>", "<｜tool_calls_end｜>", "<｜tool_call_begin｜>", "<｜tool_call_end｜>",
             "<｜tool_sep｜>", *_THINK),
    section=("<｜tool_calls_begin｜>\n", "\n<｜tool_calls_end｜>"),
    call_begin='<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{name}">\n',
    args=XmlArgs('<steptml:parameter name="{key}">', "</steptml:parameter>\n", "</steptml:parameter>"),
    call_end="</steptml:invoke><｜tool_call_end｜>", call_sep="\n"))

register_tool_format(CallFormat(
    name="minicpm5",
    description='MiniCPM5: <function name="NAME"><param name="KEY">value</param></function> in plain text',
    call_begin='<function name="{name}">',
    args=XmlArgs('<param name="{key}">', "</param>", "</param>", values="json"),
    call_end="</function>", call_sep="\n", text_trigger='<function name="'))
# -- xml_b --
# ling3 (Ling 3: vLLM's parser is GLM-4.7's, its structural tag glm_4_7) and poolside_v1 (a GLM-4.5 parser:
# "<tool_call>NAME\n<arg_key>K</arg_key>\n<arg_value>V</arg_value>\n</tool_call>") are aliases of glm47
# and glm45 above.

register_tool_format(CallFormat(
    name="deepseek_v41", aliases=("deepseek_v4_1",),
    description="DeepSeek V4.1 DSML: <｜DSML｜ calls> <｜DSML｜ invoke name=...> <｜DSML｜ parameter ...> (a space "
                "after the marker)",
    markers=("｜DSML｜", *_THINK), section=("<｜DSML｜ calls>\n", "</｜DSML｜ calls>"),
    # vLLM 0.34's deepseek_v41 also opens a block under V4's name in V4.1's spacing; the readers take it (closed
    # either way), the grammar writes the template's "calls"
    alt_sections=(("<｜DSML｜ tool_calls>\n", "</｜DSML｜ tool_calls>"),),
    call_begin='<｜DSML｜ invoke name="{name}">\n',
    args=DsmlArgs(param_begin='<｜DSML｜ parameter name="{key}" string="{string}">',
                  param_end="</｜DSML｜ parameter>\n", close="</｜DSML｜ parameter>"),
    call_end="</｜DSML｜ invoke>\n"))

register_tool_format(CallFormat(
    name="dots",
    description='dots: <dots_function_call> <invoke name="NAME"> <parameter name="K">V</parameter>',
    markers=("<dots_function_call>", "</dots_function_call>", *_THINK),
    section=("<dots_function_call>\n", "</dots_function_call>"),
    call_begin='<invoke name="{name}">\n',
    args=XmlArgs('<parameter name="{key}">', "</parameter>\n", "</parameter>"),
    call_end="</invoke>\n"))

# Ripple writes Hermes' call with markers that are plain text in its vocabulary (not control tokens):
# the trigger is text, as llama3_json's.
register_tool_format(CallFormat(
    name="ripple",
    description="Ripple: Hermes' <tool_call> JSON calls, the markers plain text",
    call_begin='<tool_call>\n{"name": "{name}", "arguments": ', args=JsonArgs(), call_end="}\n</tool_call>",
    call_sep="\n", text_trigger="<tool_call>"))

# PLaMo 3 spells each tool marker with three tokens: "<|plamo:begin_" / "<|plamo:end_", the tag's name in
# ordinary text, ":plamo|>". Those pieces are the control tokens the constraint and the reader match.
register_tool_format(CallFormat(
    name="plamo3",
    description="PLaMo 3: <|plamo:begin_tool_requests:plamo|> ... <|plamo:begin_tool_name:plamo|>NAME ... "
                "<|plamo:constrain|>json<|plamo:msg|>{...}",
    markers=("<|plamo:begin_", "<|plamo:end_", ":plamo|>", "<|plamo:constrain|>", "<|plamo:msg|>"),
    section=("<|plamo:begin_tool_requests:plamo|>", "<|plamo:end_tool_requests:plamo|>"),
    call_begin="<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>{name}<|plamo:end_tool_name:plamo|>"
               "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>",
    args=JsonArgs(), call_end="<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>"))

# K2 Horizon: its default tool_call_format "xml" (GLM-4.7's call in <ifm|...> tokens, calls one per line in a
# <ifm|tool_calls> group). Its other two formats, chosen per request by chat_template_kwargs
# tool_call_format ("json", "xml_typed"), are not served.
register_tool_format(CallFormat(
    name="k2_horizon",
    description="K2 Horizon: <ifm|tool_calls><ifm|tool_call>NAME<ifm|arg_key>K</ifm|arg_key><ifm|arg_value>V"
                "</ifm|arg_value></ifm|tool_call>",
    markers=("<ifm|tool_calls>", "</ifm|tool_calls>", "<ifm|tool_call>", "</ifm|tool_call>", "<ifm|arg_key>",
             "</ifm|arg_key>", "<ifm|arg_type>", "</ifm|arg_type>", "<ifm|arg_value>", "</ifm|arg_value>", *_THINK),
    section=("<ifm|tool_calls>", "</ifm|tool_calls>"),
    call_begin="<ifm|tool_call>{name}",
    args=XmlArgs("<ifm|arg_key>{key}</ifm|arg_key><ifm|arg_value>", "</ifm|arg_value>", "</ifm|arg_value>"),
    call_end="</ifm|tool_call>", call_sep="\n"))

# Cohere Command: cohere_melody's own renderers (render_cmd3, render_cmd4: the presets vLLM's cohere_command3 /
# cohere_command4 parse with) write the same action block, a JSON list of calls four spaces in, each with the id
# the tool result refers to (the call's id here, as melody returns it).
register_tool_format(CallFormat(
    name="cohere_command3", aliases=("cohere_command4", "cohere_command"),
    description='Cohere Command: <|START_ACTION|>[{"tool_call_id": "I", "tool_name": "N", "parameters": {...}}]'
                "<|END_ACTION|>",
    markers=("<|START_ACTION|>", "<|END_ACTION|>", "<|START_THINKING|>", "<|END_THINKING|>", "<|START_RESPONSE|>",
             "<|END_RESPONSE|>", "<|START_TEXT|>", "<|END_TEXT|>"),
    section=("<|START_ACTION|>[\n    ", "\n]<|END_ACTION|>"),
    call_begin='{"tool_call_id": "{index}", "tool_name": "{name}", "parameters": ', args=JsonArgs(), call_end="}",
    call_sep=",\n    ", call_ids=WrittenCallId('{"tool_call_id": "', '"')))
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

# Inkling: typed blocks, a call a block of its own; its header, body and block framing are a class of their own
# (inkling.py), as harmony's messages are
register_tool_format(InklingFormat())
# -- template-reading -------------------------------------------------------------------------------
# vLLM's hf / beam: the call syntax of the checkpoint's response_template, built per model (template.py);
# beam's grammar differs from hf's only in when vLLM applies it, which thinkgate decides per request.
register_tool_format(ResponseTemplateFormat("hf", aliases=("beam",)))
# MiniMax M3 writes every tag after its namespace token ]<]minimax[>[ (one added token of its tokenizer, the
# marker vLLM's parser and xgrammar's minimax_m3 tag match), the arguments as nested elements (elements.py).
# <tool_call> / </tool_call> are control tokens of the Qwen3.6 table its synthetic vocabulary is built on;
# whether M3's own tokenizer holds them is not known offline: they match as tokens only where they are ones.
_M3 = "]<]minimax[>["
register_tool_format(CallFormat(
    name="minimax_m3",
    description=f'MiniMax M3: {_M3} before every tag: <tool_call>, <invoke name="NAME">, <K>V</K> (objects as nested '
                "elements, lists as <item> elements)",
    markers=(_M3, "<tool_call>", "</tool_call>", "<mm:think>", "</mm:think>"),
    optional_markers=("<tool_call>", "</tool_call>"),
    section=(f"{_M3}<tool_call>\n", f"{_M3}</tool_call>"),
    call_begin=f'{_M3}<invoke name="{{name}}">', args=ElementArgs(_M3), call_end=f"{_M3}</invoke>\n",
    name_quotes=("'", "")))
# -- Kimi K3 (XTML channels, xtml.py): every marker is a control token, a word, a control token
_XTML = ("<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>")
register_tool_format(XtmlFormat(
    name="kimi_k3",
    description='Kimi K3 XTML: <|open|>tools<|sep|><|open|>call tool="NAME" index="1"<|sep|><|open|>argument '
                'key="K" type="T"<|sep|>V<|close|>argument<|sep|>...<|close|>call<|sep|><|close|>tools<|sep|> '
                "after the response channel",
    calls=XtmlCalls(
        name="kimi_k3", markers=_XTML, section=("<|open|>tools<|sep|>", "<|close|>tools<|sep|>"),
        call_begin='<|open|>call tool="{name}" index="{index}"<|sep|>', args=XtmlArgs(),
        call_end="<|close|>call<|sep|>", index_pattern="[1-9][0-9]{0,3}"),
    answer=("<|open|>response<|sep|>", "<|close|>response<|sep|>"), trailer="<|close|>message<|sep|>"))
# -- muse: Muse's channel messages, a call a message to its tool with an ATEM block (muse.py; the recipients are
# reasoning/muse_channels.py's, shared with the muse reasoning parsers)
register_tool_format(MuseFormat(name="muse", aliases=("musespark",), recipients=SPARK))
register_tool_format(MuseFormat(
    name="muse_glimmer", recipients=GLIMMER, pre_recipients=("self",),
    description="Muse Glimmer profile: Muse's call messages; every recipient but self and user is a tool"))
# -- names only SGLang 0.5.23 has (vLLM 0.34 has no parser of them). IQuest-Q1 (SGLang's iquest_q1, a GLM-4.7
# detector with its own call tokens): GLM-4.7's keyed arguments, nothing between the pieces or the calls.
# SGLang's trinity is hermes' syntax (thinkgate/engines/sglang/tool_names.py maps it there).
register_tool_format(CallFormat(
    name="iquest_q1",
    description="IQuest-Q1: <iquest_tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></iquest_tool_call>",
    markers=("<iquest_tool_call>", "</iquest_tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
             *_THINK),
    optional_markers=("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    call_begin="<iquest_tool_call>{name}",
    args=XmlArgs("<arg_key>{key}</arg_key><arg_value>", "</arg_value>", "</arg_value>"),
    call_end="</iquest_tool_call>"))
# -- SGLang-only names (sglang 0.5.23's --tool-call-parser; vLLM 0.34 has no parser of them)
# GigaChat 3.5's GCML (its chat template's render_gcml_tool_calls): DeepSeek V4's DSML block under the ｜GCML｜ token,
# string="true" + the raw text for a str value, string="false" + tojson for any other; no blank line without arguments
register_tool_format(CallFormat(
    name="gigachat35",
    description="GigaChat 3.5 GCML: <｜GCML｜tool_calls> <｜GCML｜invoke name=...> <｜GCML｜parameter name=... "
                "string=...>",
    markers=("｜GCML｜", "<|message_sep|>", "<|role_sep|>", *_THINK),
    section=("<｜GCML｜tool_calls>\n", "</｜GCML｜tool_calls>"),
    call_begin='<｜GCML｜invoke name="{name}">\n',
    args=DsmlArgs(param_begin='<｜GCML｜parameter name="{key}" string="{string}">',
                  param_end="</｜GCML｜parameter>\n", close="</｜GCML｜parameter>", marker="｜GCML｜", no_params=""),
    call_end="</｜GCML｜invoke>\n"))

# Spark-X2.5 (iFlytek / XHToken; SGLang's spark25, and the name its own vLLM plugin registers): GLM-4.5's call with
# no newline between a key and its value, a pair a line
register_tool_format(CallFormat(
    name="spark25",
    description="Spark-X2.5: <tool_call>NAME\\n<arg_key>K</arg_key><arg_value>V</arg_value>\\n</tool_call>",
    markers=("<tool_call>", "</tool_call>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>", *_THINK),
    call_begin="<tool_call>{name}\n", args=XmlArgs("<arg_key>{key}</arg_key><arg_value>", "</arg_value>\n",
                                                   "</arg_value>"),
    call_end="</tool_call>", call_sep="\n"))
