"""Synthetic vocabularies for unit tests and benchmarks (not part of the installed package).

Each section below is one kind of synthetic vocabulary; tests import them as
``from bench.vocabs import ...``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from thinkgate.reasoning.vocabulary import Vocabulary

__all__ = ["byte_level_vocabulary"]


# ==================================================================================================
# Byte-level vocabularies (reasoning markers, small JSON pieces): ``byte_level_vocabulary``
# ==================================================================================================


def byte_level_vocabulary(
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

    return Vocabulary(name, token_bytes, special_map, stops, logits_width=logits_width, encode=encode)


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
