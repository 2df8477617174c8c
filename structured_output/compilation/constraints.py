"""A request's constraint: what its output after the thinking must match.

A :class:`Constraint` is immutable and hashable by its canonical key, so the compile cache can share one
compiled grammar among every request that asks for the same thing. Build one with the class methods:

    Constraint.json_schema(schema)            # dict or JSON string
    Constraint.json_object()                  # any JSON object
    Constraint.regex(pattern)
    Constraint.grammar(ebnf)                  # EBNF as xgrammar takes it (root rule ``root``)
    Constraint.choice(["yes", "no"])
    Constraint.structural_tag(tag)            # xgrammar's structural-tag format (dict or JSON string)

Validation that needs no compiler (types, JSON parse, empty choices, nesting deeper than
:data:`MAX_NESTING_DEPTH`) happens here and raises ``ValueError``; its cost depends only on the size
of the input (the depth check is an iterative walk, never a recursion). The compiler validates the
rest (schema, regex and grammar syntax, structural-tag shape, token names) in a worker process, and
an invalid constraint puts its request in ``ERROR`` with a message naming the problem.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Literal

__all__ = ["Constraint", "ConstraintKind", "CONSTRAINT_KINDS", "DEFAULT_MAX_WHITESPACE", "MAX_NESTING_DEPTH",
           "OUTPUT_CHECKS", "output_check"]

MAX_NESTING_DEPTH = 256
"""Deepest nesting of JSON objects and arrays accepted in a JSON schema or a structural tag (the
outermost object is level 1). Real schemas stay far below it; deeper ones are a ``ValueError`` at
construction (xgrammar's conversion cost grows steeply with depth, and Python's JSON codecs recurse)."""

DEFAULT_MAX_WHITESPACE = 16
"""Default bound on whitespace characters per gap in JSON (see :meth:`Constraint.json_schema`)."""

DEFAULT_TOOL_MAX_WHITESPACE = 4
"""Default cap on consecutive whitespace inside a tool call's JSON arguments, so a model cannot spin on
spaces. Its own knob, tighter than :data:`DEFAULT_MAX_WHITESPACE` (the bound for a JSON response, which
leaves room for deep pretty-printing); the tool formats (``tools/call_format.py``) use it."""

ConstraintKind = Literal["json_schema", "json_object", "regex", "grammar", "choice", "structural_tag"]


CONSTRAINT_KINDS: tuple[str, ...] = ("json_schema", "json_object", "regex", "grammar", "choice", "structural_tag")


def _check_depth(value: Any, what: str) -> None:
    """``ValueError`` if ``value`` nests JSON containers deeper than :data:`MAX_NESTING_DEPTH`; an
    iterative walk, O(size), that also stops on a container that contains itself."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    pop, push = stack.pop, stack.append
    while stack:
        node, depth = pop()
        if isinstance(node, Mapping):
            children = node.values()
        elif isinstance(node, (list, tuple)):
            children = node
        else:
            continue
        if depth > MAX_NESTING_DEPTH:
            raise ValueError(f"invalid {what}: nested deeper than {MAX_NESTING_DEPTH} levels "
                             f"(MAX_NESTING_DEPTH)")
        for child in children:
            if isinstance(child, (Mapping, list, tuple)):
                push((child, depth + 1))


OUTPUT_CHECKS: dict[str, Callable[[str], Any]] = {}
"""The output checks a structural tag's options may name: option name -> the check built from its
definition (an object with ``problem_of_tokens``, as :class:`~.schema_support.OutputCheck`). The room
that defines a check registers it when it is imported: the tools room registers ``keys_check``
(``tools/key_check.py``), so this room needs no import of it."""


def output_check(name: str, definition: str) -> Any:
    """The registered output check ``name`` built from ``definition`` (a ``ValueError`` from the check for a
    malformed one; a ``ValueError`` naming it when no such check is registered)."""
    factory = OUTPUT_CHECKS.get(name)
    if factory is None:
        raise ValueError(f"the constraint names the output check {name!r}, which no imported module registers "
                         f"(known: {sorted(OUTPUT_CHECKS)})")
    return factory(definition)


def _parse_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"invalid {what}: not valid JSON ({e})") from e
    except RecursionError:
        raise ValueError(f"invalid {what}: nested deeper than {MAX_NESTING_DEPTH} levels "
                         f"(MAX_NESTING_DEPTH)") from None


