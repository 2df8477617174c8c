"""Structural tags written for a tokenizer view in which control tokens are text, rewritten so that each
control token's text in a literal is that token.

An engine's own tool-call tags (SGLang's detectors, for ``tool_choice="required"``) spell the format's
markers as text: ``{"begin": "<tool_call>\\n{\\"name\\": ...", ...}``. In xgrammar's default tokenizer view
that text matches the ``<tool_call>`` token; in thinkgate's (``xgrammar_adapter``'s module docstring) a
control token has no text, so such a literal could never match and the compiler refuses it
(:class:`~.xgrammar_adapter.ControlTextError`). :func:`control_tokens_as_tokens` rewrites the tag so that it
asks for the token where the literal spelled it, which is what the model writes:

- a ``const_string`` becomes a ``sequence`` of its text pieces and ``token`` formats;
- a ``tag`` keeps the first piece of its begin and the last piece of its end (a ``token`` format where that
  piece is a control token) and takes the other pieces into its content, before and after it;
- a ``triggered_tags`` whose every trigger starts with a control token becomes ``token_triggered_tags`` on
  those tokens (its tags then begin with them, as that format requires); excludes that are control tokens
  become ``exclude_tokens``; in free text behind text triggers (and a ``dispatch``) they become the token's
  private spelling.

A ``json_schema`` format of an XML style writes text of xgrammar's own around its values
(:data:`STYLE_MARKERS`); where that text holds a control token (DeepSeek's DSML parameters), the tag has no
rewritten form.

What has no such form raises :class:`~.xgrammar_adapter.ControlTextError` naming it: a trigger or begin
that starts with text and goes on with a control token inside a ``triggered_tags``, a text exclude beside
token triggers, a separator or dispatch pattern or list of ends that holds a control token. The rewritten
tag accepts a subset of what the original accepts in xgrammar's view (the markers only as their tokens,
never spelled with ordinary tokens), and the same outputs where the model writes its markers as tokens.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .constraints import Constraint
from .xgrammar_adapter import ControlSplitter, ControlTextError

__all__ = ["STYLE_MARKERS", "control_tokens_as_tokens", "engine_structural_tag"]

Piece = str | int
"""A literal's piece (:meth:`ControlSplitter.split`): text, or the id of a control token."""


STYLE_MARKERS: dict[str, tuple[str, ...]] = {
    "json": (),
    "qwen_xml": ("<parameter=", "</parameter>"),
    "minimax_xml": ('<parameter name="', "</parameter>"),
    "minimax_m3_xml": ("]<]minimax[>[",),
    "deepseek_xml": ('<｜DSML｜parameter name="', "</｜DSML｜parameter>"),
    "deepseek_v4_1_xml": ('<｜DSML｜ parameter name="', "</｜DSML｜ parameter>"),
    "glm_xml": ("<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"),
    "cohere_xml": ('<cofl:value name="', "</cofl:value>"),
    "kimi_k3_xml": ("<|open|>argument", "<|sep|>", "<|close|>"),
    "gemma": ('<|"|>',),
}
"""The text xgrammar writes around the values of a ``json_schema`` format of each ``style`` (xgrammar's
``JSONSchemaFormat.style``): a style whose text holds a control token of the vocabulary cannot be rewritten
(the text is xgrammar's, not the tag's), and neither can a style missing here."""


def control_tokens_as_tokens(tag: Mapping[str, Any], splitter: ControlSplitter) -> dict[str, Any]:
    """A copy of ``tag`` (``{"type": "structural_tag", "format": ...}``) whose literals ask for control tokens
    as tokens (the module docstring; a tag without control-token text comes back equal); ``ControlTextError``
    naming what cannot be rewritten."""
    return {**tag, "format": _rewrite(tag.get("format"), splitter, "$.format")}


def engine_structural_tag(spec: str | Mapping[str, Any], splitter: ControlSplitter) -> Constraint:
    """An engine's structural tag (a request's spec) as thinkgate's constraint: as it is, or, where its literals
    spell control tokens as text, rewritten to ask for the tokens (``ControlTextError`` where it has no such
    form). Any other problem of the tag is left to the compile, which reports it. ``ValueError`` for a spec that
    is no structural tag."""
    c = Constraint.structural_tag(spec)
    tag = json.loads(c.spec)
    if tag.get("type") != "structural_tag":
        tag = {"type": "structural_tag", "format": tag}
    if not isinstance(tag.get("format"), Mapping):
        return c  # the compile reports it
    rewritten = control_tokens_as_tokens(tag, splitter)
    return c if rewritten == tag else Constraint.structural_tag(rewritten)


def _element(piece: Piece) -> dict[str, Any]:
    return {"type": "token", "token": piece} if isinstance(piece, int) else {"type": "const_string", "value": piece}


def _edge(piece: Piece) -> Any:
    """A tag's begin or end piece: text as is, a control token as a ``token`` format."""
    return {"type": "token", "token": piece} if isinstance(piece, int) else piece


def _refuse(where: str, why: str) -> ControlTextError:
    return ControlTextError(f"invalid structural tag: {where}: {why}; text never produces a control token, and "
                            f"this form has no token-level counterpart")


