"""``python -m bench reasoning``: the per-step cost of the streaming reasoning trackers vs output length.

For each family and each thinking length N (default 1,000 and 100,000 tokens, in the same run), a
request is opened from a real prompt, the model's opening is committed, then N thinking tokens are
committed **one token per step**, as an engine does: the engine-core tracker (``advance``) and,
separately, the front-end stream (``feed``, text decoded by the stream). Each step is timed; the table
shows the median / p90 per-step time over the last ``--window`` steps of the run (the steps furthest
into the output) and the mean over the whole run, and ``ratio``: the median at N over the median at
the smallest N. A cost that grew with the output would give a ratio near N_max / N_min (100 here);
a bounded per-step cost gives a ratio near 1. Every run ends with the end marker and checks that the
reasoning ended at the right token, so the timed path is the real one.

Families: a token-marker family (``qwen3`` on Qwen3.6) and ``granite`` (text markers, a bounded byte
tail) by default; ``deepseek_r1``, ``mistral`` and ``olmo3`` on request (``--families``).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from bench.harness import int_list

DESCRIPTION = "per-step cost of the streaming reasoning trackers vs output length"

# family -> (vocabulary, prompt text, text the model writes to open its thinking, end text, kwargs)
CASES: dict[str, tuple[str, str, str, str, dict[str, Any]]] = {
    "qwen3": ("qwen3_6", "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n<think>\n", "", "</think>\n\n", {}),
    "granite": ("qwen3_6", "<|im_start|>user\nQ<|im_end|>\n<|im_start|>assistant\n", "Here is my thought process:\n",
                "Here is my response:\n", {"thinking": True}),
    "deepseek_r1": ("deepseek_v4", "<｜User｜>Q<｜Assistant｜><think>\n", "", "</think>", {}),
    "mistral": ("magistral", "[INST]Q[/INST]", "[THINK]", "[/THINK]", {}),
    "olmo3": ("tekken", "<s>[INST]Q[/INST]", "<think>", "</think>", {}),
}
DEFAULT_FAMILIES = "qwen3,granite"

THINKING_TEXT = (
    "Let me work through this carefully. First, the user wants the total of the two numbers, so I add "
    "them: 17 + 25 = 42. Then I check the units — metres, not feet — and the rounding rule (half up). "
    "中文推理也要处理：先检查约束，再给出答案。 Next I consider edge cases: empty input, negative values, "
    "very large values (1e308), and unicode such as é, ß, 🙂. "
)


def _families(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    bad = [n for n in names if n not in CASES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown families {bad or text!r}; known: {', '.join(CASES)}")
    return names


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--families", type=_families, default=_families(DEFAULT_FAMILIES),
                   help=f"comma-separated families (default {DEFAULT_FAMILIES}; known: {', '.join(CASES)})")
    p.add_argument("--sizes", type=int_list, default=[1000, 100000],
                   help="thinking lengths in tokens, one token per step (default 1000,100000)")
    p.add_argument("--window", type=int, default=1000,
                   help="per-step statistics over the last WINDOW steps of each run (default 1000)")
    p.add_argument("--out", default=None, help="JSON-lines file for the rows (default bench-results/reasoning.jsonl)")


def _time_steps(step, tokens: list[int], window: int) -> tuple[list[float], float]:
    """Call ``step([t])`` for each token; per-step microseconds of the last ``window`` steps, and the
    mean over all steps."""
    tail: list[float] = []
    first_timed = max(0, len(tokens) - window)
    clock = time.perf_counter_ns
    t_start = clock()
    for i, t in enumerate(tokens):
        if i >= first_timed:
            t0 = clock()
            step([t])
            tail.append((clock() - t0) / 1e3)
        else:
            step([t])
    total_us = (clock() - t_start) / 1e3
    return tail, total_us / max(1, len(tokens))


def run_family(family: str, sizes: list[int], window: int) -> list[dict[str, Any]]:
    from bench.harness import progress, summarize
    from thinkgate.reasoning import get_reasoning_parser, load_vocabulary

    vocab_name, prompt_text, open_text, end_text, kwargs = CASES[family]
    vocab = load_vocabulary(vocab_name)  # type: ignore[arg-type]
    parser = get_reasoning_parser(family)(vocab, chat_template_kwargs=kwargs)
    prompt = vocab.encode(prompt_text)
    opening = vocab.encode(open_text) if open_text else []
    end = vocab.encode(end_text)
    unit = vocab.encode(THINKING_TEXT)
    rows: list[dict[str, Any]] = []
    for n in sizes:
        thinking = (unit * (n // len(unit) + 1))[:n]
        for kind in ("tracker", "stream"):
            progress(f"{family} {kind}: {n} thinking tokens")
            if kind == "tracker":
                obj = parser.new_tracker(prompt)
                step = obj.advance
            else:
                obj = parser.new_stream(prompt)
                step = obj.feed
            for t in opening:
                step([t])
            tail, mean_us = _time_steps(step, thinking, window)
            # the end marker must end the reasoning at its last token (the timed path is the real one)
            ended_at = None
            for i, t in enumerate(end):
                r = step([t])
                if kind == "tracker" and r is not None:
                    ended_at = i
            if kind == "tracker" and (ended_at is None or not obj.ended):
                raise RuntimeError(f"{family}: the end marker {end_text!r} did not end the reasoning")
            if kind == "stream":
                check = parser.new_tracker(prompt)
                if check.advance(opening + thinking + end) is None:
                    raise RuntimeError(f"{family}: the end marker {end_text!r} did not end the reasoning")
            s = summarize(tail)
            rows.append({"family": family, "vocab": vocab_name, "kind": kind, "thinking_tokens": n,
                         "window": len(tail), "step_median_us": s.median_us, "step_p90_us": s.p90_us,
                         "step_mean_us_whole_run": mean_us})
    for kind in ("tracker", "stream"):
        mine = [r for r in rows if r["kind"] == kind]
        base = min(mine, key=lambda r: r["thinking_tokens"])
        for r in mine:
            r["ratio_vs_smallest"] = r["step_median_us"] / base["step_median_us"]
    return rows


def main(args: argparse.Namespace) -> int:
    from bench.harness import print_table, progress, write_rows

    rows: list[dict[str, Any]] = []
    for family in args.families:
        try:
            rows += run_family(family, sorted(args.sizes), max(1, args.window))
        except ValueError as e:  # a family the checkout does not have (e.g. an older build)
            progress(f"skipping {family}: {e}")
    if not rows:
        progress("no family could run")
        return 1
    print_table(rows, ["family", "vocab", "kind", "thinking_tokens", "step_median_us", "step_p90_us",
                       "step_mean_us_whole_run", "ratio_vs_smallest"])
    if not args.no_write:
        path = write_rows("reasoning", rows, args.out)
        progress(f"rows appended to {path}")
    return 0
