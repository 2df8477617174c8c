"""A checkpoint's response template: its assistant message described as delimited fields.

Where it comes from
-------------------
A checkpoint may ship a ``response_template`` object in its ``tokenizer_config.json``; transformers (5.x)
keeps it as ``tokenizer.response_template`` (earlier versions leave it in ``tokenizer.init_kwargs``), and
:class:`~thinkgate.reasoning.vocabulary.Vocabulary` carries it (``Vocabulary.response_template``; ``from_hf_tokenizer`` reads
both places, as vLLM 0.34 does; ``Vocabulary.with_response_template`` attaches one by hand). vLLM 0.34's
``hf`` and ``beam`` parsers read their markers from it instead of a fixed family; thinkgate's families of
those names do the same (``reasoning/hf.py``; the tool format in ``structured_output/tools/template.py``).

What it says (version 1)::

    {"version": 1,                                   optional, only 1
     "defaults": {"role": "assistant"},              optional; serving takes only "role"
     "start_anchor": "<|turn>model\\n" | [...],       or "start_anchor_pattern": a regex; required: the
                                                     current assistant message starts after its last match
     "fields": {NAME: {"open": str | [str] | "open_pattern": regex,   none: the *implicit* field (at
                                                                      most one), which holds the text
                                                                      outside every other region
                       "close": str | [str] | "close_pattern": regex,
                       "content": "text" | "json" | "xml-inline" | "kv-lines" | "int" | "float" | "bool",
                       "content_args": {...}, "repeats": bool, "join": str, "optional": bool,
                       "transform": {...}, "transform_each": bool}}}

Serving reads three fields: ``thinking`` and ``content`` (plain text: content ``"text"``, no transform, no
join) and ``tool_calls``; a template with any other field or default is refused, as vLLM refuses it.

How thinkgate reads a delimiter
-------------------------------
thinkgate decides at tokens, not with regexes over decoded text, so every delimiter it uses must be a
finite set of texts (its *spellings*): a literal, a list of literals, or a pattern that spells finitely
many texts (literal characters and escapes, ``(?:...)`` groups, alternation ``|``, a one-character class
``[|]``, ``?`` on an atom, ``{n}`` with small n, and ``^`` at the very start, which means the message
start and is dropped). :func:`spellings` expands such a pattern (Python's own regex parser reads it); a
pattern it cannot expand (``\\w+``, ``.*``, a lookahead) is ``None`` there, and the family that needed it
raises ``ValueError`` naming the field and the pattern. A named group (the tool-call opener's
``(?P<name>\\w+)``) is a hole the format fills: :func:`split_group` cuts a pattern around it.

Everything here is validated when a family is built (``ValueError`` naming the template's problem), once
per model; the objects are immutable.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

try:  # Python's regex parser (the tree ``re.compile`` builds from); a private module, stable since 3.x
    import re._parser as _sre  # type: ignore[import-not-found]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre  # type: ignore[no-redef]

__all__ = ["ResponseTemplate", "TemplateField", "Delimiter", "THINKING", "CONTENT", "TOOL_CALLS",
           "spellings", "side_texts", "split_group", "cut_groups", "group_span", "response_template_of"]

THINKING, CONTENT, TOOL_CALLS = "thinking", "content", "tool_calls"
SERVED_FIELDS = (THINKING, CONTENT, TOOL_CALLS)
CONTENT_PARSERS = ("text", "int", "float", "bool", "json", "xml-inline", "kv-lines")
_TEMPLATE_KEYS = {"version", "defaults", "fields", "start_anchor", "start_anchor_pattern"}
_FIELD_KEYS = {"open", "open_pattern", "close", "close_pattern", "content", "content_args", "repeats", "join",
               "optional", "transform", "transform_each"}
MAX_SPELLINGS = 16
"""The most texts one delimiter pattern may spell (a pattern spelling more is not read as texts)."""


@dataclass(frozen=True)
class Delimiter:
    """One delimiter of a template: ``pattern`` (the regex the template gives, or its literals joined as
    one) and ``texts``, its spellings (in the template's order; None when the pattern spells no finite
    set of texts, see :func:`spellings`)."""

    pattern: str
    texts: tuple[str, ...] | None
    literal: bool
    """True when the template gave literals (``open`` / ``close`` / ``start_anchor``), not a pattern."""

    @property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern, re.DOTALL)


@dataclass(frozen=True)
class TemplateField:
    """One field of a response template (see the module docstring for each key)."""

    name: str
    open: Delimiter | None
    """None: the implicit field."""
    close: Delimiter | None
    content: str
    content_args: Mapping[str, Any]
    repeats: bool
    join: str | None
    optional: bool
    transform: Any
    transform_each: bool


@dataclass(frozen=True)
class ResponseTemplate:
    """A validated response template (build it with :meth:`load`)."""

    fields: Mapping[str, TemplateField]
    start_anchor: Delimiter
    defaults: Mapping[str, Any]
    implicit: str | None
    """The implicit field's name (the one without an opener), if any."""

    @classmethod
    def load(cls, spec: Any) -> ResponseTemplate:
        """Validate ``spec`` (the checkpoint's JSON object) as a template thinkgate can serve: the format's
        own rules (version, keys, one delimiter form per side, patterns that compile, at most one implicit
        field, a start anchor) and serving's (only the ``thinking``, ``content`` and ``tool_calls`` fields,
        the first two plain text; only ``role`` among the defaults). ``ValueError`` naming the problem."""
        if isinstance(spec, ResponseTemplate):
            return spec
        if not isinstance(spec, Mapping):
            raise ValueError(f"response_template must be a JSON object, got {type(spec).__name__}")
        version = spec.get("version", 1)
        if version != 1:
            raise ValueError(f"response_template version {version!r} is not supported (only 1)")
        unknown = sorted(set(spec) - _TEMPLATE_KEYS)
        if unknown:
            raise ValueError(f"response_template has unknown keys {unknown}")
        defaults = spec.get("defaults", {})
        if not isinstance(defaults, Mapping):
            raise ValueError("response_template.defaults must be a JSON object")
        if set(defaults) - {"role"}:
            raise ValueError(f"response_template.defaults {sorted(set(defaults) - {'role'})} cannot be served "
                             "(only 'role')")
        raw_fields = spec.get("fields")
        if not isinstance(raw_fields, Mapping) or not raw_fields:
            raise ValueError("response_template.fields must be a non-empty JSON object")
        extra = sorted(set(raw_fields) - set(SERVED_FIELDS))
        if extra:
            raise ValueError(f"response_template fields {extra} cannot be served: the fields a chat message has "
                             f"are {list(SERVED_FIELDS)}")
        fields = {name: _field(name, raw) for name, raw in raw_fields.items()}
        implicit = [n for n, f in fields.items() if f.open is None]
        if len(implicit) > 1:
            raise ValueError(f"response_template: at most one field may have no opener (the implicit field); "
                             f"{implicit} have none")
        anchor = _delimiter("response_template", spec, "start_anchor", "start_anchor_pattern")
        if anchor is None:
            raise ValueError("response_template has no start_anchor (or start_anchor_pattern): nothing says "
                             "where the assistant message starts")
        return cls(fields, anchor, copy.deepcopy(dict(defaults)), implicit[0] if implicit else None)

    def field(self, name: str) -> TemplateField | None:
        return self.fields.get(name)


