"""Per vLLM tool-parser name: vLLM 0.34's parser and thinkgate's ``thinkgate_<name>`` on the same outputs
(``tool_differential.py``: the cases and how both are run), whole, streamed with token-id deltas and
streamed with text-only deltas. Prints, per name, the agree / differ counts of each path with the kind of
every difference; a difference no kind explains fails. The kinds (the documented differences are in
``docs/vllm_tool_differences.md``):

- ``whitespace``: the same calls, content equal but for whitespace (thinkgate strips the framing newlines);
- ``cut-call`` (choice): a call cut short (max_tokens): vLLM returns it with partial arguments, thinkgate
  keeps its text as content (a stream cannot take back a call it sent; the finish_reason says ``length``);
- ``arguments-not-an-object`` (choice): ``"arguments": "hello"``: vLLM returns a call whose arguments are
  a JSON string; thinkgate returns calls with object arguments only, the text stays content;
- ``vllm-misses-calls`` (vLLM's bug): vLLM reads no call in a variation models write (compact, no newlines,
  no separator, keys in another order, arguments as a JSON string, an undeclared tool, text after the call:
  GigaChat's greedy JSON match);
- ``vllm-stream-misses-calls`` / ``vllm-stream-drops-content`` (vLLM's bug): its stream reads less than its
  own whole path; ``vllm-stream-leaks-markers`` (vLLM 0.34's bug, fixed later upstream: its own later test
  ``test_streaming_content_stops_at_message_close`` asserts thinkgate's answer): Kimi K3's stream sends the
  ``<|close|>message<|sep|>`` its whole path strips;
- ``vllm-drops-content`` (vLLM's bug): vLLM drops text the model wrote beside its calls;
  ``vllm-drops-text-after-calls`` the text written after them; ``vllm-drops-unread-block`` the text of a
  block it could not read (thinkgate keeps it as content: Inkling, the body of a call block that is no call);
  ``vllm-strips-markers`` the marker tokens of it;
- ``unterminated-call`` (choice): the output ends inside a call (no closing marker): vLLM returns it,
  thinkgate keeps its text as content (it cannot tell a finished call from one cut by max_tokens);
- ``vllm-double-encodes-string-arguments`` (vLLM 0.34's bug, fixed in later vLLM): ``"arguments"`` given as
  a JSON string comes back as that string, JSON-encoded again; thinkgate returns the object it holds;
- ``vllm-values-as-strings`` (vLLM's bug): vLLM leaves values as the text written (``"3"``, ``"true"``,
  ``"None"``, an object's JSON text) where the schema or the syntax says a number, boolean, null, object;
- ``vllm-empty-arguments`` (vLLM's bug): vLLM's stream sends a call's name and no arguments;
- ``vllm-drops-arguments`` (vLLM's bug): an Inkling body that holds its arguments under ``arguments`` or
  ``parameters`` (keys vLLM's own ``_extract_args_value`` looks under): vLLM's streaming converter carves
  ``args`` only and returns the call with ``{}``; thinkgate returns the arguments written;
- ``vllm-text-in-arguments`` (vLLM's bug): vLLM's stream appends the text after a call to its arguments;
- ``vllm-cuts-at-bracket`` (vLLM's bug): vLLM reads a JSON list of calls up to its first ``]``, one inside
  the arguments (phi4_mini_json's non-greedy ``functools\\[(.*?)\\]``), and finds no call;
- ``vllm-crash``: vLLM's parser raised (vLLM's ``cohere_command3`` / ``cohere_command4`` tool-parser classes are
  shims of its composed Cohere ``Parser``, which ``test_vllm_tool_parity.py`` compares through the serving path);
- ``undeclared-values-as-text`` (choice): a tool the request does not declare has no schema: thinkgate's reader
  for the name's syntax keeps a value's text (``"3"``), as vLLM's parser of that syntax does (``poolside_v1``
  is GLM-4.5's syntax; vLLM's own poolside parser reads such a value as JSON);
- ``thinkgate-misses-calls`` (thinkgate's gap): a layout one of vLLM's own tests feeds the parser that thinkgate
  does not read (``tool_differential.GAPS``; none now: ``deepseek_v41``'s block under V4's name in V4.1's
  spacing, ``<｜DSML｜ tool_calls>``, is read);
- ``repeated-element`` (choice, ``minimax_m3``): an object's element written twice: vLLM collects the values into
  a list, thinkgate keeps the key twice and the call stays content (a key written twice refuses a call in every
  format);
- ``malformed-block`` (choice, ``minimax_m3``): a block whose arguments or calls do not read (text beside child
  elements, an unterminated element, stray text, text between two calls): vLLM keeps what reads before the fault
  (``$text`` for text beside elements) and drops the rest; thinkgate keeps the block as content;
- ``vllm-stops-at-a-mismatched-close`` (vLLM's limit, ``minimax_m3``): a closing tag that spells another name
  closes its element for thinkgate (the grammar cannot tie an undeclared element's closing name); vLLM stops
  reading the arguments there;
- ``vllm-items-as-object`` (vLLM's limit, ``minimax_m3``): the ``<item>`` elements of a list whose schema does not
  say array (no schema, an object of any keys): vLLM reads ``{"item": [...]}``, thinkgate the list the template
  wrote.
"""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
import tool_differential as td
from support import FAMILIES, vocab
from template_render import RENDERERS, render
from tool_serving import tokenizer

