"""The check of a tool call's argument keys where the grammar admits them in any order.

The chat templates write a call's arguments in the order of the caller's dict (``tojson`` keeps it;
XML templates iterate ``arguments.items()``), and a model writes the keys in whatever order it learned,
not necessarily the schema's. A grammar that admits every order of ``n`` keys with each at most once
and the required ones present needs a state per subset of the keys (``2^n``), and a structural tag is
a tree, so it would spell out every order (``n!``). The formats that keep the caller's order therefore
admit keys in any order *with repetition*, one copy of each member, a grammar no larger than the
schema-order one: JSON arguments at every level (xgrammar's ``any_order`` objects: a caller's nested
dicts keep their order too), XML and DSML parameters at the top level
(:func:`~.order.members_any_order`; a JSON value nested in a parameter keeps its exact grammar). This
check enforces the rest once the output is complete: every call of a checked tool writes each key of an
object at most once and every required key, at any depth (``KeysCheck``).

The check runs where the manager checks an output against schema keywords its grammar does not enforce
(``schema_support.output_problem``): once, when the grammar accepts a stop token, over the output read
back with the format's own reader (its cost grows with the output, not the step). A violation puts the
request in ``ERROR`` with a message naming the call, the tool and the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from ..compilation.constraints import OUTPUT_CHECKS
from .marked import MarkedText
from .policy import CallPolicy, duplicate_keys, validator_for
from .request import ToolRequest, ToolSpec

__all__ = ["KeysCheck", "keys_check_spec"]


def keys_check_spec(format_name: str, tools: Sequence[ToolSpec], checked: Iterable[str]) -> str | None:
    """The check's definition as canonical JSON (it travels in the constraint's options and its cache
    key): the format, the request's function tools (the reader needs every one a call may name) and the
    names of the checked tools. None when no tool is checked."""
    names = sorted(set(checked))
    if not names:
        return None
    return json.dumps({"format": format_name, "checked": names,
                       "tools": [[t.name, t.parameters, t.enforce] for t in tools if not t.builtin]},
                      sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class _Recorder(CallPolicy):
    """A policy that takes every call of a declared tool (so the reader reads them all) and records the
    key problems of the checked ones."""

    def __init__(self, request: ToolRequest, checked: frozenset[str], validators: dict[str, Any]) -> None:
        self.request = request
        self.max_calls = None
        self._tools = {t.name: t for t in request.tools}
        self._validators = validators  # the check's, built once per tool
        self._checked = checked
        self.calls = 0
        self.problems: list[str] = []

    def arguments_ok(self, name: str, arguments: str) -> bool:
        self.calls += 1
        if name not in self._checked:
            return True
        where = f"tool call {self.calls} ({name!r})"
        for k in duplicate_keys(arguments):
            self.problems.append(f"{where} writes the argument {k!r} more than once")
        missing = _missing_required(self._validator(name), arguments)
        if missing:
            self.problems.append(f"{where} leaves out a required argument: {missing}")
        return True

    def _validator(self, name: str) -> Any:
        if name not in self._validators:
            try:
                self._validators[name] = validator_for(self._tools[name].parameters)
            except Exception:  # a schema jsonschema cannot use: the grammar's word stands
                self._validators[name] = None
        return self._validators[name]


def _missing_required(validator: Any, arguments: str) -> str | None:
    """The first ``required`` keyword the arguments break, at any depth (``jsonschema``'s message and
    path), or None. Only ``required``: the relaxed objects leave nothing else unchecked (other
    keywords the grammar does not enforce were never checked in tool calls); one anywhere in the tree of
    errors counts (an ``anyOf`` whose object alternative lacks a key, when no alternative passes)."""
    if validator is None:
        return None
    try:
        value = json.loads(arguments)
        stack = list(validator.iter_errors(value))
        while stack:
            e = stack.pop(0)
            if e.validator == "required":
                return f"{e.message} at {e.json_path}"
            stack.extend(e.context or ())
    except Exception:  # RecursionError, an unresolvable $ref: the grammar's word stands
        return None
    return None


class KeysCheck:
    """The output check of a tool constraint whose grammar takes top-level keys in any order (see the
    module docstring). Built from :func:`keys_check_spec`'s text; picklable."""

    __slots__ = ("spec", "_format", "_request", "_checked", "_validators")

    def __init__(self, spec: str) -> None:
        from .formats import get_tool_format  # formats imports the modules that import this one

        try:
            d = json.loads(spec)
            fmt = get_tool_format(d["format"])
            tools = tuple(ToolSpec(str(name), dict(params), None, bool(enforce)) for name, params, enforce in d["tools"])
            checked = frozenset(str(n) for n in d["checked"])
        except (ValueError, KeyError, TypeError, RecursionError) as e:
            raise ValueError(f"invalid tool key check (keys_check_spec builds it): {type(e).__name__}: {e}") from None
        self.spec = spec
        self._format = fmt
        self._request = ToolRequest(tools, tools, "required", True, "auto")
        self._checked = checked
        self._validators: dict[str, Any] = {}

    def __reduce__(self) -> tuple:
        return (KeysCheck, (self.spec,))

    def problem(self, src: MarkedText) -> str | None:
        """None when every call of a checked tool in ``src`` writes each top-level key once and its
        required keys; else the message naming the call, the tool and the key."""
        rec = _Recorder(self._request, self._checked, self._validators)
        self._format.read_marked(src, self._request, rec)
        if not rec.problems:
            return None
        more = f" (and {len(rec.problems) - 1} more)" if len(rec.problems) > 1 else ""
        return f"the tool call breaks its schema: {rec.problems[0]}{more}"

    def problem_of_tokens(self, vocabulary: Any, tokens: Iterable[int], stop_ids: Any) -> str | None:
        """:meth:`problem` of the output's token ids (stop tokens left out), read at its control tokens."""
        ids = [t for t in tokens if t not in stop_ids]
        return self.problem(MarkedText.from_ids(ids, vocabulary))


OUTPUT_CHECKS["keys_check"] = KeysCheck  # a structural tag's keys_check option names this check
