"""The front-end room: a model's output as an OpenAI message, whole or as stream deltas.

- :mod:`.parser`: :class:`~.parser.Parser`, built once per model (vocabulary, reasoning parser, tool
  format).
- :mod:`.parse_request`: :class:`~.parse_request.RequestParser`, one request's view of it.
- :mod:`.parse_result`: the results (:class:`~.parse_result.ParseResult`, stream deltas, finish reasons).

It uses the tools room (:mod:`..tools`) to read calls and ``thinkgate.reasoning`` to split the
thinking. Of the step room it takes one type: the manager's :class:`~..step.report.ConstraintReport`, which a
caller passes to ``parse`` / ``finish`` to have it in the response (the ``thinkgate_constraint`` field).
"""
