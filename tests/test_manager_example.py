"""The README's example scheduler loop, run as a test so that it never rots: requests join and leave,
a stand-in model proposes logits, the bitmask is applied with ``kernels``, tokens are sampled and
accepted."""

from __future__ import annotations

import json


def test_readme_scheduler_loop():
    # --- README example begins ---
    import torch

    from thinkgate import kernels
    from thinkgate.reasoning import load_vocabulary
    from thinkgate.structured_output import Constraint, StructuredOutputManager

    vocab = load_vocabulary("qwen3_6")
    mgr = StructuredOutputManager(vocab, "qwen3", max_num_seqs=2)
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    prompt = vocab.encode("<|im_start|>user\nWeather?<|im_end|>\n<|im_start|>assistant\n<think>\n")
    requests = {  # id: (constraint, what the stand-in model would like to write)
        "a": (Constraint.json_schema(schema), 'Paris {"city"?}</think>{"city": "Paris"}<|im_end|>'),
        "b": (Constraint.json_schema(schema), 'Oslo, "city":</think>{"city": "Oslo"}<|im_end|>'),
        "c": (Constraint.choice(["yes", "no"]), "maybe<|im_end|>"),  # masked to "yes" / "no"
    }
    waiting, running, outputs = list(requests), [], {rid: [] for rid in requests}
    logits = torch.empty((mgr.max_num_seqs, vocab.logits_width))
    while waiting or running:
        while waiting and len(running) < mgr.max_num_seqs:  # requests join
            rid = waiting.pop(0)
            mgr.add_request(rid, requests[rid][0], prompt, include_reasoning=rid != "c")
            running.append(rid)
        batch = [rid for rid in running if mgr.is_ready(rid)]  # compiled: schedulable
        logits[:len(batch)].normal_()  # the stand-in model: noise plus a strong wish for its next token
        for i, rid in enumerate(batch):
            want = vocab.encode(requests[rid][1])
            logits[i, want[min(len(outputs[rid]), len(want) - 1)]] += 30.0
        masks = mgr.grammar_bitmask(batch)  # rows only where something is constrained
        if masks is not None:
            kernels.apply_token_bitmask_inplace(logits, masks.bitmask, masks.logits_indices,
                                                vocab_size=vocab.vocab_size)
        for rid, token in zip(batch, logits[:len(batch)].argmax(dim=-1).tolist()):
            outputs[rid].append(token)
            if mgr.accept_tokens(rid, [token]).status != "ok":  # "terminated" (a stop token) or "error"
                mgr.remove_request(rid)
                running.remove(rid)
    # --- README example ends ---
    end = vocab.token_id("</think>")
    for rid, city in (("a", "Paris"), ("b", "Oslo")):
        content = vocab.decode(outputs[rid][outputs[rid].index(end) + 1:-1])
        assert json.loads(content) == {"city": city}, content  # the thinking broke the schema; the answer keeps it
    assert vocab.decode(outputs["c"][:-1]) in ("yes", "no")
    assert outputs["c"][-1] in vocab.stop_token_ids
    assert len(mgr) == 0
    mgr.close()


def test_readme_shows_this_loop():
    """README.md's usage block is the loop above, line for line (so the README never drifts from
    the code this test runs)."""
    import inspect
    import re
    import textwrap
    from pathlib import Path

    src = inspect.getsource(test_readme_scheduler_loop)
    body = src.split("# --- README example begins ---\n", 1)[1].split("# --- README example ends ---", 1)[0]
    body = textwrap.dedent(body).strip()
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    assert any(b.strip() == body for b in blocks), "README.md's usage block differs from the tested loop"
