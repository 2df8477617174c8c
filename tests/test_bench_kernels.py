"""``python -m bench kernels`` runs, tiny, so the benchmark never rots."""

from __future__ import annotations

import pytest
import torch
from support import assert_table, read_rows

from bench.__main__ import main as bench_main
from thinkgate.testing.bitmasks import realistic_bitmask

COLUMNS = ["width", "batch", "blocked_frac", "ours_us", "xgr_cpu_us", "fill_us", "torch_us", "xgr_over_ours",
           "ours_over_fill", "ours_over_fill_p10"]


def test_bench_kernels_tiny(tmp_path, capsys):
    """Exits 0 (it stops with an error when our CPU path and xgrammar's disagree), prints its table and
    writes one row per (width, batch) with every column."""
    out = tmp_path / "kernels.jsonl"
    rc = bench_main(["kernels", "--batches", "1,4", "--vocabs", "4097", "--repeat", "2", "--rounds", "1",
                     "--device", "cpu", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, COLUMNS)
    rows = read_rows(out, "kernels", [*COLUMNS, "vocab_size", "dtype", "samples"])
    assert [(r["width"], r["batch"]) for r in rows] == [(4097, 1), (4097, 4)]
    for r in rows:
        for key in ("ours_us", "xgr_cpu_us", "fill_us", "torch_us"):
            assert r[key] > 0
        assert 0.0 < r["blocked_frac"] <= 1.0


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU table needs a CUDA device")
def test_bench_kernels_gpu_tiny(tmp_path, capsys):
    """The GPU table: one row per (dtype, width, batch, density), every time positive, each checked
    against the reference inside the benchmark (it exits non-zero on a mismatch)."""
    from bench.kernels_gpu import GPU_COLUMNS

    out = tmp_path / "kernels.jsonl"
    rc = bench_main(["kernels", "--device", "cuda", "--batches", "1,3", "--vocabs", "4097",
                     "--dtypes", "float32,bfloat16", "--xgrammar-cuda", "off", "--out", str(out)])
    assert rc == 0
    assert_table(capsys.readouterr().out, GPU_COLUMNS)
    rows = read_rows(out, "kernels", [c for c in GPU_COLUMNS if not c.startswith("xgr")])
    assert len(rows) == 2 * 2 * 3
    for r in rows:
        for key in ("ours_us", "unchecked_us", "fill_us", "path_us", "h2d_us"):
            assert r[key] > 0
        assert 0.0 < r["floor_frac"]


def test_realistic_bitmask_shape_and_densities():
    width, vocab = 4160, 4100
    bm = realistic_bitmask(8, width, vocab, seed=3)
    assert bm.shape == (8, 130) and bm.dtype == torch.int32
    bits = ((bm.to(torch.int64)[:, :, None] >> torch.arange(32)) & 1).reshape(8, -1)
    allowed = bits.sum(1)
    # rows 3 and 7 are "inside a string": almost everything below vocab allowed
    assert allowed[3] > 0.95 * vocab and allowed[7] > 0.95 * vocab
    # the others are JSON structure: at most 24 allowed ids
    assert all(0 < allowed[i] <= 24 for i in (0, 1, 2, 4, 5, 6))
    # ids past the tokenizer size are never allowed
    assert bits[:, vocab:].sum() == 0
