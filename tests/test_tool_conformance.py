"""Every tool format accepts and reads back the calls its model's chat template writes (issue 11).

For each renderer of ``template_render.py`` (a model family's chat template, written from the template and
never from our format definitions), each example of the tool corpus (``tests/data/tools/corpus.json``,
the base corpus and the real-world ``shapes``) and each mode:

- ``required``: ``tool_choice="required"`` over the corpus tools the format takes, in groups of
  :data:`GROUP` (one constraint per group); the thinking then the rendered call pass the
  StructuredOutputManager token by token (every token also allowed by that step's bitmask), the stop
  token terminates the request, and ``read_ids`` returns exactly that call and no content (name, and
  arguments equal as JSON values: ``1`` is not ``true``);
- ``named``: the tool named in ``tool_choice`` (one constraint per tool: the real-world shapes only,
  the base corpus has its named tests in ``test_tool_formats.py``);
- ``auto``: no constraint; ``read_ids`` over every corpus tool the format takes returns the call;
- ``strict``: ``tool_choice="auto"`` with the real-world shapes, every tool ``strict: true`` (one
  constraint per group): the constraint accepts the call and the reader, which validates strict
  arguments, returns it.

A case is a renderer x a corpus example x a mode. Cases a format cannot express are not run:
:data:`CANNOT_EXPRESS` lists them with the reason. Cases that fail today because of the format bugs of
issue 11 are in :data:`KNOWN_FAILING_BEFORE_FIX`, with the reason: the test asserts that the failing
cases are exactly those, so a fix that makes one pass fails the test until its entry is removed (the
merge empties the list). Vocabularies: the real ones where they have the family's markers (Qwen3.6,
DeepSeek V4, Magistral, whose ids come from mistral-common's own encoder), else ``thinkgate.testing.vocabularies``'s
synthetic ones.

The matrix is slow (a compile per group, seconds each on the 248k-token vocabularies): the ``required``
cases of the real-world shapes for four renderers on real vocabularies (:data:`QUICK`) run in the quick
selection (``-m "not slow"``), the rest is marked slow (the default run, CI, runs everything).
"""

from __future__ import annotations

import functools
import itertools
import json
import math
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pytest
from support import CORPUS, FAMILIES, bound, closing_cache, vocab
from template_render import RENDERERS, render, render_ids

from thinkgate.structured_output.tools import build_tool_constraint, get_tool_format, get_tool_reader
from thinkgate.testing.streams import replay

MODES = ("required", "named", "auto", "strict")
ENTRIES: list[dict[str, Any]] = CORPUS["tools"]
BY_NAME = {e["tool"]["function"]["name"]: e for e in ENTRIES}
SHAPES = [n for n, e in BY_NAME.items() if "shapes" in e]


# --------------------------------------------------------------------------------------------------
# JSON values, compared as JSON: booleans are not numbers, 1 == 1.0


def json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


def test_json_equal_tells_booleans_from_numbers() -> None:
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]}) and not json_equal({"a": True}, {"a": 1})
    assert not json_equal({"a": None}, {"a": "None"}) and not json_equal({"a": 1}, {"a": 1, "b": 2})


# --------------------------------------------------------------------------------------------------
# the cases


@dataclass(frozen=True)
class Case:
    renderer: str
    tool: str
    k: int          # the example's index in the corpus entry
    mode: str

    @property
    def id(self) -> str:
        return f"{self.renderer}:{self.tool}#{self.k}:{self.mode}"

    @property
    def args(self) -> dict[str, Any]:
        return BY_NAME[self.tool]["examples"][self.k]


@dataclass(frozen=True)
class Rule:
    """Cases by renderer, tool (``tool`` or ``tool#k``) and mode (empty: all), with the reason."""
    renderers: tuple[str, ...]
    cases: tuple[str, ...]
    reason: str
    modes: tuple[str, ...] = MODES

    def matches(self, c: Case) -> bool:
        return (c.renderer in self.renderers and c.mode in self.modes
                and (c.tool in self.cases or f"{c.tool}#{c.k}" in self.cases))


# -- case lists by what the examples hold (defined from the corpus and the schemas, not from results)


