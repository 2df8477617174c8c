"""Tool constraints through xgrammar's compiler cache: the same masks as an uncached compile, the cache
used where the grammar survives its text round trip (and only there), tool sets that share tools sharing
the cached rules, and a thousand submits of one tool set compiling once."""

from __future__ import annotations

import json
import random
from concurrent.futures import wait
from pathlib import Path

import pytest
import torch
import xgrammar as xgr

from thinkgate.structured_output import Compiler, Constraint
from thinkgate.structured_output.compilation._compile_worker import cache_safe
from thinkgate.structured_output.tools import build_tool_constraint
from thinkgate.structured_output.compilation.xgrammar_adapter import GrammarBuilder
from thinkgate.testing.vocabularies import format_vocabulary

CORPUS = json.loads((Path(__file__).parent / "data" / "tools" / "corpus.json").read_text(encoding="utf-8"))
BASE_TOOLS = [e["tool"] for e in CORPUS["tools"] if "shapes" not in e]
STRICT_TOOLS = [{**t, "function": {**t["function"], "strict": True}} for t in BASE_TOOLS]  # auto constrains these


def _row(matcher: xgr.GrammarMatcher, words: int) -> torch.Tensor:
    bm = torch.zeros((1, words), dtype=torch.int32)
    matcher.fill_next_token_bitmask(bm, 0)
    return bm[0]


def _allowed(row: torch.Tensor) -> list[int]:
    ids = []
    for w, word in enumerate(row.tolist()):
        word &= 0xFFFFFFFF
        while word:
            low = word & -word
            ids.append(w * 32 + low.bit_length() - 1)
            word ^= low
    return ids


PUNCTUATION = ('"', "}", "]", ",", ":", ">", "<", "\n", " ", "0", "1", "true", "[", "{", "</")


def _walk_equal(a: xgr.CompiledGrammar, b: xgr.CompiledGrammar, vocab, words: int, seed: int,
                steps: int) -> int:
    """A random walk through two compiled forms of one grammar (tokens drawn from the rows, half of the
    time a punctuation token or a control token where one is allowed, so that walks leave strings, reach later
    arguments and later calls, and enter calls from free text); asserts their rows are equal at every step;
    returns the steps taken."""
    rng = random.Random(seed)
    punct = {vocab.token_id(p) for p in PUNCTUATION if vocab.token_id(p) is not None} | set(vocab.special_token_ids)
    ma, mb = xgr.GrammarMatcher(a), xgr.GrammarMatcher(b)
    for step in range(steps):
        ra, rb = _row(ma, words), _row(mb, words)
        assert torch.equal(ra, rb), f"seed {seed}: rows differ at step {step}"
        allowed = _allowed(ra)
        if not allowed or ma.is_terminated():
            return step
        closing = [t for t in allowed if t in punct]
        t = rng.choice(closing if closing and rng.random() < 0.5 else allowed)
        assert ma.accept_token(t) and mb.accept_token(t)
        if ma.is_terminated():
            assert mb.is_terminated()
            return step + 1
    return steps


def _same_rows(a, b, vocab, words: int, *, walks: int, steps: int) -> None:
    """Two compiled constraints of one grammar: the same first row, and the same rows along ``walks`` random walks
    (fresh seeds)."""
    assert (a.initial_mask == b.initial_mask).all()
    for seed in random.Random().sample(range(1 << 30), walks):
        _walk_equal(a.grammar, b.grammar, vocab, words, seed, steps=steps)


def _record_forms(comp: Compiler, forms: list[str]) -> None:
    """Have ``comp``'s parent append the form of each worker reply it decodes to ``forms``."""
    decode = comp._decoder.decode
    comp._decoder.decode = lambda constraint, reply, started: (forms.append(reply[0]),
                                                               decode(constraint, reply, started))[1]


# deepseek_v4, hy_v3, minimax_m2: raw values inside tags that end with text sit in a tag of their own
# (xgrammar_adapter._own_end), which takes the literal or token before it as its begin (an empty begin prints as
# "", which xgrammar's EBNF parser drops: the round-trip check drops it too, _compile_worker.drop_empty_in_sequences)
# "auto" (strict tools): free text, then calls after the trigger; where the trigger is a control token the grammar
# has a TokenTagDispatch, which xgrammar's parser moves into a rule of its own (_compile_worker.fold_dispatch_wrappers)
@pytest.mark.parametrize("choice", ["required", "auto"])
@pytest.mark.parametrize("fmt", ["hermes", "qwen3_6", "deepseek_v4", "hy_v3", "minimax_m2", "gemma4", "mistral"])
def test_tool_masks_through_the_cache_equal_an_uncached_compile(fmt, choice):
    vocab = format_vocabulary(fmt)
    comp = Compiler(vocab, num_threads=1, ship_compiled_max_bytes=0)  # the parent's cached recompile path
    try:
        c = build_tool_constraint(STRICT_TOOLS[:4], choice, format=fmt,
                                  **({"vocabulary": vocab} if fmt == "gemma4" else {}))
        ours = comp.compile(c, timeout=120).grammar
        grammar, _ = GrammarBuilder(vocab).build(c)
        assert cache_safe(c.kind, grammar)
        plain = xgr.GrammarCompiler(comp.tokenizer_info, max_threads=1, cache_enabled=False).compile_grammar(grammar)
        seeds = random.Random().sample(range(1 << 30), 4)  # fresh seeds each run; printed on failure
        for seed in seeds:
            _walk_equal(ours, plain, vocab, comp.num_words, seed, steps=120)
    finally:
        comp.close()


