"""A request's constraint: what its output after the thinking must match.

A :class:`Constraint` is immutable and hashable by its canonical key, so the compile cache can share one
compiled grammar among every request that asks for the same thing. Build one with the class methods:

    Constraint.json_schema(schema)            # dict or JSON string
    Constraint.json_object()                  # any JSON object
    Constraint.regex(pattern)
    Constraint.grammar(ebnf)                  # EBNF as xgrammar takes it (root rule ``root``)
    Constraint.choice(["yes", "no"])
    Constraint.structural_tag(tag)            # xgrammar's structural-tag format (dict or JSON string)

Validation that needs no compiler (types, JSON parse, empty choices) happens here and raises
``ValueError``; the manager validates the rest at ``add_request``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["Constraint", "ConstraintKind"]

ConstraintKind = Literal["json_schema", "json_object", "regex", "grammar", "choice", "structural_tag"]


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Constraint:
    """One request's constraint. ``spec`` is the canonical text of the constraint (JSON for schemas and
    tags, the pattern / grammar text, or the JSON list of choices); ``options`` are extra knobs that
    change the compiled grammar and so are part of the cache key."""

    kind: ConstraintKind
    spec: str
    options: tuple[tuple[str, Any], ...] = field(default=())

    @property
    def key(self) -> str:
        """The canonical cache key."""
        return f"{self.kind}|{_canonical_json(dict(self.options))}|{self.spec}"

    def option(self, name: str, default: Any = None) -> Any:
        for k, v in self.options:
            if k == name:
                return v
        return default

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def json_schema(cls, schema: Mapping[str, Any] | str | bool, *, any_whitespace: bool = False,
                    max_whitespace: int | None = 2, strict: bool = True) -> Constraint:
        """A JSON schema. ``any_whitespace=False`` (default) emits compact JSON; with
        ``any_whitespace=True`` whitespace is allowed but bounded by ``max_whitespace`` characters per
        gap, so a model cannot spin on whitespace until max_tokens. ``strict`` forbids properties the
        schema does not list (``additionalProperties`` unset is taken as false), as engines do."""
        if isinstance(schema, str):
            try:
                schema = json.loads(schema)
            except json.JSONDecodeError as e:
                raise ValueError(f"invalid JSON schema: not valid JSON ({e})") from e
        if not isinstance(schema, (dict, bool)):
            raise ValueError(f"invalid JSON schema: expected an object, got {type(schema).__name__}")
        return cls("json_schema", _canonical_json(schema),
                   _opts(any_whitespace=any_whitespace, max_whitespace=max_whitespace, strict=strict))

    @classmethod
    def json_object(cls, *, any_whitespace: bool = False, max_whitespace: int | None = 2) -> Constraint:
        """Any JSON object."""
        return cls("json_object", "{}", _opts(any_whitespace=any_whitespace, max_whitespace=max_whitespace))

    @classmethod
    def regex(cls, pattern: str) -> Constraint:
        if not isinstance(pattern, str) or not pattern:
            raise ValueError("invalid regex: expected a non-empty string")
        return cls("regex", pattern)

    @classmethod
    def grammar(cls, ebnf: str) -> Constraint:
        if not isinstance(ebnf, str) or not ebnf.strip():
            raise ValueError("invalid grammar: expected a non-empty EBNF string")
        return cls("grammar", ebnf)

    @classmethod
    def choice(cls, choices: Sequence[str]) -> Constraint:
        if isinstance(choices, str) or not isinstance(choices, Sequence):
            raise ValueError("invalid choice: expected a list of strings")
        if not choices:
            raise ValueError("invalid choice: the list of choices is empty")
        for c in choices:
            if not isinstance(c, str) or not c:
                raise ValueError(f"invalid choice: {c!r} is not a non-empty string")
        return cls("choice", _canonical_json(list(choices)))

    @classmethod
    def structural_tag(cls, tag: Mapping[str, Any] | str) -> Constraint:
        """xgrammar's structural-tag format (``{"type": "structural_tag", "format": {...}}``)."""
        if isinstance(tag, str):
            try:
                tag = json.loads(tag)
            except json.JSONDecodeError as e:
                raise ValueError(f"invalid structural tag: not valid JSON ({e})") from e
        if not isinstance(tag, Mapping):
            raise ValueError(f"invalid structural tag: expected an object, got {type(tag).__name__}")
        return cls("structural_tag", _canonical_json(dict(tag)))


def _opts(**kw: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(kw.items()))
