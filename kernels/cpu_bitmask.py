"""The CPU kernel: C (``cpu_bitmask.c``), built at install time, called through ctypes.

Why C and not torch ops: the vectorised torch formulation (``torch_bitmask``) expands the bitmask
into a [rows, V] bool tensor and then rewrites the logits through it, roughly 3x the memory traffic
of ``logits.fill_``. This kernel reads the bitmask once and touches a logit only to store -inf:

- a word of all ones (32 allowed tokens) costs one load and no store, so rows that allow
  everything (inside a JSON string) cost almost nothing;
- 8 words (256 tokens) are tested at once: all ones -> skipped, all zeros (JSON structure: almost
  everything blocked) -> one fixed-size vectorised fill;
- a mixed word stores only its zero bits (count-trailing-zeros loop), or blends all 32 when most
  are zero.

The work is cut into (bitmask row, 32,768-column chunk) items taken from an atomic counter by the
caller and by a persistent pool of helper threads (``torch.get_num_threads() - 1`` of them, woken
only for calls of at least 1M logits). The caller never waits for a helper to *start*: a helper
that wakes late finds the items taken; the caller waits only for items a helper is running. So a
busy machine costs the single-thread time, not a fork-join stall of a scheduler tick (OpenMP's
barrier waits for a preempted thread). A second concurrent caller runs alone rather than wait for
the pool. ctypes releases the GIL for the call.

Where the shared object comes from, first that works:

1. the extension ``thinkgate.kernels._cpu_bitmask`` that ``setup.py`` built at install time (a wheel
   carries it prebuilt);
2. a build at first use with the system C compiler (``$CC``, else ``cc`` / ``gcc`` / ``clang``) into
   ``$THINKGATE_CACHE_DIR`` (default ``$XDG_CACHE_HOME/thinkgate`` or ``~/.cache/thinkgate``), keyed by
   a hash of the source, the compiler and the flags, written atomically, reused by later processes.

Both use the flags of ``cpu_build.py``. :func:`load_library` returns None when neither works (or
``THINKGATE_NO_COMPILE=1``), with one warning; the dispatcher then uses the pure-torch path.
:func:`thinkgate.kernels.reference.apply_token_bitmask_reference` is this kernel's reference in the
tests.
"""

from __future__ import annotations

import array
import ctypes
import hashlib
import importlib
import itertools
import os
import platform
import shutil
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path

import torch

from thinkgate.kernels import cpu_build

_SOURCE = Path(__file__).with_name(cpu_build.SOURCE)

# Chunk of columns per work item; the C source and the thread heuristic below agree on it.
CHUNK_TOKENS = 32768
# Below this many logits in total the caller works alone: one thread writes that many logits in a
# fraction of a scheduler tick, and a helper that takes an item and is then preempted (another
# process on the core) would make the caller wait for it; on small jobs that risk costs more than
# the helper saves.
_PARALLEL_MIN_ELEMENTS = 1 << 20


_NEG_INF_BITS = {torch.float32: 0xFF800000, torch.bfloat16: 0xFF80, torch.float16: 0xFC00}


@dataclass(frozen=True)
class CpuKernel:
    """The loaded shared object, where it lives, and how it was built."""

    lib: ctypes.CDLL
    path: Path
    origin: str
    """``"prebuilt"`` (the extension built at install time) or ``"runtime"`` (built at first use)."""


_lock = threading.Lock()
_kernel: CpuKernel | None = None
_load_attempted = False
_load_error: str | None = None


