"""The xgrammar adaptation: a :class:`~.constraints.Constraint` as an xgrammar ``Grammar``, and the
xgrammar ``TokenizerInfo`` of a :class:`~reasoning.Vocabulary` (the compile service is ``compiler.py``).

Control tokens
--------------
xgrammar's defaults let a control token (``<|im_end|>``, ``<think>``, ``<tool_call>`` ...) appear inside
a JSON string or any free text whenever its *text* is allowed there. We never want that, and we still
want formats to name such a token when they mean it (a tool call that starts with the ``<tool_call>``
token). So the xgrammar ``TokenizerInfo`` is built with every control token (``Vocabulary.special_tokens``)
spelled as private bytes, ``0xFF``, then :data:`CONTROL_MARK` (U+10FFFF, a Unicode noncharacter) in UTF-8, then
its id in ASCII: ``0xFF`` never occurs in UTF-8, so no rule that reads UTF-8 text (JSON strings, regex, EBNF
character classes) can ever match such a token; ``any_text`` reads bytes, so every ``any_text`` of a structural
tag excludes :data:`CONTROL_MARK` (added by :meth:`GrammarBuilder.resolve_structural_tag`), and a control
token's spelling reaches it right after its first byte. The token-level formats of a structural tag
(``token``, ``exclude_token``, ``any_tokens``, ``token_triggered_tags``, ``token_dispatch``) still match it by
id. Token names in those formats are
resolved to ids with the :class:`~reasoning.Vocabulary` before compiling (a name that is not one token
is a ``ValueError``), and a literal the output must spell (``const_string``, a tag's ``begin`` /
``end``, a trigger, a separator) that contains a control token's text is a ``ValueError`` naming
it (it could never match the token the model writes). Stop tokens are xgrammar's stop tokens:
allowed only where the grammar may end. Ids the tokenizer leaves undefined and ids past its size (up
to the logits width) are never allowed.
(Building the vocabulary with ``b""`` for control tokens, the usual trick, makes xgrammar treat them
as *special*: never allowed, not even by a ``token`` format, so a tool-call tag could not start
with ``<tool_call>``.)

Each constraint kind becomes an xgrammar ``Grammar`` (:meth:`GrammarBuilder.build`: JSON-schema to
grammar conversion, regex and EBNF parsing, structural-tag parsing), with xgrammar's errors as
``ValueError`` messages without its log prefix (:func:`xgrammar_message`).

A JSON schema or object with a whitespace bound (``max_whitespace`` of 1 or more) becomes xgrammar's
unbounded JSON grammar; the bound is enforced beside it by the matcher (``jsonws/bound.py``).

xgrammar 0.2.9 fix-up: a JSON string with ``minLength`` / ``maxLength`` admits raw control characters
there; we narrow that character class (see ``_fix_bounded_json_strings``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import xgrammar as xgr

from thinkgate.reasoning.vocabulary import Vocabulary

from .closers import text_closers
from .constraints import Constraint

__all__ = ["CONTROL_MARK", "ControlSplitter", "ControlTextError", "GrammarBuilder", "build_tokenizer_info",
           "control_token_bytes", "xgrammar_message"]


class ControlTextError(ValueError):
    """A structural tag's literal spells a control token as text (see the module docstring): the tag is
    well formed, but written for a tokenizer view where control tokens are text (an engine's own tool-call
    tags are); thinkgate's compiler refuses it. Engine adapters tell it apart from other refusals."""


CONTROL_MARK = "\U0010ffff"
"""The noncharacter in every control token's private spelling; ``any_text`` excludes it (module docstring)."""
_MARK_BYTES = CONTROL_MARK.encode("utf-8")


def control_token_bytes(token_id: int) -> bytes:
    """The private byte spelling of control token ``token_id`` in the xgrammar vocabulary."""
    return b"\xff" + _MARK_BYTES + str(token_id).encode("ascii")


