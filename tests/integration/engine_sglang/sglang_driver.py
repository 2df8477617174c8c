"""SGLang 0.5.23's calls into a grammar backend, in the order its scheduler makes them (a test helper).

Each function names the SGLang code whose calls it makes; the grammar objects, the batch fill
(``SamplingBatchInfo.update_regex_vocab_mask``) and the apply (``GrammarMask.apply``) are SGLang's own
code, imported. What is written here is only the part of the scheduler that needs a whole server
(request objects, the model): the request's grammar creation and queue, the linear draft chain walk
and the accept loop.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from types import SimpleNamespace as NS
from typing import Any

import numpy as np
import torch
from sglang.srt.constrained.base_grammar_backend import InvalidGrammarObject
from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo


def create_grammar(backend: Any, key: tuple[str, str], prompt: list[int], require_reasoning: bool,
                   timeout_s: float = 300.0, thinking_budget: int | None = None) -> Any:
    """``GrammarManager.process_req_with_grammar`` then ``get_ready_grammar_requests`` for one request
    (sglang/srt/constrained/grammar_manager.py: the key, the cache or a future, the queue until the
    future is done, ``set_cache(key, grammar.copy())``); ``thinking_budget`` as SGLang reads it from the
request's ``custom_params``. Returns the request's grammar object, or the
    ``InvalidGrammarObject`` SGLang aborts the request with."""
    key = backend.get_request_grammar_key(key, input_ids=prompt, thinking_budget=thinking_budget)
    value, cache_hit = backend.get_cached_or_future_value(key, require_reasoning)
    if cache_hit:
        return value
    assert isinstance(value, Future), f"a cache miss must be a future, got {value!r}"
    deadline = time.monotonic() + timeout_s
    while not value.done():
        assert time.monotonic() < deadline, f"grammar {key[0]} did not resolve"
        time.sleep(0.005)
    grammar = value.result()
    backend.set_cache(key, grammar.copy())
    return grammar


def fill_batch(grammars: list[Any], vocab_size: int) -> Any:
    """SGLang's own batch fill: ``SamplingBatchInfo.update_regex_vocab_mask`` over the batch's grammars
    (None for a request without one); returns its ``GrammarMask`` (or None)."""
    info = NS(grammars=grammars, vocab_size=vocab_size, temperatures=[1.0] * len(grammars), device="cpu",
              grammar_mask=None)
    SamplingBatchInfo.update_regex_vocab_mask(info)
    return info.grammar_mask


def chain_rows(grammar: Any, drafts: list[int], vocab_size: int) -> torch.Tensor:
    """The mask rows of one request's linear draft chain, as ``spec_utils.traverse_tree`` builds them
    (sglang/srt/speculative/spec_utils.py, ``traverse_tree`` / ``generate_token_bitmask``; a chain is
    ``GrammarTree.from_linear_chain``): row 0 after the committed tokens; draft ``j`` is accepted into
    the grammar only if row ``j`` allows it, then row ``j + 1`` is filled unless the grammar
    terminated; every accepted draft is rolled back, innermost first."""
    rows = grammar.allocate_vocab_mask(vocab_size, len(drafts) + 1, "cpu")
    walked = 0
    if not grammar.is_terminated():
        grammar.fill_vocab_mask(rows, 0)
        for j, t in enumerate(drafts):
            if t >= vocab_size or not (int(rows[j, t // 32]) >> (t % 32)) & 1:
                break
            grammar.accept_token(t)
            walked += 1
            if grammar.is_terminated():
                break
            grammar.fill_vocab_mask(rows, j + 1)
    for _ in range(walked):
        grammar.rollback(1)
    return rows


def accept(grammar: Any, tokens: list[int]) -> tuple[list[int], str | None]:
    """``BatchResultProcessor._accept_grammar_tokens``: accept the committed tokens, stopping after the
    one that terminates the grammar; a ``ValueError`` aborts the request (its message returned)."""
    kept: list[int] = []
    try:
        for t in tokens:
            grammar.accept_token(t)
            kept.append(t)
            if grammar.is_terminated():
                break
    except ValueError as e:
        return kept, str(e)
    return kept, None


def allowed(row: torch.Tensor | np.ndarray, vocab_size: int) -> np.ndarray:
    """The allowed ids of a bitmask row, as booleans over ``[0, vocab_size)``."""
    a = row.numpy() if isinstance(row, torch.Tensor) else row
    return np.unpackbits(np.ascontiguousarray(a).view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


def is_invalid(grammar: Any) -> bool:
    return isinstance(grammar, InvalidGrammarObject)


class Model:
    """A stand-in model: noise plus a strong wish for the next token of its script; once the mask has
    made it leave the script, it wishes to close what is open and stop (as in the vLLM test)."""

    def __init__(self, script: list[int], closers: list[int], seed: int) -> None:
        self.script, self.closers = script, closers
        self.rng = np.random.default_rng(seed)
        self.off_script = False

    def logits(self, out: list[int], width: int) -> torch.Tensor:
        x = torch.from_numpy(self.rng.normal(size=width).astype(np.float32))
        if not self.off_script and len(out) < len(self.script):
            x[self.script[len(out)]] += 30.0
        else:
            for bonus, t in zip((40.0, 30.0, 20.0, 10.0), self.closers):
                x[t] += bonus
        return x

    def pick(self, out: list[int], masked_logits: torch.Tensor) -> int:
        t = int(torch.argmax(masked_logits))
        if not self.off_script and (len(out) >= len(self.script) or t != self.script[len(out)]):
            self.off_script = True
        return t
