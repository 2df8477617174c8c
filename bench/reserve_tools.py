"""``python -m bench loop --reserve-tool-formats all|F,G``: the reservation's start search on every tool format.

For each tool format (on the vocabulary its tests use, ``thinkgate.testing.vocabularies.format_vocabulary``) and
two tool sets (``raw``: string parameters without bounds, two of them in a row; ``bounded``: ``minLength`` /
``maxLength`` strings), with ``tool_choice`` ``"required"`` and named: the constraint is built with
``key_order="schema"`` (what the reservation takes), and the search process's code (``Shortest.complete``, run in
this process) finds the shortest completion from the grammar's start: the answer a reservation forces when the
thinking runs out. Printed per case: the search's time, the completion's tokens, and whether the format's own
reader reads exactly one call whose arguments validate against its tool's schema (``ok``), else what it read.
Exit status 1 when a ``raw`` case is not found or not read back valid (a ``bounded`` one may fail where the
format's grammar does not enforce ``minLength``, docs/limits.md).

``--reserve-tool-set corpus``: instead of the two sets, each tool of the base corpus (``tests/data/tools/corpus.json``,
so from a checkout) named alone, strict; printed per format: the tools read back valid and the search's median and
slowest time, then each failure (exit status 1 when there is one).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from .harness import print_table, progress, write_rows

_RAW = [
    {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add_todo", "strict": True, "parameters": {
        "type": "object", "properties": {"title": {"type": "string"}, "note": {"type": "string"},
                                         "priority": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["title", "note", "priority"], "additionalProperties": False}}},
]
_BOUNDED = [
    {"type": "function", "function": {"name": "get_weather", "strict": True, "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "maxLength": 30},
                                         "unit": {"enum": ["celsius", "fahrenheit"]}},
        "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "add_todo", "strict": True, "parameters": {
        "type": "object", "properties": {"title": {"type": "string", "minLength": 3},
                                         "priority": {"type": "integer", "minimum": 1, "maximum": 5}},
        "required": ["title", "priority"], "additionalProperties": False}}},
]
TOOL_SETS = {"raw": _RAW, "bounded": _BOUNDED}
COLUMNS = ["format", "tools", "choice", "ms", "tokens", "read"]


def _read(fmt: str, tools: list, choice: Any, vocab: Any, tokens: list[int]) -> str:
    import jsonschema

    from thinkgate.structured_output.tools import get_tool_reader

    reader = get_tool_reader(fmt, tools, choice, parallel_tool_calls=False, vocabulary=vocab)
    text = vocab.decode([t for t in tokens if t not in vocab.stop_token_ids])
    calls = list(reader.read(text).calls)
    if len(calls) != 1:
        return f"{len(calls)} calls: {text[:60]!r}"
    schema = {t["function"]["name"]: t["function"].get("parameters", {}) for t in tools}[calls[0].name]
    try:
        jsonschema.validate(json.loads(calls[0].arguments), schema)
    except jsonschema.ValidationError as e:
        return f"invalid ({e.message[:50]})"
    return "ok"


def _cases(set_name: str) -> list[tuple[str, list, str]]:
    """(tool set label, tools, choice label) per case: the two sets with ``required`` and ``add_todo`` named, or with
    ``corpus`` each tool of the base corpus named alone, strict."""
    if set_name != "corpus":
        return [(name, tools, choice) for name, tools in TOOL_SETS.items() for choice in ("required", "add_todo")]
    from .tools import corpus_entries

    out = []
    for e in corpus_entries(base=True):
        fn = e["tool"]["function"]
        out.append(("corpus", [dict(e["tool"], function=dict(fn, strict=True))], fn["name"]))
    return out


def run(args: argparse.Namespace) -> int:
    from thinkgate.structured_output.compilation.compiler import Compiler
    from thinkgate.structured_output.step.reserve import Shortest
    from thinkgate.structured_output.tools import build_tool_constraint, list_tool_formats
    from thinkgate.testing.vocabularies import format_vocabulary

    spec = args.reserve_tool_formats
    formats = list_tool_formats() if spec == "all" else [f for f in spec.split(",") if f]
    corpus = getattr(args, "reserve_tool_set", "sweep") == "corpus"
    cases = _cases("corpus" if corpus else "sweep")
    # one compiler (with its worker processes and caches) and one search at a time: the formats' vocabularies
    # differ, and holding one of each for every format ran this machine out of memory
    held: tuple[str, Any, Any] | None = None
    rows: list[dict[str, Any]] = []
    failed = 0
    try:
        for fmt in formats:
            vocab = format_vocabulary(fmt)
            if held is None or held[0] != vocab.name:
                if held is not None:
                    held[1].close()
                held = None
                held = (vocab.name, Compiler(vocab, num_threads=1), Shortest(vocab))
            _, comp, shortest = held
            progress(f"  {fmt} ({vocab.name})")
            for set_name, tools, choice_name in cases:
                choice: Any = ("required" if choice_name == "required"
                               else {"type": "function", "function": {"name": choice_name}})
                row: dict[str, Any] = {"format": fmt, "tools": set_name, "choice": choice_name}
                try:
                    c = build_tool_constraint(tools, choice, format=fmt, parallel_tool_calls=False,
                                              vocabulary=vocab, key_order="schema")
                    compiled = comp.compile(c)
                    t0 = time.perf_counter()
                    found = shortest.complete(compiled, (), 400)
                    row["ms"] = round((time.perf_counter() - t0) * 1e3, 1)
                except ValueError as e:
                    row["read"] = f"error: {str(e)[:60]}"
                    rows.append(row)
                    failed += set_name != "bounded"
                    continue
                if not found:
                    row["read"] = "not found"
                else:
                    row["tokens"] = len(found)
                    row["read"] = _read(fmt, tools, choice, vocab, found)
                failed += set_name != "bounded" and row["read"] != "ok"
                rows.append(row)
    finally:
        if held is not None:
            held[1].close()
    if corpus:
        _print_corpus(rows)
    else:
        print_table(rows, COLUMNS)
    ok = sum(r.get("read") == "ok" for r in rows)
    print(f"\n{ok} of {len(rows)} start completions read back as one valid call; "
          f"{'corpus' if corpus else 'raw'} cases failing: {failed}")
    if not getattr(args, "no_write", False):
        write_rows("reserve_tools", rows, args.out)
    return 1 if failed else 0


def _print_corpus(rows: list[dict[str, Any]]) -> None:
    """Per format: the corpus tools read back valid, the search's median and slowest time; then each failure."""
    import statistics

    by_fmt: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_fmt.setdefault(r["format"], []).append(r)
    table = []
    for fmt, rs in by_fmt.items():
        ms = [r["ms"] for r in rs if "ms" in r]
        table.append({"format": fmt, "tools": len(rs), "valid": sum(r.get("read") == "ok" for r in rs),
                      "median_ms": round(statistics.median(ms), 1) if ms else None,
                      "max_ms": round(max(ms)) if ms else None})
    print_table(table, ["format", "tools", "valid", "median_ms", "max_ms"])
    for r in rows:
        if r.get("read") != "ok":
            print(f"  {r['format']} {r['choice']}: {r.get('read')} ({r.get('ms')} ms)")