def response_template_of(vocabulary: Any, template: Any = None, *, who: str) -> ResponseTemplate:
    """The validated template for a family named ``who``: ``template`` when given, else the vocabulary's
    (``Vocabulary.response_template``). ``ValueError`` saying that ``who`` needs one when there is none,
    and naming the problem of an invalid one."""
    if template is None:
        template = getattr(vocabulary, "response_template", None)
    if template is None:
        raise ValueError(
            f"{who} takes its markers from the checkpoint's response_template (tokenizer_config.json; "
            f"tokenizer.response_template), and the vocabulary {getattr(vocabulary, 'name', None)!r} has none: "
            "serve a checkpoint that ships one, or attach it (Vocabulary.with_response_template)")
    try:
        return ResponseTemplate.load(template)
    except ValueError as e:
        raise ValueError(f"{who}: invalid response_template: {e}") from None


def _field(name: str, raw: Any) -> TemplateField:
    scope = f"response_template field {name!r}"
    if not isinstance(raw, Mapping):
        raise ValueError(f"{scope} must be a JSON object")
    unknown = sorted(set(raw) - _FIELD_KEYS)
    if unknown:
        raise ValueError(f"{scope} has unknown keys {unknown}")
    content = raw.get("content", "text")
    if content not in CONTENT_PARSERS:
        raise ValueError(f"{scope}: unknown content parser {content!r}; known: {list(CONTENT_PARSERS)}")
    content_args = raw.get("content_args", {})
    if not isinstance(content_args, Mapping):
        raise ValueError(f"{scope}: content_args must be a JSON object")
    repeats, optional, each = raw.get("repeats", False), raw.get("optional", True), raw.get("transform_each", False)
    for key, value in (("repeats", repeats), ("optional", optional), ("transform_each", each)):
        if not isinstance(value, bool):
            raise ValueError(f"{scope}: {key} must be a boolean, got {value!r}")
    join = raw.get("join")
    if join is not None and (not isinstance(join, str) or not repeats):
        raise ValueError(f"{scope}: join must be a string, on a field that repeats")
    transform = raw.get("transform")
    if each and transform is None:
        raise ValueError(f"{scope}: transform_each without a transform")
    if name in (THINKING, CONTENT) and (content != "text" or transform is not None or join is not None):
        raise ValueError(f"{scope} must be plain text (content 'text', no transform, no join) to be served "
                         "as the message's reasoning or content")
    return TemplateField(name, _delimiter(scope, raw, "open", "open_pattern"),
                         _delimiter(scope, raw, "close", "close_pattern"), content, copy.deepcopy(dict(content_args)),
                         repeats, join, optional, copy.deepcopy(transform), each)


