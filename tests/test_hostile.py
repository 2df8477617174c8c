"""Hostile requests in a crowd, with random variations (hypothesis).

One manager, one step loop, benign requests beside hostile ones drawn from the classes a hostile
client or a broken engine can send: invalid schemas, regexes and grammars (random names), constraints
that accept nothing, an external ``$ref``, a constraint that cannot be sent to a compile worker, a
schema keyword the grammar cannot enforce with a violating output, a token the grammar rejects, and
malformed engine input (floats, bools, strings, out-of-range ids in a schedule or a commit). Each
step checks the promise whole:

- every benign request's row equals the row a fresh xgrammar matcher gives after the same tokens,
  and its output terminates;
- every hostile request ends in ``ERROR`` with a message naming its cause, and gets no row;
- malformed engine input is a ``ValueError`` naming the request, and nothing moves: the next step's
  rows are the reference rows.

Each class also has its own tests with its own random variations: ``test_hostile_manager.py`` (buffer
rows, fills that fail), ``test_hostile_compile.py`` (slow compiles, exit), ``test_hostile_tools.py``
(marker text spelled with ordinary tokens), ``test_reasoning_stream_text.py``, ``test_schema_support.py``
and ``test_kernels.py`` (duplicate indices).
"""

from __future__ import annotations

import string
import time

import numpy as np
import pytest
import torch
import xgrammar as xgr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from thinkgate.structured_output import Compiler, Constraint, RequestStatus, StructuredOutputManager
from thinkgate.structured_output.compilation.constraints import MAX_NESTING_DEPTH
from thinkgate.structured_output.compilation.schema_support import new_matcher

SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}},
          "required": ["a"]}
BENIGN = [
    (Constraint.json_schema(SCHEMA), ['{"a": 1, "b": "x"}', '{"a": -12}', '{ "a": 7 }']),
    (Constraint.regex(r"[a-z]{1,3}( [0-9]{1,2})?"), ["ab 7", "xyz", "q"]),
    (Constraint.choice(["yes", "no", "maybe"]), ["yes", "maybe"]),
]
NAMES = st.text(alphabet=string.ascii_letters, min_size=3, max_size=10)
JSON_TYPES = {"string", "number", "integer", "object", "array", "boolean", "null"}


class _Local(str):
    """JSON-serialisable (the cache key can be built), but a local-looking class pickle cannot find."""


_Local.__qualname__ = "nowhere.<locals>.Local"


@st.composite
def hostile(draw):
    """(kind, constraint, output text or None, words its ERROR message must hold)."""
    kind = draw(st.sampled_from(["invalid_schema", "invalid_regex", "undefined_rule", "accepts_nothing",
                                 "dead_end", "external_ref", "unpicklable", "unenforced_keyword", "bad_token"]))
    name = draw(NAMES)
    if kind == "invalid_schema":
        name = draw(NAMES.filter(lambda n: n not in JSON_TYPES))
        return kind, Constraint.json_schema({"type": "object", "properties": {"k": {"type": name}}}), None, [name]
    if kind == "invalid_regex":
        return kind, Constraint.regex("(" * draw(st.integers(1, 5)) + name), None, ["regex"]
    if kind == "undefined_rule":
        return kind, Constraint.grammar(f"root ::= {name}"), None, [name, "not defined"]
    if kind == "accepts_nothing":
        c = draw(st.sampled_from([Constraint.grammar(f"root ::= {name}\n{name} ::= {name}"),
                                  Constraint.regex(r"[^\s\S]" * draw(st.integers(1, 4)))]))
        return kind, c, None, ["accepts no output"]
    if kind == "dead_end":  # accepts its first tokens, then nothing
        return kind, Constraint.regex(name + r"[^\s\S]"), name, ["accepts no output"]
    if kind == "external_ref":
        url = f"https://example.com/{name}.json"
        return kind, Constraint.json_schema({"type": "object", "properties": {"x": {"$ref": url}}}), None, [url]
    if kind == "unpicklable":
        return kind, Constraint("regex", "[a-z]+", options=(("label", _Local(name)),)), None, ["cannot be sent"]
    if kind == "unenforced_keyword":
        n = draw(st.integers(0, 99))
        schema = {"type": "array", "items": {"type": "integer"}, "uniqueItems": True}
        return kind, Constraint.json_schema(schema), f"[{n}, {n}]", ["'uniqueItems'"]
    return kind, Constraint.json_schema(SCHEMA), '{"a": 1', ["is not allowed by the json_schema constraint"]


MALFORMED = [3.0, True, "7", np.float32(2), -1, 10**9, None]


@pytest.fixture(scope="module")
def comp(qwen_vocab):
    c = Compiler(qwen_vocab, num_threads=2, max_workers=4)
    yield c
    c.close()


def _row(matcher: xgr.GrammarMatcher, num_words: int) -> np.ndarray | None:
    out = torch.empty((1, num_words), dtype=torch.int32)
    matcher.fill_next_token_bitmask(out, 0)
    row = out[0].numpy().copy()
    return None if np.all(row == -1) else row


def _allows(row: np.ndarray, token: int) -> bool:
    return bool((int(row[token >> 5]) >> (token & 31)) & 1)


