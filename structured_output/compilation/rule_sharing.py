"""Equal rules of a grammar merged into one, so that xgrammar computes their token masks once.

A tool constraint writes the same value rule once per parameter, each copy under its own names: the JSON
value rules of Hermes' and Kimi K2's arguments, the Python-quoted strings of the pythonic families (and,
before raw values became ``any_text``, Qwen3.6's twelve-rule raw string value). xgrammar precomputes token
masks per rule, not per rule content, so each copy paid that precomputation again (``python -m bench tools``).

:func:`share_equal_rules` reads the grammar's EBNF text and merges rules that derive the same language
for the same reason: two rules are *equal* when their bodies are the same text once every rule they
refer to is replaced by its class, and the rules they refer to, in order, are equal. That is the
coarsest partition stable under this refinement (Moore's algorithm over the rule graph; recursive rules
included), so merged rules are interchangeable everywhere and the language is unchanged. Each class keeps
its first rule; the root stays first.

The text is read with xgrammar's lexical forms: string literals and character classes (with their
escapes) are opaque, and only identifiers that name a rule of the grammar are references (keywords such
as ``stop_eos`` in ``TagDispatch`` are not rule names). The caller compiles the result and keeps the
original on any failure (:func:`shared_text`; the compile worker compiles the text itself, so it is parsed
once, inside xgrammar's compile).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["NAME", "REFINE_BUDGET", "lex", "read_rules", "share_equal_rules", "shared_grammar", "shared_text"]

REFINE_BUDGET = 2_000_000
"""Rule and reference visits in all while refining the partition (:func:`share_equal_rules`); past it the
grammar is left unmerged."""

NAME = r"[A-Za-z_.\-][A-Za-z0-9_.\-]*"
"""An identifier as xgrammar's EBNF lexer reads one (its ``IsNameChar``: letters, ``_``, ``-`` and ``.``, digits after
the first character). xgrammar prints such names for schema ``$defs`` keys (``defs_my-type.v``)."""

_RULE = re.compile(rf"^({NAME}) ::= (.*)$")
_LEX = re.compile(rf'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]|{NAME}|[^"\[A-Za-z_.\-]+', re.S)


def lex(body: str) -> list[str]:
    """``body`` (a printed rule body) cut into its lexical pieces, which join back to it: each string literal
    and character class whole (escapes included), each identifier alone, and the text between them. A rule
    reference is an identifier piece that names a rule (keywords such as ``stop_eos`` are identifiers too)."""
    return _LEX.findall(body)


def read_rules(ebnf: str) -> tuple[list[str], list[str]]:
    """The rule names and bodies of ``ebnf`` (xgrammar's printed form: ``name ::= body`` per line, a
    ``TagDispatch(...)`` body going on over indented lines and a closing ``)``), in order. ``ValueError`` for
    a line that is neither or a name defined twice."""
    names: list[str] = []
    bodies: list[str] = []
    for line in ebnf.splitlines():
        if not line.strip():
            continue
        m = _RULE.match(line)
        if m is None:
            if not names or not line[:1].isspace() and not line.startswith(")"):
                raise ValueError(f"not a rule line: {line[:80]!r}")
            bodies[-1] += "\n" + line  # a body printed over several lines (TagDispatch)
            continue
        names.append(m.group(1))
        bodies.append(m.group(2))
    if len(set(names)) != len(names):
        raise ValueError("a rule name is defined twice")
    return names, bodies


def share_equal_rules(ebnf: str, root: str = "root") -> str:
    """``ebnf`` (xgrammar's printed form, see :func:`read_rules`) with equal rules merged (see the module
    docstring); the text itself when nothing merges. ``ValueError`` where :func:`read_rules` refuses the
    text, or for no rule named ``root``."""
    names, bodies = read_rules(ebnf)
    index = {n: i for i, n in enumerate(names)}
    if root not in index:
        raise ValueError(f"no rule named {root!r}")
    pieces: list[list[str]] = []  # each body cut into text pieces, a reference between two pieces
    refs: list[list[int]] = []
    for body in bodies:
        parts, rs, buf = [], [], []
        for tok in lex(body):
            r = index.get(tok)
            if r is None:
                buf.append(tok)
            else:
                parts.append("".join(buf))
                buf = []
                rs.append(r)
        parts.append("".join(buf))
        if sum(map(len, parts)) + sum(len(names[r]) for r in rs) != len(body):
            raise ValueError(f"rule {names[len(pieces)]!r}: body not read whole")
        pieces.append(parts)
        refs.append(rs)
    shapes: dict[tuple[str, ...], int] = {}
    cls = [shapes.setdefault(tuple(p), len(shapes)) for p in pieces]
    n_cls = len(shapes)
    # each round costs one visit per rule and reference; a chain of rules needs as many rounds as it is long, so
    # the rounds are bounded in all, and a partition that is not stable by then is not used (it may still join
    # rules that differ): the text stays as it is (an optimisation only)
    round_cost = len(names) + sum(map(len, refs))
    for _ in range(max(1, REFINE_BUDGET // max(1, round_cost))):
        sigs: dict[tuple, int] = {}
        new = [sigs.setdefault((cls[i], *(cls[r] for r in refs[i])), len(sigs)) for i in range(len(names))]
        if len(sigs) == n_cls:
            break
        cls, n_cls = new, len(sigs)
    else:
        return ebnf
    if n_cls == len(names):
        return ebnf
    rep: dict[int, int] = {cls[index[root]]: index[root]}
    for i, c in enumerate(cls):
        rep.setdefault(c, i)
    out = []
    for i in range(len(names)):
        if rep[cls[i]] != i:
            continue
        parts, rs = pieces[i], refs[i]
        body = [parts[0]]
        for k, r in enumerate(rs):
            body.append(names[rep[cls[r]]])
            body.append(parts[k + 1])
        out.append(f"{names[i]} ::= {''.join(body)}")
    return "\n".join(out) + "\n"


def shared_text(text: str) -> str:
    """The EBNF ``text`` of a grammar with equal rules merged (:func:`share_equal_rules`) and then its cycles
    through several automaton rules unfolded (``state_cycles.py``), so that xgrammar's cache computes each
    rule's masks once and keeps them for the next grammar. ``text`` itself when a pass finds a form it does
    not read. Not parsed back: the caller compiles it (and keeps ``text`` if that fails)."""
    from .state_cycles import unfold_state_cycles

    try:
        return unfold_state_cycles(share_equal_rules(text))
    except Exception:  # noqa: BLE001 - an unexpected form: the text as it is
        return text


def shared_grammar(grammar: Any) -> Any:
    """``grammar`` (an ``xgrammar.Grammar`` that survives its text round trip) with :func:`shared_text` applied,
    parsed back by xgrammar; ``grammar`` itself when the text is unchanged or the result does not parse."""
    import xgrammar as xgr

    text = str(grammar)
    shared = shared_text(text)
    if shared == text:
        return grammar
    try:
        return xgr.Grammar.from_ebnf(shared)
    except Exception:  # noqa: BLE001 - the grammar as built
        return grammar
