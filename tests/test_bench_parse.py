"""``python -m bench parse`` runs, tiny, so it never rots: rows written, table printed, the call read."""

from __future__ import annotations

import pytest
from support import assert_table, read_rows

from bench.__main__ import main

COLUMNS = ["format", "reasoning", "vocab", "output_tokens", "delta_median_us", "delta_p90_us", "delta_mean_us",
           "ratio_vs_smallest"]


def test_bench_parse_tiny(tmp_path, capsys):
    """Exits 0 (it stops with an error when the call at the end of an output is not read), prints its table
    and writes a row per format and size."""
    out = tmp_path / "parse.jsonl"
    rc = main(["parse", "--formats", "hermes,deepseek_v4,mistral,openai,json", "--sizes", "120,300",
               "--window", "60", "--repeat", "1", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, COLUMNS)
    rows = read_rows(out, "parse", COLUMNS)
    assert {r["format"] for r in rows} == {"hermes", "deepseek_v4", "mistral", "openai", "json"}
    assert len(rows) == 10
    for r in rows:
        assert r["delta_median_us"] > 0 and r["output_tokens"] >= 60


def test_bench_parse_constrained_tiny(tmp_path, capsys):
    """--constrained: the call streams name first, then argument text (the bench checks that the argument
    deltas join to the call's arguments)."""
    out = tmp_path / "parse.jsonl"
    rc = main(["parse", "--formats", "hermes,qwen3_6,openai", "--sizes", "120,300", "--window", "60", "--repeat", "1",
               "--constrained", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, ["format", "mode", *COLUMNS[1:]])
    rows = read_rows(out, "parse", COLUMNS)
    assert {r["mode"] for r in rows} == {"constrained"} and len(rows) == 6


def test_bench_parse_rejects_unknown_format():
    with pytest.raises(SystemExit):
        main(["parse", "--formats", "nope"])


def test_bench_parse_covers_every_registered_format():
    from bench.parse import CASES
    from thinkgate.structured_output.tools import list_tool_formats
    assert set(CASES) == set(list_tool_formats())