def _delimiter(scope: str, raw: Mapping[str, Any], literal_key: str, pattern_key: str) -> Delimiter | None:
    if literal_key in raw and pattern_key in raw:
        raise ValueError(f"{scope}: give {literal_key!r} or {pattern_key!r}, not both")
    if literal_key in raw:
        value = raw[literal_key]
        texts = [value] if isinstance(value, str) else value
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) and t for t in texts):
            raise ValueError(f"{scope}: {literal_key!r} must be a non-empty string or a non-empty list of them")
        texts = list(dict.fromkeys(texts))
        # longest first: where two literals overlap, the longer one is the delimiter
        pattern = "|".join(re.escape(t) for t in sorted(texts, key=len, reverse=True))
        return Delimiter(pattern, tuple(texts), True)
    if pattern_key in raw:
        pattern = raw[pattern_key]
        if not isinstance(pattern, str) or not pattern:
            raise ValueError(f"{scope}: {pattern_key!r} must be a non-empty regex")
        try:
            re.compile(pattern, re.DOTALL)
        except re.error as e:
            raise ValueError(f"{scope}: {pattern_key!r} {pattern!r} is not a valid regex: {e}") from None
        return Delimiter(pattern, spellings(pattern), False)
    return None


# -- patterns as texts -------------------------------------------------------------------------------

def spellings(pattern: str | Delimiter | None) -> tuple[str, ...] | None:
    """Every text ``pattern`` matches, when that is a finite set of at most :data:`MAX_SPELLINGS` texts
    built from the forms the module docstring lists (a leading ``^`` dropped); None otherwise, and for a
    pattern with a group that captures (a hole to fill, not a text)."""
    if isinstance(pattern, Delimiter):
        return pattern.texts
    if pattern is None:
        return None
    try:
        tree = _sre.parse(pattern)
    except (re.error, RecursionError, OverflowError):
        return None
    if tree.state.flags & ~(re.UNICODE | re.DOTALL):  # (?i) and the like: not a set of texts
        return None
    items = list(tree)
    if items and items[0] == (_sre.AT, _sre.AT_BEGINNING):
        items = items[1:]
    out = _expand(items)
    return None if out is None or not out or "" in out else tuple(out)


