"""The main job: a simulated continuous-batching engine loop that measures bitmask throughput.

Requests (JSON schema, regex, choice, tool calls: required / named / auto; half of them thinking first)
arrive and finish; the batch is kept full. A stand-in model gives logits that favour a scripted valid
output (a large bonus over Gaussian noise). Each step, in the order an engine runs them:

1. **fill**: ``manager.grammar_bitmask(schedule)`` (with ``k`` draft tokens per request when ``--drafts``);
2. **apply**: ``kernels.apply_token_bitmask_inplace(logits, bitmask, indices)``;
3. greedy sampling and speculative verification (not timed: the engine's work);
4. **accept**: ``manager.accept_tokens`` for every request.

Floors, measured in the same run on the same state:

- fill: the same rows filled by calling xgrammar's matchers directly (batch matcher, advance through
  the drafts, roll back), with no reasoning gating, no bookkeeping: what any integration must pay;
- apply: ``logits.fill_`` of the same shape as the masked rows ([rows masked, V], the same logits
  memory) with the thread budget the CPU kernel gives that call (``cpu_bitmask.default_threads``:
  one thread below about a million logits), timed just before and just after the apply of the same step (interleaved, so load on a
  shared machine hits both alike); the floor is the faster of the two. ``apply_x`` is the median of the
  per-step ratios (apply / its floor), ``apply_x_p10`` / ``apply_x_p90`` their spread, ``apply_x_sum``
  the ratio of the sums;
- accept: the parser's ``scan`` of the committed tokens while thinking, and xgrammar's ``accept_token``
  called directly for the same content tokens.

Options for the scheduler features (off by default; each adds its columns):

- ``--jump-forward N``: after each commit, ``manager.forced_tokens(rid, N)`` and, when the grammar
  forces tokens, their commit with ``accept_tokens`` without a model step (the stand-in model's
  script must agree with them: a forced token is the only one the mask allows). Prints the share
  of content tokens that came this way (``jf_saved``: forced / all content tokens committed) and the
  time per ``forced_tokens`` call (``jf_us``), also as a ratio to one plain xgrammar fill at the same
  states (``jf_x``: a call with nothing forced costs one fill and a count of the row's words).
- ``--overlap``: each step also runs the fill beside a stand-in model forward (``--forward sleep``:
  ``time.sleep(--forward-us)``, as a GPU forward leaves the CPU idle; ``--forward matmul``: a
  float32 ``[n, n] @ [n, n]`` torch matmul of ``--forward-size n``, which releases the GIL;
  ``--forward python``: a pure-Python loop of ``--forward-us``, holding the GIL, the worst case for a
  fill beside it: an engine that launches its forward from Python without CUDA graphs), twice on
  the same state: serial (``grammar_bitmask``, then the forward) and overlapped
  (``grammar_bitmask_async``, the forward, ``result()``). Prints both times and their ratio
  (``overlap_x`` = overlapped / serial, lower is better) and checks that the overlapped rows equal
  the step's rows (a mismatch counts as an error).

Every finished output is checked (valid for its schema / regex / choice, tool calls read back with the
format's reader and validated): the count of invalid outputs is printed and must be 0.
"Masked tokens/s" is the number of masked logits rows (each one a sampled position) per second of our
own time (fill + apply + accept).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

from .harness import RESULTS_DIR, int_list, non_negative_int_list, print_table, progress, write_rows

DESCRIPTION = "simulated continuous-batching engine loop: fill + apply + accept (the default)"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batches", type=int_list, default=[1, 16, 64, 256], help="batch sizes to sweep (default: 1,16,64,256)")
    p.add_argument("--drafts", type=non_negative_int_list, default=[0, 3], help="draft tokens per request to sweep (default: 0,3)")
    p.add_argument("--steps", type=int, default=40, help="measured steps per configuration (default: 40)")
    p.add_argument("--warmup", type=int, default=5, help="unmeasured steps first (default: 5)")
    p.add_argument("--vocab", default="qwen3_6", help="vocabulary (default: qwen3_6, the embedded default)")
    p.add_argument("--tool-format", default="qwen3", help="tool-call syntax of the model (default: qwen3)")
    p.add_argument("--kinds", default="json,regex,choice,tool_required,tool_named,tool_auto",
                   help="request kinds in the mix (default: all)")
    p.add_argument("--think-fraction", type=float, default=0.5, help="share of requests that think first")
    p.add_argument("--max-thinking-tokens", type=int, default=None,
                   help="thinking budget of every request (default: none); the stand-in model writes its "
                        "answer after a forced end of thinking")
    p.add_argument("--compile-while-thinking", action="store_true",
                   help="managers built with compile_while_thinking=True: a thinking request is scheduled "
                        "while its constraint compiles (its rows hold the end of its thinking off)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-tokens", type=int, default=None, metavar="N",
                   help="answer reservation instead of the loop sweep: thinking requests with max_tokens=N, cut / "
                        "invalid outputs without and with reserve_answer, and the cost per step (bench/reserve.py)")
    p.add_argument("--reserve-requests", type=int, default=2, help="--max-tokens: rounds over the schemas (default: 2)")
    p.add_argument("--reserve-repeats", type=int, default=3, help="--max-tokens: cost replays per mode (default: 3)")
    p.add_argument("--reserve-thinking", type=int, default=None, metavar="N",
                   help="--max-tokens: max_thinking_tokens=N for every request, so the answer is written freely and "
                        "checked by the reservation (default: none)")
    p.add_argument("--reserve-forward-us", type=int, default=0, metavar="US",
                   help="--max-tokens: untimed stand-in forward (a sleep) between steps (default: 0)")
    p.add_argument("--reserve-tool-formats", default=None, metavar="all|F,G",
                   help="instead of the loop: the reservation's start search for tool_choice required / named on "
                        "each tool format, read back by the format's reader (bench/reserve_tools.py)")
    p.add_argument("--reserve-tool-set", choices=("sweep", "corpus"), default="sweep",
                   help="--reserve-tool-formats: two small tool sets, required and named (sweep, default), or each "
                        "tool of the base corpus tests/data/tools/corpus.json named alone (corpus)")
    p.add_argument("--out", default=None, help="JSON-lines file to append to (default: bench-results/loop.jsonl)")
    p.add_argument("--plot", default=str(RESULTS_DIR / "loop.png"),
                   help="PNG of the sweep when matplotlib is installed ('' to skip)")
    p.add_argument("--jump-forward", type=int, default=0, metavar="N",
                   help="append the tokens the grammar forces (at most N per call) without model steps (default: 0, off)")
    p.add_argument("--overlap", action="store_true", help="also time the fill serial vs overlapped with a stand-in forward")
    p.add_argument("--forward", choices=("sleep", "matmul", "python"), default="sleep",
                   help="stand-in model forward (default: sleep)")
    p.add_argument("--forward-us", type=int, default=5000,
                   help="--forward sleep / python: its length in us (default: 5000)")
    p.add_argument("--forward-size", type=int, default=1024, help="--forward matmul: n of the [n, n] @ [n, n] matmul (default: 1024)")


@dataclass
class _Live:
    req: Any                      # ScriptedRequest
    pos: int = 0                  # tokens committed
    out: list[int] = field(default_factory=list)
    shadow: Any = None            # the plain xgrammar matcher for the floor
    shadow_fed: int = 0           # content tokens fed to the shadow
    tracker: Any = None           # the request's own reasoning tracker, kept by the bench
    content_start: int | None = None  # where the content starts in ``out`` (None: still thinking)

    def __post_init__(self) -> None:
        if self.tracker is None or self.tracker.ended:
            self.content_start = 0
    diverged: bool = False


@dataclass
class _Totals:
    steps: int = 0
    fill: float = 0.0
    apply: float = 0.0
    accept: float = 0.0
    floor_fill: float = 0.0
    floor_apply: float = 0.0
    floor_accept: float = 0.0
    rows: int = 0
    logits_rows: int = 0
    tokens: int = 0
    content: int = 0              # content tokens committed (sampled and forced)
    jf_tokens: int = 0            # of which forced (jump-forward)
    jf_calls: int = 0
    jf_time: float = 0.0          # us in forced_tokens
    jf_floor: float = 0.0         # us of one plain xgrammar fill at the same states (the floor of a call)
    jf_ratios: list[float] = field(default_factory=list)       # per call: forced_tokens / one plain fill
    overlap_ratios: list[float] = field(default_factory=list)  # per step: overlapped / serial
    apply_ratios: list[float] = field(default_factory=list)    # per step with rows: apply / its fill_ floor
    forward: float = 0.0          # us of the stand-in forward (serial run)
    serial: float = 0.0           # us: fill, then the forward
    overlapped: float = 0.0       # us: async fill beside the forward, then result()
    overlap_mismatch: int = 0
    finished: int = 0
    invalid: int = 0
    truncated: int = 0
    errors: int = 0
    diverged: int = 0
    thinking_rows: int = 0
    forced_ends: int = 0


def main(args: argparse.Namespace) -> int:
    if args.max_tokens is not None:
        from .reserve import run as run_reserve

        return run_reserve(args)
    if args.reserve_tool_formats is not None:
        from .reserve_tools import run as run_reserve_tools

        return run_reserve_tools(args)
    import torch
    import xgrammar as xgr

    from thinkgate import kernels
    from thinkgate.reasoning.vocabulary import load_vocabulary
    from thinkgate.structured_output import Compiler, StructuredOutputManager

    from thinkgate.testing.workload import Workload

    batches, drafts_list = args.batches, args.drafts
    vocab = load_vocabulary(args.vocab)
    compiler = Compiler(vocab, num_threads=2)
    progress(f"vocabulary {vocab.name}: {vocab.vocab_size} ids, logits width {vocab.logits_width}; "
             f"torch threads {torch.get_num_threads()}")
    rows_out: list[dict[str, Any]] = []
    invalid_examples: list[str] = []
    grand_invalid = 0
    for k in drafts_list:
        for B in batches:
            t = _run_config(B, k, args, vocab, compiler, torch, xgr, kernels, StructuredOutputManager,
                            Workload, invalid_examples)
            our = t.fill + t.apply + t.accept
            row = {
                "batch": B, "drafts": k, "steps": t.steps,
                "fill_us": t.fill / t.steps, "apply_us": t.apply / t.steps, "accept_us": t.accept / t.steps,
                "step_us": our / t.steps,
                "rows_per_step": t.rows / t.steps, "logits_rows_per_step": t.logits_rows / t.steps,
                "masked_tok_per_s": t.rows / (our / 1e6) if our else 0.0,
                "fill_x": t.fill / t.floor_fill if t.floor_fill else float("nan"),
                # the median of the per-step ratios (apply / the fill_ floor around it), and their spread:
                # robust to the odd preempted step on a shared machine; apply_x_sum: ratio of the sums
                "apply_x": _pct(t.apply_ratios, 0.5), "apply_x_sum": t.apply / t.floor_apply if t.floor_apply
                else float("nan"),
                "apply_x_p10": _pct(t.apply_ratios, 0.1), "apply_x_median": _pct(t.apply_ratios, 0.5),
                "apply_x_p90": _pct(t.apply_ratios, 0.9),
                "accept_x": t.accept / t.floor_accept if t.floor_accept else float("nan"),
                "floor_fill_us": t.floor_fill / t.steps, "floor_apply_us": t.floor_apply / t.steps,
                "floor_accept_us": t.floor_accept / t.steps,
                "finished": t.finished, "invalid": t.invalid, "truncated": t.truncated, "errors": t.errors,
                "diverged": t.diverged, "tokens": t.tokens, "forced_ends": t.forced_ends,
                "max_thinking_tokens": args.max_thinking_tokens,
                "compile_while_thinking": args.compile_while_thinking,
            }
            if args.jump_forward:
                row.update(jf_saved=t.jf_tokens / t.content if t.content else 0.0, jf_tokens=t.jf_tokens,
                           content_tokens=t.content, jf_us=t.jf_time / t.jf_calls if t.jf_calls else 0.0,
                           jf_calls=t.jf_calls, jf_x=t.jf_time / t.jf_floor if t.jf_floor else float("nan"),
                           jf_x_median=statistics.median(t.jf_ratios) if t.jf_ratios else float("nan"))
            if args.overlap:
                row.update(fwd_us=t.forward / t.steps, serial_us=t.serial / t.steps, overlap_us=t.overlapped / t.steps,
                           overlap_x=t.overlapped / t.serial if t.serial else float("nan"),
                           overlap_x_median=statistics.median(t.overlap_ratios) if t.overlap_ratios else float("nan"),
                           overlap_mismatch=t.overlap_mismatch)
            rows_out.append(row)
            grand_invalid += t.invalid + t.errors + t.overlap_mismatch
            progress(f"B={B:>3} k={k}: step {row['step_us']:.0f} us (fill {row['fill_x']:.2f}x, apply "
                     f"{row['apply_x']:.2f}x, accept {row['accept_x']:.2f}x of floor), {t.finished} outputs "
                     f"checked, {t.invalid} invalid, {t.diverged} left the script")
    print()
    print(f"thinkgate engine loop on {vocab.name} (logits width {vocab.logits_width}); per step, in us; "
          f"x = ratio to the floor measured in the same run")
    print_table(rows_out, ["batch", "drafts", "fill_us", "fill_x", "apply_us", "apply_x", "apply_x_p10", "apply_x_p90", "accept_us",
                           "accept_x", "step_us", "rows_per_step", "masked_tok_per_s", "finished",
                           "invalid", "truncated"] + (["forced_ends"] if args.max_thinking_tokens is not None else []))
    total_finished = sum(r["finished"] for r in rows_out)
    if args.jump_forward:
        print(f"\njump-forward (forced_tokens, at most {args.jump_forward} per call): jf_saved = forced / content "
              f"tokens committed; jf_us = time per forced_tokens call; jf_x = that time / one plain xgrammar fill "
              f"at the same states (same run; jf_x_median: the median of the per-call ratios)")
        print_table(rows_out, ["batch", "drafts", "content_tokens", "jf_tokens", "jf_saved", "jf_calls", "jf_us", "jf_x",
                               "jf_x_median"])
    if args.overlap:
        n = args.forward_size
        what = {"sleep": f"time.sleep({args.forward_us} us)",
                "python": f"a pure-Python loop of {args.forward_us} us, holding the GIL",
                "matmul": f"float32 [{n}, {n}] @ [{n}, {n}] torch matmul"}[args.forward]
        print(f"\nfill overlapped with a stand-in forward ({what}), per step in us, same state: serial = "
              f"grammar_bitmask then forward; overlap = grammar_bitmask_async, forward, result(); overlap_x = overlap / serial "
              f"(overlap_x_median: the median of the per-step ratios)")
        print_table(rows_out, ["batch", "drafts", "fill_us", "fwd_us", "serial_us", "overlap_us", "overlap_x",
                               "overlap_x_median", "overlap_mismatch"])
    print(f"\noutputs checked: {total_finished}; invalid outputs: {grand_invalid}"
          + ("" if not invalid_examples else "\n  e.g. " + "\n  e.g. ".join(invalid_examples[:5])))
    if not args.no_write:
        path = write_rows("loop", [dict(r, vocab=vocab.name, seed=args.seed) for r in rows_out], args.out)
        progress(f"rows appended to {path}")
        if args.plot:
            _plot(rows_out, args.plot)
    compiler.close()
    return 1 if grand_invalid else 0


def _run_config(B, k, args, vocab, compiler, torch, xgr, kernels, Manager, Workload, invalid_examples) -> _Totals:
    from thinkgate.kernels.cpu_bitmask import default_threads

    from thinkgate.testing.workload import DEFAULT_MIX

    kinds = [x for x in str(args.kinds).split(",") if x]
    unknown = [x for x in kinds if x not in DEFAULT_MIX]
    if unknown or not kinds:
        raise SystemExit(f"unknown request kinds {unknown}; known: {', '.join(DEFAULT_MIX)}")
    workload = Workload(vocab, seed=args.seed * 1000 + B * 10 + k, think_fraction=args.think_fraction,
                        tool_format=args.tool_format, mix={x: DEFAULT_MIX[x] for x in kinds})
    mgr = Manager(vocab, "qwen3", max_num_seqs=B, num_speculative_tokens=k, compiler=compiler,
                  compile_while_thinking=args.compile_while_thinking)
    V = vocab.logits_width
    n_rows = B * (1 + k)
    gen = torch.Generator().manual_seed(args.seed + B + k)
    noise = torch.randn((n_rows, V), generator=gen, dtype=torch.float32)
    logits = torch.empty_like(noise)
    batch_matcher = xgr.BatchGrammarMatcher("auto")
    floor_mask = torch.empty((n_rows, (V + 31) // 32), dtype=torch.int32)
    rng = workload.rng
    live: dict[str, _Live] = {}
    waiting: list[_Live] = []
    t = _Totals()
    total_steps = args.warmup + args.steps
    forward = _stand_in_forward(args, torch)
    max_extra = 64
    last_report = time.monotonic()

    def top_up() -> None:
        while len(live) + len(waiting) < B:
            sr = workload.next()
            mgr.add_request(sr.rid, sr.constraint, sr.prompt_ids, chat_template_kwargs=sr.chat_template_kwargs,
                            max_thinking_tokens=args.max_thinking_tokens)
            waiting.append(_Live(sr, tracker=mgr.parser.new_tracker(sr.prompt_ids, sr.chat_template_kwargs)))

    step = 0
    deadline_idle = time.monotonic() + 120.0
    while step < total_steps:
        measured = step >= args.warmup
        top_up()
        # admit the requests whose compile is done
        still: list[_Live] = []
        for lv in waiting:
            if mgr.is_ready(lv.req.rid):
                live[lv.req.rid] = lv
            else:
                still.append(lv)
        waiting[:] = still
        if not live:
            if time.monotonic() > deadline_idle:
                raise RuntimeError("no request became ready within 120 s")
            time.sleep(0.002)
            continue
        deadline_idle = time.monotonic() + 120.0
        order = list(live.values())[:B]
        schedule: list[Any] = []
        draft_of: dict[str, list[int]] = {}
        for lv in order:
            if k:
                d = []
                for i in range(k):
                    j = lv.pos + i
                    tok = lv.req.script[j] if j < len(lv.req.script) and not lv.diverged else rng.randrange(1000, 50000)
                    if rng.random() < 0.15:
                        tok = rng.randrange(1000, 50000)
                    d.append(tok)
                draft_of[lv.req.rid] = d
                schedule.append((lv.req.rid, d))
            else:
                schedule.append(lv.req.rid)

        # the stand-in model (not timed): noise plus a bonus on the scripted token of each row
        logits.copy_(noise)
        bonus_rows: list[int] = []
        bonus_cols: list[int] = []
        base = 0
        for lv in order:
            d = draft_of.get(lv.req.rid, [])
            for i in range(1 + len(d)):
                j = lv.pos + i
                if j < len(lv.req.script) and not lv.diverged:
                    bonus_rows.append(base + i)
                    bonus_cols.append(lv.req.script[j])
            base += 1 + len(d)
        if bonus_rows:
            logits[bonus_rows, bonus_cols] += 50.0

        # rows of a request whose compile is still running may change between two calls of the same step
        # (its compile resolving in between): the overlap check compares only steps without one
        settled = not args.overlap or all(mgr.is_compiled(lv.req.rid) for lv in order)
        # 1. fill
        t0 = time.perf_counter_ns()
        batch = mgr.grammar_bitmask(schedule)
        t1 = time.perf_counter_ns()
        n_masked = 0 if batch is None else len(batch)
        # the apply floor, first half: fill_ of the same shape ([rows masked, V], same logits memory)
        # just before the apply, then the logits restored (not timed)
        if n_masked:
            # the same thread budget as the CPU kernel's call (one thread below ~1M logits): torch's
            # pool woken for a one-row fill_ costs milliseconds on a loaded machine
            all_threads = torch.get_num_threads()
            torch.set_num_threads(default_threads(n_masked, V))
            a0 = time.perf_counter_ns()
            logits[:n_masked].fill_(float("-inf"))
            a1 = time.perf_counter_ns()
            torch.set_num_threads(all_threads)
            _restore(logits, noise, bonus_rows, bonus_cols)
        # 2. apply
        t2a = time.perf_counter_ns()
        if batch is not None:
            kernels.apply_token_bitmask_inplace(logits, batch.bitmask, batch.logits_indices, vocab_size=vocab.vocab_size)
        t2 = time.perf_counter_ns()
        # floors for fill and apply, on the same state
        f_fill = _floor_fill(order, draft_of, batch_matcher, floor_mask, mgr, compiler, xgr, vocab)
        f_apply = 0
        if n_masked:
            # the apply floor, second half: the same fill_ just after; the floor is the faster of the two
            # (a fill_ preempted on a shared machine is dropped as long as the other one was not)
            torch.set_num_threads(default_threads(n_masked, V))
            a2 = time.perf_counter_ns()
            logits[:n_masked].fill_(float("-inf"))
            a3 = time.perf_counter_ns()
            torch.set_num_threads(all_threads)
            f_apply = min(a1 - a0, a3 - a2)
            # the floor wrote over rows the sampler needs: redo the model + mask (not timed)
            _restore(logits, noise, bonus_rows, bonus_cols)
            kernels.apply_token_bitmask_inplace(logits, batch.bitmask, batch.logits_indices, vocab_size=vocab.vocab_size)

        if args.overlap:
            ref = _rows(batch)
            f0 = time.perf_counter_ns()
            mgr.grammar_bitmask(schedule)
            f1 = time.perf_counter_ns()
            forward()
            f2 = time.perf_counter_ns()
            handle = mgr.grammar_bitmask_async(schedule)
            forward()
            got = handle.result()
            f3 = time.perf_counter_ns()
            if measured:
                t.forward += (f2 - f1) / 1e3
                t.serial += (f2 - f0) / 1e3
                t.overlapped += (f3 - f2) / 1e3
                if settled:
                    t.overlap_mismatch += _rows(got) != ref
                t.overlap_ratios.append((f3 - f2) / (f2 - f0))

        # 3. sample (greedy) and verify the drafts (not timed)
        sampled = logits[:base].argmax(dim=1).tolist()
        commits: list[tuple[_Live, list[int]]] = []
        base = 0
        for lv in order:
            d = draft_of.get(lv.req.rid, [])
            got: list[int] = []
            for i in range(1 + len(d)):
                tok = sampled[base + i]
                got.append(tok)
                if tok in vocab.stop_token_ids or i == len(d) or tok != d[i]:
                    break
            base += 1 + len(d)
            commits.append((lv, got))

        # 4. accept
        results = []
        t3 = time.perf_counter_ns()
        for lv, got in commits:
            results.append(mgr.accept_tokens(lv.req.rid, got))
        t4 = time.perf_counter_ns()
        f_accept = _floor_accept(commits, mgr, compiler)

        # bookkeeping (not timed)
        finished: list[_Live] = []
        for (lv, got), res in zip(commits, results):
            start = lv.pos
            if lv.content_start is None:
                # where the thinking really ended: the scripted end marker, or earlier at an implicit
                # end (a <tool_call> written while thinking starts the call)
                end = lv.tracker.advance(got)
                if end is not None:
                    lv.content_start = start + end.content_start
            lv.out.extend(got)
            lv.pos += len(got)
            if not lv.diverged and lv.req.script[start:start + len(got)] != got:
                lv.diverged = True
            if lv.content_start is not None and lv.content_start != lv.req.content_start:
                # the budget forced the end of thinking: the model answers from there (its script's content)
                sr = lv.req
                sr.script = lv.out[:lv.content_start] + sr.script[sr.content_start:]
                sr.content_start = lv.content_start
                lv.diverged = sr.script[:len(lv.out)] != lv.out
                if measured:
                    t.forced_ends += 1
            if res.status == "error":
                if measured:
                    t.errors += 1
                invalid_examples.append(f"{lv.req.rid} ({lv.req.kind}): error {mgr.error(lv.req.rid)}")
                finished.append(lv)
            elif res.status == "terminated" or (lv.out and lv.out[-1] in vocab.stop_token_ids):
                if measured:
                    t.finished += 1
                    t.diverged += lv.diverged
                content = lv.out[lv.content_start:] if lv.content_start is not None else []
                if content and content[-1] in vocab.stop_token_ids:
                    content = content[:-1]
                why = lv.req.check(vocab.decode(content)) if res.status == "terminated" else "stopped without termination"
                if why is not None:
                    if measured:
                        t.invalid += 1
                    invalid_examples.append(f"{lv.req.rid} ({lv.req.kind}): {why}; output "
                                            f"{vocab.decode(lv.out)[-160:]!r}")
                finished.append(lv)
            elif lv.pos > len(lv.req.script) + max_extra:
                if measured:
                    t.truncated += 1
                finished.append(lv)
            elif args.jump_forward and lv.content_start is not None:
                if measured:
                    t.content += min(len(got), lv.pos - lv.content_start)
                j0 = time.perf_counter_ns()
                forced = mgr.forced_tokens(lv.req.rid, args.jump_forward)
                j1 = time.perf_counter_ns()
                if measured:
                    t.jf_calls += 1
                    t.jf_time += (j1 - j0) / 1e3
                    shadow = _shadow(lv, compiler, xgr)  # a plain matcher at the same state (catching up: not timed)
                    k0 = time.perf_counter_ns()
                    shadow.fill_next_token_bitmask(floor_mask, 0)
                    k1 = time.perf_counter_ns()
                    t.jf_floor += (k1 - k0) / 1e3
                    t.jf_ratios.append((j1 - j0) / max(k1 - k0, 1))
                if forced:
                    res = mgr.accept_tokens(lv.req.rid, forced)
                    start = lv.pos
                    lv.out.extend(forced)
                    lv.pos += len(forced)
                    if not lv.diverged and lv.req.script[start:start + len(forced)] != forced:
                        lv.diverged = True
                    if measured:
                        t.jf_tokens += len(forced)
                        t.content += len(forced)
                    if res.status == "error":  # a forced token is allowed by construction: never expected
                        if measured:
                            t.errors += 1
                        invalid_examples.append(f"{lv.req.rid} ({lv.req.kind}): forced tokens rejected: {res.message}")
                        finished.append(lv)
        for lv in finished:
            mgr.remove_request(lv.req.rid)
            live.pop(lv.req.rid, None)

        if measured:
            t.steps += 1
            t.fill += (t1 - t0) / 1e3
            t.apply += (t2 - t2a) / 1e3
            t.accept += (t4 - t3) / 1e3
            t.floor_fill += f_fill / 1e3
            t.floor_apply += f_apply / 1e3
            if f_apply:
                t.apply_ratios.append((t2 - t2a) / f_apply)
            t.floor_accept += f_accept / 1e3
            t.rows += n_masked
            t.logits_rows += base
            t.tokens += sum(len(g) for _, g in commits)
        step += 1
        now = time.monotonic()
        if now - last_report > 5:
            progress(f"  B={B} k={k}: step {step}/{total_steps}, {len(live)} live, {t.finished} finished")
            last_report = now
    for rid in list(live) + [lv.req.rid for lv in waiting]:
        mgr.remove_request(rid)
    mgr.close()
    return t


def _rows(batch) -> dict[int, bytes]:
    """A batch as logits row -> mask bytes (its rows in any order)."""
    if batch is None:
        return {}
    return {i: batch.bitmask[r].numpy().tobytes() for r, i in enumerate(batch.logits_indices.tolist())}


def _stand_in_forward(args, torch):
    """The model forward of ``--overlap``: a sleep, a torch matmul (both release the GIL), or a
    pure-Python loop (holds it)."""
    if args.forward == "sleep":
        seconds = args.forward_us / 1e6
        return lambda: time.sleep(seconds)
    if args.forward == "python":
        ns = args.forward_us * 1000

        def busy() -> None:
            end = time.perf_counter_ns() + ns
            while time.perf_counter_ns() < end:
                sum(range(100))

        return busy
    n = args.forward_size
    a = torch.randn((n, n), dtype=torch.float32)
    b = torch.randn((n, n), dtype=torch.float32)
    out = torch.empty((n, n), dtype=torch.float32)
    return lambda: torch.mm(a, b, out=out)


def _constrained_now(mgr, lv) -> bool:
    return mgr.status(lv.req.rid).value == "constrained"


def _shadow(lv, compiler, xgr):
    """The plain xgrammar matcher kept in step with the request's content tokens (for the floors)."""
    if lv.shadow is None:
        compiled = compiler.compile(lv.req.constraint)
        lv.shadow = xgr.GrammarMatcher(compiled.grammar)
    content = lv.out[lv.content_start:] if lv.content_start is not None else []
    while lv.shadow_fed < len(content):
        tok = content[lv.shadow_fed]
        lv.shadow_fed += 1
        if not lv.shadow.accept_token(tok):
            break
    return lv.shadow