@pytest.mark.parametrize("fmt", ["deepseek_v4", "hy_v3", "minimax_m2"])
def test_raw_values_own_tags_take_the_literal_before_them_as_begin(fmt, monkeypatch):
    """The merged form (the literal or token before a raw value as its own tag's begin) has the masks of
    the unmerged one, along random walks (fresh seeds)."""
    from thinkgate.structured_output.compilation import xgrammar_adapter

    vocab = format_vocabulary(fmt)
    c = build_tool_constraint(BASE_TOOLS[:4], "required", format=fmt)
    merged, _ = GrammarBuilder(vocab).build(c)
    assert cache_safe(c.kind, merged)
    monkeypatch.setattr(xgrammar_adapter, "_begin_own_ends", lambda elements: elements)
    unmerged, _ = GrammarBuilder(vocab).build(c)
    assert cache_safe(c.kind, unmerged)  # its empty begins print as "", which the parser drops beside other elements
    info = xgrammar_adapter.build_tokenizer_info(vocab)
    compiler = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    a, b = compiler.compile_grammar(merged), compiler.compile_grammar(unmerged)
    words = (vocab.logits_width + 31) // 32
    for seed in random.Random().sample(range(1 << 30), 4):
        _walk_equal(a, b, vocab, words, seed, steps=120)


def test_a_grammar_that_does_not_survive_the_round_trip_compiles_uncached(qwen_vocab):
    tag = Constraint.structural_tag({"type": "any_tokens"})
    grammar, _ = GrammarBuilder(qwen_vocab).build(tag)
    assert not cache_safe(tag.kind, grammar)
    assert not cache_safe("regex", xgr.Grammar.from_regex("a+"))
    assert cache_safe("json_schema", xgr.Grammar.from_json_schema('{"type": "object"}'))
    comp = Compiler(qwen_vocab, num_threads=1, ship_compiled_max_bytes=0)
    try:
        assert comp.wait_ready(120)
        warm = comp._decoder.xgr_cached.get_cache_size_bytes()  # the start-up's JSON rules
        assert warm > 0
        m = xgr.GrammarMatcher(comp.compile(tag, timeout=60).grammar)
        assert m.accept_token(qwen_vocab.token_id("<tool_call>"))
        assert comp._decoder.xgr_cached.get_cache_size_bytes() == warm  # compiled uncached
    finally:
        comp.close()


def test_a_token_dispatch_survives_the_round_trip_once_the_parsers_wrapper_is_folded(qwen_vocab):
    """xgrammar's parser moves a TokenTagDispatch out of the rule it was written in (``r ::= ((r_1))``): a strict
    ``auto`` tool constraint's text then reads back as another serialized grammar with the same language. Its rules
    match once that wrapper is folded back, so it goes through xgrammar's cache, as does an empty literal the parser
    drops beside other elements of a sequence; a choice of an empty literal keeps it."""
    from thinkgate.structured_output.compilation._compile_worker import drop_empty_in_sequences, fold_dispatch_wrappers
    from thinkgate.structured_output.compilation.rule_sharing import read_rules

    c = build_tool_constraint(STRICT_TOOLS[:2], "auto", format="qwen3_6")
    grammar, _ = GrammarBuilder(qwen_vocab).build(c)
    text = str(grammar)
    back = xgr.Grammar.from_ebnf(text)
    assert back.serialize_json() != grammar.serialize_json()  # the wrapper
    names, bodies = read_rules(text)
    assert len(read_rules(str(back))[0]) == len(names) + 1
    assert fold_dispatch_wrappers(str(back), frozenset(names)) == (names, bodies)
    assert cache_safe(c.kind, grammar)
    dispatch = {"type": "token_triggered_tags", "trigger_tokens": ["<tool_call>"], "tags": [
        {"type": "tag", "begin": {"type": "token", "token": "<tool_call>"},
         "content": {"type": "const_string", "value": "x"}, "end": {"type": "token", "token": "</tool_call>"}}]}
    assert cache_safe("structural_tag", GrammarBuilder(qwen_vocab).build(Constraint.structural_tag(dispatch))[0])
    dropped = {"type": "sequence", "elements": [
        {"type": "tag", "begin": "", "content": {"type": "const_string", "value": "b"}, "end": ""}, dispatch]}
    assert cache_safe("structural_tag", GrammarBuilder(qwen_vocab).build(Constraint.structural_tag(dropped))[0])
    assert drop_empty_in_sequences('(("" a "b"))') == '((a "b"))'
    assert drop_empty_in_sequences('((a "" "b"))') == drop_empty_in_sequences('((a "b" ""))') == '((a "b"))'
    for kept in ('(("" | "a"))', '(("a" | ""))', '((""))', '((a "" | b))', '(("\\"" b))'):
        assert drop_empty_in_sequences(kept) == kept


