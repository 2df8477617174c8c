"""``python -m bench vllm``: thinkgate's manager beside vLLM 0.34's own, per step, on the same requests.

Each manager runs in its own process (``bench/vllm_worker.py``): thinkgate's in this Python, vLLM's
in a Python that has vLLM 0.34 (``--vllm-python``, default ``$THINKGATE_VLLM_PYTHON``, else the
repository's ``.venv-vllm/bin/python``, where ``tests/integration/run.sh`` builds it). This process
writes the scripts, sends both workers the same token ids, runs the steps in rounds that alternate
which engine goes first, and compares. No model: the tokens are scripted.

Workload (DeepSeek V4 vocabulary, ``deepseek_r1`` parser in both engines): every request's prompt is
the DeepSeek-R1 template up to ``<｜Assistant｜><think>\\n``; its output thinks 25-33 tokens (29 on
average), writes ``</think>``, then a JSON object for one of four schemas (an invoice, calendar
events, a bug triage, search results: the shapes users send as ``response_format``, written for this
benchmark), half of them indented, then the stop token. All requests start together, so the first
steps are thinking and the rest are constrained. With ``k`` drafts, each step schedules the next ``k``
scripted tokens as drafts and commits ``k + 1`` (every draft is right).

``--workload tools``: the same requests as ``tool_choice="required"`` over one tool set (a tool per schema,
then tools of ``tests/data/tools/corpus.json`` up to ``--tools``), each output one call of its schema's tool
with the document as its arguments, written as ``--tool-format``'s chat template writes it (default
``deepseek_v31``: DeepSeek's call tokens, which the DeepSeek V4 vocabulary has; the DSML formats reach a dead
state under vLLM's xgrammar 0.2.8, see docs/engines.md). Both managers get the structural tag that
thinkgate's vLLM tool parser puts into ``structured_outputs`` for such a request (``build_tool_constraint``
with the schema's key order): thinkgate compiles it with its own compiler, vLLM with its xgrammar backend
(the markers as token ids). vLLM's own parsers would constrain ``required`` with a JSON list of calls instead;
the tag is what a vLLM user of thinkgate's parser runs, and the same grammar on both sides.

Per step: ``fill`` is ``grammar_bitmask``; ``accept`` is ``accept_tokens`` for every request
(vLLM's also runs ``trim_spec_tokens`` for the next drafts in its scheduler's update; that is reported
apart as ``vllm_trim_us`` and left out of the fill and accept ratios; ``step_all_x`` in the JSON rows is
vLLM's fill + accept + trim over thinkgate's fill + accept, means over the whole stream). Figures:
``*_all_us`` is the mean over every step of the stream (its total divided by its steps, thinking steps
included); ``*_con_us`` is the median over the constrained-only steps (every row of the step is past
``</think>``); ``*_row_us`` is that constrained fill divided by the step's rows (``batch * (k + 1)``,
every one constrained). ``x`` columns are vLLM /
thinkgate (above 1: thinkgate is faster); ``*_con_paired_x`` in the JSON rows is the median over the
constrained steps of the same step's ratio. ``--repeats N`` runs N streams per configuration (fresh
managers, fresh scripts) and pools their steps. ``--clock cpu`` times the steps by each process's CPU
time (all its threads) instead of the wall clock: on a machine shared with other work, most wall-clock
noise is time spent waiting for a core, which CPU time leaves out.

Checks: both engines must allow every scripted token in its row and accept every commit
(``masked_out`` and ``rejects`` count the failures, drafts that vLLM's ``trim_spec_tokens`` cut
included), and each must constrain exactly the rows past each request's ``</think>``
(``row_mismatches`` counts the steps where thinkgate's returned rows, or vLLM's rows that are not all
ones, differ from the scripts' count). All must be 0; the command exits 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import statistics
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import Any

from bench.harness import int_list, non_negative_int_list

DESCRIPTION = "thinkgate's manager vs vLLM 0.34's StructuredOutputManager, same requests, each in its own process"

REPO = Path(__file__).resolve().parents[1]
DEFAULT_VLLM_PYTHON = str(REPO / ".venv-vllm" / "bin" / "python")
"""Where ``tests/integration/run.sh`` builds (or overlays) the vLLM environment: the same place for both."""
BUILD_ENV = ("bash tests/integration/env_vllm.sh .venv-vllm   "
             "# a CPU venv: torch 2.13.0, vllm==0.34.0 (--no-deps) and its deps, xgrammar 0.2.8\n"
             ".venv-vllm/bin/pip install --no-deps -e .   # optional: the vLLM side imports no thinkgate")
"""The commands that build the vLLM environment, from the repository root (printed when it is absent)."""

COLUMNS = ["batch", "drafts", "steps", "con_steps", "tg_fill_all_us", "vllm_fill_all_us", "fill_all_x",
           "tg_fill_con_us", "vllm_fill_con_us", "fill_con_x", "tg_row_us", "vllm_row_us", "tg_accept_all_us",
           "vllm_accept_all_us", "accept_all_x", "tg_accept_con_us", "vllm_accept_con_us", "accept_con_x", "vllm_trim_us",
           "masked_out", "rejects", "row_mismatches"]

# --------------------------------------------------------------------------------------------------
# the schemas and their documents

_DATE_TIME = {"type": "string", "format": "date-time"}
SCHEMAS: dict[str, dict[str, Any]] = {
    "invoice": {
        "type": "object",
        "properties": {
            "invoice_number": {"type": "string"},
            "issue_date": {"type": "string", "format": "date"},
            "vendor": {"type": "object", "properties": {"name": {"type": "string"}, "vat_id": {"type": "string"},
                                                        "country": {"type": "string", "enum": ["DE", "FR", "CH", "US"]}},
                       "required": ["name", "country"]},
            "currency": {"type": "string", "enum": ["EUR", "CHF", "USD"]},
            "line_items": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "properties": {"description": {"type": "string"}, "quantity": {"type": "integer", "minimum": 1},
                               "unit_price": {"type": "number"}, "total": {"type": "number"}},
                "required": ["description", "quantity", "unit_price", "total"]}},
            "total": {"type": "number"},
            "paid": {"type": "boolean"},
        },
        "required": ["invoice_number", "issue_date", "vendor", "currency", "line_items", "total", "paid"],
    },
    "calendar": {
        "type": "object",
        "properties": {
            "events": {"type": "array", "items": {
                "type": "object",
                "properties": {"title": {"type": "string"}, "start": _DATE_TIME, "end": _DATE_TIME,
                               "location": {"type": ["string", "null"]},
                               "attendees": {"type": "array", "items": {"type": "string"}},
                               "all_day": {"type": "boolean"}},
                "required": ["title", "start", "end", "location", "attendees", "all_day"]}},
        },
        "required": ["events"],
    },
    "triage": {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "maxLength": 200},
            "severity": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
            "labels": {"type": "array", "items": {"type": "string", "enum": ["bug", "performance", "docs",
                                                                             "regression", "security"]}},
            "duplicate_of": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
            "steps_to_reproduce": {"type": "array", "items": {"type": "string"}},
            "affected_versions": {"type": "array", "items": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"}},
        },
        "required": ["summary", "severity", "labels", "duplicate_of", "steps_to_reproduce", "affected_versions"],
    },
    "search": {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "results": {"type": "array", "items": {
                "type": "object",
                "properties": {"id": {"type": "integer"}, "name": {"type": "string"},
                               "price": {"type": "number", "minimum": 0},
                               "rating": {"type": "number", "minimum": 0, "maximum": 5},
                               "in_stock": {"type": "boolean"},
                               "tags": {"type": "array", "items": {"type": "string"}}},
                "required": ["id", "name", "price", "rating", "in_stock", "tags"]}},
        },
        "required": ["query", "results"],
    },
}

_WORDS = ["alpha", "server", "blue", "quarterly", "review", "Zürich", "cable", "kit", "meeting", "deadline",
          "invoice", "crash", "latency", "memory", "report", "offsite", "coffee", "design", "sync", "draft"]


def _phrase(rng: random.Random, lo: int = 1, hi: int = 4) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(lo, hi)))


def _document(kind: str, rng: random.Random, n: int) -> dict[str, Any]:
    """A valid instance of ``SCHEMAS[kind]`` whose one array has ``n`` items (it grows with ``n``)."""
    if kind == "invoice":
        items = [{"description": _phrase(rng), "quantity": rng.randint(1, 20), "unit_price": round(rng.uniform(1, 500), 2),
                  "total": round(rng.uniform(1, 9000), 2)} for _ in range(n)]
        return {"invoice_number": f"INV-{rng.randint(1000, 99999)}", "issue_date": f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
                "vendor": {"name": _phrase(rng, 1, 3), "vat_id": f"DE{rng.randint(10**8, 10**9 - 1)}", "country": rng.choice(["DE", "FR", "CH", "US"])},
                "currency": rng.choice(["EUR", "CHF", "USD"]), "line_items": items,
                "total": round(sum(i["total"] for i in items), 2), "paid": rng.random() < 0.5}
    if kind == "calendar":
        def ev() -> dict[str, Any]:
            d, h = rng.randint(1, 28), rng.randint(7, 18)
            return {"title": _phrase(rng), "start": f"2026-12-{d:02d}T{h:02d}:00:00Z", "end": f"2026-12-{d:02d}T{h + 1:02d}:30:00Z",
                    "location": None if rng.random() < 0.3 else _phrase(rng, 1, 2),
                    "attendees": [f"{rng.choice(_WORDS).lower()}@example.com" for _ in range(rng.randint(0, 3))],
                    "all_day": rng.random() < 0.1}
        return {"events": [ev() for _ in range(n)]}
    if kind == "triage":
        return {"summary": _phrase(rng, 4, 12), "severity": rng.choice(["low", "medium", "high", "critical"]),
                "labels": rng.sample(["bug", "performance", "docs", "regression", "security"], rng.randint(1, 3)),
                "duplicate_of": None if rng.random() < 0.6 else rng.randint(1, 40000),
                "steps_to_reproduce": [_phrase(rng, 3, 9) for _ in range(n)],
                "affected_versions": [f"0.{rng.randint(1, 40)}.{rng.randint(0, 9)}" for _ in range(rng.randint(1, 3))]}
    if kind == "search":
        return {"query": _phrase(rng, 2, 5),
                "results": [{"id": rng.randint(1, 10**7), "name": _phrase(rng), "price": round(rng.uniform(0, 999), 2),
                             "rating": round(rng.uniform(0, 5), 1), "in_stock": rng.random() < 0.7,
                             "tags": [rng.choice(_WORDS) for _ in range(rng.randint(0, 3))]} for _ in range(n)]}
    raise ValueError(f"unknown schema {kind!r}")


THINKING = ("Okay, the user wants this as JSON. Let me check the schema: which fields are required, what types "
            "they take, and whether any of them can be null. I should keep the numbers plain and the strings "
            "short, then write the object in the order the schema lists its properties.")


TOOL_NAMES = {kind: f"record_{kind}" for kind in SCHEMAS}
"""The tools workload's own tools: one per schema, its document the call's arguments."""


def workload_tools(n_tools: int) -> list[dict[str, Any]]:
    """The tool set of every request of the tools workload: a tool per schema, then corpus tools
    (``tests/data/tools/corpus.json``, as ``python -m bench tools`` uses) up to ``n_tools``."""
    from bench.tools import corpus_tools

    own = [{"type": "function", "function": {"name": TOOL_NAMES[k], "description": f"Record the {k} data.",
                                             "parameters": s}} for k, s in SCHEMAS.items()]
    return own + corpus_tools(max(0, n_tools - len(own)))


def tool_tags(vocab: Any, tools: list[dict[str, Any]], fmt: str) -> tuple[str, str]:
    """The ``tool_choice="required"`` constraint of ``tools`` in format ``fmt``, as thinkgate's vLLM tool
    parser puts it into vLLM's ``structured_outputs`` (``thinkgate/engines/vllm/tool_parsers.py``:
    ``build_tool_constraint`` with the schema's key order, its marker tokens resolved to ids): the
    structural tag thinkgate compiles, and the one vLLM's own xgrammar backend compiles."""
    from thinkgate.structured_output.compilation.xgrammar_adapter import GrammarBuilder
    from thinkgate.structured_output.tools import build_tool_constraint

    c = build_tool_constraint(tools, "required", format=fmt, vocabulary=vocab, key_order="schema")
    if c is None or c.kind != "structural_tag":
        raise ValueError(f"format {fmt!r} builds no structural tag for tool_choice='required'")
    tag, _ = GrammarBuilder(vocab).resolve_structural_tag(json.loads(c.spec))
    return c.spec, json.dumps(tag, ensure_ascii=False)


