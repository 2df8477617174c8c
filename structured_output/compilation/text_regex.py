"""Regexes of free text: a character's regex spelling, and "any text that does not contain S".

The tool formats build raw string values from these (``tools/syntax.raw_text``), and the compiler writes a raw
value in its character-class form where xgrammar's ``any_text`` would take on an enclosing tag's end
(``xgrammar_adapter``). They live in the compilation room so that both can use them with imports pointing one
way (tools -> compilation)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["rx", "rx_not", "min_head", "no_substring_regex"]

_RX_NAMES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def rx(c: str) -> str:
    """The regex that matches the one character ``c``."""
    return _RX_NAMES.get(c) or ("\\" + c if c in "\\^$.|?*+()[]{}/-\"" else c)


def rx_not(chars: Iterable[str]) -> str:
    """The character class of every character but ``chars``."""
    return "[^" + "".join(rx(c) for c in sorted(set(chars))) + "]"


def min_head(s: str, min_length: int) -> str:
    """The regex of ``min_length`` units that no string avoiding ``s`` can start ``s`` in: each unit a
    character other than ``a = s[0]``, or ``a`` and a character other than ``s[1]`` and ``a`` (at least one
    character each, and no ``s[:2]`` in or across them). Needs ``a`` to occur nowhere else in ``s``."""
    a = s[0]
    if a in s[1:]:
        raise ValueError(f"{s!r} repeats its first character")
    unit = rx_not(a) if len(s) == 1 else f"({rx_not(a)}|{rx(a)}{rx_not([s[1], a])})"
    return f"{unit}{{{min_length}}}"


def no_substring_regex(forbidden: str, min_length: int = 0) -> str:
    """A regex for any string, possibly empty (at least ``min_length`` characters long with ``min_length``),
    that does not contain ``forbidden``.

    Needs ``forbidden[0]`` (say ``a``) to occur nowhere else in it, as in closing tags such as
    ``</parameter>`` and in ``<|"|>``. Then every ``a`` starts a chunk, and a string avoids ``forbidden``
    iff no chunk starts with it::

        [^a]* ( a Y )*     Y = ( [^s1 a][^a]* | s1 ( [^s2 a][^a]* | s2 ( ... ( [^s(n-1) a][^a]* )? ... )? )? )?

    Character classes only, so control tokens (whose text is private bytes, never UTF-8) never
    match, and neither does invalid UTF-8. The compiler uses it for a raw value (``tools/syntax.raw_text``) inside a tag that ends
    with text (xgrammar adds such a tag's end to its ``any_text``'s excludes: ``xgrammar_adapter``). This form
    keeps xgrammar's token masks precomputable, so a mask fill inside such a value
    reads precomputed masks; the textbook automaton form (``(B* C)*`` loops) defeats that
    precomputation, and every fill then walks the whole vocabulary."""
    s = forbidden
    if not s:
        raise ValueError("no_substring_regex: the forbidden string is empty")
    a = s[0]
    if a in s[1:]:
        raise ValueError(f"no_substring_regex: {s!r} repeats its first character")
    rest = rx_not(a) + "*"
    # ``min_length``: that many units first, each a character other than ``a`` or ``a`` and a character other
    # than ``s1`` and ``a`` (at least one character each, and no ``a s1`` in or across them: a value that begins
    # with ``forbidden[:2]`` within its first ``min_length`` characters is not admitted)
    head = min_head(s, min_length) if min_length > 0 else ""
    if len(s) == 1:
        return head + rest
    y = f"({rx_not([s[-1], a])}{rest})?"  # reading the last character would complete it
    for k in range(len(s) - 2, 0, -1):
        y = f"({rx_not([s[k], a])}{rest}|{rx(s[k])}{y})?"
    return f"{head}{rest}({rx(a)}{y})*"