def _restore(logits, noise, bonus_rows, bonus_cols) -> None:
    """The stand-in model's logits again (after a floor wrote -inf over them)."""
    logits.copy_(noise)
    if bonus_rows:
        logits[bonus_rows, bonus_cols] += 50.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _floor_fill(order, draft_of, batch_matcher, mask, mgr, compiler, xgr, vocab) -> int:
    """xgrammar called directly for the same rows as the manager fills: batch fill per draft round,
    accept the draft, roll back. Only constrained requests (a bare integration has no gating)."""
    ms = []
    ds = []
    for lv in order:
        if lv.req.constraint is None or not _constrained_now(mgr, lv):
            continue
        m = _shadow(lv, compiler, xgr)
        if m.is_terminated():
            continue
        ms.append(m)
        ds.append(draft_of.get(lv.req.rid, []))
    if not ms:
        return 0
    t0 = time.perf_counter_ns()
    k = max(len(d) for d in ds)
    alive = list(range(len(ms)))
    advanced = [0] * len(ms)
    row = 0
    for i in range(k + 1):
        if not alive:
            break
        sub = [ms[j] for j in alive]
        batch_matcher.batch_fill_next_token_bitmask(sub, mask, list(range(row, row + len(sub))))
        row += len(sub)
        if i == k:
            break
        nxt = []
        for j in alive:
            if i < len(ds[j]) and ms[j].accept_token(ds[j][i]):
                advanced[j] += 1
                if not ms[j].is_terminated():
                    nxt.append(j)
        alive = nxt
    for j, n in enumerate(advanced):
        if n:
            ms[j].rollback(n)
    return time.perf_counter_ns() - t0


