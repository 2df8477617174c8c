"""The Triton kernel's stores are 16-byte vectors or lane-contiguous, under the Triton installed.

No GPU needed: Triton compiles the kernel for a Hopper GPU (sm_90) with its bundled ptxas. The test
reads the layout Triton gave each ``tt.store`` in the TTGIR and computes, from that layout alone,
where the 32 lanes of a warp write on one store instruction; the PTX says how wide each instruction
is. The group stores (a [groups, VEC] tile, one 16-byte group per lane) must cover 512 consecutive
bytes per warp store, and the dense path's column store 32 consecutive logits. (The mixed groups'
columns in the sparse path are stored from the group tile, one column per instruction and lane:
that path runs only when few groups are mixed, see kernels/triton_bitmask.py.) ``bench/triton_layouts.sh`` runs this file under each Triton version
that engines ship (3.3.1, 3.5, 3.6.0), installed side by side.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
import torch

from thinkgate.kernels import triton_bitmask

ELEMENT = {"fp32": (torch.float32, 4), "bf16": (torch.bfloat16, 2), "fp16": (torch.float16, 2)}


def compile_for_sm90(dtype: str, n_rows: int, has_indices: bool) -> dict[str, str]:
    """TTGIR and PTX of the kernel as :func:`apply_bitmask_triton` launches it for ``n_rows`` rows, with
    16-divisible pointers and row strides (what torch allocations and padded vocabularies give)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    kernel = triton_bitmask._apply_bitmask_kernel
    # under TRITON_INTERPRET=1 (how the other tests run without a GPU) triton.jit gives an interpreter
    fn = kernel if isinstance(kernel, JITFunction) else \
        JITFunction(kernel.fn, do_not_specialize=triton_bitmask.DO_NOT_SPECIALIZE)
    block, warps = triton_bitmask.block_and_warps(n_rows)
    signature = {"logits_ptr": f"*{dtype}", "bitmask_ptr": "*i32", "indices_ptr": "*i32",
                 "n_logit_rows": "i32", "width": "i32", "limit": "i32", "logits_row_stride": "i32",
                 "bitmask_row_stride": "i32", "HAS_INDICES": "constexpr", "BLOCK": "constexpr",
                 "VEC": "constexpr", "MIXED_SHARE": "constexpr"}
    constexprs = {"HAS_INDICES": has_indices, "BLOCK": block, "VEC": triton_bitmask.VEC[ELEMENT[dtype][0]],
                  "MIXED_SHARE": triton_bitmask.MIXED_SHARE}
    src = ASTSource(fn=fn, signature=signature, constexprs=constexprs,
                    attrs={(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                           (2,): [["tt.divisibility", 16]], (6,): [["tt.divisibility", 16]]})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32),
                              options={"num_warps": warps, "enable_fp_fusion": False})
    assert compiled.asm["cubin"]
    return {"ttgir": compiled.asm["ttgir"], "ptx": compiled.asm["ptx"]}


CASES = [(dtype, n_rows, has_indices) for dtype in ELEMENT for n_rows, has_indices in ((1, False), (64, True))]


def compile_cases() -> dict[str, dict[str, str]]:
    """Every case of CASES compiled, keyed by repr(case)."""
    return {repr(case): compile_for_sm90(*case) for case in CASES}


@pytest.fixture(scope="module")
def compiled() -> dict[str, dict[str, str]]:
    # One fresh process without TRITON_INTERPRET (tests/conftest.py sets it when there is no GPU, and
    # under it Triton's own library functions, such as tl.max, are interpreter objects that do not compile).
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); "
            "from test_kernel_store_layout import compile_cases; print(json.dumps(compile_cases()))")
    out = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__))],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-4000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def store_layouts(ttgir: str) -> list[tuple[list[int], dict[str, list[int]]]]:
    """(tile shape, blocked layout) of every ``tt.store`` in the TTGIR."""
    layouts = {}
    for name, body in re.findall(r"^#(\w+) = #\w+\.blocked<\{(.*)\}>", ttgir, re.M):
        layouts[name] = {k: [int(x) for x in v.split(",")] for k, v in re.findall(r"(\w+) = \[([\d, ]+)\]", body)}
    stores = re.findall(r"tt\.store .*: tensor<([\dx]+)x!tt\.ptr<\w+>, #(\w+)>", ttgir)
    missing = [layout for _, layout in stores if layout not in layouts]
    assert not missing, f"store layouts that are not blocked layouts: {missing}\n{ttgir[:2000]}"
    return [([int(d) for d in shape.split("x")], layouts[layout]) for shape, layout in stores]