def build_requests(vocab: Any, batch: int, min_json_tokens: int, seed: int, *, tool_format: str | None = None,
                   n_tools: int = 10) -> list[dict[str, Any]]:
    """``batch`` scripted requests: prompt ids and output ids (thinking, ``</think>``, JSON, stop token).

    With ``tool_format`` (the tools workload), each request is ``tool_choice="required"`` over
    :func:`workload_tools` and its output, after ``</think>``, is one call of its schema's tool with the
    document as arguments, written as the format's chat template writes it (``tests/template_render.py``);
    the request carries the two structural tags of :func:`tool_tags` (``tag`` for thinkgate,
    ``vllm_tag`` for vLLM) instead of ``schema``."""
    import jsonschema

    rng = random.Random(seed)
    tags: tuple[str, str] | None = None
    render = None
    if tool_format is not None:
        from bench.tools import _template_render

        tags = tool_tags(vocab, workload_tools(n_tools), tool_format)
        render = _template_render().render
    think_ids = vocab.encode(THINKING)
    end = vocab.token_id("</think>")
    stop = vocab.token_id("<｜end▁of▁sentence｜>")
    kinds = list(SCHEMAS)
    out = []
    for i in range(batch):
        kind = kinds[i % len(kinds)]
        prompt = vocab.encode(f"<｜begin▁of▁sentence｜><｜User｜>Extract the {kind} data as JSON.<｜Assistant｜><think>\n")
        n_think = rng.randint(25, 33)
        start = rng.randint(0, len(think_ids) - n_think)
        n, indent = 1, 2 if i % 2 else None
        while True:
            doc = _document(kind, rng, n)
            text = (render(tool_format, [(TOOL_NAMES[kind], doc)]) if render is not None
                    else json.dumps(doc, indent=indent, ensure_ascii=False))
            doc_ids = vocab.encode(text)
            if len(doc_ids) >= min_json_tokens:
                break
            n += 1
        jsonschema.validate(doc, SCHEMAS[kind])
        stream = [*think_ids[start:start + n_think], end, *doc_ids, stop]
        req: dict[str, Any] = {"id": f"r{i}", "prompt": prompt, "stream": stream, "think_end": n_think}
        if tags is None:
            req["schema"] = SCHEMAS[kind]
        else:
            req["tag"], req["vllm_tag"] = tags
        out.append(req)
    return out


