"""Automaton rules whose cycles run through more than one rule, rewritten so that xgrammar's cache keeps
their token masks.

xgrammar's cached compiler keeps the token masks of a rule across grammars by a hash of the rule's
automaton and of the rules it refers to. It can hash a rule that refers to itself, but not a group of
rules that refer to each other in a cycle through several of them: their masks are computed again in
every grammar. The JSON string of a tool argument that must not contain a text (``excludes``: ``</``
for the XML-parameter formats, ``<|`` for Kimi K3) is such a group. xgrammar writes it as one rule per
state of an automaton, and the states after ``<`` and inside an escape lead back to the first one. Its
masks cover nearly the whole vocabulary, so every new tool set with a JSON argument paid for them again
(Qwen3.6, one tool with a list of strings, in a warm cache: 37 ms of a 40 ms compile).

:func:`unfold_state_cycles` rewrites such a group into rules that refer only to themselves and to rules
later in a chain, with the same language. A group qualifies when:

- each rule's body is a choice of ``(T)`` and ``(T R)``, where ``T`` is one string literal or character
  class and ``R`` a rule name (an automaton over ``T``s; ``(T)`` ends a word);
- one rule, the *start* ``s``, is the only member referred to from outside the group;
- apart from self-references, the other members refer to each other without a cycle.

For each other member ``q``, ``q_ret`` derives the words from ``q`` up to a step back into ``s`` (that
step included, ``s`` not) and ``q_end`` the words from ``q`` that end without coming back, so
``L(q) = L(q_ret) L(s) | L(q_end)``. ``s``'s step ``(T q)`` becomes ``(T q_ret s)`` and ``(T q_end)``;
each ``q_ret`` and ``q_end`` refers to itself and to the ``_ret`` / ``_end`` rules of the members ``q`` leads
to, never back. The grammar derives the same words, so its masks are the same (tests compare masks along
random walks). A group of any other shape is left as it is (it compiles as before, uncached).
"""

from __future__ import annotations

import re

from .rule_sharing import NAME, lex, read_rules

__all__ = ["WALK_BUDGET_PER_RULE", "unfold_state_cycles"]

WALK_BUDGET_PER_RULE = 16
"""Rules visited in all, per rule of the grammar, while looking for groups; past it the pass stops."""

_TERM = r'"(?:[^"\\]|\\.)*"|\[(?:[^\]\\]|\\.)*\]'
_ALT = re.compile(rf"\(({_TERM})(?: ({NAME}))?\)")
_BODY = re.compile(rf"\(\((?:{_TERM})(?: {NAME})?\)(?: \| \((?:{_TERM})(?: {NAME})?\))*\)")


def _automaton(body: str) -> list[tuple[str, str | None]] | None:
    """``body``'s steps ``(term, next rule or None)`` when it is a choice of ``(T)`` / ``(T R)``, else None."""
    if _BODY.fullmatch(body) is None:
        return None
    return [(m.group(1), m.group(2)) for m in _ALT.finditer(body)]


def unfold_state_cycles(ebnf: str) -> str:
    """``ebnf`` (xgrammar's printed form) with every qualifying group rewritten (module docstring); the text
    itself when none qualifies. ``ValueError`` where :func:`~.rule_sharing.read_rules` refuses the text."""
    names, bodies = read_rules(ebnf)
    known = set(names)
    steps: dict[str, list[tuple[str, str | None]]] = {}
    for name, body in zip(names, bodies):
        auto = _automaton(body)
        if auto is not None and all(r is None or r in known for _, r in auto):
            steps[name] = auto
    referrers: dict[str, set[str]] = {n: set() for n in names}
    for name, body in zip(names, bodies):
        auto = steps.get(name)
        targets = {r for _, r in auto if r is not None} if auto is not None else \
            {t for t in lex(body) if t in referrers}
        for t in targets:
            referrers[t].add(name)
    taken = set(known)
    rewritten: dict[str, list[str]] = {}  # start -> its new rule lines (the start's first)
    removed: set[str] = set()
    # the walks from candidate starts overlap (a chain of automaton rules is walked again from each of its
    # rules): bounded in all, after which the rest of the grammar stays as it is (an optimisation only)
    budget = [WALK_BUDGET_PER_RULE * len(names)]
    for start in names:
        if start not in steps or start in removed or start in rewritten:
            continue
        if not any(start != r and r in steps for r in referrers[start]):
            continue  # no automaton rule leads back to it
        group = _group(start, steps, budget)
        if budget[0] < 0:
            break
        if group is None or len(group) < 2 or any(g in rewritten or g in removed for g in group):
            continue
        members = group[1:]
        inside = set(group)
        if any(not referrers[m] <= inside for m in members):
            continue  # a member is reached from outside: not a group with one entry
        order = _dag_order(members, steps)
        if order is None or not any(start in {r for _, r in steps[m]} for m in members):
            continue  # a cycle between members, or nothing leads back to the start
        lines = _unfold(start, order, steps, taken)
        if lines is None:
            continue
        rewritten[start] = lines
        removed.update(members)
    if not rewritten:
        return ebnf
    out = []
    for name, body in zip(names, bodies):
        if name in removed:
            continue
        if name in rewritten:
            out.extend(rewritten[name])
        else:
            out.append(f"{name} ::= {body}")
    return "\n".join(out) + "\n"