def _from_legacy_tag(tag: Mapping[str, Any]) -> dict[str, Any]:
    """The legacy structural-tag form (``{"type": "structural_tag", "structures": [{"begin", "schema",
    "end"}], "triggers": [...], "at_least_one"}``, which vLLM's and SGLang's OpenAI servers still take and
    SGLang's tool-call detectors write) as the format it stands for: ``triggered_tags`` of one tag per
    structure, each a JSON schema between its begin and end (a missing or null schema is any JSON, as
    both engines read it). ``ValueError`` naming the field that is wrong."""
    extra = set(tag) - {"type", "structures", "triggers", "at_least_one"}
    if tag.get("type", "structural_tag") != "structural_tag" or extra:
        raise ValueError("invalid structural tag: the legacy form holds only type, structures, triggers and "
                         f"at_least_one, got {sorted(map(str, tag))}")
    structures, triggers = tag["structures"], tag.get("triggers")
    if not isinstance(structures, list) or not structures:
        raise ValueError("invalid structural tag: \"structures\" must be a non-empty list")
    if not isinstance(triggers, list) or not triggers or not all(isinstance(t, str) and t for t in triggers):
        raise ValueError("invalid structural tag: \"triggers\" must be a non-empty list of non-empty strings")
    at_least_one = tag.get("at_least_one", False)
    if not isinstance(at_least_one, bool):
        raise ValueError(f"invalid structural tag: \"at_least_one\" must be a boolean, got {at_least_one!r}")
    tags = []
    for i, st in enumerate(structures):
        if not isinstance(st, Mapping) or not isinstance(st.get("begin"), str) or not isinstance(st.get("end"), str):
            raise ValueError(f"invalid structural tag: structures[{i}] must be an object with string begin and end")
        if set(st) - {"begin", "schema", "end"}:
            raise ValueError(f"invalid structural tag: structures[{i}] holds only begin, schema and end")
        schema = st.get("schema")
        if isinstance(schema, str):
            schema = _parse_json(schema, f"structural tag structures[{i}].schema")
        if schema is None:
            schema = {}
        if not isinstance(schema, (Mapping, bool)):
            raise ValueError(f"invalid structural tag: structures[{i}].schema must be a JSON schema, got "
                             f"{type(schema).__name__}")
        tags.append({"type": "tag", "begin": st["begin"], "content": {"type": "json_schema", "json_schema": schema},
                     "end": st["end"]})
    return {"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": list(triggers), "tags": tags,
                                                 "at_least_one": at_least_one}}


def _canonical_json(value: Any) -> str:
    """Compact JSON that keeps the key order: the order of ``properties`` in a schema is the order
    the grammar asks for, so two schemas that differ only there are different constraints."""
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except RecursionError:
        raise ValueError("nested too deeply to serialise as JSON") from None
    except (TypeError, ValueError) as e:
        raise ValueError(f"not serialisable as JSON: {e}") from e