def _rewrite(node: Any, sp: ControlSplitter, path: str) -> Any:
    if isinstance(node, list):
        return [_rewrite(x, sp, f"{path}[{i}]") for i, x in enumerate(node)]
    if not isinstance(node, Mapping):
        return node
    kind = node.get("type")
    # a JSON schema is data, not formats
    out = {k: v if k in ("json_schema", "schema") else _rewrite(v, sp, f"{path}.{k}") for k, v in node.items()}
    if kind in ("json_schema", "qwen_xml_parameter"):
        style = out.get("style", "json") if kind == "json_schema" else "qwen_xml"
        markers = STYLE_MARKERS.get(style) if isinstance(style, str) else None
        if markers is None or any(sp.has_control(m) for m in markers):
            raise _refuse(f"{path}.style", f"{style!r} writes its own text around the values, which holds a "
                                           "control token's text" if markers is not None else
                                           f"{style!r} is a style whose text is not known here")
    if kind == "const_string" and sp.has_control(out.get("value")):
        pieces = sp.split(out["value"])
        if len(pieces) == 1:
            return _element(pieces[0])
        return {"type": "sequence", "elements": list(map(_element, pieces))}
    if kind == "tag":
        return _rewrite_tag(out, sp, path)
    if kind == "triggered_tags" and (any(sp.has_control(t) for t in out.get("triggers") or ())
                                     or any(isinstance(t, Mapping) and isinstance(t.get("begin"), Mapping)
                                            for t in out.get("tags") or ())):
        return _token_triggered(out, sp, path)
    if sp.has_control(out.get("separator")):
        raise _refuse(f"{path}.separator", f"{out['separator']!r} holds a control token's text")
    if isinstance(out.get("excludes"), list) and any(sp.has_control(e) for e in out["excludes"]):
        out["excludes"] = _excludes(out["excludes"], kind, sp, f"{path}.excludes")
    if kind == "dispatch":
        for i, rule in enumerate(out.get("rules") or ()):
            if isinstance(rule, list) and rule and sp.has_control(rule[0]):
                raise _refuse(f"{path}.rules[{i}][0]", f"{rule[0]!r} holds a control token's text")
    return out


def _excludes(excludes: list[Any], kind: Any, sp: ControlSplitter, path: str) -> list[Any]:
    """Excludes that name a control token by its text, in thinkgate's view. A JSON schema's strings and an
    ``any_text`` never hold a control token there, so their excludes stay as they are (a control token's text
    in one still keeps that text, spelled with ordinary tokens, out). Free text elsewhere (a ``triggered_tags``
    with text triggers, a ``dispatch``) excludes a control token by its private spelling; an exclude of text and
    a token together has no such form there."""
    if kind in ("json_schema", "any_text"):
        return excludes
    out: list[Any] = []
    for e in excludes:
        if not sp.has_control(e):
            out.append(e)
            continue
        pieces = sp.split(e)
        if len(pieces) != 1:
            raise _refuse(path, f"{e!r} holds text and a control token together")
        private = sp.private_text(pieces[0])
        if private is None:
            raise _refuse(path, f"{e!r}: its token's id begins another control token's id")
        out.append(private)
    return out


def _rewrite_tag(out: dict[str, Any], sp: ControlSplitter, path: str) -> dict[str, Any]:
    begin, end = out.get("begin"), out.get("end")
    before: list[Piece] = []
    after: list[Piece] = []
    if sp.has_control(begin):
        pieces = sp.split(begin)
        out["begin"], before = _edge(pieces[0]), pieces[1:]
    if isinstance(end, list) and any(sp.has_control(e) for e in end):
        raise _refuse(f"{path}.end", f"{end!r} is a list of ends holding a control token's text")
    if sp.has_control(end):
        pieces = sp.split(end)
        out["end"], after = _edge(pieces[-1]), pieces[:-1]
    if before or after:
        content = out.get("content")
        out["content"] = {"type": "sequence",
                          "elements": [*map(_element, before), content, *map(_element, after)]}
    return out


def _token_triggered(out: dict[str, Any], sp: ControlSplitter, path: str) -> dict[str, Any]:
    """``triggered_tags`` -> ``token_triggered_tags``: every trigger must start with a control token, and every
    tag's begin (rewritten already) must be that token."""
    tokens: list[int] = []
    for i, trigger in enumerate(out.get("triggers") or ()):
        pieces = sp.split(trigger) if isinstance(trigger, str) else []
        if not pieces or not isinstance(pieces[0], int):
            raise _refuse(f"{path}.triggers[{i}]", f"{trigger!r} does not start with a control token while another "
                                                   f"trigger or tag does")
        if pieces[0] not in tokens:
            tokens.append(pieces[0])
    for i, t in enumerate(out.get("tags") or ()):
        begin = t.get("begin") if isinstance(t, Mapping) else None
        if not (isinstance(begin, Mapping) and begin.get("token") in tokens):
            raise _refuse(f"{path}.tags[{i}].begin", "it does not start with one of the triggers' control tokens")
    exclude_tokens: list[int] = []
    for e in out.get("excludes") or ():
        pieces = sp.split(e) if isinstance(e, str) else []
        if len(pieces) != 1 or not isinstance(pieces[0], int):
            raise _refuse(f"{path}.excludes", f"{e!r} is text, which a token-triggered format cannot exclude")
        exclude_tokens.append(pieces[0])
    rewritten: dict[str, Any] = {"type": "token_triggered_tags", "trigger_tokens": tokens, "tags": out.get("tags"),
                                 "exclude_tokens": exclude_tokens}
    for field in ("at_least_one", "stop_after_first"):
        if field in out:
            rewritten[field] = out[field]
    extra = set(out) - {"type", "triggers", "tags", "excludes", "at_least_one", "stop_after_first"}
    if extra:
        raise _refuse(path, f"fields {sorted(extra)} have no token-triggered counterpart")
    return rewritten
