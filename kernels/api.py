"""``apply_token_bitmask_inplace``: validation and dispatch to one of the kernels."""

from __future__ import annotations

import array
import numbers
import os
import warnings
from collections.abc import Sequence
from typing import Literal, get_args

import torch

from thinkgate.kernels import cpu_bitmask, torch_bitmask

Backend = Literal["auto", "triton", "cpu", "torch"]
BACKENDS: tuple[str, ...] = get_args(Backend)

_FLOAT_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
_triton_module = None
_triton_error: str | None = None
_auto_cuda: str | None = None  # what "auto" chose for CUDA tensors, once chosen


def apply_token_bitmask_inplace(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: Sequence[int] | torch.Tensor | None = None,
    vocab_size: int | None = None,
    *,
    backend: Backend = "auto",
) -> None:
    """Set every logit that the bitmask does not allow to -inf, in place: exactly what
    :func:`thinkgate.kernels.reference.apply_token_bitmask_reference` (the executable contract, a row
    at a time) does, after validating the arguments.

    Args:
        logits: [rows, V] (or [V]) float32 / bfloat16 / float16, unit stride along V; the row
            stride may be larger than V (a slice of a wider buffer).
        bitmask: int32 [n, words] (or [words]), unit stride along words; token t is allowed iff
            bit t % 32 of word t // 32 is set. ``words`` is normally ceil(V / 32); columns past
            32 * words are never allowed (-inf); bits for columns past V are ignored.
        indices: bitmask row i applies to logits row ``indices[i]``: a sequence of ints or an int32
            / int64 tensor with exactly n entries, in any order, each in [0, rows); duplicates apply
            all their masks. None: n must equal rows and row i goes to row i. Rows not named are
            left untouched. (xgrammar's function instead reads bitmask row ``indices[i]``; here the
            bitmask holds only the rows to mask, as the manager returns them.)
        vocab_size: the tokenizer's size when the logits are wider (padding ids); ids at or past it
            become -inf. Default V. Must be in [0, V].
        backend: "auto" (CUDA -> "triton", CPU -> "cpu", other devices -> "torch"); "triton" (CUDA,
            or CPU tensors when ``TRITON_INTERPRET=1``, how the tests run it without a GPU); "cpu"
            (the compiled C kernel; RuntimeError if it cannot be built); "torch" (vectorised
            torch ops, any device). "auto" on CPU falls back to "torch" when no C compiler works.

    Raises:
        ValueError: a wrong type, dtype, shape, stride, device, an index out of range, a
            vocab_size out of range, or a backend that cannot run these tensors.

    Host synchronisation: none on CUDA. A CUDA index tensor is not range-checked (that would need
    a sync); an out-of-range entry there writes nothing. A list or CPU tensor is checked and copied
    to the device asynchronously; pass a device tensor to skip that copy. Nothing of size
    [rows, V] is allocated, except by the "torch" backend.
    """
    if not isinstance(logits, torch.Tensor):
        raise ValueError(f"logits must be a torch.Tensor, got {type(logits).__name__}")
    if not isinstance(bitmask, torch.Tensor):
        raise ValueError(f"bitmask must be a torch.Tensor, got {type(bitmask).__name__}")
    if logits.dtype not in _FLOAT_DTYPES:
        raise ValueError(f"logits must be float32, bfloat16 or float16, got {logits.dtype}")
    if bitmask.dtype != torch.int32:
        raise ValueError(f"bitmask must be int32, got {bitmask.dtype}")
    dim = logits.dim()
    if dim == 1:
        logits = logits.unsqueeze(0)
    elif dim != 2:
        raise ValueError(f"logits must be 1-D or 2-D, got shape {tuple(logits.shape)}")
    dim = bitmask.dim()
    if dim == 1:
        bitmask = bitmask.unsqueeze(0)
    elif dim != 2:
        raise ValueError(f"bitmask must be 1-D or 2-D, got shape {tuple(bitmask.shape)}")
    device = logits.device
    if bitmask.device != device:
        raise ValueError(f"bitmask is on {bitmask.device} but logits are on {device} "
                         f"(copy it first: bitmask.to(logits.device, non_blocking=True))")
    n_rows, width = logits.shape
    n, words = bitmask.shape
    row_stride, col_stride = logits.stride()
    if width > 1 and col_stride != 1:
        raise ValueError(f"logits must have unit stride along the vocabulary, got strides {logits.stride()}")
    if words > 1 and bitmask.stride(1) != 1:
        raise ValueError(f"bitmask must have unit stride along its words, got strides {bitmask.stride()}")
    if n_rows > 1 and width > 0 and abs(row_stride) < width:
        raise ValueError(f"logits rows overlap in memory (row stride {row_stride} < width {width}); "
                         "writing -inf into one would change another")

    if vocab_size is None:
        limit = width if width < 32 * words else 32 * words
    elif type(vocab_size) is not int and (isinstance(vocab_size, bool)
                                          or not isinstance(vocab_size, numbers.Integral)):
        raise ValueError(f"vocab_size must be an int, got {type(vocab_size).__name__}")
    else:
        vocab = int(vocab_size)
        if not 0 <= vocab <= width:
            raise ValueError(f"vocab_size {vocab} is outside [0, {width}] (the logits width)")
        limit = min(vocab, 32 * words)

    if backend == "auto" and device.type == "cuda" and _auto_cuda == "triton":
        # the common engine call, decided once per process
        _triton_module.apply_bitmask_triton(logits, bitmask, _rows(indices, n, n_rows, device, "triton"), limit)
        return
    kind = "cpu" if backend == "auto" and device.type == "cpu" else _choose_backend(backend, device)
    rows = _rows(indices, n, n_rows, device, kind)

    if kind == "cpu":
        kernel = cpu_bitmask.load_library()
        if kernel is None:
            if backend == "cpu":
                raise RuntimeError(f"the CPU bitmask kernel is not available: {cpu_bitmask.load_error()}")
            if isinstance(rows, array.array):
                rows = torch.tensor(rows.tolist(), dtype=torch.int64)
            torch_bitmask.apply_bitmask_torch(logits, bitmask, rows, limit)
            return
        cpu_bitmask.apply_bitmask_cpu(kernel, logits, bitmask, rows, limit)
    elif kind == "triton":
        _triton().apply_bitmask_triton(logits, bitmask, rows, limit)
    else:
        torch_bitmask.apply_bitmask_torch(logits, bitmask, rows, limit)