def _resolve(schema: Any, root: dict[str, Any]) -> dict[str, Any]:
    while isinstance(schema, dict) and "$ref" in schema:
        schema = root["$defs"][schema["$ref"].split("/")[-1]]
    return schema if isinstance(schema, dict) else {}


def _params(tool: str) -> dict[str, Any]:
    return BY_NAME[tool]["tool"]["function"].get("parameters") or {}


def examples_where(pred) -> tuple[str, ...]:
    """``tool#k`` of every corpus example for which ``pred(tool, example)`` holds."""
    return tuple(f"{n}#{k}" for n, e in BY_NAME.items() for k, ex in enumerate(e["examples"]) if pred(n, ex))


def _untyped_string(tool: str, ex: dict[str, Any]) -> bool:
    """A top-level string value whose schema is not simply ``type: string`` (untyped, a union, a mixed enum)."""
    props = _params(tool).get("properties", {})
    for k, v in ex.items():
        s = _resolve(props.get(k, {}), _params(tool))
        values = [s["const"]] if "const" in s else s.get("enum", [None])
        if isinstance(v, str) and s.get("type") != "string" and not (
                "type" not in s and all(isinstance(x, str) for x in values)):
            return True
    return False


def _out_of_schema_order(tool: str, ex: dict[str, Any]) -> bool:
    order = list(_params(tool).get("properties", {}))
    return [k for k in order if k in ex] != list(ex)


def _out_of_sorted_order(tool: str, ex: Any) -> bool:
    """Some object of the example (at any depth) whose schema order is not its keys sorted as Jinja's
    dictsort sorts them (case-insensitively)."""
    def walk(schema: Any, value: Any) -> bool:
        schema = _resolve(schema, _params(tool))
        if isinstance(value, dict):
            props = schema.get("properties", {})
            order = [k for k in props if k in value] + [k for k in value if k not in props]
            if order != sorted(order, key=str.lower):
                return True
            extra = schema.get("additionalProperties") if isinstance(schema.get("additionalProperties"), dict) else {}
            return any(walk(props.get(k, extra), x) for k, x in value.items())
        if isinstance(value, list):
            return any(walk(schema.get("items", {}), x) for x in value)
        return False
    return walk(_params(tool), ex)


def _names_outside(pattern: str):
    import re
    return lambda tool, ex: any(not re.fullmatch(pattern, k) for k in _params(tool).get("properties", {}))


NO_ARGUMENTS = examples_where(lambda n, ex: ex == {})
TOP_LEVEL_BOOL_OR_NULL = examples_where(lambda n, ex: any(v is None or isinstance(v, bool) for v in ex.values()))
NON_STRING_VALUE_NOT_STRICT = examples_where(lambda n, ex: any(not isinstance(v, str) for v in ex.values())
                                             and not BY_NAME[n]["tool"]["function"].get("strict"))
