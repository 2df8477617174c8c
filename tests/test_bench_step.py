"""``python -m bench step`` runs, tiny, so it never rots; its rows carry the figures it prints."""

from __future__ import annotations

from support import assert_table, read_rows

from bench.__main__ import main

COLUMNS = ["batch", "drafts", "thinking", "rows", "mgr_us", "floor_us", "ratio", "ratio_paired", "mgr_fill_us",
           "floor_fill_us", "mgr_accept_us", "floor_accept_us", "think_us", "think_us_per_req"]


def test_bench_step_tiny(tmp_path, capsys):
    """Exits 0 (it stops with an error when the manager rejects a token of its scripted streams), prints
    its table and writes a row per (batch, drafts) with the manager's bitmask rows per step."""
    out = tmp_path / "step.jsonl"
    rc = main(["step", "--batch", "1", "4", "--drafts", "0", "2", "--steps", "2", "--warmup", "1",
               "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, COLUMNS)
    rows = read_rows(out, "step", COLUMNS)
    assert [(r["batch"], r["drafts"]) for r in rows] == [(1, 0), (4, 0), (1, 2), (4, 2)]
    for r in rows:
        assert r["mgr_us"] > 0 and r["floor_us"] > 0
        # the constrained half gets one row per position; the thinking half a row per position too
        # (qwen3's implicit <tool_call> end, which a JSON grammar cannot start with, is masked)
        assert r["rows"] == r["batch"] * (1 + r["drafts"])
