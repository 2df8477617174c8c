"""The per-request constraint report: how a request's output was constrained, for every request (finished or not).

``outcome``:

- ``enforced``: the output ended (a stop token the grammar accepted) and the grammar alone enforced every
  keyword of the constraint;
- ``checked``: the output ended and passed the after-the-fact check of the keywords the grammar cannot
  enforce (:mod:`.schema_support`: ``uniqueItems``, ``multipleOf`` on floats, ... : ``Constraint.schema_check``);
- ``failed``: the request is in ``ERROR``; ``cause`` is its message (an invalid constraint, a compile error
  or timeout, a token the grammar rejected, an output that broke a checked keyword, an impossible
  ``max_tokens``);
- ``incomplete``: the output has not ended (still running, or cut by the engine at ``max_tokens``);
- ``unconstrained``: the request has no constraint.

``reservation``: the answer reservation's state (:mod:`.reserve`: ``free``, ``steering`` (the answer was
steered to its shortest completion), ``late``, ``lost``, ``thinking``), None without one. Reading it moves
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .request import ERROR, TERMINATED, StructuredRequest

__all__ = ["ConstraintReport", "report_of"]

Outcome = Literal["enforced", "checked", "failed", "incomplete", "unconstrained"]


@dataclass(frozen=True)
class ConstraintReport:
    outcome: Outcome
    cause: str | None = None
    """Why it failed (``failed`` only)."""
    checked_keywords: tuple[str, ...] = ()
    """The keywords checked after the fact (``checked`` and ``incomplete`` of such a constraint)."""
    reservation: str | None = None
    """The answer reservation's state, None without one."""
    output_tokens: int = 0
    reservation_checks: int = 0
    """Checks the reservation ran during the answer (in the search process; :mod:`.reserve`)."""
    reservation_waits: int = 0
    """Of which a step waited for (the last resort of :mod:`.reserve`)."""

    def as_dict(self) -> dict[str, object]:
        """The documented extension field of a response (``thinkgate_constraint``, docs/front-end.md)."""
        return {"outcome": self.outcome, "cause": self.cause, "checked_keywords": list(self.checked_keywords),
                "reservation": self.reservation}


def report_of(req: StructuredRequest) -> ConstraintReport:
    """The report of one request (reads its fields only)."""
    r = req.reserve
    res = r.status if r is not None else None
    counts = {"reservation_checks": r.checks, "reservation_waits": r.waits} if r is not None else {}
    if req.status is ERROR:
        return ConstraintReport("failed", req.message, reservation=res, output_tokens=req.n_out, **counts)
    c = req.constraint
    if c is None:
        return ConstraintReport("unconstrained", reservation=res, output_tokens=req.n_out, **counts)
    check = c.schema_check
    # OutputCheck.keywords: (keyword, JSON pointer) pairs, written "keyword at pointer"
    keywords = tuple(k if isinstance(k, str) else " at ".join(map(str, k))
                     for k in (getattr(check, "keywords", ()) or ())) if check is not None else ()
    if req.status is TERMINATED:
        return ConstraintReport("checked" if check is not None else "enforced", checked_keywords=keywords,
                                reservation=res, output_tokens=req.n_out, **counts)
    return ConstraintReport("incomplete", checked_keywords=keywords, reservation=res, output_tokens=req.n_out,
                            **counts)