@settings(deadline=None, max_examples=12, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_hostile_requests_in_a_crowd_hurt_only_themselves(qwen_vocab, comp, data):
    v = qwen_vocab
    num_words = (v.logits_width + 31) // 32
    end = v.token_id("<|im_end|>")
    mgr = StructuredOutputManager(v, "qwen3", compiler=comp, max_num_seqs=16, num_speculative_tokens=1,
                                  num_fill_threads=data.draw(st.sampled_from([1, 2]), label="fill threads"),
                                  batch_fill_min_rows=data.draw(st.sampled_from([1, 64]), label="batch min"))
    reqs: dict[str, dict] = {}
    for i in range(data.draw(st.integers(1, 4), label="benign")):
        c, outputs = data.draw(st.sampled_from(BENIGN))
        text = data.draw(st.sampled_from(outputs))
        reqs[f"ok{i}"] = {"c": c, "script": v.encode(text) + [end], "words": None, "kind": "benign"}
    for i in range(data.draw(st.integers(1, 5), label="hostile")):
        kind, c, text, words = data.draw(hostile())
        script = None if text is None else v.encode(text)
        if kind == "unenforced_keyword":
            script.append(end)
        reqs[f"bad{i}"] = {"c": c, "script": script, "words": words, "kind": kind}
    order = data.draw(st.permutations(sorted(reqs)), label="arrival")
    for rid in order:
        mgr.add_request(rid, reqs[rid]["c"], include_reasoning=False)
    t0 = time.monotonic()
    while not all(mgr.is_compiled(r) for r in reqs):
        assert time.monotonic() - t0 < 60, "compiles did not settle"
        time.sleep(0.002)
    refs = {}
    for rid, r in reqs.items():
        r["pos"] = 0
        if mgr.status(rid) is RequestStatus.CONSTRAINED:
            refs[rid] = new_matcher(comp.compile(r["c"]))  # the compiled constraint's own matcher (its whitespace bound)

    def check_rows(schedule):
        batch = mgr.grammar_bitmask(schedule)
        got = {} if batch is None else dict(zip(batch.request_ids, (batch.bitmask[j].numpy().copy()
                                                                     for j in range(len(batch.request_ids)))))
        for rid in schedule:
            if mgr.status(rid) is RequestStatus.CONSTRAINED:
                want = _row(refs[rid], num_words)
                assert (rid in got) == (want is not None), rid
                if want is not None:
                    assert np.array_equal(got[rid], want), rid
            elif mgr.status(rid) is RequestStatus.ERROR:
                assert rid not in got, rid
        return got

    for _step in range(40):
        live = [rid for rid in order if mgr.status(rid) is RequestStatus.CONSTRAINED]
        if not live:
            break
        schedule = data.draw(st.permutations(order), label="schedule")  # errored ones stay scheduled
        if data.draw(st.booleans(), label="malformed step"):
            victim = data.draw(st.sampled_from(schedule))
            bad = data.draw(st.sampled_from(MALFORMED))
            broken = [(rid, [bad]) if rid == victim else rid for rid in schedule]
            with pytest.raises(ValueError, match=repr(victim)):
                mgr.grammar_bitmask(broken)
            if mgr.status(victim) is not RequestStatus.ERROR:
                with pytest.raises(ValueError, match=repr(victim)):
                    mgr.accept_tokens(victim, [bad])
        got = check_rows(schedule)
        for rid in live:
            r = reqs[rid]
            if mgr.status(rid) is not RequestStatus.CONSTRAINED:  # a dead end found by this fill
                assert r["kind"] == "dead_end" and r["pos"] == len(r["script"]), (rid, mgr.error(rid))
                continue
            if r["kind"] == "bad_token" and r["pos"] == len(r["script"]):
                banned = next(t for t in v.encode("x}]") if not _allows(got[rid], t))
                res = mgr.accept_tokens(rid, [banned])
                assert res.status == "error" and str(banned) in res.message
                continue
            n = data.draw(st.integers(1, 4), label="commit")
            tokens = r["script"][r["pos"]:r["pos"] + n]
            res = mgr.accept_tokens(rid, tokens)
            r["pos"] += len(tokens)
            for t in tokens:
                assert refs[rid].accept_token(t), (rid, t)
            if r["pos"] == len(r["script"]) and r["kind"] == "dead_end":
                assert res.status in ("ok", "error"), (rid, res)  # found now, or by the next fill
            elif r["pos"] == len(r["script"]) and r["kind"] != "bad_token":
                assert res.status == ("error" if r["kind"] == "unenforced_keyword" else "terminated"), (rid, res)
            else:
                assert res.status == "ok", (rid, res)

    for rid, r in reqs.items():
        if r["kind"] == "benign":
            assert mgr.status(rid) is RequestStatus.TERMINATED, (rid, mgr.error(rid))
        else:
            assert mgr.status(rid) is RequestStatus.ERROR, (rid, r["kind"])
            message = mgr.error(rid)
            for w in r["words"]:
                assert w in message, (r["kind"], w, message)
            assert mgr.accept_tokens(rid, [end]).status == "error"
    mgr.close()


@settings(deadline=None, max_examples=20)
@given(depth=st.integers(MAX_NESTING_DEPTH + 1, 5 * MAX_NESTING_DEPTH),
       shape=st.sampled_from(["object", "array", "anyOf"]), as_text=st.booleans())
def test_nesting_past_the_limit_is_a_value_error_naming_it(depth, shape, as_text):
    """Deep nesting, built as objects or as JSON text: a ValueError naming the limit, before any
    request exists (never a RecursionError)."""
    schema: object = {"type": "integer"}
    for _ in range(depth):
        schema = {"object": lambda s: {"type": "object", "properties": {"a": s}},
                  "array": lambda s: {"type": "array", "items": s},
                  "anyOf": lambda s: {"anyOf": [s]}}[shape](schema)
    if as_text:
        import json
        import sys
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(max(limit, 4 * depth + 100))
        try:
            schema = json.dumps(schema)
        finally:
            sys.setrecursionlimit(limit)
    with pytest.raises(ValueError, match="MAX_NESTING_DEPTH"):
        Constraint.json_schema(schema)
