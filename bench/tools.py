"""``python -m bench tools``: tool-choice constraints, per format and number of tools.

For each format and tool count (default 1, 10, 100 tools from the corpus ``tests/data/tools/corpus.json``;
past its 56 tools, renamed copies), a ``required`` request (``--choice auto``: an ``auto`` request with every tool
``strict``, free text or calls, against xgrammar's ``auto`` tag):

- ``build_ms``: our builder (request normalisation + structural tag), pure Python;
- ``cold_ms``: the compile on empty caches (``Compiler.compile`` on a fresh, started compiler: validation,
  then xgrammar's mask precomputation in a worker, the parent's part; the compiler's start-up is per model
  and not counted), median over ``--repeat`` cold compiles;
- ``cold_warm_ms``: the same on a fresh compiler started for the format (``Compiler(..., warm_up=
  tools.tool_format_warm_up(format))``: the format's call syntax compiled at start-up, as a server started
  with its tool parser can), alternated with ``cold_ms``; ``x_xgr_warm`` it over ``xgr_cold_ms``;
- ``swap1_ms``: right after it, on the same compiler, the tool set with its first tool dropped and a new
  one added (an agent's next turn: the shared tools' rules are in xgrammar's cache);
- ``mem_mb``: the compiled grammar's memory (``memory_size_bytes``);
- ``schema_cold_ms``: the same tools compiled cold with the format's keys in the schema's order only
  (what the formats that keep the caller's order compiled before they took any order, see
  ``tools/key_check.py``), alternated with ``cold_ms``; ``cold_x`` the median of the paired ratios
  (absent where the two constraints are the same: Gemma 4, tools of one property);
- ``cached_us``: the same constraint again (a cache hit: what every later request with these tools pays);
- ``xgr_cold_ms``: xgrammar's own ``get_model_structural_tag`` for the same tools (its reasoning off, but on
  for a format whose constraint covers the reasoning too: ``openai``'s harmony), compiled cold with
  xgrammar's defaults (its compiler cache on, cleared first) on the same vocabulary with xgrammar's usual
  TokenizerInfo (control tokens keep their text), where xgrammar has a tag for the format (the baseline;
  it lacks our fixes, see tests); ``xgr_nocache_ms`` the same with its cache off; ``xgr_swap1_ms`` its
  swapped tool set right after ``xgr_cold_ms``; ``xgr_mem_mb`` its memory; ``x_xgr``, ``swap1_x_xgr``
  and ``mem_x_xgr`` ours / xgrammar's (the issue-23 ratios: at most 1, 1 and 1.5);
- ``fill_us``: median time of one mask fill while the first tool's call is written (one request,
  one row: the per-step cost the constraint adds), ``fill_max_us`` its maximum.

Then a conformance table (``--no-conformance`` skips it): per renderer of ``tests/template_render.py``
(each model family's chat template, written from the template itself), every example of the whole corpus
(the base tools and the real-world ``shapes``) rendered as one call and fed to a ``required`` constraint
over its group of tools (the corpus cut into groups of :data:`CONFORMANCE_GROUP` tools the format takes):

- ``accepted``: calls whose tokens the grammar accepts, ending at the stop token;
- ``exact``: calls the reader (``read_ids``) returns exactly (name, arguments equal as JSON values);
- ``total``: the examples, all of them (also those ``tests/test_tool_conformance.py`` lists as ones the
  format cannot express); ``refused``: tools the format refuses outright (a ``ValueError``);
- ``compile_ms``: the cold compiles of the groups, summed; ``fill_us`` / ``fill_max_us``: median and
  maximum time of one mask fill over the calls' tokens.

With ``--props N,...`` it measures instead one tool of ``N`` properties per point (names that sort in
the reverse of the schema's order, types cycling string / integer / number / boolean / enum / array;
``--required half`` (every other one) or ``none``): ``cold_ms``, ``spec_kb``, and ``fill_us`` /
``fill_max_us`` while a call with every property is written in the schema's order, ``sorted_fill_us``
/ ``sorted_fill_max_us`` while it is written with sorted keys (as Gemma 4's template writes them;
None where the grammar rejects that order), ``caller_fill_us`` while it is written in a caller's order
(the schema's rotated by one: from 3 properties neither the schema's order nor sorted); beside them the same with the schema's order only (``schema_cold_ms``,
``cold_x`` the paired ratio, ``schema_spec_kb``, ``schema_fill_us``), and ``check_us`` the key check at
the end of the output (``tools/key_check.py``, on the caller-order call). Formats with a renderer here:
gemma4, hermes, qwen3_6.

Each format uses its family vocabulary (``thinkgate/testing/vocabularies.py``: real where an offline
vocabulary has the markers, else the Qwen3.6 table plus the family's markers). Results are appended
to ``bench-results/tools.jsonl`` and ``bench-results/tools-conformance.jsonl``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from bench.harness import int_list

DESCRIPTION = "tool-choice constraint compile time, cold and cached, per format"

# our format -> xgrammar's builtin model tag (where one exists)
XGRAMMAR_TAGS = {
    "hermes": "qwen_3", "qwen3_coder": "qwen_3_coder", "qwen3_5": "qwen_3_coder", "qwen3_6": "qwen_3_coder",
    "llama3_json": "llama", "deepseek_v3": "deepseek_r1",
    "deepseek_v31": "deepseek_v3_1", "deepseek_v32": "deepseek_v3_2", "deepseek_v4": "deepseek_v4",
    "kimi_k2": "kimi", "glm47": "glm_4_7", "minimax_m2": "minimax", "gemma4": "gemma_4", "openai": "harmony",
}


DEFAULT_FORMATS = ("hermes", "qwen3_6", "deepseek_v4", "gemma4")
COLUMNS = ["format", "tools", "build_ms", "cold_ms", "xgr_cold_ms", "x_xgr", "cold_warm_ms", "x_xgr_warm",
           "xgr_nocache_ms", "swap1_ms",
           "xgr_swap1_ms", "swap1_x_xgr", "mem_mb", "xgr_mem_mb", "mem_x_xgr", "schema_cold_ms", "cold_x",
           "cached_us", "fill_us", "fill_max_us", "spec_kb"]
PROPS_FORMATS = ("gemma4", "hermes", "qwen3_6")
"""The default run (a few minutes on 2 cores): one format of each call syntax family; ``--formats all`` sweeps."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--formats", default=None,
                   help=f"comma-separated format names, or 'all' (every format with a structural tag) "
                        f"(default {','.join(DEFAULT_FORMATS)}; with --props {','.join(PROPS_FORMATS)})")
    p.add_argument("--sizes", type=int_list, default=[1, 10], help="tool counts (default 1,10; the sweep: 1,10,100)")
    p.add_argument("--repeat", type=int, default=2, help="cold compiles per point (default 2)")
    p.add_argument("--choice", choices=("required", "auto"), default="required",
                   help="tool_choice of the requests (auto: every tool strict; default required)")
    p.add_argument("--threads", type=int, default=2, help="compiler threads (default 2)")
    p.add_argument("--no-xgrammar", action="store_true", help="skip the xgrammar baseline column")
    p.add_argument("--no-fill", action="store_true", help="skip the mask-fill column")
    p.add_argument("--out", default=None, help="JSON-lines file (default bench-results/tools.jsonl; the "
                   "conformance rows go beside it, '-conformance' added to its name)")
    p.add_argument("--no-conformance", action="store_true", help="skip the chat-template conformance table")
    p.add_argument("--conformance-tools", type=int, default=12,
                   help="corpus tools in the conformance table (default 12; 0: all)")
    p.add_argument("--props", type=int_list, default=None,
                   help="property counts: measure one tool of that many properties instead of the corpus "
                        "(formats default to gemma4,hermes)")
    p.add_argument("--required", choices=("half", "none"), default="half",
                   help="with --props: every other property required, or none (default half)")


