"""Tool calls as each model's own chat template writes them: the reference text for the conformance test.

    render(name, calls, content="") -> str     # the assistant's text after its thinking, up to its stop token
    render_ids(name, calls, vocabulary) -> ids # the same as token ids (Magistral: mistral-common's own encoder)

``name`` is a renderer (:data:`RENDERERS`): a format name renders as that format's model family writes it,
and a family with two ways of writing a call has a second renderer (``qwen3_5`` beside ``qwen3_coder``,
``gpt_oss_template`` beside ``openai``). ``calls`` is ``[(tool name, arguments dict), ...]``.

Each renderer is written by hand from the template it cites (the Jinja text read from the model's
repository or a public copy of it, or the model's own Python encoder), never from thinkgate's format
definitions. The template texts are not stored here: they are third-party code, and the rules below are
the few lines of each that write a call. Jinja semantics the rules depend on, as Hugging Face
transformers renders chat templates (``trim_blocks``, ``lstrip_blocks``):

- ``x | tojson`` is ``json.dumps(x, ensure_ascii=False)`` (transformers overrides Jinja's filter): ``", "``
  and ``": "`` separators, keys in the caller's order;
- ``x | string`` and ``{{ x }}`` of a non-string are Python's ``str``: ``True``, ``False``, ``None``,
  ``65.0``, ``1e-07``;
- ``dictsort`` sorts keys case-insensitively.

What a template cannot write raises ``ValueError`` (Llama 3.1's template refuses more than one call).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

Call = tuple[str, dict[str, Any]]

__all__ = ["RENDERERS", "Renderer", "render", "render_ids", "mistral_ids"]


def tojson(x: Any) -> str:
    """Jinja's ``tojson`` as transformers defines it."""
    return json.dumps(x, ensure_ascii=False)


def jinja_str(x: Any) -> str:
    """Jinja's ``| string`` (and ``{{ x }}``) of a value: Python's ``str``."""
    return x if isinstance(x, str) else str(x)


@dataclass(frozen=True)
class Renderer:
    name: str
    format: str                 # the thinkgate format that must accept and read this text
    source: str                 # where the template or encoder was read
    write: Callable[[Sequence[Call], str], str]   # (calls, content) -> text after the thinking
    parallel: bool = True       # the template can write more than one call in a turn
    notes: str = ""


# --------------------------------------------------------------------------------------------------
# Qwen


def _hermes(calls: Sequence[Call], content: str) -> str:
    # Qwen3 chat_template: for each call, '\n' unless (first and no content); then
    # '<tool_call>\n{"name": "' + name + '", "arguments": ' + (arguments | tojson) + '}\n</tool_call>'
    out = content
    for i, (name, args) in enumerate(calls):
        if i or content:
            out += "\n"
        out += '<tool_call>\n{"name": "' + name + '", "arguments": ' + tojson(args) + "}\n</tool_call>"
    return out


def _qwen_value(v: Any) -> str:
    # args_value | tojson | safe if args_value is mapping or (sequence and not string) else args_value | string
    return tojson(v) if isinstance(v, (dict, list)) else jinja_str(v)


def _qwen_function(name: str, args: dict[str, Any]) -> str:
    body = "".join("<parameter=" + k + ">\n" + _qwen_value(v) + "\n</parameter>\n" for k, v in args.items())
    return "<tool_call>\n<function=" + name + ">\n" + body + "</function>\n</tool_call>"


def _qwen3_coder(calls: Sequence[Call], content: str) -> str:
    # Qwen3-Coder: content|trim + '\n' when there is content, then '\n<tool_call>...' for every call
    out = content.strip() + "\n" if content.strip() else ""
    return out + "".join("\n" + _qwen_function(n, a) for n, a in calls)


def _qwen3_5(calls: Sequence[Call], content: str) -> str:
    # Qwen3.5 / 3.6: the first call after '\n\n' when there is content (none otherwise), later ones after '\n'
    out = content
    for i, (name, args) in enumerate(calls):
        out += ("\n\n" if content.strip() else "") if i == 0 else "\n"
        out += _qwen_function(name, args)
    return out


def _qwen3_6(calls: Sequence[Call], content: str) -> str:
    # Qwen3.6: args_value if string else args_value | tojson; calls placed as Qwen3.5's template places them
    out = content
    for i, (name, args) in enumerate(calls):
        out += ("\n\n" if content.strip() else "") if i == 0 else "\n"
        body = "".join("<parameter=" + k + ">\n" + (v if isinstance(v, str) else tojson(v)) + "\n</parameter>\n"
                       for k, v in args.items())
        out += "<tool_call>\n<function=" + name + ">\n" + body + "</function>\n</tool_call>"
    return out


# --------------------------------------------------------------------------------------------------
# Llama, Mistral


def _llama3_json(calls: Sequence[Call], content: str) -> str:
    # Llama 3.1 / 3.3 chat_template: raise_exception("This model only supports single tool-calls at once!")
    # for more than one; '{"name": "' + name + '", ' + '"parameters": ' + (arguments | tojson) + '}'
    if len(calls) != 1:
        raise ValueError("the Llama 3.1 chat template writes exactly one tool call per turn")
    if content:
        raise ValueError("the Llama 3.1 chat template writes a tool call turn without content")
    name, args = calls[0]
    return '{"name": "' + name + '", "parameters": ' + tojson(args) + "}"


_TEKKEN_SPECIALS = {32: "[ARGS]", 33: "[CALL_ID]", 34: "[THINK]", 35: "[/THINK]"}


@lru_cache(maxsize=1)
def _mistral_instruct():  # pragma: no cover - exercised through mistral_ids
    """mistral-common's InstructTokenizerV13 (Magistral Small 2509's tokenizer version) over the tekken
    table that mistral-common ships, with the v13 control tokens named in their slots (the shipped
    tekken_240911.json predates them; Magistral's tokenizer names slots 32-35 [ARGS], [CALL_ID], [THINK],
    [/THINK])."""
    import mistral_common
    from mistral_common.tokens.tokenizers.instruct import InstructTokenizerV13
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    src = os.path.join(os.path.dirname(mistral_common.__file__), "data", "tekken_240911.json")
    with open(src, encoding="utf-8") as f:
        data = json.load(f)
    specials = [{"rank": t["rank"], "token_str": str(getattr(t["token_str"], "value", t["token_str"])),
                 "is_control": True} for t in Tekkenizer.DEPRECATED_SPECIAL_TOKENS]
    for rank in range(len(specials), max(_TEKKEN_SPECIALS) + 1):
        specials.append({"rank": rank, "token_str": _TEKKEN_SPECIALS.get(rank, f"<SPECIAL_{rank}>"), "is_control": True})
    data["special_tokens"] = specials
    data["config"]["version"] = "v13"
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False, encoding="utf-8") as f:
        json.dump(data, f)
        path = f.name
    try:
        return InstructTokenizerV13(Tekkenizer.from_file(path))
    finally:
        os.unlink(path)


def mistral_ids(calls: Sequence[Call]) -> list[int]:
    """Magistral's tool calls as token ids, from mistral-common's own encoder (``[TOOL_CALLS]`` name
    ``[ARGS]`` ``json.dumps(arguments, ensure_ascii=False)`` per call, nothing between calls)."""
    from mistral_common.protocol.instruct.messages import AssistantMessage
    from mistral_common.protocol.instruct.tool_calls import FunctionCall, ToolCall

    it = _mistral_instruct()
    msg = AssistantMessage(tool_calls=[ToolCall(id=f"call{i:05d}", function=FunctionCall(name=n, arguments=a))
                                       for i, (n, a) in enumerate(calls)])
    return list(it._encode_tool_calls_in_assistant_message(msg))


