"""thinkgate as a vLLM 0.34 general plugin: its compiler under vLLM's structured-output backend and its
C kernel under vLLM's CPU worker.

vLLM loads every ``vllm.general_plugins`` entry point in each of its processes (``VLLM_PLUGINS``
selects among them); thinkgate declares ``thinkgate = "thinkgate.engines.vllm.plugin:register"``.
Installing thinkgate must not silently change an engine, so :func:`register` does nothing unless
``THINKGATE_VLLM_BACKEND=1`` is set in vLLM's environment; then it installs both patches:

- ``thinkgate.engines.vllm.structured_outputs``: requests vLLM resolves to ``xgrammar`` compile with
  thinkgate's compiler (control tokens never inside strings or free text, the JSON whitespace bound,
  schema keywords enforced or checked, compiles in killable worker processes, one compile per
  distinct constraint); structural tags and Lark grammars stay with vLLM's xgrammar;
- ``thinkgate.engines.vllm.cpu_worker``: vLLM's CPU worker applies the bitmask with thinkgate's C
  kernel.

The reasoning gate stays vLLM's (its manager, driven by a reasoning parser: use
``--reasoning-parser-plugin thinkgate.engines.vllm.reasoning_parsers`` for thinkgate's). ``install()`` applies
both patches unconditionally (tests, or a launcher that imports thinkgate itself).
"""

from __future__ import annotations

import os

__all__ = ["ENV", "register", "install", "uninstall"]

ENV = "THINKGATE_VLLM_BACKEND"


def register() -> None:
    """The ``vllm.general_plugins`` entry point: install when ``THINKGATE_VLLM_BACKEND`` is 1/true."""
    if os.environ.get(ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        install()


def install() -> None:
    from . import cpu_worker, structured_outputs

    structured_outputs.install()
    cpu_worker.install()


def uninstall() -> None:
    from . import cpu_worker, structured_outputs

    structured_outputs.uninstall()
    cpu_worker.uninstall()
