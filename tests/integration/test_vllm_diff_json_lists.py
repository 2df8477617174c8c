"""The json_lists group against vLLM 0.34's own parsers of the same names, whole and streamed.

Two sets of outputs, each through vLLM's composed serving ``Parser`` (``tool_serving.whole`` / ``streamed``,
token by token) and through thinkgate's:

- ``rendered``: the model's chat template writing the corpus's calls (``tool_serving.cases``: some with text
  after the calls, a character deleted, or cut short), thinkgate's answer its own Parser's (``ours``);
- ``vllm-tests``: the model outputs of vLLM's tests for these parsers (``test_tool_json_lists.CASES``, with
  the calls vLLM's tests expect), thinkgate's answer its reader's on the same ids.

Every difference must be one of the kinds of ``test_vllm_tool_parity.py`` (``classify``: whitespace,
args-text, text-after-calls, malformed, control-token-in-value, schema-types, vllm-misses-calls,
text-in-arguments, content-dropped) or of these, else the test fails:

- ``vllm-fails-its-fact`` (vLLM's bug): on a ``vllm-tests`` output, thinkgate returns the calls and content
  the vLLM test states and vLLM 0.34 does not (phi4_mini_json's non-greedy ``functools\\[(.*?)\\]`` cuts nested
  arguments; internlm's split raises on a second call; granite keeps no text around its list);
- ``vllm-stream-silent`` (vLLM's gap): vLLM's stream returns nothing at all for this output (phi4_mini_json
  implements no streaming);
- ``vllm-stream-disagrees`` (vLLM's bug): vLLM's stream gives other calls than its own whole answer, which
  has thinkgate's calls (xlam's regex stream reads a ``"name"`` nested in the arguments as a call, doubles or
  drops arguments, or sends a call its whole parse rejects; granite-20b-fc's stream leaves the last call's
  arguments empty);
- ``vllm-reads-no-call`` (vLLM's bug): on a well-formed output (not damaged), vLLM finds no call on either
  path (phi4_mini_json's non-greedy ``functools\\[(.*?)\\]`` stops at the first ``]`` inside the arguments);
- ``vllm-drops-content`` (vLLM's bug): the same calls, and vLLM's content is a part of thinkgate's (phi4's
  whole answer has no content once it finds calls; granite drops the text after its list, and the marker
  of a list that does not read);
- ``vllm-keeps-marker`` (vLLM's bug): the same calls, and vLLM's content holds the marker or the calls' text
  (granite's stream with text before the marker, xlam's with text before the list);
- ``refused-call`` (choice): the output calls a tool the request does not declare (a corpus tool outside the
  renderer's cases, a vLLM test's ``func``): thinkgate's API reads calls of declared tools only.

The test prints, per name, the counts of each kind, whole and streamed.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from typing import Any

import pytest
from support import FAMILIES, TOOLS, detokenizer, vocab
from template_render import RENDERERS
from test_tool_json_lists import CASES
from test_tool_json_lists import TOOLS as CASE_TOOLS
from test_vllm_tool_parity import classify
from tool_serving import Message, cases, chat_request, norm, ours, parser_cls, streamed, tokenizer, whole

import thinkgate.reasoning.vllm_plugin  # noqa: F401  (registers the thinkgate_<family> reasoning parsers)
from thinkgate.structured_output.tools import MarkedDecoder, get_tool_format, get_tool_reader

# thinkgate renderer -> vLLM 0.34's parser name of the group
PAIRS = [("phi4_mini_json", "phi4_mini_json"), ("xlam", "xlam"), ("jamba", "jamba"), ("granite", "granite"),
         ("granite_20b_fc", "granite-20b-fc"), ("internlm", "internlm"), ("hermes", "granite4"),
         ("qwen3_coder", "granite_toolcall_parser")]


def _ours_stream(fmt: str, tools: list[dict[str, Any]], ids: list[int], v: Any) -> Message:
    st, dec = get_tool_reader(fmt, tools, "auto").stream(v), MarkedDecoder(v)
    content, calls = [], []
    for k, t in enumerate(ids):
        d = st.feed(dec.feed([t], final=k == len(ids) - 1))
        content.append(d.content)
        calls += d.calls
    d = st.finish()
    content.append(d.content)
    calls += d.calls
    return Message(None, norm("".join(content)), tuple((c.name, c.arguments) for c in calls))


def _same(a: Message, b: Message) -> bool:
    """The same calls (arguments as JSON values) and the same content but for whitespace."""
    def calls(m: Message) -> list[tuple[str, Any]]:
        out = []
        for n, x in m.calls:
            try:
                out.append((n, json.loads(x)))
            except ValueError:
                out.append((n, x))
        return out
    return calls(a) == calls(b) and " ".join((a.content or "").split()) == " ".join((b.content or "").split())


def _kind(got: Message, want: Message, change: str, controls: list[str], other: Message, expected: Any,
          streamed_: bool, text: str) -> str:
    found = classify(got, want, change, controls, other) - {"same"}
    if "unexplained" not in found:
        return "+".join(sorted(found)) or "same"
    ws = lambda m: " ".join((m.content or "").split())  # noqa: E731
    if streamed_ and got == Message(None, None, ()) and (want.calls or want.content):
        return "vllm-stream-silent"
    if streamed_ and got.calls != want.calls and _same(Message(None, None, other.calls), Message(None, None, want.calls)):
        return "vllm-stream-disagrees"
    if not got.calls and want.calls and change in ("none", "after"):
        return "vllm-reads-no-call"
    if _same(Message(None, None, got.calls), Message(None, None, want.calls)) and ws(got) != ws(want):
        if ws(got) in ws(want):
            return "vllm-drops-content"
        if any(m in (got.content or "") for m in ("<|tool_call|>", "<tool_call>", "functools", "[{")):
            return "vllm-keeps-marker"
    if expected is not None and _same(want, expected) and not _same(got, expected):
        return "vllm-fails-its-fact"
    return "unexplained"


def _tok(fam_vocab: str) -> Any:
    return tokenizer(fam_vocab)


def _report(label: str, kinds_w: Counter, kinds_s: Counter) -> None:
    def fmt(c: Counter) -> str:
        return ", ".join(f"{k} {n}" for k, n in sorted(c.items()))
    print(f"\n[{label}] whole: {fmt(kinds_w)} | streamed: {fmt(kinds_s)}")


@pytest.mark.parametrize(("renderer", "name"), PAIRS, ids=[n for _, n in PAIRS])
def test_rendered_outputs_differ_only_as_explained(renderer: str, name: str) -> None:
    fmt = RENDERERS[renderer].format
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    tok = _tok(fam.vocab)
    reasoning = None if fam.parser is None else f"thinkgate_{fam.parser}"
    theirs = parser_cls(tok, name, reasoning)
    prompt = v.encode(fam.prompt)
    controls = [m for m in v.special_tokens if m and m in "".join(RENDERERS[renderer].write([("f", {})], ""))]
    kinds_w, kinds_s = Counter(), Counter()
    unexplained = []
    for text, change in cases(renderer, 10, seed=zlib.crc32(name.encode())):
        ids = v.encode(text)
        want = ours(renderer, ids, "auto")
        request = chat_request(TOOLS, "auto")
        try:
            got_w = whole(theirs, tok, request, prompt, ids, v.decode(ids), fam.kwargs or None)
            got_s = streamed(theirs, tok, request, prompt, ids, range(len(ids)), detokenizer(v), fam.kwargs or None)
        except Exception:  # noqa: BLE001  (vLLM's parser raising is a kind of its own)
            kinds_w["vllm-crash"] += 1
            kinds_s["vllm-crash"] += 1
            continue
        kw = _kind(got_w, want, change, controls, got_s, None, False, text)
        ks = _kind(got_s, want, change, controls, got_w, None, True, text)
        kinds_w[kw] += 1
        kinds_s[ks] += 1
        if "unexplained" in (kw, ks):
            unexplained.append((change, text, got_w, got_s, want))
    _report(f"{name} vs thinkgate_{name} rendered", kinds_w, kinds_s)
    assert not unexplained, "\n".join(f"{c}: {t!r}\n  vLLM whole {w}\n  vLLM stream {s}\n  thinkgate {o}"
                                      for c, t, w, s, o in unexplained[:3])


@pytest.mark.parametrize("name", sorted({c[0] for c in CASES}))
def test_vllm_test_outputs_differ_only_as_explained(name: str) -> None:
    fmt = get_tool_format(name).name
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    tok = _tok(fam.vocab)
    theirs = parser_cls(tok, name, None)
    tools = CASE_TOOLS
    controls = [m for m in v.special_tokens if m and m in "".join(get_tool_format(name).markers)]
    kinds_w, kinds_s = Counter(), Counter()
    unexplained = []
    for case_name, text, calls, content in CASES:
        if case_name != name:
            continue
        ids = v.encode(text)
        r = get_tool_reader(fmt, tools, "auto").read_ids(ids, v)
        want = Message(None, r.content, tuple((c.name, c.arguments) for c in r.calls))
        expected = Message(None, content, tuple((n, json.dumps(a, ensure_ascii=False)) for n, a in calls))
        assert [(n, json.loads(a)) for n, a in want.calls] == calls and want.content == content
        assert _ours_stream(fmt, tools, ids, v) == want
        request = chat_request(tools, "auto")
        try:
            got_w = whole(theirs, tok, request, [], ids, v.decode(ids), None)
            got_s = streamed(theirs, tok, request, [], ids, range(len(ids)), detokenizer(v), None)
        except Exception:  # noqa: BLE001
            kinds_w["vllm-crash"] += 1
            kinds_s["vllm-crash"] += 1
            continue
        kw = _kind(got_w, want, "none", controls, got_s, expected, False, text)
        ks = _kind(got_s, want, "none", controls, got_w, expected, True, text)
        kinds_w[kw] += 1
        kinds_s[ks] += 1
        if "unexplained" in (kw, ks):
            unexplained.append(("vllm-test", text, got_w, got_s, want))
    _report(f"{name} vs thinkgate_{name} vllm-tests", kinds_w, kinds_s)
    assert not unexplained, "\n".join(f"{c}: {t!r}\n  vLLM whole {w}\n  vLLM stream {s}\n  thinkgate {o}"
                                      for c, t, w, s, o in unexplained[:4])
