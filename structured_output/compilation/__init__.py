"""The compile room: a request's constraint, from its description to a compiled grammar.

- :mod:`.constraints`: :class:`~.constraints.Constraint`, what a request asks for (JSON schema, regex,
  grammar, choice, structural tag) and its cache key.
- :mod:`.compiler`: :class:`~.compiler.Compiler`, the compile service: the cache of compiled constraints and
  the parent's half of a compile; :mod:`.worker_pool`: the worker processes a timeout or a cancel can kill
  (:mod:`._compile_worker` is the worker's side).
- :mod:`.xgrammar_adapter`: the one place that turns a constraint into xgrammar calls.
- :mod:`.schema_support`: which JSON Schema keywords the grammar enforces and the output check of the rest.
- :mod:`.jsonws`: the JSON whitespace bound (its matcher and its lexer, in C with a Python reference).

Nothing here knows about steps or batches: the step room (:mod:`..step`) asks this room for a
compiled constraint and a matcher, and nothing flows back.
"""
