"""``python -m bench jsonws``: what the JSON whitespace bound costs, on real schemas.

For each vocabulary and each schema of the corpus ``tests/data/jsonschemas/corpus.json`` (real schemas
from JSONSchemaBench, each with a valid instance), three ways to compile ``Constraint.json_schema(s)``:

- ``xgr``: xgrammar's defaults (``any_whitespace``, no bound): the baseline;
- ``old``: the bound written into the grammar (``max_whitespace_cnt``, what thinkgate compiled before:
  ``[ \\n\\r\\t]{0,B}`` per gap);
- ``new``: thinkgate now: xgrammar's unbounded grammar and the bound beside it
  (``structured_output/compilation/jsonws/bound.py``).

Columns, per schema kind (the corpus's source: Github, Glaiveai2K, Kubernetes, ...) and ``all``
(medians over the schemas of the kind):

- ``*_ms``: compile time of a schema not seen before, with xgrammar's cache off (``off``: what
  thinkgate did) and on (``on``: one compiler per way, bounded to ``--cache-mb``, warm with the
  schemas compiled before this one, as in a long-lived compile worker);
- ``*_mb``: ``CompiledGrammar.memory_size_bytes``;
- ``*_fill_us``: one row's fill along the valid instance laid out with ``json.dumps(indent=2)``
  (xgrammar's public fill; for ``new``, the bounded matcher's fill: xgrammar's native fill and the
  bound's row clear in one C call, as the manager does it), median over
  ``--repeat`` walks, the three ways interleaved;
- ``svc_ms``: the same constraint through the compile service, ``Compiler.compile`` on a started compiler
  (validation and compile in a worker, the parent's compile, the first row: what a request waits for),
  warm with the schemas before it; ``svc/xgr_on_ms`` its paired ratio to ``xgr_on_ms`` (issue 23: <= 1);
- ratios ``new/xgr`` and ``old/xgr`` of each, measured in the same run (read these: the machine is shared).

Results go to ``bench-results/jsonws.jsonl``.
"""

from __future__ import annotations

import argparse

DESCRIPTION = "JSON whitespace bound: compile, memory and fill vs xgrammar's defaults on real schemas"

WAYS = ("xgr", "old", "new")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--vocabs", default="qwen3_6,deepseek_v4",
                   help="comma-separated vocabulary names (default qwen3_6,deepseek_v4; 'bytes': a tiny "
                        "byte-level one)")
    p.add_argument("--limit", type=int, default=12,
                   help="at most this many schemas, spread over the corpus's kinds (default 12; 0: the whole corpus)")
    p.add_argument("--max-whitespace", type=int, default=16, help="the bound B (default 16)")
    p.add_argument("--repeat", type=int, default=5, help="walks per schema and way for the fill (default 5)")
    p.add_argument("--cache-mb", type=int, default=64, help="xgrammar cache bound when on (default 64)")
    p.add_argument("--threads", type=int, default=1, help="xgrammar compile threads (default 1)")
    p.add_argument("--out", default=None, help="JSON-lines file (default bench-results/jsonws.jsonl)")


