"""Helpers shared by several test modules (a plain module, not collected: no ``test_`` prefix).

pytest's default ``prepend`` import mode puts ``tests/`` (it has no ``__init__.py``) on ``sys.path``, so
the test modules import this one as ``support``; conftest.py registers it for assertion rewriting.
Fixtures stay in conftest.py.
"""

from __future__ import annotations

import codecs
import functools
import json
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from thinkgate.testing.vocabularies import is_synthetic, synthetic_vocabulary
from template_render import RENDERERS
from thinkgate.reasoning.base import ReasoningEnd
from thinkgate.reasoning.markers import TokenMarkerParser
from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary
from thinkgate.structured_output import Parser, StructuredOutputManager
from thinkgate.testing.streams import replay


# ================================================================================================
# reasoning: streaming checks shared by the token-marker families' modules


def detokenizer(vocab: Vocabulary):
    """An engine-style incremental detokenizer: the text of each delta, incomplete characters held
    back until complete (as vLLM's detokenizer does)."""
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    return lambda ids: dec.decode(vocab.decode_bytes(ids))


def collect_deltas(deltas) -> tuple[str, str]:
    return "".join(d.reasoning or "" for d in deltas), "".join(d.content or "" for d in deltas)


def check_chunked(parser: TokenMarkerParser, prompt: Sequence[int], ids: Sequence[int], cuts: Sequence[int],
                  kwargs: dict | None = None, give_text: bool = False) -> None:
    """Chunking ``ids`` at ``cuts`` gives the same end offset and the same text as parsing it whole."""
    v = parser.vocabulary
    bounds = [0, *sorted(set(c for c in cuts if 0 < c < len(ids))), len(ids)]
    chunks = [ids[a:b] for a, b in zip(bounds, bounds[1:])]
    whole = parser.split(ids, prompt, kwargs)
    tr = parser.new_tracker(prompt, kwargs)
    found: ReasoningEnd | None = None
    pos = 0
    for ch in chunks:
        peek = tr.scan(ch)
        e = tr.advance(ch)
        assert peek == e
        if e is not None:
            assert found is None
            found = ReasoningEnd(pos + e.offset, e.is_content)
        pos += len(ch)
    assert found == whole.end
    stream = parser.new_stream(prompt, kwargs)
    detok = detokenizer(v)
    deltas = [stream.feed(ch, detok(ch) if give_text else None) for ch in chunks]
    assert collect_deltas(deltas) == (v.decode(whole.reasoning_ids), v.decode(whole.content_ids))


# ================================================================================================
# reasoning: vocabularies with a family's special tokens added (families no offline tokenizer ships)


def with_specials(base: Vocabulary, specials: Sequence[str], name: str) -> Vocabulary:
    """``base`` plus ``specials`` as new special tokens (those ``base`` already has keep their ids)."""
    token_bytes = list(base.token_bytes)
    special_map = dict(base.special_tokens)
    for s in specials:
        if base.token_id(s) is None or s not in base.special_tokens:
            special_map[s] = len(token_bytes)
            token_bytes.append(s.encode("utf-8"))
    added = sorted((s for s in specials), key=len, reverse=True)

    def encode(text: str) -> list[int]:
        out: list[int] = []
        i = start = 0
        while i < len(text):
            for s in added:
                if text.startswith(s, i):
                    if start < i:
                        out += base.encode(text[start:i])
                    out.append(special_map[s])
                    i = start = i + len(s)
                    break
            else:
                i += 1
        if start < len(text):
            out += base.encode(text[start:])
        return out

    return Vocabulary(name, token_bytes, special_map, base.stop_token_ids, encode=encode)


# ================================================================================================
# tool formats: the families as their chat templates write the calls, and driving the manager with
# them (test_tool_formats.py, test_tool_xgrammar_fixes.py). The renderers are written from the models'
# chat templates, independently of the library.

CORPUS = json.loads((Path(__file__).parent / "data" / "tools" / "corpus.json").read_text(encoding="utf-8"))
# the base corpus (entries without "shapes"); the real-world shapes are for test_tool_conformance.py
BASE_ENTRIES: list[dict[str, Any]] = [e for e in CORPUS["tools"] if "shapes" not in e]
TOOLS: list[dict[str, Any]] = [e["tool"] for e in BASE_ENTRIES]
EXAMPLES: dict[str, list[dict[str, Any]]] = {e["tool"]["function"]["name"]: e["examples"] for e in BASE_ENTRIES}
BY_NAME = {t["function"]["name"]: t for t in TOOLS}
STRICT_TOOL = "strict_lookup"
# tools every request gets besides its window of the corpus: a first required string parameter
# (for the missing-argument and closing-tag streams)
ANCHOR = "get_weather"


@functools.lru_cache(maxsize=None)
def vocab(name: str) -> Vocabulary:
    """A real vocabulary by name, or a synthetic family (the Qwen3.6 table plus the family's markers)."""
    if is_synthetic(name):
        return synthetic_vocabulary(name)
    return load_vocabulary(name)  # type: ignore[arg-type]


def closing_cache(keep: int):
    """``functools.lru_cache`` for objects that hold processes (a manager's compile pool: a zygote of ~330 MB
    and its workers): at most ``keep`` stay alive, the least recently used one beyond them is closed, and
    ``cache_clear`` closes them all. The matrices run family after family, so a family's manager is built
    once and closed when the run has moved on to other families."""
    def wrap(build):
        live: OrderedDict[tuple[Any, ...], Any] = OrderedDict()

        @functools.wraps(build)
        def get(*key: Any) -> Any:
            if key in live:
                live.move_to_end(key)
                return live[key]
            value = live[key] = build(*key)
            while len(live) > keep:
                live.popitem(last=False)[1].close()
            return value

        def cache_clear() -> None:
            while live:
                live.popitem()[1].close()

        get.cache_clear = cache_clear  # type: ignore[attr-defined]
        return get
    return wrap


