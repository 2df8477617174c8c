"""thinkgate's compiler as vLLM 0.34's structured-output backend (what the general plugin installs).

vLLM has no registry for structured-output backends: its ``StructuredOutputManager.grammar_init``
builds ``XgrammarBackend`` by the name it imported into ``vllm.v1.structured_output``. :func:`install`
rebinds that name to :class:`ThinkgateBackend`, so requests that vLLM resolves to ``xgrammar`` (the
default) compile with thinkgate's :class:`~thinkgate.structured_output.compilation.compiler.Compiler`; vLLM's own front-end validation of
those requests is unchanged. ``thinkgate.engines.vllm.plugin`` calls it (opt-in).

Per engine (vLLM builds one backend, on the first structured request): a thinkgate ``Vocabulary``
read from vLLM's tokenizer with vLLM's vocabulary size as the logits width, and a ``Compiler`` (its
zygote and worker processes, its bounded cache keyed by the canonical constraint). Per request: a
``ThinkgateGrammar`` over the matcher the manager would use (``schema_support.new_matcher``): the
whitespace bound beside the grammar and, for schema keywords the grammar cannot enforce, the check
of the finished output.

What a request gets from thinkgate under vLLM: control tokens (chat markers, think tags, tool
markers) never inside JSON strings, regex or free text; JSON whitespace bounded per gap
(``max_whitespace``, 16; vLLM's ``disable_any_whitespace`` gives ``json.dumps``'s layout); the JSON
Schema keywords xgrammar drops either enforced or checked on the finished output (a violation makes
``accept_tokens`` refuse the stop token, so vLLM ends the request); compiles in worker processes with
a deadline that really stops them; one compile per distinct constraint. Structural tags that name
control tokens as tokens (thinkgate's tool plugin sends those) compile with thinkgate too, and so do those
that write a control token as text (vLLM's own tool parsers' xgrammar tags write ``<tool_call>`` so), rewritten
to ask for the token; a tag with no such form (DeepSeek's DSML parameter styles) and Lark grammars stay with
vLLM's own xgrammar backend, built beside it on first need (:func:`handled_by_xgrammar`).

vLLM's engine core does not see ``--tool-call-parser``: with ``THINKGATE_VLLM_TOOL_FORMAT`` set to the
server's tool format (a thinkgate format or vLLM tool-parser name, ``thinkgate_`` prefix allowed), the compiler
is started with that format's call syntax in its workers' caches (``tools.tool_format_warm_up``), so the first
tool request does not compute those rules (:func:`tool_format_warm_up_from_env`).
"""

from __future__ import annotations

import json
import math
import os
import threading
from dataclasses import dataclass, field
from typing import Any

import torch
from vllm.v1.structured_output.backend_types import (StructuredOutputBackend, StructuredOutputGrammar,
                                                     StructuredOutputOptions)

from thinkgate.engines.vllm.reasoning_parsers import vocabulary_of
from thinkgate.reasoning.vocabulary import Vocabulary
from thinkgate.structured_output.compilation.compiler import CompiledConstraint, Compiler
from thinkgate.structured_output.compilation.constraints import Constraint
from thinkgate.structured_output.compilation.control_literals import engine_structural_tag
from thinkgate.structured_output.compilation.schema_support import new_matcher, output_problem
from thinkgate.structured_output.compilation.xgrammar_adapter import ControlSplitter
from thinkgate.structured_output.tools import tool_format_warm_up

from thinkgate.engines.registration import Patch

__all__ = ["PATCH", "TOOL_FORMAT_ENV", "ThinkgateBackend", "ThinkgateGrammar", "constraint_of", "handled_by_xgrammar",
           "install", "uninstall", "installed", "tool_format_warm_up_from_env"]

TOOL_FORMAT_ENV = "THINKGATE_VLLM_TOOL_FORMAT"