def _group(start: str, steps: dict[str, list[tuple[str, str | None]]], budget: list[int]) -> list[str] | None:
    """The rules reachable from ``start`` through steps (``start`` first), None if one is not an automaton rule.
    Each rule visited takes one from ``budget[0]``; None once it runs out."""
    seen = [start]
    found = {start}
    i = 0
    while i < len(seen):
        budget[0] -= 1
        auto = steps.get(seen[i])
        if auto is None or budget[0] < 0:
            return None
        for _, r in auto:
            if r is not None and r not in found:
                found.add(r)
                seen.append(r)
        i += 1
    return seen


def _dag_order(members: list[str], steps: dict[str, list[tuple[str, str | None]]]) -> list[str] | None:
    """``members`` with every member after the members it refers to (self-references aside); None on a cycle."""
    inside = set(members)
    done: list[str] = []
    state: dict[str, int] = {}

    def visit(m: str) -> bool:
        stack = [(m, iter([r for _, r in steps[m] if r in inside and r != m]))]
        state[m] = 1
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[node] = 2
                done.append(node)
            elif state.get(nxt) == 1:
                return False
            elif nxt not in state:
                state[nxt] = 1
                stack.append((nxt, iter([r for _, r in steps[nxt] if r in inside and r != nxt])))
        return True

    for m in members:
        if m not in state and not visit(m):
            return None
    return done


def _fresh(base: str, taken: set[str]) -> str:
    name, k = base, 1
    while name in taken:
        name, k = f"{base}_{k}", k + 1
    taken.add(name)
    return name


def _alt(term: str, ref: str | None) -> str:
    return f"({term})" if ref is None else f"({term} {ref})"


def _unfold(start: str, order: list[str], steps: dict[str, list[tuple[str, str | None]]],
            taken: set[str]) -> list[str] | None:
    """The rules replacing ``start`` and ``order`` (its other members, each after those it refers to)."""
    ret: dict[str, str] = {}  # member -> the name of its q_ret rule (absent: empty language)
    end: dict[str, str] = {}
    lines: list[str] = []
    for q in order:
        auto = steps[q]
        r_alts, e_alts = [], []
        for term, nxt in auto:
            if nxt is None:
                e_alts.append((term, None))
            elif nxt == start:
                r_alts.append((term, None))
            elif nxt != q:  # a self-loop is added to both below
                if nxt in ret:
                    r_alts.append((term, ret[nxt]))
                if nxt in end:
                    e_alts.append((term, end[nxt]))
        loops = [term for term, nxt in auto if nxt == q]
        for alts, suffix, table in ((r_alts, "ret", ret), (e_alts, "end", end)):
            if not alts:
                continue
            name = table[q] = _fresh(f"{q}_{suffix}", taken)
            alts = alts + [(term, name) for term in loops]
            lines.append(f"{name} ::= ({' | '.join(_alt(t, r) for t, r in alts)})")
    s_alts = []
    for term, nxt in steps[start]:
        if nxt is None or nxt == start:
            s_alts.append(f"({term})" if nxt is None else f"({term} {start})")
            continue
        if nxt in ret:
            s_alts.append(f"({term} {ret[nxt]} {start})")
        if nxt in end:
            s_alts.append(f"({term} {end[nxt]})")
    if not s_alts:
        return None
    return [f"{start} ::= ({' | '.join(s_alts)})", *lines]
