"""``python -m bench step`` runs, tiny, so it never rots; its rows carry the figures it prints."""

from __future__ import annotations

import json

from bench.__main__ import main


def test_bench_step_tiny(tmp_path, capsys):
    out = tmp_path / "step.jsonl"
    rc = main(["step", "--batch", "1", "4", "--drafts", "0", "2", "--steps", "2", "--warmup", "1",
               "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "mgr_us" in printed and "floor_us" in printed and "ratio" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["batch"], r["drafts"]) for r in rows] == [(1, 0), (4, 0), (1, 2), (4, 2)]
    for r in rows:
        assert r["bench"] == "step" and r["mgr_us"] > 0 and r["floor_us"] > 0 and r["ratio"] > 0
        assert r["thinking"] == round(r["batch"] * 0.5)
        # the constrained half gets one row per position; the thinking half a row per position too
        # (qwen3's implicit <tool_call> end, which a JSON grammar cannot start with, is masked)
        assert r["rows"] == r["batch"] * (1 + r["drafts"])
