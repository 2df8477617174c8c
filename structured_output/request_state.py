"""What the manager keeps per request: its :class:`RequestStatus` and its :class:`RequestState`."""

from __future__ import annotations

import enum
from concurrent.futures import Future

import numpy as np
import xgrammar as xgr

from thinkgate.reasoning.base import ReasoningTracker

from .compiler import CompiledConstraint
from .constraints import Constraint

__all__ = ["RequestStatus", "RequestState", "COMPILING", "THINKING", "CONSTRAINED", "TERMINATED", "ERROR"]


class RequestStatus(str, enum.Enum):
    """Where a request stands. ``ERROR`` is final; ``TERMINATED`` only moves to ``ERROR``."""

    COMPILING = "compiling"
    """Its constraint is compiling and it cannot think meanwhile: not schedulable (``is_ready`` is
    False)."""
    THINKING = "thinking"
    """Its thinking has not ended: the grammar does not apply yet (it may still be compiling)."""
    CONSTRAINED = "constrained"
    """The thinking has ended (or never started): the constraint, if any, applies."""
    TERMINATED = "terminated"
    """The grammar accepted a stop token: the output is complete; only stop tokens may follow."""
    ERROR = "error"
    """Invalid constraint at compile time, compile timeout, or a token the grammar rejected."""


# module globals: the step's per-request status tests read these instead of looking up the enum
COMPILING, THINKING, CONSTRAINED, TERMINATED, ERROR = (
    RequestStatus.COMPILING, RequestStatus.THINKING, RequestStatus.CONSTRAINED, RequestStatus.TERMINATED,
    RequestStatus.ERROR)


class RequestState:
    """One request's state, from ``add_request`` to ``remove_request`` (small; nothing vocabulary-sized
    of its own: its rows are shared per compiled grammar).

    Invariants the manager keeps: ``future`` is set only while the compile runs (``COMPILING``, or
    ``THINKING`` for a request that thinks while its constraint compiles); ``held`` only while
    ``COMPILING`` (content tokens committed before the grammar existed, fed to it when it does); ``compiled`` and
    ``matcher`` are set together once the compile succeeded (both None for an unconstrained request
    and after :meth:`fail`); a ``THINKING`` request has a ``tracker``; ``pending`` implies a compiled
    grammar (see :mod:`.gating` for the rows).
    """

    __slots__ = ("rid", "constraint", "status", "message", "future", "deadline", "compiled", "matcher",
                 "tracker", "think_row", "pending_row", "pending", "n_out", "n_content", "may_allow_all", "held",
                 "think_limit", "forced")

    def __init__(self, rid: str, constraint: Constraint | None, tracker: ReasoningTracker | None) -> None:
        self.rid = rid
        self.constraint = constraint
        self.status: RequestStatus = COMPILING
        self.message: str | None = None
        self.future: Future[CompiledConstraint] | None = None
        self.deadline = 0.0                         # time.monotonic() past which COMPILING is an error
        self.compiled: CompiledConstraint | None = None
        self.matcher: xgr.GrammarMatcher | None = None
        self.tracker = tracker
        self.think_row: np.ndarray | None = None    # row for a thinking position (None: no row)
        self.pending_row: np.ndarray | None = None  # row while the first token decides (None: no row)
        self.pending = False                        # the next token decides thinking vs content
        self.n_out = 0                              # tokens accepted (output position of the next)
        self.n_content = 0                          # tokens fed to the grammar
        self.may_allow_all = False                  # a row may allow everything: fill one by one
        self.held: list[int] | None = None          # content committed before the grammar existed
        self.think_limit: int | None = None         # max_thinking_tokens (None: no budget; see .budget)
        self.forced: tuple[int, ...] | None = None  # the forced end of thinking, once the budget is reached

    def fail(self, message: str) -> None:
        """Move to ``ERROR`` (final) with ``message``; drop the matcher, grammar and tracker."""
        self.status = ERROR
        self.message = message
        self.matcher = None
        self.compiled = None
        self.tracker = None
