"""The tools a reader reads calls of: the request's declared function tools, and, when the request says
so (``ToolRequest.read_undeclared``, the vLLM plugin's default, as vLLM's own parsers read any name),
tools it did not declare.

A declared name is matched as written (any characters, longest first). An undeclared one is a run of
:data:`UNDECLARED_NAME` characters; every prefix of that run is a candidate, longest first, since the
format's text after the name (``:0`` of Kimi's ``functions.NAME:0``) may start with name characters: the
reader keeps the first candidate whose call reads. Its arguments are any JSON object (XML values stay
strings); the request's rules (:mod:`.policy`) apply to it as to any call.
"""

from __future__ import annotations

import re

from .request import ANY_OBJECT, ToolRequest, ToolSpec

__all__ = ["ToolTable", "UNDECLARED_NAME", "undeclared_spec"]

UNDECLARED_NAME = re.compile(r"[A-Za-z0-9_\-.]{1,128}")
"""The characters of a tool name the request did not declare (at most 128, OpenAI's own bound is 64)."""


class ToolTable(dict[str, ToolSpec]):
    """name -> spec of the declared function tools, plus the undeclared ones when ``open``."""

    def __init__(self, request: ToolRequest) -> None:
        super().__init__((t.name, t) for t in request.all_tools if not t.builtin)
        self.open = request.read_undeclared
        self._by_length = sorted(self, key=len, reverse=True)

    def names_at(self, text: str, pos: int) -> list[str]:
        """The names a call's name written at ``pos`` may be, longest first (declared ones first)."""
        names = [n for n in self._by_length if text.startswith(n, pos)]
        if self.open:
            m = UNDECLARED_NAME.match(text, pos)
            if m is not None:
                run = m.group()
                names += [run[:k] for k in range(len(run), 0, -1) if run[:k] not in self]
        return names

    def knows(self, name: str) -> bool:
        """Whether a call may name ``name`` as far as reading goes (declared, or undeclared and open)."""
        return name in self or (self.open and UNDECLARED_NAME.fullmatch(name) is not None)

    def spec(self, name: str) -> ToolSpec:
        """The declared tool ``name``, or an undeclared one: any JSON object as its arguments."""
        t = self.get(name)
        return t if t is not None else undeclared_spec(name)


def undeclared_spec(name: str) -> ToolSpec:
    """The spec of a tool the request did not declare: any JSON object as its arguments, not enforced; a
    syntax that types values by the schema (XML parameters) keeps them as the text written, with no schema
    to say otherwise (as vLLM's parsers do)."""
    return ToolSpec(name, {**ANY_OBJECT, "additionalProperties": {"type": "string"}}, None, False)
