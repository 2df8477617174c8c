"""vLLM glue (vLLM 0.34): loaded by vLLM's ``vllm.general_plugins`` entry point (:mod:`.plugin`).

- :mod:`.plugin`: the general plugin: registers everything below in each vLLM process.
- :mod:`.reasoning_parsers`: every thinkgate reasoning parser as ``thinkgate_<name>`` (and vLLM's own names).
- :mod:`.tool_parsers`: every thinkgate tool format as ``thinkgate_<format>``.
- :mod:`.structured_outputs`: the structured-outputs backend (compile, fill, accept with thinkgate).
- :mod:`.cpu_worker`: vLLM's CPU worker applying the bitmask with thinkgate's C kernel.
"""
