"""Sampling under the manager's masks: 200 requests over 60 programmatically generated JSON schemas,
random logits, the mask applied with ``kernels.apply_token_bitmask_inplace``, greedy and random sampling; every
finished output must be valid JSON for its schema (``jsonschema``).

To keep it fast on 2 CPU cores (each logits row is 248,320 wide):
- schemas bound their free parts: strings ``maxLength`` <= 10, integers and numbers with bounds, arrays
  ``maxItems`` <= 3, nesting depth <= 2 (unbounded string/number growth would otherwise be the common
  random walk);
- logits are bfloat16 rows drawn from a pool of random rows made once (a fresh random pick per row
  and step), plus a bias of +4 on the tokens that close JSON (``"``, ``}``, ``]``, ``,``, digits) and
  of -8 on pure-whitespace tokens;
- random sampling is Gumbel-max with pooled Gumbel noise (exactly a draw from softmax(logits) when the
  noise is fresh; pooled rows are reused across steps, which is plenty for this test);
- a cap of 160 tokens per request: a request that does not finish fails the test.
Half of the requests think first (Qwen3's parser, thinking text sampled without a mask, then
``</think>``); the grammar applies after it.
"""

from __future__ import annotations

import json
import random
import time

import jsonschema
import pytest
import torch

from thinkgate import kernels
from thinkgate.structured_output import Compiler, Constraint, RequestStatus, StructuredOutputManager

N_REQUESTS = 200
N_SCHEMAS = 60  # distinct schemas (each compile costs ~40 ms on this vocabulary); request i uses i % 60
BATCH = 50
MAX_TOKENS = 160


def gen_schema(rng: random.Random, depth: int = 0) -> dict:
    """A random object schema: string / integer / number / boolean / enum / array / nested object
    properties, a random ``required`` list, bounded free parts."""
    props = {}
    for i in range(rng.randint(1, 4)):
        kind = rng.choice(["string", "integer", "number", "boolean", "enum", "array"]
                          + (["object"] if depth < 2 else []))
        name = f"{kind[:3]}_{i}"
        if kind == "string":
            p = {"type": "string", "maxLength": rng.randint(1, 10)}
            if rng.random() < 0.3:
                p["minLength"] = 1
        elif kind == "integer":
            lo = rng.randint(-50, 50)
            p = {"type": "integer", "minimum": lo, "maximum": lo + rng.randint(0, 500)}
        elif kind == "number":
            p = {"type": "number", "minimum": -10, "maximum": rng.choice([1, 10, 1000])}
        elif kind == "boolean":
            p = {"type": "boolean"}
        elif kind == "enum":
            p = {"enum": rng.sample(["red", "green", "blue", "a b", "x\"y", 7, None, True], rng.randint(1, 4))}
        elif kind == "array":
            item = rng.choice([{"type": "integer", "minimum": 0, "maximum": 9}, {"type": "boolean"},
                               {"type": "string", "maxLength": 4}])
            p = {"type": "array", "items": item, "maxItems": rng.randint(0, 3)}
        else:
            p = gen_schema(rng, depth + 1)
        props[name] = p
    names = list(props)
    return {"type": "object", "properties": props,
            "required": sorted(rng.sample(names, rng.randint(0, len(names))), key=names.index)}


@pytest.fixture(scope="module")
def compiler(qwen_vocab):
    # the deadline is far above a compile's cost: this test checks sampled outputs, and on a loaded
    # machine (the whole suite beside other work) a 60 s default ended one request in ERROR
    c = Compiler(qwen_vocab, num_threads=2, compile_timeout_s=600)
    yield c
    c.close()


def _stand_in_bias(vocab, width: int) -> torch.Tensor:
    """+4 on tokens that close JSON, -8 on pure-whitespace tokens (a real model rarely spends its
    whitespace budget; random logits would, since the vocabulary has hundreds of whitespace runs)."""
    bias = torch.zeros(width, dtype=torch.bfloat16)
    ws = [i for i, b in enumerate(vocab.token_bytes) if b and not b.strip(b" \t\r\n")]
    bias[ws] = -8.0
    for text in ['"', '}', ']', ',', '",', '"}', '}}', '"]', '],', '},', '0', '1', '5', 'true', 'false', 'null']:
        tid = vocab.token_id(text)
        if tid is not None:
            bias[tid] = 4.0
    return bias