def load_corpus(limit: int = 0) -> list[dict]:
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "tests" / "data" / "jsonschemas" / "corpus.json"
    schemas = json.loads(path.read_text(encoding="utf-8"))["schemas"]
    if limit > 0:  # spread the sample over the kinds
        step = max(1, len(schemas) // limit)
        schemas = schemas[::step][:limit]
    return schemas


def _vocabulary(name: str):
    from thinkgate.testing.vocabularies import byte_level_vocabulary
    from thinkgate.reasoning.vocabulary import load_vocabulary

    if name == "bytes":
        return byte_level_vocabulary(extra_tokens=["  ", "\n  ", '": "', '",\n  "'])
    return load_vocabulary(name)


def _median(xs: list[float]) -> float:
    import statistics

    return statistics.median(xs) if xs else float("nan")


def main(args: argparse.Namespace) -> int:
    import json
    import os
    import time

    import torch
    import xgrammar as xgr

    from bench.harness import print_table, progress, write_rows
    from thinkgate.structured_output.compilation.compiler import Compiler
    from thinkgate.structured_output.compilation.constraints import Constraint
    from thinkgate.structured_output.compilation.jsonws.bound import WhitespaceLexicon
    from thinkgate.structured_output.compilation.xgrammar_adapter import (GrammarBuilder, _fix_bounded_json_strings,
                                                              build_tokenizer_info)

    B = args.max_whitespace
    corpus = load_corpus(args.limit)
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    all_rows = []
    for vname in [v for v in args.vocabs.split(",") if v]:
        progress(f"{vname}: loading the vocabulary")
        vocab = _vocabulary(vname)
        tinfo = build_tokenizer_info(vocab)
        builder = GrammarBuilder(vocab)
        bound = WhitespaceLexicon.of(vocab).bound(B)
        cold = xgr.GrammarCompiler(tinfo, max_threads=args.threads, cache_enabled=False)
        warm = {w: xgr.GrammarCompiler(tinfo, max_threads=args.threads, cache_enabled=True,
                                       cache_limit_bytes=args.cache_mb << 20) for w in WAYS}
        service = Compiler(vocab, num_threads=args.threads)
        service.wait_ready(300)  # the start-up is per model, not per compile
        words = (vocab.logits_width + 31) // 32
        bm = torch.zeros((1, words), dtype=torch.int32)
        npbm = bm.numpy()
        stop = min(vocab.stop_token_ids)
        per: list[dict] = []
        for n, entry in enumerate(corpus):
            spec = json.dumps(entry["schema"])
            c = Constraint.json_schema(entry["schema"], max_whitespace=B)
            grammars = {
                "xgr": lambda: xgr.Grammar.from_json_schema(spec, any_whitespace=True),
                "old": lambda: _fix_bounded_json_strings(
                    xgr.Grammar.from_json_schema(spec, any_whitespace=True, max_whitespace_cnt=B), spec),
                "new": lambda: builder.build(c)[0],
            }
            row: dict = {"kind": entry["kind"]}
            compiled = {}
            order = WAYS[n % 3:] + WAYS[:n % 3]  # interleave: each way goes first in turn
            try:
                for w in order:
                    t0 = time.perf_counter()
                    compiled[w] = cold.compile_grammar(grammars[w]())
                    row[f"{w}_off_ms"] = (time.perf_counter() - t0) * 1e3
                for w in order:
                    t0 = time.perf_counter()
                    warm[w].compile_grammar(grammars[w]())
                    row[f"{w}_on_ms"] = (time.perf_counter() - t0) * 1e3
                t0 = time.perf_counter()
                service.compile(c, timeout=120)
                row["svc_ms"] = (time.perf_counter() - t0) * 1e3
                row["svc/xgr_on_ms"] = row["svc_ms"] / row["xgr_on_ms"]
            except Exception as e:  # noqa: BLE001 - a schema this xgrammar cannot take on this vocabulary
                progress(f"{vname}: {entry['source']}: skipped ({type(e).__name__})")
                continue
            for w in WAYS:
                row[f"{w}_mb"] = compiled[w].memory_size_bytes / 1e6
            ids = vocab.encode(json.dumps(entry["instance"], indent=2, ensure_ascii=False)) + [stop]
            samples: dict[str, list[float]] = {w: [] for w in WAYS}
            ok = True
            for r in range(args.repeat):
                for w in (WAYS[r % 3:] + WAYS[:r % 3]):
                    m = xgr.GrammarMatcher(compiled[w]) if w != "new" else _bounded(compiled[w], bound)
                    t = _walk(m, ids, bm, npbm, w == "new")
                    if t is None:
                        ok = False
                        break
                    samples[w].append(t)
                if not ok:
                    break
            if not ok:
                progress(f"{vname}: {entry['source']}: its instance is rejected; skipped")
                continue
            for w in WAYS:
                row[f"{w}_fill_us"] = _median(samples[w])
            per.append(row)
            if (n + 1) % 10 == 0:
                progress(f"{vname}: {n + 1}/{len(corpus)} schemas")
        service.close()
        for kind in [*dict.fromkeys(r["kind"] for r in per), "all"]:
            rows = [r for r in per if kind in ("all", r["kind"])]
            out = {"vocab": vname, "kind": kind, "n": len(rows), "max_whitespace": B, "load": load}
            for key in rows[0] if rows else ():
                if key != "kind":
                    out[key] = _median([r[key] for r in rows])
            for what in ("on_ms", "off_ms", "mb", "fill_us"):
                for w in ("new", "old"):
                    out[f"{w}/xgr_{what}"] = _median([r[f"{w}_{what}"] / r[f"xgr_{what}"] for r in rows
                                                      if r[f"xgr_{what}"] > 0])
            all_rows.append(out)
    cols = ["vocab", "kind", "n", "xgr_on_ms", "xgr_off_ms", "old_off_ms", "new_on_ms", "new/xgr_on_ms", "svc_ms",
            "svc/xgr_on_ms",
            "old/xgr_off_ms", "xgr_mb", "old_mb", "new_mb", "new/xgr_mb", "xgr_fill_us", "old_fill_us",
            "new_fill_us", "new/xgr_fill_us", "old/xgr_fill_us"]
    print(f"load average {load:.1f}, bound {B}, medians per kind; ratios are medians of per-schema ratios")
    print_table(all_rows, cols)
    if not args.no_write:
        path = write_rows("jsonws", all_rows, args.out)
        progress(f"appended {len(all_rows)} rows to {path}")
    return 0


def _bounded(compiled, bound):
    from thinkgate.structured_output.compilation.jsonws.bound import BoundedMatcher

    return BoundedMatcher(compiled, bound)


def _walk(m, ids, bm, npbm, bounded: bool) -> float | None:
    """Mean µs of one row's fill along ``ids`` (None when a token is rejected): xgrammar's public
    ``fill_next_token_bitmask``; for a bounded matcher, its own (one call of its lexer: xgrammar's
    native fill, then the bound's row clear), as ``fill.py`` calls it."""
    import time

    import xgrammar as xgr

    fill = xgr.GrammarMatcher.fill_next_token_bitmask
    total = 0
    for t in ids:
        if bounded:
            t0 = time.perf_counter_ns()
            m.fill_next_token_bitmask(bm, 0, npbm)
        else:
            t0 = time.perf_counter_ns()
            fill(m, bm, 0)
        total += time.perf_counter_ns() - t0
        if not m.accept_token(t):
            return None
    return total / 1e3 / len(ids)
