"""``python -m bench reasoning`` runs, tiny, so it never rots: rows written, table printed, checks pass."""

from __future__ import annotations

import pytest
from support import assert_table, read_rows

from bench.__main__ import main

COLUMNS = ["family", "vocab", "kind", "thinking_tokens", "step_median_us", "step_p90_us", "step_mean_us_whole_run",
           "ratio_vs_smallest"]


def test_bench_reasoning_tiny(tmp_path, capsys):
    """Exits 0 (it stops with an error when an end marker does not end the reasoning), prints its table
    and writes a row per family, kind and size (it skips, with rc 0, a family it cannot load)."""
    out = tmp_path / "reasoning.jsonl"
    rc = main(["reasoning", "--families", "qwen3,granite,olmo3", "--sizes", "40,120", "--window", "10",
               "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, COLUMNS)
    rows = read_rows(out, "reasoning", [*COLUMNS, "window"])
    assert {(r["family"], r["kind"], r["thinking_tokens"]) for r in rows} == {
        (f, k, n) for f in ("qwen3", "granite", "olmo3") for k in ("tracker", "stream") for n in (40, 120)}
    for r in rows:
        assert r["window"] == 10 and r["step_median_us"] > 0


def test_bench_reasoning_rejects_unknown_family():
    with pytest.raises(SystemExit):
        main(["reasoning", "--families", "nope"])
