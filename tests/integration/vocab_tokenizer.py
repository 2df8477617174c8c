"""A Hugging Face-shaped tokenizer over a thinkgate Vocabulary, for vLLM's parsers in the integration tests.

The Qwen3.6 and Magistral tables ship as a tiktoken ranks file and a tekken JSON, not as a
``tokenizer.json``; vLLM's parsers only need what any ``TokenizerLike`` has (``get_vocab``, the special
tokens, ``decode``, ``encode``), so this class shows the real table in the byte-level convention a
``tokenizer.json`` uses (each byte as GPT-2's printable character; special tokens as their text).
thinkgate's plugin reads it back through ``Vocabulary.from_hf_tokenizer`` like any HF tokenizer, and
``test_vocab_tokenizer_is_the_real_table`` checks that it gets the same bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from thinkgate.reasoning import Vocabulary


@lru_cache(maxsize=1)
def _byte_to_char() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


class VocabTokenizer:
    """``get_vocab`` / ``decode`` / ``encode`` / special tokens of a thinkgate ``Vocabulary``. ``not_special``:
    added tokens the model's own tokenizer does not mark special (its ``added_tokens_decoder`` holds them,
    ``all_special_tokens`` does not, ``skip_special_tokens`` keeps them), as MiniMax M3's namespace token."""

    def __init__(self, vocab: Vocabulary, not_special: Iterable[str] = ()) -> None:
        self._v = vocab
        plain = {vocab.special_tokens[t] for t in not_special}
        m = _byte_to_char()
        pieces: dict[str, int] = {}
        for i, b in enumerate(vocab.token_bytes):
            if i in vocab.special_token_ids or not b:
                continue
            pieces.setdefault("".join(m[x] for x in b), i)
        pieces.update(vocab.special_tokens)
        self._pieces = pieces
        self._by_id = {i: p for p, i in pieces.items()}
        self.name_or_path = vocab.name
        self.all_special_tokens = [t for t, i in vocab.special_tokens.items() if i not in plain]
        self.all_special_ids = [i for i in vocab.special_tokens.values() if i not in plain]
        self._skipped = frozenset(self.all_special_ids)
        self.added_tokens_decoder = {i: t for t, i in vocab.special_tokens.items()}
        stops = sorted(vocab.stop_token_ids)
        self.eos_token_id = stops[0] if stops else None
        self.bos_token_id = vocab.bos_token_id
        self.vocab_size = vocab.vocab_size
        # the checkpoint's response_template, where vLLM's hf / beam and thinkgate's plugins read it
        self.response_template = vocab.response_template
        self.init_kwargs: dict = {}

    def __len__(self) -> int:
        return self._v.vocab_size

    def get_vocab(self) -> dict[str, int]:
        return dict(self._pieces)

    def encode(self, text: str, add_special_tokens: bool = False, **_: object) -> list[int]:
        return self._v.encode(text)

    def decode(self, ids: Iterable[int] | int, skip_special_tokens: bool = False, **_: object) -> str:
        ids = [ids] if isinstance(ids, int) else list(ids)
        if skip_special_tokens:
            ids = [t for t in ids if t not in self._skipped]
        return self._v.decode(ids)

    def convert_ids_to_tokens(self, ids: Iterable[int] | int, skip_special_tokens: bool = False):
        if isinstance(ids, int):
            return self._by_id.get(ids, "")
        return [self._by_id.get(t, "") for t in ids]

    def convert_tokens_to_ids(self, tokens):
        if isinstance(tokens, str):
            return self._pieces.get(tokens)
        return [self._pieces.get(t) for t in tokens]