from thinkgate.structured_output.tools import list_tool_formats

VLLM_NAMES = sorted(__import__("vllm.tool_parsers", fromlist=["x"]).ToolParserManager.list_registered())


def _fn(name: str, props: dict) -> dict:
    return {"type": "function", "function": {"name": name, "parameters": {"type": "object", "properties": props}}}


TOOLS = (
    _fn("get_weather", {"city": {"type": "string"}, "days": {"type": "integer"}}),
    _fn("search", {"q": {"type": "string"}, "filters": {"type": "object"}}),
    _fn("ping", {}),
    _fn("final_answer", {"trigger": {"type": "boolean"}}),
    _fn("get_current_temperature", {"location": {"type": "string"}, "unit": {"type": "string"}}),
)

CALLS = [
    [("get_weather", {"city": "Tokyo", "days": 3})],
    [("search", {"q": "Ünïcode ✓ 北京 \"quoted\" back\\slash"})],
    [("ping", {})],
    [("search", {"q": "nested", "filters": {"a": [1, {"b": None}], "c": True}})],
    [("get_weather", {"city": "Paris"}), ("search", {"q": "x"})],
]

# vLLM tool-parser name -> the thinkgate renderer of the template its models write
TEMPLATE = {
    "hermes": "hermes", "qwen3_coder": "qwen3_coder", "qwen3_xml": "qwen3_6", "deepseek_v3": "deepseek_v3",
    "deepseek_v31": "deepseek_v31", "deepseek_v32": "deepseek_v32", "deepseek_v4": "deepseek_v4",
    "kimi_k2": "kimi_k2", "glm45": "glm45", "glm47": "glm47", "minimax_m2": "minimax_m2", "gemma4": "gemma4",
    "llama3_json": "llama3_json", "mistral": "mistral", "qwen3_json": "hermes", "openai": "openai",
    # json_lists
    "phi4_mini_json": "phi4_mini_json", "xlam": "xlam", "jamba": "jamba", "granite": "granite",
    "granite-20b-fc": "granite_20b_fc", "internlm": "internlm", "granite4": "hermes",
    "granite_toolcall_parser": "qwen3_coder",
    # -- pythonic group
    "pythonic": "pythonic", "llama4_pythonic": "llama4_pythonic", "olmo3": "olmo3", "lfm2": "lfm2",
    "functiongemma": "functiongemma", "gigachat3": "gigachat3", "apertus": "apertus", "llama4_json": "llama3_json",
}
JSON_FAMILIES = {"hermes", "deepseek_v3", "deepseek_v31", "kimi_k2", "llama3_json", "mistral",
                 "phi4_mini_json", "xlam", "jamba", "granite", "granite-20b-fc", "internlm", "granite4"}


