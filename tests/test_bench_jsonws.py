"""``python -m bench jsonws`` runs, tiny, so the benchmark never rots."""

from __future__ import annotations

from support import assert_table, read_rows

from bench.__main__ import main as bench_main
from bench.jsonws import load_corpus

COLUMNS = ["vocab", "kind", "n", "xgr_on_ms", "xgr_off_ms", "old_off_ms", "new_on_ms", "new/xgr_on_ms", "svc_ms",
           "svc/xgr_on_ms", "xgr_mb", "old_mb", "new_mb", "new/xgr_mb", "xgr_fill_us", "old_fill_us", "new_fill_us", "new/xgr_fill_us"]


def test_bench_jsonws_tiny(tmp_path, capsys):
    out = tmp_path / "jsonws.jsonl"
    rc = bench_main(["jsonws", "--vocabs", "bytes", "--limit", "3", "--repeat", "1", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, COLUMNS)
    rows = read_rows(out, "jsonws", COLUMNS)
    assert rows[-1]["kind"] == "all" and rows[-1]["n"] == 3 == sum(r["n"] for r in rows[:-1])
    for r in rows:
        assert r["xgr_off_ms"] > 0 and r["old_off_ms"] > 0 and r["new_on_ms"] > 0
        assert r["svc_ms"] > 0 and r["svc/xgr_on_ms"] > 0  # through the compile service, paired
        assert r["new_fill_us"] > 0 and r["old_fill_us"] > 0 and r["xgr_fill_us"] > 0
        # the new way compiles xgrammar's own grammar: the same size, to the byte
        assert r["new_mb"] == r["xgr_mb"] and r["new/xgr_mb"] == 1.0


def test_corpus_has_real_schemas_of_several_kinds():
    schemas = load_corpus()
    assert len(schemas) >= 50
    kinds = {s["kind"] for s in schemas}
    assert len(kinds) >= 5
    assert all(isinstance(s["schema"], dict) and "instance" in s for s in schemas)
