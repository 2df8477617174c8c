"""``python -m bench vllm``: its arguments and its answer without vLLM always; a tiny run beside vLLM
0.34 when that environment exists (``$THINKGATE_VLLM_PYTHON``, else the repository's ``.venv-vllm/bin/python``)."""

from __future__ import annotations

import math

import jsonschema
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
    assert (defaults.workload, defaults.tool_format, defaults.tools) == ("json", "deepseek_v31", 10)
    tools = build_parser().parse_args(["vllm", "--workload", "tools", "--tool-format", "deepseek_v3", "--tools", "4"])
    assert (tools.workload, tools.tool_format, tools.tools) == ("tools", "deepseek_v3", 4)
    assert build_parser().parse_args(["vllm", "--max-whitespace", "0"]).max_whitespace == 0
    for bad in (["--steps", "0"], ["--max-whitespace", "-1"], ["--max-whitespace", "lots"], ["--batches", "0"],
                ["--warmup", "-1"], ["--round-steps", "x"], ["--clock", "gpu"], ["--workload", "yaml"],
                ["--tools", "3"]):
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


def test_bench_vllm_tools_workload_writes_calls_that_read_back_and_that_its_constraint_accepts():
    """The tools workload is what it says: after ``</think>`` each script is one call of its schema's tool,
    with its document as the arguments (read back by the format's reader), and thinkgate's constraint for
    ``tool_choice="required"`` accepts it to the stop token; vLLM's tag is the same tag with its markers as ids."""
    import json

    import xgrammar as xgr

    from thinkgate.reasoning import load_vocabulary
    from thinkgate.structured_output import Compiler, Constraint
    from thinkgate.structured_output.tools import get_tool_reader

    vocab = load_vocabulary("deepseek_v4")
    end = vocab.token_id("</think>")
    stop = vocab.token_id("<｜end▁of▁sentence｜>")
    tools = bench_vllm.workload_tools(6)
    assert [t["function"]["name"] for t in tools][:4] == list(bench_vllm.TOOL_NAMES.values()) and len(tools) == 6
    reqs = bench_vllm.build_requests(vocab, 4, 60, 7, tool_format="deepseek_v31", n_tools=6)
    reader = get_tool_reader("deepseek_v31", tools, "required")
    comp = Compiler(vocab, num_threads=1)
    try:
        compiled = comp.compile(Constraint.structural_tag(json.loads(reqs[0]["tag"])))
        for r, kind in zip(reqs, bench_vllm.SCHEMAS):
            assert "schema" not in r and r["tag"] == reqs[0]["tag"] and r["vllm_tag"] == reqs[0]["vllm_tag"]
            stream = r["stream"]
            assert stream[r["think_end"]] == end and stream[-1] == stop
            call = stream[r["think_end"] + 1:-1]
            assert len(call) >= 60
            got = reader.read_ids(call, vocab)
            assert [c.name for c in got.calls] == [bench_vllm.TOOL_NAMES[kind]] and not (got.content or "").strip()
            args = json.loads(got.calls[0].arguments)
            jsonschema.validate(args, bench_vllm.SCHEMAS[kind])
            m = xgr.GrammarMatcher(compiled.grammar)
            assert all(m.accept_token(t) for t in [*call, stop]) and m.is_terminated()
    finally:
        comp.close()
    # the markers are control tokens of this vocabulary: thinkgate's tag names them, vLLM's gives their ids
    begin = vocab.token_id("<｜tool▁calls▁begin｜>")
    assert '"<｜tool▁calls▁begin｜>"' in reqs[0]["tag"] and f'"token": {begin}' in reqs[0]["vllm_tag"]
    with pytest.raises(ValueError, match="no control token '<tool_call>'"):
        bench_vllm.build_requests(vocab, 1, 1, 0, tool_format="hermes")


def test_bench_vllm_tools_workload_with_a_format_the_vocabulary_lacks_is_a_usage_error(tmp_path, capsys):
    rc = main(["vllm", "--workload", "tools", "--tool-format", "qwen3_6", "--vllm-python", str(tmp_path / "python"),
               "--out", str(tmp_path / "v.jsonl")])
    err = capsys.readouterr().err
    assert rc == 2 and "--tool-format qwen3_6" in err and "no control token '<tool_call>'" in err
    assert not (tmp_path / "v.jsonl").exists()


@pytest.mark.slow
@pytest.mark.parametrize("workload", ["json", "tools"])
def test_bench_vllm_tiny_beside_vllm(tmp_path, capsys, workload):
    """Batch 1, with and without drafts, far enough to pass the thinking: both engines allow every
    scripted token and accept every commit, and both constrain exactly the rows past ``</think>``
    (the tools workload: vLLM's xgrammar backend on the tag thinkgate's vLLM tool parser writes)."""
    python = bench_vllm.vllm_python(None)
    if bench_vllm.vllm_version(python) is None:
        pytest.skip(f"no vLLM at {python} (see python -m bench vllm's message to build it)")
    out = tmp_path / "vllm.jsonl"
    rc = main(["vllm", "--batches", "1", "--drafts", "0,1", "--steps", "40", "--round-steps", "7",
               "--clock", "cpu", "--workload", workload, "--out", str(out)])
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
        assert r["vllm"].startswith("0.34.") and r["clock"] == "cpu" and r["workload"] == workload
        assert r.get("tool_format") == ("deepseek_v31" if workload == "tools" else None)
        # both count the same constrained rows: none while thinking, then one per position
        assert r["tg_rows_per_step"] == r["vllm_rows_per_step"] > 0