def test_tool_sets_that_share_tools_share_the_cached_rules(qwen_vocab):
    comp = Compiler(qwen_vocab, num_threads=1, ship_compiled_max_bytes=0)
    try:
        cache = comp._decoder.xgr_cached
        assert comp.wait_ready(120)
        warm = cache.get_cache_size_bytes()  # the start-up's JSON rules
        comp.compile(build_tool_constraint(BASE_TOOLS[:6], "required", format="hermes"), timeout=120)
        first = cache.get_cache_size_bytes() - warm
        assert first > 0  # the tool constraint went through xgrammar's cache
        comp.compile(build_tool_constraint(BASE_TOOLS[1:7], "required", format="hermes"), timeout=120)
        # one tool new: its rules are added, the five shared ones are not compiled again
        assert first < cache.get_cache_size_bytes() - warm < 2 * first
    finally:
        comp.close()


def test_a_compiler_started_for_a_tool_format_has_its_call_syntax_cached(qwen_vocab):
    """``warm_up``: the format's call syntax compiled at start-up, in the parent (below) and in each worker
    (the same function, given the settings the pool sends): the first tool set of the format then adds only its
    own tools' rules to the cache, with the same rows."""
    from thinkgate.structured_output.compilation._compile_worker import _compilers
    from thinkgate.structured_output.tools import tool_format_warm_up

    warm_up = tool_format_warm_up("qwen3_coder")
    assert [c.kind for c in warm_up] == ["structural_tag", "structural_tag"]  # required and auto
    tools = build_tool_constraint(BASE_TOOLS[:4], "required", format="qwen3_coder")
    plain, warmed = Compiler(qwen_vocab, num_threads=1), Compiler(qwen_vocab, num_threads=1, warm_up=warm_up)
    try:
        assert plain.wait_ready(120) and warmed.wait_ready(120)
        assert warmed._pool._settings["warm_up"] == warm_up
        grew = []
        for comp in (plain, warmed):
            cache = comp._decoder.xgr_cached
            before = cache.get_cache_size_bytes()
            grew.append((before, comp.compile(tools, timeout=120), cache.get_cache_size_bytes() - before))
        (start_plain, a, grew_plain), (start_warm, b, grew_warm) = grew
        assert start_warm > start_plain and grew_warm < grew_plain
        _same_rows(a, b, qwen_vocab, plain.num_words, walks=2, steps=60)
    finally:
        plain.close()
        warmed.close()
    builder = GrammarBuilder(qwen_vocab)
    settings = {"num_threads": 1, "xgrammar_cache_bytes": 64 << 20}
    sizes = [_compilers(plain.tokenizer_info, builder, {**settings, "warm_up": extra}, True)[1].get_cache_size_bytes()
             for extra in ((), warm_up)]
    assert sizes[1] > sizes[0]


def test_warm_up_takes_constraints_and_skips_one_that_fails(qwen_vocab):
    for bad in (build_tool_constraint(BASE_TOOLS[:1], "required", format="hermes"), "hermes", [{"type": "any_text"}]):
        with pytest.raises(ValueError, match="warm_up"):
            Compiler(qwen_vocab, num_threads=1, warm_up=bad)
    broken = Constraint.structural_tag({"type": "no_such_format"})
    comp = Compiler(qwen_vocab, num_threads=1, warm_up=[broken, Constraint.regex("a+")])
    try:
        assert comp.wait_ready(120)
        assert comp.compile(Constraint.json_schema({"type": "integer"}), timeout=60) is not None
        with pytest.raises(ValueError):
            comp.compile(broken, timeout=60)  # its own compile reports it
    finally:
        comp.close()


def test_a_thousand_submits_of_one_tool_set_compile_once(qwen_vocab):
    comp = Compiler(qwen_vocab, num_threads=2)
    try:
        futs = [comp.submit(build_tool_constraint(json.loads(json.dumps(BASE_TOOLS[:5])), "required",
                                                  format="hermes")) for _ in range(1000)]
        wait(futs, timeout=120)
        assert len({id(f.result()) for f in futs}) == 1
        s = comp.stats
        assert s.compiles == 1 and s.cache_hits + s.joins == 999 and s.failures == 0
    finally:
        comp.close()


