"""``python -m bench first_token`` runs, tiny, so the benchmark never rots."""

from __future__ import annotations

import pytest
from support import assert_table, read_rows

from bench.__main__ import main as bench_main

COLUMNS = ["compile_while_thinking", "requests", "think", "step_ms", "median_ms", "p90_ms", "max_ms", "held", "ratio"]


@pytest.mark.slow
def test_bench_first_token_tiny(tmp_path, capsys):
    out = tmp_path / "first_token.jsonl"
    rc = bench_main(["first_token", "--schemas", "2", "--think", "3", "--step-ms", "1", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, COLUMNS)
    rows = read_rows(out, "first_token", COLUMNS)
    assert [r["compile_while_thinking"] for r in rows] == [False, True]
    for r in rows:
        assert r["requests"] == 2 and 0 < r["median_ms"] <= r["p90_ms"] <= r["max_ms"]
    assert rows[0]["held"] == 0  # off: a request thinks only once its grammar exists, nothing to hold
