"""The step room: what the scheduler loop calls every step.

- :mod:`.manager`: :class:`~.manager.StructuredOutputManager`, the batch protocol (add / remove,
  ``grammar_bitmask`` -> :class:`~.manager.BitmaskBatch`, ``accept_tokens``) and its thread guard.
- :mod:`.request`: :class:`~.request.StructuredRequest`, one request's state and every transition it
  goes through (driven by the manager and by the SGLang adapter alike).
- :mod:`.fill`: the step's plan and the row fill (serial, threaded, batch); :mod:`.overlap`: the fill
  run while the forward pass runs; :mod:`.buffer`: the bitmask buffer the rows are written into;
  :mod:`.rows`: precomputed rows.
- :mod:`.gating`: thinking rows; :mod:`.budget`: the thinking budget; :mod:`.jump_forward`: forced
  tokens.
- :mod:`.reserve`: answer reservation (opt-in: the thinking ends in time and the answer is steered to its
  shortest completion), over :mod:`.shortest` (the shortest completion from a grammar state), whose
  searches run in :mod:`.search_service`'s process (:mod:`._search_worker`), never on the scheduler
  thread; :mod:`.report`: the per-request constraint report.

This room uses the compile room (:mod:`..compilation`) and ``thinkgate.reasoning``; nothing else.
"""
