"""The per-model compiler: constraints -> xgrammar compiled grammars, on a thread pool, cached.

One :class:`Compiler` per model (vocabulary), shared by every request and by every manager of that
model; all its methods are thread-safe.

Control tokens
--------------
xgrammar's defaults let a control token (``<|im_end|>``, ``<think>``, ``<tool_call>`` ...) appear inside
a JSON string or any free text whenever its *text* is allowed there. We never want that, and we still
want formats to name such a token when they mean it (a tool call that starts with the ``<tool_call>``
token). So the xgrammar ``TokenizerInfo`` is built with every control token (``Vocabulary.special_tokens``)
spelled as private bytes, ``b"\\xff\\xfe<id>"``: ``0xFF`` never occurs in UTF-8, so no text rule (JSON
strings, regex, EBNF character classes, ``any_text``) can ever match such a token, while the
token-level formats of a structural tag (``token``, ``exclude_token``, ``any_tokens``,
``token_triggered_tags``, ``token_dispatch``) still match it by id. Token names in those formats are
resolved to ids with the :class:`~reasoning.Vocabulary` before compiling (a name that is not one token
is a ``ValueError``), and a literal the output must spell (``const_string``, a tag's ``begin`` /
``end``, a trigger, a separator) that contains a control token's text is a ``ValueError`` naming
it (it could never match the token the model writes). Stop tokens are xgrammar's stop tokens:
allowed only where the grammar may end. Ids the tokenizer leaves undefined and ids past its size (up
to the logits width) are never allowed.
(Building the vocabulary with ``b""`` for control tokens, the usual trick, makes xgrammar treat them
as *special*: never allowed, not even by a ``token`` format, so a tool-call tag could not start
with ``<tool_call>``.)

Validation and compilation
--------------------------
:meth:`Compiler.submit` validates synchronously (building the xgrammar ``Grammar``: JSON-schema to
grammar conversion, regex and EBNF parsing, structural-tag parsing; about 0.3 ms per KiB of schema)
and raises ``ValueError`` naming the problem. A spec longer than ``sync_validate_max_bytes``
(32 KiB: ~10 ms) is validated on the pool instead, so that the caller never waits long; its
problems then fail the compile future. The expensive part, the token-mask precomputation, runs on
the pool. A cache hit skips both.

xgrammar 0.2.9 fix-up: a JSON string with ``minLength`` / ``maxLength`` admits raw control characters
there; we narrow that character class (see ``_fix_bounded_json_strings``).

Cache: bounded in bytes (``CompiledGrammar.memory_size_bytes``), least recently used out first, keyed
by :attr:`Constraint.key`; a constraint being compiled is shared too (a thousand requests with one
schema start one compile). A failed compile is not cached.

Timeouts: a compile inside xgrammar cannot be interrupted. The manager gives each request a deadline
and, when it passes, puts the request in error and calls :meth:`Compiler.mark_overdue`: if that
compile is running, the pool starts a replacement worker (at most ``4 * num_threads`` at once), so
an overdue compile never shrinks the pool; the overdue thread finishes in the background, its
result is cached if it succeeds, and it then exits.
"""

from __future__ import annotations

import json
import queue
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import xgrammar as xgr

from thinkgate.reasoning.vocabulary import Vocabulary

from .constraints import Constraint

__all__ = ["Compiler", "CompiledConstraint", "CompilerStats", "build_tokenizer_info", "control_token_bytes"]


def control_token_bytes(token_id: int) -> bytes:
    """The private byte spelling of control token ``token_id`` in the xgrammar vocabulary."""
    return b"\xff\xfe" + str(token_id).encode("ascii")


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


# token-level structural-tag formats: type -> fields that name tokens (an id or a token string)
_TOKEN_FIELDS: dict[str, tuple[str, ...]] = {
    "token": ("token",),
    "exclude_token": ("exclude_tokens",),
    "any_tokens": ("exclude_tokens",),
    "token_triggered_tags": ("trigger_tokens", "exclude_tokens"),
    "token_dispatch": ("exclude_tokens",),
}


