"""The installed shape: one ``thinkgate`` namespace over the top-level folders, dependencies pointing one
way, and a wheel that carries the CPU kernel prebuilt and nothing under a generic name."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("reasoning", "structured_output", "kernels", "thinkgate")
GENERIC = ("reasoning", "structured_output", "kernels")
ALLOWED = {  # the subpackages each may import (dependencies point one way)
    "reasoning": set(),
    "kernels": set(),
    "structured_output": {"reasoning"},
    "thinkgate": {"reasoning", "structured_output", "kernels", "testing", "engines"},
}


def _imports(path: Path) -> list[str]:
    """Absolute module names imported by ``path`` (relative imports resolved against its package)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(ROOT).with_suffix("")
    package = list(rel.parts[:-1]) if rel.name != "__init__" else list(rel.parts[:-1])
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                out.append(".".join(["thinkgate", *base, *([node.module] if node.module else [])])
                           if base and base[0] != "thinkgate" else ".".join([*base, node.module or ""]))
            else:
                out.append(node.module or "")
    return out


def _python_files(*folders: str) -> list[Path]:
    return [p for f in folders for p in sorted((ROOT / f).rglob("*.py"))]


def test_nothing_imports_a_generic_top_level_name():
    """Code, tests and benchmarks import the product only as ``thinkgate.*``: an import of ``kernels`` or
    ``reasoning`` would work in a checkout and fail (or load someone else's package) once installed."""
    bad = [f"{p.relative_to(ROOT)}: {m}" for p in _python_files(*PRODUCT, "bench", "tests")
           for m in _imports(p) if m.split(".")[0] in GENERIC]
    assert not bad, bad


def test_dependencies_point_one_way():
    bad = []
    for sub, allowed in ALLOWED.items():
        for p in _python_files(sub):
            for m in _imports(p):
                parts = m.split(".")
                if parts[0] == "bench" or parts[0] == "tests":
                    bad.append(f"{p.relative_to(ROOT)} imports {m}")
                if parts[0] == "thinkgate" and len(parts) > 1 and parts[1] != sub and parts[1] not in allowed:
                    bad.append(f"{p.relative_to(ROOT)} imports {m}")
    assert not bad, bad


def _room(path: Path) -> str | None:
    """The room a source file belongs to: ``structured_output/<room>/`` (its top-level modules are the
    package's re-exports), ``thinkgate/<room>/``, or the top-level folder."""
    rel = path.relative_to(ROOT).parts
    if rel[0] in ("structured_output", "thinkgate"):
        return f"{rel[0]}.{rel[1]}" if len(rel) > 2 else None
    return rel[0]


def _room_of_module(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "thinkgate" or len(parts) < 2:
        return None
    if parts[1] == "structured_output":
        return f"structured_output.{parts[2]}" if len(parts) > 3 else None
    if parts[1] in ("reasoning", "kernels"):
        return parts[1]
    return f"thinkgate.{parts[1]}" if parts[1] in ("engines", "testing") else None


def test_rooms_import_no_cycle():
    """The rooms (compile, step, tools, front end inside ``structured_output/``; reasoning; kernels; engine
    glue; the testing kit) import each other without a cycle, lazy imports included."""
    edges: dict[str, set[str]] = {}
    for p in _python_files(*PRODUCT):
        room = _room(p)
        if room is None:
            continue
        for m in _imports(p):
            other = _room_of_module(m)
            if other is not None and other != room:
                edges.setdefault(room, set()).add(other)
    assert edges["structured_output.step"] >= {"structured_output.compilation"}, edges

    def cycle_from(start: str, path: list[str]) -> list[str] | None:
        for nxt in sorted(edges.get(path[-1], ())):
            if nxt == start:
                return [*path, nxt]
            if nxt not in path:
                found = cycle_from(start, [*path, nxt])
                if found:
                    return found
        return None

    cycles = [c for r in sorted(edges) if (c := cycle_from(r, [r]))]
    assert not cycles, cycles


ENGINES = ("vllm", "sglang")


def test_only_the_engine_glue_imports_an_engine():
    """vLLM and SGLang are imported in ``thinkgate/engines/`` alone (lazy imports included)."""
    bad = [f"{p.relative_to(ROOT)} imports {m}" for p in _python_files(*PRODUCT)
           if "engines" not in p.relative_to(ROOT).parts
           for m in _imports(p) if m.split(".")[0] in ENGINES]
    assert not bad, bad


def test_only_the_library_subpackages_stay_off_the_testing_kit():
    """``thinkgate.testing`` is for tests and benchmarks: no library subpackage imports it."""
    bad = [f"{p.relative_to(ROOT)} imports {m}" for p in _python_files("reasoning", "kernels", "structured_output")
           for m in _imports(p) if m.startswith("thinkgate.testing")]
    assert not bad, bad


def test_tests_take_their_fixtures_from_the_kit_not_from_bench():
    """Only a benchmark's own test (``tests/test_bench_*.py``) imports a ``bench`` module; others may run the
    command (``bench.__main__``) but take vocabularies and workloads from ``thinkgate.testing``."""
    bad = [f"{p.relative_to(ROOT)} imports {m}" for p in _python_files("tests")
           if not p.name.startswith("test_bench_")
           for m in _imports(p) if m.split(".")[0] == "bench" and m != "bench.__main__"]
    assert not bad, bad


@pytest.mark.slow
def test_wheel_holds_one_namespace_and_the_prebuilt_kernel(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                          "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    (wheel,) = tmp_path.glob("thinkgate-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"thinkgate", next(t for t in tops if t.endswith(".dist-info"))}, tops
    for expected in ("thinkgate/__init__.py", "thinkgate/reasoning/qwen3.py", "thinkgate/structured_output/step/manager.py",
                     "thinkgate/structured_output/tools/__init__.py", "thinkgate/kernels/cpu_bitmask.c",
                     "thinkgate/kernels/py.typed", "thinkgate/py.typed", "thinkgate/testing/streams.py",
                     "thinkgate/structured_output/compilation/compiler.py",
                     "thinkgate/structured_output/compilation/jsonws/bound.py",
                     "thinkgate/structured_output/frontend/parser.py", "thinkgate/engines/vllm/plugin.py",
                     "thinkgate/engines/sglang/backend.py"):
        assert expected in names, expected
    assert any(n.startswith("thinkgate/kernels/_cpu_bitmask") and n.endswith(".so") for n in names), names
    assert any(n.startswith("thinkgate/structured_output/compilation/jsonws/_lexer") and n.endswith(".so") for n in names), names
    assert not any("/bench/" in n or "/tests/" in n for n in names)


def test_running_from_the_root_does_not_shadow_engine_packages():
    """``python -m bench`` and the tests run from the repository root, whose ``kernels/`` folder would hide
    Hugging Face's ``kernels`` (transformers imports it): once ``bench`` is imported the root is off
    ``sys.path``. Checked in a fresh interpreter started in the root, as ``python -m bench`` starts."""
    root = Path(__file__).resolve().parents[1]
    code = ("import sys, importlib.util as u\n"
            "before = u.find_spec('kernels')\n"
            "import bench\n"
            "after = u.find_spec('kernels')\n"
            "print(before is not None and before.origin, '|', after is not None and after.origin)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, after = (s.strip() for s in out.stdout.split("|"))
    assert before == str(root / "kernels" / "__init__.py")  # the hazard is real from the root
    assert after != before  # Hugging Face's kernels (a venv may sit inside the checkout), or none