def apply_token_bitmask_inplace_unchecked(
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    indices: torch.Tensor | None = None,
    vocab_size: int | None = None,
) -> None:
    """:func:`apply_token_bitmask_inplace` without the validation, for an engine that checked its
    tensors once (at start-up, for the buffers it reuses every step) and wants the cheapest launch.

    Preconditions, not checked (breaking one is undefined behaviour, not an error): ``logits`` is a
    2-D float32 / bfloat16 / float16 CUDA tensor with unit stride along V and rows that do not overlap;
    ``bitmask`` a 2-D int32 tensor on the same device with unit stride along its words; ``indices``
    None (then n == rows) or a contiguous 1-D int32 / int64 tensor of n entries on that device
    (an entry outside [0, rows) writes nothing); ``vocab_size`` None or an int in [0, V]. Tensors
    on any other device, or a process without Triton, take the checked path. It allocates nothing,
    synchronises nothing and is safe to capture in a CUDA graph.
    """
    if _auto_cuda != "triton" or not logits.is_cuda:
        apply_token_bitmask_inplace(logits, bitmask, indices, vocab_size)
        return
    width = logits.shape[1]
    limit = 32 * bitmask.shape[1]
    if vocab_size is not None and vocab_size < limit:
        limit = vocab_size
    if width < limit:
        limit = width
    _triton_module.apply_bitmask_triton(logits, bitmask, indices, limit)


def _interpret() -> bool:
    return os.environ.get("TRITON_INTERPRET", "") not in ("", "0")


