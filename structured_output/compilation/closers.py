"""The literals that end a stretch of free text in a structural tag: :func:`text_closers`.

A format's free text (a ``regex`` such as the XML formats' raw string value, an ``any_text``) is followed by a
literal that ends it: ``\\n</parameter>\\n<parameter=unit>\\n`` in Qwen's XML calls, ``</`` then the ``｜DSML｜``
token then ``parameter>`` in DeepSeek's DSML. Inside the free text every byte is allowed, so nothing in a
state's next-token row tells a search which of them begins the way out; the shortest-completion search
(``step/shortest.py``) tries these literals whole from a free-text state. They are read off the tag's structure:
for each free-text element of a ``sequence``, the run of ``const_string`` and ``token`` elements right after
it; for a ``tag`` whose content is free text, its ``end``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["text_closers"]

_FREE = frozenset({"regex", "any_text"})
_OPAQUE = frozenset({"json_schema", "grammar", "ebnf"})

Closer = tuple["str | int", ...]


def _piece(node: Any) -> str | int | None:
    """A literal element's piece: a const_string's text, a token format's id (resolved tags name ids)."""
    if not isinstance(node, Mapping):
        return None
    kind = node.get("type")
    if kind == "const_string" and isinstance(node.get("value"), str) and node["value"]:
        return node["value"]
    if kind == "token" and isinstance(node.get("token"), int) and not isinstance(node["token"], bool):
        return node["token"]
    return None


def _ends(end: Any) -> list[Closer]:
    if isinstance(end, str):
        return [(end,)] if end else []
    if isinstance(end, list):
        return [(e,) for e in end if isinstance(e, str) and e]
    piece = _piece(end)
    return [] if piece is None else [(piece,)]


def text_closers(tag: Any) -> list[Closer]:
    """The closers of a resolved structural tag (its token formats name ids), each a tuple of pieces (text, or a
    token id), without duplicates, in the order they occur. A free-text element's closer runs on past the end of
    its sequence, or its tag's content, into what follows there (the last parameter's raw value of a call is ended
    by ``</parameter>``, the call's end and the section's end token)."""
    out: dict[Closer, None] = {}
    # (node, the literal runs that may follow it: alternatives, each a tuple of pieces)
    stack: list[tuple[Any, tuple[Closer, ...]]] = [(tag, ())]
    while stack:
        node, after = stack.pop()
        if isinstance(node, list):
            stack.extend((x, ()) for x in reversed(node))
            continue
        if not isinstance(node, Mapping):
            continue
        kind = node.get("type")
        if (kind is not None and not isinstance(kind, str)) or kind in _OPAQUE:  # a JSON schema's or a grammar's
            continue  # own text: no format inside
        if kind in _FREE:
            for run in after:
                if run:
                    out[run] = None
            continue
        children: list[tuple[Any, tuple[Closer, ...]]] = []
        if kind == "sequence" and isinstance(node.get("elements"), list):
            elements = node["elements"]
            for i, e in enumerate(elements):
                run: list[str | int] = []
                for f in elements[i + 1:]:
                    piece = _piece(f)
                    if piece is None:
                        break
                    run.append(piece)
                else:  # literals up to the sequence's end: what follows the sequence follows them
                    children.append((e, tuple(tuple(run) + a for a in after) or (tuple(run),)))
                    continue
                children.append((e, (tuple(run),)))
        elif kind == "tag" and isinstance(node.get("content"), Mapping):
            ends = [()] if node.get("end") in ("", []) else _ends(node.get("end"))
            children.append((node["content"], tuple(e + a for e in ends for a in (after or ((),)))))
        elif kind == "or" and isinstance(node.get("elements"), list):
            children.extend((e, after) for e in node["elements"])
        else:
            children.extend((v, ()) for v in node.values() if isinstance(v, (list, Mapping)))
        stack.extend(reversed(children))
    return list(out)
