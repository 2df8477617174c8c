"""Fill overlapped with the model: ``grammar_bitmask_async`` runs a step's fill on a worker thread
while the engine runs the model, and hands the rows over when asked.

The protocol
------------
An engine that samples after the forward (vLLM's V1 split of ``execute_model`` / ``sample_tokens``)
needs the mask only at sampling time, so the fill of a step can run while that step's forward runs::

    handle = manager.grammar_bitmask_async(schedule)   # checks, then returns at once
    logits = model.forward(...)                          # the fill runs meanwhile
    batch = handle.result()                              # the same rows as grammar_bitmask(schedule)
    apply_token_bitmask_inplace(logits, batch.bitmask, batch.logits_indices)
    ... sample; manager.accept_tokens(...) for each request

On the caller's thread, before anything is handed off: the whole schedule is checked (misuse raises
at once from ``grammar_bitmask_async``, nothing moved, no fill pending) and the precomputed rows
(thinking, pending, stop-only) are placed. The worker then fills the grammar rows into the same
buffer that ``grammar_bitmask`` would have used (``num_buffers`` applies as usual).

Single driver: from ``grammar_bitmask_async`` until ``result()`` returns or raises, the manager is
busy. Any other public call meanwhile (``accept_tokens``, another ``grammar_bitmask``, ``add_request``,
``status`` ...) raises ``RuntimeError`` saying that a fill is pending, and nothing moves for it. We
chose an error over waiting: a call during the fill is an ordering bug of the engine (accepting
tokens before the mask they were sampled under was even collected), and waiting would hide it
behind a stall of the scheduler thread. ``result()`` may be called from any thread and more than
once (it returns the same batch); the first call releases the manager. A handle dropped without
``result()`` leaves the manager busy: always collect it.

An exception inside the fill (xgrammar's included) surfaces from ``result()``, with every matcher
at its committed state (the fill rolls back every matcher it walked) and the manager released;
that step has no batch.

The GIL
-------
xgrammar 0.2.9 is bound through ``tvm_ffi``, which releases the GIL for the duration of every call
(``TVM_FFI_RELEASE_GIL_BY_DEFAULT``): ``GrammarMatcher.fill_next_token_bitmask``,
``accept_token`` and ``BatchGrammarMatcher.batch_fill_next_token_bitmask`` all run outside it
(``python -m bench gil`` measures it with a pure-Python thread beside each). A call still has to
take the GIL back when it returns: with a Python-busy thread beside it, that wait (up to the
interpreter's switch interval) is paid per call. So, with more than one fill thread
(``num_fill_threads``), the worker fills every round of rows with the batch matcher (one GIL round
trip per round, the rows split over its threads), however few rows the round has; rows that may
allow every token (filled one by one, because such rows are dropped) are the exception. With one
fill thread the worker fills as ``grammar_bitmask`` does (one by one): the batch matcher on one
thread is slower per row, which cost more than the round trips it saves (``python -m bench loop
--overlap`` at batch 256 with 3 drafts measured the overlapped step slower than the serial one that
way). The engine's forward, launched from Python,
mostly waits in code that releases the GIL too (a CUDA synchronize, a CPU matmul).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .fill import RowFiller, StepPlan

if TYPE_CHECKING:
    from .manager import BitmaskBatch

__all__ = ["OverlapFiller", "PendingBitmask"]

FillStep = Callable[[StepPlan, RowFiller], "BitmaskBatch | None"]
"""The fill half of a step: the plan's grammar rows filled with the given filler, then the batch
(every matcher left at its committed state, also when it raises)."""


class PendingBitmask:
    """The handle of one :meth:`StructuredOutputManager.grammar_bitmask_async` call (see the module
    docstring)."""

    __slots__ = ("_future", "_on_collected", "_released")

    def __init__(self, future: Future[Any], on_collected: Callable[[], None]) -> None:
        self._future = future
        self._on_collected = on_collected  # releases the manager (called once, by the first result())
        self._released = False

    def done(self) -> bool:
        """True once the fill finished (well or not); ``result()`` then does not wait."""
        return self._future.done()

    def result(self, timeout: float | None = None) -> BitmaskBatch | None:
        """The batch (None when no row is needed), as ``grammar_bitmask`` returns it; waits for the
        fill. The first call releases the manager; an exception of the fill is raised here (every
        matcher at its committed state). ``TimeoutError`` when ``timeout`` seconds pass first: the
        fill is still pending, and so is the manager."""
        fut = self._future
        try:
            out = fut.result(timeout)
        except BaseException:
            if not fut.done():  # the wait timed out (or was interrupted): still pending
                raise
            self._release()
            raise
        self._release()
        return out

    def _release(self) -> None:
        if not self._released:
            self._released = True
            self._on_collected()


class OverlapFiller:
    """The worker thread of one manager's async fills, and its :class:`RowFiller` (with several fill
    threads, the batch matcher for every round; with one, the synchronous filler itself: see the
    module docstring). Built on the first ``grammar_bitmask_async``."""

    __slots__ = ("_pool", "filler")

    def __init__(self, sync_filler: RowFiller) -> None:
        # one fill at a time (the manager is busy while it runs), so sharing the synchronous filler is safe
        self.filler = sync_filler if sync_filler.num_threads == 1 else RowFiller(
            sync_filler.num_threads, 1, sync_filler.stop_token_ids, always_batch=True)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="thinkgate-fill")

    def start(self, plan: StepPlan, fill: FillStep, on_collected: Callable[[], None]) -> PendingBitmask:
        """Hand ``fill(plan, filler)`` to the worker (a plan with nothing to fill completes here, on
        this thread); ``on_collected`` runs when the handle's ``result()`` first returns or raises."""
        for w in plan.walks:  # the engine may reuse its draft lists once this call returned
            w.drafts = tuple(w.drafts)
        if plan.fill_rows:
            fut = self._pool.submit(fill, plan, self.filler)
        else:
            fut = Future()
            try:
                fut.set_result(fill(plan, self.filler))
            except BaseException as e:  # noqa: BLE001 - handed over through result(), like the worker's
                fut.set_exception(e)
        return PendingBitmask(fut, on_collected)

    def close(self) -> None:
        self._pool.shutdown(wait=True)
