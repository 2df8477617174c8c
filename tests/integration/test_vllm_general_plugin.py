"""The general plugin: opt-in, and its CPU-worker patch gives exactly vLLM's result.

(The backend patch is exercised by ``test_vllm_structured_output.py``, parametrized over vLLM's
xgrammar backend and thinkgate's.)
"""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace as NS

import numpy as np
import pytest
import torch


@pytest.mark.parametrize("vocab_size", [32001, 32032, 129280])
@pytest.mark.parametrize("stride,lengths", [(1, [1, 1, 1]), (3, [3, 1, 2]), (3, [0, 3, 3])])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_cpu_worker_patch_matches_vllms_torch_path(vocab_size, stride, lengths, dtype):
    """Same logits bit for bit as vLLM's own ``apply_grammar_bitmask``: requests in a different order
    than the batch, drafted positions trimmed (a request with fewer logits than its rows), a request
    in the batch without a grammar."""
    from vllm.v1.worker.cpu.structured_outputs import CPUStructuredOutputsWorker

    from thinkgate.engines.vllm import cpu_worker as vllm_cpu_worker

    rng = np.random.default_rng(vocab_size + stride)
    req_ids = ["a", "b", "c", "free"]
    counts = lengths + [2]
    cu = torch.tensor(np.concatenate([[0], np.cumsum(counts)]), dtype=torch.int32)
    batch = NS(req_ids=req_ids, cu_num_logits=cu)
    grammar_ids = ["c", "a", "b"]
    words = (vocab_size + 31) // 32
    bitmask = rng.integers(-2**31, 2**31, size=(len(grammar_ids) * stride, words), dtype=np.int64).astype(np.int32)
    logits = torch.randn(int(cu[-1]), vocab_size).to(dtype)
    worker = CPUStructuredOutputsWorker(int(cu[-1]), vocab_size, torch.device("cpu"), stride)
    want, got = logits.clone(), logits.clone()
    vllm_cpu_worker.uninstall()
    worker.apply_grammar_bitmask(want, batch, grammar_ids, bitmask)
    vllm_cpu_worker.install()
    try:
        assert vllm_cpu_worker.installed()
        worker.apply_grammar_bitmask(got, batch, grammar_ids, bitmask)
    finally:
        vllm_cpu_worker.uninstall()
    assert torch.equal(torch.isinf(want), torch.isinf(got)) and torch.equal(want, got)
    assert torch.isinf(got).any() and not torch.isinf(got[int(cu[3]):]).any()  # the free request untouched


def test_general_plugin_is_opt_in():
    """vLLM calls every general plugin's entry point; thinkgate's patches only with
    THINKGATE_VLLM_BACKEND=1 (a fresh interpreter each, as each vLLM process starts)."""
    code = (
        "from vllm.plugins import load_general_plugins\n"
        "load_general_plugins()\n"
        "import vllm.v1.structured_output as so\n"
        "from vllm.v1.worker.cpu.structured_outputs import CPUStructuredOutputsWorker as W\n"
        "print(so.XgrammarBackend.__module__, W.apply_grammar_bitmask.__module__)\n"
    )
    import os

    for flag, want in (("", "vllm.v1.structured_output.backend_xgrammar vllm.v1.worker.cpu.structured_outputs"),
                       ("1", "thinkgate.engines.vllm.structured_outputs thinkgate.engines.vllm.cpu_worker")):
        env = {**os.environ, "THINKGATE_VLLM_BACKEND": flag}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                             cwd="/")
        assert out.returncode == 0, out.stderr[-3000:]
        assert out.stdout.strip().splitlines()[-1] == want, (flag, out.stdout, out.stderr[-2000:])


def test_bench_vllm_cpu_runs_tiny(tmp_path):
    """``python -m bench vllm_cpu`` (the CPU-worker apply, vLLM's path vs the patch) runs once, tiny."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    out = tmp_path / "rows.jsonl"
    res = subprocess.run([sys.executable, "-m", "bench", "vllm_cpu", "--batches", "2", "--vocabs", "32001",
                          "--repeat", "1", "--rounds", "1", "--out", str(out)],
                         capture_output=True, text=True, timeout=300, cwd=root)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert "vllm_over_tg" in res.stdout and out.read_text().count('"same": true') == 1