def bound(fmt: str, vocab) -> dict:
    """``{"vocabulary": vocab}`` for a format whose syntax its model's response template gives (``hf``);
    ``{}`` for the others, whose constraints the bench builds without a vocabulary."""
    from thinkgate.structured_output.tools import get_tool_format
    from thinkgate.structured_output.tools.template import ResponseTemplateFormat

    return {"vocabulary": vocab} if isinstance(get_tool_format(fmt), ResponseTemplateFormat) else {}


def corpus_entries(*, base: bool = False) -> list[dict]:
    """The corpus entries (``{"tool", "examples"[, "shapes"]}``) of ``tests/data/tools/corpus.json``; with
    ``base``, only the base corpus (the entries without ``"shapes"``, the set the compile columns measure)."""
    import json

    path = Path(__file__).resolve().parent.parent / "tests" / "data" / "tools" / "corpus.json"
    entries = json.loads(path.read_text(encoding="utf-8"))["tools"]
    return [e for e in entries if "shapes" not in e] if base else entries


def corpus_tools(n: int) -> list[dict]:
    """``n`` tools: the base corpus in order, then renamed deep copies (``name_2`` ...)."""
    import copy

    entries = corpus_entries(base=True)
    out = []
    for i in range(n):
        e = entries[i % len(entries)]
        t = copy.deepcopy(e["tool"])
        if i >= len(entries):
            t["function"]["name"] += f"_{i // len(entries) + 1}"
        out.append(t)
    return out