def test_sequential_compiles_run_on_the_worker_that_finished_last(qwen_vocab):
    """Its xgrammar cache holds the last tool set's rules (standing workers are woken last-idle first)."""
    comp = Compiler(qwen_vocab, num_threads=2)
    try:
        assert comp.wait_ready(120)
        pool = comp._pool
        pids: list[int] = []
        run = pool._run
        pool._run = lambda proc, job: (pids.append(proc.pid), run(proc, job))[1]
        for i in range(6):
            comp.compile(Constraint.json_schema({"type": "object", "properties": {f"k{i}": {"type": "integer"}}}),
                         timeout=60)
        assert len(pids) == 6 and len(set(pids)) == 1, pids
        assert len(comp.worker_pids()) == 2  # the other one stands by for concurrent jobs
    finally:
        comp.close()


def test_a_text_that_does_not_round_trip_is_replaced_by_the_grammar_as_built(qwen_vocab, monkeypatch):
    """The worker compiles a structural tag's text before it checks the round trip, and the parent decodes that
    reply meanwhile; where the check fails, the worker's next reply (the grammar as built, uncached) is the one the
    compile returns. No structural tag thinkgate builds fails the check today, so each side is driven alone: the
    worker's steps with the check made to fail, and the parent given that reply in place of ``("verified",)``."""
    from thinkgate.structured_output.compilation import _compile_worker
    from thinkgate.structured_output.compilation.xgrammar_adapter import build_tokenizer_info

    c = Constraint.structural_tag({"type": "tag", "begin": "", "content": {"type": "any_text"}, "end": "x"})
    builder = GrammarBuilder(qwen_vocab)
    info = build_tokenizer_info(qwen_vocab)
    plain = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    cached = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=True)
    settings = {"ship_compiled_max_bytes": 0, "recompile_max_s": 30.0}
    assert [r[0] for r in _compile_worker.compile_steps(builder, plain, c, settings, cached)] == ["unverified",
                                                                                                 "verified"]
    monkeypatch.setattr(_compile_worker, "round_trips", lambda text, grammar: False)
    steps = list(_compile_worker.compile_steps(builder, plain, c, settings, cached))
    assert [r[0] for r in steps] == ["unverified", "grammar"] and steps[1][4] is False  # compiled uncached
    # the parent's side: a replacement that is another grammar, so that the rows show which reply was kept
    other = Constraint.structural_tag({"type": "const_string", "value": "zebra"})
    replacement = list(_compile_worker.compile_steps(builder, plain, other, settings, cached))[1]
    assert replacement[0] == "grammar"
    monkeypatch.undo()
    comp = Compiler(qwen_vocab, num_threads=1)
    try:
        pool = comp._pool
        receive = pool._receive
        pool._receive = lambda proc, job: (lambda m: replacement if m[0] == "verified" else m)(receive(proc, job))
        forms: list[str] = []
        _record_forms(comp, forms)
        got = comp.compile(c, timeout=120)
        assert forms == ["text", "grammar"]
        grammar, _ = builder.build(other)
        for seed in random.Random().sample(range(1 << 30), 2):
            _walk_equal(got.grammar, plain.compile_grammar(grammar), qwen_vocab, comp.num_words, seed, steps=40)
        # and a tool constraint's text is verified: one reply decoded
        pool._receive = receive
        forms.clear()
        comp.compile(build_tool_constraint(BASE_TOOLS[:2], "required", format="hermes"), timeout=120)
        assert forms == ["text"]
    finally:
        comp.close()


@pytest.mark.parametrize("make", [
    lambda: Constraint.json_schema({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
                                    "required": ["a"]}),
    lambda: build_tool_constraint(BASE_TOOLS[:3], "required", format="hermes"),
])
def test_shipped_and_recompiled_grammars_give_the_same_rows(qwen_vocab, make):
    """The two ways home (the compiled grammar shipped as JSON, or the grammar compiled again in the parent)
    give the same rows; the default takes the second."""
    c = make()
    ship = Compiler(qwen_vocab, num_threads=1, ship_compiled_max_bytes=1 << 40)
    again = Compiler(qwen_vocab, num_threads=1)
    try:
        forms: list[str] = []
        for comp in (ship, again):
            _record_forms(comp, forms)
        a, b = ship.compile(c, timeout=120), again.compile(c, timeout=120)
        assert forms == ["compiled", "text"]
        _same_rows(a, b, qwen_vocab, ship.num_words, walks=3, steps=60)
    finally:
        ship.close()
        again.close()
