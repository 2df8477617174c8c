"""Equal rules merged before a tool constraint compiles (structured_output/compilation/rule_sharing.py):
the merge is exact on hand-written grammars, and on real tool constraints every mask along random walks
equals the unmerged grammar's."""

from __future__ import annotations


import pytest
import xgrammar as xgr

from thinkgate.structured_output.compilation._compile_worker import compile_steps
from thinkgate.structured_output.compilation.rule_sharing import share_equal_rules, shared_grammar
from thinkgate.structured_output.compilation.xgrammar_adapter import GrammarBuilder, build_tokenizer_info
from thinkgate.structured_output.tools import build_tool_constraint
from thinkgate.testing.vocabularies import format_vocabulary

from support import assert_same_masks_along_walks

CORPUS_TOOLS = [
    {"type": "function", "function": {"name": f"tool_{i}", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}, "note": {"type": "string"},
                                         "n": {"type": "integer"}, "mode": {"enum": ["a", "b"]}},
        "required": ["text"]}}} for i in range(4)]


def rules(ebnf: str) -> dict[str, str]:
    return dict(line.split(" ::= ", 1) for line in ebnf.splitlines() if line)


def test_copies_of_a_recursive_rule_become_one() -> None:
    text = ('root ::= ((a "," b))\n'
            'a ::= ("" | ("x" a))\n'
            'b ::= ("" | ("x" b))\n')
    out = rules(share_equal_rules(text))
    assert out == {"root": '((a "," a))', "a": '("" | ("x" a))'}


def test_rules_that_differ_below_stay_apart() -> None:
    text = ('root ::= ((a b))\n'
            'a ::= (("x" c))\n'
            'b ::= (("x" d))\n'
            'c ::= (("y"))\n'
            'd ::= (("z"))\n')
    assert share_equal_rules(text) is text


def test_mutually_recursive_copies_merge_and_cycles_of_different_length_do_not() -> None:
    text = ('root ::= ((p q r))\n'
            'p ::= (("(" p2 ")") | "")\n'
            'p2 ::= (("[" p "]"))\n'
            'q ::= (("(" q2 ")") | "")\n'
            'q2 ::= (("[" q "]"))\n'
            'r ::= (("(" r2 ")") | "")\n'
            'r2 ::= (("[" r3 "]"))\n'
            'r3 ::= (("(" r2 ")") | "")\n')
    out = rules(share_equal_rules(text))
    # q, q2 merge into p, p2; r is the same language but r2 -> r3 is a different rule graph: r3 merges
    # with p (both "(" X ")" | "" where X ~ p2 ~ r2), and then r too
    assert out["root"] == "((p p p))"
    assert set(out) == {"root", "p", "p2"}


def test_names_inside_strings_and_classes_are_text() -> None:
    text = ('root ::= ((a b "a b" [a\\]b]))\n'
            'a ::= (("a"))\n'
            'b ::= (("a"))\n')
    assert rules(share_equal_rules(text)) == {"root": '((a a "a b" [a\\]b]))', "a": '(("a"))'}


def test_names_with_dashes_and_dots_are_read_as_xgrammar_reads_them() -> None:
    """xgrammar's EBNF names take ``-`` and ``.`` (it prints ``defs_my-type.v`` for a ``$defs`` key): such rules are
    read and merged, while ``-1`` in a repetition or a decimal point stays text."""
    text = ('root ::= ((defs_a-b.v defs_c-d.v x{0, -1}))\n'
            'defs_a-b.v ::= (("1.5"))\n'
            'defs_c-d.v ::= (("1.5"))\n'
            'x ::= (("-"))\n')
    assert rules(share_equal_rules(text)) == {"root": '((defs_a-b.v defs_a-b.v x{0, -1}))', "defs_a-b.v": '(("1.5"))',
                                              "x": '(("-"))'}