UNTYPED_STRING = examples_where(_untyped_string)
CALLER_ORDER = examples_where(_out_of_schema_order)
SORTED_ORDER = examples_where(_out_of_sorted_order)
def _has_null(v: Any) -> bool:
    if isinstance(v, dict):
        return any(_has_null(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_null(x) for x in v)
    return v is None


NULL_ANYWHERE = examples_where(lambda n, ex: _has_null(ex))
def _admits_string(tool: str, schema: Any) -> bool:
    s = _resolve(schema, _params(tool))
    if not isinstance(s, dict):
        return bool(s)
    if "type" in s:
        return "string" in (s["type"] if isinstance(s["type"], list) else [s["type"]])
    alts = s.get("anyOf") or s.get("oneOf")
    if alts:
        return any(_admits_string(tool, a) for a in alts)
    return not any(k in s for k in ("enum", "const", "properties", "items"))


def _typed_container(tool: str, ex: dict[str, Any]) -> bool:
    """A top-level array or object value, under a schema that admits no string, that JSON and Python's
    repr write differently (a parameter that admits strings also takes the text as a raw string)."""
    props = _params(tool).get("properties", {})
    return any(isinstance(v, (list, dict)) and json.dumps(v, ensure_ascii=False) != str(v)
               and not _admits_string(tool, props.get(k, {})) for k, v in ex.items())


TOP_LEVEL_CONTAINER = examples_where(_typed_container)
NAMES_OUTSIDE_XML = examples_where(_names_outside(r"[A-Za-z_][A-Za-z0-9_.\-]*"))
NAMES_OUTSIDE_IDENTIFIERS = examples_where(_names_outside(r"[A-Za-z_][A-Za-z0-9_]*"))

def _not_python_names(tool: str, ex: dict[str, Any]) -> bool:
    """The tool's name is no (dotted) Python name, or a property's name no Python identifier (a keyword)."""
    import keyword
    import unicodedata

    def ok(n: str) -> bool:
        return n.isidentifier() and not keyword.iskeyword(n) and unicodedata.normalize("NFKC", n) == n
    return not all(ok(p) for p in tool.split(".")) or not all(ok(k) for k in _params(tool).get("properties", {}))


def _string_holding(chars: str):
    """A string argument (at the top level) holding one of ``chars``."""
    return lambda tool, ex: any(isinstance(v, str) and any(c in v for c in chars) for v in ex.values())


NOT_PYTHON_NAMES = examples_where(_not_python_names)
NOT_WORD_NAMES = examples_where(lambda tool, ex: re.fullmatch(r"\w+", tool) is None)
PYTHONIC = ("pythonic", "llama4_pythonic", "olmo3", "lfm2")

XML = ("qwen3_coder", "qwen3_5", "qwen3_6", "glm45", "glm47", "minimax_m2")
DSML = ("deepseek_v32", "deepseek_v4")
QWEN_TABLE = ("hermes", "qwen3_coder", "qwen3_5", "qwen3_6", "llama3_json", "kimi_k2", "glm45", "glm47", "minimax_m2", "gemma4",
              "hf_gemma4",
              "openai", "gpt_oss_template", "phi4_mini_json", "xlam", "jamba", "granite", "granite_20b_fc", "internlm",
              *PYTHONIC, "functiongemma", "gigachat3", "apertus")
CONSTRAINED = ("required", "named", "strict")

CANNOT_EXPRESS: list[Rule] = [
    Rule(("qwen3_coder", "qwen3_5", "qwen3_6", "minimax_m2"), ("execute_code",),
         "the string value holds '</parameter>', the end of a raw XML value in these formats: the template "
         "writes it unescaped"),
    Rule(QWEN_TABLE, ("create_issue#0",),
         "the string value spells '<tool_call>', a control token of the Qwen table these vocabularies share: the "
         "tokenizer writes it as that token, and control tokens never appear inside arguments (the same text in "
         "ordinary tokens is accepted: test_tool_formats.py)"),
    # -- xml_a
    Rule(("seed_oss", "zaya", "mimo", "step3p5"), ("execute_code",),
         "the string value holds '</parameter>', the end of a raw XML value in these formats (Qwen's parameter "
         "syntax): the template writes it unescaped"),
    Rule(("seed_oss", "zaya", "mimo", "longcat", "hunyuan_a13b", "hy_v3", "hy_v4", "step3", "step3p5", "minicpm5"),
         ("create_issue#0",),
         "the string value spells '<tool_call>', a control token of the Qwen3.6 table that these families' "
         "vocabularies (real or synthetic: the table plus the family's markers) hold"),
    # -- xml_b
    Rule(("dots",), ("execute_code",), "as minimax_m2: the string value holds '</parameter>', which the template "
         "writes unescaped"),
    Rule(("dots", "plamo3", "k2_horizon", "cohere_command3", "inkling", "minimax_m3", "kimi_k3", "muse", "muse_glimmer",
          "iquest_q1"), ("create_issue#0",), "as the Qwen table: the synthetic vocabulary is Qwen3.6's, where "
         "'<tool_call>' is a control token, and control tokens never appear inside arguments"),
    Rule(("minimax_m3",), NULL_ANYWHERE,
         "MiniMax's serializer of an M3 call leaves null values out (a null member, a null item: the model never "
         "saw null in a call), so the call written lacks them (a required one: the key check refuses it)"),
    Rule(PYTHONIC, NOT_PYTHON_NAMES,
         "a tool name that is no Python name, or a property name that is no Python identifier, cannot be written as a "
         "call with keyword arguments (the request is a ValueError that says so)"),
    Rule(("hf_gemma4",), NOT_WORD_NAMES,
         "Gemma 4's response template names a call with (?P<name>\\w+): a tool name of other characters cannot be "
         "written in its calls (the request is a ValueError that says so; vLLM's hf drops such a call unread)"),
    Rule(("llama4_pythonic",), examples_where(_string_holding('"\\\n\r')),
         'the template writes a string value between double quotes as it is: one holding ", \\ or a line break is '
         "then no Python literal (the renderer writes that text; no reader reads it as the value)"),
    Rule(("olmo3",), examples_where(_string_holding("'\\\n\r")),
         "the template writes a string value between single quotes as it is: one holding ', \\ or a line break is "
         "then no Python literal (the renderer writes that text; no reader reads it as the value)"),
    # -- SGLang-only names
    Rule(("gigachat35", "spark25"), ("create_issue#0",), "as the Qwen table: the synthetic vocabulary is Qwen3.6's, "
         "where '<tool_call>' is a control token, and control tokens never appear inside arguments"),
]
"""Cases not run, with the reason. Not here, because a reader has the schema: typed string values that
read as other JSON types (``"null"``, ``"1.5e3"``, written raw by the XML templates). Llama 3.1's and
harmony's one call per turn is a renderer's ``parallel=False``."""

KNOWN_FAILING_BEFORE_FIX: list[Rule] = [
]
"""Cases that fail today because of the format bugs issue 11 fixes, with the reason (the case lists are
defined from what the examples hold, above)."""


def mode_tools(mode: str, part: str = "all") -> list[str]:
    """The corpus tools a mode's cases call: every tool for ``required`` and ``auto``, the real-world
    shapes for ``named`` and ``strict`` (the base corpus has those modes in test_tool_formats.py);
    ``part`` ``"shapes"`` or ``"base"`` keeps one part of the corpus."""
    names = SHAPES if mode in ("named", "strict") else list(BY_NAME)
    if part == "all":
        return names
    return [n for n in names if (n in SHAPES) == (part == "shapes")]


def cases(renderers: Iterable[str], modes: Iterable[str], part: str = "all") -> list[Case]:
    out = []
    for r in renderers:
        for mode in modes:
            for tool in mode_tools(mode, part):
                for k in range(len(BY_NAME[tool]["examples"])):
                    c = Case(r, tool, k, mode)
                    if not any(rule.matches(c) for rule in CANNOT_EXPRESS):
                        out.append(c)
    return out


# --------------------------------------------------------------------------------------------------
# requests: the tools a format takes, the constraints (compiled once per format, mode and group)

GROUP = 12
"""Tools per request in ``required`` and ``strict``: compile time grows with the tools, so the corpus is
cut into groups (each call is made among the other tools of its group)."""


@functools.lru_cache(maxsize=None)
def refused(fmt: str) -> dict[str, str]:
    """Tools the format refuses (``ValueError`` for a one-tool request), with the message."""
    out = {}
    for name, e in BY_NAME.items():
        try:
            build_tool_constraint([e["tool"]], "required", format=fmt, **bound(fmt))
        except ValueError as err:
            out[name] = str(err)
    return out


@functools.lru_cache(maxsize=None)
def group(fmt: str, mode: str, tool: str) -> tuple[str, ...]:
    names = [n for n in mode_tools(mode) if n not in refused(fmt)]
    if mode == "auto":
        return tuple(names)
    i = names.index(tool) // GROUP * GROUP
    return tuple(names[i:i + GROUP])


@functools.lru_cache(maxsize=None)
def request(fmt: str, mode: str, tool: str) -> tuple[Any, list[dict[str, Any]], Any]:
    """(constraint or None, tools, tool_choice) of the case of ``tool`` in ``mode``."""
    if mode == "named":
        tools, choice = [BY_NAME[tool]["tool"]], {"type": "function", "function": {"name": tool}}
    else:
        tools = [json.loads(json.dumps(BY_NAME[n]["tool"])) for n in group(fmt, mode, tool)]
        for t in tools:
            if mode == "strict":
                t["function"]["strict"] = True
        choice = "required" if mode == "required" else "auto"
    c = None if mode == "auto" else build_tool_constraint(tools, choice, format=fmt, **bound(fmt))
    assert (c is None) == (mode == "auto")
    return c, tools, choice


# --------------------------------------------------------------------------------------------------
# one case


def run_case(c: Case, *, check_mask: bool = True) -> tuple[bool, bool, str]:
    """(accepted, read back exactly, what went wrong or "")."""
    r = RENDERERS[c.renderer]
    fmt = r.format
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    if c.tool in refused(fmt):
        return False, False, f"request refused: {refused(fmt)[c.tool]}"
    calls = [(c.tool, c.args)]
    body = render_ids(c.renderer, calls, v)
    think = v.encode(fam.thinking)
    constraint, tools, choice = request(fmt, c.mode, c.tool)
    accepted, why = True, ""
    if constraint is not None:
        accepted, why = _drive(fam, constraint, think + body + [min(v.stop_token_ids)], check_mask)
    ids = think + body if get_tool_format(fmt).covers_reasoning else body   # harmony, Muse: the whole output
    got = get_tool_reader(fmt, tools, choice, **bound(fmt)).read_ids(ids, v)
    exact = (len(got.calls) == 1 and got.calls[0].name == c.tool
             and json_equal(json.loads(got.calls[0].arguments), c.args) and not (got.content or "").strip())
    if not exact:
        read = [(x.name, x.arguments) for x in got.calls]
        why = (why + "; " if why else "") + f"read back {read} content {(got.content or '')[:60]!r}"
    return accepted, exact, why


COMPILE_TIMEOUT_S = 600.0
"""Generous: a group of XML tools compiles in seconds alone, far longer on a loaded machine."""


@closing_cache(keep=3)
def manager(vocab_name: str, parser: str | None):
    from thinkgate.structured_output.step.manager import StructuredOutputManager
    return StructuredOutputManager(vocab(vocab_name), parser, max_num_seqs=2, num_compile_threads=1,
                                   compile_timeout_s=COMPILE_TIMEOUT_S)


def add_ready_request(fam, constraint):
    mgr = manager(fam.vocab, fam.parser)
    rid = f"c{next(_RIDS)}"
    mgr.add_request(rid, constraint, vocab(fam.vocab).encode(fam.prompt), chat_template_kwargs=fam.kwargs or None,
                    include_reasoning=fam.include_reasoning)
    deadline = time.monotonic() + COMPILE_TIMEOUT_S + 10
    while not mgr.is_compiled(rid) and time.monotonic() < deadline:
        time.sleep(0.005)
    assert mgr.is_compiled(rid) and mgr.error(rid) is None, mgr.error(rid)
    return mgr, rid


_RIDS = itertools.count()


def _drive(fam, constraint, ids: list[int], check_mask: bool) -> tuple[bool, str]:
    v = vocab(fam.vocab)
    mgr, rid = add_ready_request(fam, constraint)
    try:
        r = replay(mgr, rid, ids, check_mask=check_mask)
    finally:
        mgr.remove_request(rid)
    k = r.accepted
    if r.disagreement is not None:
        return False, r.message or ""
    if r.status == "error":
        return False, f"token {k} {v.decode([ids[k]])!r} rejected after {v.decode(ids[:k])[-50:]!r}"
    if r.status != "terminated":
        return False, "not terminated by the stop token"
    if k != len(ids):
        return False, f"terminated early at token {k - 1}"
    return True, ""


# --------------------------------------------------------------------------------------------------
# the tests


QUICK = ("hermes", "qwen3_5", "deepseek_v4", "mistral")
PARAMS = [pytest.param(r, m, part, id=f"{r}-{m}-{part}",
                       marks=() if (m == "required" and part == "shapes" and r in QUICK) else pytest.mark.slow)
          for r in RENDERERS for m in MODES for part in (("shapes",) if m in ("named", "strict") else ("shapes", "base"))]


@pytest.mark.parametrize(("renderer", "mode", "part"), PARAMS)
def test_template_calls_are_accepted_and_read_back(renderer: str, mode: str, part: str) -> None:
    """The failing cases are exactly the known ones (KNOWN_FAILING_BEFORE_FIX); the others pass."""
    run = cases([renderer], [mode], part)
    failing = {}
    for c in run:
        accepted, exact, why = run_case(c)
        if not (accepted and exact):
            failing[c.id] = why
    known = {c.id for c in run if any(rule.matches(c) for rule in KNOWN_FAILING_BEFORE_FIX)}
    new = {k: w for k, w in failing.items() if k not in known}
    fixed = sorted(known - set(failing))
    assert not new and not fixed, (
        f"{len(new)} unexpected failures:\n" + "\n".join(f"  {k}: {w}" for k, w in sorted(new.items()))
        + f"\n{len(fixed)} known failures now pass (remove them from KNOWN_FAILING_BEFORE_FIX): {fixed}")


@pytest.mark.parametrize("renderer", [pytest.param(r, marks=() if r in QUICK else pytest.mark.slow)
                                      for r, x in RENDERERS.items() if x.parallel])
def test_two_calls_in_one_turn(renderer: str) -> None:
    """Two calls of one turn, as the template joins them, are accepted and read back in order (two tools
    whose arguments every format takes today: one string each, in schema order)."""
    fmt = RENDERERS[renderer].format
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    calls = [("get_weather", {"location": "Zürich", "unit": "celsius"}), ("get_time", {"tz": "Europe/Paris"})]
    tools = [BY_NAME[n]["tool"] for n, _ in calls]
    constraint, choice = build_tool_constraint(tools, "required", format=fmt, **bound(fmt)), "required"
    body = render_ids(renderer, calls, v)
    ok, why = _drive(fam, constraint, v.encode(fam.thinking) + body + [min(v.stop_token_ids)], True)
    assert ok, why
    got = get_tool_reader(fmt, tools, choice, **bound(fmt)).read_ids(body, v)
    assert [(x.name, json.loads(x.arguments)) for x in got.calls] == calls


def test_renderers_cover_every_format_with_a_model_syntax() -> None:
    from thinkgate.structured_output.tools import list_tool_formats
    assert {r.format for r in RENDERERS.values()} == set(list_tool_formats()) - {"json"}
    for r in RENDERERS.values():
        assert r.format in FAMILIES and r.source


def test_renderers_write_the_templates_text() -> None:
    """Spot checks of the renderers against text the templates' own documentation shows."""
    assert render("deepseek_v4", [("noop", {})]) == (
        '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="noop">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>')
    assert render("qwen3_coder", [("f", {"a": True, "b": None, "c": [1], "d": "x"})]) == (
        "\n<tool_call>\n<function=f>\n<parameter=a>\nTrue\n</parameter>\n<parameter=b>\nNone\n</parameter>\n"
        "<parameter=c>\n[1]\n</parameter>\n<parameter=d>\nx\n</parameter>\n</function>\n</tool_call>")
    assert render("gemma4", [("f", {"b": 1, "A": {"z": None, "y": "s"}})]) == (
        '<|tool_call>call:f{A:{y:<|"|>s<|"|>,z:None},b:1}<tool_call|>')
    assert render("gpt_oss_template", [("f", {"a": 1})]) == " to=functions.f<|channel|>commentary json<|message|>{\"a\": 1}"
    with pytest.raises(ValueError, match="one tool call per turn"):
        render("llama3_json", [("f", {}), ("g", {})])
    with pytest.raises(ValueError, match="unknown renderer"):
        render("nope", [("f", {})])


def test_magistral_ids_come_from_mistral_common() -> None:
    from template_render import mistral_ids
    v = vocab("magistral")
    ids = mistral_ids([("get_weather", {"location": "Zürich"})])
    assert ids[0] == v.token_id("[TOOL_CALLS]") and v.token_id("[ARGS]") in ids
    assert v.decode(ids) == '[TOOL_CALLS]get_weather[ARGS]{"location": "Zürich"}'