def _mistral(calls: Sequence[Call], content: str) -> str:
    from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy

    return content + _mistral_instruct().tokenizer.decode(mistral_ids(calls), special_token_policy=SpecialTokenPolicy.KEEP)


# --------------------------------------------------------------------------------------------------
# DeepSeek


def _deepseek_v3(calls: Sequence[Call], content: str) -> str:
    # DeepSeek V3 / R1: content + '<｜tool▁calls▁begin｜>' + per call ('\n' between calls)
    # '<｜tool▁call▁begin｜>' + type + '<｜tool▁sep｜>' + name + '\n```json\n' + arguments + '\n```<｜tool▁call▁end｜>'
    # + '<｜tool▁calls▁end｜>' (then the end of sentence)
    body = "\n".join("<｜tool▁call▁begin｜>function<｜tool▁sep｜>" + n + "\n```json\n" + tojson(a) + "\n```<｜tool▁call▁end｜>"
                     for n, a in calls)
    return content + "<｜tool▁calls▁begin｜>" + body + "<｜tool▁calls▁end｜>"


def _deepseek_v31(calls: Sequence[Call], content: str) -> str:
    # DeepSeek V3.1: '<｜tool▁call▁begin｜>' + name + '<｜tool▁sep｜>' + arguments + '<｜tool▁call▁end｜>', chained
    body = "".join("<｜tool▁call▁begin｜>" + n + "<｜tool▁sep｜>" + tojson(a) + "<｜tool▁call▁end｜>" for n, a in calls)
    return content + "<｜tool▁calls▁begin｜>" + body + "<｜tool▁calls▁end｜>"


def _dsml(block: str) -> Callable[[Sequence[Call], str], str]:
    # encoding_dsv32.py / encoding_dsv4.py: encode_arguments_to_dsml joins, with '\n', one
    # '<｜DSML｜parameter name="{key}" string="{true|false}">{value}</｜DSML｜parameter>' per argument (a str
    # verbatim, anything else to_json = json.dumps(ensure_ascii=False)); tool_call_template is
    # '<｜DSML｜invoke name="{name}">\n{arguments}\n</｜DSML｜invoke>' (so no arguments leave a blank line);
    # the calls, joined with '\n', go in '\n\n<｜DSML｜{block}>\n{tool_calls}\n</｜DSML｜{block}>' after the content.
    def write(calls: Sequence[Call], content: str) -> str:
        invokes = []
        for name, args in calls:
            params = "\n".join(
                f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                f'{v if isinstance(v, str) else tojson(v)}</｜DSML｜parameter>' for k, v in args.items())
            invokes.append(f'<｜DSML｜invoke name="{name}">\n{params}\n</｜DSML｜invoke>')
        return content + f"\n\n<｜DSML｜{block}>\n" + "\n".join(invokes) + f"\n</｜DSML｜{block}>"
    return write


# --------------------------------------------------------------------------------------------------
# Kimi, GLM, MiniMax


def _kimi_k2(calls: Sequence[Call], content: str) -> str:
    # Kimi K2 (-Instruct-0905, -Thinking) render_toolcalls: '<|tool_calls_section_begin|>' then per call
    # '<|tool_call_begin|>' + id + '<|tool_call_argument_begin|>' + (arguments | tojson) + '<|tool_call_end|>',
    # then '<|tool_calls_section_end|>'; the id is 'functions.{name}:{index}' (Kimi's tool-call id convention,
    # the index counting calls in the conversation)
    body = "".join(f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{tojson(a)}<|tool_call_end|>"
                   for i, (n, a) in enumerate(calls))
    return content + "<|tool_calls_section_begin|>" + body + "<|tool_calls_section_end|>"


def _glm_value(v: Any) -> str:
    # v | tojson(ensure_ascii=False) if v is not string else v
    return v if isinstance(v, str) else tojson(v)


def _glm45(calls: Sequence[Call], content: str) -> str:
    # GLM-4.5 / 4.6: content ('\n' + content|trim) then per call '\n<tool_call>' + name + '\n' and per argument
    # '<arg_key>k</arg_key>\n<arg_value>v</arg_value>\n', then '</tool_call>'
    out = "\n" + content.strip() if content.strip() else ""
    for name, args in calls:
        out += "\n<tool_call>" + name + "\n"
        out += "".join(f"<arg_key>{k}</arg_key>\n<arg_value>{_glm_value(v)}</arg_value>\n" for k, v in args.items())
        out += "</tool_call>"
    return out


def _glm47(calls: Sequence[Call], content: str) -> str:
    # GLM-4.7 / GLM-5: content|trim, then per call '<tool_call>' + name + '<arg_key>k</arg_key><arg_value>v</arg_value>'
    # ... + '</tool_call>', nothing between
    return _keyed_calls(calls, content, "<tool_call>", "</tool_call>")


def _keyed_calls(calls: Sequence[Call], content: str, begin: str, end: str) -> str:
    # GLM-4.7's keyed arguments between the family's call tokens: content|trim, then per call begin + name +
    # '<arg_key>k</arg_key><arg_value>v</arg_value>' ... + end, nothing between
    out = content.strip()
    for name, args in calls:
        out += begin + name
        out += "".join(f"<arg_key>{k}</arg_key><arg_value>{_glm_value(v)}</arg_value>" for k, v in args.items())
        out += end
    return out


def _iquest_q1(calls: Sequence[Call], content: str) -> str:
    # IQuest-Q1 (IQuestLab/IQuest-Q1, as a public runtime's render tests quote its template): content, then per
    # call '<iquest_tool_call>' + name + '<arg_key>k</arg_key><arg_value>v</arg_value>' ... + '</iquest_tool_call>',
    # non-strings as JSON, no newline anywhere
    return _keyed_calls(calls, content, "<iquest_tool_call>", "</iquest_tool_call>")


def _minimax_m2(calls: Sequence[Call], content: str) -> str:
    # MiniMax M2: content + '\n<minimax:tool_call>\n' + per call '<invoke name="N">\n' + per argument
    # '<parameter name="k">' + (v | tojson if v is not string else v) + '</parameter>\n' + '</invoke>\n', then
    # '</minimax:tool_call>'
    out = content + "\n<minimax:tool_call>\n"
    for name, args in calls:
        out += f'<invoke name="{name}">\n'
        out += "".join(f'<parameter name="{k}">{_glm_value(v)}</parameter>\n' for k, v in args.items())
        out += "</invoke>\n"
    return out + "</minimax:tool_call>"


_M3 = "]<]minimax[>["


def _m3_value(v: Any) -> str:
    # MiniMax's serializer (_stringify_parameter): a dict's non-None members as NS<k>v NS</k>, a list's non-None
    # items as NS<item>v NS</item>, a str as it is, anything else json.dumps (ensure_ascii=False)
    if isinstance(v, dict):
        return "".join(f"{_M3}<{k}>{_m3_value(x)}{_M3}</{k}>" for k, x in v.items() if x is not None)
    if isinstance(v, list):
        return "".join(f"{_M3}<item>{_m3_value(x)}{_M3}</item>" for x in v if x is not None)
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _minimax_m3(calls: Sequence[Call], content: str) -> str:
    # MiniMax M3 (stringify_function_calls): NS<tool_call>\n, per call NS<invoke name="N"> + the arguments'
    # elements + NS</invoke>\n, then NS</tool_call>; the content right before it (a real M3 output:
    # "...candidates.]<]minimax[>[<tool_call>\n")
    body = "".join(f'{_M3}<invoke name="{n}">{_m3_value(a)}{_M3}</invoke>\n' for n, a in calls)
    return f"{content}{_M3}<tool_call>\n{body}{_M3}</tool_call>"