def main(args: argparse.Namespace) -> int:
    import statistics
    import time

    from bench.harness import print_table, progress, write_rows
    from thinkgate.structured_output.compilation.compiler import Compiler
    from thinkgate.structured_output.tools import build_tool_constraint, list_tool_formats, tool_format_warm_up
    from thinkgate.testing.vocabularies import FORMAT_VOCABULARY, format_vocabulary

    names = [f for f in list_tool_formats() if f in FORMAT_VOCABULARY and f != "json"]
    if args.formats is None:
        args.formats = ",".join(PROPS_FORMATS if args.props is not None else DEFAULT_FORMATS)
    if args.formats != "all":
        wanted = [f.strip() for f in args.formats.split(",") if f.strip()]
        unknown = [f for f in wanted if f not in names]
        if unknown:
            raise SystemExit(f"unknown format(s) {unknown}; known: {', '.join(names)}")
        names = wanted
    if args.props is not None:
        return _props_main(args, names)
    rows = []
    compilers: dict[str, Compiler] = {}
    xgr_compilers: dict[str, tuple] = {}

    def fresh(vocab, warm_up=()) -> Compiler:
        """A started compiler whose caches (ours and xgrammar's, in the workers and the parent) hold only the
        start-up's rules (and those of ``warm_up``)."""
        comp = Compiler(vocab, num_threads=args.threads, warm_up=warm_up)
        comp.wait_ready(300)  # the start-up (zygote, tables) is per model, not per compile
        return comp

    def timed_compile(comp: Compiler, constraint) -> tuple[float, object]:
        t0 = time.perf_counter()
        compiled = comp.compile(constraint)
        return (time.perf_counter() - t0) * 1e3, compiled

    for fmt in names:
        vocab = format_vocabulary(fmt)
        progress(f"{fmt}: vocabulary {vocab.name}")
        for n in args.sizes:
            tools = corpus_tools(n + 1)
            if args.choice == "auto":  # constrained only where the tools are strict
                tools = [{**t, "function": {**t["function"], "strict": True}} for t in tools]
            t0 = time.perf_counter()
            c = build_tool_constraint(tools[:n], args.choice, format=fmt, **bound(fmt, vocab))
            build_ms = (time.perf_counter() - t0) * 1e3
            assert c is not None
            swapped = build_tool_constraint(tools[1:], args.choice, format=fmt, **bound(fmt, vocab))
            base = schema_order_constraint(fmt, tools[:n]) if args.choice == "required" else None
            fmt_warm_up = tool_format_warm_up(fmt, **bound(fmt, vocab))
            colds, warm_colds, base_colds, swaps = [], [], [], []
            for _ in range(max(1, args.repeat)):  # alternated, so that load changes hit both alike
                comp = fresh(vocab)
                try:
                    ms, compiled = timed_compile(comp, c)
                    colds.append(ms)
                    # the agent's next turn: one tool dropped, one added (shared tools' rules are cached)
                    swaps.append(timed_compile(comp, swapped)[0])
                finally:
                    comp.close()
                comp = fresh(vocab, fmt_warm_up)
                try:
                    warm_colds.append(timed_compile(comp, c)[0])
                finally:
                    comp.close()
                if base is not None and base.key != c.key:
                    comp = fresh(vocab)
                    try:
                        base_colds.append(timed_compile(comp, base)[0])
                    finally:
                        comp.close()
            comp = compilers.get(vocab.name)
            if comp is None:
                comp = compilers[vocab.name] = fresh(vocab)
            compiled = comp.compile(c)
            hits = []
            for _ in range(50):
                t0 = time.perf_counter()
                comp.compile(c)
                hits.append((time.perf_counter() - t0) * 1e6)
            row = {"format": fmt, "tools": n, "choice": args.choice, "vocab": vocab.name, "build_ms": build_ms,
                   "cold_ms": statistics.median(colds), "cold_warm_ms": statistics.median(warm_colds),
                   "swap1_ms": statistics.median(swaps),
                   "cached_us": statistics.median(hits), "spec_kb": len(c.spec.encode()) / 1024,
                   "mem_mb": compiled.grammar.memory_size_bytes / 2**20}
            if base_colds:
                row["schema_cold_ms"] = statistics.median(base_colds)
                row["cold_x"] = statistics.median(a / b for a, b in zip(colds, base_colds))
            if not args.no_fill:
                row.update(_fill_times(fmt, vocab, compiled, tools[0]))
            if not args.no_xgrammar and fmt in XGRAMMAR_TAGS:
                row.update(_xgrammar_cold(fmt, vocab, tools, n, xgr_compilers, args))
                if row.get("xgr_cold_ms"):
                    row["x_xgr"] = row["cold_ms"] / row["xgr_cold_ms"]
                    row["x_xgr_warm"] = row["cold_warm_ms"] / row["xgr_cold_ms"]
                    row["swap1_x_xgr"] = row["swap1_ms"] / row["xgr_swap1_ms"]
                    row["mem_x_xgr"] = row["mem_mb"] / row["xgr_mem_mb"]
            progress(f"{fmt} x{n}: cold {row['cold_ms']:.0f} ms")
            rows.append(row)
    cols = COLUMNS
    print_table(rows, cols)
    if not args.no_write:
        path = write_rows("tools", rows, args.out)
        progress(f"results appended to {path}")
    if not args.no_conformance:
        crows = []
        for renderer, fmt in conformance_renderers(names):
            vocab = format_vocabulary(fmt)
            comp = compilers.get(vocab.name)
            if comp is None:
                comp = compilers[vocab.name] = Compiler(vocab, num_threads=args.threads)
            crows.append(conformance_row(renderer, fmt, vocab, comp, args.conformance_tools))
            progress(f"conformance {renderer}: {crows[-1]['exact']}/{crows[-1]['total']} exact")
        print()
        print_table(crows, CONFORMANCE_COLUMNS)
        cout = None
        if args.out:
            o = Path(args.out)
            cout = o.with_name(o.stem + "-conformance" + o.suffix)
        if not args.no_write:
            path = write_rows("tools-conformance", crows, cout)
            progress(f"conformance results appended to {path}")
    return 0


