"""``python -m bench tools`` runs, tiny, so the benchmark never rots."""

from __future__ import annotations

from support import assert_table, read_rows

from bench.__main__ import main as bench_main
from bench.tools import COLUMNS, CONFORMANCE_COLUMNS, _render_call, corpus_tools


def test_bench_tools_tiny(tmp_path, capsys):
    out = tmp_path / "tools.jsonl"
    rc = bench_main(["tools", "--formats", "hermes,deepseek_v31", "--sizes", "1,2", "--repeat", "1",
                     "--threads", "1", "--out", str(out), "--conformance-tools", "3"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert_table(printed, COLUMNS)
    assert_table(printed, CONFORMANCE_COLUMNS)
    rows = read_rows(out, "tools", COLUMNS)
    assert [(r["format"], r["tools"]) for r in rows] == [("hermes", 1), ("hermes", 2), ("deepseek_v31", 1),
                                                        ("deepseek_v31", 2)]
    for r in rows:
        assert r["cold_ms"] > 0 and r["cached_us"] > 0 and r["build_ms"] > 0 and r["xgr_cold_ms"] > 0
        assert r["swap1_ms"] > 0 and r["xgr_swap1_ms"] > 0 and r["mem_mb"] > 0 and r["mem_x_xgr"] > 0
        assert r["x_xgr"] == r["cold_ms"] / r["xgr_cold_ms"]
        assert r["cold_warm_ms"] > 0 and r["x_xgr_warm"] == r["cold_warm_ms"] / r["xgr_cold_ms"]
        assert r["cached_us"] < r["cold_ms"] * 1e3  # a cache hit is cheaper than a cold compile
        assert r["fill_us"] is not None and r["fill_us"] > 0  # our grammar accepted the rendered call
        # the schema-order baseline of the same run (the corpus's first tools have several properties)
        assert r["schema_cold_ms"] > 0 and r["cold_x"] > 0
    # the conformance table: the first 3 corpus tools (4 examples) as the Qwen3 and DeepSeek V3.1 templates
    # write them, each accepted and read back
    crows = read_rows(tmp_path / "tools-conformance.jsonl", "tools-conformance", CONFORMANCE_COLUMNS)
    assert [(r["renderer"], r["format"]) for r in crows] == [("hermes", "hermes"), ("deepseek_v31", "deepseek_v31")]
    for r in crows:
        assert r["total"] == 4 and r["refused"] == 0 and r["accepted"] == r["exact"] == 4, r
        assert r["compile_ms"] > 0 and 0 < r["fill_us"] <= r["fill_max_us"]


def test_corpus_tools_past_the_corpus_are_renamed_copies():
    tools = corpus_tools(120)
    names = [t["function"]["name"] for t in tools]
    assert len(set(names)) == 120 and names[56] == names[0] + "_2" and names[112] == names[0] + "_3"
    assert _render_call("hermes", tools[0]) is not None and _render_call("hermes", tools[1]) is None


PROPS_COLUMNS = ["format", "props", "required", "cold_ms", "schema_cold_ms", "cold_x", "spec_kb", "schema_spec_kb",
                 "fill_us", "schema_fill_us", "caller_fill_us", "fill_max_us", "sorted_fill_us", "sorted_fill_max_us",
                 "check_us"]
ALWAYS = ["format", "props", "required", "cold_ms", "spec_kb", "fill_us", "fill_max_us", "sorted_fill_us",
          "sorted_fill_max_us", "caller_fill_us"]


def test_bench_tools_props_tiny(tmp_path, capsys):
    out = tmp_path / "tools.jsonl"
    rc = bench_main(["tools", "--props", "1,3", "--repeat", "1", "--threads", "1", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, PROPS_COLUMNS)
    rows = read_rows(out, "tools", ALWAYS)
    assert [(r["format"], r["props"]) for r in rows] == [("gemma4", 1), ("gemma4", 3), ("hermes", 1), ("hermes", 3),
                                                        ("qwen3_6", 1), ("qwen3_6", 3)]
    for r in rows:
        assert r["cold_ms"] > 0 and r["fill_us"] is not None  # the schema's order is always accepted
        # sorted keys: gemma4 (its template sorts), and the caller's order of the others takes any order;
        # a shuffled order only where the template keeps the caller's order (or one property)
        assert r["sorted_fill_us"] is not None
        assert (r["caller_fill_us"] is not None) == (r["format"] != "gemma4" or r["props"] == 1)
        # beside it the schema's order only, where it differs (3 properties of hermes and qwen3_6), whose
        # grammar takes the schema order, and the key check of the shuffled call
        differs = r["format"] != "gemma4" and r["props"] == 3
        assert ("schema_cold_ms" in r) == ("cold_x" in r) == ("schema_fill_us" in r) == differs
        assert ("check_us" in r) == differs
        if differs:
            assert r["schema_cold_ms"] > 0 and r["schema_fill_us"] is not None and r["check_us"] > 0
