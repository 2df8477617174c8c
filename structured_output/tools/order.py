"""Argument key orders: which orders of an object's keys a constraint admits, without a grammar that
grows with the number of orderings.

A model writes an object's keys in the order its chat template showed them in training:

- ``"schema"``: the order of the schema's ``properties`` (the caller's order: the arguments dict as the
  caller built it, which templates iterate as given). JSON formats render arguments with ``tojson``,
  which in transformers is ``json.dumps(..., sort_keys=False)`` (plain Jinja's own ``tojson`` sorts,
  but no serving stack renders chat templates with it); XML formats iterate ``arguments.items()``. For
  them the schema order is the only order (and xgrammar's JSON schema grammar writes properties in it).
- ``"sorted"``: Jinja's ``dictsort`` as Gemma 4's template applies it at every level
  (``for key, value in arguments | dictsort``): by key, case-insensitively (``str.lower``), ties in
  schema order (Python's sort is stable). See :func:`dictsort_keys`.

:func:`members_in_orders` builds one object body from its members: an ``or`` of one sequence per
distinct order (one sequence when the orders coincide), each linear in the members. Within a sequence
every member may be absent unless required, and the separator goes only between present members:

- with a required member ``r`` (the first one in that order): the optional members before it are
  ``(m sep)?``, then ``r``, then ``(sep m)`` / ``(sep m)?`` for the rest: each member once;
- with none required: ``(Rn)?`` with ``R1 = m1`` and ``Rk = mk | R(k-1) (sep mk)?``: each member twice
  in the tree, but a value is only ever read by one path (as the first present member, or after a
  separator), so a mask fill inside it costs what it costs in one sequence.

So a body of ``n`` members in ``k`` orders has at most ``2kn`` member copies (never ``n!`` or ``n²``).

:func:`members_any_order` is the caller's order for formats whose templates keep it (every format but
Gemma 4's): the caller's dict may be in any order, so a call's top-level keys are admitted in any
order, each member once in the grammar and repeatable; uniqueness and the required keys are checked
when the output is complete (``key_check.py``, which says why: an exact grammar needs a state per
subset of the keys, and a structural tag, a tree, would spell out every order).
A structural tag is a tree: an ``or`` of orders in every object would copy each nested object once
per order of every enclosing level (``k^depth``). A format that admits several orders therefore
applies one order to a whole call (Gemma 4's template sorts every level, a caller's dict keeps its
order at every level): the arguments are an ``or`` of at most ``k`` whole trees, one per distinct
order, each object in it built with :func:`members_in_orders` for that single order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from .syntax import Fmt, const, opt, or_, seq, star

__all__ = ["KeyOrder", "KEY_ORDERS", "Member", "dictsort_keys", "orders_of", "members_in_orders",
           "members_any_order"]

KeyOrder = Literal["schema", "sorted"]
KEY_ORDERS: tuple[KeyOrder, ...] = ("schema", "sorted")


@dataclass(frozen=True)
class Member:
    """One property of an object body: its key, its whole format (key and value), whether required."""

    key: str
    fmt: Fmt
    required: bool


def dictsort_keys(keys: Iterable[str]) -> list[str]:
    """``keys`` in the order of Jinja's ``dictsort`` filter with its defaults: case-insensitive
    (``str.lower``), stable (equal keys keep the given order)."""
    return sorted(keys, key=str.lower)


def orders_of(keys: Sequence[str], orders: Sequence[KeyOrder]) -> list[list[str]]:
    """The distinct key sequences of ``keys`` (given in schema order) in ``orders``. An unknown order
    is a ``ValueError``."""
    out: list[list[str]] = []
    for o in orders:
        if o == "schema":
            ks = list(keys)
        elif o == "sorted":
            ks = dictsort_keys(keys)
        else:
            raise ValueError(f"unknown key order {o!r}; known: {', '.join(KEY_ORDERS)}")
        if ks not in out:
            out.append(ks)
    return out


def _joined(members: Sequence[Member], sep: str) -> Fmt:
    """The members in this order, each optional unless required, ``sep`` between present ones."""
    if not members:
        return const("")
    first = next((i for i, m in enumerate(members) if m.required), None)
    if first is None:
        # R1 = m1, Rk = mk | R(k-1) (sep mk)?: a member's value is read by one path, as the first
        # present member or as one after a separator (the form mk | (mk sep)? G(k+1) reads it twice)
        r = members[0].fmt
        for m in members[1:]:
            r = or_(m.fmt, seq(r, opt(seq(const(sep), m.fmt))))
        return opt(r)
    parts: list[Fmt] = [opt(seq(m.fmt, const(sep))) for m in members[:first]]
    parts.append(members[first].fmt)
    for m in members[first + 1:]:
        parts.append(seq(const(sep), m.fmt) if m.required else opt(seq(const(sep), m.fmt)))
    return seq(*parts)


def members_in_orders(members: Sequence[Member], orders: Sequence[KeyOrder], sep: str) -> Fmt:
    """An object body (without its braces): ``members`` (in schema order) in any of ``orders``."""
    by_key = {m.key: m for m in members}
    if len(by_key) != len(members):
        raise ValueError("members_in_orders: duplicate keys")
    seqs = orders_of([m.key for m in members], orders or ("schema",))
    return or_(*[_joined([by_key[k] for k in ks], sep) for ks in seqs])


def members_any_order(members: Sequence[Member], sep: Fmt) -> Fmt:
    """An object body whose members come in any order, each any number of times (at least one member
    when one is required), ``sep`` between two: one copy of each member. What the grammar lets
    through beyond the schema (a key twice, a required key left out) is for the output check
    (``key_check.py``)."""
    if not members:
        return const("")
    one = or_(*[m.fmt for m in members])
    body = seq(one, star(seq(sep, one)))
    return body if any(m.required for m in members) else opt(body)