@closing_cache(keep=3)
def manager(vocab_name: str, parser: str | None) -> StructuredOutputManager:
    return StructuredOutputManager(vocab(vocab_name), parser, max_num_seqs=2, num_compile_threads=1)


# --------------------------------------------------------------------------------------------------
# rendering, as the chat templates write it

def _resolve(schema: Any, root: dict[str, Any]) -> Any:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].split("/")[-1]]
    return schema


def _raw(schema: Any, root: dict[str, Any]) -> bool:
    s = _resolve(schema, root)
    if s.get("type") == "string":
        return True
    vals = [s["const"]] if "const" in s else s.get("enum")
    return "type" not in s and bool(vals) and all(isinstance(v, str) for v in vals)


def _xml(name: str, args: dict[str, Any], begin: str, end: str, dsml: bool = False, python: bool = False,
         py_scalars: bool = False) -> str:
    """XML parameters: a str value raw (the Qwen / GLM / MiniMax templates test the value: ``v is
    string``; DSML's encoder by the schema here), others as JSON (``tojson``) or, with ``python``, as
    Qwen3-Coder's ``|string`` writes them (Python's ``str``); with ``py_scalars``, as Qwen3.5's template
    does (arrays and objects ``tojson``, other non-strings ``|string``: ``True``, ``None``)."""
    params = BY_NAME[name]["function"].get("parameters") or {"properties": {}} if name in BY_NAME else {}
    out = []
    for k, v in args.items():
        raw = _raw(params["properties"][k], params) if dsml else isinstance(v, str)
        if raw:
            text = v
        elif python or (py_scalars and not isinstance(v, (list, dict))):
            text = str(v)
        else:
            text = json.dumps(v, ensure_ascii=False).replace("</", "<\\/")  # JSON's safe spelling
        b = begin.replace("{key}", k)
        if dsml:
            b = b.replace("{string}", "true" if raw else "false")
        out.append(b + text + end)
    return "".join(out)


def _dsml(name: str, args: dict[str, Any]) -> str:
    """A DSML call as DeepSeek's encoder writes it (encoding_dsv32.py / encoding_dsv4.py: tool_call_template
    and encode_arguments_to_dsml): the parameters joined by "\\n" between two newlines (a blank line when
    there are none), string="true" with the raw text for a str value, string="false" with json.dumps
    (ensure_ascii=False) for any other, names as they are. The calls of a block are joined by "\\n"."""
    params = "\n".join(
        f'<｜DSML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
        f'{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</｜DSML｜parameter>'
        for k, v in args.items())
    return f'<｜DSML｜invoke name="{name}">\n{params}\n</｜DSML｜invoke>'


def _dsml41(name: str, args: dict[str, Any]) -> str:
    """:func:`_dsml` as DeepSeek V4.1 spells it: a space after the ``｜DSML｜`` marker of every tag."""
    return _dsml(name, args).replace("｜DSML｜", "｜DSML｜ ")


def _gcml(name: str, args: dict[str, Any]) -> str:
    """A GCML call as GigaChat 3.5's template writes it (render_gcml_invoke): DSML's parameters under
    ``｜GCML｜``, each followed by a newline, and no blank line when there are none."""
    params = "".join(f'<｜GCML｜parameter name="{k}" string="{"true" if isinstance(v, str) else "false"}">'
                     f'{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}</｜GCML｜parameter>\n'
                     for k, v in args.items())
    return f'<｜GCML｜invoke name="{name}">\n{params}</｜GCML｜invoke>'


M3 = "]<]minimax[>["


def _m3(v: Any) -> str:
    """MiniMax M3's value: an object's members as elements after the namespace token, a list's items as
    ``<item>`` elements, a str raw, other values as JSON; null members and items left out."""
    if isinstance(v, dict):
        return "".join(f"{M3}<{k}>{_m3(x)}{M3}</{k}>" for k, x in v.items() if x is not None)
    if isinstance(v, list):
        return "".join(f"{M3}<item>{_m3(x)}{M3}</item>" for x in v if x is not None)
    return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)


def _gemma(v: Any) -> str:
    if isinstance(v, dict):
        return "{" + ",".join(f"{k}:{_gemma(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_gemma(x) for x in v) + "]"
    if isinstance(v, str):
        return '<|"|>' + v + '<|"|>'
    return json.dumps(v)


