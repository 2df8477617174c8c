"""The documentation runs: every ```python block of README.md and docs/*.md executes, and every relative
link points to a file (and heading) that exists.

Each block runs in a fresh namespace, all of them in one subprocess started in the repository root (so
the imports and the offline vocabularies load once, and ``thinkgate.testing.vocabularies`` is importable as it is from a
checkout). A block that needs an engine or a GPU is fenced ```python skip: <reason>``` and only
compiled. The first block of README.md is the two commands ``.ci/run`` reads.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(.*)$")


def _blocks(path: Path) -> list[tuple[int, str, str]]:
    """(first line of the code, info string, code) of each fenced block of ``path``."""
    out, info, start, body = [], None, 0, []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        m = FENCE.match(line)
        if info is None and m:
            info, start, body = m.group(1).strip(), n + 1, []
        elif info is not None and line.strip() == "```":
            out.append((start, info, "\n".join(body) + "\n"))
            info = None
        elif info is not None:
            body.append(line)
    assert info is None, f"{path.name}: a code block opened at line {start - 1} is never closed"
    return out


def _python_blocks() -> list[tuple[str, str, str]]:
    """(id, info, code) of every ```python block; id is ``page:line``."""
    return [(f"{p.relative_to(ROOT)}:{line}", info, code) for p in PAGES for line, info, code in _blocks(p)
            if info.split(":")[0].split()[:1] == ["python"]]


BLOCKS = _python_blocks()
RUN = [b for b in BLOCKS if b[1] == "python"]

_RUNNER = r"""
import gc, json, sys, time, traceback
blocks = json.load(sys.stdin)
results = {}
for bid, code in blocks:
    t = time.perf_counter()
    try:
        exec(compile(code, bid, "exec"), {"__name__": "__docs__"})
        results[bid] = [True, "", time.perf_counter() - t]
    except BaseException:
        results[bid] = [False, traceback.format_exc(), time.perf_counter() - t]
    gc.collect()
with open(sys.argv[1], "w", encoding="utf-8") as f:
    json.dump(results, f)
"""


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, list]:
    out = tmp_path_factory.mktemp("docs") / "results.json"
    proc = subprocess.run([sys.executable, "-c", _RUNNER, str(out)], cwd=ROOT, capture_output=True, text=True,
                          input=json.dumps([(bid, code) for bid, _, code in RUN]), timeout=600)
    assert proc.returncode == 0 and out.exists(), proc.stderr[-4000:]
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("bid", [b[0] for b in RUN])
def test_python_block_runs(bid, results):
    ok, err, _ = results[bid]
    assert ok, f"{bid} failed:\n{err}"


@pytest.mark.parametrize("bid,info,code", [b for b in BLOCKS if b[1] != "python"], ids=lambda x: str(x)[:40])
def test_skipped_block_says_why_and_compiles(bid, info, code):
    """A block fenced ``python skip: <reason>`` names its reason and is at least valid Python."""
    m = re.fullmatch(r"python skip: (.{8,})", info)
    assert m, f"{bid}: a python block that does not run is fenced 'python skip: <reason>', got {info!r}"
    compile(code, bid, "exec")


def test_the_readme_starts_with_the_two_commands():
    """``.ci/run`` runs the second line of README.md's first code block: the install and the test command."""
    first = _blocks(ROOT / "README.md")[0]
    lines = first[2].strip().splitlines()
    assert first[1] == "bash" and len(lines) == 2, first
    assert lines[0].endswith("python -m bench") and "pytest" in lines[1], lines


def _slug(heading: str, seen: dict[str, int]) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens, repeats numbered."""
    text = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip()).lower()
    base = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {_slug(m.group(1), seen) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def _links(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # code blocks hold no links
    text = re.sub(r"`[^`\n]*`(?!\])", "", text)  # nor do code spans (a link's text may be one)
    return re.findall(r"\]\(([^)\s]+)\)", text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    bad = []
    for target in _links(page):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        file, _, anchor = target.partition("#")
        dest = (page.parent / file).resolve() if file else page
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            bad.append(f"{target}: no heading with that anchor in {dest.name}")
    assert not bad, f"{page.name}: " + "; ".join(bad)


def test_every_docs_page_is_linked_from_the_readme():
    readme = set(_links(ROOT / "README.md"))
    linked = {t.partition("#")[0] for t in readme}
    missing = [p.name for p in PAGES[1:] if f"docs/{p.name}" not in linked]
    assert not missing, f"README.md links no {missing}"


@pytest.mark.parametrize("page,name,target", [
    ("docs/manager.md", "StructuredOutputManager", "thinkgate.structured_output:StructuredOutputManager"),
    ("docs/kernels.md", "apply_token_bitmask_inplace", "thinkgate.kernels:apply_token_bitmask_inplace"),
])
def test_documented_signatures_are_the_real_ones(page, name, target):
    """A signature written out in the docs (a ``python skip`` block that defines it) has the real
    parameters, in order, with the real defaults."""
    import importlib
    import inspect

    (code,) = [c for bid, info, c in BLOCKS
               if bid.startswith(page + ":") and info != "python" and name in "".join(c.splitlines()[:2])]
    ns: dict = {}
    exec(compile(code, page, "exec"), ns)
    documented = ns[name].__init__ if isinstance(ns[name], type) else ns[name]
    module, attr = target.split(":")
    real = getattr(importlib.import_module(module), attr)
    real = real.__init__ if isinstance(real, type) else real

    def params(f):
        return [(p.name, p.kind, p.default) for p in inspect.signature(f).parameters.values()]

    assert params(documented) == params(real)
