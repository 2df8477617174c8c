"""thinkgate as SGLang 0.5.23's grammar backend, registered by name (``--grammar-backend thinkgate``).

SGLang keeps a registry of grammar backends (``register_grammar_backend`` in
``sglang/srt/constrained/base_grammar_backend.py``); ``create_grammar_backend`` builds a registered one
*before* it would wrap a built-in backend in its ``ReasonerGrammarBackend``, so a registered backend
owns the reasoning gate itself. This one does: each request's grammar object is thinkgate's matcher
(compiled by thinkgate's :class:`~thinkgate.structured_output.compilation.compiler.Compiler`: control tokens never inside strings, JSON
whitespace bounded per gap, schema keywords xgrammar drops checked on the finished output) *and*
thinkgate's reasoning tracker (the gate: no row while thinking; implicit ends that the grammar cannot
start with masked; the pending row of a model that may skip its thinking), one object.

How SGLang drives it (read from 0.5.23's source):

- per server: :func:`register` runs in every SGLang process as a general plugin (the entry point
  ``thinkgate`` in the group ``sglang.srt.plugins``; ``sglang.srt.plugins.load_plugins`` runs it before
  the arguments are parsed and in the scheduler process); it registers :func:`create_backend` under
  ``"thinkgate"`` and adds the name to ``--grammar-backend``'s choices. The scheduler's
  ``GrammarManager`` then builds one :class:`ThinkgateGrammarBackend` with the model's tokenizer, its
  logits width and ``--reasoning-parser`` (SGLang's parser names map onto thinkgate's families:
  :data:`SGLANG_REASONING_PARSERS`; a thinkgate family name works as is).
- per request (``GrammarManager.process_req_with_grammar``, scheduler thread):
  ``get_request_grammar_key(key, input_ids=prompt, ...)`` then at once
  ``get_cached_or_future_value(key, require_reasoning)``. The prompt and ``require_reasoning`` (SGLang's
  thinking switch, from the chat template's kwargs) give the request's tracker, as the manager's
  ``add_request`` does: the prompt's current turn decides first (a template that opened or closed the
  thinking), then the switch, then the family's default. A cache hit is a copy of the cached grammar
  with that tracker; a miss is a future completed when thinkgate's compile is done (the spec is read on the
  backend's reader thread, and compiled in the compiler's worker processes, with its deadline; nothing
  that grows with the spec runs on the scheduler thread). An invalid spec or a failed compile is SGLang's
  ``InvalidGrammarObject`` with the message: SGLang aborts that request alone.
- per step: ``allocate_vocab_mask`` (a fresh int32 buffer of -1: every token allowed) then
  ``fill_vocab_mask(mask, row)`` for the rows of requests not terminated; a thinking request leaves its
  row as it is (no row) unless something is masked; ``move_vocab_mask`` and ``apply_vocab_mask``
  (thinkgate's kernels: Triton on GPU, the C kernel on CPU). After sampling, ``accept_token`` per
  committed token; with speculative decoding SGLang walks its draft tree with ``accept_token``,
  ``fill_vocab_mask`` and ``rollback(1)`` (``spec_utils.traverse_tree``). ``is_terminated`` ends the
  request once the grammar accepted a stop token.

Structural tags that spell a control token as text (SGLang's own tool-call detectors write their markers so,
``<tool_call>``, ``<｜tool▁calls▁begin｜>``, for ``tool_choice="required"``, a named function and strict
``auto``) cannot be compiled as they are: thinkgate's compiler gives control tokens no text. Such a tag is
rewritten to ask for the tokens (:mod:`~thinkgate.structured_output.compilation.control_literals`), and is then
thinkgate's. One with no rewritten form (DeepSeek's DSML parameter styles, whose text is xgrammar's own) goes to
SGLang's own ``XGrammarGrammarBackend`` in its ``ReasonerGrammarBackend`` (what ``--grammar-backend xgrammar``
builds), made beside this one on first need, which caches it too (``get_cached_or_future_value`` and
``set_cache`` route those keys); their grammar objects share the batch with thinkgate's (the same int32
bitmask layout, SGLang's per-row fill). A backend given a thinkgate ``Vocabulary`` instead of the Hugging Face
tokenizer, or a reasoning parser object instead of SGLang's name, cannot make SGLang's: such tags are then
refused with the message naming the token.

Failure model: a token the grammar rejects raises ``ValueError`` from ``accept_token`` (SGLang aborts
that request with the message), nothing moved. A row that would allow nothing (a dead end, or an output
that the schema check refuses where only the end can follow) is never handed to the sampler: the row
allows only the stop tokens, the grammar reports itself terminated (SGLang ends the request) and keeps
the message in ``error`` (logged), a stop token is then ignored and any other token raises
``ValueError``. A rollback to before that point (SGLang's draft-tree walk trying a path) clears it.
SGLang gives a grammar no way to fail a request from a fill, and its tree walk calls ``accept_token``
on every draft the row allows, so raising there would stop the scheduler. Rolling back further than
:data:`MAX_ROLLBACK_TOKENS` tokens (SGLang's own bound) raises ``ValueError``.

SGLang's per-request ``thinking_budget`` (``custom_params``) is the manager's ``max_thinking_tokens``:
once that many thinking tokens were written, the rows force the family's end of thinking, one token
per row (:mod:`thinkgate.structured_output.step.budget`). Not carried over from the manager: ``--enable-strict-thinking``'s token
filter, compile-while-thinking (SGLang schedules a request once its grammar future is done) and
jump-forward (0.5.23's scheduler never calls ``try_jump_forward``).
"""