def tool_format_warm_up_from_env(vocabulary: Vocabulary) -> tuple[Constraint, ...]:
    """The compiler's ``warm_up`` for the tool format :data:`TOOL_FORMAT_ENV` names (none when unset), built as
    the tool plugin builds a request's constraint for ``vocabulary``. ``ValueError`` naming the variable for a
    name no format has."""
    name = os.environ.get(TOOL_FORMAT_ENV, "").strip()
    if not name:
        return ()
    try:
        return tool_format_warm_up(name.removeprefix("thinkgate_"), vocabulary=vocabulary)
    except ValueError as e:
        raise ValueError(f"{TOOL_FORMAT_ENV}={name!r}: {e}") from e


def constraint_of(request_type: StructuredOutputOptions, spec: str, *, disable_any_whitespace: bool,
                  vocabulary: Vocabulary | None = None, splitter: ControlSplitter | None = None) -> Constraint:
    """vLLM's (request type, spec) as a thinkgate constraint; ``ValueError`` for what it cannot take. With
    ``vocabulary``, a structural tag that writes control tokens as text asks for the tokens
    (:func:`handled_by_xgrammar`)."""
    ws = {"any_whitespace": False} if disable_any_whitespace else {}
    if request_type == StructuredOutputOptions.JSON:
        return Constraint.json_schema(spec, **ws)
    if request_type == StructuredOutputOptions.JSON_OBJECT:
        return Constraint.json_object(**ws)
    if request_type == StructuredOutputOptions.REGEX:
        return Constraint.regex(spec)
    if request_type == StructuredOutputOptions.CHOICE:
        return Constraint.choice(json.loads(spec))
    if request_type == StructuredOutputOptions.GRAMMAR:
        return Constraint.grammar(spec)
    if request_type == StructuredOutputOptions.STRUCTURAL_TAG:
        if vocabulary is None:
            return Constraint.structural_tag(spec)
        return engine_structural_tag(spec, splitter or ControlSplitter(vocabulary.special_tokens))
    raise ValueError(f"unsupported structured output type {request_type!s}")


def handled_by_xgrammar(request_type: StructuredOutputOptions, spec: str, vocabulary: Vocabulary, *,
                        splitter: ControlSplitter | None = None) -> bool:
    """Requests thinkgate leaves to vLLM's own xgrammar backend: Lark grammars, a structural-tag spec that is no
    JSON object (vLLM's backend reports it), and structural tags with no thinkgate form. A tag whose literals
    write a control token as text (vLLM's own tool parsers' xgrammar tags write ``<tool_call>`` so; thinkgate's
    compiler gives control tokens no text) is rewritten to ask for the tokens (``compilation/control_literals.py``)
    and is thinkgate's where that works; a tag that names its markers as tokens (thinkgate's tool plugin) is
    thinkgate's, and so is the legacy form (``structures`` / ``triggers``). ``splitter``: the vocabulary's, made
    once by a caller that asks often (else made here: DeepSeek V4's 1,283 control texts make one large pattern)."""
    if request_type == StructuredOutputOptions.STRUCTURAL_TAG:
        try:
            engine_structural_tag(spec, splitter or ControlSplitter(vocabulary.special_tokens))
        except ValueError:
            return True
        return False
    return request_type == StructuredOutputOptions.GRAMMAR and "::=" not in spec


