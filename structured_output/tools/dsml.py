"""DeepSeek DSML parameters (``deepseek_v32``, ``deepseek_v4``), as DeepSeek's own encoder writes them.

GigaChat 3.5's GCML (``gigachat35``) is the same syntax under its own marker (``｜GCML｜``), a call without
arguments written without the blank line: the fields :attr:`DsmlArgs.marker` and :attr:`DsmlArgs.no_params`.

The encoder (``encoding/encoding_dsv32.py`` of DeepSeek-V3.2, ``encoding/encoding_dsv4.py`` of V4) writes
a call as ``<｜DSML｜invoke name="N">`` + ``"\\n"`` + its parameters joined by ``"\\n"`` + ``"\\n"`` +
``</｜DSML｜invoke>``, each parameter as::

    <｜DSML｜parameter name="K" string="true">raw text</｜DSML｜parameter>     (a Python str value)
    <｜DSML｜parameter name="K" string="false">JSON</｜DSML｜parameter>        (anything else)

The ``string`` attribute follows the value, not the schema, and names are written as they are (no
escaping). Hence:

- a call without arguments is ``<｜DSML｜invoke name="N">\\n\\n</｜DSML｜invoke>`` (a blank line);
- a parameter whose schema admits strings and other values (no ``type``, a type list or ``anyOf`` with
  ``string``, an ``enum`` mixing strings and others, a nullable string) is ``string="true"`` raw text
  for a string and ``string="false"`` JSON (never a JSON string) for anything else;
- any declared parameter name can be written, except one that contains the ``｜DSML｜`` marker (a
  control token: a name is text);
- a JSON value is ``json.dumps`` as it is (``"</b>"`` unescaped): it cannot end early, since the closing
  tag's ``｜DSML｜`` is a control token that no JSON string holds. Raw text values cannot contain the
  closing tag's text either (the first one ends the value).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .args import NoMatch, XmlArgs, _json_value
from .marked import MarkedText
from .request import ToolSpec
from .syntax import (Fmt, LiteralText, const, json_fmt, opt, or_, raw_text, regex, resolve_ref,
                     seq, star, with_defs)

__all__ = ["DsmlArgs", "split_string_schema"]

DSML = "｜DSML｜"
_NON_STRING_TYPES = ["number", "boolean", "null", "array", "object"]
_ATTR = re.compile(r'" string="(true|false)">')


def split_string_schema(schema: Any, defs: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], Any | None]:
    """Split a parameter's schema into what DSML writes raw and what it writes as JSON:
    (the schemas of its string values, possibly several; the schema of its other values, or None when
    it admits only strings). ``$ref`` are followed; ``anyOf`` / ``oneOf`` are split alternative by
    alternative (their JSON part is an ``anyOf``)."""
    s = resolve_ref(schema, defs)
    if s is True or (isinstance(s, Mapping) and not s):
        return [{}], {"type": list(_NON_STRING_TYPES)}
    if not isinstance(s, Mapping):
        return [], s
    if "const" in s:
        return ([s], None) if isinstance(s["const"], str) else ([], s)
    if isinstance(s.get("enum"), list) and s["enum"]:
        strs = [v for v in s["enum"] if isinstance(v, str)]
        others = [v for v in s["enum"] if not isinstance(v, str)]
        return ([{"enum": strs}] if strs else []), ({**s, "enum": others} if others else None)
    for key in ("anyOf", "oneOf"):
        alts = s.get(key)
        if isinstance(alts, list) and alts:
            base = {k: v for k, v in s.items() if k != key}
            strs: list[Mapping[str, Any]] = []
            others = []
            for alt in alts:
                alt = resolve_ref(alt, defs)
                merged = {**base, **alt} if isinstance(alt, Mapping) else alt
                a, b = split_string_schema(merged, defs)
                strs += a
                if b is not None:
                    others.append(b)
            return strs, (None if not others else others[0] if len(others) == 1 else {"anyOf": others})
    t = s.get("type")
    if t == "string":
        return [s], None
    if isinstance(t, list):
        if "string" not in t:
            return [], s
        rest = [x for x in t if x != "string"]
        return [{**s, "type": "string"}], ({**s, "type": rest} if rest else None)
    if t is None and not any(k in s for k in ("allOf", "not", "if")):
        return [s], {**s, "type": list(_NON_STRING_TYPES)}
    return [], s


@dataclass(frozen=True)
class DsmlArgs(XmlArgs):
    """DSML parameters (see the module docstring): the ``string`` attribute is ``true`` with the raw
    text for string values and ``false`` with JSON for the others. Enforced parameters follow the
    schema's order (as :class:`XmlArgs`); a call without parameters is a blank line. With only optional
    parameters the constraint also takes no parameter and no blank line (telling the two apart would
    take a grammar quadratic in the number of parameters); the reader reads both."""

    param_begin: str = '<｜DSML｜parameter name="{key}" string="{string}">'
    param_end: str = "</｜DSML｜parameter>\n"
    close: str = "</｜DSML｜parameter>"
    key_pattern: str = '[^"]*'
    """Names of parameters a tool does not declare (a tool whose arguments are not enforced, or
    ``additionalProperties``): any text without a double quote."""
    marker: str = DSML
    """The family's control token inside every tag: no parameter name can hold it."""
    no_params: str = "\n"
    """What a call without parameters holds between the invoke's opening and its closing: DeepSeek's blank
    line (``"\\n".join([])`` between two newlines), nothing for GCML (its template writes the newlines only
    around parameters). The reader takes either."""

    # -- constraint
    # JSON values exclude nothing (XmlArgs excludes "</" there): the closing tag's ｜DSML｜ is a control
    # token, which no JSON string can hold, and the encoder writes json.dumps as it is ("</b>" included)

    def _check_key(self, tool: ToolSpec, key: str, lit: LiteralText | None = None) -> None:
        if self.marker in key:
            raise ValueError(f"tool {tool.name!r}: parameter name {key!r} cannot be written in {self.marker.strip('｜')} "
                             f"(it contains the {self.marker!r} marker, a control token)")

    def _open(self, key: Fmt, raw: bool, lit: LiteralText) -> Fmt:
        pre, post = self.param_begin.split("{key}")
        return seq(lit(pre), key, lit(post.replace("{string}", "true" if raw else "false")))

    def _param(self, key: str, sub: Any, defs: Mapping[str, Any], lit: LiteralText, ws: int | None) -> Fmt:
        strs, other = split_string_schema(sub, defs)
        alts: list[Fmt] = []
        if strs:
            raws = [self._raw_value(resolve_ref(x, defs)) for x in strs]
            free = raw_text(self.close)
            value = free if free in raws else or_(*raws)
            alts.append(seq(self._open(const(key), True, lit), value, lit(self.param_end)))
        if other is not None:
            value = json_fmt(with_defs(other, defs), max_whitespace=ws)
            alts.append(seq(self._open(const(key), False, lit), value, lit(self.param_end)))
        return or_(*alts)

    def _any_param(self, lit: LiteralText, ws: int | None) -> Fmt:
        key = regex(self.key_pattern)
        raw = seq(self._open(key, True, lit), raw_text(self.close), lit(self.param_end))
        js = seq(self._open(key, False, lit),
                 json_fmt({"type": list(_NON_STRING_TYPES)}, max_whitespace=ws),
                 lit(self.param_end))
        return or_(raw, js)

    def build(self, tool: ToolSpec, lit: LiteralText, max_whitespace: int | None) -> Fmt:
        blank = const(self.no_params)  # no parameter (DSML: the encoder's "\n".join([]) between two newlines)
        if not tool.enforce:
            one = self._any_param(lit, max_whitespace)
            return or_(blank, seq(one, star(one))) if self.no_params else star(one)
        schema = tool.parameters
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties", False)
        if not props and (extra is False or extra is None):
            return blank
        params = super().build(tool, lit, max_whitespace)
        if set(schema.get("required") or ()) & set(props):
            return params  # a required parameter: never empty
        return or_(blank, params) if self.no_params else opt(params)

    # -- reader
    def read(self, src: MarkedText, pos: int, tool: ToolSpec, lit: LiteralText) -> tuple[str, int]:
        raise NotImplementedError("DsmlArgs.read_until needs the call end")

    def _read_begin(self, src: MarkedText, pos: int, keys: list[str], lit: LiteralText) -> tuple[str, bool, int]:
        """A parameter's opening at ``pos`` -> (name, its ``string`` attribute, value start). A declared
        name is matched whole (it may hold quotes); another name runs to the first ``" string="``."""
        pre, _ = self.param_begin.split("{key}")
        p = src.match_literal(pos, pre, lit)
        if p < 0:
            raise NoMatch("expected a parameter")
        text = src.text
        candidates = [k for k in keys if text.startswith(k, p)]
        stop = text.find(self.close, p)  # a name ends before its value's closing tag
        m = _ATTR.search(text, p, len(text) if stop < 0 else stop)
        if m is not None and text[p:m.start()] not in candidates:
            candidates.append(text[p:m.start()])
        for key in candidates:
            m = _ATTR.match(text, p + len(key))
            if m is not None and src.plain(p, m.end()):
                return key, m.group(1) == "true", m.end()
        raise NoMatch("expected a parameter")

    def _read_value(self, text: str, start: int, end: int, key: str, string: bool, declared: Mapping[str, Any],
                    extra: Any, defs: Mapping[str, Any]) -> Any:
        """The value of ``text[start:end]``: as its ``string`` attribute says (raw text, or JSON), typed by
        the declared schema where the attribute contradicts it (a number written ``string="true"`` for a
        parameter that admits no string is that number; text written ``string="false"`` that is not JSON
        is that text when the parameter admits strings)."""
        schema = declared.get(key)
        raw = text[start:end]
        strs, other = split_string_schema(schema, defs) if schema is not None else ([{}], True)
        if string:
            if strs:
                return raw
            try:
                return _json_value(text, start, end)
            except NoMatch:
                return raw  # the schema check (strict tools) decides whether such a call passes
        try:
            return _json_value(text, start, end)
        except NoMatch:
            if strs and schema is not None:
                return raw
            raise

    def value_is_raw(self, key: str, string: Any, declared: Mapping[str, Any], defs: Mapping[str, Any]) -> bool:
        if not string:
            return False
        schema = declared.get(key)
        if schema is None:
            return True
        try:
            return bool(split_string_schema(schema, defs)[0])
        except ValueError:
            return False

    def no_params_end(self, src: MarkedText, pos: int, call_end: str, lit: LiteralText) -> int:
        # a blank line before the call's end is no parameter, whichever of the two the syntax writes
        if (src.text.startswith("\n", pos) and src.plain(pos, pos + 1)
                and src.match_literal(pos + 1, call_end, lit) >= 0):
            return pos + 1
        return -1

    def read_until(self, src: MarkedText, pos: int, tool: ToolSpec, call_end: str,
                   lit: LiteralText) -> tuple[str, int]:
        """:meth:`XmlArgs.read_until`, where a blank line alone is no parameter. A name written twice
        stays twice in the arguments' text: the request's policy then refuses the call (DeepSeek's
        parser refuses it too), and the key check names it."""
        end = self.no_params_end(src, pos, call_end, lit)
        if end >= 0:
            return "{}", end
        return super().read_until(src, pos, tool, call_end, lit)