from __future__ import annotations

import logging
import math
import threading
from collections import OrderedDict
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from typing import Any, Sequence

import numpy as np
import torch
from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES, add_grammar_backend_choices
from sglang.srt.constrained.base_grammar_backend import (BaseGrammarBackend, BaseGrammarObject, GrammarStats,
                                                         InvalidGrammarObject, register_grammar_backend)

from thinkgate import kernels
from thinkgate.reasoning.base import ReasoningParser, ReasoningTracker
from thinkgate.reasoning.registry import get_reasoning_parser, list_reasoning_parsers
from thinkgate.engines.sglang.names import SGLANG_REASONING_PARSERS, SGLANG_UNSERVED, thinkgate_family
from thinkgate.reasoning.vocabulary import Vocabulary

from thinkgate.structured_output.compilation.compiler import CompiledConstraint, Compiler, xgrammar_message
from thinkgate.structured_output.compilation.constraints import DEFAULT_MAX_WHITESPACE, Constraint
from thinkgate.structured_output.compilation.control_literals import engine_structural_tag
from thinkgate.structured_output.compilation.xgrammar_adapter import ControlTextError
from thinkgate.structured_output.step.request import THINKING, RequestContext, StructuredRequest

__all__ = ["NAME", "SGLANG_REASONING_PARSERS", "SGLANG_UNSERVED", "MAX_ROLLBACK_TOKENS", "ThinkgateGrammarBackend", "ThinkgateGrammar",
           "create_backend", "register", "thinkgate_family"]

logger = logging.getLogger(__name__)

NAME = "thinkgate"
"""The name under which the backend registers (``--grammar-backend thinkgate``)."""

MAX_ROLLBACK_TOKENS = 200
"""How many accepted tokens a grammar can roll back (SGLang's xgrammar backend keeps as many)."""

_THINKING_SWITCHES = ("enable_thinking", "thinking", "reasoning")
"""The chat-template kwargs through which the families read a thinking switch: SGLang passes the
backend only its decision (``require_reasoning``), which the tracker reads as all of them."""

_KEY_TYPES = ("json", "regex", "ebnf", "full_assistant_ebnf", "structural_tag")


def _allocate(vocab_size: int, batch_size: int) -> torch.Tensor:
    """A mask of ``batch_size`` rows that allow everything (-1), pinned when CUDA is there (for the
    non-blocking copy). Filled by numpy, one thread: torch's intra-op threads made ``torch.full`` of
    this size take milliseconds on a loaded 2-core machine."""
    mask = torch.empty((batch_size, math.ceil(vocab_size / 32)), dtype=torch.int32,
                       pin_memory=torch.cuda.is_available())
    mask.numpy().fill(-1)
    return mask