# --------------------------------------------------------------------------------------------------
# the conformance table

CONFORMANCE_COLUMNS = ["renderer", "format", "accepted", "exact", "total", "refused", "compile_ms", "fill_us",
                       "fill_max_us"]
CONFORMANCE_GROUP = 12


def _template_render():
    """``tests/template_render.py`` (the chat-template renderers live beside the corpus they render)."""
    import sys

    tests = str(Path(__file__).resolve().parent.parent / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import template_render

    return template_render


def conformance_renderers(formats: list[str]) -> list[tuple[str, str]]:
    """(renderer, format) for every renderer whose format is in ``formats``."""
    return [(name, r.format) for name, r in _template_render().RENDERERS.items() if r.format in formats]


def conformance_row(renderer: str, fmt: str, vocab, comp, max_tools: int = 0) -> dict:
    """One row of the conformance table (see the module docstring)."""
    import json
    import statistics
    import time

    import xgrammar as xgr

    from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader

    tr = _template_render()
    entries = corpus_entries()
    if max_tools:
        entries = entries[:max_tools]
    taken, refused = [], 0
    for e in entries:
        try:
            build_tool_constraint([e["tool"]], "required", format=fmt, **bound(fmt, vocab))
            taken.append(e)
        except ValueError:
            refused += 1
    stop = min(vocab.stop_token_ids)
    accepted = exact = 0
    compile_ms = 0.0
    fills: list[float] = []
    mask = xgr.allocate_token_bitmask(1, vocab.logits_width)
    for g in range(0, len(taken), CONFORMANCE_GROUP):
        group = taken[g:g + CONFORMANCE_GROUP]
        tools = [e["tool"] for e in group]
        c = build_tool_constraint(tools, "required", format=fmt, **bound(fmt, vocab))
        comp.clear_cache()
        t0 = time.perf_counter()
        compiled = comp.compile(c)
        compile_ms += (time.perf_counter() - t0) * 1e3
        reader = get_tool_reader(fmt, tools, "required")
        for e in group:
            name = e["tool"]["function"]["name"]
            for args in e["examples"]:
                try:
                    ids = tr.render_ids(renderer, [(name, args)], vocab)
                except ValueError:
                    continue
                m = xgr.GrammarMatcher(compiled.grammar)
                ok = True
                for t in [*ids, stop]:
                    t0 = time.perf_counter()
                    m.fill_next_token_bitmask(mask)
                    fills.append((time.perf_counter() - t0) * 1e6)
                    if not (int(mask[0, t >> 5]) >> (t & 31)) & 1 or not m.accept_token(t):
                        ok = False
                        break
                accepted += ok and m.is_terminated()
                got = reader.read_ids(ids, vocab)
                exact += (len(got.calls) == 1 and got.calls[0].name == name and not (got.content or "").strip()
                          and _json_equal(json.loads(got.calls[0].arguments), args))
    total = sum(len(e["examples"]) for e in entries)
    return {"renderer": renderer, "format": fmt, "vocab": vocab.name, "accepted": accepted, "exact": exact,
            "total": total, "refused": refused, "compile_ms": compile_ms,
            "fill_us": statistics.median(fills) if fills else None, "fill_max_us": max(fills) if fills else None}


def _json_equal(a, b) -> bool:
    """Equal as JSON values: booleans are not numbers, ``1 == 1.0``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def _xgrammar_cold(fmt, vocab, tools, n, cache, args) -> dict:
    """xgrammar's own tag for ``tools[:n]``: its cold compile with xgrammar's defaults (the compiler cache
    on, cleared first: ``xgr_cold_ms``) and with the cache off (``xgr_nocache_ms``), then the tag for
    ``tools[1:]`` right after (``xgr_swap1_ms``, the cache holding the shared tools), and the memory."""
    import json
    import statistics
    import time

    import xgrammar as xgr
    from xgrammar.builtin_structural_tag import get_model_structural_tag

    pair = cache.get(vocab.name)
    if pair is None:
        info = xgr.TokenizerInfo(list(vocab.token_bytes), xgr.VocabType.RAW, vocab_size=vocab.logits_width,
                                 stop_token_ids=sorted(vocab.stop_token_ids))
        pair = cache[vocab.name] = (xgr.GrammarCompiler(info, max_threads=args.threads),
                                    xgr.GrammarCompiler(info, max_threads=args.threads, cache_enabled=False))
    default, nocache = pair

    from thinkgate.structured_output.tools import get_tool_format

    # the same stretch of output as ours: after the thinking, or (harmony) the whole output, analysis included
    reasoning = "enabled" if get_tool_format(fmt).covers_reasoning else "disabled"

    def tag(ts):
        plain = json.loads(json.dumps(ts))
        for t in plain:
            t["function"].pop("strict", None)
        return get_model_structural_tag(XGRAMMAR_TAGS[fmt], tools=plain, tool_choice=args.choice,
                                        reasoning=reasoning)

    try:
        first, second = tag(tools[:n]), tag(tools[1:n + 1])
    except Exception:  # pragma: no cover - a schema xgrammar's builder refuses
        return {}

    def ms(comp, t) -> float:
        t0 = time.perf_counter()
        comp.compile_structural_tag(t)
        return (time.perf_counter() - t0) * 1e3

    colds, swaps, plain_ms = [], [], []
    for _ in range(max(1, args.repeat)):
        default.clear_cache()
        colds.append(ms(default, first))
        swaps.append(ms(default, second))
        plain_ms.append(ms(nocache, first))
    default.clear_cache()
    return {"xgr_cold_ms": statistics.median(colds), "xgr_swap1_ms": statistics.median(swaps),
            "xgr_nocache_ms": statistics.median(plain_ms),
            "xgr_mem_mb": nocache.compile_structural_tag(first).memory_size_bytes / 2**20}


def _fill_times(fmt, vocab, compiled, tool) -> dict:
    """Mask-fill time per token while one call of ``tool`` is written as the model writes it (the
    grammar must accept every token; else both columns are None)."""
    text = _render_call(fmt, tool)
    if text is None:
        return {}
    med, worst = _fill_text(vocab, compiled, text)
    return {"fill_us": med, "fill_max_us": worst}


def _render_call(fmt: str, tool: dict) -> str | None:
    """One call of ``tool`` with arguments ``{"location": "Zürich <b>x</b>", ...}`` as the model writes it
    (the first corpus tool is get_weather)."""
    import json

    if tool["function"]["name"] != "get_weather":
        return None
    a = {"location": "Zürich, 8001 <b>CH</b>", "unit": "celsius"}
    j = json.dumps(a, ensure_ascii=False)
    xml = {
        "qwen3_coder": "<parameter=location>\nZürich, 8001 <b>CH</b>\n</parameter>\n<parameter=unit>\ncelsius\n</parameter>\n",
        "minimax_m2": '<parameter name="location">Zürich, 8001 <b>CH</b></parameter>\n<parameter name="unit">celsius</parameter>\n',
        "dsml": '<｜DSML｜parameter name="location" string="true">Zürich, 8001 <b>CH</b></｜DSML｜parameter>\n'
                '<｜DSML｜parameter name="unit" string="true">celsius</｜DSML｜parameter>\n',
        "glm47": "<arg_key>location</arg_key><arg_value>Zürich, 8001 <b>CH</b></arg_value>"
                 "<arg_key>unit</arg_key><arg_value>celsius</arg_value>",
    }
    return {
        "hermes": f'<tool_call>\n{{"name": "get_weather", "arguments": {j}}}\n</tool_call>',
        "qwen3_coder": f"<tool_call>\n<function=get_weather>\n{xml['qwen3_coder']}</function>\n</tool_call>",
        "qwen3_5": f"<tool_call>\n<function=get_weather>\n{xml['qwen3_coder']}</function>\n</tool_call>",
        "qwen3_6": f"<tool_call>\n<function=get_weather>\n{xml['qwen3_coder']}</function>\n</tool_call>",
        "llama3_json": f'{{"name": "get_weather", "parameters": {j}}}',
        "mistral": f"[TOOL_CALLS]get_weather[ARGS]{j}",
        "deepseek_v3": f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n{j}\n```"
                       "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
        "deepseek_v31": f"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{j}<｜tool▁call▁end｜>"
                        "<｜tool▁calls▁end｜>",
        "deepseek_v32": f'<｜DSML｜function_calls>\n<｜DSML｜invoke name="get_weather">\n{xml["dsml"]}</｜DSML｜invoke>\n'
                        "</｜DSML｜function_calls>",
        "deepseek_v4": f'<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_weather">\n{xml["dsml"]}</｜DSML｜invoke>\n'
                       "</｜DSML｜tool_calls>",
        "kimi_k2": f"<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>{j}"
                   "<|tool_call_end|><|tool_calls_section_end|>",
        "glm47": f"<tool_call>get_weather{xml['glm47']}</tool_call>",
        "glm45": "<tool_call>get_weather\n<arg_key>location</arg_key>\n<arg_value>Zürich, 8001 <b>CH</b></arg_value>\n"
                 "<arg_key>unit</arg_key>\n<arg_value>celsius</arg_value>\n</tool_call>",
        "minimax_m2": f'<minimax:tool_call>\n<invoke name="get_weather">\n{xml["minimax_m2"]}</invoke>\n</minimax:tool_call>',
        "gemma4": '<|tool_call>call:get_weather{location:<|"|>Zürich, 8001 <b>CH</b><|"|>,unit:<|"|>celsius<|"|>}<tool_call|>',
        "hf": '<|tool_call>call:get_weather{location:<|"|>Zürich, 8001 <b>CH</b><|"|>,unit:<|"|>celsius<|"|>}<tool_call|>',
        "openai": f"<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{j}",
    }.get(fmt)


# --------------------------------------------------------------------------------------------------
# --props: one tool of N properties, its keys written in the schema's order and sorted


def schema_order_format(fmt_name: str):
    """The format with its argument keys in the schema's order only (``caller_order=False``): what the
    formats that keep the caller's order built before they took any order; None for a format without
    that choice (Gemma 4 sorts or keeps the schema's order; the json format has no model syntax)."""
    import copy
    import dataclasses

    from thinkgate.structured_output.tools import get_tool_format
    from thinkgate.structured_output.tools.args import JsonArgs, XmlArgs
    from thinkgate.structured_output.tools.call_format import CallFormat
    from thinkgate.structured_output.tools.harmony import HarmonyFormat

    fmt = get_tool_format(fmt_name)
    if isinstance(fmt, CallFormat) and isinstance(fmt.args, (JsonArgs, XmlArgs)):
        return dataclasses.replace(fmt, args=dataclasses.replace(fmt.args, caller_order=False))
    if isinstance(fmt, HarmonyFormat):
        base = copy.copy(fmt)
        base._ARGS = JsonArgs(caller_order=False)
        return base
    return None


def schema_order_constraint(fmt_name: str, tools: list[dict]):
    """The ``required`` constraint of ``tools`` with :func:`schema_order_format`, or None."""
    from thinkgate.structured_output.tools.request import normalize_tool_request

    base = schema_order_format(fmt_name)
    return None if base is None else base.constraint(normalize_tool_request(tools, "required"))
_PROP_TYPES = ({"type": "string"}, {"type": "integer"}, {"type": "number"}, {"type": "boolean"},
               {"type": "string", "enum": ["low", "high"]}, {"type": "array", "items": {"type": "string"}})
_PROP_VALUES = ("Zürich <b>CH</b>", 42, 2.5, True, "high", ["a", "b"])


def props_tool(n: int, required: str = "half") -> tuple[dict, dict]:
    """(tool, arguments with every property in the schema's order): ``n`` properties named ``k{n-1}``
    ... ``k0`` zero-padded, so sorting reverses them."""
    width = len(str(max(n - 1, 0)))
    keys = [f"k{i:0{width}d}" for i in range(n - 1, -1, -1)]
    props = {k: dict(_PROP_TYPES[i % len(_PROP_TYPES)]) for i, k in enumerate(keys)}
    req = keys[::2] if required == "half" else []
    tool = {"type": "function", "function": {"name": "many", "description": "n properties",
                                             "parameters": {"type": "object", "properties": props, "required": req}}}
    return tool, {k: _PROP_VALUES[i % len(_PROP_VALUES)] for i, k in enumerate(keys)}


def _render_props(fmt: str, args: dict) -> str | None:
    import json

    def gemma(v) -> str:
        if isinstance(v, dict):
            return "{" + ",".join(f"{k}:{gemma(x)}" for k, x in v.items()) + "}"
        if isinstance(v, list):
            return "[" + ",".join(gemma(x) for x in v) + "]"
        if isinstance(v, str):
            return '<|"|>' + v + '<|"|>'
        return json.dumps(v)

    if fmt == "gemma4":
        return f"<|tool_call>call:many{gemma(args)}<tool_call|>"
    if fmt == "hermes":
        return f'<tool_call>\n{{"name": "many", "arguments": {json.dumps(args, ensure_ascii=False)}}}\n</tool_call>'
    if fmt == "qwen3_6":
        body = "".join(f"<parameter={k}>\n{v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}\n"
                       "</parameter>\n" for k, v in args.items())
        return f"<tool_call>\n<function=many>\n{body}</function>\n</tool_call>"
    return None


def _fill_text(vocab, compiled, text: str | None) -> tuple[float | None, float | None]:
    """Median and worst mask-fill time per token (us) while ``text`` is written (None, None when the
    grammar rejects a token of it, or there is no text)."""
    import statistics
    import time

    import xgrammar as xgr

    if text is None:
        return None, None
    m = xgr.GrammarMatcher(compiled.grammar)
    mask = xgr.allocate_token_bitmask(1, vocab.logits_width)
    times = []
    for t in vocab.encode(text):
        t0 = time.perf_counter()
        m.fill_next_token_bitmask(mask)
        times.append((time.perf_counter() - t0) * 1e6)
        if not m.accept_token(t):
            return None, None
    return statistics.median(times), max(times)


def _props_main(args, names: list[str]) -> int:
    import statistics
    import time

    from bench.harness import print_table, progress, write_rows
    from thinkgate.testing.vocabularies import format_vocabulary
    from thinkgate.structured_output.compilation.compiler import Compiler
    from thinkgate.structured_output.tools import build_tool_constraint

    rows = []
    compilers: dict[str, Compiler] = {}
    for fmt in names:
        vocab = format_vocabulary(fmt)
        comp = compilers.get(vocab.name)
        if comp is None:
            progress(f"vocabulary {vocab.name}")
            comp = compilers[vocab.name] = Compiler(vocab, num_threads=args.threads)
            comp.compile(build_tool_constraint([props_tool(1)[0]], "required", format=fmt, **bound(fmt, vocab)))  # start the workers
        for n in args.props:
            tool, call_args = props_tool(n, args.required)
            c = build_tool_constraint([tool], "required", format=fmt, **bound(fmt, vocab))
            assert c is not None
            base = schema_order_constraint(fmt, [tool])
            if base is not None and base.key == c.key:
                base = None
            colds, base_colds = [], []
            base_compiled = None
            for _ in range(max(1, args.repeat)):  # alternated, so that load changes hit both alike
                comp.clear_cache()
                t0 = time.perf_counter()
                compiled = comp.compile(c)
                colds.append((time.perf_counter() - t0) * 1e3)
                if base is not None:
                    comp.clear_cache()
                    t0 = time.perf_counter()
                    base_compiled = comp.compile(base)
                    base_colds.append((time.perf_counter() - t0) * 1e3)
            row = {"format": fmt, "props": n, "required": args.required, "vocab": vocab.name,
                   "cold_ms": statistics.median(colds), "spec_kb": len(c.spec.encode()) / 1024}
            if base is not None:
                row["schema_cold_ms"] = statistics.median(base_colds)
                row["cold_x"] = statistics.median(a / b for a, b in zip(colds, base_colds))
                row["schema_spec_kb"] = len(base.spec.encode()) / 1024
            keys = list(call_args)  # a caller's order: the schema's rotated by one (from 3 keys neither it nor sorted)
            shuffled = {k: call_args[k] for k in keys[1:] + keys[:1]}
            if not args.no_fill:
                row["fill_us"], row["fill_max_us"] = _fill_text(vocab, compiled, _render_props(fmt, call_args))
                ordered = {k: call_args[k] for k in sorted(call_args, key=str.lower)}
                row["sorted_fill_us"], row["sorted_fill_max_us"] = _fill_text(vocab, compiled, _render_props(fmt, ordered))
                row["caller_fill_us"], _ = _fill_text(vocab, compiled, _render_props(fmt, shuffled))
                if base_compiled is not None:
                    row["schema_fill_us"], _ = _fill_text(vocab, base_compiled, _render_props(fmt, call_args))
            check = c.schema_check
            text = _render_props(fmt, shuffled)
            if check is not None and text is not None:
                ids = vocab.encode(text)
                assert check.problem_of_tokens(vocab, ids, vocab.stop_token_ids) is None
                times = []
                for _ in range(20):
                    t0 = time.perf_counter()
                    check.problem_of_tokens(vocab, ids, vocab.stop_token_ids)
                    times.append((time.perf_counter() - t0) * 1e6)
                row["check_us"] = statistics.median(times)
            progress(f"{fmt} {n} props: cold {row['cold_ms']:.0f} ms")
            rows.append(row)
    print_table(rows, ["format", "props", "required", "cold_ms", "schema_cold_ms", "cold_x", "spec_kb",
                       "schema_spec_kb", "fill_us", "schema_fill_us", "caller_fill_us", "fill_max_us",
                       "sorted_fill_us", "sorted_fill_max_us", "check_us"])
    if not args.no_write:
        path = write_rows("tools", rows, args.out)
        progress(f"results appended to {path}")
    return 0