# --------------------------------------------------------------------------------------------------
# Gemma 4


def _gemma_argument(v: Any) -> str:
    # format_argument(argument, escape_keys=False): string '<|"|>' + s + '<|"|>'; boolean true/false; mapping
    # '{' + key:value for key, value in argument | dictsort + '}'; sequence '[' + items + ']'; else {{ argument }}
    if isinstance(v, str):
        return '<|"|>' + v + '<|"|>'
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_gemma_argument(x)}" for k, x in _dictsort(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_gemma_argument(x) for x in v) + "]"
    return jinja_str(v)


def _dictsort(d: dict[str, Any]) -> list[tuple[str, Any]]:
    return sorted(d.items(), key=lambda kv: kv[0].lower())


def _gemma4(calls: Sequence[Call], content: str) -> str:
    # Gemma 4 chat template: per call '<|tool_call>call:' + name + '{' + key:format_argument(value) for key, value
    # in arguments | dictsort, joined with ',' + '}<tool_call|>'; the content after the calls
    out = "".join("<|tool_call>call:" + n + "{" + ",".join(f"{k}:{_gemma_argument(v)}" for k, v in _dictsort(a))
                  + "}<tool_call|>" for n, a in calls)
    return out + content


# --------------------------------------------------------------------------------------------------
# gpt-oss (harmony); the text after the prompt's '<|start|>assistant'


def _harmony(calls: Sequence[Call], content: str) -> str:
    # The harmony format guide (openai/harmony, and its renderer): a call is a commentary message whose header
    # names the recipient after the channel and the content type after <|constrain|>:
    # '<|channel|>commentary to=functions.N <|constrain|>json<|message|>{"location":"San Francisco"}<|call|>'
    if len(calls) != 1:
        raise ValueError("a harmony turn ends at its call (<|call|>): one call per turn")
    if content:
        raise ValueError("harmony writes content on its own channel, not in the call message")
    name, args = calls[0]
    return f"<|channel|>commentary to=functions.{name} <|constrain|>json<|message|>" + json.dumps(
        args, ensure_ascii=False, separators=(",", ":"))


def _gpt_oss_template(calls: Sequence[Call], content: str) -> str:
    # gpt-oss chat_template.jinja: '<|start|>assistant to=' + 'functions.' + name + '<|channel|>commentary '
    # + (content_type or 'json') + '<|message|>' + (arguments | tojson) + '<|call|>': the recipient in the role
    # header, the content type without <|constrain|>
    if len(calls) != 1:
        raise ValueError("a harmony turn ends at its call (<|call|>): one call per turn")
    if content:
        raise ValueError("harmony writes content on its own channel, not in the call message")
    name, args = calls[0]
    return f" to=functions.{name}<|channel|>commentary json<|message|>" + tojson(args)


# --------------------------------------------------------------------------------------------------
# Muse (Spark and the Glimmer profile); the text after the prompt's '<|start|>assistant'


def _muse(calls: Sequence[Call], content: str) -> str:
    # Muse's chat template (its tool instruction and history, as the renderer golden tests of a public Muse
    # runtime quote them: a call is a message of its own, '<|start|>assistant to=' + name + '<|message|>' +
    # '<atem:function_calls>\n<atem:invoke name="' + name + '">\n' + per argument '<atem:parameter name="' + k +
    # '">' + value + '</atem:parameter>\n' + '</atem:invoke>\n</atem:function_calls>', the calls joined by
    # '<|eom|>'; "String and scalar parameters should be specified as is, while lists and objects should use JSON
    # format": a str as it is, any other value tojson). The first message's '<|start|>assistant' is the prompt's.
    if content:
        raise ValueError("Muse writes content in a message of its own (to=user / to=commentary), not beside a call")
    out = []
    for name, args in calls:
        params = "".join(f'<atem:parameter name="{k}">{v if isinstance(v, str) else tojson(v)}</atem:parameter>\n'
                         for k, v in args.items())
        out.append(f' to={name}<|message|><atem:function_calls>\n<atem:invoke name="{name}">\n{params}'
                   "</atem:invoke>\n</atem:function_calls>")
    return "<|eom|><|start|>assistant".join(out)


# --------------------------------------------------------------------------------------------------
# json_lists: JSON call objects inside optional markers


def _call_object(name: str, args: dict[str, Any]) -> str:
    return '{"name": "' + name + '", "arguments": ' + tojson(args) + "}"


def _phi4_mini_json(calls: Sequence[Call], content: str) -> str:
    # vllm-project/vllm examples/tool_chat_template_phi4_mini.jinja, its system prompt: "prefix function calls
    # with functools marker (no closing marker required)", "all function calls should be generated in a single
    # JSON list formatted as functools[{"name": [function name], "arguments": [function arguments as JSON]},
    # ...]" (the template's own history rendering drops the marker and writes arguments with {{ }})
    return content + "functools[" + ", ".join(_call_object(n, a) for n, a in calls) + "]"


def _xlam(calls: Sequence[Call], content: str) -> str:
    # vllm-project/vllm examples/tool_chat_template_xlam_qwen.jinja: "[" + (tool_call.function | tojson)
    # joined by ", " + "]", content only when there are no calls
    if content:
        raise ValueError("the xLAM template writes a turn's content or its calls, not both")
    return "[" + ", ".join(tojson({"name": n, "arguments": a}) for n, a in calls) + "]"


def _jamba(calls: Sequence[Call], content: str) -> str:
    # no Jamba chat template found; the model outputs of vllm-project/vllm
    # tests/tool_parsers/test_jamba_tool_parser.py: '<tool_calls>[\n    ' + call objects joined by ',\n    '
    # + '\n]</tool_calls>', content before the marker
    return content + "<tool_calls>[\n    " + ",\n    ".join(_call_object(n, a) for n, a in calls) + "\n]</tool_calls>"


def _granite(calls: Sequence[Call], content: str) -> str:
    # Granite 3.0 chat template (ibm-granite/granite-3.0-8b-instruct): '<|start_of_role|>assistant<|end_of_role|>
    # <|tool_call|>' + message.tool_calls | map(attribute='function') | list | tojson(indent=4), no content
    if content:
        raise ValueError("the Granite 3.0 template writes a tool-call turn without content")
    return "<|tool_call|>" + json.dumps([{"name": n, "arguments": a} for n, a in calls], ensure_ascii=False,
                                        indent=4)


def _granite_20b_fc(calls: Sequence[Call], content: str) -> str:
    # vllm-project/vllm examples/tool_chat_template_granite_20b_fc.jinja: per call
    # '<function_call> ' + {'name': ..., 'arguments': ...} | tojson, the whitespace between them stripped by {{-
    if content:
        raise ValueError("the granite-20b-fc template writes a tool-call turn without content")
    return "".join("<function_call> " + tojson({"name": n, "arguments": a}) for n, a in calls)


