"""The Triton kernel compiled on a CUDA GPU: an exactness sweep, CUDA-graph capture, no host sync, no
allocation, and the unchecked entry point. Skipped without a CUDA device (tests/test_kernels.py runs
the same kernel interpreted on CPU tensors; tests/test_kernel_store_layout.py checks its sm_90 code).
"""

from __future__ import annotations

import os

import pytest
import torch

from thinkgate.kernels import (
    apply_token_bitmask_inplace,
    apply_token_bitmask_inplace_unchecked,
    apply_token_bitmask_reference,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
WIDTHS = [1, 31, 32, 33, 1000, 4095, 4097, 32001, 32017, 32032, 129280, 248320]


@pytest.fixture
def gen() -> torch.Generator:
    s = int(os.environ.get("THINKGATE_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"seed={s}")
    return torch.Generator(device="cuda").manual_seed(s)


def bits(gen: torch.Generator, n: int, words: int, blocked: float | None) -> torch.Tensor:
    """int32 [n, words] on the GPU: uniformly random words, or each bit 0 with probability ``blocked``."""
    if blocked is None:
        return torch.randint(-(2**31), 2**31 - 1, (n, words), dtype=torch.int32, device="cuda", generator=gen)
    allowed = torch.rand((n, words, 32), device="cuda", generator=gen) >= blocked
    shifts = torch.arange(32, device="cuda", dtype=torch.int32)
    return (allowed.to(torch.int32) << shifts).sum(-1, dtype=torch.int32)


def logits_of(gen: torch.Generator, rows: int, width: int, dtype: torch.dtype, pad: int = 0) -> torch.Tensor:
    """[rows, width] view of a [rows, width + pad] buffer, with +-inf in it where there is room."""
    buf = torch.randn((rows, width + pad), device="cuda", generator=gen).to(dtype)
    if width > 5:
        buf[:, 3] = float("inf")
        buf[:, 5] = float("-inf")
    return buf[:, :width]


def equal_to_reference(logits, bitmask, indices, vocab_size, unchecked: bool = False) -> bool:
    expected = logits.clone()
    ref_indices = indices.tolist() if isinstance(indices, torch.Tensor) else indices
    apply_token_bitmask_reference(expected, bitmask, ref_indices, vocab_size)
    got = logits.clone() if logits.is_contiguous() else _same_strides(logits)
    if unchecked:
        apply_token_bitmask_inplace_unchecked(got, bitmask, indices, vocab_size)
    else:
        apply_token_bitmask_inplace(got, bitmask, indices, vocab_size)
    return torch.equal(got, expected) and torch.equal(torch.isneginf(got), torch.isneginf(expected))


def _same_strides(t: torch.Tensor) -> torch.Tensor:
    buf = torch.empty((t.shape[0], t.stride(0)), dtype=t.dtype, device=t.device)
    view = buf[:, : t.shape[1]]
    view.copy_(t)
    return view


def sweep_cases(gen: torch.Generator):
    """(name, logits, bitmask, indices, vocab_size, unchecked) over dtypes, widths, densities, index
    forms, strides, vocab_size padding and bitmask widths."""
    for dtype in DTYPES:
        for width in WIDTHS:
            words = -(-width // 32)
            for k, blocked in enumerate((None, 0.999, 0.5, 0.001)):
                rows = 5
                pad = (0, 37, 64, 3)[k]
                logits = logits_of(gen, rows, width, dtype, pad)
                vocab = None if k == 0 else max(0, width - (7 * k) % 40)
                tag = f"{dtype} width={width} blocked={blocked} pad={pad} vocab={vocab}"
                yield tag + " no indices", logits, bits(gen, rows, words, blocked), None, vocab, False
                mask = bits(gen, 6, words, blocked)
                mask[1] = 0
                mask[2] = -1
                yield tag + " list", logits, mask, [4, 0, 4, 2, 1, 3], vocab, False
                idx = torch.tensor([3, 1, 1, 0, 4, 2], device="cuda", dtype=(torch.int32, torch.int64)[k % 2])
                yield tag + " device indices", logits, mask, idx, vocab, False
                yield tag + " unchecked", logits, mask, idx, vocab, True
            mask = bits(gen, 3, words + 3, 0.5)
            logits = logits_of(gen, 3, width, dtype, 16)
            yield f"{dtype} width={width} wider bitmask", logits, mask, None, None, False
            if words > 1:
                yield f"{dtype} width={width} narrower bitmask", logits, mask[:, : words - 1], None, None, False
            yield f"{dtype} width={width} expanded bitmask", logits, mask[:1, :words].expand(3, -1), None, None, False
    # large batches take the 4,096-column blocks; rows of the real vocabularies
    for dtype in DTYPES:
        for width, vocab in ((129280, 129280), (248320, 248077)):
            mask = bits(gen, 40, width // 32, 0.999)
            mask[::4] = bits(gen, 10, width // 32, 0.001)
            logits = logits_of(gen, 64, width, dtype)
            idx = torch.randperm(64, device="cuda", generator=gen)[:40].to(torch.int32)
            yield f"{dtype} width={width} batch 40 of 64", logits, mask, idx, vocab, False


def test_exactness_sweep_on_cuda(gen):
    cases = failed = 0
    failures = []
    for name, logits, bitmask, indices, vocab, unchecked in sweep_cases(gen):
        cases += 1
        if not equal_to_reference(logits, bitmask, indices, vocab, unchecked):
            failed += 1
            failures.append(name)
    print(f"exactness sweep on {torch.cuda.get_device_name(0)}: {cases - failed} of {cases} cases equal the reference")
    assert not failures, failures[:20]


def test_out_of_range_device_index_writes_nothing(gen):
    logits = logits_of(gen, 4, 5000, torch.bfloat16, 8)
    mask = bits(gen, 3, 157, 0.5)
    before = logits.clone()
    apply_token_bitmask_inplace(logits, mask, torch.tensor([2, 99, -1], device="cuda"))
    expected = before.clone()
    apply_token_bitmask_reference(expected, mask[:1], [2])
    assert torch.equal(logits, expected)


def test_launches_capture_in_a_cuda_graph_and_replay_with_new_masks(gen):
    width, vocab, rows, n = 248320, 248077, 8, 6
    words = width // 32
    logits = torch.empty((rows, width), device="cuda")
    mask = torch.empty((n, words), dtype=torch.int32, device="cuda")
    idx = torch.empty(n, dtype=torch.int32, device="cuda")
    half = logits[:, : width // 2]  # a strided view, masked through the unchecked entry point

    def step():
        apply_token_bitmask_inplace(logits, mask, idx, vocab_size=vocab)
        apply_token_bitmask_inplace_unchecked(half, mask, idx, None)

    mask.zero_()
    idx.copy_(torch.arange(n))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile outside the capture
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    for trial, blocked in enumerate((0.999, 0.5, 0.001)):
        fresh = torch.randn((rows, width), device="cuda", generator=gen)
        mask.copy_(bits(gen, n, words, blocked))
        idx.copy_(torch.randperm(rows, device="cuda", generator=gen)[:n].to(torch.int32))
        logits.copy_(fresh)
        graph.replay()
        expected = fresh.clone()
        apply_token_bitmask_reference(expected, mask, idx.tolist(), vocab)
        apply_token_bitmask_reference(expected[:, : width // 2], mask, idx.tolist(), None)
        assert torch.equal(logits, expected), f"replay {trial}"


def test_no_host_sync_and_no_allocation(gen):
    logits = logits_of(gen, 16, 248320, torch.float16)
    mask = bits(gen, 12, 7760, 0.5)
    idx = torch.arange(12, device="cuda", dtype=torch.int64).flip(0)
    apply_token_bitmask_inplace(logits, mask, idx, vocab_size=248077)  # compile first
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    torch.cuda.set_sync_debug_mode("error")
    try:
        apply_token_bitmask_inplace(logits, mask, idx, vocab_size=248077)
        apply_token_bitmask_inplace(logits[:12], mask)
        apply_token_bitmask_inplace_unchecked(logits, mask, idx, 248077)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() == before == torch.cuda.memory_allocated()