class CompiledConstraint:
    """A compiled grammar and what the manager needs from it; immutable once built, shared by every
    request with the same constraint.

    ``initial_mask`` is the bitmask row of the grammar's first token (int32, ``ceil(W/32)`` words):
    the manager uses it to decide, while a request is thinking, which implicit reasoning-end tokens
    the grammar could not start with. ``may_allow_all`` is False when no state of this grammar can
    allow every id of the logits width (every text-only grammar on a vocabulary that has control
    tokens or padding ids), so its rows never need the "allows everything" check.
    """

    __slots__ = ("constraint", "grammar", "initial_mask", "may_allow_all", "memory_bytes", "compile_s",
                 "derived", "__weakref__")

    def __init__(self, constraint: Constraint, grammar: xgr.CompiledGrammar, initial_mask: np.ndarray,
                 may_allow_all: bool, compile_s: float) -> None:
        self.constraint = constraint
        self.grammar = grammar
        self.initial_mask = initial_mask
        self.may_allow_all = may_allow_all
        self.memory_bytes = int(grammar.memory_size_bytes) + initial_mask.nbytes
        self.compile_s = compile_s
        self.derived: dict[Any, Any] = {}
        """Rows derived per reasoning parser (filled by the manager; benign races under the GIL)."""

    def allows_first(self, token_id: int) -> bool:
        """True when the grammar may start with ``token_id``."""
        return bool((int(self.initial_mask[token_id >> 5]) >> (token_id & 31)) & 1)

    def __repr__(self) -> str:
        return (f"CompiledConstraint({self.constraint.kind}, {self.memory_bytes} bytes, "
                f"compiled in {self.compile_s * 1e3:.1f} ms)")


@dataclass(frozen=True)
class CompilerStats:
    """Counters since the compiler was built."""

    compiles: int
    """Compile jobs started (each distinct constraint once while it stays cached)."""
    cache_hits: int
    """``submit`` calls answered from the cache."""
    joins: int
    """``submit`` calls that joined a compile already running for the same constraint."""
    failures: int
    evictions: int
    overdue: int
    """Compiles reported past a request's deadline."""
    cache_entries: int
    cache_bytes: int


