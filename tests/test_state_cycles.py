"""Automaton rules with cycles through several rules unfolded before a tool constraint compiles
(structured_output/compilation/state_cycles.py): xgrammar's excluded-string automata of the XML-parameter
formats and Kimi K3 take the shape xgrammar's cache can keep; the language never changes (random automata
on a byte vocabulary, and masks along random walks of real tool constraints on real vocabularies)."""

from __future__ import annotations

import json
import random

import pytest
import xgrammar as xgr

from thinkgate.structured_output.compilation._compile_worker import WARM_UP_TOOL_VALUES
from thinkgate.structured_output.compilation.rule_sharing import lex, read_rules, shared_grammar
from thinkgate.structured_output.compilation.state_cycles import unfold_state_cycles
from thinkgate.structured_output.compilation.xgrammar_adapter import GrammarBuilder, build_tokenizer_info
from thinkgate.structured_output import Constraint
from thinkgate.structured_output.tools import (build_tool_constraint, get_tool_format, list_tool_formats,
                                               tool_format_warm_up)
from thinkgate.structured_output.tools.template import ResponseTemplateFormat
from thinkgate.testing.vocabularies import FORMAT_VOCABULARY, byte_level_vocabulary, format_vocabulary

from support import assert_same_masks_along_walks

LIST_TOOL = {"type": "function", "function": {"name": "send", "parameters": {
    "type": "object", "properties": {"to": {"type": "array", "items": {"type": "string"}},
                                     "body": {"type": "string"}, "meta": {"type": "object"}},
    "required": ["to"]}}}


def _refs(ebnf: str) -> dict[str, set[str]]:
    names, bodies = read_rules(ebnf)
    known = set(names)
    return {n: {t for t in lex(b) if t in known} for n, b in zip(names, bodies)}


def _cycles_through_several(ebnf: str, prefix: str) -> bool:
    """Whether a rule named ``prefix...`` reaches itself through another rule."""
    refs = _refs(ebnf)
    for start in (n for n in refs if n.startswith(prefix)):
        seen, todo = set(), [r for r in refs[start] if r != start]
        while todo:
            n = todo.pop()
            if n == start:
                return True
            if n not in seen:
                seen.add(n)
                todo.extend(refs[n])
    return False


@pytest.mark.parametrize("exclude", ["</", "<|"])
def test_an_excluded_string_automaton_is_unfolded(exclude: str) -> None:
    tag = {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {
        "type": "array", "items": {"type": "string"}}, "max_whitespace_cnt": 4, "excludes": [exclude]}}
    text = str(xgr.Grammar.from_structural_tag(json.dumps(tag)))
    assert _cycles_through_several(text, "basic_string_sub_exclude")  # xgrammar's form: one rule per state
    out = unfold_state_cycles(text)
    assert not _cycles_through_several(out, "basic_string_sub_exclude")
    assert str(xgr.Grammar.from_ebnf(out))


def test_groups_of_other_shapes_are_left_alone() -> None:
    # "ab": the escape's hex digits can start the excluded text, so its states cycle among themselves
    tag = {"type": "structural_tag", "format": {"type": "json_schema", "json_schema": {"type": "string"},
                                                "excludes": ["ab"]}}
    text = str(xgr.Grammar.from_structural_tag(json.dumps(tag)))
    assert unfold_state_cycles(text) is text
    # a member reached from outside the group
    two_entries = 'root ::= ((a) | (b))\na ::= (("x" b) | ("y"))\nb ::= (("z" a) | ("w"))\n'
    assert unfold_state_cycles(two_entries) is two_entries
    plain = 'root ::= (("x" root) | ("y"))\n'
    assert unfold_state_cycles(plain) is plain


def _random_group(rng: random.Random) -> str:
    """A random automaton group that qualifies: the start ``s`` and members ``q0..qk`` where qi refers to
    itself, to ``s`` and to later members only, over the letters a-e."""
    k = rng.randint(1, 5)
    letters = "abcde"

    def term() -> str:
        return f'"{rng.choice(letters)}"' if rng.random() < 0.6 else \
            f"[{''.join(sorted(rng.sample(letters, rng.randint(1, 3))))}]"

    lines = []
    s_alts = ['("e")'] + [f"({term()} {rng.choice(['s', 'q0'])})" for _ in range(rng.randint(1, 3))]
    s_alts.append(f"({term()} q0)")
    lines.append(f"s ::= ({' | '.join(s_alts)})")
    for i in range(k):
        later = [f"q{j}" for j in range(i + 1, k)]
        alts = [f"({term()} s)"]
        for _ in range(rng.randint(0, 3)):
            alts.append(rng.choice([f"({term()})", f"({term()} q{i})", f"({term()} s)",
                                    *([f"({term()} {rng.choice(later)})"] if later else [])]))
        lines.append(f"q{i} ::= ({' | '.join(alts)})")
    return "root ::= ((\"<\" s))\n" + "\n".join(lines) + "\n"


def test_random_groups_keep_their_language() -> None:
    vocab = byte_level_vocabulary()
    info = build_tokenizer_info(vocab)
    comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    stop = next(iter(vocab.stop_token_ids))
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    unfolded = 0
    for case in range(40):
        text = _random_group(rng)
        out = unfold_state_cycles(text)
        if out is text:
            continue
        unfolded += 1
        assert not _cycles_through_several(out, "s"), f"seed {seed} case {case}"
        a = comp.compile_grammar(xgr.Grammar.from_ebnf(text))
        b = comp.compile_grammar(xgr.Grammar.from_ebnf(out))
        for _ in range(60):
            word = "<" + "".join(rng.choice("abcde") for _ in range(rng.randint(0, 8)))
            ma, mb = xgr.GrammarMatcher(a), xgr.GrammarMatcher(b)
            ok_a = all(ma.accept_token(vocab.token_id(ch)) for ch in word)
            ok_b = all(mb.accept_token(vocab.token_id(ch)) for ch in word)
            assert ok_a == ok_b, f"seed {seed} case {case}: {word!r}\n{text}\n{out}"
            if ok_a:  # and both may end there, or neither
                assert ma.accept_token(stop) == mb.accept_token(stop), f"seed {seed} case {case}: {word!r}"
    assert unfolded >= 20, f"seed {seed}: only {unfolded} of 40 groups qualified"