@pytest.mark.slow
@pytest.mark.parametrize("sampling", ["greedy", "random"])
def test_every_sampled_output_is_valid(qwen_vocab, compiler, sampling):
    v = qwen_vocab
    rng = random.Random(1234 if sampling == "greedy" else 4321)
    gen = torch.Generator().manual_seed(rng.randint(0, 2**31))
    width = v.logits_width
    pool = torch.randn((64, width), generator=gen).to(torch.bfloat16) * 2
    pool += _stand_in_bias(v, width)
    gumbel = -torch.log(-torch.log(torch.rand((64, width), generator=gen).clamp_(1e-9, 1 - 1e-9))).to(torch.bfloat16)
    end_think = v.token_id("</think>")
    think_ids = v.encode('thinking: {"a": [1, 2} "quoted" <|im_start|> braces }}} ')
    prompt = v.encode("<|im_start|>user\nGive JSON.<|im_end|>\n<|im_start|>assistant\n<think>\n")
    mgr = StructuredOutputManager(v, "qwen3", compiler=compiler, max_num_seqs=BATCH)

    distinct = [gen_schema(random.Random(s)) for s in range(N_SCHEMAS)]  # the same for both modes
    schemas = [distinct[i % N_SCHEMAS] for i in range(N_REQUESTS)]
    finished = 0
    for start in range(0, N_REQUESTS, BATCH):
        outputs: dict[str, list[int]] = {}
        scripted: dict[str, list[int]] = {}  # thinking tokens the "model" writes before sampling
        for i in range(start, start + BATCH):
            rid = f"r{i}"
            thinks = i % 2 == 0
            ws = {} if i % 3 else {"any_whitespace": False}
            mgr.add_request(rid, Constraint.json_schema(schemas[i], **ws), prompt, include_reasoning=thinks)
            outputs[rid] = []
            scripted[rid] = think_ids[: rng.randint(0, len(think_ids))] + [end_think] if thinks else []
        live = list(outputs)
        while not all(mgr.is_ready(r) for r in live):
            time.sleep(0.005)
        steps = 0
        while live:
            steps += 1
            assert steps <= MAX_TOKENS + len(think_ids) + 2, f"requests did not finish: {live[:3]}"
            batch = mgr.grammar_bitmask(live)
            pick = torch.randint(0, 64, (len(live),), generator=gen)
            logits = pool[pick]
            if batch is not None:
                kernels.apply_token_bitmask_inplace(logits, batch.bitmask, batch.logits_indices, vocab_size=v.vocab_size)
            if sampling == "random":
                logits += gumbel[torch.randint(0, 64, (len(live),), generator=gen)]
            sampled = torch.max(logits, dim=-1).indices.tolist()  # (bf16 argmax is slow on CPU)
            nxt = []
            for row, rid in enumerate(live):
                tok = scripted[rid].pop(0) if scripted[rid] else sampled[row]
                res = mgr.accept_tokens(rid, [tok])
                assert res.status != "error", (rid, res.message, schemas[int(rid[1:])])
                outputs[rid].append(tok)
                if res.status == "terminated":
                    assert mgr.status(rid) is RequestStatus.TERMINATED
                    continue
                assert len(outputs[rid]) <= MAX_TOKENS + len(think_ids) + 1, rid
                nxt.append(rid)
            live = nxt
        for rid, ids in outputs.items():
            i = int(rid[1:])
            content = ids[ids.index(end_think) + 1:] if i % 2 == 0 else ids
            assert content[-1] in v.stop_token_ids
            text = v.decode(content[:-1])
            try:
                value = json.loads(text)
            except ValueError as e:
                raise AssertionError(f"{rid}: {text!r} {[v.token_bytes[t] for t in content]}") from e
            jsonschema.validate(value, schemas[i])
            finished += 1
            mgr.remove_request(rid)
    assert finished == N_REQUESTS
