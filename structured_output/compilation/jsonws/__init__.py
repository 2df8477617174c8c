"""The JSON whitespace bound: ``max_whitespace=N`` on a JSON constraint.

- :mod:`.bound`: :class:`~.bound.WhitespaceBound` (the per-vocabulary token table, built once per
  compiled grammar) and :class:`~.bound.BoundedMatcher` (a request's matcher with the bound applied).
- :mod:`.lexer`: the lexer that tracks the whitespace run across tokens, in C (``lexer.c``, built at
  install time as ``_lexer``) with :mod:`.lexer_ref`, its pure-Python reference and fallback.
"""