def _internlm(calls: Sequence[Call], content: str) -> str:
    # vllm-project/vllm examples/tool_chat_template_internlm2_tool.jinja: content, then per call
    # '<|action_start|><|plugin|>\n' + '{"name": "' + name + '", ' + '"arguments": ' + arguments | string + '}'
    # + '<|action_end|>' (arguments: the message's JSON text, as the OpenAI request gives it)
    return content + "".join("<|action_start|><|plugin|>\n" + _call_object(n, a) + "<|action_end|>"
                             for n, a in calls)
# xml_a: Seed-OSS, ZAYA1, MiMo, LongCat, Hunyuan-A13B, Hy3 / Hy4, Step3 (and two aliases' own layouts)


def _xml_value(v: Any) -> str:
    # `v if v is string else v | tojson`: the rule of the Qwen XML family's later templates
    return v if isinstance(v, str) else tojson(v)


def _seed_oss(calls: Sequence[Call], content: str) -> str:
    # '<seed:tool_call>\n<function=' + name + '>\n', then per argument '<parameter=' + k + '>' + value +
    # '</parameter>\n', then '</function>\n</seed:tool_call>'; calls and content joined by '\n'
    out = content
    for i, (name, args) in enumerate(calls):
        if i or content:
            out += "\n"
        body = "".join("<parameter=" + k + ">" + _xml_value(v) + "</parameter>\n" for k, v in args.items())
        out += "<seed:tool_call>\n<function=" + name + ">\n" + body + "</function>\n</seed:tool_call>"
    return out


def _zaya(calls: Sequence[Call], content: str) -> str:
    # Qwen3.6's layout (value between newlines) inside <zyphra_tool_call>
    out = content
    for i, (name, args) in enumerate(calls):
        out += ("\n\n" if content.strip() else "") if i == 0 else "\n"
        body = "".join("<parameter=" + k + ">\n" + _xml_value(v) + "\n</parameter>\n" for k, v in args.items())
        out += "<zyphra_tool_call>\n<function=" + name + ">\n" + body + "</function>\n</zyphra_tool_call>"
    return out


def _mimo(calls: Sequence[Call], content: str) -> str:
    # MiMo-V2.6: '<tool_call><function=' + name + '>' + ('<parameter=' + k + '>' + value + '</parameter>')* +
    # '</function></tool_call>', no whitespace between the tags or the calls
    out = content
    for name, args in calls:
        body = "".join("<parameter=" + k + ">" + _xml_value(v) + "</parameter>" for k, v in args.items())
        out += "<tool_call><function=" + name + ">" + body + "</function></tool_call>"
    return out


def _longcat(calls: Sequence[Call], content: str) -> str:
    out = content
    for i, (name, args) in enumerate(calls):
        if i or content:
            out += "\n"
        out += '<longcat_tool_call>\n{"name": "' + name + '", "arguments": ' + tojson(args) + "}\n</longcat_tool_call>"
    return out


def _hunyuan_a13b(calls: Sequence[Call], content: str) -> str:
    # content + '<tool_calls>' + '[' + ('{"name": "' + name + '", ' + '"arguments": ' + arguments|tojson + '}')
    # joined by ', ' + ']' + '</tool_calls>'
    items = ['{"name": "' + name + '", "arguments": ' + tojson(args) + "}" for name, args in calls]
    return content + "<tool_calls>[" + ", ".join(items) + "]</tool_calls>"


def _hy_v3(calls: Sequence[Call], content: str) -> str:
    body = "".join("<tool_call>" + name + "<tool_sep>\n"
                   + "".join("<arg_key>" + k + "</arg_key>\n<arg_value>" + _xml_value(v) + "</arg_value>\n"
                             for k, v in args.items()) + "</tool_call>\n" for name, args in calls)
    return content + "<tool_calls>\n" + body + "</tool_calls>"


def _hy_v4(calls: Sequence[Call], content: str) -> str:
    body = "".join("<tool_call>" + name + "".join("<arg_key>" + k + "</arg_key><arg_value>" + _xml_value(v)
                                                   + "</arg_value>" for k, v in args.items()) + "</tool_call>"
                   for name, args in calls)
    return content + "<tool_calls>" + body + "</tool_calls>"


def _step3(calls: Sequence[Call], content: str) -> str:
    entries = ['<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="' + name + '">\n'
               + "".join('<steptml:parameter name="' + k + '">' + _xml_value(v) + "</steptml:parameter>\n"
                         for k, v in args.items()) + "</steptml:invoke><｜tool_call_end｜>" for name, args in calls]
    return content + "<｜tool_calls_begin｜>\n" + "\n".join(entries) + "\n<｜tool_calls_end｜>"


def _minicpm5(calls: Sequence[Call], content: str) -> str:
    # '<function name="' + name + '">' + ('<param name="' + k + '">' + value + '</param>')* + '</function>', the
    # calls on lines of their own after the content
    out = content + ("\n" if content else "")
    return out + "\n".join('<function name="' + name + '">' + "".join('<param name="' + k + '">' + _xml_value(v)
                                                                        + "</param>" for k, v in args.items())
                           + "</function>" for name, args in calls)


def _step3p5(calls: Sequence[Call], content: str) -> str:
    # Step-3.5: Qwen3-Coder's layout, the first call right after the content, later ones after '\n'
    out = content
    for i, (name, args) in enumerate(calls):
        out += "\n" if i else ""
        body = "".join("<parameter=" + k + ">\n" + _xml_value(v) + "\n</parameter>\n" for k, v in args.items())
        out += "<tool_call>\n<function=" + name + ">\n" + body + "</function>\n</tool_call>"
    return out
# xml_b: DeepSeek V4.1, dots, Ripple, PLaMo 3


def _deepseek_v41(calls: Sequence[Call], content: str) -> str:
    # DeepSeek-V4.1 encoding/encoding.py as xgrammar 0.2.9's builtin tag deepseek_v4_1 and vLLM 0.34's
    # parser/deepseek_v41.py spell it: V4's encoder (_dsml above) with a space after every ｜DSML｜ and the block
    # named 'calls': '\n\n<｜DSML｜ calls>\n' + invokes joined by '\n' + '\n</｜DSML｜ calls>'
    return _dsml(" calls")(calls, content).replace("<｜DSML｜invoke", "<｜DSML｜ invoke").replace(
        "</｜DSML｜invoke", "</｜DSML｜ invoke").replace("<｜DSML｜parameter", "<｜DSML｜ parameter").replace(
        "</｜DSML｜parameter", "</｜DSML｜ parameter")


def _dots(calls: Sequence[Call], content: str) -> str:
    # dots (vLLM 0.34 tool_parsers/dots_tool_parser.py, its canonical body): '<dots_function_call>\n', per call
    # '<invoke name="N">\n' + per argument '<parameter name="k">' + value + '</parameter>\n' + '</invoke>\n',
    # then '</dots_function_call>'; a str value raw, any other as JSON (the parser json-loads non-strings)
    out = content + "<dots_function_call>\n"
    for name, args in calls:
        out += f'<invoke name="{name}">\n'
        out += "".join(f'<parameter name="{k}">{_glm_value(v)}</parameter>\n' for k, v in args.items())
        out += "</invoke>\n"
    return out + "</dots_function_call>"


def _ripple(calls: Sequence[Call], content: str) -> str:
    # Ripple (vLLM 0.34 parser/ripple.py: 'The chat template frames each marker with newlines ...
    # "\n<tool_call>\n...\n</tool_call>"', the body {"name": ..., "arguments": {...}}): per call
    # '\n<tool_call>\n{"name": "' + name + '", "arguments": ' + (arguments | tojson) + '}\n</tool_call>'
    return content + "".join('\n<tool_call>\n{"name": "' + n + '", "arguments": ' + tojson(a) + "}\n</tool_call>"
                             for n, a in calls)