def warp_store_offsets(shape: list[int], layout: dict[str, list[int]]) -> list[int]:
    """Element offset of each lane's first element on warp 0's first store instruction; the tiles index
    memory row-major (group g, column v -> g * VEC + v; the 1-D tile: column i -> i)."""
    strides = [1] * len(shape)
    for d in range(len(shape) - 2, -1, -1):
        strides[d] = strides[d + 1] * shape[d + 1]
    offsets = []
    for lane in range(32):
        rest, coord = lane, [0] * len(shape)
        for d in layout["order"]:
            t = layout["threadsPerWarp"][d]
            coord[d] = (rest % t) * layout["sizePerThread"][d] % shape[d]
            rest //= t
        offsets.append(sum(c * s for c, s in zip(coord, strides)))
    return offsets


def is_one_span(offsets: list[int], chunk: int) -> bool:
    """The lanes' chunks of ``chunk`` elements tile one contiguous span, with no gaps or repeats."""
    s = sorted(offsets)
    return s == list(range(s[0], s[0] + chunk * len(s), chunk))


@pytest.mark.parametrize("dtype,n_rows,has_indices", CASES)
def test_triton_kernel_compiles_for_sm90_with_lane_contiguous_stores(compiled, dtype, n_rows, has_indices):
    import triton

    asm = compiled[repr((dtype, n_rows, has_indices))]
    element_bytes = ELEMENT[dtype][1]
    vec = triton_bitmask.VEC[ELEMENT[dtype][0]]
    where = f"Triton {triton.__version__}, {dtype}, {n_rows} rows"
    stores = store_layouts(asm["ttgir"])
    groups = [st for st in stores if len(st[0]) == 2]
    columns = [st for st in stores if len(st[0]) == 1]
    # the sparse path's two stores (wholly blocked groups, then the mixed groups' columns) share one
    # [groups, VEC] tile; the dense path's store is a 1-D tile of columns
    assert len(groups) == 2 and len(columns) == 1, f"{where}: unexpected stores {stores}"
    for gshape, glayout in groups:
        # each lane holds one whole group (16 bytes) and a warp's lanes are consecutive groups
        assert gshape[1] == vec and glayout["sizePerThread"][1] == vec, f"{where}: {glayout}"
        assert is_one_span(warp_store_offsets(gshape, glayout), vec), f"{where}: group store lanes apart: {glayout}"
    (cshape, clayout), = columns
    # the dense path: one column per lane, 32 consecutive columns per warp store
    assert clayout["sizePerThread"] == [1], f"{where}: {clayout}"
    assert is_one_span(warp_store_offsets(cshape, clayout), 1), f"{where}: column store lanes apart: {clayout}"
    # PTX: the group store became 16-byte vector stores, the column store scalar stores of one logit
    widths = set(re.findall(r"\bst\.global((?:\.[\w:]+)*?)\.(v\d\.)?b(\d+)\s", asm["ptx"]))
    forms = {(v or "") + f"b{bits}" for _, v, bits in widths}
    assert forms == {"v4.b32", f"b{8 * element_bytes}"}, f"{where}: store instructions {forms}"


def test_layout_check_rejects_lanes_far_apart():
    """The check fails on the layout that made the previous kernel slow (a [words, 32] tile with lanes
    along the words: 32 lanes 128 bytes apart for float32)."""
    far = {"sizePerThread": [1, 1], "threadsPerWarp": [32, 1], "warpsPerCTA": [4, 1], "order": [0, 1]}
    assert not is_one_span(warp_store_offsets([32, 32], far), 1)
    near = {"sizePerThread": [1, 1], "threadsPerWarp": [1, 32], "warpsPerCTA": [4, 1], "order": [1, 0]}
    assert is_one_span(warp_store_offsets([32, 32], near), 1)
    # four columns per thread stored one at a time: lanes 16 bytes apart, 4-byte chunks
    gaps = {"sizePerThread": [4], "threadsPerWarp": [32], "warpsPerCTA": [4], "order": [0]}
    assert not is_one_span(warp_store_offsets([512], gaps), 1)
    assert is_one_span(warp_store_offsets([512], gaps), 4)