def _expand(items: Any) -> list[str] | None:
    texts = [""]
    for op, arg in items:
        alts = _alternatives(op, arg)
        if alts is None:
            return None
        texts = list(dict.fromkeys(a + b for a in texts for b in alts))
        if len(texts) > MAX_SPELLINGS:
            return None
    return texts


def _alternatives(op: Any, arg: Any) -> list[str] | None:
    if op is _sre.LITERAL:
        return [chr(arg)]
    if op is _sre.IN:  # a class of single characters only ([|], [ab])
        if not all(o is _sre.LITERAL for o, _ in arg):
            return None
        return [chr(c) for _, c in arg]
    if op is _sre.SUBPATTERN:
        group, add_flags, del_flags, sub = arg
        if group is not None or add_flags or del_flags:
            return None
        return _expand(sub)
    if op is _sre.BRANCH:
        out: list[str] = []
        for branch in arg[1]:
            texts = _expand(branch)
            if texts is None:
                return None
            out.extend(texts)
        return list(dict.fromkeys(out))
    if op in (_sre.MAX_REPEAT, _sre.MIN_REPEAT):
        lo, hi, sub = arg
        inner = _expand(sub)
        if inner is None or hi is _sre.MAXREPEAT or hi > 4:
            return None
        out = []
        for n in range(lo, hi + 1):
            texts = [""]
            for _ in range(n):
                texts = [a + b for a in texts for b in inner]
            out.extend(texts)
            if len(out) > MAX_SPELLINGS:
                return None
        return list(dict.fromkeys(out))
    return None


def split_group(pattern: str, name: str) -> tuple[tuple[str, ...], re.Pattern[str], tuple[str, ...]] | None:
    """``pattern`` cut around its named group ``name``: (the texts before it, the group's own pattern, the
    texts after it), each side a finite set of texts as :func:`spellings` reads them (an empty side is the
    empty text). None when the group is missing or a side is no finite set of texts (a group nested in
    another construct leaves a side that is no pattern of its own)."""
    cut = cut_groups(pattern, name)
    if cut is None:
        return None
    before, body, after = cut
    sides = side_texts(before), side_texts(after)
    if sides[0] is None or sides[1] is None:
        return None
    try:
        group = re.compile(body)
    except re.error:
        return None
    return sides[0], group, sides[1]


def cut_groups(pattern: str, *names: str) -> list[str] | None:
    """The source of ``pattern`` cut at its named groups ``names`` (in that order, each after the previous
    one): ``[text, body, text, body, ..., text]``. None when a group is missing or out of order."""
    out: list[str] = []
    rest = pattern
    for name in names:
        span = group_span(rest, name)
        if span is None:
            return None
        out += [rest[:span[0] - len(f"(?P<{name}>")], rest[span[0]:span[1]]]
        rest = rest[span[1] + 1:]
    return out + [rest]


def side_texts(source: str) -> tuple[str, ...] | None:
    """The texts a piece of a pattern's source spells (:func:`spellings`); the empty text for an empty piece
    (or a bare ``^``)."""
    if source in ("", "^"):
        return ("",)
    return spellings(source)


def group_span(pattern: str, name: str) -> tuple[int, int] | None:
    """Where the body of the named group ``name`` lies in ``pattern``'s source: (its first character, the
    index of the group's closing parenthesis); parentheses balanced, escapes and character classes
    skipped. None when there is no such group."""
    opener = f"(?P<{name}>"
    start = pattern.find(opener)
    if start < 0:
        return None
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return start + len(opener), i
        i += 1
    return None
