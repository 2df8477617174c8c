"""thinkgate's CPU bitmask kernel under vLLM 0.34's CPU worker (what the general plugin installs).

vLLM's CPU model runner applies the grammar bitmask in ``CPUStructuredOutputsWorker.apply_grammar_bitmask``
with plain torch ops: it unpacks every row to a ``[rows, V]`` boolean tensor, gathers the rows,
``masked_fill_``\\ s them and scatters them back. :func:`install` replaces that method with one that
finds the same logits rows the same way (each grammar request owns ``mask_stride`` bitmask rows; rows
past the request's logits are skipped) and applies the packed rows in place with
:func:`thinkgate.kernels.apply_token_bitmask_inplace` (the C kernel; no unpacked mask, no copies of
the logits). Same result, bit for bit: a masked logit becomes -inf, any other is untouched.
``python -m bench kernels`` measures the kernel against torch on the same tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from thinkgate.kernels.api import apply_token_bitmask_inplace

from thinkgate.engines.registration import Patch

__all__ = ["PATCH", "apply_grammar_bitmask", "install", "uninstall", "installed"]


def apply_grammar_bitmask(self: Any, logits: torch.Tensor, input_batch: Any, grammar_req_ids: list[str],
                          grammar_bitmask: np.ndarray) -> None:
    """``CPUStructuredOutputsWorker.apply_grammar_bitmask`` with thinkgate's kernel (same rows, same
    result)."""
    if not grammar_req_ids:
        return
    stride = self.mask_stride
    req_index = {req_id: i for i, req_id in enumerate(input_batch.req_ids)}
    cu = input_batch.cu_num_logits
    rows: list[int] = []
    keep: list[int] = []
    k = 0
    for req_id in grammar_req_ids:
        i = req_index[req_id]
        start, end = int(cu[i]), int(cu[i + 1])
        for position in range(stride):
            if position < end - start:
                rows.append(start + position)
                keep.append(k)
            k += 1
    if k != grammar_bitmask.shape[0]:
        raise ValueError(f"grammar bitmask has {grammar_bitmask.shape[0]} rows, the batch owns {k}")
    if not rows:
        return
    packed = torch.from_numpy(grammar_bitmask)
    if len(keep) != k:
        packed = packed[torch.tensor(keep, dtype=torch.int64)]
    apply_token_bitmask_inplace(logits, packed, torch.tensor(rows, dtype=torch.int64))


def _worker() -> Any:
    from vllm.v1.worker.cpu.structured_outputs import CPUStructuredOutputsWorker

    return CPUStructuredOutputsWorker


PATCH = Patch(_worker, "apply_grammar_bitmask", apply_grammar_bitmask)
"""vLLM's CPU worker's bitmask apply, replaced by :func:`apply_grammar_bitmask` while installed."""
install, uninstall, installed = PATCH.install, PATCH.uninstall, PATCH.installed