def _plamo3(calls: Sequence[Call], content: str) -> str:
    # PLaMo 3 (vLLM 0.34 structural_tag_registry.get_plamo3_structural_tag and parser/plamo3.py): one
    # '<|plamo:begin_tool_requests:plamo|>' block, per call '<|plamo:begin_tool_request:plamo|>'
    # '<|plamo:begin_tool_name:plamo|>' + name + '<|plamo:end_tool_name:plamo|>' '<|plamo:begin_tool_arguments:plamo|>'
    # '<|plamo:constrain|>json<|plamo:msg|>' + (arguments | tojson) + '<|plamo:end_tool_arguments:plamo|>'
    # '<|plamo:end_tool_request:plamo|>', nothing between, then '<|plamo:end_tool_requests:plamo|>'
    body = "".join("<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>" + n
                   + "<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json"
                   "<|plamo:msg|>" + tojson(a) + "<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>"
                   for n, a in calls)
    return content + "<|plamo:begin_tool_requests:plamo|>" + body + "<|plamo:end_tool_requests:plamo|>"


def _k2_horizon(calls: Sequence[Call], content: str) -> str:
    # K2 Horizon, tool_call_format "xml" (vLLM 0.34 tool_parsers/k2_horizon_tool_parser.py and the group its
    # tests build): content + '<ifm|tool_calls>' + calls joined by '\n' + '</ifm|tool_calls>', a call
    # '<ifm|tool_call>' + name + per argument '<ifm|arg_key>k</ifm|arg_key><ifm|arg_value>v</ifm|arg_value>' +
    # '</ifm|tool_call>'; a str value raw, any other as JSON (the parser coerces the text by the schema)
    body = "\n".join("<ifm|tool_call>" + n + "".join(f"<ifm|arg_key>{k}</ifm|arg_key><ifm|arg_value>{_glm_value(v)}"
                                                     "</ifm|arg_value>" for k, v in a.items()) + "</ifm|tool_call>"
                     for n, a in calls)
    return content + "<ifm|tool_calls>" + body + "</ifm|tool_calls>"


def _cohere_command(calls: Sequence[Call], content: str) -> str:
    # Cohere Command A, as cohere_melody 0.15's own renderers write an assistant turn with tool calls (render_cmd3 and
    # render_cmd4 alike): '<|START_ACTION|>[\n    ' + the calls joined by ',\n    ', each
    # '{"tool_call_id": "' + id + '", "tool_name": "' + name + '", "parameters": ' + parameters + '}', + '\n]<|END_ACTION|>'
    # (ids "0", "1", ... here; the parameters as the JSON text the caller gave, tojson's spacing)
    if content:
        raise ValueError("Command writes the text of a tool-calling turn as its thinking (the tool plan), not content")
    body = ",\n    ".join('{"tool_call_id": "' + str(i) + '", "tool_name": "' + n + '", "parameters": ' + tojson(a) + "}"
                          for i, (n, a) in enumerate(calls))
    return "<|START_ACTION|>[\n    " + body + "\n]<|END_ACTION|>"
# the pythonic group: Llama 3.2 / Llama 4 pythonic, Olmo 3, LFM2, FunctionGemma, GigaChat 3, Apertus