def _template_cases(name: str) -> None:
    r = TEMPLATE[name]
    for calls in CALLS:
        if len(calls) > 1 and not RENDERERS[r].parallel:
            continue
        for content in ("", "Let me check."):
            try:
                text = render(r, calls, content)
            except ValueError:  # a template that writes no content beside calls
                continue
            td.add(name, td.Case(text, "template", TOOLS))
            td.add(name, td.Case(text[: len(text) * 2 // 3], "variation:cut", TOOLS))
            if content:
                td.add(name, td.Case(text + "\n\nDone.", "variation:after", TOOLS))
        try:
            text = render(r, calls) if calls else ""
        except ValueError:  # a value the template cannot write (Llama 4's, Olmo 3's unescaped quotes)
            continue
        td.add(name, td.Case(text, "variation:undeclared", None))
        if name in JSON_FAMILIES:
            td.add(name, td.Case(text.replace("\n", ""), "variation:no-newlines", TOOLS))
            td.add(name, td.Case(text.replace("\n", "\n\n  "), "variation:whitespace", TOOLS))
    td.add(name, td.Case("No call here, just text with <b>tags</b> and { braces }.", "template", TOOLS))


for _name in TEMPLATE:
    _template_cases(_name)

# --- xml_b: the template's calls of each name, and the layouts vLLM's own tests feed these parsers
# (tests/tool_parsers/test_<name>_tool_parser.py: no newlines, keys in another order, compact JSON)
XML_B_TEMPLATE = {
    "ling3": "glm47", "poolside_v1": "glm45", "deepseek_v41": "deepseek_v41", "dots": "dots", "ripple": "ripple",
    "plamo3": "plamo3", "k2_horizon": "k2_horizon", "cohere_command3": "cohere_command3",
    "cohere_command4": "cohere_command3",
}
TEMPLATE.update(XML_B_TEMPLATE)
for _name in XML_B_TEMPLATE:
    _template_cases(_name)
for _name, _t in [
    ("poolside_v1", "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>"),
    ("poolside_v1", "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"),
    ("dots", 'ok<dots_function_call><invoke name="get_weather"><parameter name="city">Paris</parameter>'
             '<parameter name="days">3</parameter></invoke></dots_function_call>'),
    ("dots", '<dots_function_call><invoke name="search"><parameter name="q">chairs</parameter></invoke>'
             '<invoke name="ping"></invoke></dots_function_call>'),
    ("k2_horizon", "Before <ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key>"
                   "<ifm|arg_value>123</ifm|arg_value><ifm|arg_key>days</ifm|arg_key><ifm|arg_value>3"
                   "</ifm|arg_value></ifm|tool_call>\n<ifm|tool_call>ping</ifm|tool_call></ifm|tool_calls> after."),
    ("k2_horizon", "<ifm|tool_calls><ifm|tool_call>ping"),
    ("ripple", '<tool_call>\n{"arguments": {"city": "Paris"}, "name": "get_weather"}\n</tool_call>'),
    ("deepseek_v41", '\n\n<｜DSML｜ tool_calls>\n<｜DSML｜ invoke name="get_weather">\n<｜DSML｜ parameter name="city" '
                     'string="true">Paris</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ tool_calls>'),
    ("cohere_command3", '<|START_ACTION|>[{"tool_call_id":"0","tool_name":"get_weather","parameters":{"city":"Paris"}}]'
                        "<|END_ACTION|>"),
]:
    td.add(_name, td.Case(_t, f"vllm-test:{_name}", TOOLS))

# --- Inkling: the template's blocks (vllm/renderers/inkling_encoding.py), the inputs of vLLM's own tests
# (tests/parser/engine/test_inkling.py: tool blocks with and without a header, parallel blocks, text / raw-text /
# error blocks, thinking blocks, a block ended by <|content_model_end_sampling|> or cut, the arguments
# converter's wrappers), and what models write beside the template (keys in another order, whitespace, the
# arguments under "arguments" or as a JSON string, a body that is no call)
TEMPLATE["inkling"] = "inkling"
_template_cases("inkling")
_IJ, _IE, _IM, _IT, _ITH, _IS = ("<|content_invoke_tool_json|>", "<|end_message|>", "<|message_model|>",
                                 "<|content_text|>", "<|content_thinking|>", "<|content_model_end_sampling|>")


def _ink(name: str, args: str) -> str:
    return f'{_IJ}{{"name":"{name}","args":{args}}}{_IE}'


INKLING_TESTS = [
    _ink("get_weather", '{"city":"SF"}'),
    "get_weather" + _ink("get_weather", '{"city":"SF"}'),
    _ink("a", "{}") + _IM + _ink("b", '{"x":[1,2]}'),
    _ink("f", '{"q":{"deep":{"list":[{"k":"v"}]}},"s":"a}b"}'),
    f"{_IT}hello world{_IE}", "hello world", f"hello world{_IE}", f"hello world{_IS}",
    f"{_ITH}I should check the weather.{_IE}{_IM}{_IT}Let me check.{_IE}{_IM}" + _ink("get_weather", '{"city":"SF"}'),
    "<|content_invoke_tool_text|>do something" + _IE, "<|content_tool_error|>boom" + _IE,
    f"{_ITH}hm{_IE}{_IM}{_IT}hi{_IS}",
    f"{_ITH}one{_IE}{_IM}{_IT}mid{_IE}{_IM}{_ITH}two{_IE}",
    _ink("f", "{}") + f"{_IM}{_IT}done{_IE}",
    f'{_IJ}{{"name":"d","args":{{"k":"v"',
    f"{_IT}see {_IT} token{_IE}",
    f"{_IT}Check this.{_IE}{_IM}" + _ink("get_weather", '{"city":"San Francisco"}'),
    f"{_IT}intro{_IE}" + _ink("get_weather", '{"city":"Seattle"}'),
    "someFn" + _ink("get_weather", '{"city":"Seattle"}'),
    _ink("f", "{}") + _IM + _ink("g", "{}") + f"{_IM}{_IT}after{_IE}",
    f'{_IJ}{{"name":"f","args":{{}}}}{_IS}',
    f'{_IJ}{{"name":"args","args":{{"k":1}}}}{_IE}',
    f'{_IJ}{{ "name" : "x" , "args" : {{"a": 1}} }}{_IE}',
    f'{_IJ}{{"name":"x"}}{_IE}',
    f'{_IJ}{{"name":"x","args":[1]}}{_IE}',
]
for _t in INKLING_TESTS:
    td.add("inkling", td.Case(_t, "vllm-test:inkling", TOOLS))
for _t, _kind in [
    (f'{_IJ}{{"args":{{"city":"Paris"}},"name":"get_weather"}}{_IE}', "order"),
    (f'{_IJ}\n{{"name": "get_weather", "args": {{"city": "Paris", "days": 3}}}}\n{_IE}', "whitespace"),
    (f'{_IJ}{{"name": "get_weather", "arguments": {{"city": "Paris"}}}}{_IE}', "arguments-key"),
    (f'{_IJ}{{"name": "get_weather", "parameters": {{"city": "Paris"}}}}{_IE}', "arguments-key"),
    (f'{_IJ}{{"name":"get_weather","args":"{{\\"city\\": \\"Paris\\"}}"}}{_IE}', "string-arguments"),
    (f"{_IJ}not a call{_IE}{_IM}{_IT}after{_IE}", "not-a-call"),
    (_ink("get_weather", '{"city":"SF"}') + _IM + "get_weather" + _ink("get_weather", '{"city":"LA"}'), "parallel"),
    (f"{_ITH}plan{_IE}{_IM}" + _ink("ping", "{}"), "after-thinking-block"),
]:
    td.add("inkling", td.Case(_t, f"variation:{_kind}", TOOLS))
# --- minimax_m3: the template's calls (MiniMax's M3 serializer), the outputs of vLLM's own test
# (tests/tool_parsers/test_minimax_m3_tool_parser.py: its sample tool, build_order_call, two invokes, a cut
# opening, a cut second invoke, a closing tag where a call goes) and the layouts vLLM's parser reads beside them
TEMPLATE["minimax_m3"] = "minimax_m3"
_template_cases("minimax_m3")
_NS = "]<]minimax[>["


def _el(name: str, body: str) -> str:
    return f"{_NS}<{name}>{body}{_NS}</{name}>"


def _inv(name: str, body: str, opening: str = "") -> str:
    opening = opening or 'name="' + name + '"'
    return f"{_NS}<invoke {opening}>{body}{_NS}</invoke>"


def _m3_block(*invokes: str) -> str:
    return f"{_NS}<tool_call>\n" + "\n".join(invokes) + f"\n{_NS}</tool_call>"


M3_TOOLS = (_fn("create_order", {
    "user_id": {"type": "integer"}, "urgent": {"type": "boolean"}, "note": {"type": "string"},
    "shipping": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "integer"}}},
    "items": {"type": "array", "items": {"type": "object", "properties": {"sku": {"type": "string"},
                                                                          "qty": {"type": "integer"}}}},
    "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
    "duplicate_demo": {"type": "object"}}),)