@pytest.mark.parametrize("fmt", ["qwen3_6", "minimax_m2", "kimi_k3"])
def test_masks_along_random_walks_equal_the_original_grammar(fmt: str) -> None:
    vocab = format_vocabulary(fmt)
    c = build_tool_constraint([LIST_TOOL], "required", format=fmt)
    grammar, _ = GrammarBuilder(vocab).build(c)
    shaped = shared_grammar(grammar)
    assert "_ret" in str(shaped), "the excluded strings were unfolded"
    comp = xgr.GrammarCompiler(build_tokenizer_info(vocab), max_threads=1, cache_enabled=False)
    a, b = comp.compile_grammar(grammar), comp.compile_grammar(shaped)
    quote_like = {t for t in range(vocab.vocab_size) if vocab.token_bytes[t] in (b'"', b'<', b'</', b'",', b'"]', b'\\')}
    # the characters the excluded-string automaton turns on, half of the time
    assert_same_masks_along_walks(a, b, vocab, walks=4, steps=120,
                                  prefer=lambda allowed: [int(t) for t in allowed if int(t) in quote_like])


def _json_value_options(tree, out: set) -> None:
    if isinstance(tree, dict):
        if tree.get("type") == "json_schema":
            out.add(json.dumps({k: v for k, v in tree.items() if k not in ("type", "json_schema")}, sort_keys=True))
        for v in tree.values():
            _json_value_options(v, out)
    elif isinstance(tree, list):
        for v in tree:
            _json_value_options(v, out)


def test_the_warm_up_covers_the_json_values_of_every_tool_format() -> None:
    warmed = {json.dumps(o, sort_keys=True) for o in WARM_UP_TOOL_VALUES}
    seen: dict[str, set[str]] = {}
    for fmt in list_tool_formats():
        if fmt not in FORMAT_VOCABULARY:
            continue
        vocab = format_vocabulary(fmt)
        # a format whose syntax its model's response template gives is built from the vocabulary
        from_template = isinstance(get_tool_format(fmt), ResponseTemplateFormat)
        c = build_tool_constraint([LIST_TOOL], "required", format=fmt, **({"vocabulary": vocab} if from_template else {}))
        if c is None or c.kind != "structural_tag":
            continue
        found: set = set()
        _json_value_options(json.loads(c.spec), found)
        for o in found:
            seen.setdefault(o, set()).add(fmt)
    assert seen, "no format writes JSON values"
    missing = {o: sorted(f) for o, f in seen.items() if o not in warmed}
    assert not missing, f"tool formats whose JSON values the warm-up does not cover: {missing}"


def _value_nodes(node, found: set) -> None:
    """The regex and free-text formats of a structural tag (a tool format's value shapes), as JSON text."""
    if isinstance(node, list):
        for x in node:
            _value_nodes(x, found)
    elif isinstance(node, dict):
        if node.get("type") in ("regex", "any_text"):
            found.add(json.dumps(node, sort_keys=True))
        for v in node.values():
            _value_nodes(v, found)


def test_a_tool_formats_warm_up_holds_the_value_shapes_of_its_tool_sets() -> None:
    """``tools.tool_format_warm_up``: for every format, its constraints hold every regex and free-text value shape
    that a tool set of strings, arrays of strings and objects writes (the rules a compiler started for the format
    has in its cache before the first request)."""
    for fmt in list_tool_formats():
        vocab = format_vocabulary(fmt) if fmt in FORMAT_VOCABULARY else None
        bound = {"vocabulary": vocab} if isinstance(get_tool_format(fmt), ResponseTemplateFormat) else {}
        warm = tool_format_warm_up(fmt, **bound)
        assert warm and all(isinstance(c, Constraint) for c in warm), fmt
        warmed: set = set()
        for c in warm:
            if c.kind == "structural_tag":
                _value_nodes(json.loads(c.spec), warmed)
        for choice in ("required", "auto"):
            c = build_tool_constraint([{**LIST_TOOL, "function": {**LIST_TOOL["function"], "strict": True}}], choice,
                                      format=fmt, **bound)
            if c is None or c.kind != "structural_tag":
                continue
            used: set = set()
            _value_nodes(json.loads(c.spec), used)
            assert used <= warmed, f"{fmt} {choice}: value shapes the warm-up lacks: {sorted(used - warmed)[:3]}"


def test_a_long_chain_of_automaton_rules_costs_a_bounded_walk() -> None:
    # a hostile structural tag can print as thousands of automaton rules that lead back to each other: every one
    # is a candidate start whose walk covers the whole chain, which would be quadratic; the pass stops within
    # its budget and leaves the text as it is
    import time

    n = 20_000
    chain = "root ::= ((r1))\n" + "".join(f'r{i} ::= (("a" r{i + 1}) | ("b" r{i - 1}) | ("c"))\n' for i in range(1, n)) + \
        f'r{n} ::= (("b" r{n - 1}) | ("c"))\nr0 ::= (("c"))\n'
    t0 = time.process_time()
    assert unfold_state_cycles(chain) is chain
    spent = time.process_time() - t0
    # about 16 visits per rule against 4e8 for the quadratic walk: a generous bound the latter cannot meet
    assert spent < 30, spent
