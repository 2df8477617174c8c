"""pytest-benchmark micro-benchmarks of the CPU bitmask path (batch 16, Qwen3.6 width 248,320).

pytest runs with --benchmark-disable by default, so each runs once as a test and checks its result
against the pure-torch reference; ``python -m pytest tests/test_kernels_microbench.py --benchmark-enable``
times them. The baselines (xgrammar's CPU kernel, ``logits.fill_`` on the same tensor) are timed by
``python -m bench kernels``, not here: a test of someone else's kernel cannot fail for ours.
"""

from __future__ import annotations

import pytest
import torch

from thinkgate.testing.bitmasks import realistic_bitmask
from thinkgate.kernels import apply_token_bitmask_inplace, apply_token_bitmask_reference

WIDTH, VOCAB, BATCH = 248320, 248077, 16


@pytest.fixture(scope="module")
def case():
    bitmask = realistic_bitmask(BATCH, WIDTH, VOCAB, seed=7)
    logits = torch.randn((BATCH, WIDTH), generator=torch.Generator().manual_seed(7))
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask, None, VOCAB)
    return logits, bitmask, expected


@pytest.mark.parametrize("backend", ["cpu", "torch"])
def test_apply_cpu_batch16(benchmark, case, backend):
    logits, bitmask, expected = case
    out = logits.clone()
    benchmark(apply_token_bitmask_inplace, out, bitmask, None, VOCAB, backend=backend)
    assert torch.equal(out, expected)


def test_apply_cpu_batch16_bfloat16_with_indices(benchmark, case):
    logits, bitmask, expected = case
    out = logits.to(torch.bfloat16)
    indices = torch.arange(BATCH - 1, -1, -1, dtype=torch.int32)  # reversed rows
    benchmark(apply_token_bitmask_inplace, out, bitmask.flip(0), indices, VOCAB)
    assert torch.equal(out, expected.to(torch.bfloat16))
