"""Vocabulary adapters: a :class:`~thinkgate.reasoning.vocabulary.Vocabulary` from each tokenizer source.

- :func:`from_hf_tokenizer`: a ``transformers`` tokenizer (fast or slow);
- :func:`from_tokenizer_json`: an HF ``tokenizer.json`` file, via ``tokenizers``;
- :func:`from_tiktoken`: a tiktoken ranks file (Qwen);
- :func:`from_tekken`: Mistral's tekken JSON;
- :func:`coerce`: a Vocabulary from a short name or a ``transformers`` tokenizer (one per live
  tokenizer object);

plus the byte-level decoding helpers (the GPT-2 byte <-> unicode map, sentencepiece byte pieces). The
same adapters are reached as ``Vocabulary.from_*`` / ``Vocabulary.coerce``.
"""

from __future__ import annotations

import base64
import json
import threading
import weakref
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from thinkgate.reasoning.vocabulary import Vocabulary

__all__ = ["from_tiktoken", "from_tekken", "from_tokenizer_json", "from_hf_tokenizer", "hf_response_template", "coerce"]


def from_tiktoken(
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
    return Vocabulary(name or Path(path).stem, token_bytes, special_tokens, stops,
                      logits_width=logits_width, encode=encode)


def from_tekken(
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
    return Vocabulary(name or Path(path).stem, token_bytes, specials, [eos], logits_width=logits_width,
                      encode=encode, bos_token_id=specials.get("<s>"))


def from_tokenizer_json(
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

    return Vocabulary(name or Path(path).parent.name, token_bytes, added, stops, logits_width=logits_width,
                      encode=encode, bos_token_id=added.get(bos_token) if bos_token else None)


def from_hf_tokenizer(
    tokenizer: Any, *, logits_width: int | None = None, name: str | None = None
) -> Vocabulary:
    """A ``transformers`` tokenizer (fast or slow). Added tokens are the control tokens; eos is the
    stop token; the checkpoint's ``response_template`` comes along (:func:`hf_response_template`)."""
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

    return Vocabulary(name or getattr(tokenizer, "name_or_path", "hf") or "hf", token_bytes, added, stops,
                      logits_width=logits_width, encode=encode, bos_token_id=tokenizer.bos_token_id,
                      response_template=hf_response_template(tokenizer))


def hf_response_template(tokenizer: Any) -> dict[str, Any] | None:
    """The ``response_template`` metadata of a Hugging Face tokenizer, or None: the tokenizer's
    ``response_template`` attribute (transformers 5 reads it from ``tokenizer_config.json``), else that
    config field as ``init_kwargs`` holds it (earlier transformers keep unknown fields there). The same
    two places vLLM 0.34 reads (``vllm/parser/response_template.py``). Anything that is not a JSON
    object counts as none."""
    template = getattr(tokenizer, "response_template", None)
    if not isinstance(template, Mapping):
        template = (getattr(tokenizer, "init_kwargs", None) or {}).get("response_template")
    return dict(template) if isinstance(template, Mapping) else None


def coerce(obj: Any) -> Vocabulary:
    """A Vocabulary from a Vocabulary, a short name, or a ``transformers`` tokenizer."""
    if isinstance(obj, Vocabulary):
        return obj
    if isinstance(obj, str):
        from thinkgate.reasoning.offline_vocabularies import load_vocabulary

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
            return from_hf_tokenizer(tokenizer)
        if v is None:
            v = from_hf_tokenizer(tokenizer)
            _HF_CACHE[tokenizer] = v
        return v


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
