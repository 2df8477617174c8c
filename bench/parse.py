"""``python -m bench parse``: the front-end Parser's per-delta cost vs output length, per tool format.

For each format (its model's reasoning parser and vocabulary, :data:`CASES`) and each output length N
(default 1,000, 10,000 and 100,000 tokens, in the same run), a request view is opened and fed an output
of N tokens: the family's thinking, then content, then the tail: a sentence, one call to ``get_weather``
in the format's own syntax, and a closing sentence (none after harmony's call, which ends the turn). Everything before the last ``--window`` tokens is fed
in deltas of 512 tokens (untimed: it only builds the state); the last ``--window`` tokens, content then
the call, are fed **one token per delta** through ``parse_delta`` and each delta is timed. The table shows
the median / p90 / mean per-delta time over those deltas (all ``--repeat`` runs pooled) and ``ratio``: the
median at N over the median at the smallest N. A cost that grew with the output so far would give a ratio
near N_max / N_min (100 with the defaults); a per-delta cost that grows with the delta only gives a ratio
near 1. Every run checks that the call was read (the timed path is the real one).

The ``json`` format's output is a JSON array of calls (no content beside it): its N tokens are calls, and
its view is opened with tool_choice ``"required"`` always (``constrained=False`` without ``--constrained``:
the document is held and read at the end).
``--constrained`` opens the views with tool_choice ``"required"`` and ``constrained=True``: the calls then
stream as they are written (each name, then argument text), and the calls' deltas are timed on that path.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.harness import int_list

DESCRIPTION = "front-end Parser: per-delta cost (parse_delta) at 1k / 10k / 100k output tokens, per tool format"

_ARGS = '{"location": "Paris"}'
_CHATML = "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n"  # a ChatML turn, no thinking
_QWEN = ("<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n",
         "The user wants the weather; I should call a tool.\n</think>\n\n")
_DS = ("<｜User｜>Weather?<｜Assistant｜><think>", "The user wants the weather; I should call a tool.</think>")
_QWEN_XML = "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis\n</parameter>\n</function>\n</tool_call>"
_DSML_INVOKE = ('<｜DSML｜invoke name="get_weather">\n<｜DSML｜parameter name="location" string="true">Paris'
                '</｜DSML｜parameter>\n</｜DSML｜invoke>\n')

# format -> (reasoning parser, prompt, thinking, the call as the model writes it)
CASES: dict[str, tuple[str | None, str, str, str]] = {
    "hermes": ("qwen3", *_QWEN, f'<tool_call>\n{{"name": "get_weather", "arguments": {_ARGS}}}\n</tool_call>'),
    "qwen3_coder": ("qwen3", *_QWEN, _QWEN_XML),
    "qwen3_5": ("qwen3", *_QWEN, _QWEN_XML),
    "qwen3_6": ("qwen3", *_QWEN, _QWEN_XML),
    "llama3_json": (None, "<|start_header_id|>assistant<|end_header_id|>\n\n", "",
                    f'{{"name": "get_weather", "parameters": {_ARGS}}}'),
    "mistral": ("mistral", "[INST]Weather?[/INST]", "[THINK]I should call a tool.[/THINK]",
                f"[TOOL_CALLS]get_weather[ARGS]{_ARGS}"),
    "deepseek_v3": ("deepseek_v3", *_DS, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n"
                    f"```json\n{_ARGS}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    "deepseek_v31": ("deepseek_v3", *_DS, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
                     f"{_ARGS}<｜tool▁call▁end｜><｜tool▁calls▁end｜>"),
    "deepseek_v32": ("deepseek_v4", *_DS, f"<｜DSML｜function_calls>\n{_DSML_INVOKE}</｜DSML｜function_calls>"),
    "deepseek_v4": ("deepseek_v4", *_DS, f"<｜DSML｜tool_calls>\n{_DSML_INVOKE}</｜DSML｜tool_calls>"),
    "kimi_k2": ("kimi_k2", "<|im_user|>user<|im_middle|>Weather?<|im_end|><|im_assistant|>assistant<|im_middle|>",
                "<think>I should call a tool.</think>",
                "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
                f"{_ARGS}<|tool_call_end|><|tool_calls_section_end|>"),
    "glm47": ("glm47", "[gMASK]<sop><|user|>\nWeather?<|assistant|>", "<think>I should call a tool.</think>",
              "<tool_call>get_weather<arg_key>location</arg_key><arg_value>Paris</arg_value></tool_call>"),
    "glm45": ("glm45", "[gMASK]<sop><|user|>\nWeather?<|assistant|>", "<think>I should call a tool.</think>\n",
              "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Paris</arg_value>\n</tool_call>"),
    "minimax_m2": ("minimax_m2", "]~b]user\nWeather?[e~[\n]~b]ai\n", "<think>\nI should call a tool.\n</think>\n\n",
                   '<minimax:tool_call>\n<invoke name="get_weather">\n<parameter name="location">Paris</parameter>\n'
                   "</invoke>\n</minimax:tool_call>"),
    "gemma4": ("gemma4", "<|turn>user\nWeather?<turn|>\n<|turn>model\n",
               "<|channel>thought\nI should call a tool.<channel|>",
               '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'),
    "hf": ("hf", "<|turn>user\nWeather?<turn|>\n<|turn>model\n", "<|channel>thought\nI should call a tool.<channel|>",
           '<|tool_call>call:get_weather{location:<|"|>Paris<|"|>}<tool_call|>'),
    "openai": ("openai_gptoss", "<|start|>user<|message|>Weather?<|end|><|start|>assistant",
               "<|channel|>analysis<|message|>I should call a tool.<|end|><|start|>assistant<|channel|>commentary"
               "<|message|>",
               f"<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
               f"<|message|>{_ARGS}<|call|>"),
    "json": ("qwen3", *_QWEN, f'{{"name": "get_weather", "parameters": {_ARGS}}}'),
    # Muse: the content is an answer message, then the call is a message of its own
    **{fmt: (fmt, "<|start|>user<|message|>Weather?<|eot|><|start|>assistant",
             " to=self<|message|>I should call a tool.<|eom|><|start|>assistant to=user<|message|>",
             '<|eom|><|start|>assistant to=get_weather<|message|><atem:function_calls>\n<atem:invoke name="get_weather">'
             '\n<atem:parameter name="location">Paris</atem:parameter>\n</atem:invoke>\n</atem:function_calls>')
       for fmt in ("muse", "muse_glimmer")},
    # json_lists (no reasoning parser: these models do not think here)
    "phi4_mini_json": (None, _CHATML, "", f'functools[{{"name": "get_weather", "arguments": {_ARGS}}}]'),
    "xlam": (None, _CHATML, "", f'{{"name": "get_weather", "arguments": {_ARGS}}}'),
    "jamba": (None, "<|bom|>user\nWeather?<|eom|><|bom|>assistant\n", "",
              f'<tool_calls>[{{"name": "get_weather", "arguments": {_ARGS}}}]</tool_calls>'),
    "granite": (None, "<|start_of_role|>user<|end_of_role|>Weather?<|end_of_text|>\n<|start_of_role|>assistant"
                "<|end_of_role|>", "", f'<|tool_call|>[{{"name": "get_weather", "arguments": {_ARGS}}}]'),
    "granite_20b_fc": (None, "USER: Weather?\nASSISTANT:", "",
                       f'<function_call> {{"name": "get_weather", "arguments": {_ARGS}}}'),
    "internlm": (None, _CHATML, "", '<|action_start|><|plugin|>\n{"name": "get_weather", "arguments": '
                 f'{_ARGS}}}<|action_end|>'),
    # -- xml_a (synthetic vocabularies but mimo's and minicpm5's: thinkgate/testing/vocabularies.py)
    "seed_oss": ("seed_oss", "<seed:bos>user\nWeather?<seed:eos><seed:bos>assistant\n",
                 "<seed:think>I should call a tool.</seed:think>\n",
                 "<seed:tool_call>\n<function=get_weather>\n<parameter=location>Paris</parameter>\n</function>\n"
                 "</seed:tool_call>"),
    "zaya": ("qwen3", *_QWEN, _QWEN_XML.replace("tool_call>", "zyphra_tool_call>")),
    "mimo": ("qwen3", *_QWEN, "<tool_call><function=get_weather><parameter=location>Paris</parameter></function>"
             "</tool_call>"),
    "longcat": ("qwen3", *_QWEN, f'<longcat_tool_call>\n{{"name": "get_weather", "arguments": {_ARGS}}}\n'
                "</longcat_tool_call>"),
    "hunyuan_a13b": ("hunyuan_a13b", "<|startoftext|>Weather?<|extra_0|>", "<think>\nI should call a tool.\n</think>\n"
                     "<answer>\n", f'<tool_calls>[{{"name": "get_weather", "arguments": {_ARGS}}}]</tool_calls>'),
    "hy_v3": ("qwen3", *_QWEN, "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>location</arg_key>\n"
              "<arg_value>Paris</arg_value>\n</tool_call>\n</tool_calls>"),
    "hy_v4": ("qwen3", *_QWEN, "<tool_calls><tool_call>get_weather<arg_key>location</arg_key><arg_value>Paris"
              "</arg_value></tool_call></tool_calls>"),
    "step3": ("step3", "<|BOT|>user\nWeather?<|EOT|><|BOT|>assistant\n<think>\n", "I should call a tool.\n</think>\n",
              '<｜tool_calls_begin｜>\n<｜tool_call_begin｜>function<｜tool_sep｜><steptml:invoke name="get_weather">\n'
              '<steptml:parameter name="location">Paris</steptml:parameter>\n</steptml:invoke><｜tool_call_end｜>\n'
              "<｜tool_calls_end｜>"),
    "minicpm5": ("qwen3", *_QWEN, '<function name="get_weather"><param name="location">Paris</param></function>'),
    # -- pythonic group and xml_b (no reasoning parser where the family has none in thinkgate)
    "pythonic": (None, _CHATML, "", "get_weather(location='Paris')"),
    "llama4_pythonic": (None, _CHATML, "", "get_weather(location='Paris')"),
    "olmo3": (None, _CHATML, "", "<function_calls>\nget_weather(location='Paris')\n</function_calls>"),
    "lfm2": (None, _CHATML, "", '<|tool_call_start|>[get_weather(location="Paris")]<|tool_call_end|>'),
    "functiongemma": (None, _CHATML, "", "<start_function_call>call:get_weather{location:<escape>Paris<escape>}"
                      "<end_function_call>"),
    "gigachat3": (None, _CHATML, "", f'<|function_call|>{{"name": "get_weather", "arguments": {_ARGS}}}'),
    "apertus": (None, _CHATML, "", f'<|tools_prefix|>[{{"get_weather": {_ARGS}}}]<|tools_suffix|>'),
    "ripple": ("qwen3", *_QWEN, f'<tool_call>\n{{"name": "get_weather", "arguments": {_ARGS}}}\n</tool_call>'),
    "dots": ("qwen3", *_QWEN, '<dots_function_call>\n<invoke name="get_weather">\n<parameter name="location">Paris'
             '</parameter>\n</invoke>\n</dots_function_call>'),
    "k2_horizon": ("qwen3", *_QWEN, "<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>location</ifm|arg_key>"
                   "<ifm|arg_value>Paris</ifm|arg_value></ifm|tool_call></ifm|tool_calls>"),

    "cohere_command3": (None, _CHATML, "", '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
                        f'"parameters": {_ARGS}}}\n]<|END_ACTION|>'),
    "deepseek_v41": ("deepseek_v4", *_DS, '<｜DSML｜ calls>\n<｜DSML｜ invoke name="get_weather">\n<｜DSML｜ parameter '
                     'name="location" string="true">Paris</｜DSML｜ parameter>\n</｜DSML｜ invoke>\n</｜DSML｜ calls>'),
    "minimax_m3": ("minimax_m3", "]~b]user\nWeather?[e~[\n]~b]ai\n", "<mm:think>I should call a tool.</mm:think>",
                   '{ns}<tool_call>\n{ns}<invoke name="get_weather">{ns}<location>Paris{ns}</location>{ns}</invoke>\n'
                   "{ns}</tool_call>".replace("{ns}", "]<]minimax[>[")),
    "plamo3": (None, _CHATML, "", "<|plamo:begin_tool_requests:plamo|><|plamo:begin_tool_request:plamo|>"
               "<|plamo:begin_tool_name:plamo|>get_weather<|plamo:end_tool_name:plamo|>"
               "<|plamo:begin_tool_arguments:plamo|><|plamo:constrain|>json<|plamo:msg|>" + _ARGS +
               "<|plamo:end_tool_arguments:plamo|><|plamo:end_tool_request:plamo|><|plamo:end_tool_requests:plamo|>"),
    # Inkling: the content in a text block after the thinking block, the call a block of its own
    "inkling": ("inkling", "<|message_user|><|content_text|>Weather?<|end_message|><|message_model|>",
                "<|content_thinking|>The user wants the weather; I should call a tool.<|end_message|><|message_model|>"
                "<|content_text|>", '<|end_message|><|message_model|>get_weather<|content_invoke_tool_json|>'
                '{"name":"get_weather","args":' + _ARGS + "}<|end_message|>"),
    # Kimi K3: the response channel opens after the thinking; the content, then its close and the tools channel
    "kimi_k3": ("kimi_k3", '<|open|>message role="user"<|sep|>Weather?<|close|>message<|sep|><|end_of_msg|>'
                '<|open|>message role="assistant"<|sep|><|open|>think<|sep|>',
                "I should call a tool.<|close|>think<|sep|><|open|>response<|sep|>",
                '<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool="get_weather" index="1"<|sep|>'
                '<|open|>argument key="location" type="string"<|sep|>Paris<|close|>argument<|sep|><|close|>call<|sep|>'
                "<|close|>tools<|sep|><|close|>message<|sep|>"),
    # IQuest-Q1 (SGLang's iquest_q1): the prompt opens the thought
    "iquest_q1": ("iquest_q1", "<|iquest_assistant|><think>", "I should call a tool.</think>",
                  "<iquest_tool_call>get_weather<arg_key>location</arg_key><arg_value>Paris</arg_value>"
                  "</iquest_tool_call>"),
    # GigaChat 3.5 (SGLang's gigachat35): the generation prompt opens the thought; GCML after a blank line
    "gigachat35": ("deepseek_r1", "user<|role_sep|>\nWeather?<|message_sep|>\n\nassistant<|role_sep|>\n<think>",
                   "I should call a tool.</think>\n\n",
                   '<｜GCML｜tool_calls>\n<｜GCML｜invoke name="get_weather">\n<｜GCML｜parameter name="location" '
                   'string="true">Paris</｜GCML｜parameter>\n</｜GCML｜invoke>\n</｜GCML｜tool_calls>'),
    # Spark-X2.5 (SGLang's spark25): read with Qwen3's reasoning parser, as its README runs it
    "spark25": ("qwen3", "<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n",
                "I should call a tool.\n</think>\n\n",
                "<tool_call>get_weather\n<arg_key>location</arg_key><arg_value>Paris</arg_value>\n</tool_call>"),
}
LIST_OUTPUT = ("json", "xlam", "pythonic", "llama4_pythonic")
"""Formats whose output is one list of calls (JSON, or Python calls for the pythonic two, whose reader takes
a list only when it is the whole output): the bench fills it with calls, not content; CASES holds one item."""
KWARGS: dict[str, dict[str, Any]] = {"gemma4": {"enable_thinking": True}, "hf": {"enable_thinking": True}}

CONTENT = ("The forecast for Paris is mild: 18 °C, light wind <3 m/s>, humidity {62%} [stable]. "
           "Côte d'Azur: 24 °C, ciel dégagé. 北京：晴，温度适中。 ")
TOOL = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]}}}


DEFAULT_FORMATS = ("hermes", "qwen3_6", "deepseek_v4", "gemma4", "openai", "mistral")
"""The default run (a few minutes on 2 cores): one format of each reader kind; any list of CASES runs too."""


def _formats(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in CASES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown formats {bad or text!r}; known: {', '.join(CASES)}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--formats", type=_formats, default=list(DEFAULT_FORMATS),
                   help=f"comma-separated tool formats (default {','.join(DEFAULT_FORMATS)}; known: {', '.join(CASES)})")
    p.add_argument("--sizes", type=int_list, default=[1000, 10000, 100000],
                   help="output lengths in tokens (default 1000,10000,100000)")
    p.add_argument("--window", type=int, default=200,
                   help="the last WINDOW tokens (content, then the call) are fed one per delta and timed (default 200)")
    p.add_argument("--repeat", type=int, default=3, help="runs per format and size, pooled (default 3)")
    p.add_argument("--constrained", action="store_true",
                   help="tool_choice required (a constrained request view: calls stream name first, then argument "
                        "text) instead of auto (calls go out once decided)")
    p.add_argument("--out", default=None, help="JSON-lines file for the rows (default bench-results/parse.jsonl)")


def _output(fmt: str, vocab: Any, n: int, window: int) -> tuple[list[int], int]:
    """The output ids of ``n`` tokens (at least the tail), and how many tokens come before the timed ones."""
    reasoning, _, thinking, call = CASES[fmt]
    head = vocab.encode(thinking) if thinking else []
    if fmt in LIST_OUTPUT:
        one = vocab.encode(call)
        sep = vocab.encode(", ")
        k = max(1, (n - 2) // (len(one) + len(sep)))
        ids = vocab.encode("[") + (one + sep) * (k - 1) + one + vocab.encode("]")
        ids = head + ids
        return ids, max(0, len(ids) - window)
    after = "" if fmt == "openai" else " Done."  # harmony's call ends with <|call|>, a stop token: the turn ends
    tail = vocab.encode("Let me check the weather. ") + vocab.encode(call) + (vocab.encode(after) if after else [])
    unit = vocab.encode(CONTENT)
    fill = max(0, n - len(head) - len(tail))
    ids = head + (unit * (fill // len(unit) + 1))[:fill] + tail
    return ids, max(0, len(ids) - window)


def run_format(fmt: str, sizes: list[int], window: int, repeat: int, constrained: bool = False) -> list[dict[str, Any]]:
    from bench.harness import progress, summarize
    from thinkgate.testing.vocabularies import FORMAT_VOCABULARY, format_vocabulary
    from thinkgate.structured_output import Parser

    reasoning, prompt_text, _, _ = CASES[fmt]
    vocab = format_vocabulary(fmt)
    parser = Parser(vocab, reasoning, fmt)
    prompt = vocab.encode(prompt_text)
    choice = "required" if fmt == "json" or constrained else "auto"
    clock = time.perf_counter_ns
    outputs = {n: _output(fmt, vocab, n, window) for n in sizes}
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    for rep in range(repeat):  # the sizes interleaved, so that a change of load touches them alike
        for n in sizes:
            ids, timed_from = outputs[n]
            if rep == 0:
                progress(f"{fmt}: {len(ids)} output tokens, the last {len(ids) - timed_from} timed")
            req = parser.request(tools=[TOOL], tool_choice=choice, prompt_token_ids=prompt,
                                 chat_template_kwargs=KWARGS.get(fmt), constrained=constrained)
            for a in range(0, timed_from, 512):
                req.parse_delta(ids[a:min(a + 512, timed_from)])
            names: list[str] = []
            args: dict[int, list[str]] = {}  # each call's argument fragments (json: one call per item)
            started: list[int] = []  # the calls whose first delta came in the timed deltas
            for t in ids[timed_from:]:
                t0 = clock()
                d = req.parse_delta([t])
                samples[n].append((clock() - t0) / 1e3)
                if d:
                    names += [c["function"]["name"] for c in d.get("tool_calls", ()) if "id" in c]
                    for c in d.get("tool_calls", ()):
                        started += [c["index"]] if "id" in c else []
                        args.setdefault(c["index"], []).append(c["function"]["arguments"])
            end = req.finish()
            if end.delta:
                names += [c["function"]["name"] for c in end.delta.get("tool_calls", ()) if "id" in c]
                for c in end.delta.get("tool_calls", ()):
                    started += [c["index"]] if "id" in c else []
                    args.setdefault(c["index"], []).append(c["function"]["arguments"])
            if "get_weather" not in names:
                raise RuntimeError(f"{fmt}: the call was not read at {n} tokens (the timed path is not the real one)")
            # the calls whose first delta was timed (json: calls begun in the untimed part are left out)
            whole = ["".join(args[c]) for c in started]
            bad = [a for a in whole if a != _ARGS]
            if bad:
                raise RuntimeError(f"{fmt}: a call's argument deltas join to {bad[0]!r}, not {_ARGS!r}")
    rows: list[dict[str, Any]] = []
    for n in sizes:
        s = summarize(samples[n])
        rows.append({"format": fmt, "mode": "constrained" if constrained else "auto", "reasoning": reasoning or "-",
                     "vocab": FORMAT_VOCABULARY[fmt],
                     "output_tokens": len(outputs[n][0]), "timed_deltas": len(samples[n]),
                     "delta_median_us": s.median_us, "delta_p90_us": s.p90_us, "delta_mean_us": s.mean_us})
    base = min(rows, key=lambda r: r["output_tokens"])
    for r in rows:
        r["ratio_vs_smallest"] = r["delta_median_us"] / base["delta_median_us"]
    return rows


def main(args: argparse.Namespace) -> int:
    from bench.harness import print_table, progress, write_rows

    rows: list[dict[str, Any]] = []
    for fmt in args.formats:
        rows += run_format(fmt, sorted(args.sizes), max(1, args.window), max(1, args.repeat), args.constrained)
    print_table(rows, ["format", "mode", "reasoning", "vocab", "output_tokens", "delta_median_us", "delta_p90_us",
                       "delta_mean_us", "ratio_vs_smallest"])
    if not args.no_write:
        path = write_rows("parse", rows, args.out)
        progress(f"rows appended to {path}")
    return 0
