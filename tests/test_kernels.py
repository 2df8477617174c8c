"""The bitmask kernels against the pure-torch reference, with exact equality.

The Triton kernel runs interpreted on CPU tensors (tests/conftest.py sets TRITON_INTERPRET=1 when
there is no CUDA device); on a CUDA machine the same tests run it compiled on the GPU. Random masks
use a fresh seed per test, printed and put in every assertion message so a failure can be replayed
with THINKGATE_TEST_SEED=<seed>.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from thinkgate.kernels import BACKENDS, apply_token_bitmask_inplace, apply_token_bitmask_reference
from thinkgate.kernels import cpu_bitmask

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
CUDA = torch.cuda.is_available()
# Where each backend runs: Triton on the GPU when there is one, else interpreted on CPU tensors.
DEVICE = {"cpu": "cpu", "torch": "cpu", "triton": "cuda" if CUDA else "cpu"}
FAST_BACKENDS = ["cpu", "torch"]
# interpreted on CPU, Triton is slow: with -m "not slow" it runs in test_vocab_size_and_bitmask_width_edges only
SLOW_TRITON = [b if b != "triton" else pytest.param(b, marks=pytest.mark.slow) for b in BACKENDS[1:]]


@pytest.fixture
def seed() -> int:
    s = int(os.environ.get("THINKGATE_TEST_SEED", "0")) or int.from_bytes(os.urandom(4), "little")
    print(f"seed={s}")
    return s


def random_bitmask(gen: torch.Generator, n: int, words: int, density: float | None = None) -> torch.Tensor:
    """int32 [n, words]: uniformly random bits, or bits set with probability ``density``."""
    if density is None:
        return torch.randint(-(2**31), 2**31 - 1, (n, words), dtype=torch.int32, generator=gen)
    bits = torch.rand((n, words, 32), generator=gen) < density
    packed = (bits.to(torch.int64) << torch.arange(32)).sum(-1)
    return (packed - (packed >= 2**31).to(torch.int64) * 2**32).to(torch.int32)


def strided_logits(gen: torch.Generator, rows: int, width: int, dtype: torch.dtype, pad: int = 37) -> torch.Tensor:
    """[rows, width] view of a [rows, width + pad] buffer: row stride > width. Includes +-inf values."""
    buf = torch.randn((rows, width + pad), generator=gen).to(dtype)
    buf[:, 3] = float("inf")
    buf[:, 5] = float("-inf")
    return buf[:, :width]


def on_device(t: torch.Tensor, dev: str) -> torch.Tensor:
    """``t`` itself on CPU; on CUDA a copy that keeps a row stride larger than the width."""
    if dev == "cpu":
        return t
    if t.dim() == 2 and t.shape[0] > 1 and t.stride(0) > t.shape[1]:
        buf = torch.zeros((t.shape[0], t.stride(0)), dtype=t.dtype, device=dev)
        view = buf[:, : t.shape[1]]
        view.copy_(t)
        return view
    return t.to(dev)


def check(backend: str, logits: torch.Tensor, bitmask: torch.Tensor, indices=None, vocab_size=None,
          msg: str = "") -> None:
    """Apply with ``backend`` on its device and with the reference on a copy; compare exactly."""
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask, indices, vocab_size)
    dev = DEVICE[backend]
    got = on_device(logits, dev)
    idx = indices.to(dev) if isinstance(indices, torch.Tensor) else indices
    apply_token_bitmask_inplace(got, bitmask.to(dev), idx, vocab_size, backend=backend)
    got = got.cpu()
    assert torch.equal(got, expected), f"{backend} differs from the reference ({msg})"
    # equality above includes -inf == -inf; check the sign bit explicitly for the blocked ones
    assert torch.equal(torch.isneginf(got), torch.isneginf(expected)), msg


@pytest.mark.slow
@pytest.mark.parametrize("backend", FAST_BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_vocab_sweep_not_multiple_of_32(backend, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    for width in range(32001, 32033):
        words = -(-width // 32)
        logits = strided_logits(gen, 6, width, dtype)
        bitmask = random_bitmask(gen, 4, words)
        bitmask[1] = 0
        bitmask[2] = -1
        vocab = int(torch.randint(width - 40, width + 1, (1,), generator=gen))
        check(backend, logits, bitmask, [5, 0, 3, 1], vocab, f"seed={seed} width={width} vocab={vocab}")
        check(backend, strided_logits(gen, 4, width, dtype), bitmask, None, None, f"seed={seed} width={width}")


@pytest.mark.slow
def test_vocab_sweep_triton(seed):
    # Interpreted Triton is slow: one call per width, dtypes rotated over the widths.
    gen = torch.Generator().manual_seed(seed)
    for k, width in enumerate(range(32001, 32033)):
        dtype = DTYPES[k % 3]
        logits = strided_logits(gen, 3, width, dtype)
        bitmask = random_bitmask(gen, 2, -(-width // 32))
        bitmask[1, : width // 64] = 0  # half blocked, half random
        indices = [2, 0] if k % 2 else torch.tensor([2, 0], dtype=torch.int32)
        vocab = width - (k % 5)
        check("triton", logits, bitmask, indices, vocab, f"seed={seed} width={width} {dtype}")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("backend", ["cpu", pytest.param("torch", marks=pytest.mark.slow),
                                     pytest.param("triton", marks=pytest.mark.slow)])
def test_large_vocab(backend, dtype, seed):
    # Qwen3.6: tokenizer 248,077 ids, logits width 248,320.
    gen = torch.Generator().manual_seed(seed)
    width, vocab = 248320, 248077
    words = width // 32
    if backend == "triton" and not CUDA:
        rows, n = 2, 1
        indices = torch.tensor([1], dtype=torch.int32)
    else:
        rows, n = 9, 6
        indices = torch.tensor([8, 2, 0, 5, 3, 7], dtype=torch.int32)
    logits = strided_logits(gen, rows, width, dtype, pad=64)
    bitmask = random_bitmask(gen, n, words, density=0.002)  # JSON structure: a few allowed
    if n > 1:
        bitmask[1] = random_bitmask(gen, 1, words, density=0.98)[0]  # inside a string
        bitmask[2] = -1
        bitmask[3] = 0
    check(backend, logits, bitmask, indices, vocab, f"seed={seed}")
    check(backend, strided_logits(gen, n, width, dtype), bitmask, None, None, f"seed={seed} no indices")


@pytest.mark.parametrize("backend", SLOW_TRITON)
def test_all_allowed_and_all_blocked_rows(backend):
    width, vocab = 32032, 32005
    logits = torch.randn(4, width)
    bitmask = torch.zeros(4, width // 32, dtype=torch.int32)
    bitmask[0] = -1
    bitmask[2] = -1
    before = logits.clone()
    check(backend, logits.clone(), bitmask, None, vocab, "")
    dev = DEVICE[backend]
    logits = logits.to(dev)
    apply_token_bitmask_inplace(logits, bitmask.to(dev), vocab_size=vocab, backend=backend)
    logits = logits.cpu()
    # an all-allowed row keeps every id below vocab_size; ids past it are -inf
    assert torch.equal(logits[0, :vocab], before[0, :vocab])
    assert torch.isneginf(logits[0, vocab:]).all()
    assert torch.isneginf(logits[1]).all() and torch.isneginf(logits[3]).all()


@pytest.mark.parametrize("backend", SLOW_TRITON)
def test_indices_forms_subset_unordered_duplicates(backend, seed):
    gen = torch.Generator().manual_seed(seed)
    width = 4001
    logits = strided_logits(gen, 8, width, torch.float32)
    bitmask = random_bitmask(gen, 4, -(-width // 32), density=0.5)
    for indices in ([6, 1, 4, 2], torch.tensor([6, 1, 4, 2], dtype=torch.int32),
                    torch.tensor([6, 1, 4, 2], dtype=torch.int64), (7, 0, 3, 5),
                    torch.tensor([9, 6, 9, 1, 9, 4, 9, 2], dtype=torch.int32)[1::2]):
        check(backend, logits.clone(), bitmask, indices, None, f"seed={seed} indices={indices}")
    # duplicates: both masks apply (AND)
    check(backend, logits.clone(), bitmask, [3, 3, 0, 3], None, f"seed={seed} duplicates")
    # rows not named stay untouched
    out = logits.clone().to(DEVICE[backend])
    apply_token_bitmask_inplace(out, bitmask.to(DEVICE[backend]), [6, 1, 4, 2], backend=backend)
    out = out.cpu()
    for r in (0, 3, 5, 7):
        assert torch.equal(out[r], logits[r])


@pytest.mark.parametrize("backend", BACKENDS[1:])
def test_vocab_size_and_bitmask_width_edges(backend, seed):
    gen = torch.Generator().manual_seed(seed)
    width = 1000
    logits = strided_logits(gen, 3, width, torch.bfloat16)
    full = random_bitmask(gen, 3, 32)  # ceil(1000 / 32) = 32 words
    for vocab in (0, 1, 31, 32, 33, 999, 1000, None):
        check(backend, logits.clone(), full, None, vocab, f"seed={seed} vocab={vocab}")
    # a narrower bitmask: columns past 32 * words are blocked; a wider one: extra words ignored
    check(backend, logits.clone(), full[:, :20].contiguous(), None, None, f"seed={seed} narrow")
    check(backend, logits.clone(), full[:, :20], None, 900, f"seed={seed} narrow strided")
    wide = torch.cat([full, torch.zeros(3, 5, dtype=torch.int32)], dim=1)
    check(backend, logits.clone(), wide, None, None, f"seed={seed} wide")
    check(backend, logits.clone(), full[:, :0], None, None, f"seed={seed} zero words")
    # one mask for every row: an expanded bitmask (row stride 0)
    check(backend, logits.clone(), full[:1].expand(3, -1), None, 900, f"seed={seed} expanded")
    # 1-D logits and bitmask are one row
    check(backend, logits[0].clone(), full[0], None, 777, f"seed={seed} 1-D")
    # no rows
    check(backend, logits.clone(), full[:0], [], None, "empty")


def test_cpu_kernel_threads_agree(seed):
    lib = cpu_bitmask.load_library()
    assert lib is not None, cpu_bitmask.load_error()
    gen = torch.Generator().manual_seed(seed)
    width = 3 * cpu_bitmask.CHUNK_TOKENS + 77
    bitmask = random_bitmask(gen, 5, -(-width // 32), density=0.3)
    bitmask[0] = 0
    expected = strided_logits(gen, 5, width, torch.float16)
    logits = expected.clone()
    apply_token_bitmask_reference(expected, bitmask, None, width - 3)
    for threads in (1, 2, 3, 8):
        out = logits.clone()
        cpu_bitmask.apply_bitmask_cpu(lib, out, bitmask, None, min(width - 3, 32 * bitmask.shape[1]), threads)
        assert torch.equal(out, expected), f"seed={seed} threads={threads}"


def test_auto_backend_on_cpu_uses_the_c_kernel_and_falls_back(monkeypatch, seed):
    gen = torch.Generator().manual_seed(seed)
    logits = strided_logits(gen, 2, 3001, torch.float32)
    bitmask = random_bitmask(gen, 2, 94)
    check("cpu", logits.clone(), bitmask, None, None, "auto")
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask)
    # without a compiled kernel "auto" still works (torch ops) and "cpu" says why it cannot
    monkeypatch.setattr(cpu_bitmask, "_kernel", None)
    monkeypatch.setattr(cpu_bitmask, "_load_attempted", True)
    monkeypatch.setattr(cpu_bitmask, "_load_error", "no C compiler found")
    out = logits.clone()
    apply_token_bitmask_inplace(out, bitmask)
    assert torch.equal(out, expected)
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask, [1, 0])
    out = logits.clone()
    apply_token_bitmask_inplace(out, bitmask, [1, 0])  # a list, as the C kernel would take it
    assert torch.equal(out, expected)
    with pytest.raises(RuntimeError, match="no C compiler"):
        apply_token_bitmask_inplace(logits.clone(), bitmask, backend="cpu")


def test_cpu_kernel_runtime_build_is_cached_and_missing_compiler_is_reported(monkeypatch, tmp_path):
    monkeypatch.setenv("THINKGATE_CACHE_DIR", str(tmp_path))
    kernel = cpu_bitmask._build_at_runtime()
    built = list(tmp_path.glob("bitmask_*.so"))
    assert built == [kernel.path] and kernel.origin == "runtime"
    stamp = built[0].stat().st_mtime_ns
    cpu_bitmask._build_at_runtime()  # a second load reuses the cached object
    assert built[0].stat().st_mtime_ns == stamp and len(list(tmp_path.iterdir())) == 1
    # an unusable cache directory (here a file) falls back to a per-user temporary directory
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("THINKGATE_CACHE_DIR", str(blocker))
    assert cpu_bitmask._build_at_runtime().path.parent == cpu_bitmask._cache_dirs()[1]
    monkeypatch.setattr(cpu_bitmask, "_compilers", lambda: [])
    with pytest.raises(RuntimeError, match="no C compiler"):
        cpu_bitmask._build_at_runtime()


def _load_in_fresh_process(tmp_path, extra_env, code):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env.update(THINKGATE_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path), **extra_env)
    return subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120)


@pytest.mark.slow
def test_installed_kernel_needs_no_compiler_at_run_time(tmp_path):
    """The install built the extension: with no compiler (CC=false, an empty PATH) and no cached build,
    the C kernel still loads, prebuilt, and is exact."""
    code = ("import torch; from thinkgate.kernels import cpu_bitmask, apply_token_bitmask_inplace, "
            "apply_token_bitmask_reference\n"
            "k = cpu_bitmask.load_library(); print(k.origin if k else cpu_bitmask.load_error())\n"
            "x = torch.randn(3, 1000); m = torch.randint(-2**31, 2**31 - 1, (3, 32), dtype=torch.int32)\n"
            "y = x.clone(); apply_token_bitmask_inplace(x, m, backend='cpu'); "
            "apply_token_bitmask_reference(y, m); print(torch.equal(x, y))")
    out = _load_in_fresh_process(tmp_path, {"CC": "false", "PATH": str(tmp_path)}, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["prebuilt", "True"], out.stdout + out.stderr
    assert not (tmp_path / "cache").exists()  # nothing was compiled


@pytest.mark.slow
def test_without_prebuilt_or_compiler_the_torch_path_warns_once(tmp_path):
    code = ("import sys, torch; from thinkgate.kernels import cpu_bitmask, apply_token_bitmask_inplace\n"
            "cpu_bitmask._load_prebuilt = lambda: (_ for _ in ()).throw(ImportError('removed'))\n"
            "for _ in range(3): apply_token_bitmask_inplace(torch.zeros(1, 64), torch.zeros(1, 2, dtype=torch.int32))\n"
            "print(cpu_bitmask.load_library(), file=sys.stdout); print(cpu_bitmask.load_error())")
    out = _load_in_fresh_process(tmp_path, {"CC": "false", "PATH": str(tmp_path)}, code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "None"
    assert "no prebuilt kernel (removed)" in out.stdout and "no C compiler found" in out.stdout
    assert out.stderr.count("using the pure-torch CPU path") == 1, out.stderr


@pytest.mark.slow
def test_import_is_light_and_independent():
    code = ("import sys, thinkgate.kernels; "
            "print(sorted(m for m in ('triton', 'thinkgate.reasoning', 'thinkgate.structured_output', 'xgrammar') "
            "if m in sys.modules))")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_triton_backend_on_cpu_tensors_needs_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="TRITON_INTERPRET"):
        apply_token_bitmask_inplace(torch.zeros(1, 64), torch.zeros(1, 2, dtype=torch.int32), backend="triton")


def _bad_calls():
    L = torch.zeros(4, 100)
    B = torch.zeros(4, 4, dtype=torch.int32)
    return [
        ((L.to(torch.int32), B), {}, "logits must be float32"),
        ((L.double(), B), {}, "logits must be float32"),
        ((L, B.to(torch.int64)), {}, "bitmask must be int32"),
        (("x", B), {}, "logits must be a torch.Tensor"),
        ((L, [1, 2]), {}, "bitmask must be a torch.Tensor"),
        ((L.reshape(2, 2, 100), B), {}, "logits must be 1-D or 2-D"),
        ((L, B.reshape(2, 2, 4)), {}, "bitmask must be 1-D or 2-D"),
        ((L, B.to("meta")), {}, "bitmask is on meta"),
        ((torch.zeros(100, 4).t(), B), {}, "unit stride along the vocabulary"),
        ((L, torch.zeros(4, 4, dtype=torch.int32).t()), {}, "unit stride along its words"),
        ((L, B[:3]), {}, "one row per logits row"),
        ((torch.zeros(1, 100).expand(4, 100), B), {}, "logits rows overlap in memory"),
        ((L, B), {"vocab_size": 101}, r"vocab_size 101 is outside \[0, 100\]"),
        ((L, B), {"vocab_size": -1}, "vocab_size -1 is outside"),
        ((L, B), {"vocab_size": 50.0}, "vocab_size must be an int"),
        ((L, B), {"vocab_size": True}, "vocab_size must be an int"),
        ((L, B), {"indices": [0, 1, 2]}, "indices has 3 entries but the bitmask has 4 rows"),
        ((L, B), {"indices": [0, 1, 2, 4]}, "index 4 is out of range for 4 logits rows"),
        ((L, B), {"indices": [0, 1, 2, -1]}, "index -1 is out of range"),
        ((L, B), {"indices": [0, 1, 2, 1.0]}, "indices must be ints"),
        ((L, B), {"indices": [0, 1, 2, True]}, "indices must be ints"),
        ((L, B), {"indices": "0123"}, "sequence of ints or a tensor"),
        ((L, B), {"indices": torch.tensor([0, 1, 2, 4])}, r"indices must be in \[0, 4\), got values from 0 to 4"),
        ((L, B), {"indices": torch.tensor([0.0, 1, 2, 3])}, "int32 or int64 tensor"),
        ((L, B), {"indices": torch.zeros(2, 2, dtype=torch.int32)}, "indices must be 1-D"),
        ((L, B), {"indices": torch.tensor([0, 1], dtype=torch.int32)}, "indices has 2 entries"),
        ((L, B), {"indices": torch.zeros(4, dtype=torch.int32, device="meta")}, "indices are on meta"),
        ((L, B), {"backend": "cuda"}, "unknown backend 'cuda'; known: auto, triton, cpu, torch"),
        ((L.to("meta"), B.to("meta")), {"backend": "cpu"}, "backend 'cpu' needs CPU tensors"),
    ]


@pytest.mark.parametrize("args,kwargs,message", _bad_calls())
def test_invalid_inputs_raise_value_error(args, kwargs, message):
    before = args[0].clone() if isinstance(args[0], torch.Tensor) and args[0].device.type == "cpu" else None
    with pytest.raises(ValueError, match=message):
        apply_token_bitmask_inplace(*args, **kwargs)
    if before is not None:
        assert torch.equal(args[0], before)  # nothing was written


@pytest.mark.skipif(not CUDA, reason="needs a CUDA device: CUDA index tensors and device checks")
def test_cuda_specifics(seed):
    gen = torch.Generator().manual_seed(seed)
    logits = strided_logits(gen, 4, 5000, torch.bfloat16).cuda()
    bitmask = random_bitmask(gen, 2, 157).cuda()
    with pytest.raises(ValueError, match="bitmask is on cpu"):
        apply_token_bitmask_inplace(logits, bitmask.cpu())
    # a CUDA index tensor is used as is; an out-of-range entry stores nothing
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask[:1], [2])
    apply_token_bitmask_inplace(logits, bitmask, torch.tensor([2, 99], device="cuda"))
    assert torch.equal(logits, expected)


def test_cpu_kernel_concurrent_callers_and_many_calls(seed):
    # Python threads call at once (ctypes releases the GIL): one uses the helper pool, the others
    # run alone; every result must match the reference, call after call.
    import threading

    kernel = cpu_bitmask.load_library()
    assert kernel is not None, cpu_bitmask.load_error()
    gen = torch.Generator().manual_seed(seed)
    width = 2 * cpu_bitmask.CHUNK_TOKENS + 5
    cases = []
    for k in range(4):
        bitmask = random_bitmask(gen, 6, -(-width // 32), density=0.1 * (k + 1))
        logits = strided_logits(gen, 6, width, DTYPES[k % 3])
        expected = logits.clone()
        apply_token_bitmask_reference(expected, bitmask, None, width - k)
        cases.append((logits, bitmask, expected, width - k))
    errors: list[str] = []

    def worker(case):
        logits, bitmask, expected, vocab = case
        for it in range(30):
            out = logits.clone()
            cpu_bitmask.apply_bitmask_cpu(kernel, out, bitmask, None, vocab, 2)
            if not torch.equal(out, expected):
                errors.append(f"seed={seed} vocab={vocab} iteration {it}")
                return

    threads = [threading.Thread(target=worker, args=(c,)) for c in cases]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors and not any(t.is_alive() for t in threads), errors


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_cpu_kernel_works_in_a_forked_child():
    # The parent has started helper threads; a fork child has none and must start its own.
    kernel = cpu_bitmask.load_library()
    assert kernel is not None, cpu_bitmask.load_error()
    width = 3 * cpu_bitmask.CHUNK_TOKENS
    bitmask = torch.zeros(4, width // 32, dtype=torch.int32)
    bitmask[1] = -1
    logits = torch.randn(4, width)
    cpu_bitmask.apply_bitmask_cpu(kernel, logits.clone(), bitmask, None, width, 2)
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask)
    out = logits.clone()
    pid = os.fork()
    if pid == 0:  # child: exit code 0 only if the kernel ran correctly
        code = 1
        try:
            # torch's own OpenMP pool hangs after fork (libgomp); keep torch single-threaded here
            torch.set_num_threads(1)
            cpu_bitmask.apply_bitmask_cpu(kernel, out, bitmask, None, width, 2)
            code = 0 if torch.equal(out, expected) else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_property_random_shapes_match_the_reference():
    # hypothesis drives shapes, vocab_size, row strides, dtypes, bit densities and indices.
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @st.composite
    def cases(draw):
        width = draw(st.integers(1, 3000))
        rows = draw(st.integers(1, 6))
        words = draw(st.integers(0, -(-width // 32) + 2))
        vocab = draw(st.none() | st.integers(0, width))
        pad = draw(st.integers(0, 40))
        dtype = draw(st.sampled_from(DTYPES))
        density = draw(st.sampled_from([None, 0.0, 0.03, 0.5, 0.97, 1.0]))
        use_indices = draw(st.booleans())
        if use_indices:
            idx = draw(st.lists(st.integers(0, rows - 1), min_size=0, max_size=2 * rows))
        else:
            idx = None
        return width, rows, words, vocab, pad, dtype, density, idx, draw(st.integers(0, 2**31))

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(cases())
    def run(case):
        width, rows, words, vocab, pad, dtype, density, idx, seed = case
        gen = torch.Generator().manual_seed(seed)
        n = rows if idx is None else len(idx)
        bitmask = random_bitmask(gen, n, words, density if density is not None else None) if words else \
            torch.zeros((n, 0), dtype=torch.int32)
        buf = torch.randn((rows, width + pad), generator=gen).to(dtype)
        for backend in FAST_BACKENDS:
            logits = buf.clone()[:, :width]  # a fresh view with row stride width + pad
            check(backend, logits, bitmask, idx, vocab, f"{backend} {case}")

    run()


def test_cpu_kernel_duplicate_indices_are_exact_at_every_thread_count(seed):
    """Duplicate logits rows AND their masks even when the kernel's threads share the work: words with
    many (but not all) zero bits take the blend path, which rewrites the whole word; two threads on
    the same row and chunk must never both do that."""
    lib = cpu_bitmask.load_library()
    assert lib is not None, cpu_bitmask.load_error()
    gen = torch.Generator().manual_seed(seed)
    width = cpu_bitmask.CHUNK_TOKENS  # one chunk per row: every item of a logits row is the same chunk
    n = 64  # 64 items of 32k fp32 logits: well past the parallel threshold
    words = width // 32
    # each word has ~20 zero bits: the blend path for almost every word, in every row
    bits = torch.rand((n, words, 32), generator=gen) < 0.4
    weights = (1 << torch.arange(32, dtype=torch.int64))
    bitmask = ((bits.long() * weights).sum(-1) & 0xFFFFFFFF).to(torch.int64)
    bitmask = torch.where(bitmask >= 2**31, bitmask - 2**32, bitmask).to(torch.int32)
    rows = torch.tensor([i % 2 for i in range(n)], dtype=torch.int64)  # 32 masks on each of 2 rows
    logits = torch.randn((2, width), generator=gen)
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask, rows.tolist())
    for threads in (1, 2, 4, 8):
        for _ in range(5):
            out = logits.clone()
            cpu_bitmask.apply_bitmask_cpu(lib, out, bitmask, rows, width, threads)
            assert torch.equal(out, expected), f"seed={seed} threads={threads}: " \
                f"{int((out != expected).sum())} logits differ"


def test_unchecked_entry_point_off_cuda_takes_the_checked_path(seed):
    """Without CUDA tensors (and a Triton launch chosen for them) the unchecked call validates and runs the
    checked path: same result, same errors."""
    from thinkgate.kernels import apply_token_bitmask_inplace_unchecked

    gen = torch.Generator().manual_seed(seed)
    logits = strided_logits(gen, 4, 3001, torch.bfloat16)
    bitmask = random_bitmask(gen, 3, 94, density=0.5)
    expected = logits.clone()
    apply_token_bitmask_reference(expected, bitmask, [3, 0, 3], 2990)
    apply_token_bitmask_inplace_unchecked(logits, bitmask, torch.tensor([3, 0, 3]), 2990)
    assert torch.equal(logits, expected), f"seed={seed}"
    with pytest.raises(ValueError, match="bitmask must be int32"):
        apply_token_bitmask_inplace_unchecked(logits, bitmask.to(torch.int64))


@pytest.mark.slow
def test_cpu_kernel_generic_loops_match_the_reference_without_avx512(tmp_path):
    """On an AVX-512 machine the C kernel takes its masked-store loops; THINKGATE_NO_AVX512=1 (read once per
    process) forces the generic loops, which other CPUs run: they must match the reference too."""
    code = ("import torch; from thinkgate.kernels import cpu_bitmask, apply_token_bitmask_reference\n"
            "k = cpu_bitmask.load_library(); g = torch.Generator().manual_seed(7); ok = True\n"
            "for dtype in (torch.float32, torch.bfloat16, torch.float16):\n"
            "  for width in (1, 31, 33, 1000, 32769, 70001):\n"
            "    words = -(-width // 32)\n"
            "    for p in (0.001, 0.5, 0.999):\n"
            "      bits = torch.rand((4, words, 32), generator=g) < p\n"
            "      m = (bits.long() << torch.arange(32)).sum(-1); m = (m - (m >= 2**31).long() * 2**32).to(torch.int32)\n"
            "      x = torch.randn((5, width + 3), generator=g).to(dtype)[:, :width]; y = x.clone()\n"
            "      vocab = max(0, width - 5); idx = torch.tensor([4, 0, 4, 2])\n"
            "      cpu_bitmask.apply_bitmask_cpu(k, x, m, idx, min(vocab, 32 * words), 2)\n"
            "      apply_token_bitmask_reference(y, m, idx.tolist(), vocab); ok &= torch.equal(x, y)\n"
            "print(ok)")
    for env in ({"THINKGATE_NO_AVX512": "1"}, {}):
        out = _load_in_fresh_process(tmp_path, env, code)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == ["True"], (env, out.stdout + out.stderr)