# --------------------------------------------------------------------------------------------------
# the workers


class WorkerError(RuntimeError):
    pass


class Worker:
    """One engine's process: JSON lines on its stdin/stdout; its stderr kept (the last lines) for errors."""

    def __init__(self, python: str, engine: str, *, verbose: bool = False, timeout_s: float = 600.0) -> None:
        env = dict(os.environ)
        # Isolated mode (-I), the worker run by its path: neither the repository root nor bench/ goes on
        # sys.path. The root's folders are import names of their own there (``kernels`` is one that
        # transformers probes for its kernel hub, ``bench/vllm.py`` would hide vLLM), so the vLLM side
        # imports what its own environment installs, and the thinkgate side the installed thinkgate.
        env.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        self.engine = engine
        self.timeout_s = timeout_s
        self.proc = subprocess.Popen([python, "-I", str(REPO / "bench" / "vllm_worker.py"), engine],
                                     cwd=str(REPO), env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, encoding="utf-8", bufsize=1)
        self.stderr: deque[str] = deque(maxlen=60)

        def drain() -> None:
            assert self.proc.stderr is not None
            for line in self.proc.stderr:
                self.stderr.append(line)
                if verbose:
                    sys.stderr.write(f"[{engine}] {line}")

        self._drain = threading.Thread(target=drain, daemon=True)
        self._drain.start()
        self.hello = self._read()

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout_s)
        line = self.proc.stdout.readline() if ready else ""
        if not line:
            self.proc.kill()
            self.proc.wait()
            self._drain.join(timeout=2)
            raise WorkerError(f"the {self.engine} worker {'timed out' if not ready else 'exited'} "
                              f"(rc {self.proc.returncode}); its last stderr lines:\n{''.join(self.stderr)}")
        reply = json.loads(line)
        if not reply.get("ok"):
            raise WorkerError(f"the {self.engine} worker failed:\n{reply.get('error')}")
        return reply

    def call(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.call(op="exit")
            except (WorkerError, OSError, ValueError):
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def vllm_python(arg: str | None) -> str:
    return arg or os.environ.get("THINKGATE_VLLM_PYTHON") or DEFAULT_VLLM_PYTHON


def vllm_version(python: str) -> str | None:
    """vLLM's version as ``python`` sees it, or None when that Python is missing or has no vLLM."""
    if not Path(python).exists():
        return None
    try:
        r = subprocess.run([python, "-c", "import importlib.metadata as m; print(m.version('vllm'))"],
                           capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def absent_message(python: str) -> str:
    return (f"python -m bench vllm: no vLLM at {python} (--vllm-python, or $THINKGATE_VLLM_PYTHON).\n"
            f"Build the environment it needs (offline needs only the package index) from the repository root:\n"
            f"{BUILD_ENV}\n")


# --------------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batches", type=int_list, default=[1, 16, 64, 256], help="batch sizes (default: 1,16,64,256)")
    p.add_argument("--drafts", type=non_negative_int_list, default=[0, 3], help="draft tokens per request (default: 0,3)")
    p.add_argument("--steps", type=_at_least(1), default=128, help="steps per configuration, from the first token (default: 128)")
    p.add_argument("--repeats", type=_at_least(1), default=1,
                   help="streams per configuration, each with fresh managers and fresh scripts (default: 1)")
    p.add_argument("--round-steps", type=_at_least(1), default=8,
                   help="steps one engine runs before the other runs the same ones (default: 8)")
    p.add_argument("--warmup", type=_at_least(0), default=3,
                   help="untimed grammar_bitmask calls before step 0 (default: 3)")
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                   help="time steps by the wall clock (default) or by the process's CPU time (all its threads; "
                        "leaves out the time spent waiting for a core on a loaded machine)")
    p.add_argument("--max-whitespace", type=_whitespace, default="default",
                   help="thinkgate's JSON whitespace bound per gap: 'default' (the library's), 'none', or N")
    p.add_argument("--workload", choices=["json", "tools"], default="json",
                   help="json: a JSON schema per request (default); tools: tool_choice='required' over a tool set, "
                        "the call written in --tool-format's syntax, both engines on the structural tag thinkgate's "
                        "vLLM tool parser builds")
    p.add_argument("--tool-format", default="deepseek_v31",
                   help="the tools workload's call format, one with a DeepSeek V4 vocabulary form and a renderer in "
                        "tests/template_render.py (default: deepseek_v31)")
    p.add_argument("--tools", type=_at_least(len(SCHEMAS)), default=10,
                   help=f"the tools workload's tool count: one per schema, then corpus tools (default: 10, "
                        f"at least {len(SCHEMAS)})")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--vllm-python", default=None,
                   help=f"a Python with vLLM 0.34 (default: $THINKGATE_VLLM_PYTHON, else {DEFAULT_VLLM_PYTHON})")
    p.add_argument("--thinkgate-python", default=None,
                   help="the Python for thinkgate's side (default: this one); the vLLM venv's own runs both "
                        "on the same xgrammar")
    p.add_argument("--verbose", action="store_true", help="pass the workers' stderr through")
    p.add_argument("--out", default=None, help="JSON-lines output file (default bench-results/vllm.jsonl)")


