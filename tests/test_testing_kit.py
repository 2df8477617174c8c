"""The public testing kit (``thinkgate.testing``): replaying synthetic token streams through the manager, and
cutting streams into deltas."""

from __future__ import annotations

import random

import pytest

from thinkgate import Constraint, StructuredOutputManager
from thinkgate.testing import byte_level_vocabulary, cut, random_cuts, replay, wait_compiled


@pytest.fixture(scope="module")
def vocab():
    return byte_level_vocabulary(["<|end|>", "<think>", "</think>"], stop_tokens=["<|end|>"], logits_width=288)


@pytest.fixture(scope="module")
def mgr(vocab):
    with StructuredOutputManager(vocab, "qwen3", max_num_seqs=4, num_compile_threads=1) as m:
        yield m


def _add(mgr, rid: str) -> None:
    mgr.add_request(rid, Constraint.regex("[a-c]{2,4}"), [])
    wait_compiled(mgr, rid)


def test_a_valid_stream_terminates_and_its_thinking_is_never_masked(mgr, vocab) -> None:
    _add(mgr, "ok")
    ids = vocab.encode("<think>{not: json} ]]</think>abc") + [min(vocab.stop_token_ids)]
    r = replay(mgr, "ok", ids)
    mgr.remove_request("ok")
    assert (r.status, r.accepted, r.disagreement) == ("terminated", len(ids), None)


def test_the_first_token_the_grammar_refuses_is_named_by_its_index(mgr, vocab) -> None:
    _add(mgr, "bad")
    ids = vocab.encode("<think>x</think>abz") + [min(vocab.stop_token_ids)]
    r = replay(mgr, "bad", ids)
    mgr.remove_request("bad")
    assert r.status == "error" and r.accepted == ids.index(vocab.encode("z")[0]) and r.disagreement is None
    assert "z" in (r.message or "")


def test_tokens_after_the_stop_are_not_fed(mgr, vocab) -> None:
    _add(mgr, "stop")
    stop = min(vocab.stop_token_ids)
    ids = vocab.encode("<think></think>ab") + [stop] + vocab.encode("zz")
    r = replay(mgr, "stop", ids)
    mgr.remove_request("stop")
    assert r.status == "terminated" and r.accepted == ids.index(stop) + 1


def test_random_cuts_give_deltas_that_join_to_the_stream() -> None:
    for seed in random.SystemRandom().sample(range(1 << 30), 20):
        rng = random.Random(seed)
        ids = list(range(rng.randint(0, 60)))
        cuts = random_cuts(len(ids), rng, max_delta=rng.randint(1, 9))
        parts = cut(ids, cuts)
        assert [t for p in parts for t in p] == ids, seed
        assert all(p for p in parts), seed
    with pytest.raises(ValueError, match="max_delta"):
        random_cuts(5, random.Random(0), max_delta=0)


class _Disagreeing:
    """A manager stand-in whose mask allows every token while its grammar rejects token 7."""

    class vocabulary:  # noqa: N801
        decode = staticmethod(lambda ids: "".join(map(str, ids)))

    def grammar_bitmask(self, schedule):
        import torch

        from thinkgate.structured_output.step.manager import BitmaskBatch
        return BitmaskBatch(bitmask=torch.full((1, 1), -1, dtype=torch.int32), logits_indices=torch.zeros(1),
                            request_ids=list(schedule), num_logits_rows=1)

    def accept_tokens(self, rid, ids):
        from thinkgate.structured_output.step.manager import AcceptResult
        return AcceptResult("error", "rejected") if ids == [7] else AcceptResult("ok")


def test_a_token_the_mask_allows_but_the_grammar_rejects_is_reported() -> None:
    r = replay(_Disagreeing(), "r", [1, 2, 7, 3])  # type: ignore[arg-type]
    assert (r.status, r.accepted, r.disagreement) == ("error", 2, 2)
    assert "allowed by the mask" in (r.message or "")