def test_a_tool_whose_defs_keys_have_dashes_and_dots_merges_and_keeps_its_masks() -> None:
    """A tool's ``$defs`` key with ``-`` and ``.``: its grammar is merged (its two references to one definition were
    left apart before), it survives the worker's round-trip check, and its masks equal the grammar as built."""
    from thinkgate.structured_output.compilation._compile_worker import cache_safe

    vocab = format_vocabulary("hermes")
    item = {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "string"}}, "required": ["x"]}
    tool = {"type": "function", "function": {"name": "put", "parameters": {
        "type": "object", "properties": {"a": {"$ref": "#/$defs/my-item.v1"}, "b": {"$ref": "#/$defs/my-item.v1"}},
        "required": ["a", "b"], "$defs": {"my-item.v1": item}}}}
    c = build_tool_constraint([tool], "required", format="hermes")
    grammar, _ = GrammarBuilder(vocab).build(c)
    assert any("-item.v" in line.split(" ::= ")[0] for line in str(grammar).splitlines())
    merged = shared_grammar(grammar)
    assert len(str(merged).splitlines()) < len(str(grammar).splitlines())
    assert cache_safe(c.kind, grammar)
    comp = xgr.GrammarCompiler(build_tokenizer_info(vocab), max_threads=1, cache_enabled=False)
    assert_same_masks_along_walks(comp.compile_grammar(grammar), comp.compile_grammar(merged), vocab, walks=3,
                                  steps=80, prefer=lambda allowed: [t for t in allowed[:4000] if len(vocab.token_bytes[t]) <= 2])


def test_the_root_keeps_its_name_wherever_it_is() -> None:
    text = ('x ::= ((y))\n'
            'y ::= (("k"))\n'
            'root ::= ((y))\n')
    out = rules(share_equal_rules(text))
    assert out == {"y": '(("k"))', "root": "((y))"}
    assert str(xgr.Grammar.from_ebnf(share_equal_rules(text)))  # parses, root found


def test_tag_dispatch_bodies_over_several_lines_merge_too() -> None:
    """xgrammar prints a ``TagDispatch`` (every ``any_text``, every triggered tag) over several lines; its
    rule still merges with its copies, and the text still parses."""
    text = ('root ::= ((t1 "," t2))\n'
            't1 ::= TagDispatch(\n'
            '  ("<a", g1),\n'
            '  loop_after_dispatch=false,\n'
            '  excludes=("</x>", "y")\n'
            ')\n'
            't2 ::= TagDispatch(\n'
            '  ("<a", g2),\n'
            '  loop_after_dispatch=false,\n'
            '  excludes=("</x>", "y")\n'
            ')\n'
            'g1 ::= ((">" "x"))\n'
            'g2 ::= ((">" "x"))\n')
    assert str(xgr.Grammar.from_ebnf(text))
    out = share_equal_rules(text)
    assert out.splitlines()[0] == 'root ::= ((t1 "," t1))'
    assert "t2" not in out and "g2" not in out and 'g1 ::= ((">" "x"))' in out
    assert str(xgr.Grammar.from_ebnf(out)).count("TagDispatch(") == 1


@pytest.mark.parametrize("bad", ["root ::= (a)\nnot a rule line\n", "x ::= ((\"a\"))\n", "root ::= (a)\nroot ::= (b)\n"])
def test_text_that_is_not_a_rule_list_is_refused(bad: str) -> None:
    with pytest.raises(ValueError):
        share_equal_rules(bad)


def test_a_grammar_that_does_not_parse_back_is_kept() -> None:
    class Odd:
        def __str__(self) -> str:
            return "garbage without rules"

    g = Odd()
    assert shared_grammar(g) is g


