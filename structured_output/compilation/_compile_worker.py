"""The compile worker processes of :class:`~.compiler.Compiler` (internal; see ``compiler.py``).

One *zygote* per compiler: a fresh interpreter (started with ``subprocess``, i.e. exec'd, never a fork
of the multi-threaded engine process) that imports xgrammar, builds the vocabulary's xgrammar
``TokenizerInfo`` once, and then only forks. Each fork is a *worker*: it compiles one constraint at a
time on its own socket and can be killed (SIGKILL) at any moment; the kernel then frees everything
it held. Forking from the zygote costs milliseconds and shares the tokenizer tables copy-on-write, so
the pool can grow quickly when long compiles occupy its workers.

Wire format: length-prefixed pickles (``send_obj`` / ``recv_obj``) on AF_UNIX stream sockets.

- parent -> zygote: ``("init", vocab_table, settings)`` then ``("fork", warm)`` as often as needed; the
  zygote answers ``("ready",)`` / ``("error", message)`` to init and, to each fork, 8 bytes (the
  worker's pid) with the parent's end of the worker's socket attached (SCM_RIGHTS). EOF on the
  control socket ends the zygote; its workers die with it (``PR_SET_PDEATHSIG``).
- worker -> parent, once, before any job: ``("warm",)``, after :func:`warm_up` (the pool counts a worker
  started only then). A worker forked with ``("fork", False)`` (for a job that is waiting) skips the warm-up.
- parent -> worker: ``constraint``; worker -> parent: ``("invalid", message)`` (the constraint is
  invalid: a ``ValueError`` for the caller), ``("error", message)`` (xgrammar failed), or
  ``(form, payload, reach, compile_s, cached)`` where ``form`` is ``"compiled"`` (``payload`` is
  ``CompiledGrammar.serialize_json()``), ``"text"`` (``payload`` is the EBNF text the worker compiled, of a
  grammar whose compiled form is large but proved quick to compile: the parent compiles it again, which
  costs less than serializing and parsing megabytes of token masks) or ``"grammar"`` (the same for a
  grammar that does not survive its text round trip: ``payload`` is ``Grammar.serialize_json()``), and
  ``cached`` says whether the grammar went through xgrammar's cached compile (the parent's recompile
  follows it); ``reach`` is None for a grammar without token-level formats, else whether a row could allow
  every id as far as those formats go (``GrammarBuilder.build_with_reach``). A structural tag's reply comes
  first as ``("unverified", reply)``, compiled from its text before the worker checks that the text
  :func:`round_trips`; the parent decodes it meanwhile and waits for ``("verified",)`` or for the reply
  that replaces it (:func:`compile_steps`).
"""

from __future__ import annotations

import os
import pickle
import re
import signal
import socket
import struct
import sys
import time
from typing import Any, Iterator, Sequence

from .constraints import DEFAULT_TOOL_MAX_WHITESPACE
from .rule_sharing import NAME as _NAME

_HEADER = struct.Struct("!Q")
_PID = struct.Struct("!q")