def _whitespace(text: str) -> Any:
    """An argparse ``type``: 'default', 'none' (None) or an integer >= 0."""
    if text in ("default", "none"):
        return None if text == "none" else text
    try:
        n = int(text)
    except ValueError:
        n = -1
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected 'default', 'none' or an integer >= 0, got {text!r}")
    return n


def _at_least(minimum: int) -> Any:
    """An argparse ``type``: one integer >= ``minimum``."""

    def parse(text: str) -> int:
        try:
            n = int(text)
        except ValueError:
            n = minimum - 1
        if n < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {text!r}")
        return n

    return parse


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else float("nan")


def main(args: argparse.Namespace) -> int:
    from bench.harness import print_table, progress, write_rows

    from thinkgate.reasoning import load_vocabulary

    ws = args.max_whitespace
    tool_format = args.tool_format if args.workload == "tools" else None
    vocab = load_vocabulary("deepseek_v4")
    if tool_format is not None:
        try:  # a format without a tag or a renderer, or tools it cannot write: a usage error
            build_requests(vocab, 1, 1, args.seed, tool_format=tool_format, n_tools=args.tools)
        except ValueError as e:
            sys.stderr.write(f"--tool-format {tool_format}: {e}\n")
            return 2
    python = vllm_python(args.vllm_python)
    version = vllm_version(python)
    if version is None:
        sys.stderr.write(absent_message(python))
        return 2
    if not version.startswith("0.34."):
        progress(f"warning: vLLM {version} at {python}; this benchmark drives vLLM 0.34's internals")
    progress(f"starting the workers (vLLM {version} at {python}; thinkgate at {args.thinkgate_python or sys.executable})")
    workers: dict[str, Worker] = {}
    rows: list[dict[str, Any]] = []
    try:
        workers["thinkgate"] = Worker(args.thinkgate_python or sys.executable, "thinkgate", verbose=args.verbose)
        workers["vllm"] = Worker(python, "vllm", verbose=args.verbose)
        versions = {e: w.hello.get("versions", {}) for e, w in workers.items()}
        progress(f"versions: {versions}")
        for k in args.drafts:
            for batch in args.batches:
                per = k + 1
                # the JSON must outlast the steps (every step commits k + 1 tokens; at most 34 think)
                res: dict[str, dict[str, list[float]]] = {e: {} for e in workers}
                setup: dict[str, dict[str, float]] = {e: {"setup_s": 0.0} for e in workers}
                con: list[int] = []  # constrained-only steps, as indices into the concatenated repeats
                expected: list[int] = []  # rows that constrain something, per step, as the scripts say
                order = list(workers)
                rnd = 0
                for rep in range(args.repeats):
                    # the JSON must outlast the steps (every step commits k + 1 tokens; at most 34 think)
                    reqs = build_requests(vocab, batch, args.steps * per - 25 + 1,
                                          args.seed + 1000 * batch + 100 * k + rep, tool_format=tool_format,
                                          n_tools=args.tools)
                    think_end = max(r["think_end"] for r in reqs)
                    # step s predicts stream[s*per + j] for j < per: content when past that request's
                    # </think> (thinkgate returns only those rows; vLLM every row, all ones while thinking)
                    con += [rep * args.steps + s for s in range(args.steps) if s * per > think_end]
                    expected += [sum(1 for r in reqs for j in range(per) if s * per + j > r["think_end"])
                                 for s in range(args.steps)]
                    for e, w in workers.items():
                        got = w.call(op="setup", batch=batch, drafts=k, requests=reqs, warmup=args.warmup,
                                     max_whitespace=ws, clock=args.clock)
                        setup[e]["setup_s"] += got["setup_s"] / args.repeats
                    for start in range(0, args.steps, args.round_steps):
                        count = min(args.round_steps, args.steps - start)
                        for e in (order if rnd % 2 == 0 else order[::-1]):
                            got = workers[e].call(op="run", start=start, count=count)
                            for key, vals in got.items():
                                if key != "ok":
                                    res[e].setdefault(key, []).extend(vals)
                        rnd += 1
                    for w in workers.values():
                        w.call(op="close")
                row: dict[str, Any] = {"batch": batch, "drafts": k, "steps": args.steps * args.repeats,
                                       "con_steps": len(con)}
                for e, tag in (("thinkgate", "tg"), ("vllm", "vllm")):
                    d = res[e]
                    for what in ("fill", "accept"):
                        vals = d[f"{what}_us"]
                        row[f"{tag}_{what}_all_us"] = statistics.fmean(vals)
                        row[f"{tag}_{what}_all_median_us"] = statistics.median(vals)
                        cv = [vals[s] for s in con]
                        row[f"{tag}_{what}_con_us"] = statistics.median(cv) if cv else float("nan")
                        row[f"{tag}_{what}_con_mean_us"] = statistics.fmean(cv) if cv else float("nan")
                    row[f"{tag}_rows_per_step"] = statistics.fmean(d["rows"])
                    row[f"{tag}_masked_out"] = int(sum(d["masked_out"]))
                    row[f"{tag}_rejects"] = int(sum(d["rejects"]))
                    row[f"{tag}_draft_rejects"] = int(sum(d["draft_rejects"]))
                    row[f"{tag}_setup_s"] = setup[e]["setup_s"]
                    row[f"{tag}_first_error"] = next((m for m in d["error"] if m), "")
                    if row[f"{tag}_first_error"]:
                        progress(f"{e} refused a scripted commit: {row[f'{tag}_first_error']}")
                for e, tag in (("thinkgate", "tg"), ("vllm", "vllm")):
                    row[f"{tag}_row_mismatches"] = sum(1 for a, b in zip(res[e]["rows"], expected) if a != b)
                row["vllm_trim_us"] = statistics.fmean(res["vllm"]["trim_us"])
                for what in ("fill", "accept"):
                    for span in ("all", "con"):
                        row[f"{what}_{span}_x"] = _ratio(row[f"vllm_{what}_{span}_us"], row[f"tg_{what}_{span}_us"])
                    # per constrained step, vLLM / thinkgate of the same step (a burst of another process
                    # hits one step, not the median of the pairs)
                    pairs = [_ratio(res["vllm"][f"{what}_us"][s], res["thinkgate"][f"{what}_us"][s]) for s in con]
                    row[f"{what}_con_paired_x"] = statistics.median(pairs) if pairs else float("nan")
                # per mask row on constrained steps (every one of the batch * (k + 1) rows constrains)
                for tag in ("tg", "vllm"):
                    row[f"{tag}_row_us"] = row[f"{tag}_fill_con_us"] / (batch * per)
                # the whole per-step work of each manager in the scheduler: fill + accept (+ vLLM's trim)
                row["step_all_x"] = _ratio(row["vllm_fill_all_us"] + row["vllm_accept_all_us"] + row["vllm_trim_us"],
                                           row["tg_fill_all_us"] + row["tg_accept_all_us"])
                row["masked_out"] = row["tg_masked_out"] + row["vllm_masked_out"]
                row["row_mismatches"] = row["tg_row_mismatches"] + row["vllm_row_mismatches"]
                row["rejects"] = (row["tg_rejects"] + row["vllm_rejects"] + row["tg_draft_rejects"]
                                  + row["vllm_draft_rejects"])
                row.update({"vocab": "deepseek_v4", "parser": "deepseek_r1", "vllm": version, "clock": args.clock,
                            "max_whitespace": args.max_whitespace, "versions": versions,
                            "load": os.getloadavg()[0], "schemas": list(SCHEMAS), "workload": args.workload})
                if tool_format is not None:
                    row.update({"tool_format": tool_format, "tools": args.tools})
                rows.append(row)
                progress(f"batch {batch:>4} drafts {k}: fill {row['tg_fill_all_us']:.0f} / {row['vllm_fill_all_us']:.0f} us "
                         f"(x{row['fill_all_x']:.2f}; constrained x{row['fill_con_x']:.2f}), accept "
                         f"x{row['accept_all_x']:.2f}, masked_out {row['masked_out']}, rejects {row['rejects']}, "
                         f"row mismatches {row['row_mismatches']}")
    except WorkerError as e:
        sys.stderr.write(f"{e}\n")
        return 1
    finally:
        for w in workers.values():
            w.close()
    print_table(rows, COLUMNS)
    bad = sum(r["masked_out"] + r["rejects"] for r in rows)
    mismatched = sum(r["row_mismatches"] for r in rows)
    print(f"load average {os.getloadavg()[0]:.2f}; scripted tokens forbidden or refused: {bad} (must be 0); "
          f"steps whose constrained rows differ from the scripts' count: {mismatched} (must be 0)")
    if not args.no_write:
        path = write_rows("vllm", rows, args.out)
        progress(f"rows appended to {path}")
    return 1 if bad or mismatched else 0