def _cache_dir() -> Path:
    if os.environ.get("THINKGATE_CACHE_DIR"):
        return Path(os.environ["THINKGATE_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "thinkgate"


def _cache_dirs() -> list[Path]:
    """The cache directory, then a per-user temporary one (for a read-only home)."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return [_cache_dir(), Path(tempfile.gettempdir()) / f"thinkgate-{uid}"]


def _compilers() -> list[str]:
    names = [os.environ["CC"]] if os.environ.get("CC") else []
    names += ["cc", "gcc", "clang"]
    found: list[str] = []
    for n in names:
        p = shutil.which(n)
        if p and p not in found:
            found.append(p)
    return found


def _compile(cc: str, flags: list[str], out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp_so = out.parent / f".{out.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        subprocess.run([cc, *flags, str(_SOURCE), "-o", str(tmp_so)], check=True,
                       capture_output=True, timeout=120)
        os.replace(tmp_so, out)  # atomic: a concurrent process sees the old file or the new one
    finally:
        if tmp_so.exists():
            tmp_so.unlink()


def _bind(lib: ctypes.CDLL, path: Path, origin: str) -> CpuKernel:
    fn = lib.thinkgate_apply_bitmask
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p,
                   ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                   ctypes.c_int32, ctypes.c_uint32, ctypes.c_int32]
    return CpuKernel(lib, path, origin)


def _load_prebuilt() -> CpuKernel:
    """The extension built at install time (``setup.py``); ImportError when the install built none."""
    module = importlib.import_module(f"{__package__}._cpu_bitmask")
    path = Path(module.__file__ or "")
    return _bind(ctypes.CDLL(str(path)), path, "prebuilt")


def _build_at_runtime() -> CpuKernel:
    """Build (or reuse from the cache) the kernel with the system compiler; RuntimeError if that fails."""
    ccs = _compilers()
    if not ccs:
        raise RuntimeError("no C compiler found (looked for $CC, cc, gcc, clang)")
    source = _SOURCE.read_bytes()
    flags = [*cpu_build.CFLAGS, "-shared", "-fPIC"]
    errors: list[str] = []
    for cc, cache in itertools.product(ccs, _cache_dirs()):
        key = hashlib.sha256(b"\0".join([source, cc.encode(), *(f.encode() for f in flags),
                                         platform.machine().encode()])).hexdigest()[:20]
        path = cache / f"bitmask_{key}.so"
        try:
            if not path.exists():
                _compile(cc, flags, path)
            lib = ctypes.CDLL(str(path))
        except (OSError, subprocess.SubprocessError) as e:
            detail = getattr(e, "stderr", b"") or b""
            errors.append(f"{cc} in {cache}: {e} {detail.decode(errors='replace')[-300:]}")
            continue
        return _bind(lib, path, "runtime")
    raise RuntimeError("could not build the CPU bitmask kernel: " + " | ".join(errors))


def _try_load() -> CpuKernel:
    """The prebuilt extension, else a runtime build; RuntimeError naming both causes if neither works."""
    try:
        return _load_prebuilt()
    except (ImportError, OSError) as e:
        prebuilt_error = f"no prebuilt kernel ({e})"
    try:
        return _build_at_runtime()
    except RuntimeError as e:
        raise RuntimeError(f"{prebuilt_error}; {e}") from None


def load_library() -> CpuKernel | None:
    """The C kernel: the prebuilt one, else built at first use; None (with one warning) if neither."""
    global _kernel, _load_attempted, _load_error
    if _load_attempted:
        return _kernel
    with _lock:
        if not _load_attempted:
            if os.environ.get("THINKGATE_NO_COMPILE", "") not in ("", "0"):
                _load_error = "THINKGATE_NO_COMPILE is set"
            else:
                try:
                    _kernel = _try_load()
                except Exception as e:  # any failure means: use the torch path
                    _load_error = str(e)
                    warnings.warn(f"thinkgate kernels: using the pure-torch CPU path, much slower ({e})",
                                  RuntimeWarning, stacklevel=3)
            _load_attempted = True
    return _kernel


def load_error() -> str | None:
    """Why :func:`load_library` returned None (None if it has not failed)."""
    return _load_error


def default_threads(n_rows: int, width: int) -> int:
    """Threads for one call: torch's intra-op setting, one thread for small work."""
    if n_rows * width < _PARALLEL_MIN_ELEMENTS:
        return 1
    items = n_rows * -(-width // CHUNK_TOKENS)
    return max(1, min(torch.get_num_threads(), items))


def apply_bitmask_cpu(
    kernel: CpuKernel,
    logits: torch.Tensor,
    bitmask: torch.Tensor,
    rows: torch.Tensor | array.array | None,
    limit: int,
    n_threads: int | None = None,
) -> None:
    """Run the C kernel on validated inputs.

    ``logits`` [R, V] CPU, unit column stride; ``bitmask`` int32 [n, words] CPU, unit column stride;
    ``rows`` n logits rows in range as a contiguous CPU int64 tensor or an ``array("q")``, or
    None for row i;
    ``limit`` = min(vocab_size, 32 * words).
    """
    n = bitmask.shape[0]
    width = logits.shape[1]
    if n == 0 or width == 0:
        return
    if n_threads is None:
        n_threads = default_threads(n, width)
    kernel.lib.thinkgate_apply_bitmask(
        logits.data_ptr(), logits.stride(0), width,
        bitmask.data_ptr(), bitmask.stride(0),
        None if rows is None else rows.buffer_info()[0] if isinstance(rows, array.array) else rows.data_ptr(),
        n, limit, logits.element_size(), _NEG_INF_BITS[logits.dtype], n_threads,
    )
