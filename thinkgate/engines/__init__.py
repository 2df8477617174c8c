"""All engine glue: the only code that imports an inference engine.

- :mod:`.vllm`: vLLM's general plugin, reasoning and tool parser plugins, structured-outputs backend and
  CPU worker.
- :mod:`.sglang`: SGLang's grammar backend and its name maps.
- :mod:`.registration`: the registration and patch helpers both share.

``thinkgate.reasoning``, ``thinkgate.kernels`` and ``thinkgate.structured_output`` import no engine.
"""