_ORDER = (_el("user_id", "42") + _el("urgent", "true") + _el("note", "Please leave at front desk.")
          + _el("shipping", _el("city", "Singapore") + _el("zip", "018956"))
          + _el("items", _el("item", _el("sku", "book-001") + _el("qty", "2"))
                + _el("item", _el("sku", "pen-007") + _el("qty", "5")))
          + _el("metadata", _el("source", "mobile") + _el("campaign", "may-launch")))
for _t in [
    "I will create it.\n" + _m3_block(_inv("create_order", _ORDER + _el("duplicate_demo", _el("tag", "a")
                                                                          + _el("tag", "b")))),
    "I will create it.\n" + _m3_block(_inv("create_order", _ORDER)),
    "plain response",
    _m3_block(_inv("create_order", _el("user_id", "1")), _inv("create_order", _el("user_id", "2"))),
    f"plain {_NS}<tool_ca",
    f"plain {_NS}<tool_call>\n" + _inv("create_order", _el("user_id", "1"))
    + f'\n{_NS}<invoke name="create_order">{_NS}<user_id>2',
    f"{_NS}<tool_call>\n{_NS}</user_id> after error",
]:
    td.add("minimax_m3", td.Case(_t, "vllm-test:minimax_m3", M3_TOOLS))
for _t, _kind in [
    (_m3_block(_inv("create_order", _el("user_id", "7"), "name='create_order'")), "whitespace"),
    (_m3_block(_inv("create_order", _el("user_id", "7"), "name=create_order")), "whitespace"),
    (_m3_block(_inv("create_order", "\n" + _el("user_id", "7") + "\n" + _el("shipping", "\n" + _el("city", "Oslo")
                                                                          + "\n") + "\n")), "whitespace"),
    (_m3_block(_inv("create_order", _el("shipping", "Oslo" + _el("zip", "1")))), "malformed"),   # text beside elements
    (_m3_block(_inv("create_order", _el("note", "x") + f"{_NS}<user_id>1")), "malformed"),      # unterminated
    (_m3_block(_inv("create_order", _el("note", "x") + "junk")), "malformed"),                  # stray text
    (_m3_block(_inv("create_order", _el("note", "x")), "junk", _inv("create_order", _el("user_id", "3"))),
     "malformed"),                                                                              # text between calls
    (_m3_block(_inv("create_order", f"{_NS}<note>x{_NS}</nota>" + _el("user_id", "2"))), "mismatched-close"),
]:
    td.add("minimax_m3", td.Case(_t, f"variation:{_kind}", M3_TOOLS))
