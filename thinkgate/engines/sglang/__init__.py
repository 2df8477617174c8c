"""SGLang glue (SGLang 0.5.23): ``--grammar-backend thinkgate``, loaded by the ``sglang.srt.plugins``
entry point (:mod:`.backend`), with SGLang's reasoning and tool parser names mapped to thinkgate's
(:mod:`.names`, :mod:`.tool_names`)."""