def _floor_accept(commits, mgr, compiler) -> int:
    """What any integration must do to commit the same tokens: find the end of the thinking in them
    (the parser's pure ``scan`` on a shadow tracker) and feed the content tokens to xgrammar's
    ``accept_token``; the matcher is then rolled back (the shadow catches up on the next step through
    the same tokens, outside the timing)."""
    work = []
    for lv, got in commits:
        toks: list[int] = []
        start = lv.content_start
        if start is not None and lv.shadow is not None and lv.req.constraint is not None \
                and not lv.shadow.is_terminated() and lv.shadow_fed == lv.pos - start:
            toks = list(got)
        tracker = lv.tracker if start is None else None
        if toks or tracker is not None:
            work.append((lv.shadow, toks, tracker, got))
    t0 = time.perf_counter_ns()
    done = []
    for m, toks, tracker, got in work:
        if tracker is not None:
            tracker.scan(got)
        n = 0
        for tk in toks:
            if not m.accept_token(tk):
                break
            n += 1
        done.append((m, n))
    dt = time.perf_counter_ns() - t0
    for m, n in done:
        if n:
            m.rollback(n)
    return dt


def _plot(rows: list[dict[str, Any]], path: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        progress("matplotlib is not installed (pip install 'thinkgate[plot]'): no plot")
        return
    from pathlib import Path

    labels = [f"B={r['batch']}\nk={r['drafts']}" for r in rows]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.5))
    x = range(len(rows))
    bottom = [0.0] * len(rows)
    for key, color in (("fill_us", "#4c72b0"), ("apply_us", "#dd8452"), ("accept_us", "#55a868")):
        vals = [r[key] / 1e3 for r in rows]
        ax1.bar(x, vals, bottom=bottom, color=color, label=key[:-3])
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax1.set_xticks(list(x), labels)
    ax1.set_ylabel("ms per step")
    ax1.set_title("where a step's time goes")
    ax1.legend()
    for key, marker in (("fill_x", "o"), ("apply_x", "s"), ("accept_x", "^")):
        ax2.plot(list(x), [r[key] for r in rows], marker=marker, label=key)
    ax2.axhline(1.0, color="grey", lw=0.8)
    ax2.set_xticks(list(x), labels)
    ax2.set_ylabel("ratio to floor (same run)")
    ax2.set_title("ours / floor")
    ax2.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    progress(f"plot written to {path}")
