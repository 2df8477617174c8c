"""pytest-benchmark micro-benchmarks of the hot calls of a step (besides the kernels' own in
test_kernels_microbench.py). The default run (``--benchmark-disable``) executes each once as a test;
``python -m pytest tests/test_microbench.py --benchmark-enable`` times them."""

from __future__ import annotations

import pytest

from thinkgate.reasoning import get_reasoning_parser
from thinkgate.structured_output import Constraint, StructuredOutputManager

SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"]}


@pytest.fixture(scope="module")
def qwen_manager(qwen_vocab):
    mgr = StructuredOutputManager(qwen_vocab, "qwen3", max_num_seqs=16)
    prompt = qwen_vocab.encode("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    for i in range(16):
        mgr.add_request(f"r{i}", Constraint.json_schema(SCHEMA), prompt,
                        chat_template_kwargs={"enable_thinking": False})
    for i in range(16):
        mgr.compiler.compile(Constraint.json_schema(SCHEMA))
        while not mgr.is_compiled(f"r{i}"):
            pass
    yield mgr
    mgr.close()


def test_grammar_bitmask_batch16(benchmark, qwen_manager):
    """Fill 16 rows at the start of a JSON object (no drafts)."""
    batch = benchmark(qwen_manager.grammar_bitmask, [f"r{i}" for i in range(16)])
    assert batch is not None and len(batch) == 16
    first = qwen_manager.vocabulary.encode('{"')[0]
    word, bit = divmod(first, 32)
    assert all((int(batch.bitmask[r, word]) >> bit) & 1 for r in range(16))


def test_accept_and_rollback_one_token(benchmark, qwen_vocab):
    """accept_tokens for one content token: the per-token cost of committing (a fresh request per round)."""
    mgr = StructuredOutputManager(qwen_vocab, None, max_num_seqs=1)
    tok = qwen_vocab.encode('{"')
    n = [0]

    def setup():
        n[0] += 1
        rid = f"a{n[0]}"
        mgr.add_request(rid, Constraint.json_schema(SCHEMA))
        while not mgr.is_compiled(rid):
            pass
        return (rid,), {}

    def run(rid):
        res = mgr.accept_tokens(rid, tok)
        mgr.remove_request(rid)
        return res

    res = benchmark.pedantic(run, setup=setup, rounds=20)
    assert res.status == "ok"
    mgr.close()


@pytest.mark.parametrize("family", ["qwen3", "granite"])
def test_tracker_advance_one_token(benchmark, qwen_vocab, family):
    """One thinking token through the engine-core tracker (must not grow with the output so far)."""
    parser = get_reasoning_parser(family)(qwen_vocab, {"thinking": True, "enable_thinking": True})
    prompt = qwen_vocab.encode("<|im_start|>assistant\n<think>\n" if family == "qwen3" else "<|start_of_role|>assistant<|end_of_role|>")
    tracker = parser.new_tracker(prompt)
    if family == "granite":  # Granite writes its own start marker
        tracker.advance(qwen_vocab.encode("Here is my thought process:"))
    tok = qwen_vocab.encode(" thinking")
    benchmark(tracker.advance, tok)
    assert not tracker.ended
