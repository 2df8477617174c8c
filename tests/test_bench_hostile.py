"""``python -m bench hostile`` runs, tiny, so it never rots; its rows carry the figures it prints."""

from __future__ import annotations

import json

from bench.__main__ import main


def test_bench_hostile_tiny(tmp_path, capsys):
    out = tmp_path / "hostile.jsonl"
    rc = main(["hostile", "--adds", "2", "--hostile", "2", "--trials", "1", "--max-workers", "4",
               "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "add_request" in printed and "time_to_ready" in printed and "ratio" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["figure"], r["kind"]) for r in rows] == [
        ("add_request", "trivial"), ("add_request", "hostile"),
        ("time_to_ready", "idle"), ("time_to_ready", "2 hostile running")]
    for r in rows:
        assert r["bench"] == "hostile" and r["ratio"] > 0 and r["n"] >= 1
    assert rows[-1]["hostile_still_compiling"] == 2