def _py_literal(v: Any) -> str:
    # Python's repr at every level (a float as JSON writes it: repr's 1e-07 is 1e-07 in both)
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k!r}: {_py_literal(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_py_literal(x) for x in v) + "]"
    if isinstance(v, float):
        return json.dumps(v)
    return repr(v)


def _pythonic(calls: Sequence[Call], content: str) -> str:
    # Llama 3.2 pythonic template's instruction: 'Respond in the format [func_name1(params_name1=params_value1,
    # params_name2=params_value2...), func_name2(params)]', values as Python literals (vLLM's
    # tests/tool_parsers/test_pythonic_tool_parser.py). The template's own replay of a past call writes
    # '"%s" | format(value)', a string unquoted (city=Paris), which no pythonic parser reads: not rendered.
    if content:
        raise ValueError("a pythonic call list is the whole output (vLLM reads it only then)")
    return "[" + ", ".join(n + "(" + ", ".join(f"{k}={_py_literal(v)}" for k, v in a.items()) + ")"
                           for n, a in calls) + "]"


def _llama4_pythonic(calls: Sequence[Call], content: str) -> str:
    # Llama 4 pythonic template: '[' + name + '(' + param + '="' + ("%s" | format(value)) + '"' joined ', ' + ')'
    # joined ', ' + ']'; its system prompt: 'Use exact format: [func_name1(param1=value1, param2=value2), ...]'
    # with get_weather(location="Vancouver"). A string is written in double quotes as it is; a value the
    # template would quote into a string ("%s" of 3 is "3") is written as the Python literal its prompt asks for.
    if content:
        raise ValueError("Llama 4's pythonic calls are the whole output")
    def value(v: Any) -> str:
        # as it is, also where the text is then no Python literal (a '"' in it): conformance skips those
        return '"' + v + '"' if isinstance(v, str) else _py_literal(v)
    return "[" + ", ".join(n + "(" + ", ".join(f"{k}={value(v)}" for k, v in a.items()) + ")" for n, a in calls) + "]"


def _olmo3(calls: Sequence[Call], content: str) -> str:
    # vllm-project/vllm examples/tool_chat_template_olmo3.jinja: '<function_calls>\n' + per call name + '(' +
    # key + '=' + ("'" + value + "'" | 'null' | 'true' | 'false' | value | tojson) joined ', ' + ')' joined '\n'
    # + '\n</function_calls>'; a tool-call turn writes no content
    if content:
        raise ValueError("Olmo 3's template writes a tool-call turn without its content")
    def value(v: Any) -> str:
        if isinstance(v, str):
            return "'" + v + "'"  # as it is, also where the text is then no Python literal (a "'" in it)
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "true" if v else "false"
        return tojson(v)
    return "<function_calls>\n" + "\n".join(n + "(" + ", ".join(f"{k}={value(v)}" for k, v in a.items()) + ")"
                                            for n, a in calls) + "\n</function_calls>"


def _lfm2(calls: Sequence[Call], content: str) -> str:
    # LiquidAI LFM2.5-1.2B-Instruct chat template (the assistant's text as it is) and its documented tool call:
    # '<|tool_call_start|>[get_candidate_status(candidate_id="12345")]<|tool_call_end|>' + the content after it;
    # strings in double quotes (JSON's escapes, which Python reads alike), other values as Python literals
    def value(v: Any) -> str:
        return tojson(v) if isinstance(v, str) else _py_literal(v)
    return "<|tool_call_start|>[" + ", ".join(n + "(" + ", ".join(f"{k}={value(v)}" for k, v in a.items()) + ")"
                                              for n, a in calls) + "]<|tool_call_end|>" + content


def _functiongemma_argument(v: Any) -> str:
    # as Gemma 4's format_argument with '<escape>' for the string delimiter: vLLM's functiongemma parser
    # ('The chat template writes strings as <escape>text<escape> and everything else bare: true/false,
    # numbers, [item,...] and {key:value,...} with bare keys')
    if isinstance(v, str):
        return "<escape>" + v + "<escape>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_functiongemma_argument(x)}" for k, x in _dictsort(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_functiongemma_argument(x) for x in v) + "]"
    return "null" if v is None else jinja_str(v)


def _functiongemma(calls: Sequence[Call], content: str) -> str:
    # FunctionGemma template: '<start_function_call>call:' + name + '{' + key + ':' + value for key, value in
    # arguments | dictsort, joined ',' + '}<end_function_call>'
    out = "".join("<start_function_call>call:" + n + "{" + ",".join(f"{k}:{_functiongemma_argument(v)}"
                                                                     for k, v in _dictsort(a)) + "}<end_function_call>"
                  for n, a in calls)
    return content + out


def _gigachat3(calls: Sequence[Call], content: str) -> str:
    # GigaChat 3.1: '<|function_call|>' + {"name": ..., "arguments": {...}} (json.dumps), one call per turn
    # (vllm-project/vllm tests/tool_parsers/test_gigachat3_tool_parser.py, TOOL_HEADER_GIGACHAT31)
    if len(calls) != 1:
        raise ValueError("GigaChat writes one function call per turn")
    name, args = calls[0]
    return content + "<|function_call|>" + tojson({"name": name, "arguments": args})


def _apertus(calls: Sequence[Call], content: str) -> str:
    # vllm-project/vllm examples/tool_chat_template_apertus.jinja: '<|tools_prefix|>' + '[' + '{"' + name + '": '
    # + arguments (the caller's JSON text) + '}' joined ', ' + ']' + '<|tools_suffix|>', after the content
    return content + "<|tools_prefix|>[" + ", ".join('{"' + n + '": ' + tojson(a) + "}" for n, a in calls) + \
        "]<|tools_suffix|>"


def _sorted_json(v: Any) -> Any:
    """Keys sorted at every level (``sorted``, as vLLM's Inkling encoder's ``_sort_json``)."""
    if isinstance(v, dict):
        return {k: _sorted_json(v[k]) for k in sorted(v)}
    if isinstance(v, list):
        return [_sorted_json(x) for x in v]
    return v


def _inkling(calls: Sequence[Call], content: str) -> str:
    # vllm-project/vllm 0.34 vllm/renderers/inkling_encoding.py (render_inkling_messages): each block of the
    # assistant turn is '<|message_model|>' + author + kind + text + '<|end_message|>' (the generation prompt
    # ends with the first '<|message_model|>'); the content as a '<|content_text|>' block, then per call the
    # author NAME and '<|content_invoke_tool_json|>' + '{"name":' + json.dumps(name) + ',"args":' + the arguments
    # as _canonical_json writes them (keys sorted at every level, separators (",", ":"), ensure_ascii=False) + '}'
    out = "<|message_model|><|content_text|>" + content + "<|end_message|>" if content else ""
    for name, args in calls:
        payload = ('{"name":' + json.dumps(name, ensure_ascii=False) + ',"args":'
                   + json.dumps(_sorted_json(args), ensure_ascii=False, separators=(",", ":")) + "}")
        out += "<|message_model|>" + name + "<|content_invoke_tool_json|>" + payload + "<|end_message|>"
    return out


# --------------------------------------------------------------------------------------------------
# Kimi K3 (no Jinja template: the checkpoint's Python encoder)


def _xtml_attr(v: Any) -> str:
    # encoding_k3._escape_attr_value: str(value) with '&' -> '&amp;', then '"' -> '&quot;'
    return str(v).replace("&", "&amp;").replace('"', "&quot;")


def _xtml_type(v: Any) -> str:
    # encoding_k3._xtml_type: bool 'boolean', None 'null', int / float 'number', str 'string', dict 'object',
    # anything else 'array'
    if isinstance(v, bool):
        return "boolean"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return "number"
    return "string" if isinstance(v, str) else "object" if isinstance(v, dict) else "array"


def _kimi_k3(calls: Sequence[Call], content: str) -> str:
    # encoding_k3._render_assistant_segments after the think channel: '<|open|>response<|sep|>' + content +
    # '<|close|>response<|sep|>', then '<|open|>tools<|sep|>', per call (index from 1)
    # '<|open|>call tool="' + name + '" index="' + index + '"<|sep|>', per argument (the dict's order)
    # '<|open|>argument key="' + key + '" type="' + _xtml_type(v) + '"<|sep|>' + (v if str else
    # json.dumps(v, ensure_ascii=False)) + '<|close|>argument<|sep|>', '<|close|>call<|sep|>', nothing between
    # calls, '<|close|>tools<|sep|>'; build_chat_segments then closes the message: '<|close|>message<|sep|>'
    # (the model writes it before its stop token <|end_of_msg|>). Attribute values escaped (_escape_attr_value).
    out = "<|open|>response<|sep|>" + content + "<|close|>response<|sep|><|open|>tools<|sep|>"
    for index, (name, args) in enumerate(calls, start=1):
        out += f'<|open|>call tool="{_xtml_attr(name)}" index="{index}"<|sep|>'
        for k, v in args.items():
            value = v if isinstance(v, str) else tojson(v)
            out += (f'<|open|>argument key="{_xtml_attr(k)}" type="{_xtml_type(v)}"<|sep|>{value}'
                    "<|close|>argument<|sep|>")
        out += "<|close|>call<|sep|>"
    return out + "<|close|>tools<|sep|><|close|>message<|sep|>"


# --------------------------------------------------------------------------------------------------
# the table

_HF = "https://huggingface.co/"
# --------------------------------------------------------------------------------------------------
# SGLang-only names: GigaChat 3.5 (GCML)


def _gigachat35(calls: Sequence[Call], content: str) -> str:
    # GigaChat 3.5's chat template (render_gcml_parameter / render_gcml_invoke / render_gcml_tool_calls): a
    # parameter '<｜GCML｜parameter name="K" string="true">' + V + '</｜GCML｜parameter>' for a str V, string="false"
    # with V | tojson(ensure_ascii=False) for any other; an invoke '<｜GCML｜invoke name="N">\n' + the parameters
    # joined by '\n' + '\n' (only when there are arguments) + '</｜GCML｜invoke>'; the block
    # '<｜GCML｜tool_calls>\n' + the invokes joined by '\n' + '\n</｜GCML｜tool_calls>'. The assistant's parts
    # (<think>...</think>, the content, the block) are joined by '\n\n'.
    invokes = []
    for name, args in calls:
        params = "\n".join(f'<｜GCML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                           f'{v if isinstance(v, str) else tojson(v)}</｜GCML｜parameter>' for k, v in args.items())
        invokes.append(f'<｜GCML｜invoke name="{name}">\n' + (params + "\n" if args else "") + "</｜GCML｜invoke>")
    block = "<｜GCML｜tool_calls>\n" + "\n".join(invokes) + "\n</｜GCML｜tool_calls>"
    return content + "\n\n" + block if content else block


def _spark25(calls: Sequence[Call], content: str) -> str:
    # Spark-X2.5: its checkpoint's chat_template.jinja has no public copy here; the call as the model's own vLLM
    # plugin documents it (XHToken/Spark-plugin README, "Tool-call format") and SGLang's spark25 detector docstring
    # spells it: '<tool_call>' + name + '\n', per argument '<arg_key>k</arg_key><arg_value>v</arg_value>\n' (a str
    # raw, a number as written: 'days' -> 3), then '</tool_call>'; calls and content one a line, as GLM-4.5's
    out = content
    for name, args in calls:
        out += "\n" if out else ""
        out += "<tool_call>" + name + "\n"
        out += "".join(f"<arg_key>{k}</arg_key><arg_value>{_glm_value(v)}</arg_value>\n" for k, v in args.items())
        out += "</tool_call>"
    return out


RENDERERS: dict[str, Renderer] = {r.name: r for r in [
    Renderer("hermes", "hermes", _HF + "Qwen/Qwen3-8B (tokenizer_config.json chat_template); "
             "vllm-project/vllm examples/tool_chat_template_hermes.jinja", _hermes),
    Renderer("qwen3_coder", "qwen3_coder", "vllm-project/vllm examples/tool_chat_template_qwen3coder.jinja "
             "(Qwen3-Coder's template)", _qwen3_coder,
             notes="objects and arrays as JSON, other non-strings with Jinja's | string (True, False, None)"),
    Renderer("qwen3_5", "qwen3_5", _HF + "Qwen/Qwen3.5 chat_template.jinja (the rule quoted in "
             "vllm-project/vllm issue #38885 and PR #38996: 'Qwen3.5's chat template uses | string for scalar "
             "tool-call arguments')", _qwen3_5,
             notes="Qwen3.5 / 3.6: the same value rule as Qwen3-Coder's, its own whitespace between calls"),
    Renderer("qwen3_6", "qwen3_6", _HF + "Qwen/Qwen3.6 chat_template.jinja (every non-string argument with "
             "tojson, as quoted in the public diff of the Qwen3.6-27B and Qwen3.5-122B templates)", _qwen3_6,
             notes="Qwen3.6: JSON for every non-string value, Qwen3.5's whitespace between calls"),
    Renderer("llama3_json", "llama3_json", _HF + "meta-llama/Llama-3.1-8B-Instruct chat_template (custom "
             "tools, JSON); vllm-project/vllm examples/tool_chat_template_llama3.1_json.jinja", _llama3_json,
             parallel=False),
    Renderer("mistral", "mistral", "mistral-common InstructTokenizerV13._encode_tool_calls_in_assistant_message "
             "(Magistral Small 2509, tokenizer v13): the encoder itself", _mistral),
    Renderer("deepseek_v3", "deepseek_v3", _HF + "deepseek-ai/DeepSeek-V3-0324 chat_template; "
             "vllm-project/vllm examples/tool_chat_template_deepseekv3.jinja", _deepseek_v3),
    Renderer("deepseek_v31", "deepseek_v31", _HF + "deepseek-ai/DeepSeek-V3.1 chat_template; ggml-org/llama.cpp "
             "models/templates/deepseek-ai-DeepSeek-V3.1.jinja", _deepseek_v31),
    Renderer("deepseek_v32", "deepseek_v32", _HF + "deepseek-ai/DeepSeek-V3.2 encoding/encoding_dsv32.py",
             _dsml("function_calls")),
    Renderer("deepseek_v4", "deepseek_v4", _HF + "deepseek-ai/DeepSeek-V4 encoding/encoding_dsv4.py",
             _dsml("tool_calls")),
    Renderer("kimi_k2", "kimi_k2", _HF + "moonshotai/Kimi-K2-Thinking chat_template.jinja (render_toolcalls); "
             "ggml-org/llama.cpp models/templates/moonshotai-Kimi-K2-Thinking.jinja", _kimi_k2),
    Renderer("glm45", "glm45", _HF + "zai-org/GLM-4.6 chat_template.jinja; ggml-org/llama.cpp "
             "models/templates/GLM-4.6.jinja", _glm45),
    Renderer("glm47", "glm47", _HF + "zai-org/GLM-4.7 chat_template.jinja ('<tool_call>' + tc.name -}} ... "
             "<arg_key>{{ k }}</arg_key><arg_value>...</arg_value>{% endfor %}</tool_call>)", _glm47),
    Renderer("minimax_m2", "minimax_m2", _HF + "MiniMaxAI/MiniMax-M2 chat_template.jinja; ggml-org/llama.cpp "
             "models/templates/unsloth-MiniMax-M2.jinja", _minimax_m2),
    Renderer("minimax_m3", "minimax_m3", "MiniMax's M3 text parser (M3TextParser.stringify_function_calls, the "
             "serializer of a call beside vLLM's parser code); the framing of xgrammar 0.2.9's minimax_m3 tag and "
             "vllm-project/vllm tests/tool_parsers/test_minimax_m3_tool_parser.py", _minimax_m3,
             notes="null values left out (a null member, a null item); no separator between elements"),
    Renderer("gemma4", "gemma4", "vllm-project/vllm examples/tool_chat_template_gemma4.jinja (Gemma 4's "
             "template: format_argument, dictsort)", _gemma4,
             notes="keys sorted at every level; null written as Jinja writes None"),
    Renderer("hf_gemma4", "hf", "Gemma 4's response_template (its tokenizer_config.json, thinkgate/testing/vocabularies.py) read by "
             "the template-reading format; the calls as Gemma 4's template writes them (above)", _gemma4,
             notes="the format is built from the template's tool_calls field: Gemma 4's syntax"),
    Renderer("openai", "openai", "openai/harmony (the harmony format guide and its renderer)", _harmony,
             parallel=False),
    Renderer("gpt_oss_template", "openai", _HF + "openai/gpt-oss-20b chat_template.jinja", _gpt_oss_template,
             parallel=False, notes="the recipient in the role header, 'commentary json' without <|constrain|>"),
    # -- json_lists
    Renderer("phi4_mini_json", "phi4_mini_json", "vllm-project/vllm examples/tool_chat_template_phi4_mini.jinja "
             "(the system prompt's instruction)", _phi4_mini_json),
    Renderer("xlam", "xlam", "vllm-project/vllm examples/tool_chat_template_xlam_qwen.jinja", _xlam),
    Renderer("jamba", "jamba", "vllm-project/vllm tests/tool_parsers/test_jamba_tool_parser.py (model outputs; "
             "no Jamba template found)", _jamba),
    Renderer("granite", "granite", _HF + "ibm-granite/granite-3.0-8b-instruct chat_template (tojson(indent=4))",
             _granite),
    Renderer("granite_20b_fc", "granite_20b_fc", "vllm-project/vllm examples/tool_chat_template_granite_20b_fc.jinja",
             _granite_20b_fc),
    Renderer("internlm", "internlm", "vllm-project/vllm examples/tool_chat_template_internlm2_tool.jinja", _internlm),
    # -- xml_a
    Renderer("seed_oss", "seed_oss", "ggml-org/llama.cpp common/chat Seed-OSS grammar ('<seed:tool_call>\\n<function=' "
             "... '</parameter>\\n' ... '</function>' '</seed:tool_call>'); vllm-project/vllm "
             "tests/tool_parsers/test_seed_oss_tool_parser.py outputs", _seed_oss,
             notes="the template itself was not available: non-string values as tojson is an assumption"),
    Renderer("zaya", "zaya", "vllm 0.34 vllm/parser/zaya.py (Qwen3 XML inside <zyphra_tool_call>); the "
             "<zyphra_tool_call>\\n<function=...>\\n<parameter=...>\\n value \\n</parameter> layout of public "
             "ZAYA1 parser tests", _zaya, notes="the template itself was not available"),
    Renderer("mimo", "mimo", _HF + "XiaomiMiMo/MiMo-V2.6-Pro-RL chat_template.jinja as quoted in xgrammar "
             "builtin_structural_tag.get_mimo_structural_tag", _mimo),
    Renderer("longcat", "longcat", "vllm 0.34 structural_tag_registry get_longcat_structural_tag (hermes layout "
             "in <longcat_tool_call>)", _longcat),
    Renderer("hunyuan_a13b", "hunyuan_a13b", "vllm-project/vllm examples/tool_chat_template_hunyuan_a13b.jinja",
             _hunyuan_a13b),
    Renderer("hy_v3", "hy_v3", "vllm-project/vllm tests/tool_parsers/test_hy_v3_tool_parser.py (Hy3-preview "
             "outputs, the newline layout)", _hy_v3),
    Renderer("hy_v4", "hy_v4", "vllm 0.34 structural_tag_registry get_hy_v4_structural_tag (no separators)",
             _hy_v4),
    Renderer("step3", "step3", "sglang function_call/step3_detector.py Step3Detector docstring (the format "
             "structure)", _step3),
    Renderer("minicpm5", "minicpm5", "vllm-project/vllm tests/tool_parsers/test_minicpm5xml_tool_parser.py "
             "(MiniCPM5 outputs: the calls in plain text, each on a line)", _minicpm5,
             notes="the template itself was not available"),
    Renderer("step3p5", "qwen3_6", "vllm-project/vllm tests/tool_parsers/test_step3p5_tool_parser.py "
             "(Step-3.5-Flash outputs)", _step3p5, notes="vLLM runs its Qwen3 XML engine for step3p5 and step5"),
    # -- xml_b
    Renderer("deepseek_v41", "deepseek_v41", _HF + "deepseek-ai/DeepSeek-V4.1-Flash encoding/encoding.py (as "
             "xgrammar 0.2.9's builtin tag deepseek_v4_1 spells it)", _deepseek_v41),
    Renderer("dots", "dots", "vllm-project/vllm 0.34 vllm/tool_parsers/dots_tool_parser.py (the canonical body "
             "its docstring shows)", _dots),
    Renderer("ripple", "ripple", "vllm-project/vllm 0.34 vllm/parser/ripple.py (the template's framing its "
             "docstring quotes)", _ripple),
    Renderer("plamo3", "plamo3", "vllm-project/vllm 0.34 vllm/tool_parsers/structural_tag_registry.py "
             "(get_plamo3_structural_tag) and vllm/parser/plamo3.py", _plamo3),
    Renderer("k2_horizon", "k2_horizon", "vllm-project/vllm 0.34 vllm/tool_parsers/k2_horizon_tool_parser.py and "
             "tests/tool_parsers/test_k2_horizon_tool_parser.py (_group, _xml_call)", _k2_horizon),
    Renderer("cohere_command3", "cohere_command3", "cohere_melody 0.15.3 (PyPI) render_cmd3 / render_cmd4, the "
             "renderers of vLLM's cohere_command3 / cohere_command4 presets", _cohere_command),
    # -- the pythonic group
    Renderer("pythonic", "pythonic", _HF + "meta-llama/Llama-3.2-3B-Instruct; vllm-project/vllm "
             "examples/tool_chat_template_llama3.2_pythonic.jinja (its instruction); vLLM's pythonic tests", _pythonic,
             notes="Python literals (repr); the template's replay writes strings unquoted, which nothing reads"),
    Renderer("llama4_pythonic", "llama4_pythonic", "vllm-project/vllm examples/tool_chat_template_llama4_pythonic.jinja",
             _llama4_pythonic, notes='strings in double quotes as written; non-strings as Python literals'),
    Renderer("olmo3", "olmo3", "vllm-project/vllm examples/tool_chat_template_olmo3.jinja", _olmo3),
    Renderer("lfm2", "lfm2", _HF + "LiquidAI/LFM2.5-1.2B-Instruct (chat template and its tool-use example)", _lfm2),
    Renderer("functiongemma", "functiongemma", _HF + "google/functiongemma-270m-it chat template (call:NAME{...}, "
             "dictsort, <escape>); vLLM's functiongemma parser docstring", _functiongemma),
    Renderer("gigachat3", "gigachat3", "vllm-project/vllm tests/tool_parsers/test_gigachat3_tool_parser.py "
             "(GigaChat 3.1 output)", _gigachat3, parallel=False),
    Renderer("apertus", "apertus", "vllm-project/vllm examples/tool_chat_template_apertus.jinja", _apertus),
    Renderer("inkling", "inkling", "vllm-project/vllm 0.34 vllm/renderers/inkling_encoding.py (Inkling's renderer: "
             "render_inkling_messages, _tool_call_json, _canonical_json)", _inkling,
             notes="arguments with keys sorted at every level, compact"),
    # -- Kimi K3
    Renderer("kimi_k3", "kimi_k3", _HF + "moonshotai/Kimi-K3 encoding_k3.py (_render_assistant_segments, _xtml_type, "
             "_xtml_value, _escape_attr_value; K3 ships no Jinja template); vllm-project/vllm 0.34 "
             "structural_tag_registry.get_kimi_k3_structural_tag", _kimi_k3,
             notes="the response channel (with its opening: thinking on) then the tools channel; the message's close"),
    # -- IQuest-Q1 (SGLang's iquest_q1)
    Renderer("iquest_q1", "iquest_q1", "a public IQuest runtime's render tests ('<iquest_tool_call>lookup<arg_key>"
             "count</arg_key><arg_value>{number}</arg_value></iquest_tool_call>'); SGLang 0.5.23 "
             "function_call/iquest_q1_detector.py", _iquest_q1),
    # -- muse
    Renderer("muse", "muse", "Muse's chat template as a public Muse runtime's renderer golden tests quote it (tool "
             "instruction, '<|start|>assistant to=N<|message|><atem:function_calls>' history, calls joined by "
             "'<|eom|>'); vllm 0.34 vllm/tool_parsers/muse_tool_parser.py docstring", _muse),
    Renderer("muse_glimmer", "muse_glimmer", "the same template (Muse Glimmer writes Spark's call messages; its "
             "profile reads recipients differently)", _muse),
    # -- SGLang-only names
    Renderer("gigachat35", "gigachat35", "ggml-org/llama.cpp models/templates/GigaChat3.5.jinja (render_gcml_parameter, "
             "render_gcml_invoke, render_gcml_tool_calls; the assistant's parts joined by '\\n\\n')", _gigachat35),
    Renderer("spark25", "spark25", "XHToken/Spark-plugin README ('Tool-call format') and sglang 0.5.23 "
             "srt/function_call/spark25_detector.py (the wire format in its docstring); the checkpoint's "
             "chat_template.jinja has no public copy", _spark25,
             notes="non-string values as JSON, as GLM-4.5's template writes them (the template itself is not public)"),
]}


def render(name: str, calls: Sequence[Call], content: str = "") -> str:
    """The assistant's text (after its thinking, before its stop token) with ``calls`` as the template of
    renderer ``name`` writes them. ``ValueError`` for an unknown name or calls the template cannot write."""
    r = RENDERERS.get(name)
    if r is None:
        raise ValueError(f"unknown renderer {name!r}; known: {', '.join(RENDERERS)}")
    if not calls:
        raise ValueError("no calls to render")
    return r.write(list(calls), content)


def render_ids(name: str, calls: Sequence[Call], vocabulary, content: str = "") -> list[int]:
    """:func:`render` as token ids of ``vocabulary``: for ``mistral``, mistral-common's own ids (checked
    to decode to the same text with ``vocabulary``); otherwise ``vocabulary.encode`` of the text."""
    text = render(name, calls, content)
    if name == "mistral" and not content:
        ids = mistral_ids(calls)
        if vocabulary.decode(ids) != text:
            raise ValueError(f"{vocabulary.name} decodes mistral-common's ids differently: {vocabulary.decode(ids)!r}")
        return ids
    return vocabulary.encode(text)
