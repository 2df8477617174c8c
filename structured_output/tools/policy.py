"""The rules a read call must pass before a reader returns it, the same for every format and entry point.

- ``tool_choice: "none"``: no call is returned (every call's text stays content);
- the tool must be one the request lets a call name (``ToolRequest.tools``: a named choice leaves one,
  ``allowed_tools`` its subset); a call to any other tool, declared or not, stays content (unless the
  request reads undeclared tools, ``ToolRequest.read_undeclared``: then a call to a tool it did not
  declare passes, its arguments any JSON object);
- at most ``ToolRequest.max_calls`` calls (one when parallel calls are off or a function is named): the
  first ones in the output are returned, later ones stay content (a reader never drops model output:
  content plus calls account for the whole text, so a caller can show or log what the model wrote);
- a tool whose arguments the constraint checks (``ToolSpec.enforce``: ``strict: true``, strictness
  ``"parameter"``, or a forced call of a tool that does not say ``strict: false``) has its arguments
  validated against its JSON schema (``jsonschema``); arguments that violate it stay content;
- arguments that write a key of one object twice (at any depth) stay content, whatever the tool (JSON
  leaves such an object's meaning to the reader; the XML and DSML readers keep both in the text they
  read).
"""

from __future__ import annotations

import json
from typing import Any

import jsonschema

from .request import ToolRequest, ToolSpec
from .tool_table import undeclared_spec

__all__ = ["CallPolicy", "duplicate_keys", "validator_for"]


class _Pairs(list):
    """A JSON object as its (key, value) pairs, duplicates kept."""


def duplicate_keys(arguments: str) -> list[str]:
    """The keys that an object of the arguments JSON text (at any depth) writes more than once, as
    ``key`` at the top and ``path.key`` below (none for text that is not JSON)."""
    try:
        top = json.loads(arguments, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return []
    dups: list[str] = []
    stack: list[tuple[Any, str]] = [(top, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Pairs):
            seen: set[str] = set()
            for k, v in node:
                if k in seen and path + k not in dups:
                    dups.append(path + k)
                seen.add(k)
                stack.append((v, f"{path}{k}."))
        elif isinstance(node, list):
            stack.extend((v, f"{path}{i}.") for i, v in enumerate(node))
    return dups


def validator_for(schema: dict[str, Any]) -> Any:
    """The ``jsonschema`` validator of a tool's parameters (the draft its ``$schema`` names, else 2020-12)."""
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema)


class CallPolicy:
    """The rules of one request (see the module docstring). Build once, share across reads."""

    def __init__(self, request: ToolRequest, *, builtin: bool = False) -> None:
        self.request = request
        self.max_calls = request.max_calls
        self._tools: dict[str, ToolSpec] = {t.name: t for t in request.tools if builtin or not t.builtin}
        self._declared = {t.name for t in request.all_tools}
        self._validators: dict[str, Any] = {}
        for t in self._tools.values():
            if t.enforce:
                try:
                    self._validators[t.name] = validator_for(t.parameters)
                except ImportError:
                    raise
                except Exception:  # a schema jsonschema cannot use: no call of it passes
                    self._validators[t.name] = None

    def tool(self, name: str) -> ToolSpec | None:
        """The tool a call may name, or None (not allowed, not declared unless the request reads undeclared
        tools, or tool_choice "none")."""
        t = self._tools.get(name)
        if t is None and self.request.read_undeclared and name not in self._declared:
            return undeclared_spec(name)
        return t

    def full(self, taken: int) -> bool:
        """Whether ``taken`` calls are already as many as the request allows."""
        return self.max_calls is not None and taken >= self.max_calls

    def arguments_ok(self, name: str, arguments: str) -> bool:
        """Whether ``arguments`` (a JSON object text) write each key of an object once and pass the
        tool's schema, when it is checked."""
        if duplicate_keys(arguments):
            return False
        if name not in self._validators:
            return True
        validator = self._validators[name]
        if validator is None:
            return False
        try:
            return bool(validator.is_valid(json.loads(arguments)))
        except Exception:  # RecursionError, jsonschema's errors (an unresolvable $ref...): not valid
            return False

    def accepts(self, name: str, arguments: str, taken: int) -> bool:
        """All the rules: an allowed tool, room for one more call, valid arguments."""
        return self.tool(name) is not None and not self.full(taken) and self.arguments_ok(name, arguments)