# qwen3_6, deepseek_v4, minimax_m2: raw values are any_text, a TagDispatch printed over several lines
@pytest.mark.parametrize("fmt", ["hermes", "kimi_k2", "pythonic", "qwen3_6", "deepseek_v4", "minimax_m2"])
def test_masks_along_random_walks_equal_the_unmerged_grammar(fmt: str) -> None:
    vocab = format_vocabulary(fmt)
    c = build_tool_constraint(CORPUS_TOOLS, "required", format=fmt)
    grammar, _ = GrammarBuilder(vocab).build(c)
    merged = shared_grammar(grammar)
    assert len(str(merged).splitlines()) < len(str(grammar).splitlines()), "the tools' copies merge"
    comp = xgr.GrammarCompiler(build_tokenizer_info(vocab), max_threads=1, cache_enabled=False)
    a, b = comp.compile_grammar(grammar), comp.compile_grammar(merged)
    # short tokens half the time, so walks go deep into values as well as across calls
    assert_same_masks_along_walks(a, b, vocab, walks=4, steps=150,
                                  prefer=lambda allowed: [t for t in allowed[:4000] if len(vocab.token_bytes[t]) <= 2])


def test_the_worker_compiles_the_merged_grammar() -> None:
    vocab = format_vocabulary("hermes")
    c = build_tool_constraint(CORPUS_TOOLS, "required", format="hermes")
    grammar, _ = GrammarBuilder(vocab).build(c)
    comp = xgr.GrammarCompiler(build_tokenizer_info(vocab), max_threads=1, cache_enabled=False)
    steps = list(compile_steps(GrammarBuilder(vocab), comp, c, {"ship_compiled_max_bytes": 0, "recompile_max_s": 60}))
    assert [s[0] for s in steps] == ["unverified", "verified"]  # compiled before the round-trip check
    reply = steps[0][1]
    assert reply[0] == "text"
    shipped = xgr.Grammar.from_ebnf(reply[1])  # the parent's recompile reads it
    assert len(str(shipped).splitlines()) < len(str(grammar).splitlines())


def test_a_merged_text_that_does_not_compile_falls_back_to_the_text_as_built(monkeypatch) -> None:
    from thinkgate.structured_output.compilation import rule_sharing

    vocab = format_vocabulary("hermes")
    c = build_tool_constraint(CORPUS_TOOLS[:2], "required", format="hermes")
    grammar, _ = GrammarBuilder(vocab).build(c)
    monkeypatch.setattr(rule_sharing, "shared_text", lambda text: text + "broken ::= (\n")
    comp = xgr.GrammarCompiler(build_tokenizer_info(vocab), max_threads=1, cache_enabled=False)
    steps = list(compile_steps(GrammarBuilder(vocab), comp, c, {"ship_compiled_max_bytes": 0, "recompile_max_s": 60}))
    assert len(steps) == 1 and steps[0][0] == "text" and steps[0][1] == str(grammar)


def test_a_long_chain_of_rules_is_left_unmerged_within_a_bounded_time() -> None:
    # a hostile structural tag can print as a chain of thousands of distinct rules: telling them apart takes as
    # many refinement rounds as the chain is long (quadratic); past its budget the pass leaves the text as it is
    import time

    n = 20_000
    chain = "root ::= ((r0))\n" + "".join(f'r{i} ::= (("a" r{i + 1}) | ("b"))\n' for i in range(n)) + \
        f'r{n} ::= (("c"))\n'
    t0 = time.process_time()
    assert share_equal_rules(chain) is chain
    assert time.process_time() - t0 < 30  # the unbounded rounds take minutes


def test_the_budget_still_merges_real_tool_grammars() -> None:
    from thinkgate.structured_output.compilation.rule_sharing import REFINE_BUDGET

    vocab = format_vocabulary("hermes")
    c = build_tool_constraint(CORPUS_TOOLS, "required", format="hermes")
    text = str(GrammarBuilder(vocab).build(c)[0])
    assert REFINE_BUDGET > 100 * len(text.splitlines())
    assert len(share_equal_rules(text).splitlines()) < len(text.splitlines())
