"""``python -m bench reasoning`` runs, tiny, so it never rots: rows written, table printed, checks pass."""

from __future__ import annotations

import json

import pytest

from bench.__main__ import main


def test_bench_reasoning_tiny(tmp_path, capsys):
    out = tmp_path / "reasoning.jsonl"
    rc = main(["reasoning", "--families", "qwen3,granite,olmo3", "--sizes", "40,120", "--window", "10",
               "--out", str(out)])
    assert rc == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {(r["family"], r["kind"], r["thinking_tokens"]) for r in rows} == {
        (f, k, n) for f in ("qwen3", "granite", "olmo3") for k in ("tracker", "stream") for n in (40, 120)}
    for r in rows:
        assert r["bench"] == "reasoning" and r["window"] == 10 and r["step_median_us"] > 0
        assert "date" in r and "python" in r
        if r["thinking_tokens"] == 40:
            assert r["ratio_vs_smallest"] == 1.0
    table = capsys.readouterr().out
    assert "ratio_vs_smallest" in table and "granite" in table


def test_bench_reasoning_rejects_unknown_family():
    with pytest.raises(SystemExit):
        main(["reasoning", "--families", "nope"])