class _CompilePool:
    """A small thread pool that can replace a worker stuck in an uninterruptible job."""

    def __init__(self, num_threads: int, name: str) -> None:
        self._name = name
        self._queue: queue.SimpleQueue[tuple[Future, Callable[[], Any]] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._overdue: set[Future] = set()
        self._max_overdue = 4 * num_threads
        self._threads: list[threading.Thread] = []
        self._closed = False
        for _ in range(num_threads):
            self._spawn()

    def _spawn(self) -> None:
        t = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
        self._threads.append(t)
        t.start()

    def submit(self, fn: Callable[[], Any]) -> Future:
        if self._closed:
            raise RuntimeError("the compiler is closed")
        fut: Future = Future()
        self._queue.put((fut, fn))
        return fut

    def mark_overdue(self, fut: Future) -> bool:
        """Start a replacement worker for ``fut``'s thread if ``fut`` is running; True if started."""
        with self._lock:
            if self._closed or fut.done() or not fut.running() or fut in self._overdue:
                return False
            if len(self._overdue) >= self._max_overdue:
                return False
            self._overdue.add(fut)
            self._spawn()
            return True

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            fut, fn = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn()
            except BaseException as e:  # noqa: BLE001 - every failure belongs to the future
                fut.set_exception(e)
            else:
                fut.set_result(result)
            with self._lock:
                if fut in self._overdue:  # a replacement has taken this thread's place
                    self._overdue.discard(fut)
                    return

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            n = len(self._threads)
        for _ in range(n):
            self._queue.put(None)


class Compiler:
    """Compiles constraints for one vocabulary (see the module docstring). Thread-safe.

    Parameters
    ----------
    vocabulary:
        The model's vocabulary (a :class:`~reasoning.Vocabulary`, a short name, or an HF tokenizer).
    num_threads:
        Compile pool size (also xgrammar's threads per compile).
    cache_limit_bytes:
        Bound on the bytes of cached compiled grammars; least recently used out first.
    sync_validate_max_bytes:
        Constraints whose spec is at most this long are validated on the caller's thread (a
        ``ValueError`` at ``submit``; ~0.3 ms per KiB of JSON schema); longer ones on the pool, where
        an invalid one fails the future (the manager puts the request in ``ERROR``), so that
        ``add_request`` never blocks the scheduler for long.
    """

    def __init__(self, vocabulary: Vocabulary | str | Any, *, num_threads: int = 2,
                 cache_limit_bytes: int = 512 << 20, sync_validate_max_bytes: int = 32 << 10) -> None:
        if not isinstance(num_threads, int) or num_threads < 1:
            raise ValueError(f"num_threads must be a positive integer, got {num_threads!r}")
        if not isinstance(cache_limit_bytes, int) or cache_limit_bytes < 0:
            raise ValueError(f"cache_limit_bytes must be a non-negative integer, got {cache_limit_bytes!r}")
        self.vocabulary = Vocabulary.coerce(vocabulary)
        self.tokenizer_info = build_tokenizer_info(self.vocabulary)
        # xgrammar's own cache is off: ours is keyed by the constraint and shares in-flight compiles.
        self._xgr = xgr.GrammarCompiler(self.tokenizer_info, max_threads=num_threads, cache_enabled=False)
        self.num_threads = num_threads
        self.cache_limit_bytes = cache_limit_bytes
        self.sync_validate_max_bytes = sync_validate_max_bytes
        self.logits_width = self.vocabulary.logits_width
        self.num_words = (self.logits_width + 31) // 32
        # can a text-only grammar ever allow every id? Only if xgrammar has no id it never allows.
        self._text_may_allow_all = len(self.tokenizer_info.special_token_ids) == 0
        # control-token texts, longest first (checked in structural-tag literals)
        self._control_texts = sorted((t for t in self.vocabulary.special_tokens if t), key=len, reverse=True)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, tuple[CompiledConstraint, Future]] = OrderedDict()
        self._cache_bytes = 0
        self._inflight: dict[str, Future] = {}
        self._counts = {"compiles": 0, "cache_hits": 0, "joins": 0, "failures": 0, "evictions": 0,
                        "overdue": 0}
        self._pool = _CompilePool(num_threads, f"thinkgate-compile-{self.vocabulary.name}")

    # -- public ----------------------------------------------------------------------------------
    def submit(self, constraint: Constraint) -> Future:
        """A future of the :class:`CompiledConstraint` for ``constraint`` (already done on a cache hit).

        Raises ``ValueError`` naming the problem when the constraint is invalid (and its spec at most
        ``sync_validate_max_bytes`` long); nothing is started then. Otherwise a problem is the
        future's exception (a ``ValueError`` for an invalid constraint)."""
        if not isinstance(constraint, Constraint):
            raise ValueError(f"expected a Constraint, got {type(constraint).__name__}")
        key = constraint.key
        with self._lock:
            hit = self._lookup(key)
            if hit is not None:
                return hit
        if len(constraint.spec) <= self.sync_validate_max_bytes:
            grammar, token_level = self.validate(constraint)  # outside the lock: may take milliseconds

            def job() -> CompiledConstraint:
                return self._compile(constraint, grammar, token_level)
        else:  # too big to validate on the caller's thread: a ValueError becomes the future's

            def job() -> CompiledConstraint:
                return self._compile(constraint, *self.validate(constraint))

        with self._lock:
            hit = self._lookup(key)
            if hit is not None:
                return hit
            self._counts["compiles"] += 1
            fut = self._pool.submit(job)
            self._inflight[key] = fut
        fut.add_done_callback(lambda f: self._finish(key, f))
        return fut

    def compile(self, constraint: Constraint, timeout: float | None = None) -> CompiledConstraint:
        """Compile synchronously (through the cache); raises ``ValueError`` for an invalid
        constraint or a compile error, ``TimeoutError`` past ``timeout`` seconds."""
        fut = self.submit(constraint)
        try:
            return fut.result(timeout)
        except TimeoutError:
            raise
        except Exception as e:
            raise ValueError(f"{constraint.kind}: compile failed: {xgrammar_message(e)}") from e

    def mark_overdue(self, fut: Future) -> None:
        """Tell the pool that ``fut`` ran past a request's deadline (see the module docstring)."""
        with self._lock:
            self._counts["overdue"] += 1
        self._pool.mark_overdue(fut)

    @property
    def stats(self) -> CompilerStats:
        with self._lock:
            return CompilerStats(**self._counts, cache_entries=len(self._cache), cache_bytes=self._cache_bytes)

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()
            self._cache_bytes = 0

    def close(self) -> None:
        """Stop the pool's idle workers (compiles already queued are dropped)."""
        self._pool.close()

    # -- validation ------------------------------------------------------------------------------
    def validate(self, constraint: Constraint) -> tuple[xgr.Grammar, bool]:
        """Build the xgrammar ``Grammar`` of ``constraint`` (``ValueError`` naming the problem) and
        whether it uses token-level formats."""
        kind = constraint.kind
        try:
            if kind == "json_schema" or kind == "json_object":
                any_ws = bool(constraint.option("any_whitespace", True))
                max_ws = constraint.option("max_whitespace") if any_ws else None
                spec = constraint.spec if kind == "json_schema" else '{"type": "object"}'
                strict = bool(constraint.option("strict", True)) if kind == "json_schema" else False
                _ = constraint.schema_check  # ValueError: keywords it cannot honour (schema_support.py)
                if any_ws and max_ws == 0:  # no whitespace at all: compact JSON
                    grammar = xgr.Grammar.from_json_schema(spec, any_whitespace=False, separators=(",", ":"),
                                                           strict_mode=strict)
                else:
                    grammar = xgr.Grammar.from_json_schema(spec, any_whitespace=any_ws, max_whitespace_cnt=max_ws,
                                                           strict_mode=strict)
                return _fix_bounded_json_strings(grammar, spec), False
            if kind == "regex":
                return xgr.Grammar.from_regex(constraint.spec), False
            if kind == "grammar":
                return xgr.Grammar.from_ebnf(constraint.spec), False
            if kind == "choice":
                choices = json.loads(constraint.spec)
                tag = {"type": "structural_tag",
                       "format": {"type": "or", "elements": [{"type": "const_string", "value": c} for c in choices]}}
                return xgr.Grammar.from_structural_tag(json.dumps(tag)), False
            if kind == "structural_tag":
                tag, token_level = self.resolve_structural_tag(json.loads(constraint.spec))
                grammar = xgr.Grammar.from_structural_tag(json.dumps(tag))
                return _fix_bounded_json_strings(grammar, constraint.spec), token_level
        except ValueError:
            raise
        except Exception as e:  # xgrammar reports bad input as RuntimeError / pydantic errors
            raise ValueError(f"invalid {_KIND_NAMES.get(kind, kind)}: {xgrammar_message(e)}") from e
        raise ValueError(f"unknown constraint kind {kind!r}")

    def resolve_structural_tag(self, tag: Any) -> tuple[dict[str, Any], bool]:
        """A copy of ``tag`` with every token named by text in a token-level format replaced by its
        id in this vocabulary, and whether any token-level format occurs. A bare format (no
        ``{"type": "structural_tag", "format": ...}`` wrapper) is wrapped."""
        if not isinstance(tag, Mapping):
            raise ValueError(f"invalid structural tag: expected an object, got {type(tag).__name__}")
        if tag.get("type") != "structural_tag":
            if "format" in tag or "type" not in tag:
                raise ValueError('invalid structural tag: expected {"type": "structural_tag", "format": {...}}')
            tag = {"type": "structural_tag", "format": tag}
        if not isinstance(tag.get("format"), Mapping):
            raise ValueError('invalid structural tag: "format" must be an object')
        found = [False]
        out = self._resolve(tag, found, "$")
        return out, found[0]

    # -- internals -------------------------------------------------------------------------------
    def _resolve(self, node: Any, found: list[bool], path: str) -> Any:
        if isinstance(node, list):
            return [self._resolve(x, found, f"{path}[{i}]") for i, x in enumerate(node)]
        if not isinstance(node, Mapping):
            return node
        out = {k: self._resolve(v, found, f"{path}.{k}") for k, v in node.items()}
        kind = node.get("type")
        for field_name in _LITERAL_FIELDS.get(kind, ()) if isinstance(kind, str) else ():
            self._check_literal(out.get(field_name), f"{path}.{field_name}")
        if kind == "dispatch" and isinstance(out.get("rules"), list):
            for i, r in enumerate(out["rules"]):
                if isinstance(r, list) and r:
                    self._check_literal(r[0], f"{path}.rules[{i}][0]")
        if isinstance(kind, str) and (kind in _TOKEN_FIELDS or kind == "token_dispatch"):
            found[0] = True
            for field_name in _TOKEN_FIELDS.get(kind, ()):
                if field_name not in out:
                    continue
                value = out[field_name]
                where = f"{path}.{field_name}"
                out[field_name] = ([self._token(v, f"{where}[{i}]") for i, v in enumerate(value)]
                                   if isinstance(value, list) else self._token(value, where))
            if kind == "token_dispatch" and isinstance(out.get("rules"), list):
                out["rules"] = [[self._token(r[0], f"{path}.rules[{i}][0]"), r[1]]
                                if isinstance(r, list) and len(r) == 2 else r
                                for i, r in enumerate(out["rules"])]
        return out

    def _check_literal(self, value: Any, where: str) -> None:
        """A literal the output must spell (const_string, tag begin/end, trigger, separator) may not
        contain a control token's text: text never produces a control token (see the module
        docstring), so such a format could never match what the model writes."""
        values = value if isinstance(value, list) else [value]
        for lit in values:
            if not isinstance(lit, str) or not lit:
                continue
            for text in self._control_texts:
                if text in lit:
                    raise ValueError(
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

    def _lookup(self, key: str) -> Future | None:
        entry = self._cache.get(key)
        if entry is not None:
            self._cache.move_to_end(key)
            self._counts["cache_hits"] += 1
            return entry[1]
        fut = self._inflight.get(key)
        if fut is not None:
            self._counts["joins"] += 1
        return fut

    def _compile(self, constraint: Constraint, grammar: xgr.Grammar, token_level: bool) -> CompiledConstraint:
        t0 = time.perf_counter()
        compiled = self._xgr.compile_grammar(grammar)
        mask = torch.empty((1, self.num_words), dtype=torch.int32)
        xgr.GrammarMatcher(compiled).fill_next_token_bitmask(mask, 0)
        return CompiledConstraint(constraint, compiled, mask[0].numpy().copy(),
                                  token_level or self._text_may_allow_all, time.perf_counter() - t0)

    def _finish(self, key: str, fut: Future) -> None:
        with self._lock:
            if self._inflight.get(key) is fut:
                del self._inflight[key]
            if fut.cancelled() or fut.exception() is not None:
                self._counts["failures"] += 1
                return
            entry: CompiledConstraint = fut.result()
            if entry.memory_bytes > self.cache_limit_bytes or key in self._cache:
                return
            self._cache[key] = (entry, fut)
            self._cache_bytes += entry.memory_bytes
            while self._cache_bytes > self.cache_limit_bytes and self._cache:
                _, (old, _) = self._cache.popitem(last=False)
                self._cache_bytes -= old.memory_bytes
                self._counts["evictions"] += 1


# xgrammar 0.2.9 writes a JSON string with minLength / maxLength as ``"\"" X_characters{m, n} "\""``
# with ``X_characters ::= (([^\"\\\r\n]))``: raw control characters (tab, U+0001...) pass, which
# is not JSON. We narrow that class to ``[^\"\\\0-\x1f]``. Such strings still cannot hold escapes
# (as in xgrammar): allowing ``"\\" escape`` there makes xgrammar's mask for those states uncacheable
# (measured: a fill went from ~30 us to ~76 ms on the Qwen3.6 vocabulary).
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
