"""thinkgate: structured output for reasoning models, embedded in an inference engine's scheduler loop.

The subpackages (each folder of the source tree, installed under this one name):

- ``thinkgate.reasoning``: reasoning parsers per model family (where the thinking ends) and the
  vocabulary adapters;
- ``thinkgate.structured_output``: the scheduler-facing manager, constraints, the compiler and tool
  choice (it uses ``reasoning``);
- ``thinkgate.kernels``: the bitmask kernels (Triton on GPU, C on CPU); it uses neither of the others.

The common names are re-exported here and imported on first use, so ``import thinkgate`` stays cheap
(torch, xgrammar and triton load only when a name that needs them is asked for)::

    from thinkgate import Constraint, StructuredOutputManager, apply_token_bitmask_inplace, load_vocabulary
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    # thinkgate.reasoning
    "Vocabulary": "reasoning",
    "load_vocabulary": "reasoning",
    "get_reasoning_parser": "reasoning",
    "list_reasoning_parsers": "reasoning",
    "register_reasoning_parser": "reasoning",
    "ReasoningParser": "reasoning",
    "ReasoningTracker": "reasoning",
    "ReasoningEnd": "reasoning",
    # thinkgate.structured_output
    "StructuredOutputManager": "structured_output",
    "Constraint": "structured_output",
    "Compiler": "structured_output",
    "RequestStatus": "structured_output",
    "AcceptResult": "structured_output",
    "BitmaskBatch": "structured_output",
    "build_tool_constraint": "structured_output",
    "get_tool_reader": "structured_output",
    "list_tool_formats": "structured_output",
    "Parser": "structured_output",
    # thinkgate.kernels
    "apply_token_bitmask_inplace": "kernels",
    "apply_token_bitmask_reference": "kernels",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    sub = _EXPORTS.get(name)
    if sub is None:
        raise AttributeError(f"module 'thinkgate' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{sub}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
