"""The main job, ``python -m bench`` (the engine loop), run once with tiny sizes so it never rots:
every kind of request finishes and every output it checked is valid."""

from __future__ import annotations

import re

import pytest
from support import assert_table, read_rows

from bench.__main__ import main

COLUMNS = ["batch", "drafts", "fill_us", "fill_x", "apply_us", "apply_x", "accept_us", "accept_x", "step_us",
           "rows_per_step", "masked_tok_per_s", "finished", "invalid", "truncated"]


@pytest.mark.slow
def test_loop_tiny(tmp_path, capsys):
    out = tmp_path / "loop.jsonl"
    rc = main(["loop", "--batches", "1,4", "--drafts", "0,2", "--steps", "12", "--warmup", "1",
               "--out", str(out), "--plot", ""])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert_table(text, COLUMNS)
    checked = re.search(r"outputs checked: (\d+); invalid outputs: (\d+)", text)
    assert checked and int(checked[1]) > 0 and checked[2] == "0", text
    rows = read_rows(out, "loop", [*COLUMNS, "errors", "vocab", "seed", "apply_x_p10", "apply_x_median", "apply_x_p90"])
    # the apply floor is a fill_ of the same shape, timed around every step's apply: its spread is reported
    for r in rows:
        if r["apply_x_median"] == r["apply_x_median"]:  # not NaN: the row had masked steps
            assert 0 < r["apply_x_p10"] <= r["apply_x_median"] <= r["apply_x_p90"]
    assert {(r["batch"], r["drafts"]) for r in rows} == {(1, 0), (4, 0), (1, 2), (4, 2)}
    assert all(r["invalid"] == 0 and r["errors"] == 0 for r in rows)
    assert sum(r["finished"] for r in rows) > 0
    assert all(r["fill_us"] >= 0 and r["step_us"] > 0 for r in rows)


def test_loop_workload_every_kind_is_valid_when_scripted(qwen_vocab):
    """The workload's scripted outputs pass their own checker (so a failing loop means the library)."""
    from thinkgate.testing.workload import DEFAULT_MIX, Workload

    for kind in DEFAULT_MIX:
        w = Workload(qwen_vocab, seed=3, mix={kind: 1.0})
        for _ in range(5):
            sr = w.next()
            text = qwen_vocab.decode(sr.script[sr.content_start:-1])
            assert sr.check(text) is None, (kind, text)
            assert sr.check(text + "x") is not None or kind == "tool_auto", (kind, text)


def test_help_lists_subbenchmarks(capsys):
    import pytest

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    for name in ("loop", "reasoning", "kernels", "step", "tools"):
        assert name in text


@pytest.mark.slow
def test_loop_with_all_four_scheduler_features(tmp_path, capsys):
    """Compile while thinking, a thinking budget, jump-forward and the overlapped fill together: every
    output checked is valid, no request errs, and each feature did something."""
    out = tmp_path / "loop.jsonl"
    rc = main(["loop", "--batches", "4", "--drafts", "0,2", "--steps", "25", "--warmup", "1",
               "--compile-while-thinking", "--max-thinking-tokens", "12", "--jump-forward", "8", "--overlap",
               "--out", str(out), "--plot", ""])
    text = capsys.readouterr().out
    assert rc == 0, text
    checked = re.search(r"outputs checked: (\d+); invalid outputs: (\d+)", text)
    assert checked and int(checked[1]) > 0 and checked[2] == "0", text
    rows = read_rows(out, "loop", [*COLUMNS, "errors", "forced_ends", "compile_while_thinking"])
    assert all(r["compile_while_thinking"] for r in rows)
    assert all(r["invalid"] == 0 and r["errors"] == 0 for r in rows)
    assert sum(r["forced_ends"] for r in rows) > 0
    assert all(r["overlap_mismatch"] == 0 for r in rows)
    assert all(r["jf_calls"] > 0 for r in rows)


@pytest.mark.slow
def test_loop_max_tokens_tiny(tmp_path, capsys):
    """``--max-tokens``: the stand-in thinker is cut without reservation, never with it."""
    out = tmp_path / "reserve.jsonl"
    rc = main(["loop", "--max-tokens", "48", "--drafts", "0", "--reserve-requests", "1", "--reserve-repeats", "1",
               "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    m = re.search(r"without reservation: (\d+) cut, (\d+) invalid of (\d+); with it: (\d+) cut, (\d+) invalid", text)
    assert m and int(m[1]) + int(m[2]) > 0 and m[4] == "0" and m[5] == "0", text


@pytest.mark.slow
def test_loop_reserve_tool_formats(tmp_path, capsys):
    """``--reserve-tool-formats``: the start completion of a JSON, an XML, a DSML and a harmony format (whose
    constraint covers the thinking) reads back as one valid call; the table has every case."""
    out = tmp_path / "tools.jsonl"
    rc = main(["loop", "--reserve-tool-formats", "hermes,qwen3_6,deepseek_v4,openai", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    rows = read_rows(out, "reserve_tools", ["format", "tools", "choice", "read"])
    assert len(rows) == 16
    assert all(r["read"] == "ok" for r in rows if r["tools"] == "raw"), rows
    assert "raw cases failing: 0" in text


def test_loop_reserve_tool_set_corpus(tmp_path, capsys):
    """``--reserve-tool-set corpus``: every base corpus tool named alone on dots, whose last parameter's raw value
    is closed by the call's end (no closer of its own), reads back as one valid call."""
    out = tmp_path / "corpus.jsonl"
    rc = main(["loop", "--reserve-tool-formats", "dots", "--reserve-tool-set", "corpus", "--out", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    rows = read_rows(out, "reserve_tools", ["format", "tools", "choice", "read"])
    assert len(rows) == 56 and {r["tools"] for r in rows} == {"corpus"}
    assert all(r["read"] == "ok" for r in rows), [r for r in rows if r["read"] != "ok"]
    assert "corpus cases failing: 0" in text and "median_ms" in text
