"""``python -m bench vllm``: its arguments and its answer without vLLM always; a tiny run beside vLLM
0.34 when that environment exists (``$THINKGATE_VLLM_PYTHON``, else the repository's ``.venv-vllm/bin/python``)."""

from __future__ import annotations

import math

import pytest
from support import assert_table, read_rows

from bench import vllm as bench_vllm
from bench.__main__ import build_parser, main

COLUMNS = bench_vllm.COLUMNS


def test_bench_vllm_arguments_parse_and_bad_values_are_usage_errors(capsys):
    args = build_parser().parse_args(["vllm", "--batches", "1,16", "--drafts", "0,3", "--steps", "40",
                                      "--max-whitespace", "none", "--vllm-python", "/x/python", "--clock", "cpu"])
    assert (args.batches, args.drafts, args.steps, args.max_whitespace, args.vllm_python, args.clock) == (
        [1, 16], [0, 3], 40, None, "/x/python", "cpu")
    defaults = build_parser().parse_args(["vllm"])
    assert (defaults.batches, defaults.drafts, defaults.steps, defaults.max_whitespace, defaults.clock) == (
        [1, 16, 64, 256], [0, 3], 128, "default", "wall")
    assert build_parser().parse_args(["vllm", "--max-whitespace", "0"]).max_whitespace == 0
    for bad in (["--steps", "0"], ["--max-whitespace", "-1"], ["--max-whitespace", "lots"], ["--batches", "0"],
                ["--warmup", "-1"], ["--round-steps", "x"], ["--clock", "gpu"]):
        with pytest.raises(SystemExit) as e:
            build_parser().parse_args(["vllm", *bad])
        assert e.value.code == 2
    capsys.readouterr()


def test_bench_vllm_python_default_is_the_env_variable_then_the_repositorys_venv(monkeypatch):
    monkeypatch.delenv("THINKGATE_VLLM_PYTHON", raising=False)
    assert bench_vllm.vllm_python(None) == bench_vllm.DEFAULT_VLLM_PYTHON
    monkeypatch.setenv("THINKGATE_VLLM_PYTHON", "/env/python")
    assert bench_vllm.vllm_python(None) == "/env/python"
    assert bench_vllm.vllm_python("/arg/python") == "/arg/python"


@pytest.mark.parametrize("kind", ["missing", "no_vllm"])
def test_bench_vllm_without_vllm_says_so_and_exits_2_with_the_build_command(tmp_path, capsys, kind):
    python = tmp_path / "python"
    if kind == "no_vllm":  # a Python that exists but cannot import vLLM
        python.write_text("#!/bin/sh\nexit 1\n")
        python.chmod(0o755)
    rc = main(["vllm", "--vllm-python", str(python), "--out", str(tmp_path / "v.jsonl")])
    assert rc == 2
    err = capsys.readouterr().err
    assert f"no vLLM at {python}" in err
    assert "bash tests/integration/env_vllm.sh .venv-vllm" in err and "pip install" in err
    assert not (tmp_path / "v.jsonl").exists()
    # the recipe it names is in the repository (a fresh clone can build the environment)
    assert (bench_vllm.REPO / "tests" / "integration" / "env_vllm.sh").is_file()


@pytest.mark.slow
def test_bench_vllm_tiny_beside_vllm(tmp_path, capsys):
    """Batch 1, with and without drafts, far enough to pass the thinking: both engines allow every
    scripted token and accept every commit, and both constrain exactly the rows past ``</think>``."""
    python = bench_vllm.vllm_python(None)
    if bench_vllm.vllm_version(python) is None:
        pytest.skip(f"no vLLM at {python} (see python -m bench vllm's message to build it)")
    out = tmp_path / "vllm.jsonl"
    rc = main(["vllm", "--batches", "1", "--drafts", "0,1", "--steps", "40", "--round-steps", "7",
               "--clock", "cpu", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, COLUMNS)
    rows = read_rows(out, "vllm", COLUMNS)
    assert [(r["batch"], r["drafts"]) for r in rows] == [(1, 0), (1, 1)]
    for r in rows:
        assert r["masked_out"] == 0 and r["rejects"] == 0 and r["row_mismatches"] == 0
        assert 0 < r["con_steps"] < r["steps"] == 40
        for key in ("tg_fill_all_us", "vllm_fill_all_us", "tg_accept_all_us", "vllm_accept_all_us",
                    "tg_fill_con_us", "vllm_fill_con_us"):
            assert r[key] > 0 and math.isfinite(r[key]), key
        assert r["vllm"].startswith("0.34.") and r["clock"] == "cpu"
        # both count the same constrained rows: none while thinking, then one per position
        assert r["tg_rows_per_step"] == r["vllm_rows_per_step"] > 0