# --- Kimi K3 (XTML channels): the encoder's turns (the response channel, then the tools channel), and the outputs
# of vLLM's own tests (tests/tool_parsers/test_kimi_k3_tool_parser.py) and of its parser's docstring, with the
# layouts its parser reads (the response opening held by the prefix, attributes in another order, no type)
TEMPLATE["kimi_k3"] = "kimi_k3"
_template_cases("kimi_k3")
_K3O, _K3C, _K3S = "<|open|>", "<|close|>", "<|sep|>"
_K3_ARG = _K3O + 'argument key="{}" type="{}"' + _K3S + "{}" + _K3C + "argument" + _K3S
_K3_TOOLS = _K3O + "tools" + _K3S + "{}" + _K3C + "tools" + _K3S
KIMI_K3_TESTS = [
    "Hello" + _K3C + "message" + _K3S,
    "Hello",
    _K3O + "response" + _K3S + "Only an answer." + _K3C + "response" + _K3S + _K3C + "message" + _K3S,
    # the parser's docstring example (indented as it shows it)
    _K3O + "tools" + _K3S + "\n  " + _K3O + 'call tool="python" index="1"' + _K3S + "\n    "
    + _K3_ARG.format("code", "string", "print(1)") + "\n    " + _K3_ARG.format("opts", "object", '{"a":1}') + "\n  "
    + _K3C + "call" + _K3S + "\n" + _K3C + "tools" + _K3S,
    # thinking off: the generation prefix holds <|open|>response<|sep|>
    "Let me check." + _K3C + "response" + _K3S + _K3_TOOLS.format(
        _K3O + 'call tool="get_weather" index="1"' + _K3S + _K3_ARG.format("city", "string", "Paris")
        + _K3_ARG.format("days", "number", "3") + _K3C + "call" + _K3S) + _K3C + "message" + _K3S,
    # attributes in another order, no index, no type (a string), an escaped key
    _K3O + "response" + _K3S + _K3C + "response" + _K3S + _K3_TOOLS.format(
        _K3O + 'call index="1" tool="search"' + _K3S + _K3O + 'argument key="q"' + _K3S + 'a &amp; "b"' + _K3C
        + "argument" + _K3S + _K3C + "call" + _K3S + _K3O + 'call tool="ping"' + _K3S + _K3C + "call" + _K3S
        + _K3O + 'call tool="f" index="3"' + _K3S + _K3_ARG.format("a&quot;b", "boolean", "false") + _K3C + "call"
        + _K3S),
    # text outside the response channel (vLLM keeps the channel only)
    _K3O + "response" + _K3S + "Hi" + _K3C + "response" + _K3S + " aside " + _K3_TOOLS.format(
        _K3O + 'call tool="ping" index="1"' + _K3S + _K3C + "call" + _K3S) + _K3C + "message" + _K3S,
]
for _t in KIMI_K3_TESTS:
    td.add("kimi_k3", td.Case(_t, "vllm-test:kimi_k3"))
# --- muse: a call is a message of its own; the text given is the whole output (vLLM's Muse parser reads the
# channels itself, as thinkgate's format covers the reasoning): the template's calls, after the reasoning, cut,
# with an answer or an update beside them, and the inputs of vLLM's own Muse tests (the Glimmer ATEM tests)
MUSE_TEMPLATE = {"muse": "muse", "musespark": "muse", "muse_glimmer": "muse_glimmer"}
TEMPLATE.update(MUSE_TEMPLATE)
_MUSE_THINK = " to=self<|message|>The user wants the weather; I should call a tool.<|eom|><|start|>assistant"


def _atem(name: str, **args: str) -> str:
    params = "".join(f'<atem:parameter name="{k}">{v}</atem:parameter>\n' for k, v in args.items())
    return f'<atem:function_calls>\n<atem:invoke name="{name}">\n{params}</atem:invoke>\n</atem:function_calls>'


MUSE_TOOLS = TOOLS + tuple(_fn(n, p) for n, p in [
    ("weather.get", {"city": {"type": "string"}, "units": {"type": "string"}}),
    ("math.add", {"a": {"type": "integer"}, "b": {"type": "integer"}}),
    ("math.mul", {"a": {"type": "integer"}, "b": {"type": "integer"}}),
    ("api.call", {"payload": {"type": "object"}, "flag": {"type": "boolean"}}),
    ("read.read", {"path": {"type": "string"}})])
