"""``python -m bench sglang`` runs once, tiny, so it does not rot: both backends take the same stream,
every request terminates, one row per phase."""

from __future__ import annotations

import json

from bench.__main__ import main


def test_bench_sglang_runs_tiny(tmp_path, capsys):
    out = tmp_path / "sglang.jsonl"
    assert main(["sglang", "--batch", "2", "--think", "4", "--rounds", "1", "--out", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["phase"] for r in rows] == ["thinking", "content"]
    assert all(r["positions"] > 0 and r["tg_us"] > 0 and r["sglang_us"] > 0 for r in rows)
    assert "sglang_over_tg" in capsys.readouterr().out