def build_tokenizer_info(vocabulary: Vocabulary) -> xgr.TokenizerInfo:
    """An xgrammar ``TokenizerInfo`` for ``vocabulary`` (control tokens as private bytes, see the module
    docstring); its size is the logits width, so ids past the tokenizer's size are never allowed."""
    specials = vocabulary.special_token_ids
    encoded = [control_token_bytes(i) if i in specials else b for i, b in enumerate(vocabulary.token_bytes)]
    stops = sorted(vocabulary.stop_token_ids)
    if not stops:
        raise ValueError(f"vocabulary {vocabulary.name!r} has no stop token; a grammar could never end")
    return xgr.TokenizerInfo(encoded, xgr.VocabType.RAW, vocab_size=vocabulary.logits_width,
                             stop_token_ids=stops)


_XGR_PREFIX = re.compile(r"^\[[0-9:.]+\] [^\s:]+:\d+: (?:Check failed: \(.*?\) is false: )?")


def xgrammar_message(exc: BaseException) -> str:
    """xgrammar's error text without its timestamp / source-location prefix."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    text = " ".join(_XGR_PREFIX.sub("", ln).strip() for ln in lines) or type(exc).__name__
    return text


class ControlSplitter:
    """Finds the control tokens of one vocabulary (``special_tokens``: text -> id) in literals, and splits
    literals at them; built once per vocabulary (DeepSeek V4 has 1,283 control texts: one pattern finds any of
    them, so a literal is searched once, not once per text)."""

    def __init__(self, special_tokens: Mapping[str, int]) -> None:
        self._ids = {t: i for t, i in special_tokens.items() if t}
        self.texts = sorted(self._ids, key=len, reverse=True)
        """The control texts, longest first (so the pattern takes the longest match)."""
        self._pattern = re.compile("|".join(map(re.escape, self.texts))) if self.texts else None

    def split(self, literal: str) -> list[str | int]:
        """``literal`` as its text pieces and control-token ids, in order (no empty text piece)."""
        if self._pattern is None:
            return [literal] if literal else []
        out: list[str | int] = []
        pos = 0
        for m in self._pattern.finditer(literal):
            if m.start() > pos:
                out.append(literal[pos:m.start()])
            out.append(self._ids[m.group()])
            pos = m.end()
        if pos < len(literal):
            out.append(literal[pos:])
        return out

    def private_text(self, token_id: int) -> str | None:
        """The text that an exclude must hold to exclude control token ``token_id`` from free text in thinkgate's
        tokenizer view (its private spelling after the ``0xFF`` byte: :data:`CONTROL_MARK` and its id); None
        where that would exclude another control token too (an id whose digits start with this one's)."""
        digits = str(token_id)
        if any(i != token_id and str(i).startswith(digits) for i in self._ids.values()):
            return None
        return CONTROL_MARK + digits

    def has_control(self, literal: Any) -> bool:
        return isinstance(literal, str) and self._pattern is not None and self._pattern.search(literal) is not None


# token-level structural-tag formats: type -> fields that name tokens (an id or a token string)
_TOKEN_FIELDS: dict[str, tuple[str, ...]] = {
    "token": ("token",),
    "exclude_token": ("exclude_tokens",),
    "any_tokens": ("exclude_tokens",),
    "token_triggered_tags": ("trigger_tokens", "exclude_tokens"),
    "token_dispatch": ("exclude_tokens",),
}


_BY_EXCLUSION = frozenset({"exclude_token", "any_tokens", "token_triggered_tags", "token_dispatch"})
"""Token-level formats that allow tokens by exclusion (every token but those listed)."""


class _TokenFormats:
    """What a structural tag's token-level formats allow (gathered by ``GrammarBuilder._resolve``)."""

    __slots__ = ("token_level", "by_exclusion", "named")

    def __init__(self) -> None:
        self.token_level = False
        self.by_exclusion = False
        self.named: set[int] = set()


class GrammarBuilder:
    """Turns constraints into xgrammar grammars for one vocabulary (see the module docstring).
    Stateless after construction; thread-safe."""

    def __init__(self, vocabulary: Vocabulary) -> None:
        self.vocabulary = vocabulary
        self.control = ControlSplitter(vocabulary.special_tokens)
        """The vocabulary's control texts (checked in structural-tag literals)."""

    def build(self, constraint: Constraint) -> tuple[xgr.Grammar, bool]:
        """The xgrammar ``Grammar`` of ``constraint`` (``ValueError`` naming the problem) and whether
        it uses token-level formats."""
        grammar, found = self._build(constraint)
        return grammar, found is not None and found.token_level

    def build_with_reach(self, constraint: Constraint) -> tuple[xgr.Grammar, bool | None]:
        """The grammar of :meth:`build`, and whether a row of it could allow every id of the logits width as far
        as its token-level formats go (:meth:`_may_allow_every_id`); None for a constraint without them: its text
        rules decide, which the compiler knows per vocabulary."""
        grammar, found = self._build(constraint)
        if found is None or not found.token_level:
            return grammar, None
        return grammar, self._may_allow_every_id(found)

    def _build(self, constraint: Constraint) -> tuple[xgr.Grammar, _TokenFormats | None]:
        kind = constraint.kind
        try:
            if kind == "json_schema" or kind == "json_object":
                any_ws = bool(constraint.option("any_whitespace", True))
                # a bound of 1 or more is enforced beside the grammar (jsonws/bound.py): the grammar is
                # xgrammar's unbounded one, which costs a fraction of the bounded one's compile, memory
                # and fill (python -m bench jsonws)
                max_ws = constraint.option("max_whitespace") if any_ws else None
                if max_ws:
                    max_ws = None
                spec = constraint.spec if kind == "json_schema" else '{"type": "object"}'
                strict = bool(constraint.option("strict", True)) if kind == "json_schema" else False
                _ = constraint.schema_check  # ValueError: keywords it cannot honour (schema_support.py)
                if any_ws and max_ws == 0:  # no whitespace at all: compact JSON
                    grammar = xgr.Grammar.from_json_schema(spec, any_whitespace=False, separators=(",", ":"),
                                                           strict_mode=strict)
                else:
                    grammar = xgr.Grammar.from_json_schema(spec, any_whitespace=any_ws, max_whitespace_cnt=max_ws,
                                                           strict_mode=strict)
                return _fix_bounded_json_strings(grammar, spec), None
            if kind == "regex":
                return xgr.Grammar.from_regex(constraint.spec), None
            if kind == "grammar":
                return xgr.Grammar.from_ebnf(constraint.spec), None
            if kind == "choice":
                choices = json.loads(constraint.spec)
                tag = {"type": "structural_tag",
                       "format": {"type": "or", "elements": [{"type": "const_string", "value": c} for c in choices]}}
                return xgr.Grammar.from_structural_tag(json.dumps(tag)), None
            if kind == "structural_tag":
                tag, found = self._resolve_tag(json.loads(constraint.spec))
                grammar = xgr.Grammar.from_structural_tag(json.dumps(tag))
                return _fix_bounded_json_strings(grammar, constraint.spec), found
        except ValueError:
            raise
        except Exception as e:  # xgrammar reports bad input as RuntimeError / pydantic errors
            raise ValueError(f"invalid {_KIND_NAMES.get(kind, kind)}: {xgrammar_message(e)}") from e
        raise ValueError(f"unknown constraint kind {kind!r}")

    def token_copy(self, constraint: Constraint) -> tuple[set[int], Callable[[Mapping[int, int]], xgr.Grammar]] | None:
        """For a structural tag whose token-level formats name tokens: the ids they name, and a function that
        builds the same grammar with each such id ``t`` renamed ``ids[t]`` (a copy of the grammar on another
        vocabulary: the shortest-completion search's byte level, ``step/shortest.py``). None otherwise."""
        if constraint.kind != "structural_tag":
            return None
        tag, token_level = self.resolve_structural_tag(json.loads(constraint.spec))
        if not token_level:
            return None
        named: set[int] = set()

        def collect(t: int) -> int:
            named.add(t)
            return t

        _map_token_ids(tag, collect)

        def build(ids: Mapping[int, int]) -> xgr.Grammar:
            grammar = xgr.Grammar.from_structural_tag(json.dumps(_map_token_ids(tag, ids.__getitem__)))
            return _fix_bounded_json_strings(grammar, constraint.spec)

        return named, build

    def closers(self, constraint: Constraint) -> list[tuple[str | int, ...]]:
        """For a structural tag: the literals that end its free text (:func:`.closers.text_closers`, token ids of
        this vocabulary); none for other kinds."""
        if constraint.kind != "structural_tag":
            return []
        return text_closers(self.resolve_structural_tag(json.loads(constraint.spec))[0])

    def resolve_structural_tag(self, tag: Any) -> tuple[dict[str, Any], bool]:
        """A copy of ``tag`` with every token named by text in a token-level format replaced by its
        id in this vocabulary, and whether any token-level format occurs. A bare format (no
        ``{"type": "structural_tag", "format": ...}`` wrapper) is wrapped."""
        out, found = self._resolve_tag(tag)
        return out, found.token_level

    def _resolve_tag(self, tag: Any) -> tuple[dict[str, Any], _TokenFormats]:
        if not isinstance(tag, Mapping):
            raise ValueError(f"invalid structural tag: expected an object, got {type(tag).__name__}")
        if tag.get("type") != "structural_tag":
            if "format" in tag or "type" not in tag:
                raise ValueError('invalid structural tag: expected {"type": "structural_tag", "format": {...}}')
            tag = {"type": "structural_tag", "format": tag}
        if not isinstance(tag.get("format"), Mapping):
            raise ValueError('invalid structural tag: "format" must be an object')
        found = _TokenFormats()
        return self._resolve(tag, found, "$", False), found

    def _may_allow_every_id(self, found: _TokenFormats) -> bool:
        """Whether a row of a grammar built from a tag with these token-level formats could allow every id of
        the logits width. Text never matches a control token (its private spelling) or a padding id, so such a
        row needs each of them allowed by a token-level format: False when its only token-level formats are
        ``token`` and some non-stop control token or padding id is named by none of them; True when a format
        allows tokens by exclusion (``any_tokens``, ``exclude_token``, ``token_dispatch``,
        ``token_triggered_tags``: every token but those listed)."""
        if found.by_exclusion:
            return True
        vocab = self.vocabulary
        if vocab.logits_width > vocab.vocab_size:
            return False  # a padding id: never named (names are ids of the vocabulary), never text
        return (vocab.special_token_ids - vocab.stop_token_ids) <= found.named

    def _resolve(self, node: Any, found: _TokenFormats, path: str, text_end: bool) -> Any:
        """``text_end``: ``node`` lies inside the content of a tag whose end is text (:func:`_own_end`)."""
        if isinstance(node, list):
            return [self._resolve(x, found, f"{path}[{i}]", text_end) for i, x in enumerate(node)]
        if not isinstance(node, Mapping):
            return node
        kind = node.get("type")
        end = node.get("end")
        inner = text_end or (kind == "tag" and bool(end) and isinstance(end, (str, list)))
        # a tag's content that is itself free text keeps xgrammar's meaning (text up to the end)
        out = {k: self._resolve(v, found, f"{path}.{k}",
                                inner if k == "content" and not _is_any_text(v) else text_end)
               for k, v in node.items()}
        for field_name in _LITERAL_FIELDS.get(kind, ()) if isinstance(kind, str) else ():
            self._check_literal(out.get(field_name), f"{path}.{field_name}")
        if kind == "dispatch" and isinstance(out.get("rules"), list):
            for i, r in enumerate(out["rules"]):
                if isinstance(r, list) and r:
                    self._check_literal(r[0], f"{path}.rules[{i}][0]")
        if _names_tokens(kind):
            found.token_level = True
            _rename_tokens(out, kind, path, self._token)
            if kind in _BY_EXCLUSION:
                found.by_exclusion = True
            elif isinstance(out.get("token"), int):  # a "token" (any other value: xgrammar names the error)
                found.named.add(out["token"])
        if kind == "any_text":  # no control token in free text (module docstring)
            excludes = out.get("excludes", [])
            if isinstance(excludes, list) and CONTROL_MARK not in excludes:
                out["excludes"] = [*excludes, CONTROL_MARK]
            if text_end and _is_raw_value(out):
                return _own_end(out)
        if kind == "sequence" and isinstance(out.get("elements"), list):
            out["elements"] = _begin_own_ends(out["elements"])
        return out

    def _check_literal(self, value: Any, where: str) -> None:
        """A literal the output must spell (const_string, tag begin/end, trigger, separator) may not
        contain a control token's text: text never produces a control token (see the module
        docstring), so such a format could never match what the model writes."""
        values = value if isinstance(value, list) else [value]
        for lit in values:
            if not lit or not self.control.has_control(lit):
                continue
            for text in self.control.texts:  # name the longest one it contains
                if text in lit:
                    raise ControlTextError(
                        f"invalid structural tag: {where}: {lit!r} contains {text!r}, a control token of the "
                        f"vocabulary {self.vocabulary.name!r}; text never produces a control token, so "
                        f"name it with a token format: "
                        f"{json.dumps({'type': 'token', 'token': text}, ensure_ascii=False)}")

    def _token(self, value: Any, where: str) -> Any:
        vocab = self.vocabulary
        if isinstance(value, bool):
            raise ValueError(f"invalid structural tag: {where}: expected a token id or token text, got {value!r}")
        if isinstance(value, int):
            if not 0 <= value < vocab.vocab_size:
                raise ValueError(f"invalid structural tag: {where}: token id {value} is outside the vocabulary "
                                 f"{vocab.name!r} (size {vocab.vocab_size})")
            return value
        if isinstance(value, str):
            tid = vocab.token_id(value)
            if tid is None:
                raise ValueError(f"invalid structural tag: {where}: {value!r} is not a single token of the "
                                 f"vocabulary {vocab.name!r}")
            return tid
        return value  # let xgrammar report the type error


def _own_end(raw_value: dict[str, Any]) -> dict[str, Any]:
    """A raw value inside a tag that ends with text, in a tag of its own with an empty end (and an empty
    begin, which the enclosing sequence fills with the literal before it: :func:`_begin_own_ends`).

    xgrammar adds the end string of the nearest enclosing ``tag`` to the excludes of every ``any_text`` in its
    content, nested ones included. For a raw value (an ``any_text`` with one excluded string, its closing tag:
    ``tools/syntax.raw_text``) that is wrong: hy_v3's call tag ends with ``"\\n"``, and its values could not
    hold a newline. In a tag of its own, the nearest end is that tag's empty one, and the value keeps its own
    excludes (xgrammar takes an empty end where the content is an ``any_text`` with excludes; measured on 0.2.8
    and 0.2.9). The same language, still xgrammar's ``any_text`` (its character-class form costs some 35 ms of
    precomputation per character of the closing tag: docs/results.md). A tag whose content is itself free text
    keeps its end (that end is what ends the text), and so does any other ``any_text`` (a client's, whose
    meaning xgrammar defines)."""
    return {"type": "tag", "begin": "", "content": raw_value, "end": ""}


def _begin_own_ends(elements: list[Any]) -> list[Any]:
    """A sequence's elements with each raw value's own tag (:func:`_own_end`) taking the literal or token
    before it as its begin: ``[X, tag("", value, "")]`` is ``tag(X, value, "")``, the same language and the
    same nearest end. The point is the grammar's text: an empty begin prints as ``""``, which xgrammar's
    EBNF parser drops, so the text would parse back to another grammar and the compile could not use
    xgrammar's cache (``_compile_worker.cache_safe``); with the literal as its begin the text round-trips."""
    out: list[Any] = []
    for el in elements:
        prev = out[-1] if out else None
        if (_is_own_end(el) and isinstance(prev, Mapping)
                and ((prev.get("type") == "const_string" and isinstance(prev.get("value"), str) and prev["value"])
                     or (prev.get("type") == "token" and isinstance(prev.get("token"), int)))):
            out[-1] = {"type": "tag", "begin": prev["value"] if prev["type"] == "const_string" else dict(prev),
                       "content": el["content"], "end": ""}
        else:
            out.append(el)
    return out


def _is_own_end(node: Any) -> bool:
    """A tag as :func:`_own_end` builds it: empty begin and end around a raw value."""
    return (isinstance(node, Mapping) and node.get("type") == "tag" and node.get("begin") == ""
            and node.get("end") == "" and isinstance(node.get("content"), Mapping)
            and node["content"].get("type") == "any_text" and _is_raw_value(node["content"]))


def _is_raw_value(node: Mapping[str, Any]) -> bool:
    """An ``any_text`` that excludes one string besides :data:`CONTROL_MARK` (``tools/syntax.raw_text``)."""
    excludes = node.get("excludes")
    return (isinstance(excludes, list) and len([e for e in excludes if e != CONTROL_MARK]) == 1
            and all(isinstance(e, str) and e for e in excludes))


def _is_any_text(node: Any) -> bool:
    return isinstance(node, Mapping) and node.get("type") == "any_text"


def _names_tokens(kind: Any) -> bool:
    """Whether a structural-tag format of this type names tokens (``_TOKEN_FIELDS``, ``token_dispatch`` rules)."""
    return isinstance(kind, str) and (kind in _TOKEN_FIELDS or kind == "token_dispatch")


def _rename_tokens(out: dict[str, Any], kind: str, path: str, f: Callable[[Any, str], Any]) -> None:
    """Replace, in place, each token a format of type ``kind`` names (its token fields, a ``token_dispatch``'s
    rule heads) by ``f(token, where)``."""
    for field_name in _TOKEN_FIELDS.get(kind, ()):
        if field_name not in out:
            continue
        value = out[field_name]
        where = f"{path}.{field_name}"
        out[field_name] = ([f(v, f"{where}[{i}]") for i, v in enumerate(value)]
                           if isinstance(value, list) else f(value, where))
    if kind == "token_dispatch" and isinstance(out.get("rules"), list):
        out["rules"] = [[f(r[0], f"{path}.rules[{i}][0]"), r[1]] if isinstance(r, list) and len(r) == 2 else r
                        for i, r in enumerate(out["rules"])]


def _map_token_ids(node: Any, f: Callable[[int], int]) -> Any:
    """A copy of a resolved structural tag (its token-level formats name tokens by id) with each id ``t``
    replaced by ``f(t)``."""
    if isinstance(node, list):
        return [_map_token_ids(x, f) for x in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _map_token_ids(v, f) for k, v in node.items()}
    kind = node.get("type")
    if _names_tokens(kind):
        _rename_tokens(out, kind, "$", lambda v, _: f(v) if isinstance(v, int) and not isinstance(v, bool) else v)
    return out


# xgrammar 0.2.9 writes a JSON string with minLength / maxLength as ``"\"" X_characters{m, n} "\""``
# with ``X_characters ::= (([^\"\\\r\n]))``: raw control characters (tab, U+0001...) pass, which
# is not JSON. We narrow that class to ``[^\"\\\0-\x1f]``. Such strings still cannot hold escapes
# (as in xgrammar): allowing ``"\\" escape`` there makes xgrammar's mask for those states uncacheable,
# so each mask fill inside such a string would be computed token by token at run time instead of
# coming from the precomputed masks.
_BOUNDED_CHAR_RULE = re.compile(r'^(\w+_characters ::= )\(\(\[\^\\"\\\\\\r\\n\]\)\)$', re.M)
_JSON_CHAR = r'(([^\"\\\0-\x1f]))'


def _fix_bounded_json_strings(grammar: xgr.Grammar, spec: str) -> xgr.Grammar:
    """``grammar`` with the length-bounded JSON string characters made JSON-valid (see above)."""
    if "Length" not in spec:  # only minLength / maxLength strings take that path
        return grammar
    text = str(grammar)
    fixed, n = _BOUNDED_CHAR_RULE.subn(lambda m: m.group(1) + _JSON_CHAR, text)
    if n == 0 or not re.search(r"^root ::= ", text, re.M):  # xgrammar names the root "root"
        return grammar
    return xgr.Grammar.from_ebnf(fixed, root_rule_name="root")


# structural-tag formats: type -> fields whose strings the output spells literally
_LITERAL_FIELDS: dict[str, tuple[str, ...]] = {
    "const_string": ("value",),
    "tag": ("begin", "end"),
    "triggered_tags": ("triggers",),
    "tags_with_separator": ("separator",),
}

_KIND_NAMES = {"json_schema": "JSON schema", "json_object": "JSON object", "regex": "regex",
               "grammar": "grammar", "choice": "choice", "structural_tag": "structural tag"}