def _triton():
    """kernels.triton_bitmask, imported on first use (importing triton is slow, and CPU-only users never need it)."""
    global _triton_module, _triton_error
    if _triton_module is None and _triton_error is None:
        try:
            from thinkgate.kernels import triton_bitmask

            _triton_module = triton_bitmask
        except ImportError as e:
            _triton_error = f"{e}"
    if _triton_module is None:
        raise ValueError(f"the Triton backend is not available: {_triton_error}")
    return _triton_module


def _choose_backend(backend: str, device: torch.device) -> str:
    global _auto_cuda
    if backend == "auto":
        if device.type == "cuda":
            if _auto_cuda is None:
                try:
                    _triton()
                    _auto_cuda = "triton"
                except ValueError:
                    warnings.warn(f"thinkgate kernels: Triton unavailable ({_triton_error}); using torch ops",
                                  RuntimeWarning, stacklevel=3)
                    _auto_cuda = "torch"
            return _auto_cuda
        return "cpu" if device.type == "cpu" else "torch"
    if backend == "triton":
        if device.type != "cuda" and not (device.type == "cpu" and _interpret()):
            raise ValueError(f"backend 'triton' needs CUDA tensors (or CPU tensors with "
                             f"TRITON_INTERPRET=1), got {device}")
        return "triton"
    if backend == "cpu":
        if device.type != "cpu":
            raise ValueError(f"backend 'cpu' needs CPU tensors, got {device}")
        return "cpu"
    if backend == "torch":
        return "torch"
    raise ValueError(f"unknown backend {backend!r}; known: {', '.join(BACKENDS)}")


def _rows(indices, n: int, n_rows: int, device: torch.device,
          kind: str) -> torch.Tensor | array.array | None:
    """The logits row of each bitmask row in the form the chosen kernel reads, or None for row i."""
    if indices is None:
        if n != n_rows:
            raise ValueError(f"without indices the bitmask needs one row per logits row: "
                             f"bitmask has {n} rows, logits {n_rows}")
        return None
    # int32 is enough for Triton and saves the cast; the C kernel reads int64.
    want = torch.int64 if kind in ("cpu", "torch") else torch.int32
    if not isinstance(indices, (torch.Tensor, Sequence)) and hasattr(indices, "__array__"):
        try:
            indices = torch.as_tensor(indices)  # a NumPy array
        except (TypeError, RuntimeError) as e:
            raise ValueError(f"indices could not be read as a tensor: {e}") from None
    if isinstance(indices, torch.Tensor):
        if indices.dtype not in (torch.int32, torch.int64):
            raise ValueError(f"indices must be an int32 or int64 tensor, got {indices.dtype}")
        if indices.dim() != 1:
            raise ValueError(f"indices must be 1-D, got shape {tuple(indices.shape)}")
        if indices.numel() != n:
            raise ValueError(f"indices has {indices.numel()} entries but the bitmask has {n} rows")
        if indices.device.type == "cpu":
            if n:
                lo, hi = int(indices.min()), int(indices.max())
                if lo < 0 or hi >= n_rows:
                    raise ValueError(f"indices must be in [0, {n_rows}), got values from {lo} to {hi}")
        elif indices.device != device:
            raise ValueError(f"indices are on {indices.device} but logits are on {device}")
        if kind == "triton" and indices.device == device:
            return indices if indices.is_contiguous() else indices.contiguous()
        return indices.to(device=device, dtype=want, non_blocking=True).contiguous()
    if isinstance(indices, (str, bytes)) or not isinstance(indices, Sequence):
        raise ValueError(f"indices must be a sequence of ints or a tensor, got {type(indices).__name__}")
    if len(indices) != n:
        raise ValueError(f"indices has {len(indices)} entries but the bitmask has {n} rows")
    for r in indices:
        if type(r) is not int and (isinstance(r, bool) or not isinstance(r, numbers.Integral)):
            raise ValueError(f"indices must be ints, got {r!r}")
        if not 0 <= r < n_rows:
            raise ValueError(f"index {r} is out of range for {n_rows} logits rows")
    if kind == "cpu":
        return array.array("q", indices)  # the C kernel reads int64s; building an array is much cheaper than a tensor
    rows = torch.tensor(indices if type(indices) is list else list(indices), dtype=want)
    return rows if device.type == "cpu" else rows.to(device, non_blocking=True)