class ThinkgateGrammar(BaseGrammarObject):
    """One request's grammar and reasoning gate under SGLang's ``BaseGrammarObject`` contract.

    SGLang's calls go to the request's :class:`~thinkgate.structured_output.step.request.StructuredRequest` (``state``), driven one
    token at a time: it owns the status, matcher, tracker, thinking rows, budget and a bounded history
    of the accepted tokens for ``rollback`` (per token: the tracker before it, when it was a thinking
    token). This object only checks SGLang's arguments and turns a refused token into SGLang's
    ``ValueError``. Every call costs O(its tokens): one tracker step and one tracker copy per thinking
    token, one matcher step per content token, one fill per row. Driven by SGLang's scheduler thread.
    """

    def __init__(self, backend: ThinkgateGrammarBackend, compiled: CompiledConstraint, key: tuple[str, str],
                 tracker: ReasoningTracker | None, grammar_stats: GrammarStats | None = None,
                 think_limit: int | None = None) -> None:
        super().__init__()
        self.backend = backend
        self.compiled = compiled
        self.key = key
        self.grammar_stats = grammar_stats
        self.state = StructuredRequest.from_compiled(backend.request_context, f"{key[0]}", compiled, tracker,
                                                     think_limit=think_limit, rollback_window=MAX_ROLLBACK_TOKENS)

    # -- status ------------------------------------------------------------------------------
    @property
    def thinking(self) -> bool:
        """True while the request's thinking has not ended (its grammar does not apply yet)."""
        return self.state.status is THINKING

    @property
    def error(self) -> str | None:
        """Why this grammar hit a dead end (then it allows only stop tokens and reports itself
        terminated; a rollback to before that point clears it), else None."""
        return self.state.dead_end_message

    def is_terminated(self) -> bool:
        return self.state.is_finished()

    # -- tokens ------------------------------------------------------------------------------
    def accept_token(self, token: int) -> None:
        """Commit (or, in SGLang's draft-tree walk, try) one token; ``ValueError`` with the reason for a
        token the grammar rejects, nothing moved."""
        if type(token) is not int or not 0 <= token < self.backend.vocab_size:  # the common case: one test
            if isinstance(token, (bool, np.bool_)) or not isinstance(token, (int, np.integer)) \
                    or not 0 <= token < self.backend.vocab_size:
                raise ValueError(f"token {token!r} is not a token id in [0, {self.backend.vocab_size})")
            token = int(token)
        self.current_token = token
        why = self.state.try_token(token)
        if why is not None:
            raise ValueError(why)

    def rollback(self, k: int) -> None:
        """Undo the last ``k`` accepted tokens (thinking, its end and content alike); ``ValueError`` past
        :data:`MAX_ROLLBACK_TOKENS`."""
        self.state.rollback(k)

    # -- masks -------------------------------------------------------------------------------
    def allocate_vocab_mask(self, vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return _allocate(vocab_size, batch_size)

    def fill_vocab_mask(self, vocab_mask: torch.Tensor, idx: int) -> None:
        """Row ``idx``: nothing written while thinking with nothing to mask (the row keeps the -1 of
        ``allocate_vocab_mask``); the forced token past the thinking budget; the thinking or pending
        row; the grammar's row; stop tokens only once terminated or at a dead end (logged)."""
        dead = self.state.fill_row(vocab_mask, idx)
        if dead is not None:
            logger.warning("thinkgate grammar %s: %s", self.key[0], dead)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        """thinkgate's kernel: every logit the row does not allow set to -inf, row ``i`` on logits row
        ``i`` (Triton on GPU, the C kernel on CPU)."""
        kernels.apply_token_bitmask_inplace(logits, vocab_mask)

    # -- copies ------------------------------------------------------------------------------
    def copy(self) -> ThinkgateGrammar:
        """A fresh grammar of the same constraint at its start, past any thinking (what SGLang caches;
        :meth:`ThinkgateGrammarBackend.get_cached_or_future_value` gives each request's copy its
        tracker)."""
        stats = self.grammar_stats
        if stats is not None:
            stats = GrammarStats(compilation_time=stats.compilation_time, dispatch_type=stats.dispatch_type,
                                 is_cache_hit=True)
        return ThinkgateGrammar(self.backend, self.compiled, self.key, None, stats)

    def __repr__(self) -> str:
        st = self.state
        return (f"ThinkgateGrammar({self.key[0]}, {st.status.value}, out={st.n_out}, content={st.n_content}"
                f"{', ' + repr(st.message) if st.message else ''})")


class ThinkgateGrammarBackend(BaseGrammarBackend):
    """SGLang's per-server grammar backend over thinkgate (see the module docstring).

    Per server: the vocabulary (read from SGLang's tokenizer, SGLang's vocabulary size as the logits
    width), the reasoning parser, the :class:`Compiler` (worker processes, bounded cache keyed by the
    canonical constraint) and the :class:`~thinkgate.structured_output.step.request.RequestContext` its requests share (stop tokens,
    thinking rows per compiled grammar, budget rows). SGLang's own cache of grammar objects
    (``self.cache``, one template per key) is bounded by ``cache_limit`` entries.
    """

    def __init__(self, tokenizer: Any, vocab_size: int, reasoning_parser: str | ReasoningParser | None = None, *,
                 any_whitespace: bool = True, max_whitespace: int | None = DEFAULT_MAX_WHITESPACE,
                 stop_token_ids: Sequence[int] | None = None, compile_timeout_s: float = 30.0,
                 compiler: Compiler | None = None, cache_limit: int = 4096) -> None:
        super().__init__()
        self.executor.shutdown(wait=False)  # the base's thread pool: compiles run in thinkgate's compiler
        if isinstance(tokenizer, Vocabulary):
            vocab = tokenizer
            if vocab_size < vocab.vocab_size:
                raise ValueError(f"vocab_size {vocab_size} is smaller than the vocabulary's {vocab.vocab_size}")
            if vocab_size != vocab.logits_width:
                raise ValueError(f"vocab_size {vocab_size} is not the vocabulary's logits width {vocab.logits_width}")
        else:
            vocab = Vocabulary.from_hf_tokenizer(tokenizer, logits_width=vocab_size, name="sglang")
        if stop_token_ids and frozenset(stop_token_ids) != vocab.stop_token_ids:  # the model's eos ids rule
            vocab = Vocabulary(vocab.name, vocab.token_bytes, vocab.special_tokens, stop_token_ids,
                               logits_width=vocab.logits_width, encode=vocab.encode, bos_token_id=vocab.bos_token_id,
                               response_template=vocab.response_template)
        self.vocabulary = vocab
        self.vocab_size = vocab.logits_width
        # SGLang's own backend for the structural tags that spell control tokens as text (built on first need)
        self._hf_tokenizer = None if isinstance(tokenizer, Vocabulary) else tokenizer
        self._sglang_parser_name = reasoning_parser if isinstance(reasoning_parser, str) else None
        self._xgrammar: BaseGrammarBackend | None = None
        self._xgrammar_error: str | None = None
        self._xgrammar_keys: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._xgrammar_lock = threading.Lock()
        # a new key's constraint is read off the scheduler thread (its cost grows with the spec)
        self._reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thinkgate-sglang-read")
        if isinstance(reasoning_parser, str):
            reasoning_parser = get_reasoning_parser(thinkgate_family(reasoning_parser))(vocab)
        self.parser = reasoning_parser
        self.any_whitespace = bool(any_whitespace)
        self.max_whitespace = max_whitespace
        self.compile_timeout_s = float(compile_timeout_s)
        self._owns_compiler = compiler is None
        self.compiler = compiler if compiler is not None else Compiler(vocab)
        self.cache_limit = int(cache_limit)
        self.stop_ids = vocab.stop_token_ids
        # what every request's state machine shares (its thinking rows are built on the compiler's
        # callback threads too: under a lock)
        self.request_context = RequestContext(
            vocab, self.compiler, reasoning_parser.implicit_reasoning_end_token_ids if reasoning_parser else (),
            self.compile_timeout_s, thread_safe_rows=True)
        self._prompt: Sequence[int] = ()
        self._budget: int | None = None

    def new_tracker(self, prompt_token_ids: Sequence[int], require_reasoning: bool) -> ReasoningTracker | None:
        """The request's tracker (None: its grammar applies from the first token): the prompt's current
        turn decides, then SGLang's thinking switch ``require_reasoning``, then the family's default."""
        if self.parser is None:
            return None
        on = bool(require_reasoning)
        tracker = self.parser.new_tracker(prompt_token_ids, {k: on for k in _THINKING_SWITCHES})
        return None if tracker.ended else tracker

    # -- SGLang's per-request calls ----------------------------------------------------------
    def get_request_grammar_key(self, key: tuple[str, str], *, input_ids: Sequence[int],
                                thinking_budget: int | None) -> tuple[str, str]:
        """The key, unchanged; the prompt and the request's ``thinking_budget`` (SGLang's
        ``custom_params``) are kept for the ``get_cached_or_future_value`` call that SGLang makes next
        for the same request (``GrammarManager.process_req_with_grammar``)."""
        self._prompt = input_ids if input_ids is not None else ()
        self._budget = thinking_budget if isinstance(thinking_budget, int) and thinking_budget >= 0 else None
        return key

    def constraint(self, key: tuple[str, str]) -> Constraint:
        """SGLang's (key type, spec) as a thinkgate constraint; ``ValueError`` naming the problem."""
        key_type, spec = key
        if key_type == "json":
            if spec == "$$ANY$$":
                return Constraint.json_object(any_whitespace=self.any_whitespace, max_whitespace=self.max_whitespace)
            return Constraint.json_schema(spec, any_whitespace=self.any_whitespace, max_whitespace=self.max_whitespace)
        if key_type == "regex":
            return Constraint.regex(spec)
        if key_type in ("ebnf", "full_assistant_ebnf"):
            return Constraint.grammar(spec)
        if key_type == "structural_tag":
            return engine_structural_tag(spec, self.compiler.control_splitter)
        raise ValueError(f"grammar type {key_type!r} is not supported by the thinkgate backend (it takes {_KEY_TYPES})")

    def get_cached_or_future_value(self, key: tuple[str, str], require_reasoning: bool
                                   ) -> tuple[BaseGrammarObject | Future, bool]:
        prompt, self._prompt = self._prompt, ()
        budget, self._budget = self._budget, None
        if self._delegated(key):
            assert self._xgrammar is not None
            return self._xgrammar.get_cached_or_future_value(key, require_reasoning)
        # "full_assistant_ebnf": the grammar spells the whole turn, thinking included
        try:
            tracker = None if key[0] == "full_assistant_ebnf" else self.new_tracker(prompt, require_reasoning)
        except Exception as e:  # noqa: BLE001 - a prompt the parser cannot read fails its request alone
            return InvalidGrammarObject(f"the reasoning parser {self.parser.name!r} cannot read the prompt: "
                                        f"{type(e).__name__}: {e}"), True
        if tracker is None or tracker.forced_end_token_ids() is None:
            budget = None  # nothing to count, or a family that cannot force its end
        cached = self.cache.get(key)
        if cached is not None:
            if isinstance(cached, ThinkgateGrammar):
                return ThinkgateGrammar(self, cached.compiled, key, tracker,
                                        cached.copy().grammar_stats, budget), True
            return cached, True
        out: Future = Future()
        out.set_running_or_notify_cancel()  # SGLang may cancel it only while pending: it waits for it instead
        self._reader.submit(self._start, out, key, tracker, budget, require_reasoning)
        return out, False

    def _start(self, out: Future, key: tuple[str, str], tracker: ReasoningTracker | None, budget: int | None,
               require_reasoning: bool) -> None:
        """A new key (the reader thread): its constraint submitted to the compiler, or the key handed to SGLang's
        own backend (a tag with no token-level form), or SGLang's invalid marker saying why."""
        try:
            try:
                constraint = self.constraint(key)
                compiling = self.compiler.submit(constraint, timeout_s=self.compile_timeout_s)
            except ControlTextError as e:
                xgrammar = self._xgrammar_backend()
                if xgrammar is None:
                    out.set_result(InvalidGrammarObject(str(e)))
                    return
                with self._xgrammar_lock:
                    self._xgrammar_keys[key] = None
                    while len(self._xgrammar_keys) > self.cache_limit:
                        self._xgrammar_keys.popitem(last=False)
                value, _ = xgrammar.get_cached_or_future_value(key, require_reasoning)
                if isinstance(value, Future):
                    value.add_done_callback(lambda f: _relay(out, f, key))
                else:
                    out.set_result(value)
                return
            except ValueError as e:
                out.set_result(InvalidGrammarObject(str(e)))
                return
            compiling.add_done_callback(lambda f: self._settle(out, f, key, tracker, budget))
        except Exception as e:  # noqa: BLE001 - whatever happens, the request gets an answer
            try:
                out.set_result(InvalidGrammarObject(f"{key[0]} grammar failed: {type(e).__name__}: {e}"))
            except InvalidStateError:
                pass

    def _settle(self, out: Future, compiling: Future, key: tuple[str, str], tracker: ReasoningTracker | None,
                budget: int | None) -> None:
        """The compile finished (a compiler thread): the request's grammar, or SGLang's invalid marker."""
        try:
            exc = compiling.exception()
            if exc is None:
                compiled: CompiledConstraint = compiling.result()
                if not compiled.initial_mask.any():
                    value: BaseGrammarObject = InvalidGrammarObject(
                        f"the {compiled.constraint.kind} constraint accepts no output: its grammar allows no first "
                        f"token")
                else:
                    value = ThinkgateGrammar(self, compiled, key, tracker,
                                             GrammarStats(compilation_time=compiled.compile_s, dispatch_type=key[0]),
                                             budget)
            elif isinstance(exc, ValueError):
                value = InvalidGrammarObject(str(exc))
            elif isinstance(exc, TimeoutError):
                value = InvalidGrammarObject(f"{key[0]} grammar did not compile within {self.compile_timeout_s:g} s")
            else:
                value = InvalidGrammarObject(f"{key[0]} grammar failed to compile: {xgrammar_message(exc)}")
        except Exception as e:  # noqa: BLE001 - whatever happens, the request gets an answer
            value = InvalidGrammarObject(f"{key[0]} grammar failed: {e}")
        try:
            out.set_result(value)
        except InvalidStateError:
            pass

    def set_cache(self, key: tuple[str, str], value: BaseGrammarObject) -> None:
        if self._delegated(key):
            assert self._xgrammar is not None
            self._xgrammar.set_cache(key, value)
            return
        cache = self.cache
        if key not in cache and len(cache) >= self.cache_limit:
            del cache[next(iter(cache))]  # the oldest entry (insertion order)
        cache[key] = value

    def reset(self) -> None:
        super().reset()
        self.compiler.clear_cache()
        with self._xgrammar_lock:
            self._xgrammar_keys.clear()
        if self._xgrammar is not None:
            self._xgrammar.reset()

    # -- structural tags that spell control tokens as text --------------------------------------
    def _delegated(self, key: tuple[str, str]) -> bool:
        """Is ``key`` SGLang's own backend's (a tag with no token-level form, seen before)?"""
        with self._xgrammar_lock:
            if key in self._xgrammar_keys:
                self._xgrammar_keys.move_to_end(key)
                return True
        return False

    def _xgrammar_backend(self) -> BaseGrammarBackend | None:
        """SGLang's ``XGrammarGrammarBackend`` for this server, wrapped in its ``ReasonerGrammarBackend`` when a
        reasoning parser is set (what ``--grammar-backend xgrammar`` builds), made on first need; None, logged
        once, where it cannot be made (no Hugging Face tokenizer, a reasoning parser SGLang does not name)."""
        if self._xgrammar is not None or self._xgrammar_error is not None:
            return self._xgrammar
        try:
            self._xgrammar = _sglang_xgrammar(self._hf_tokenizer, self.vocab_size, sorted(self.stop_ids),
                                              self.any_whitespace, self.max_whitespace,
                                              self._sglang_parser_name if self.parser is not None else None,
                                              self.parser is not None)
        except Exception as e:  # noqa: BLE001 - then those tags are refused, as without it
            self._xgrammar_error = f"{type(e).__name__}: {e}"
            logger.warning("thinkgate: structural tags that spell control tokens as text are refused: SGLang's "
                           "xgrammar backend could not be built (%s)", self._xgrammar_error)
        return self._xgrammar

    # -- masks (SGLang asks the backend for them where it has no grammar object at hand) -------
    @staticmethod
    def allocate_vocab_mask(vocab_size: int, batch_size: int, device: Any) -> torch.Tensor:
        return _allocate(vocab_size, batch_size)

    @staticmethod
    def move_vocab_mask(vocab_mask: torch.Tensor, device: Any) -> torch.Tensor:
        return vocab_mask.to(device, non_blocking=True)

    @staticmethod
    def apply_vocab_mask(logits: torch.Tensor, vocab_mask: torch.Tensor) -> None:
        kernels.apply_token_bitmask_inplace(logits, vocab_mask)

    def close(self) -> None:
        """Stop the compiler's workers if this backend built the compiler, and SGLang's backend's threads."""
        self._reader.shutdown(wait=False, cancel_futures=True)
        if self._owns_compiler:
            self.compiler.close()
        xb = self._xgrammar
        while xb is not None:
            xb.executor.shutdown(wait=False)
            xb = getattr(xb, "grammar_backend", None)  # the reasoner's inner backend


def _relay(out: Future, done: Future, key: tuple[str, str]) -> None:
    """SGLang's own backend's future, done: its grammar object (or its invalid marker) for the request."""
    try:
        value = done.result()
    except Exception as e:  # noqa: BLE001 - SGLang's compile failing in a way it did not catch itself
        value = InvalidGrammarObject(f"{key[0]} grammar failed: {type(e).__name__}: {e}")
    try:
        out.set_result(value)
    except InvalidStateError:
        pass


def _sglang_xgrammar(tokenizer: Any, vocab_size: int, eos: list[int], any_whitespace: bool,
                     max_whitespace: int | None, parser_name: str | None, has_parser: bool) -> BaseGrammarBackend:
    """SGLang's own backend as ``create_grammar_backend`` builds it for ``--grammar-backend xgrammar``."""
    if tokenizer is None:
        raise ValueError("the backend was given a thinkgate Vocabulary, not the server's Hugging Face tokenizer")
    if has_parser and parser_name is None:
        raise ValueError("the reasoning parser was given as an object; SGLang's reasoner needs its name")
    from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend

    backend: BaseGrammarBackend = XGrammarGrammarBackend(tokenizer, vocab_size=vocab_size, model_eos_token_ids=eos,
                                                         any_whitespace=any_whitespace,
                                                         max_whitespace_cnt=max_whitespace)
    if parser_name is not None:
        from sglang.srt.constrained.reasoner_grammar_backend import ReasonerGrammarBackend
        from sglang.srt.parser.reasoning_parser import ReasoningParser as SGLangReasoningParser

        backend = ReasonerGrammarBackend(backend, SGLangReasoningParser(model_type=parser_name, stream_reasoning=False,
                                                                        tokenizer=tokenizer), tokenizer)
    return backend


def create_backend(server_args: Any, tokenizer: Any, vocab_size: int, eos_token_ids: Any = None
                   ) -> ThinkgateGrammarBackend:
    """What SGLang's ``create_grammar_backend`` calls for ``--grammar-backend thinkgate``: the backend
    for the server's tokenizer and logits width, with ``--reasoning-parser`` and the JSON whitespace
    flags (``--constrained-json-disable-any-whitespace``; ``--constrained-json-max-whitespace-cnt``,
    thinkgate's bound of 16 per gap when unset) read from SGLang's serving config."""
    from sglang.srt.runtime_context import get_serving

    serving = get_serving()
    max_ws = serving.constrained_json_max_whitespace_cnt
    return ThinkgateGrammarBackend(
        tokenizer, vocab_size, serving.reasoning_parser or None,
        stop_token_ids=sorted(eos_token_ids) if eos_token_ids else None,
        any_whitespace=not serving.constrained_json_disable_any_whitespace,
        max_whitespace=DEFAULT_MAX_WHITESPACE if max_ws is None else int(max_ws))


def register() -> None:
    """SGLang general-plugin entry point: register the backend as ``thinkgate`` and accept the name in
    ``--grammar-backend`` (idempotent)."""
    register_grammar_backend(NAME, create_backend)
    if NAME not in GRAMMAR_BACKEND_CHOICES:
        add_grammar_backend_choices([NAME])
