"""The xml_a names side by side in vLLM 0.34's serving ``Parser``: vLLM's own tool parser of each name and
``thinkgate_<name>`` (the plugin), on the model outputs of vLLM's own tests for those parsers
(``test_tool_xml_a.CASES``), whole and streamed token by token, after the family's thinking.

``test_vllm_tool_parity.py`` runs the same comparison on the templates' outputs (10 per name, some damaged);
this file runs it on the outputs vLLM's tests hold. Both sides use thinkgate's reasoning parser, so only
the tool parsers differ. thinkgate's answer must be the one its unit test expects (the plugin serves the
format's reader), and every difference of vLLM's is a kind of ``test_vllm_tool_parity.classify``; the test
prints the counts per name.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest
from support import FAMILIES, detokenizer, vocab
from test_tool_xml_a import CASES, TOOLS
from test_vllm_tool_parity import classify
from tool_serving import chat_request, parser_cls, streamed, tokenizer, whole

from thinkgate.structured_output.tools import get_tool_format
import thinkgate.engines.vllm.tool_parsers  # noqa: F401,E402  (registers thinkgate_<format>)

NAMES = sorted({c[0] for c in CASES})


@pytest.mark.parametrize("name", NAMES)
def test_vllms_test_outputs_side_by_side(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # the unit tests' expectations read declared tools only (a call of an undeclared tool stays content);
    # the plugin reads undeclared ones by default, as vLLM does, so this run asks for thinkgate's own reading
    monkeypatch.setenv("THINKGATE_VLLM_DECLARED_TOOLS_ONLY", "1")
    fam = FAMILIES[get_tool_format(name).name]
    v = vocab(fam.vocab)
    tok = tokenizer(fam.vocab)
    reasoning = f"thinkgate_{fam.parser}"
    theirs, ours = parser_cls(tok, name, reasoning), parser_cls(tok, f"thinkgate_{name}", reasoning)
    prompt = v.encode(fam.prompt)
    controls = [m for m in v.special_tokens if len(m) > 1]
    request = chat_request(TOOLS, "auto")
    f = get_tool_format(name)
    lead = (f.section[0] if f.section else f.call_begin.split("{name}")[0])[:8]  # the start of a call's text
    kinds: Counter[str] = Counter()
    unexplained = []
    for fmt, text, content, calls in CASES:
        if fmt != name:
            continue
        ids = v.encode(fam.thinking + text)
        args = (tok, request, prompt, ids)
        mine_w = whole(ours, *args, v.decode(ids), fam.kwargs or None)
        mine_s = streamed(ours, *args, range(len(ids)), detokenizer(v), fam.kwargs or None)
        assert mine_w == mine_s, (text, mine_w, mine_s)
        assert (mine_w.content, [(n, json.loads(a)) for n, a in mine_w.calls]) == (content, calls)
        got_w = whole(theirs, *args, v.decode(ids), fam.kwargs or None)
        got_s = streamed(theirs, *args, range(len(ids)), detokenizer(v), fam.kwargs or None)
        change = "after" if content and text.rstrip().endswith(content) else "none"
        found = classify(got_w, mine_w, change, controls, got_s, lead) | classify(got_s, mine_w, change, controls,
                                                                                  got_w, lead)
        kind = "+".join(sorted(found - {"same"})) or "same"
        kinds[kind] += 1
        if "unexplained" in found:
            unexplained.append((text, got_w, got_s, mine_w))
    print(f"\n[{name} vs thinkgate_{name}] {sum(kinds.values())} outputs of vLLM's tests: "
          + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    assert not unexplained, "\n".join(f"{t!r}\n  vLLM whole {w}\n  vLLM stream {s}\n  thinkgate {o}"
                                      for t, w, s, o in unexplained[:3])