def send_obj(sock: socket.socket, obj: Any) -> None:
    send_bytes(sock, pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def send_bytes(sock: socket.socket, data: bytes) -> None:
    sock.sendall(_HEADER.pack(len(data)))
    sock.sendall(data)


def _recv_exact(sock: socket.socket, n: int) -> bytearray:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("peer closed the socket")
        got += k
    return buf


def recv_obj(sock: socket.socket) -> Any:
    (n,) = _HEADER.unpack(_recv_exact(sock, _HEADER.size))
    return pickle.loads(_recv_exact(sock, n))


def launch(module: str) -> tuple[Any, socket.socket]:
    """A fresh interpreter (exec'd, never a fork of this process) with this process's ``sys.path``,
    running ``module.main(fd)`` on its end of a socket pair: ``(Popen, this end)``. ``OSError`` when it
    cannot start."""
    import json
    import subprocess

    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        code = f"import sys, json; sys.path[:] = json.loads(sys.argv[1]); from {module} import main; main(int(sys.argv[2]))"
        popen = subprocess.Popen([sys.executable, "-c", code, json.dumps(sys.path), str(child.fileno())],
                                 pass_fds=(child.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError:
        parent.close()
        raise
    finally:
        child.close()
    return popen, parent


def handshake(sock: socket.socket, init: tuple, what: str) -> tuple:
    """Send a launched process its ``init`` message and read its reply: ``("ready", ...)``, or
    ``("error", cause)`` (also when it exits first; ``what`` names it in the cause)."""
    try:
        send_obj(sock, init)
        return recv_obj(sock)
    except (EOFError, OSError) as e:
        return ("error", f"{what} exited during start-up ({e})")


def vocab_table(vocabulary: Any) -> tuple:
    """What a worker needs to rebuild ``vocabulary`` (the encoder, a closure, is not needed)."""
    return (vocabulary.name, vocabulary.token_bytes, dict(vocabulary.special_tokens),
            sorted(vocabulary.stop_token_ids), vocabulary.logits_width)


CACHED_KINDS = ("json_schema", "json_object")
"""Constraint kinds compiled with xgrammar's own cache on (when ``xgrammar_cache_bytes`` > 0) without a
check: their grammars are known to survive the text round trip of :func:`cache_safe`."""

CHECKED_KINDS = ("structural_tag",)
"""Constraint kinds compiled with xgrammar's cache where :func:`cache_safe` finds their grammar survives
the round trip (every tool constraint does; a structural tag with ``any_tokens`` and no exclusions
does not, and compiles without the cache). The cache is what makes a tool constraint cheap: xgrammar
keeps the token masks of rules by their content, so the rules a grammar repeats (each tool's JSON
strings, numbers, the call syntax) are computed once, and the per-tool rules of a tool set stay in the
cache for the next tool set that shares tools (``python -m bench tools``)."""


WARM_UP_SCHEMA = ('{"type": "object", "properties": {"s": {"type": "string"}, "n": {"type": "number"}, '
                  '"i": {"type": "integer"}, "b": {"type": "boolean"}, "z": {"type": "null"}, '
                  '"a": {"type": "array", "items": {"type": "string"}}, "o": {"type": "object"}}}')
"""A JSON schema of every JSON value type, compiled once by each cached xgrammar compiler before its first job
(:func:`warm_up`)."""

WARM_UP_TOOL_VALUES: tuple[dict[str, Any], ...] = (
    {}, {"any_order": True},
    {"max_whitespace_cnt": DEFAULT_TOOL_MAX_WHITESPACE},
    {"max_whitespace_cnt": DEFAULT_TOOL_MAX_WHITESPACE, "any_order": True},
    {"max_whitespace_cnt": DEFAULT_TOOL_MAX_WHITESPACE, "excludes": ["</"]},
    {"max_whitespace_cnt": DEFAULT_TOOL_MAX_WHITESPACE, "excludes": ["<|"]},
)
"""The options of the JSON values inside tool calls (a structural tag's ``json_schema`` format): the bound the
tool formats default to, the excluded text of the XML-parameter formats (``</``) and of Kimi K3 (``<|``), and
xgrammar's any-order objects. Each writes its own JSON rules (the bound inside them, an excluded string's
automaton), so :func:`warm_up` compiles :data:`WARM_UP_SCHEMA` once with each (``tests/test_state_cycles.py``
checks that every registered tool format's JSON values use one of these)."""


def warm_up(cached: Any, builder: Any, extra: Sequence[Any] = ()) -> None:
    """Compile :data:`WARM_UP_SCHEMA` with ``cached`` (an xgrammar compiler with its cache on) as a JSON schema,
    and as a tool argument with each of :data:`WARM_UP_TOOL_VALUES` (built by ``builder``, a
    :class:`~.xgrammar_adapter.GrammarBuilder`, and shaped as the worker shapes tool grammars), so that its
    cache holds the token masks of the JSON rules every JSON schema and every JSON-argument tool grammar
    repeats (strings, numbers, whitespace, any value): a new schema or tool set then computes only its own
    rules (hermes' one-tool grammar, in-process: 24-32 ms cold, 1.5 ms after it). Then the constraints of
    ``extra`` (the compiler's ``warm_up``: say, a tool format's call syntax, ``tools.tool_format_warm_up``),
    as :func:`compile_steps` compiles them. Per model, at start-up; a failure only leaves the cache cold."""
    import json

    from .constraints import Constraint

    try:
        cached.compile_json_schema(WARM_UP_SCHEMA)
        schema = json.loads(WARM_UP_SCHEMA)
        tag = {"type": "structural_tag", "format": {"type": "sequence", "elements": [
            {"type": "json_schema", "json_schema": schema, **options} for options in WARM_UP_TOOL_VALUES]}}
        _warm_one(cached, builder, Constraint.structural_tag(tag))
    except Exception:  # noqa: BLE001 - an optimisation only
        pass
    for constraint in extra:
        try:
            _warm_one(cached, builder, constraint)
        except Exception:  # noqa: BLE001 - an optimisation only (the constraint's own compile reports it)
            pass


def _warm_one(cached: Any, builder: Any, constraint: Any) -> None:
    """``constraint`` compiled with ``cached`` through the text :func:`compile_steps` compiles (unchecked: a
    text that does not round-trip only warms rules of another grammar)."""
    from .rule_sharing import shared_text

    if constraint.kind not in CACHED_KINDS and constraint.kind not in CHECKED_KINDS:
        return
    grammar, _ = builder.build(constraint)
    text = str(grammar)
    cached.compile_grammar(shared_text(text) if constraint.kind in CHECKED_KINDS else text)


def round_trips(text: str, grammar: Any) -> bool:
    """Whether ``text`` (``str(grammar)``) parses back to ``grammar``: the same serialized grammar, or the same rules
    once the wrappers xgrammar's parser adds around a token dispatch are folded back (:func:`fold_dispatch_wrappers`)
    and the empty literals it drops beside other elements of a sequence are dropped (:func:`drop_empty_in_sequences`).

    xgrammar 0.2.9's cached compile goes through the grammar's EBNF text, so it compiles the grammar that text
    parses back to. A grammar that does not survive it (an ``any_tokens`` with no exclusions prints
    ``ExcludeToken()``, which does not parse) compiles uncached. Content-dependent (a few tens of ms at 100
    tools), so it runs in the worker."""
    import xgrammar as xgr

    from .rule_sharing import read_rules

    try:
        back = xgr.Grammar.from_ebnf(text)
        if back.serialize_json() == grammar.serialize_json():
            return True
        names, bodies = read_rules(text)
        return fold_dispatch_wrappers(str(back), frozenset(names)) == (names, [drop_empty_in_sequences(b)
                                                                              for b in bodies])
    except Exception:  # noqa: BLE001 - does not parse back
        return False


_WRAPPER = re.compile(rf"\(\(({_NAME})\)\)")


def drop_empty_in_sequences(body: str) -> str:
    """``body`` (a printed rule body) without the empty literals (``""``) that stand beside another element of a
    sequence (``"" x``, ``x "" y``, ``x ""``), with the space that separated them: xgrammar's parser drops these,
    and a sequence reads the same without them. An empty literal that is a choice's alternative (``"" | x``) or a
    sequence's only element stays: dropping it would change the language."""
    from .rule_sharing import lex

    pieces = lex(body)
    out: list[str] = []
    for i, piece in enumerate(pieces):
        if piece == '""':
            before = out[-1] if out else ""
            after = pieces[i + 1] if i + 1 < len(pieces) else ""
            in_sequence_before = before.endswith(" ") and not before.endswith("| ")
            if (before.endswith("(") or in_sequence_before) and after.startswith(" ") and not after.startswith(" |"):
                pieces[i + 1] = after[1:]  # "" x, x "" y: the element and the space after it
                continue
            if in_sequence_before and after.startswith(")"):
                out[-1] = before[:-1]  # x "": the space before it and the element
                continue
        out.append(piece)
    return "".join(out)


def fold_dispatch_wrappers(printed: str, names: frozenset[str]) -> tuple[list[str], list[str]]:
    """The rules of ``printed`` (a grammar xgrammar's parser read from a text whose rules are ``names``), with each
    rule the parser added for a ``TokenTagDispatch`` folded back into the rule that referred to it.

    xgrammar's parser never keeps a ``TokenTagDispatch`` as the body of the rule it was written in: it moves it
    to a new rule and leaves a reference in its place (``r ::= ((r_1))``, ``r_1 ::= TokenTagDispatch(...)``;
    every strict ``auto`` tool constraint whose trigger is a control token has one). The two rules derive the
    language of the one. Only a rule not among ``names`` whose body is a ``TokenTagDispatch``, referred to as
    a whole rule body, folds; anything else the parser changed stays and makes the rules differ."""
    from .rule_sharing import read_rules

    got_names, bodies = read_rules(printed)
    where = {name: i for i, name in enumerate(got_names)}
    folded: set[int] = set()
    for i, body in enumerate(bodies):
        m = _WRAPPER.fullmatch(body)
        if m is None or m.group(1) in names or m.group(1) not in where:
            continue
        j = where[m.group(1)]
        if j not in folded and bodies[j].startswith("TokenTagDispatch("):
            bodies[i] = bodies[j]
            folded.add(j)
    keep = [i for i in range(len(got_names)) if i not in folded]
    return [got_names[i] for i in keep], [bodies[i] for i in keep]


def cache_safe(kind: str, grammar: Any) -> bool:
    """Whether ``grammar`` (of a constraint of ``kind``) may be compiled by xgrammar's cached compiler, which
    compiles its text: always for :data:`CACHED_KINDS`, where it :func:`round_trips` for :data:`CHECKED_KINDS`."""
    if kind in CACHED_KINDS:
        return True
    return kind in CHECKED_KINDS and round_trips(str(grammar), grammar)


def compile_steps(builder: Any, compiler: Any, constraint: Any, settings: dict[str, Any],
                  cached: Any = None) -> Iterator[tuple]:
    """Validate and compile ``constraint``: the replies to send, in order (the module docstring).

    A grammar of :data:`CACHED_KINDS` compiles (with ``cached``, xgrammar's cached compiler, when there is one)
    and ships as its EBNF text. A structural tag's text first has its equal rules merged and its automaton
    cycles unfolded (``rule_sharing.shared_text``) and compiles at once, before the check that the text
    :func:`round_trips`: the first reply is ``("unverified", reply)``, and the check runs while the parent
    compiles that reply; then ``("verified",)``, or, where the text does not round-trip (or did not compile),
    the reply of the grammar as built, compiled uncached. Any other grammar compiles uncached as it is."""
    from .rule_sharing import shared_text
    from .xgrammar_adapter import xgrammar_message

    try:
        grammar, reach = builder.build_with_reach(constraint)
    except ValueError as e:
        yield ("invalid", str(e))
        return
    except Exception as e:  # noqa: BLE001 - reported to the parent
        yield ("error", xgrammar_message(e))
        return

    def compile_reply(use: Any, source: Any, text: str | None) -> tuple:
        """``source`` (the grammar, or ``text``) compiled with ``use``: its reply (the text, the grammar or the
        compiled grammar, see the module docstring), or ``("error", message)``."""
        try:
            t0 = time.perf_counter()
            compiled = use.compile_grammar(source)
            compile_s = time.perf_counter() - t0
            use_cache = use is cached
            if (compiled.memory_size_bytes > settings["ship_compiled_max_bytes"]
                    and compile_s <= settings["recompile_max_s"]):
                if text is not None:
                    return ("text", text, reach, compile_s, use_cache)
                return ("grammar", grammar.serialize_json(), reach, compile_s, use_cache)
            return ("compiled", compiled.serialize_json(), reach, compile_s, use_cache)
        except Exception as e:  # noqa: BLE001
            return ("error", xgrammar_message(e))

    kind = constraint.kind
    if kind not in CACHED_KINDS and kind not in CHECKED_KINDS:
        yield compile_reply(compiler, grammar, None)
        return
    use = cached if cached is not None else compiler
    text = str(grammar)
    if kind in CACHED_KINDS:
        yield compile_reply(use, text, text)
        return
    shared = shared_text(text)
    early = compile_reply(use, shared, shared)  # an error here: the check below decides
    if early[0] != "error":
        yield ("unverified", early)
    if not round_trips(text, grammar):
        yield compile_reply(compiler, grammar, None)
    elif early[0] != "error":
        yield ("verified",)
    else:  # the merged text failed (a form the merging pass wrote wrong): the text as built
        yield compile_reply(use, text, text)


def _set_parent_death_signal() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the zygote
    except Exception:  # noqa: BLE001 - not Linux: the worker still exits on EOF
        pass


def _compilers(tokenizer_info: Any, builder: Any, settings: dict[str, Any], warm: bool) -> tuple[Any, Any]:
    """A worker's xgrammar compilers: one without a cache, and one with xgrammar's own cache, bounded
    (``settings["xgrammar_cache_bytes"]``; None when 0) and, with ``warm``, warmed (:func:`warm_up`). The cache
    keeps the masks of rules that different grammars share, so a new schema compiles in a fraction of the
    time (:data:`CACHED_KINDS` and :data:`CHECKED_KINDS`); it lives as long as the worker (workers are reused;
    a killed one takes its cache with it).

    Built in the worker, not in the zygote: a worker that inherited a warm cache from the zygote was measured
    to spend kernel time inside its first compile instead (about twice the compile, Qwen3.6, one tool), so
    each standing worker warms its own while idle."""
    import xgrammar as xgr

    compiler = xgr.GrammarCompiler(tokenizer_info, max_threads=settings["num_threads"], cache_enabled=False)
    cache_bytes = int(settings.get("xgrammar_cache_bytes", 0))
    cached = (xgr.GrammarCompiler(tokenizer_info, max_threads=settings["num_threads"], cache_enabled=True,
                                  cache_limit_bytes=cache_bytes) if cache_bytes > 0 else None)
    if cached is not None and warm:
        warm_up(cached, builder, settings.get("warm_up", ()))
    return compiler, cached


def _worker_loop(sock: socket.socket, builder: Any, tokenizer_info: Any, settings: dict[str, Any],
                 warm: bool) -> None:
    compiler, cached = _compilers(tokenizer_info, builder, settings, warm)
    try:
        send_obj(sock, ("warm",))  # the parent's driver reads it before it sends the first job
    except OSError:
        return
    while True:
        try:
            constraint = recv_obj(sock)
        except (EOFError, OSError):
            return
        try:
            for reply in compile_steps(builder, compiler, constraint, settings, cached):
                send_obj(sock, reply)
        except OSError:
            return


def main(control_fd: int) -> None:
    """The zygote: see the module docstring."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # workers are reaped by the kernel
    ctl = socket.socket(fileno=control_fd)
    try:
        msg = recv_obj(ctl)
    except (EOFError, OSError):
        return
    try:
        from thinkgate.reasoning.vocabulary import Vocabulary

        from .xgrammar_adapter import GrammarBuilder, build_tokenizer_info

        _, table, settings = msg
        name, token_bytes, specials, stops, width = table
        vocab = Vocabulary(name, token_bytes, specials, stops, logits_width=width)
        vocab.token_id("")  # build the lookup table once, shared by every fork
        tokenizer_info = build_tokenizer_info(vocab)
        builder = GrammarBuilder(vocab)
    except Exception as e:  # noqa: BLE001
        send_obj(ctl, ("error", f"{type(e).__name__}: {e}"))
        return
    send_obj(ctl, ("ready",))
    zygote_pid = os.getpid()
    while True:
        try:
            msg = recv_obj(ctl)
        except (EOFError, OSError):
            return
        if msg[0] != "fork":
            continue
        warm = bool(msg[1]) if len(msg) > 1 else True
        parent_end, child_end = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pid = os.fork()
        if pid == 0:  # the worker
            try:
                ctl.close()
                parent_end.close()
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                _set_parent_death_signal()
                if os.getppid() == zygote_pid:
                    _worker_loop(child_end, builder, tokenizer_info, settings, warm)
            finally:
                os._exit(0)
        child_end.close()
        try:
            socket.send_fds(ctl, [_PID.pack(pid)], [parent_end.fileno()])
        except OSError:
            return
        finally:
            parent_end.close()


if __name__ == "__main__":
    main(int(sys.argv[1]))