MUSE_TESTS = [
    "to=self<|message|>Let me check the weather.<|eom|><|start|>assistant to=weather.get<|message|>"
    + _atem("weather.get", city="Paris", units="celsius") + "<|eot|>",
    "<|start|>assistant to=math.add<|message|>" + _atem("math.add", a="1", b="2") + "<|eom|>"
    "<|start|>assistant to=math.mul<|message|>" + _atem("math.mul", a="3", b="4") + "<|eot|>",
    'to=self<|message|>I could call <atem:invoke name="evil.fn"><atem:parameter name="x">1</atem:parameter>'
    "</atem:invoke> but I will not.<|eom|><|start|>assistant to=user<|message|>The answer is 42.<|eot|>",
    "to=user<|message|>Just a plain answer.<|eot|>",
    "<|start|>assistant to=api.call<|message|>" + _atem("api.call", payload='{"nested": [1, 2, 3]}', flag="true")
    + "<|eot|>",
    " to=self<|message|>I should read the hostname file to answer.<|eom|><|start|>assistant to=read.read<|message|>"
    + _atem("read.read", path="/etc/hostname"),
    " to=self<|message|>Think about it.<|eom|><|start|>assistant to=user<|message|>The answer is 42.<|eot|>",
    " to=self<|message|>Maybe I should call " + _atem("read.read", path="/etc/hostname") + " but wait",
    "<|start|>assistant to=get_weather.get_weather<|message|>" + _atem("get_weather.get_weather", city="Paris"),
    "<|start|>assistant to=foo.get_weather<|message|>" + _atem("foo.get_weather", city="Paris"),
    "Just a direct answer.",
]
MUSE_VARIATIONS = [  # what models write beside the template
    (" to=self<|message|>I will read it to=read.read<|message|>" + _atem("read.read", path="/x"), "no-eom"),
    ("<|start|>assistant to=commentary<|message|>Checking.<|eom|><|start|>assistant to=get_weather<|message|>"
     + _atem("get_weather", city="Oslo"), "commentary"),
    ("<|start|>assistant<|message|>bare<|eom|><|start|>assistant to=user<|message|>Done.", "bare-message"),
    ("<|start|>assistant to=get_weather<|message|><atem:function_calls><atem:invoke name=\"get_weather\">"
     "<atem:parameter name=\"city\">Oslo</atem:parameter></atem:invoke></atem:function_calls>", "no-newlines"),
    ("<|start|>assistant to=get_weather<|message|>" + _atem("get_weather", city="Oslo")
     + "<|eom|><|start|>assistant to=user<|message|>It is sunny.<|eot|>", "after"),
]
for _name in MUSE_TEMPLATE:
    _template_cases(_name)
    for _calls in CALLS:
        _text = render(MUSE_TEMPLATE[_name], _calls)
        td.add(_name, td.Case(_MUSE_THINK + _text, "template", TOOLS))
        td.add(_name, td.Case((_MUSE_THINK + _text)[: (len(_MUSE_THINK) + len(_text)) * 2 // 3], "variation:cut", TOOLS))
    for _t in MUSE_TESTS:
        td.add(_name, td.Case(_t, f"vllm-test:{_name}", MUSE_TOOLS))
    for _t, _kind in MUSE_VARIATIONS:
        td.add(_name, td.Case(_t, f"variation:{_kind}", MUSE_TOOLS))

# --- vLLM's own tests (tests/tool_parsers/test_hermes_tool_parser.py): their inputs, a request without tools
HERMES_TESTS = [
    "This is some prior text that has nothing to do with tool calling.",
    '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}\n</tool_call>',
    '<tool_call>{"name": "get_current_temperature",'
    '"arguments": {"location":"San Francisco, California, United States", "unit": "celsius"}}</tool_call>',
    '<tool_call>{"name": "get_current_temperature", "arguments": {"location": "San Francisco", "unit": "celsius"}}'
    "</tool_call>",
    'Sure, let me check the weather.<tool_call>{"name": "get_weather", "arguments": {"city": "NYC"}}</tool_call>',
    '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
    '<tool_call>{"name": "search", "arguments": {"q": "dogs"}}</tool_call>',
    '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}}',
    '<tool_call>\n{"name": "final_answer", "arguments": {"trigger": true}',
    '<tool_call>\n{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}\n</tool_call>',
    '<tool_call>\n{"name": "do_thing", "arguments": "hello"}\n</tool_call>',
    '<tool_call>{"name": "get_db_config", "arguments": "{\\"param\\": \\"max_connections\\"}"}</tool_call>',
    "This is not a tool call.",
]
for _t in HERMES_TESTS:
    td.add("hermes", td.Case(_t, "vllm-test:hermes"))
td.add("hermes", td.Case(HERMES_TESTS[1], "vllm-test:hermes-request-none", request_none=True))


def _tokenizer(name: str, vllm_tokenizers):
    fam = FAMILIES[td.served_format(name)]
    if fam.vocab == "deepseek_v4":
        return vllm_tokenizers["deepseek_v4"][0], vocab(fam.vocab)
    return tokenizer(fam.vocab), vocab(fam.vocab)


def test_every_vllm_name_is_served_or_counted() -> None:
    served = [n for n in VLLM_NAMES if not n.startswith("thinkgate_") and td.served_format(n) is not None
              and n not in td.ELSEWHERE]  # compared through vLLM's unified parser (td.ELSEWHERE says where)
    missing = [n for n in VLLM_NAMES if not n.startswith("thinkgate_") and td.served_format(n) is None]
    print(f"\n[differential] vLLM names: {len(served) + len(missing) + len(td.ELSEWHERE)}; served: {len(served)}; "
          f"compared elsewhere: {len(td.ELSEWHERE)}; not served yet (skipped): {len(missing)}")
    assert set(td.CASES) <= set(served), sorted(set(td.CASES) - set(served))
    assert set(served) <= set(td.CASES), f"served names without cases: {sorted(set(served) - set(td.CASES))}"


@pytest.mark.parametrize("name", sorted(td.CASES))
def test_every_difference_from_vllm_is_explained(name: str, vllm_tokenizers) -> None:
    if name not in VLLM_NAMES or td.served_format(name) is None:
        pytest.skip(f"{name}: not served as thinkgate_{name} yet")
    tok, v = _tokenizer(name, vllm_tokenizers)
    kinds = {p: Counter() for p in ("whole", "ids", "text")}
    own_tests = {p: Counter() for p in ("whole", "ids", "text")}  # vLLM's own test inputs: agree / all
    count_only = bool(os.environ.get("THINKGATE_DIFF_COUNT_ONLY"))  # measure another revision: no asserts
    unexplained = []
    for case in td.CASES[name]:
        got = td.run_case(name, case, tok, v)
        for path, (theirs, ours) in got.items():
            if ours.error is not None and count_only:
                kinds[path]["thinkgate-crash"] += 1
                own_tests[path]["all"] += case.origin.startswith("vllm-test")
                continue
            assert ours.error is None, f"thinkgate_{name} raised on {case.text!r}: {ours.error}"
            kind = td.classify(name, theirs, ours, case, got["whole"][0])
            kinds[path][kind] += 1
            if case.origin.startswith("vllm-test"):
                own_tests[path]["all"] += 1
                own_tests[path]["agree"] += kind in ("same", "whitespace")
            if "unexplained" in kind:
                unexplained.append((path, case, theirs, ours))
    origins = Counter(c.origin.split(":")[0] for c in td.CASES[name])
    line = "; ".join(f"{p}: agree {k['same']}, differ {sum(k.values()) - k['same']} ("
                     + ", ".join(f"{x} {n}" for x, n in sorted(k.items()) if x != "same") + ")"
                     for p, k in kinds.items())
    print(f"\n[{name} vs thinkgate_{name}] {len(td.CASES[name])} cases {dict(origins)}: {line}")
    if own_tests["whole"]["all"]:
        print(f"[{name}] vLLM's own test inputs, agree (same or whitespace) / all: "
              + ", ".join(f"{p} {c['agree']}/{c['all']}" for p, c in own_tests.items()))
    if os.environ.get("THINKGATE_DIFF_VERBOSE"):
        for path, case, theirs, ours in unexplained:
            print(f"  {path} {case.origin}: {case.text!r}\n    vLLM {theirs}\n    ours {ours}")
    assert count_only or not unexplained, "\n".join(f"{p} {c.origin}: {c.text!r}\n  vLLM {t}\n  ours {o}"
                                      for p, c, t, o in unexplained[:4])

# --- vLLM's own tests (tests/tool_parsers/test_deepseekv3_tool_parser.py, test_deepseekv31_tool_parser.py)
_DSB, _DSE = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
_V3 = "<｜tool▁call▁begin｜>function<｜tool▁sep｜>{}\n```json\n{}\n```<｜tool▁call▁end｜>"
_V31 = "<｜tool▁call▁begin｜>{}<｜tool▁sep｜>{}<｜tool▁call▁end｜>"
DEEPSEEK_V3_TESTS = [
    "How can I help you today? I can check weather for you.",
    _DSB + _V3.format("get_weather", '{"city": "Tokyo", "unit": "celsius"}') + _DSE,
    _DSB + _V3.format("get_weather", '{"city": "Tokyo", "unit": "celsius"}')
    + _V3.format("search_hotels", '{"location": "Tokyo", "check_in": "2025-01-15"}') + _DSE,
    _DSB + _V3.format("test_function", '{"string_field": "hello", "int_field": 42, "float_field": 3.14, '
                      '"bool_field": true, "null_field": null, "array_field": ["a", "b", "c"], '
                      '"object_field": {"nested": "value"}, "empty_array": [], "empty_object": {}}') + _DSE,
    _DSB + _V3.format("get_current_time", "{}") + _DSE,
    "Let me check the weather for you." + _DSB + _V3.format("get_weather", '{"city": "Paris"}') + _DSE,
    _DSB + _V3.format("send_message", '{"text": "He said \\"hello\\"", "path": "C:\\\\Users\\\\file", '
                      '"newline": "line1\\nline2"}') + _DSE,
    _DSB + _V3.format("get_weather", '{"city": "Tokyo"') + _DSE,
    _DSB + "function<｜tool▁sep｜>get_weather\n```json\n{\"city\": \"Tokyo\"}\n```" + _DSE,
]
DEEPSEEK_V31_TESTS = [
    "normal text" + _DSB + _V31.format("foo", '{"x":1}') + _DSE,
    "some prefix text" + _DSB + _V31.format("foo", '{"x":1}') + _V31.format("bar", '{"y":2}') + _DSE
    + " some suffix text",
    "Let me look that up." + _DSB + "get_weather",
    _DSB + 'foo<｜tool▁sep｜>{"x":1}' + _DSE,
]
for _t in DEEPSEEK_V3_TESTS:
    td.add("deepseek_v3", td.Case(_t, "vllm-test:deepseek_v3"))
for _t in DEEPSEEK_V31_TESTS:
    td.add("deepseek_v31", td.Case(_t, "vllm-test:deepseek_v31", request_none=True))

# --- vLLM's own tests (tests/tool_parsers/test_qwen3xml_tool_parser.py, shared with qwen3_coder): their inputs
_GW = "<tool_call>\n<function=get_weather>\n<parameter=city>{}</parameter>\n</function>\n</tool_call>"
QWEN3_XML_TESTS = [
    "This is a regular response without any tool calls.",
    _GW.format("Tokyo"),
    _GW.format("Tokyo") + "<tool_call>\n<function=get_time>\n<parameter=timezone>Asia/Tokyo</parameter>\n"
    "</function>\n</tool_call>",
    "<tool_call>\n<function=test_function>\n<parameter=string_field>hello</parameter>\n"
    "<parameter=int_field>42</parameter>\n<parameter=float_field>3.14</parameter>\n"
    "<parameter=bool_field>true</parameter>\n<parameter=null_field>null</parameter>\n"
    '<parameter=array_field>["a", "b", "c"]</parameter>\n<parameter=object_field>{"nested": "value"}</parameter>\n'
    "</function>\n</tool_call>",
    "<tool_call>\n<function=refresh>\n</function>\n</tool_call>",
    "Let me check the weather for you.\n\n" + _GW.format("Tokyo") + "\n\nI will get that information.",
    '<tool_call>\n<function=test_function>\n<parameter=quoted>He said "hello"</parameter>\n'
    "<parameter=path>C:\\Users\\file.txt</parameter>\n<parameter=newline>line1\nline2</parameter>\n"
    "</function>\n</tool_call>",
    "<tool_call><function=func>",
    "<tool_call><function=></function></tool_call>",
    _GW.format("Paris") + "\nNext, I will check the weather for London:\n" + _GW.format("London"),
    _GW.format("Paris") + "\nI hope this helps!",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nDallas\n</parameter>\n</function>\n</tool_call>",
    "<tool_call>\n<function=get_weather>\n<parameter=city>Paris</parameter>\n</function>\n</tool_call>"
    "<tool_call>\n<function=get_weather>\n<parameter=city>London</parameter>\n</function>\n</tool_call>",
    "<tool_call><function=get_weather><parameter=city>Tokyo</parameter></function></tool_call>",
]
for _name in ("qwen3_xml", "qwen3_coder"):
    for _t in QWEN3_XML_TESTS:
        td.add(_name, td.Case(_t, f"vllm-test:{_name}"))

# --- json_lists: the model outputs of vLLM's own tests (tests/tool_parsers/test_{phi4mini,jamba,granite,
# granite4,granite_20b_fc,internlm2,xlam}_tool_parser.py), as tests/test_tool_json_lists.py holds them
from test_tool_json_lists import CASES as _JSON_LISTS_CASES  # noqa: E402

for _name, _t, _calls, _content in _JSON_LISTS_CASES:
    td.add(_name, td.Case(_t, f"vllm-test:{_name}"))

def test_declared_tools_only_is_an_option_of_the_plugin(monkeypatch) -> None:
    """Undeclared tools are read by default (vLLM reads them); THINKGATE_VLLM_DECLARED_TOOLS_ONLY=1 keeps them
    as content. ``request=None`` and text-only deltas read the same calls as the whole output."""
    from vllm.tool_parsers import ToolParserManager

    import thinkgate.engines.vllm.tool_parsers  # noqa: F401

    tok, v = tokenizer("qwen3_6"), vocab("qwen3_6")
    case = td.Case('<tool_call>\n{"name": "lookup", "arguments": {"k": 1}}\n</tool_call>', "vllm-test", TOOLS[:1])
    cls = ToolParserManager.get_tool_parser("thinkgate_hermes")
    ids = v.encode(case.text)
    assert td.whole(cls(tok), case).calls == (("lookup", {"k": 1}),)
    none = td.Case(case.text, "vllm-test", request_none=True)
    assert td.whole(cls(tok), none).calls == (("lookup", {"k": 1}),)
    assert td.streamed(cls(tok), none, ids, [v.decode([t]) for t in ids], with_ids=False).calls == \
        (("lookup", {"k": 1}),)
    monkeypatch.setenv("THINKGATE_VLLM_DECLARED_TOOLS_ONLY", "1")
    got = td.whole(cls(tok), case)
    assert got.calls == () and got.content == case.text

