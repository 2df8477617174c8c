"""Token-bitmask kernels: apply a grammar's allowed-token bitmask to logits, in place.

:func:`apply_token_bitmask_inplace` validates and dispatches: CUDA tensors to the Triton kernel
(``kernels.triton_bitmask``), CPU tensors to the C kernel (``kernels.cpu_bitmask``: the extension built
at install time, else built once at first use, else, with one warning, vectorised torch ops in
``kernels.torch_bitmask``). :func:`apply_token_bitmask_reference` (``kernels.reference``) is the executable
contract every kernel is tested against. :func:`apply_token_bitmask_inplace_unchecked` is the
engine's per-step call on CUDA tensors it validated once: the same kernel without the checks.
Triton is imported only when the Triton kernel is first used. This package imports neither ``reasoning`` nor ``structured_output``.
"""

from thinkgate.kernels.api import (
    BACKENDS,
    Backend,
    apply_token_bitmask_inplace,
    apply_token_bitmask_inplace_unchecked,
)
from thinkgate.kernels.reference import apply_token_bitmask_reference

__all__ = ["BACKENDS", "Backend", "apply_token_bitmask_inplace", "apply_token_bitmask_inplace_unchecked",
           "apply_token_bitmask_reference"]
