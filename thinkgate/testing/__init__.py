"""The testing kit: offline vocabularies, synthetic token streams, workloads and bitmasks, for testing an
engine integration (or thinkgate itself) without a model.

- :mod:`thinkgate.testing.vocabularies`: ``byte_level_vocabulary`` (tiny, for unit tests), ``synthetic_vocabulary(family)``
  (the Qwen3.6 table plus a family's markers as control tokens, where no offline tokenizer has them),
  ``format_vocabulary(tool_format)``;
- :mod:`thinkgate.testing.streams`: ``replay`` (a scripted output driven through the manager's step protocol, mask and
  grammar checked against each other at every token), ``random_cuts`` / ``cut`` (deltas for stream ==
  whole checks);
- :mod:`thinkgate.testing.workload`: ``Workload`` (seeded requests with constraints and scripted outputs, each output
  checkable), the simulated engine's source in ``python -m bench``;
- :mod:`thinkgate.testing.bitmasks`: ``realistic_bitmask`` for kernel tests and benchmarks.

Names load on first use, so ``import thinkgate.testing`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "byte_level_vocabulary": "vocabularies", "synthetic_vocabulary": "vocabularies",
    "format_vocabulary": "vocabularies", "SYNTHETIC_FAMILIES": "vocabularies", "FORMAT_VOCABULARY": "vocabularies",
    "Replay": "streams", "replay": "streams", "wait_compiled": "streams", "random_cuts": "streams", "cut": "streams",
    "Workload": "workload", "ScriptedRequest": "workload",
    "realistic_bitmask": "bitmasks",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'thinkgate.testing' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
