"""The search process of :class:`~.search_service.SearchService` (internal; see ``search_service.py``).

A fresh interpreter (exec'd by the service's driver thread, never a fork of the engine process) that
rebuilds the vocabulary from its table, compiles each constraint it is asked about once (its own
compile, kept in a small LRU by the constraint's key) and runs the shortest-completion searches of
:mod:`.reserve` / :mod:`.shortest` on it. One job at a time.

Wire format: length-prefixed pickles on an AF_UNIX stream socket (``_compile_worker.send_obj``).

- parent -> worker: ``("init", vocab_table)``; the worker answers ``("ready",)`` or ``("error", message)``.
- parent -> worker: ``(job_id, constraint, tokens, max_len)``: the shortest completion of ``constraint``
  after its content ``tokens`` (``()``: from the grammar's start), at most ``max_len`` tokens.
- worker -> parent: ``(job_id, "ok", completion)`` (a tuple of token ids, its stop token last, or None when
  none was found), ``(job_id, "refused", None)`` (the grammar refuses ``tokens``), ``(job_id, "error",
  message)`` (the constraint did not compile).
"""

from __future__ import annotations

import signal
import socket
import sys
import time
from collections import OrderedDict
from typing import Any

CACHE_ENTRIES = 64
"""Compiled constraints kept by the search process (least recently used out first)."""


def _set_parent_death_signal() -> None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG: die with the engine process
    except Exception:  # noqa: BLE001 - not Linux: the worker still exits on EOF
        pass


class _Searcher:
    """The search process's state: the vocabulary, its compiler half and the shortest-completion search."""

    def __init__(self, table: tuple) -> None:
        from thinkgate.reasoning.vocabulary import Vocabulary

        from ..compilation.compiler import _Decoder
        from ..compilation.jsonws.bound import WhitespaceLexicon
        from ..compilation.xgrammar_adapter import GrammarBuilder, build_tokenizer_info
        from .reserve import Shortest

        name, token_bytes, specials, stops, width = table
        vocab = Vocabulary(name, token_bytes, specials, stops, logits_width=width)
        vocab.token_id("")
        info = build_tokenizer_info(vocab)
        self.builder = GrammarBuilder(vocab)
        self.decoder = _Decoder(info, 1, (width + 31) // 32, len(info.special_token_ids) == 0,
                                WhitespaceLexicon.of(vocab), 0)
        self.shortest = Shortest(vocab)
        self.cache: OrderedDict[str, Any] = OrderedDict()

    def compiled(self, constraint: Any) -> Any:
        key = constraint.key
        c = self.cache.get(key)
        if c is not None:
            self.cache.move_to_end(key)
            return c
        t0 = time.monotonic()
        grammar, reach = self.builder.build_with_reach(constraint)
        c = self.decoder.decode(constraint, ("grammar", grammar.serialize_json(), reach, 0.0, False), t0)
        self.cache[key] = c
        while len(self.cache) > CACHE_ENTRIES:
            self.cache.popitem(last=False)
        return c

    def run(self, constraint: Any, tokens: tuple[int, ...], max_len: int) -> tuple[str, Any]:
        try:
            compiled = self.compiled(constraint)
        except Exception as e:  # noqa: BLE001 - reported to the parent
            from ..compilation.xgrammar_adapter import xgrammar_message

            return "error", xgrammar_message(e)
        found = self.shortest.complete(compiled, tokens, max_len)
        if found is False:
            return "refused", None
        return "ok", None if found is None else tuple(found)


def main(fd: int) -> None:
    """The search process: see the module docstring."""
    from ..compilation._compile_worker import recv_obj, send_obj

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _set_parent_death_signal()
    sock = socket.socket(fileno=fd)
    try:
        _, table = recv_obj(sock)
        searcher = _Searcher(table)
    except (EOFError, OSError):
        return
    except Exception as e:  # noqa: BLE001
        send_obj(sock, ("error", f"{type(e).__name__}: {e}"))
        return
    send_obj(sock, ("ready",))
    while True:
        try:
            job_id, constraint, tokens, max_len = recv_obj(sock)
        except (EOFError, OSError):
            return
        try:
            status, value = searcher.run(constraint, tokens, max_len)
        except Exception as e:  # noqa: BLE001 - a bug in the search fails this job, not the process
            status, value = "error", f"{type(e).__name__}: {e}"
        try:
            send_obj(sock, (job_id, status, value))
        except OSError:
            return


if __name__ == "__main__":
    main(int(sys.argv[1]))
