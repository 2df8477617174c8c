"""The vocabulary: one per model, built once, shared by every request.

A :class:`Vocabulary` is the model's token table as the rest of thinkgate needs it:

- ``token_bytes[i]``: the exact bytes token ``i`` stands for (special tokens: their text in UTF-8;
  ids the tokenizer does not define: ``b""``, and they are never allowed by any mask);
- ``special_tokens``: text -> id of every added / special token (turn markers, think and tool markers,
  bos/eos...). These are the *control tokens*: a constraint never lets them appear inside JSON strings
  or free text unless its format names them;
- ``stop_token_ids``: the ids that end generation (eos, ``<|im_end|>``...);
- ``vocab_size``: the tokenizer's size (max id + 1); ``logits_width``: the model's logits width, often
  larger (padding ids past ``vocab_size`` are never allowed);
- ``response_template``: the checkpoint's ``response_template`` metadata (``tokenizer_config.json``;
  transformers keeps it as ``tokenizer.response_template``), or None. The template-reading families
  (``hf``, ``beam``: :mod:`thinkgate.reasoning.response_template`) take their markers and call syntax from it.

It lives in ``reasoning`` because that is the lowest layer that needs it (``structured_output`` uses
``reasoning``, never the reverse); ``structured_output`` re-exports it.

Three modules, one idea each:

- this one: the token table (:class:`Vocabulary`);
- :mod:`thinkgate.reasoning.vocabulary_adapters`: building a table from each tokenizer source (a ``transformers``
  tokenizer, an HF ``tokenizer.json``, a tiktoken ranks file, Mistral's tekken JSON) and the byte-level
  decoding helpers; reached through :meth:`Vocabulary.from_hf_tokenizer`,
  :meth:`Vocabulary.from_tokenizer_json`, :meth:`Vocabulary.from_tiktoken`, :meth:`Vocabulary.from_tekken`
  and :meth:`Vocabulary.coerce`;
- :mod:`thinkgate.reasoning.offline_vocabularies`: the offline real vocabularies by short name (:func:`load_vocabulary`,
  ``VOCABULARY_NAMES``), re-exported here.

A tiny synthetic vocabulary for unit tests and benchmarks is ``thinkgate.testing.byte_level_vocabulary``
(not installed with the package).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["Vocabulary", "load_vocabulary", "VOCABULARY_NAMES", "VocabularyName"]


class Vocabulary:
    """A model's token table (immutable after construction, safe to share across threads).

    Parameters
    ----------
    name:
        A short label used in messages and benchmark output.
    token_bytes:
        ``token_bytes[i]`` is the byte string of token ``i``; ``b""`` for ids the tokenizer leaves
        undefined. Its length is the tokenizer's size.
    special_tokens:
        Text -> id for every added/special token. All of them are control tokens.
    stop_token_ids:
        Ids that end generation.
    logits_width:
        Width of the model's logits (>= ``len(token_bytes)``); defaults to the tokenizer's size.
    encode:
        Optional ``str -> list[int]`` that tokenizes text, recognising special-token text as the
        special token. Tests and benchmarks use it to build synthetic token streams.
    bos_token_id:
        The id prepended at the start of a prompt, if any.
    response_template:
        The checkpoint's ``response_template`` metadata (a JSON object: ``fields``, ``start_anchor``
        ...), kept as given (a deep copy); None when the checkpoint has none. Read by the
        template-reading families only (:mod:`thinkgate.reasoning.response_template` validates it when they are built).
    """

    def __init__(
        self,
        name: str,
        token_bytes: Sequence[bytes],
        special_tokens: Mapping[str, int],
        stop_token_ids: Iterable[int],
        *,
        logits_width: int | None = None,
        encode: Callable[[str], list[int]] | None = None,
        bos_token_id: int | None = None,
        response_template: Mapping[str, Any] | None = None,
    ) -> None:
        self.name = name
        self.token_bytes: tuple[bytes, ...] = tuple(token_bytes)
        n = len(self.token_bytes)
        if n == 0:
            raise ValueError(f"vocabulary {name!r} is empty")
        for text, tid in special_tokens.items():
            if not 0 <= tid < n:
                raise ValueError(f"vocabulary {name!r}: special token {text!r} has id {tid} outside [0, {n})")
        self.special_tokens: dict[str, int] = dict(special_tokens)
        self.special_token_ids: frozenset[int] = frozenset(self.special_tokens.values())
        self.stop_token_ids: frozenset[int] = frozenset(stop_token_ids)
        for tid in self.stop_token_ids:
            if not 0 <= tid < n:
                raise ValueError(f"vocabulary {name!r}: stop token id {tid} outside [0, {n})")
        width = n if logits_width is None else int(logits_width)
        if width < n:
            raise ValueError(f"vocabulary {name!r}: logits_width {width} is smaller than the tokenizer size {n}")
        self.logits_width = width
        self.bos_token_id = bos_token_id
        if response_template is not None and not isinstance(response_template, Mapping):
            raise ValueError(f"vocabulary {name!r}: response_template must be a mapping (the checkpoint's "
                             f"JSON object), got {type(response_template).__name__}")
        self.response_template: dict[str, Any] | None = (
            None if response_template is None else copy.deepcopy(dict(response_template)))
        self._encode = encode
        self._lock = threading.Lock()
        self._id_by_bytes: dict[bytes, int] | None = None

    # -- sizes -----------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """The tokenizer's size: ``len(token_bytes)``; ids at or past it are never allowed."""
        return len(self.token_bytes)

    def __len__(self) -> int:
        return len(self.token_bytes)

    def __repr__(self) -> str:
        return (
            f"Vocabulary({self.name!r}, vocab_size={self.vocab_size}, logits_width={self.logits_width}, "
            f"specials={len(self.special_tokens)}, stops={sorted(self.stop_token_ids)})"
        )

    # -- lookups ---------------------------------------------------------------------------------
    def token_id(self, text: str) -> int | None:
        """The id of the single token whose text is exactly ``text`` (special tokens first), or None."""
        tid = self.special_tokens.get(text)
        if tid is not None:
            return tid
        if self._id_by_bytes is None:
            with self._lock:
                if self._id_by_bytes is None:
                    table: dict[bytes, int] = {}
                    for i, b in enumerate(self.token_bytes):
                        if b and i not in self.special_token_ids:
                            table.setdefault(b, i)
                    self._id_by_bytes = table
        return self._id_by_bytes.get(text.encode("utf-8"))

    def decode_bytes(self, token_ids: Iterable[int]) -> bytes:
        tb = self.token_bytes
        return b"".join(tb[i] for i in token_ids)

    def decode(self, token_ids: Iterable[int]) -> str:
        """The text of ``token_ids`` (special tokens as their text; invalid UTF-8 replaced)."""
        return self.decode_bytes(token_ids).decode("utf-8", errors="replace")

    @property
    def can_encode(self) -> bool:
        return self._encode is not None

    def encode(self, text: str) -> list[int]:
        """Tokenize ``text``; special-token text becomes the special token."""
        if self._encode is None:
            raise ValueError(f"vocabulary {self.name!r} has no encoder")
        return list(self._encode(text))

    def with_response_template(self, response_template: Mapping[str, Any] | None) -> Vocabulary:
        """The same token table with ``response_template`` (None: without one); the tables are shared,
        not copied. For a checkpoint whose tokenizer does not carry the template (a tokenizer.json, a
        tiktoken file) and for tests."""
        return Vocabulary(self.name, self.token_bytes, self.special_tokens, self.stop_token_ids,
                          logits_width=self.logits_width, encode=self._encode, bos_token_id=self.bos_token_id,
                          response_template=response_template)

    # -- adapters (built in vocabulary_adapters) -------------------------------------------------
    @classmethod
    def from_tiktoken(cls, path: str | Path, special_tokens: Mapping[str, int], *, pattern: str,
                      stop_tokens: Sequence[str], logits_width: int | None = None,
                      name: str | None = None) -> Vocabulary:
        """A tiktoken-style ranks file (``base64 rank`` per line, as Qwen ships) plus its specials."""
        from thinkgate.reasoning.vocabulary_adapters import from_tiktoken

        return from_tiktoken(path, special_tokens, pattern=pattern, stop_tokens=stop_tokens,
                             logits_width=logits_width, name=name)

    @classmethod
    def from_tekken(cls, path: str | Path, *, special_names: Mapping[int, str] | None = None,
                    logits_width: int | None = None, name: str | None = None) -> Vocabulary:
        """Mistral's tekken JSON (see :func:`thinkgate.reasoning.vocabulary_adapters.from_tekken`)."""
        from thinkgate.reasoning.vocabulary_adapters import from_tekken

        return from_tekken(path, special_names=special_names, logits_width=logits_width, name=name)

    @classmethod
    def from_tokenizer_json(cls, path: str | Path, *, stop_tokens: Sequence[str] | None = None,
                            bos_token: str | None = None, logits_width: int | None = None,
                            name: str | None = None) -> Vocabulary:
        """A Hugging Face ``tokenizer.json`` (byte-level BPE or sentencepiece-style), loaded with the
        ``tokenizers`` library (no model hub)."""
        from thinkgate.reasoning.vocabulary_adapters import from_tokenizer_json

        return from_tokenizer_json(path, stop_tokens=stop_tokens, bos_token=bos_token,
                                   logits_width=logits_width, name=name)

    @classmethod
    def from_hf_tokenizer(cls, tokenizer: Any, *, logits_width: int | None = None,
                          name: str | None = None) -> Vocabulary:
        """A ``transformers`` tokenizer (fast or slow). Added tokens are the control tokens; eos is the
        stop token."""
        from thinkgate.reasoning.vocabulary_adapters import from_hf_tokenizer

        return from_hf_tokenizer(tokenizer, logits_width=logits_width, name=name)

    @classmethod
    def coerce(cls, obj: Any) -> Vocabulary:
        """A Vocabulary from a Vocabulary, a short name, or a ``transformers`` tokenizer."""
        if isinstance(obj, Vocabulary):
            return obj
        from thinkgate.reasoning.vocabulary_adapters import coerce

        return coerce(obj)


# the named offline vocabularies, re-exported (that module needs Vocabulary defined first)
from thinkgate.reasoning.offline_vocabularies import VOCABULARY_NAMES, VocabularyName, load_vocabulary  # noqa: E402