@dataclass(frozen=True)
class Constraint:
    """One request's constraint. ``spec`` is the canonical text of the constraint (JSON for schemas and
    tags, the pattern / grammar text, or the JSON list of choices); ``options`` are extra knobs that
    change the compiled grammar and so are part of the cache key."""

    kind: ConstraintKind
    spec: str
    options: tuple[tuple[str, Any], ...] = field(default=())

    @cached_property
    def key(self) -> str:
        """The canonical cache key (computed once): kind, options and spec. Key order inside a schema
        is kept (it is the order the grammar asks for); whitespace and formatting are not."""
        return f"{self.kind}|{json.dumps(dict(self.options), sort_keys=True)}|{self.spec}"

    @cached_property
    def schema_check(self) -> Any:
        """For a JSON schema with keywords the grammar does not enforce: the
        :class:`~.schema_support.OutputCheck` the finished output must pass; for a tool structural tag
        with a ``keys_check``: its :class:`~thinkgate.structured_output.tools.key_check.KeysCheck`; None otherwise. ``ValueError`` naming the keyword and its path for a schema that can never
        be honoured, or (``unsupported="reject"``) that needs the check. Computed once per constraint,
        when the compiler validates it (see :mod:`.schema_support`)."""
        if self.kind == "structural_tag" and self.option("keys_check") is not None:
            return output_check("keys_check", self.option("keys_check"))
        if self.kind != "json_schema":
            return None
        from .schema_support import schema_check
        return schema_check(self.spec, strict=bool(self.option("strict", True)),
                            unsupported=self.option("unsupported", "check"))

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the fields only (the compiler sends constraints to its worker processes): the cached
        ``key`` and ``schema_check`` are recomputed on the other side when asked for."""
        return {"kind": self.kind, "spec": self.spec, "options": self.options}

    def option(self, name: str, default: Any = None) -> Any:
        for k, v in self.options:
            if k == name:
                return v
        return default

    # -- constructors ------------------------------------------------------------------------
    @classmethod
    def json_schema(cls, schema: Mapping[str, Any] | str | bool, *, any_whitespace: bool = True,
                    max_whitespace: int | None = DEFAULT_MAX_WHITESPACE, strict: bool = True,
                    unsupported: Literal["check", "reject"] = "check") -> Constraint:
        """A JSON schema (a dict, ``True``/``False``, or its JSON text).

        Whitespace: ``any_whitespace=True`` (default, as vLLM and xgrammar do) lets the model put
        whitespace between JSON tokens, at most ``max_whitespace`` characters per gap (default 16:
        pretty-printing to depth 8 fits), so a model cannot spin on spaces or newlines until
        ``max_tokens``; a gap is a run of whitespace outside strings, whitespace inside strings is
        not counted, and the bound is enforced beside xgrammar's unbounded grammar (``jsonws/bound.py``)
        with the same accepted outputs as a bound in the grammar; ``max_whitespace=None`` lifts the
        bound, ``max_whitespace=0`` allows none (compact JSON, ``","`` and ``":"``).
        ``any_whitespace=False`` allows exactly one line as ``json.dumps`` writes it (``", "`` and
        ``": "``, no other whitespace).
        ``strict`` (default) forbids properties and items the schema does not list (an unset
        ``additionalProperties`` is read as false), as engines do for structured output.

        Keywords the grammar cannot enforce (``uniqueItems``, ``not``, ``if``, ``oneOf`` exclusivity...:
        the table is in :mod:`.schema_support`): with ``unsupported="check"`` (default) the finished
        output is validated against the whole schema when the grammar accepts a stop token, and a
        violation puts the request in ``ERROR``; with ``unsupported="reject"`` ``add_request`` raises a
        ``ValueError`` naming the keyword and its path. An external or unresolved ``$ref``,
        ``"type": []`` and a ``required`` no object can satisfy are always a ``ValueError``."""
        if unsupported not in ("check", "reject"):
            raise ValueError(f"unsupported must be 'check' or 'reject', got {unsupported!r}")
        if isinstance(schema, str):
            schema = _parse_json(schema, "JSON schema")
        if not isinstance(schema, (dict, bool)):
            raise ValueError(f"invalid JSON schema: expected an object, got {type(schema).__name__}")
        _check_depth(schema, "JSON schema")
        return cls("json_schema", _canonical_json(schema),
                   _opts(any_whitespace=bool(any_whitespace), max_whitespace=_ws(max_whitespace),
                         strict=bool(strict), unsupported=unsupported))

    @classmethod
    def json_object(cls, *, any_whitespace: bool = True,
                    max_whitespace: int | None = DEFAULT_MAX_WHITESPACE) -> Constraint:
        """Any JSON object (OpenAI's ``response_format: json_object``); whitespace as for
        :meth:`json_schema`."""
        return cls("json_object", "{}", _opts(any_whitespace=bool(any_whitespace),
                                              max_whitespace=_ws(max_whitespace)))

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
    def structural_tag(cls, tag: Mapping[str, Any] | str, *, covers_reasoning: bool = False,
                       keys_check: str | None = None, json_whitespace: int | None = None) -> Constraint:
        """xgrammar's structural-tag format (``{"type": "structural_tag", "format": {...}}``; the legacy form
        with ``structures`` and ``triggers`` is taken as the ``triggered_tags`` format it stands for).

        ``covers_reasoning=True`` marks a tag that describes the whole output, the thinking included
        (harmony: the call's header, which names the function, is written before any reasoning end
        can be seen); the manager then applies it from the first token, as with
        ``include_reasoning=False``. ``keys_check``: for a tool constraint whose grammar takes
        argument keys in any order, the definition of the output check of those keys
        (``tools/key_check.py``; the tool builders set it). ``json_whitespace``: a whitespace bound the matcher
        enforces beside the grammar, as for JSON (:attr:`whitespace_bound`): only for a tag whose every output
        is JSON text, whitespace and control tokens (a forced call of the JSON-call families: the tool builders
        set it), else the bound's lexer would misread strings."""
        if isinstance(tag, str):
            tag = _parse_json(tag, "structural tag")
        if not isinstance(tag, Mapping):
            raise ValueError(f"invalid structural tag: expected an object, got {type(tag).__name__}")
        _check_depth(tag, "structural tag")
        if "structures" in tag:
            tag = _from_legacy_tag(tag)
        opts: dict[str, Any] = {}
        if covers_reasoning:
            opts["covers_reasoning"] = True
        if keys_check is not None:
            output_check("keys_check", keys_check)  # ValueError now, on the caller's thread, for a malformed one
            opts["keys_check"] = keys_check
        if json_whitespace is not None:
            if _ws(json_whitespace) == 0:
                raise ValueError("json_whitespace must be a positive integer or None, got 0")
            opts["max_whitespace"] = json_whitespace
        return cls("structural_tag", _canonical_json(dict(tag)), _opts(**opts) if opts else ())

    @property
    def whitespace_bound(self) -> int | None:
        """The bound on whitespace characters per gap that the matcher enforces beside the grammar
        (``jsonws/bound.py``): ``max_whitespace`` of a JSON schema or object with ``any_whitespace`` and
        a bound of at least 1, or the ``json_whitespace`` of a structural tag; None otherwise (no bound, no
        whitespace at all, or not JSON)."""
        if (self.kind not in ("json_schema", "json_object", "structural_tag")
                or not self.option("any_whitespace", True)):
            return None
        b = self.option("max_whitespace")
        return b if b else None

    @property
    def covers_reasoning(self) -> bool:
        """True when the constraint describes the whole output, thinking included (see
        :meth:`structural_tag`)."""
        return bool(self.option("covers_reasoning", False))


def _ws(max_whitespace: int | None) -> int | None:
    if max_whitespace is None:
        return None
    if isinstance(max_whitespace, bool) or not isinstance(max_whitespace, int) or max_whitespace < 0:
        raise ValueError(f"max_whitespace must be a non-negative integer or None, got {max_whitespace!r}")
    return max_whitespace


def _opts(**kw: Any) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted(kw.items()))