@dataclass
class ThinkgateGrammar(StructuredOutputGrammar):
    """One request's matcher under vLLM's ``StructuredOutputGrammar`` contract."""

    matcher: Any
    compiled: CompiledConstraint
    vocabulary: Vocabulary
    stop_ids: frozenset[int]
    problem: str | None = field(default=None, init=False)
    """Why the finished output was refused (a schema keyword checked on the output), or None."""

    def accept_tokens(self, request_id: str, tokens: list[int]) -> bool:
        """Advance over ``tokens`` (those after termination are ignored); False, with nothing
        advanced, when the grammar rejects one or the finished output breaks the schema."""
        m = self.matcher
        if m.is_terminated():
            return True
        done = 0
        for t in tokens:
            if not m.accept_token(t):
                break
            done += 1
            if m.is_terminated():
                self.problem = output_problem(m, self.vocabulary, self.stop_ids)
                if self.problem is not None:
                    break
                return True
        else:
            return True
        if done:
            m.rollback(done)
        return False

    def validate_tokens(self, tokens: list[int]) -> list[int]:
        m = self.matcher
        if m.is_terminated():
            return []
        ok: list[int] = []
        for t in tokens:
            if not m.accept_token(t):
                break
            ok.append(t)
            if m.is_terminated():
                break
        if ok:
            m.rollback(len(ok))
        return ok

    def rollback(self, num_tokens: int) -> None:
        if num_tokens > 0:
            self.matcher.rollback(num_tokens)

    def fill_bitmask(self, bitmask: torch.Tensor, batch_index: int) -> None:
        self.matcher.fill_next_token_bitmask(bitmask, batch_index)

    def is_terminated(self) -> bool:
        return self.matcher.is_terminated()

    def reset(self) -> None:
        self.matcher.reset()


@dataclass
class ThinkgateBackend(StructuredOutputBackend):
    """vLLM's per-engine backend over thinkgate's compiler (see the module docstring)."""

    def __post_init__(self) -> None:
        self.vocabulary = vocabulary_of(self.tokenizer, logits_width=self.vocab_size)
        cfg = self.vllm_config.structured_outputs_config
        self.disable_any_whitespace = bool(cfg.disable_any_whitespace)
        self.compiler = Compiler(self.vocabulary, warm_up=tool_format_warm_up_from_env(self.vocabulary))
        self._xgrammar: StructuredOutputBackend | None = None  # vLLM's own, built on first need
        self._xgrammar_lock = threading.Lock()

    def compile_grammar(self, request_type: StructuredOutputOptions, grammar_spec: str,
                        stop_token_ids: set[int] | None = None) -> StructuredOutputGrammar:
        tag = request_type == StructuredOutputOptions.STRUCTURAL_TAG
        constraint = None
        if tag or not handled_by_xgrammar(request_type, grammar_spec, self.vocabulary):
            try:
                constraint = constraint_of(request_type, grammar_spec, vocabulary=self.vocabulary,
                                           splitter=self.compiler.control_splitter,
                                           disable_any_whitespace=self.disable_any_whitespace)
            except ValueError:
                if not tag:
                    raise
                # a tag with no thinkgate form, or no tag at all (vLLM's backend reports it): handled_by_xgrammar
        if constraint is None:
            with self._xgrammar_lock:
                if self._xgrammar is None:
                    self._xgrammar = PATCH.original(_vllm_xgrammar())(
                        self.vllm_config, tokenizer=self.tokenizer, vocab_size=self.vocab_size)
            return self._xgrammar.compile_grammar(request_type, grammar_spec, stop_token_ids)
        compiled = self.compiler.compile(constraint)
        return ThinkgateGrammar(new_matcher(compiled), compiled, self.vocabulary,
                                frozenset(self.vocabulary.stop_token_ids))

    def allocate_token_bitmask(self, max_num_seqs: int) -> torch.Tensor:
        return torch.full((max_num_seqs, math.ceil(self.vocab_size / 32)), -1, dtype=torch.int32)

    def destroy(self) -> None:
        self.compiler.close()
        if self._xgrammar is not None:
            self._xgrammar.destroy()


def _vllm_xgrammar() -> type[StructuredOutputBackend]:
    from vllm.v1.structured_output.backend_xgrammar import XgrammarBackend

    return XgrammarBackend


def _module() -> Any:
    import vllm.v1.structured_output as so

    return so


PATCH = Patch(_module, "XgrammarBackend", ThinkgateBackend)
"""The name vLLM builds its ``xgrammar`` backend by, bound to :class:`ThinkgateBackend` while installed."""
install, uninstall, installed = PATCH.install, PATCH.uninstall, PATCH.installed