def _py_kwargs(args: dict[str, Any], *, olmo: bool = False) -> str:
    """Keyword arguments as Python literals (``repr``); ``olmo``: Olmo 3's template (strings in single
    quotes, ``true`` / ``false`` / ``null``, other values with ``tojson``)."""
    def lit(v: Any) -> str:
        if olmo and not isinstance(v, str):
            return json.dumps(v, ensure_ascii=False)
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k!r}: {lit(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ", ".join(lit(x) for x in v) + "]"
        return json.dumps(v) if isinstance(v, float) else repr(v)
    return ", ".join(f"{k}={lit(v)}" for k, v in args.items())


def _gemma_escape(v: Any) -> str:
    return _gemma(v).replace('<|"|>', "<escape>")


def _j(args: dict[str, Any]) -> str:
    return json.dumps(args, ensure_ascii=False)


DS_CALLS = ("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>")


def _xtml_call(name: str, args: dict[str, Any], index: int) -> str:
    """One Kimi K3 call as its encoder writes it (``template_render._kimi_k3``): ``index`` from 1, a str value
    raw with ``type="string"``, any other as JSON with its type (``number`` for ints too)."""
    def kind(v: Any) -> str:
        if isinstance(v, bool):
            return "boolean"
        if v is None:
            return "null"
        if isinstance(v, (int, float)):
            return "number"
        return "string" if isinstance(v, str) else "object" if isinstance(v, dict) else "array"
    body = "".join(f'<|open|>argument key="{k.replace("&", "&amp;").replace(chr(34), "&quot;")}" type="{kind(v)}"'
                   f'<|sep|>{v if isinstance(v, str) else _j(v)}<|close|>argument<|sep|>' for k, v in args.items())
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>{body}<|close|>call<|sep|>'


@dataclass(frozen=True)
class Family:
    fmt: str
    vocab: str
    parser: str | None
    prompt: str
    thinking: str
    call: Any                      # (name, args, index) -> text of one call
    section: tuple[str, str] = ("", "")
    sep: str = ""
    kwargs: dict[str, Any] = field(default_factory=dict)
    include_reasoning: bool = True
    xml: tuple[str, str] | None = None  # (param value prefix, closing tag) for the closing-tag stream
    close_ends_value: bool = False      # the closing tag written as text legitimately ends a value

    def block(self, calls: list[tuple[str, dict[str, Any]]]) -> str:
        return self.section[0] + self.sep.join(self.call(n, a, i) for i, (n, a) in enumerate(calls)) + self.section[1]


MUSE_PROMPT = "<|start|>user<|message|>Weather?<|eot|><|start|>assistant"
MUSE_THINK = " to=self<|message|>The user wants the weather; I should call a tool.<|eom|><|start|>assistant"


def _muse_call(n: str, a: dict[str, Any], i: int) -> str:
    return (f' to={n}<|message|><atem:function_calls>\n<atem:invoke name="{n}">\n'
            + _xml(n, a, '<atem:parameter name="{key}">', "</atem:parameter>\n") + "</atem:invoke>\n</atem:function_calls>")


QWEN_PROMPT = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n"
QWEN_THINK = "The user wants the weather; I should call a tool.\n</think>\n\n"
DS_PROMPT = "<｜User｜>Weather?<｜Assistant｜><think>"
DS_THINK = "The user wants the weather; I should call a tool.</think>"

FAMILIES: dict[str, Family] = {f.fmt: f for f in [
    Family("hermes", "qwen3_6", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f'<tool_call>\n{{"name": "{n}", "arguments": {_j(a)}}}\n</tool_call>', sep="\n"),
    Family("qwen3_coder", "qwen3_6", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<tool_call>\n<function={n}>\n"
           + _xml(n, a, "<parameter={key}>\n", "\n</parameter>\n", python=True)
           + "</function>\n</tool_call>", sep="\n", xml=("<parameter=location>\n", "</parameter>")),
    Family("qwen3_5", "qwen3_6", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<tool_call>\n<function={n}>\n"
           + _xml(n, a, "<parameter={key}>\n", "\n</parameter>\n", py_scalars=True)
           + "</function>\n</tool_call>", sep="\n", xml=("<parameter=location>\n", "</parameter>")),
    Family("qwen3_6", "qwen3_6", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<tool_call>\n<function={n}>\n" + _xml(n, a, "<parameter={key}>\n", "\n</parameter>\n")
           + "</function>\n</tool_call>", sep="\n", xml=("<parameter=location>\n", "</parameter>")),
    Family("deepseek_v3", "deepseek_v4", "deepseek_v3", DS_PROMPT, DS_THINK,
           lambda n, a, i: f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{_j(a)}\n```<｜tool▁call▁end｜>",
           section=DS_CALLS, sep="\n"),
    Family("deepseek_v31", "deepseek_v4", "deepseek_v3", DS_PROMPT, DS_THINK,
           lambda n, a, i: f"<｜tool▁call▁begin｜>{n}<｜tool▁sep｜>{_j(a)}<｜tool▁call▁end｜>", section=DS_CALLS),
    Family("deepseek_v32", "deepseek_v4", "deepseek_v4", DS_PROMPT, DS_THINK, lambda n, a, i: _dsml(n, a),
           section=("\n\n<｜DSML｜function_calls>\n", "\n</｜DSML｜function_calls>"), sep="\n",
           xml=('<｜DSML｜parameter name="location" string="true">', "</｜DSML｜parameter>")),
    Family("deepseek_v4", "deepseek_v4", "deepseek_v4", DS_PROMPT, DS_THINK, lambda n, a, i: _dsml(n, a),
           section=("\n\n<｜DSML｜tool_calls>\n", "\n</｜DSML｜tool_calls>"), sep="\n",
           xml=('<｜DSML｜parameter name="location" string="true">', "</｜DSML｜parameter>")),
    Family("mistral", "magistral", "mistral", "[INST]Weather?[/INST]", "[THINK]I should call a tool.[/THINK]",
           lambda n, a, i: f"[TOOL_CALLS]{n}[ARGS]{_j(a)}"),
    Family("kimi_k2", "kimi", "kimi_k2",
           "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_assistant|>assistant<|im_middle|>",
           "<think>I should call a tool.</think>",
           lambda n, a, i: f"<|tool_call_begin|>functions.{n}:{i}<|tool_call_argument_begin|>{_j(a)}<|tool_call_end|>",
           section=("<|tool_calls_section_begin|>", "<|tool_calls_section_end|>")),
    Family("glm47", "glm", "glm47", "[gMASK]<sop><|user|>\nWeather?<|assistant|>",
           "<think>I should call a tool.</think>",
           lambda n, a, i: f"<tool_call>{n}" + _xml(n, a, "<arg_key>{key}</arg_key><arg_value>", "</arg_value>")
           + "</tool_call>", xml=("<arg_key>location</arg_key><arg_value>", "</arg_value>")),
    Family("glm45", "glm", "glm45", "[gMASK]<sop><|user|>\nWeather?<|assistant|>",
           "<think>I should call a tool.</think>\n",
           lambda n, a, i: f"<tool_call>{n}\n" + _xml(n, a, "<arg_key>{key}</arg_key>\n<arg_value>", "</arg_value>\n")
           + "</tool_call>", sep="\n", xml=("<arg_key>location</arg_key>\n<arg_value>", "</arg_value>")),
    Family("minimax_m2", "minimax", "minimax_m2", "]~b]user\nWeather?[e~[\n]~b]ai\n",
           "<think>\nI should call a tool.\n</think>\n\n",
           lambda n, a, i: f'<invoke name="{n}">\n' + _xml(n, a, '<parameter name="{key}">', "</parameter>\n")
           + "</invoke>\n", section=("<minimax:tool_call>\n", "</minimax:tool_call>"),
           xml=('<parameter name="location">', "</parameter>"), close_ends_value=True),
    Family("gemma4", "gemma", "gemma4", "<|turn>user\nWeather?<turn|>\n<|turn>model\n",
           "<|channel>thought\nI should call a tool.<channel|>",
           lambda n, a, i: f"<|tool_call>call:{n}{_gemma(a)}<tool_call|>", kwargs={"enable_thinking": True},
           xml=('{location:<|"|>', '<|"|>')),
    # the template-reading format over Gemma 4's response template (thinkgate/testing/vocabularies.py): Gemma 4's calls
    Family("hf", "gemma_template", "hf", "<|turn>user\nWeather?<turn|>\n<|turn>model\n",
           "<|channel>thought\nI should call a tool.<channel|>",
           lambda n, a, i: f"<|tool_call>call:{n}{_gemma(a)}<tool_call|>", kwargs={"enable_thinking": True},
           xml=('{location:<|"|>', '<|"|>')),
    Family("llama3_json", "llama", None, "<|start_header_id|>assistant<|end_header_id|>\n\n", "",
           lambda n, a, i: f'{{"name": "{n}", "parameters": {_j(a)}}}', sep="; "),
    Family("openai", "harmony", "openai_gptoss", "<|start|>user<|message|>Weather?<|end|><|start|>assistant",
           "<|channel|>analysis<|message|>I should call a tool.<|end|><|start|>assistant",
           lambda n, a, i: f"<|channel|>commentary to=functions.{n} <|constrain|>json<|message|>{_j(a)}"),
    # -- json_lists: models without a reasoning parser here; their calls as their templates write them
    Family("phi4_mini_json", "qwen3_6", None, "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", "",
           lambda n, a, i: f'{{"name": "{n}", "arguments": {_j(a)}}}', section=("functools[", "]"), sep=", "),
    Family("xlam", "qwen3_6", None, "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", "",
           lambda n, a, i: f'{{"name": "{n}", "arguments": {_j(a)}}}', section=("[", "]"), sep=", "),
    Family("jamba", "jamba", None, "<|bom|>user\nWeather?<|eom|><|bom|>assistant\n", "",
           lambda n, a, i: f'{{"name": "{n}", "arguments": {_j(a)}}}', section=("<tool_calls>[", "]</tool_calls>"),
           sep=", "),
    Family("granite", "granite", None, "<|start_of_role|>user<|end_of_role|>Weather?<|end_of_text|>\n"
           "<|start_of_role|>assistant<|end_of_role|>", "",
           lambda n, a, i: f'{{"name": "{n}", "arguments": {_j(a)}}}', section=("<|tool_call|>[", "]"), sep=", "),
    Family("granite_20b_fc", "qwen3_6", None, "USER: Weather?\nASSISTANT:", "",
           lambda n, a, i: f'<function_call> {{"name": "{n}", "arguments": {_j(a)}}}'),
    Family("internlm", "internlm", None, "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n", "",
           lambda n, a, i: f'<|action_start|><|plugin|>\n{{"name": "{n}", "arguments": {_j(a)}}}<|action_end|>'),
    # -- xml_a (synthetic vocabularies but mimo's: thinkgate/testing/vocabularies.py)
    Family("seed_oss", "seed", "seed_oss", "<seed:bos>user\nWeather?<seed:eos><seed:bos>assistant\n",
           "<seed:think>I should call a tool.</seed:think>\n",
           lambda n, a, i: f"<seed:tool_call>\n<function={n}>\n" + _xml(n, a, "<parameter={key}>", "</parameter>\n")
           + "</function>\n</seed:tool_call>", sep="\n", xml=("<parameter=location>", "</parameter>"), close_ends_value=True),
    Family("zaya", "zaya", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<zyphra_tool_call>\n<function={n}>\n" + _xml(n, a, "<parameter={key}>\n", "\n</parameter>\n")
           + "</function>\n</zyphra_tool_call>", sep="\n", xml=("<parameter=location>\n", "</parameter>")),
    Family("mimo", "qwen3_6", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<tool_call><function={n}>" + _xml(n, a, "<parameter={key}>", "</parameter>")
           + "</function></tool_call>", xml=("<parameter=location>", "</parameter>"), close_ends_value=True),
    Family("longcat", "longcat", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f'<longcat_tool_call>\n{{"name": "{n}", "arguments": {_j(a)}}}\n</longcat_tool_call>', sep="\n"),
    Family("hunyuan_a13b", "hunyuan", "hunyuan_a13b", "<|startoftext|>Weather?<|extra_0|>",
           "<think>\nI should call a tool.\n</think>\n<answer>\n",
           lambda n, a, i: f'{{"name": "{n}", "arguments": {_j(a)}}}', section=("<tool_calls>[", "]</tool_calls>"),
           sep=", "),
    Family("hy_v3", "hy", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<tool_call>{n}<tool_sep>\n" + _xml(n, a, "<arg_key>{key}</arg_key>\n<arg_value>", "</arg_value>\n")
           + "</tool_call>\n", section=("<tool_calls>\n", "</tool_calls>"),
           xml=("<arg_key>location</arg_key>\n<arg_value>", "</arg_value>")),
    Family("hy_v4", "hy", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<tool_call>{n}" + _xml(n, a, "<arg_key>{key}</arg_key><arg_value>", "</arg_value>")
           + "</tool_call>", section=("<tool_calls>", "</tool_calls>"),
           xml=("<arg_key>location</arg_key><arg_value>", "</arg_value>")),
    Family("step3", "step3", "step3", "<|BOT|>user\nWeather?<|EOT|><|BOT|>assistant\n<think>\n",
           "I should call a tool.\n</think>\n",
           lambda n, a, i: f'<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="{n}">\n'
           + _xml(n, a, '<steptml:parameter name="{key}">', "</steptml:parameter>\n") + "</steptml:invoke><｜tool_call_end｜>",
           section=("<｜tool_calls_begin｜>\n", "\n<｜tool_calls_end｜>"), sep="\n",
           xml=('<steptml:parameter name="location">', "</steptml:parameter>"), close_ends_value=True),
    Family("minicpm5", "qwen3_6", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f'<function name="{n}">' + _xml(n, a, '<param name="{key}">', "</param>") + "</function>",
           sep="\n", xml=('<param name="location">', "</param>"), close_ends_value=True),
    # -- xml_b
    Family("deepseek_v41", "deepseek_v4", "deepseek_v4", DS_PROMPT, DS_THINK, lambda n, a, i: _dsml41(n, a),
           section=("\n\n<｜DSML｜ calls>\n", "\n</｜DSML｜ calls>"), sep="\n",
           xml=('<｜DSML｜ parameter name="location" string="true">', "</｜DSML｜ parameter>")),
    Family("dots", "dots", None, "<|userprompt|>Weather?<|endofuserprompt|><|response|>", "",
           lambda n, a, i: f'<invoke name="{n}">\n' + _xml(n, a, '<parameter name="{key}">', "</parameter>\n")
           + "</invoke>\n", section=("<dots_function_call>\n", "</dots_function_call>"),
           xml=('<parameter name="location">', "</parameter>"), close_ends_value=True),
    Family("ripple", "deepseek_v4", None, DS_PROMPT + "</think>", "",
           lambda n, a, i: f'<tool_call>\n{{"name": "{n}", "arguments": {_j(a)}}}\n</tool_call>', sep="\n"),
    Family("plamo3", "plamo", None, "Weather?", "",
           lambda n, a, i: "<|plamo:begin_tool_request:plamo|><|plamo:begin_tool_name:plamo|>" + n
           + "<|plamo:end_tool_name:plamo|><|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>"
           + _j(a) + "<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|>",
           section=("<|plamo:begin_tool_requests:plamo|>", "<|plamo:end_tool_requests:plamo|>")),
    Family("k2_horizon", "ifm", None, QWEN_PROMPT[:-len("<think>\n")], "",
           lambda n, a, i: f"<ifm|tool_call>{n}"
           + _xml(n, a, "<ifm|arg_key>{key}</ifm|arg_key><ifm|arg_value>", "</ifm|arg_value>") + "</ifm|tool_call>",
           section=("<ifm|tool_calls>", "</ifm|tool_calls>"), sep="\n",
           xml=("<ifm|arg_key>location</ifm|arg_key><ifm|arg_value>", "</ifm|arg_value>")),
    Family("cohere_command3", "cohere", "cohere_command",
           "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>Weather?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>",
           "<|START_THINKING|>I should call a tool.<|END_THINKING|>",
           lambda n, a, i: f'{{"tool_call_id": "{i}", "tool_name": "{n}", "parameters": {_j(a)}}}',
           section=("<|START_ACTION|>[\n    ", "\n]<|END_ACTION|>"), sep=",\n    "),
    # -- the pythonic group
    Family("pythonic", "llama", None, "<|start_header_id|>assistant<|end_header_id|>\n\n", "",
           lambda n, a, i: f"{n}({_py_kwargs(a)})", section=("[", "]"), sep=", "),
    Family("llama4_pythonic", "llama4", None, "<|header_start|>assistant<|header_end|>\n\n", "",
           lambda n, a, i: f"{n}({_py_kwargs(a)})", section=("[", "]"), sep=", "),
    Family("olmo3", "qwen3_6", None, "<|im_start|>assistant\n", "",
           lambda n, a, i: f"{n}({_py_kwargs(a, olmo=True)})", section=("<function_calls>\n", "\n</function_calls>"),
           sep="\n"),
    Family("lfm2", "lfm2", None, "<|im_start|>assistant\n", "",
           lambda n, a, i: f"{n}({_py_kwargs(a)})", section=("<|tool_call_start|>[", "]<|tool_call_end|>"), sep=", "),
    Family("functiongemma", "functiongemma", None, "<start_of_turn>model\n", "",
           lambda n, a, i: f"<start_function_call>call:{n}{_gemma_escape(a)}<end_function_call>",
           xml=("{location:<escape>", "<escape>")),
    Family("gigachat3", "gigachat", None, "assistant<|role_sep|>\n", "",
           lambda n, a, i: '<|function_call|>{"name": "' + n + '", "arguments": ' + _j(a) + "}"),
    Family("apertus", "apertus", None, "<|assistant_start|>", "",
           lambda n, a, i: f'{{"{n}": {_j(a)}}}', section=("<|tools_prefix|>[", "]<|tools_suffix|>"), sep=", "),
    # Inkling: the thinking block, then a text block whose kind token ends the thinking (so the grammar applies
    # from there, as after other families' end markers); the calls' blocks follow it, as the template writes
    # them (a call right after the thinking block, its header in the thinking: test_tool_formats.IMPLICIT)
    Family("inkling", "inkling", "inkling", "<|message_user|><|content_text|>Weather?<|end_message|><|message_model|>",
           "<|content_thinking|>I should call a tool.<|end_message|><|message_model|><|content_text|>",
           lambda n, a, i: f'<|message_model|>{n}<|content_invoke_tool_json|>{{"name":"{n}","args":'
           + json.dumps(a, ensure_ascii=False, separators=(",", ":")) + "}<|end_message|>",
           section=("<|end_message|>", "")),
    # -- MiniMax M3 (last: a family added at the end leaves the other formats' corpus windows where they were)
    Family("minimax_m3", "minimax_m3", "minimax_m3", "]~b]user\nWeather?[e~[\n]~b]ai\n",
           "<mm:think>I should call a tool.</mm:think>",
           lambda n, a, i: f'{M3}<invoke name="{n}">{_m3(a)}{M3}</invoke>\n',
           section=(f"{M3}<tool_call>\n", f"{M3}</tool_call>")),
    # -- Kimi K3 (XTML channels): the block starts at the response channel's close, its opening left out (the
    # generation prefix holds it when thinking is off; the grammar and the readers take both)
    Family("kimi_k3", "kimi_k3", "kimi_k3",
           '<|open|>message role="user"<|sep|>Weather?<|close|>message<|sep|><|end_of_msg|>'
           '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>',
           "I should call a tool.<|close|>think<|sep|>", lambda n, a, i: _xtml_call(n, a, i + 1),
           section=("<|close|>response<|sep|><|open|>tools<|sep|>", "<|close|>tools<|sep|><|close|>message<|sep|>"),
           xml=('<|open|>argument key="location" type="string"<|sep|>', "<|close|>")),
    # -- muse: a call is a message of its own (the first one's "<|start|>assistant" is the thinking's / prompt's)
    *[Family(fmt, "muse", fmt, MUSE_PROMPT, MUSE_THINK, _muse_call, sep="<|eom|><|start|>assistant",
             xml=('<atem:parameter name="location">', "</atem:parameter>"), close_ends_value=True)
      for fmt in ("muse", "muse_glimmer")],
    # -- IQuest-Q1 (SGLang's iquest_q1): GLM-4.7's keyed arguments in <iquest_tool_call>; the prompt opens the
    # thought (last: a family added at the end leaves the other formats' corpus windows where they were)
    Family("iquest_q1", "iquest", "iquest_q1", "<|iquest_assistant|><think>", "I should call a tool.</think>",
           lambda n, a, i: f"<iquest_tool_call>{n}" + _xml(n, a, "<arg_key>{key}</arg_key><arg_value>", "</arg_value>")
           + "</iquest_tool_call>", xml=("<arg_key>location</arg_key><arg_value>", "</arg_value>")),
    # -- SGLang-only names. GigaChat 3.5 with its template's reasoning=True (the generation prompt opens <think>;
    # SGLang reads it with DeepSeek-R1's parser); Spark-X2.5 with Qwen3's (its README: --reasoning-parser qwen3)
    Family("gigachat35", "gigachat35", "deepseek_r1",
           "user<|role_sep|>\nWeather?<|message_sep|>\n\nassistant<|role_sep|>\n<think>",
           "The user wants the weather; I should call a tool.</think>\n\n", lambda n, a, i: _gcml(n, a),
           section=("<｜GCML｜tool_calls>\n", "\n</｜GCML｜tool_calls>"), sep="\n",
           xml=('<｜GCML｜parameter name="location" string="true">', "</｜GCML｜parameter>")),
    Family("spark25", "spark", "qwen3", QWEN_PROMPT, QWEN_THINK,
           lambda n, a, i: f"<tool_call>{n}\n" + _xml(n, a, "<arg_key>{key}</arg_key><arg_value>", "</arg_value>\n")
           + "</tool_call>", sep="\n", xml=("<arg_key>location</arg_key><arg_value>", "</arg_value>")),
]}
FORMATS = list(FAMILIES)


# --------------------------------------------------------------------------------------------------
# driving the manager

_RID = [0]


def bound(fmt: str) -> dict[str, Any]:
    """``{"vocabulary": ...}`` for a format whose syntax its model's response template gives (``hf`` / ``beam``:
    the family's template vocabulary); ``{}`` for every other format, whose constraint and readers these
    tests build without a vocabulary."""
    from thinkgate.structured_output.tools import get_tool_format
    from thinkgate.structured_output.tools.template import ResponseTemplateFormat

    return {"vocabulary": vocab(FAMILIES[fmt].vocab)} if isinstance(get_tool_format(fmt), ResponseTemplateFormat) else {}


def add_ready_request(fam: Family, constraint) -> tuple[StructuredOutputManager, str]:
    mgr = manager(fam.vocab, fam.parser)
    _RID[0] += 1
    rid = f"r{_RID[0]}"
    mgr.add_request(rid, constraint, vocab(fam.vocab).encode(fam.prompt), chat_template_kwargs=fam.kwargs or None,
                    include_reasoning=fam.include_reasoning)
    deadline = time.monotonic() + 60
    while not mgr.is_compiled(rid) and time.monotonic() < deadline:
        time.sleep(0.002)
    assert mgr.is_compiled(rid) and mgr.error(rid) is None, mgr.error(rid)
    return mgr, rid


def _masked_out(mgr: StructuredOutputManager, rid: str, t: int) -> bool:
    batch = mgr.grammar_bitmask([rid])
    if batch is None or not len(batch):
        return False
    return not ((int(batch.bitmask[0, t >> 5]) >> (t & 31)) & 1)


def run_stream(fam: Family, constraint, ids: list[int], *, check_mask: bool = True) -> int | None:
    """Feed the prompt, then ``ids`` one token at a time (with ``check_mask``, each also checked
    against that step's bitmask). Returns the index of the first rejected token, or None."""
    mgr, rid = add_ready_request(fam, constraint)
    try:
        r = replay(mgr, rid, ids, check_mask=check_mask)
    finally:
        mgr.remove_request(rid)
    assert r.disagreement is None, r.message
    assert r.status == "error" or r.accepted == len(ids), f"terminated early at token {r.accepted - 1}"
    return r.accepted if r.status == "error" else None


def finish(fam: Family, constraint, output: str, *, check_mask: bool = True) -> None:
    """The whole stream passes token by token, and a stop token then ends it."""
    v = vocab(fam.vocab)
    ids = v.encode(output) + [min(v.stop_token_ids)]
    rejected = run_stream(fam, constraint, ids, check_mask=check_mask)
    assert rejected is None, f"{fam.fmt}: rejected at token {rejected}: {v.decode(ids[:rejected])[-80:]!r} + " \
                             f"{v.decode(ids[rejected:rejected + 1])!r}"


def assert_rejected_at(fam: Family, constraint, good_prefix: str, bad_text: str, *, offset: int = 0,
                       bad_ids: list[int] | None = None) -> None:
    """The tokens of ``good_prefix`` and the first ``offset`` tokens of ``bad_text`` are accepted; the
    next one is masked out and rejected."""
    v = vocab(fam.vocab)
    pre = v.encode(good_prefix)
    bad = bad_ids if bad_ids is not None else v.encode(bad_text)
    ok, wrong = pre + bad[:offset], bad[offset]
    mgr, rid = add_ready_request(fam, constraint)
    try:
        res = mgr.accept_tokens(rid, ok)
        assert res.status == "ok", f"{fam.fmt}: the valid prefix was rejected: {res.message} ({v.decode(ok)[-80:]!r})"
        assert _masked_out(mgr, rid, wrong), f"{fam.fmt}: {v.decode([wrong])!r} is allowed after {v.decode(ok)[-60:]!r}"
        res = mgr.accept_tokens(rid, [wrong])
        assert res.status == "error", f"{fam.fmt}: {v.decode([wrong])!r} accepted after {v.decode(ok)[-60:]!r}"
    finally:
        mgr.remove_request(rid)



# ================================================================================================
# benchmarks (tests/test_bench_*.py): what ``python -m bench ...`` prints and writes, checked for what
# can break (the table, the rows and their keys), not for the benchmark's own arithmetic

# what bench.harness.write_rows adds to every row
ROW_META = ("bench", "date", "python", "torch", "xgrammar")


def assert_table(text: str, columns: Sequence[str]) -> None:
    """``text`` (a benchmark's stdout) has a table header line naming ``columns`` in this order."""
    for line in text.splitlines():
        words = line.split()
        if [w for w in words if w in columns] == list(columns):
            return
    raise AssertionError(f"no table header with the columns {list(columns)} in:\n{text}")


def read_rows(path: Path, bench: str, keys: Sequence[str]) -> list[dict[str, Any]]:
    """The rows a benchmark appended to ``path``: one JSON object per line (as Python's json reads it:
    ``python -m bench loop`` writes NaN for a ratio whose floor measured 0), tagged with the benchmark's
    name and the machine facts, each with every one of ``keys``."""
    rows = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        row = json.loads(line)
        assert isinstance(row, dict), f"line {n}: {line}"
        missing = [k for k in (*ROW_META, *keys) if k not in row]
        assert not missing, f"line {n} lacks {missing}: {line}"
        assert row["bench"] == bench, f"line {n}: {line}"
        rows.append(row)
    assert rows, f"{path} has no rows"
    return rows


# (renderer, reasoning parser): every renderer with its family's parser, and the other pairings models use
PAIRINGS: list[tuple[str, str | None]] = [(r, FAMILIES[x.format].parser) for r, x in RENDERERS.items()] + [
    ("deepseek_v3", "deepseek_r1"),   # DeepSeek-R1 writes V3's calls
    ("glm47", "glm45"),               # GLM-4.7's calls with the GLM-4.5 reasoning name
]

_PARSERS: dict[tuple[str, str | None], Parser] = {}


def parser_for(renderer: str, reasoning: str | None) -> Parser:
    key = (renderer, reasoning)
    if key not in _PARSERS:
        fmt = RENDERERS[renderer].format
        _PARSERS[key] = Parser(vocab(FAMILIES[fmt].vocab), reasoning, fmt)
    return _PARSERS[key]


# ================================================================================================
# the ``json`` tool format: the document of calls vLLM's required / named JSON schema admits
# (vllm/tool_parsers/utils.py: an array of {"name", "parameters"} objects; ours builds it for a named
# function too, with one item)

# (vocabulary, reasoning parser, the thinking before the document): Qwen3.6 and DeepSeek V4
JSON_PAIRINGS: list[tuple[str, str]] = [("qwen3_6", "qwen3"), ("deepseek_v4", "deepseek_v4")]
JSON_STYLES = ("default", "compact", "indent", "newlines")


def json_calls_document(calls: Sequence[tuple[str, dict[str, Any]]], style: str = "default",
                        params_first: bool = False, ascii_escapes: bool = False) -> str:
    """The calls as the ``json`` format's document, written in ``style`` (``json.dumps`` defaults,
    compact separators, ``indent=2``, or a newline after each call's ``,``), with ``"parameters"``
    before ``"name"`` when ``params_first``, non-ASCII as ``\\uXXXX`` when ``ascii_escapes``."""
    items = [{"parameters": a, "name": n} if params_first else {"name": n, "parameters": a} for n, a in calls]
    if style == "compact":
        return json.dumps(items, ensure_ascii=ascii_escapes, separators=(",", ":"))
    if style == "indent":
        return json.dumps(items, ensure_ascii=ascii_escapes, indent=2)
    if style == "newlines":
        return "[" + ",\n ".join(json.dumps(x, ensure_ascii=ascii_escapes) for x in items) + "]\n"
    return json.dumps(items, ensure_ascii=ascii_escapes)


def json_thinking(vocab_name: str) -> tuple[str, str]:
    """(the prompt, the thinking the output starts with) for a ``JSON_PAIRINGS`` vocabulary."""
    fam = FAMILIES["hermes" if vocab_name == "qwen3_6" else "deepseek_v4"]
    return fam.prompt, fam.thinking


def request_for(renderer: str, reasoning: str | None, **kw: Any) -> Any:
    """A request view of :func:`parser_for`'s Parser with the family's prompt and kwargs (tools: the corpus)."""
    fam = FAMILIES[RENDERERS[renderer].format]
    p = parser_for(renderer, reasoning)
    kw.setdefault("tools", TOOLS)
    return p.request(prompt_token_ids=p.vocabulary.encode(fam.prompt), chat_template_kwargs=fam.kwargs or None, **kw)


def stream_chunks(req: Any, ids: Sequence[int], cuts: Sequence[int], give_text: bool,
                  finish_reason: str = "stop") -> tuple[list[dict[str, Any] | None], Any]:
    """Feed ``ids`` cut at ``cuts`` to a request view (with the detokenizer's text when ``give_text``):
    (the deltas, the last one the finish's delta; the finish's ``StreamEnd``)."""
    detok = detokenizer(req.vocabulary)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ids)}), len(ids)]
    deltas = []
    for a, b in zip(bounds, bounds[1:]):
        ch = list(ids[a:b])
        deltas.append(req.parse_delta(ch, detok(ch) if give_text else None))
    end = req.finish(finish_reason)
    deltas.append(end.delta)
    return deltas, end


# the batch of thinking requests with JSON schemas that the engine integration tests step (vLLM in
# tests/integration/test_vllm_structured_output.py, SGLang in engine_sglang/test_sglang_structured_output.py)
BATCH_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "temp": {"type": "integer"}},
                "required": ["city", "temp"], "additionalProperties": False}
BATCH_SCHEMA2 = {"type": "object",
                 "properties": {"ok": {"type": "boolean"}, "n": {"type": "array", "items": {"type": "integer"}, "maxItems": 3}},
                 "required": ["ok", "n"], "additionalProperties": False}
BATCH_THINK = [
    'The user wants {"city"? maybe "temp": [-3]!! and }}} then',
    "Short.",
    'Plan: {"ok": maybe} ... n = [1, 2, 3, 4]',
    "hmm " * 12,
]
BATCH_ANSWERS = [
    (BATCH_SCHEMA, '{"city": "Paris", "temp": 18}'),
    (BATCH_SCHEMA, '{"city": "Oslo", "temp": "cold"}'),       # a string where an integer goes: masked
    (BATCH_SCHEMA2, '{"ok": true, "n": [1, 2]}'),
    (BATCH_SCHEMA2, '{"ok": "yes", "n": [1, 2, 3, 4, 5]}'),   # wrong type, too many items: masked
    (BATCH_SCHEMA, '{"city":' + " " * 40 + '"Rome", "temp": 20}'),  # valid, but past thinkgate's whitespace bound
]
BATCH_MAX_WS = 16  # thinkgate's default bound on a whitespace gap


# ================================================================================================
# compilation: two compiled forms of one grammar compared along random walks


def assert_same_masks_along_walks(a, b, vocab: Vocabulary, *, walks: int, steps: int, prefer) -> None:
    """Random walks through ``a`` and ``b`` (xgrammar compiled grammars of one language): at every step their
    rows are equal and both accept the token drawn. Half of the time the token comes from ``prefer(allowed)``
    (a list of the allowed ids to steer walks into the parts under test) when it is not empty. Fresh seed per
    call, named in every failure."""
    import random

    import numpy as np
    import torch
    import xgrammar as xgr

    width = (vocab.logits_width + 31) // 32
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    ba, bb = torch.zeros((1, width), dtype=torch.int32), torch.zeros((1, width), dtype=torch.int32)
    for walk in range(walks):
        ma, mb = xgr.GrammarMatcher(a), xgr.GrammarMatcher(b)
        for step in range(steps):
            if ma.is_terminated():
                break
            ma.fill_next_token_bitmask(ba)
            mb.fill_next_token_bitmask(bb)
            assert torch.equal(ba, bb), f"seed {seed}: walk {walk} step {step}"
            allowed = np.flatnonzero(np.unpackbits(ba.numpy().view(np.uint8), bitorder="little"))
            allowed = allowed[allowed < vocab.logits_width]
            near = prefer(allowed)
            t = int(rng.choice(near if near and rng.random() < 0.5 else allowed))
            assert ma.accept_token(t) and mb.accept_token(t), f"seed {seed}: walk {walk} step {step}"
        assert ma.is_terminated() == mb.is_terminated()
