"""Workloads: requests with constraints, prompts and scripted outputs (the simulated engine of ``python -m bench``).

A :class:`ScriptedRequest` is what a stand-in model "wants" to write: its thinking (text that would
violate any grammar: braces, quotes, control words), the end marker, then a valid output for its
constraint, then a stop token. The loop gives the scripted token a large logit bonus over noise; the
mask decides what may be sampled, so an output that leaves the script is still checked.

Every output is checked against its request with :meth:`ScriptedRequest.check`: JSON validated
against the schema (``jsonschema``), regex full-matched, choice compared, tool calls read back with the
format's reader and their arguments validated against the tool schemas.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.structured_output import Constraint

__all__ = ["ScriptedRequest", "Workload", "KINDS", "SCHEMAS", "REGEXES"]

KINDS = ("json", "regex", "choice", "tool_required", "tool_named", "tool_auto")
DEFAULT_MIX = {"json": 0.40, "regex": 0.15, "choice": 0.10, "tool_required": 0.15, "tool_named": 0.10,
               "tool_auto": 0.10}

# -- JSON schemas with a valid instance each (keys in schema order: strict JSON keeps that order) --------
SCHEMAS: list[tuple[dict[str, Any], Callable[[random.Random], dict[str, Any]]]] = [
    (
        {"type": "object", "properties": {
            "name": {"type": "string", "maxLength": 40},
            "age": {"type": "integer", "minimum": 0, "maximum": 150},
            "email": {"type": "string", "maxLength": 60}},
         "required": ["name", "age", "email"], "additionalProperties": False},
        lambda r: {"name": r.choice(["Ada Lovelace", "Grace Hopper", "Zoë Müller", "李雷"]),
                   "age": r.randint(18, 99), "email": r.choice(["ada@example.com", "g.h@navy.mil"])},
    ),
    (
        {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30},
            "unit": {"enum": ["celsius", "fahrenheit"]},
            "days": {"type": "integer", "minimum": 1, "maximum": 14}},
         "required": ["city", "unit"], "additionalProperties": False},
        lambda r: {"city": r.choice(["Paris", "São Paulo", "Tokyo", "New York"]),
                   "unit": r.choice(["celsius", "fahrenheit"]), "days": r.randint(1, 14)},
    ),
    (
        {"type": "object", "properties": {
            "order_id": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]{4}$"},
            "items": {"type": "array", "maxItems": 4, "items": {
                "type": "object", "properties": {
                    "sku": {"type": "string", "maxLength": 12},
                    "qty": {"type": "integer", "minimum": 1, "maximum": 99}},
                "required": ["sku", "qty"], "additionalProperties": False}},
            "express": {"type": "boolean"}},
         "required": ["order_id", "items", "express"], "additionalProperties": False},
        lambda r: {"order_id": f"{r.choice(['AB', 'ZX', 'QQ'])}-{r.randint(1000, 9999)}",
                   "items": [{"sku": r.choice(["pen", "book-7", "mug"]), "qty": r.randint(1, 9)}
                             for _ in range(r.randint(1, 3))],
                   "express": r.random() < 0.5},
    ),
    (
        {"type": "object", "properties": {
            "sentiment": {"enum": ["positive", "negative", "neutral"]},
            "confidence": {"type": "number", "minimum": 0, "maximum": 1},
            "keywords": {"type": "array", "items": {"type": "string", "maxLength": 20}, "maxItems": 5}},
         "required": ["sentiment", "confidence", "keywords"], "additionalProperties": False},
        lambda r: {"sentiment": r.choice(["positive", "negative", "neutral"]),
                   "confidence": round(r.random(), 2),
                   "keywords": r.sample(["fast", "cheap", "late", "broken", "great"], r.randint(0, 3))},
    ),
    (
        {"type": "object", "properties": {
            "address": {"type": "object", "properties": {
                "street": {"type": "string", "maxLength": 40},
                "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["street", "zip"], "additionalProperties": False},
            "tags": {"type": "array", "items": {"enum": ["home", "work", "other"]}, "maxItems": 3},
            "note": {"type": ["string", "null"], "maxLength": 30}},
         "required": ["address", "tags", "note"], "additionalProperties": False},
        lambda r: {"address": {"street": r.choice(["1 Main St", "Rue de l'Été 5"]), "zip": f"{r.randint(10000, 99999)}"},
                   "tags": r.sample(["home", "work", "other"], r.randint(0, 2)),
                   "note": r.choice([None, "ring twice", "🙂 back door"])},
    ),
]

REGEXES: list[tuple[str, Callable[[random.Random], str]]] = [
    (r"\d{3}-\d{3}-\d{4}", lambda r: f"{r.randint(200, 999)}-{r.randint(100, 999)}-{r.randint(1000, 9999)}"),
    (r"(19|20)\d{2}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
     lambda r: f"20{r.randint(10, 29)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"),
    (r"[a-z]{3,10}@[a-z]{3,8}\.(com|org|net)",
     lambda r: f"{r.choice(['alice', 'bob', 'carol'])}@{r.choice(['mail', 'example'])}.{r.choice(['com', 'org'])}"),
]

_CHOICES = [["positive", "negative", "neutral"], ["yes", "no"], ["Paris", "London", "Berlin", "Madrid"]]

_TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "maxLength": 30}, "unit": {"enum": ["celsius", "fahrenheit"]}},
            "required": ["city", "unit"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "search_flights", "description": "Find flights",
        "parameters": {"type": "object", "properties": {
            "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "passengers": {"type": "integer", "minimum": 1, "maximum": 9}},
            "required": ["origin", "destination", "passengers"], "additionalProperties": False}}},
    {"type": "function", "function": {
        "name": "add_todo", "description": "Add a todo item",
        "parameters": {"type": "object", "properties": {
            "title": {"type": "string", "maxLength": 40},
            "priority": {"type": "integer", "minimum": 1, "maximum": 5},
            "labels": {"type": "array", "items": {"type": "string", "maxLength": 10}, "maxItems": 3}},
            "required": ["title", "priority"], "additionalProperties": False}}},
]


def _tool_args(name: str, r: random.Random) -> dict[str, Any]:
    if name == "get_weather":
        return {"city": r.choice(["Paris", "Zürich", "Tokyo"]), "unit": r.choice(["celsius", "fahrenheit"])}
    if name == "search_flights":
        return {"origin": r.choice(["CDG", "JFK"]), "destination": r.choice(["NRT", "SFO"]), "passengers": r.randint(1, 4)}
    return {"title": r.choice(["buy milk", "call mom", "fix bug #12"]), "priority": r.randint(1, 5),
            "labels": r.sample(["home", "work", "urgent"], r.randint(0, 2))}


_THOUGHTS = [
    'The user wants structured data. Something like {"key": "value"} with quotes " and braces }.',
    "Let me think: should I call a tool? <tool_call> is not what I write here. Maybe [1, 2, 3] or null.",
    'Hmm, "required" fields first; true/false flags; numbers like -1.5e3 are fine. }}}{{{',
    "Plan: answer briefly. Edge cases: unicode é, 中文, emoji 🙂, backslash \\ and tabs\t.",
]


@dataclass
class ScriptedRequest:
    """One request of the workload, with the tokens the stand-in model wants to write."""

    rid: str
    kind: str
    constraint: Constraint | None
    prompt_ids: list[int]
    chat_template_kwargs: dict[str, Any]
    thinking: bool
    script: list[int]          # generated tokens the model wants: [thinking..., end], content..., stop
    content_start: int         # index in ``script`` where the grammar starts
    expected: Any              # what the checker compares with (schema, regex, choices, tool spec)
    checker: Callable[[str], str | None] = field(repr=False)

    def check(self, content_text: str) -> str | None:
        """None when ``content_text`` is a valid output for this request; else why not."""
        return self.checker(content_text)


class Workload:
    """A reproducible stream of :class:`ScriptedRequest` for the Qwen3 family (``qwen3_6`` vocabulary).

    ``tool_format`` names the tool-call syntax (default ``qwen3``); ``think_fraction`` of the requests
    think first (prompt opens ``<think>``), the rest have thinking disabled (the template closes it).
    """

    def __init__(self, vocab: Vocabulary, *, seed: int = 0, mix: dict[str, float] | None = None,
                 think_fraction: float = 0.5, tool_format: str = "qwen3", think_tokens: tuple[int, int] = (8, 40)) -> None:
        self.vocab = vocab
        self.rng = random.Random(seed)
        self.mix = dict(mix or DEFAULT_MIX)
        self.think_fraction = think_fraction
        self.tool_format = tool_format
        self.think_tokens = think_tokens
        self._n = 0
        self._end = vocab.token_id("</think>")
        stops = sorted(vocab.stop_token_ids)
        self._stop = vocab.token_id("<|im_end|>") if vocab.token_id("<|im_end|>") is not None else stops[0]
        self._tools_api = None
        self._encode_cache: dict[str, list[int]] = {}

    def _encode(self, text: str) -> list[int]:
        ids = self._encode_cache.get(text)
        if ids is None:
            ids = self.vocab.encode(text)
            if len(self._encode_cache) < 4096:
                self._encode_cache[text] = ids
        return list(ids)

    def _tools(self):
        if self._tools_api is None:
            from thinkgate.structured_output import tools as api

            self._tools_api = api
        return self._tools_api

    def next(self) -> ScriptedRequest:
        r = self.rng
        self._n += 1
        rid = f"req-{self._n}"
        kind = r.choices(list(self.mix), weights=list(self.mix.values()))[0]
        thinking = r.random() < self.think_fraction
        if kind == "json":
            schema, make = r.choice(SCHEMAS)
            instance = make(r)
            constraint = Constraint.json_schema(schema)
            text = json.dumps(instance, ensure_ascii=False)
            checker = _json_checker(schema)
        elif kind == "regex":
            pattern, make = r.choice(REGEXES)
            constraint = Constraint.regex(pattern)
            text = make(r)
            checker = _regex_checker(pattern)
        elif kind == "choice":
            choices = r.choice(_CHOICES)
            constraint = Constraint.choice(choices)
            text = r.choice(choices)
            checker = _choice_checker(choices)
        else:
            constraint, text, checker = self._tool_request(kind, r)
        question = r.choice(["What's the weather?", "Extract the fields.", "Book it.", "Classify this."])
        prompt = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
        if thinking:
            prompt += "<think>\n"
            kwargs: dict[str, Any] = {"enable_thinking": True}
        else:
            prompt += "<think>\n\n</think>\n\n"
            kwargs = {"enable_thinking": False}
        script: list[int] = []
        if thinking:
            lo, hi = self.think_tokens
            n = r.randint(lo, hi)
            thought: list[int] = []
            while len(thought) < n:
                thought += self._encode(r.choice(_THOUGHTS) + " ")
            script = thought[:n] + [self._end]
        content_start = len(script)
        script += self._encode(text) + [self._stop]
        return ScriptedRequest(rid, kind, constraint, self._encode(prompt), kwargs, thinking, script,
                               content_start, text, checker)

    def _tool_request(self, kind: str, r: random.Random):
        from thinkgate.structured_output.tools import build_tool_constraint, get_tool_reader

        tools = [dict(t, function=dict(t["function"], strict=True)) for t in _TOOLS]
        name = r.choice(tools)["function"]["name"]
        if kind == "tool_named":
            choice: Any = {"type": "function", "function": {"name": name}}
        elif kind == "tool_required":
            choice = "required"
        else:  # auto with strict tools: calls, if any, must be valid; the model chooses to call
            choice = "auto"
        constraint = build_tool_constraint(tools, choice, format=self.tool_format, parallel_tool_calls=False,
                                           vocabulary=self.vocab)
        text = _render_call(self.tool_format, name, _tool_args(name, r))
        schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
        reader = get_tool_reader(self.tool_format, tools, choice, parallel_tool_calls=False)

        def check(out: str) -> str | None:
            import jsonschema

            try:
                result = reader.read(out)
            except Exception as e:  # a reader that cannot parse the output is an invalid output
                return f"reader failed: {e}"
            got = list(result.calls)
            if kind in ("tool_required", "tool_named") and not got:
                return "no tool call"
            if kind in ("tool_required", "tool_named") and result.content:
                return f"text outside the required call: {result.content!r}"
            if len(got) > 1:
                return "more than one call with parallel_tool_calls false"
            for c in got:
                if c.name not in schemas:
                    return f"unknown tool {c.name!r}"
                if kind == "tool_named" and c.name != name:
                    return f"called {c.name!r}, not the named {name!r}"
                if not c.id.startswith("chatcmpl-tool-"):
                    return f"bad call id {c.id!r}"
                try:
                    jsonschema.validate(json.loads(c.arguments), schemas[c.name])
                except Exception as e:
                    return f"arguments invalid: {e}"
            return None

        return constraint, text, check


def _render_call(tool_format: str, name: str, args: dict[str, Any]) -> str:
    """One call as the model's chat template writes it (written from the templates, independently of
    the library's format definitions, so that the bench checks them)."""
    if tool_format in ("hermes", "qwen3"):
        return f'<tool_call>\n{{"name": "{name}", "arguments": {json.dumps(args, ensure_ascii=False)}}}\n</tool_call>'
    if tool_format in ("qwen3_coder", "qwen3_5", "qwen3_6", "qwen3_xml"):
        def value(v: Any) -> str:  # Qwen3-Coder `| string`; Qwen3.5 `tojson` for containers only; Qwen3.6 `tojson`
            if isinstance(v, str):
                return v
            if tool_format == "qwen3_coder" or (tool_format == "qwen3_5" and not isinstance(v, (list, dict))):
                return str(v)
            return json.dumps(v, ensure_ascii=False)
        params = "".join(f"<parameter={k}>\n{value(v)}\n</parameter>\n" for k, v in args.items())
        return f"<tool_call>\n<function={name}>\n{params}</function>\n</tool_call>"
    raise ValueError(f"the bench renders tool calls for qwen3 / hermes / qwen3_coder / qwen3_5 / qwen3_6, "
                     f"not {tool_format!r}")


def _json_checker(schema: dict[str, Any]) -> Callable[[str], str | None]:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema)

    def check(out: str) -> str | None:
        try:
            value = json.loads(out)
        except json.JSONDecodeError as e:
            return f"not JSON: {e}"
        errs = list(validator.iter_errors(value))
        return None if not errs else f"schema: {errs[0].message}"

    return check


def _regex_checker(pattern: str) -> Callable[[str], str | None]:
    rx = re.compile(pattern)
    return lambda out: None if rx.fullmatch(out) else f"does not match {pattern!r}"


def _choice_checker(choices: list[str]) -> Callable[[str], str | None]:
    return lambda out: None if out in choices else f"{out!r} not in {choices}"
