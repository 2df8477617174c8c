"""The one harness every benchmark uses: a timer, machine facts, and JSON-lines output.

- :func:`measure` runs ``fn`` ``warmup`` times, then ``repeat`` times, and reports the median and
  percentiles in microseconds. Ratios against a baseline measured *in the same run* are what to read:
  this machine is shared and noisy.
- :func:`write_rows` appends rows as JSON lines to ``bench-results/<name>.jsonl`` (see :data:`RESULTS_DIR`; or ``--out``), each
  with the machine, versions and date.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

RESULTS_DIR = Path(os.environ.get("THINKGATE_BENCH_RESULTS", "bench-results"))
"""Where results go unless ``--out`` says otherwise: ``$THINKGATE_BENCH_RESULTS``, else ``bench-results/``
in the current directory (outside the source folders; git ignores it)."""


@dataclass(frozen=True)
class Stats:
    median_us: float
    p10_us: float
    p90_us: float
    mean_us: float
    n: int

    def as_dict(self, prefix: str = "") -> dict[str, float]:
        return {f"{prefix}{k}": v for k, v in asdict(self).items()}


def measure(fn: Callable[[], Any], *, warmup: int = 3, repeat: int = 20,
            setup: Callable[[], Any] | None = None, min_time_s: float = 0.0) -> Stats:
    """Time ``fn()`` (after ``setup()``, untimed, before each call); microseconds."""
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    samples: list[float] = []
    start = time.perf_counter()
    while len(samples) < repeat or (time.perf_counter() - start) < min_time_s:
        if setup is not None:
            setup()
        t0 = time.perf_counter_ns()
        fn()
        samples.append((time.perf_counter_ns() - t0) / 1e3)
        if len(samples) >= 100 * max(repeat, 1):
            break
    return summarize(samples)


def summarize(samples_us: Iterable[float]) -> Stats:
    s = sorted(samples_us)
    if not s:
        raise ValueError("no samples")

    def pct(p: float) -> float:
        return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]

    return Stats(statistics.median(s), pct(0.10), pct(0.90), statistics.fmean(s), len(s))


def machine_info() -> dict[str, Any]:
    info: dict[str, Any] = {
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
    }
    try:
        import torch

        info["torch"] = torch.__version__
        info["torch_threads"] = torch.get_num_threads()
        if torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except ImportError:  # pragma: no cover
        pass
    for mod in ("xgrammar", "triton"):
        try:
            from importlib.metadata import version

            info[mod] = version(mod)
        except Exception:  # pragma: no cover
            pass
    return info


def write_rows(name: str, rows: Iterable[Mapping[str, Any]], out: str | Path | None = None) -> Path:
    """Append ``rows`` to a JSON-lines file, each tagged with the benchmark name and machine facts."""
    path = Path(out) if out else RESULTS_DIR / f"{name}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = machine_info()
    with path.open("a", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({"bench": name, **meta, **dict(r)}, default=str) + "\n")
    return path


def print_table(rows: list[Mapping[str, Any]], columns: list[str], file=None) -> None:
    """Print rows as an aligned text table (floats with 3 significant decimals)."""
    file = file or sys.stdout

    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1000 else f"{v:,.0f}"
        return str(v)

    cells = [[fmt(r.get(c, "")) for c in columns] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths)), file=file)
    for row in cells:
        print("  ".join(v.rjust(w) for v, w in zip(row, widths)), file=file)
    file.flush()


def int_list(text: str, *, minimum: int = 1) -> list[int]:
    """An argparse ``type``: comma-separated integers, each at least ``minimum`` (``1,16,64``)."""
    import argparse

    try:
        values = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < minimum:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers >= {minimum}, got {text!r}")
    return values


def non_negative_int_list(text: str) -> list[int]:
    """:func:`int_list` that admits 0 (draft-token counts)."""
    return int_list(text, minimum=0)


def progress(msg: str) -> None:
    """One progress line on stderr (the table goes to stdout)."""
    print(f"[bench] {msg}", file=sys.stderr, flush=True)
