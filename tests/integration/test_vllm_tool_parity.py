"""thinkgate's tool plugin beside vLLM's built-in tool parser of the same format, on the same outputs.

The outputs are those of ``test_vllm_tool_messages.py`` (the model's chat template writing the corpus's
calls after the family's thinking; some with text after the calls, a character deleted, or cut short).
Both go through vLLM's composed serving ``Parser`` with the same reasoning parser (thinkgate's, so that
only the tool parsers differ), whole (``parse``) and streamed token by token (``parse_delta``), with
``tool_choice="auto"``. thinkgate's answer is its own Parser's (``test_vllm_tool_messages.py``); every
difference of vLLM's must be one of these kinds (an unexplained one fails), and the test prints how many
cases fall in each:

- ``whitespace`` (convention): the same calls, content equal but for whitespace (vLLM keeps the newlines
  around the text that the templates write as framing; thinkgate strips them);
- ``args-text`` (convention): the same calls once each's arguments are parsed as JSON (spacing, escapes);
- ``text-after-calls`` (vLLM's bug): vLLM drops the text the model wrote after its calls;
- ``malformed`` (choice): the output was damaged (a character deleted, cut short) and a call in it is
  broken: thinkgate keeps a broken call as content (a stream cannot take back a call it sent), vLLM drops
  it, or salvages a call with broken or partial arguments;
- ``control-token-in-value`` (choice): a call whose argument holds a control token of the vocabulary (the
  corpus's ``"Crash on <tool_call> text"`` written as the token): thinkgate does not read it as a call (the
  grammar never lets a value contain a control token, and the reader reads what the grammar allows; in a
  format whose calls sit in one section, that section stays content whole); vLLM, reading text, does;
- ``schema-types`` (vLLM's bug): vLLM leaves a parameter as a JSON string where the tool's schema asks for
  an object, array, number or boolean (XML formats: thinkgate converts by the schema);
- ``vllm-misses-calls`` (vLLM's bug): one of vLLM's paths returns no call (the calls' text as content), or
  fewer calls, where its other path finds them (muse: its stream drops a later call message);
- ``text-in-arguments`` (vLLM's bug): vLLM's stream appends the text written after the last call to
  that call's arguments (which then are not JSON);
- ``content-dropped`` (vLLM's bug): vLLM's whole answer has no content where its stream and thinkgate
  have the same text;
- ``value-trim`` (vLLM's bug): vLLM trims a string value where the template writes it inline: one newline
  at each end (Seed-OSS: its Qwen3 engine's trim of Qwen3's own markup), or all surrounding whitespace
  (step3, though vLLM's later tests keep it);
- ``vllm-paths-differ`` (vLLM's bug): one of vLLM's paths (whole, stream) agrees with thinkgate and the
  other does not (hunyuan_a13b's stream garbles nested arguments; minicpm5's repeats text);
- ``empty-arguments`` (vLLM's bug): vLLM's stream sends no argument text (``""``, not ``{}``) for a call
  without parameters;
- ``call-text-in-content`` (vLLM's bug): vLLM's stream returns the call and also puts (part of) its text,
  its start marker or more, in the content;
- ``content-dropped-with-calls`` (vLLM's choice): vLLM returns no content beside the calls although the
  model wrote text (MiniCPM5's parser drops it always);
- ``vllm-crash``: vLLM's parser raised.

Also counted: ``vllm-inconsistent``, the cases where vLLM's own whole and streamed answers differ (its
bug; thinkgate's agree in every case, ``test_vllm_tool_messages.py``).
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from typing import Any

import pytest
from support import FAMILIES, TOOLS, detokenizer, vocab
from template_render import RENDERERS
from tool_serving import Message, cases, chat_request, ours, parser_cls, streamed, tokenizer, whole

import thinkgate.engines.vllm.reasoning_parsers  # noqa: F401  (registers thinkgate_<family>: the file runs alone too)

# thinkgate renderer -> vLLM 0.34's built-in tool parser of that format
BUILTIN = {
    "hermes": "hermes", "qwen3_coder": "qwen3_coder", "qwen3_5": "qwen3_xml", "qwen3_6": "qwen3_xml",
    "deepseek_v3": "deepseek_v3", "deepseek_v31": "deepseek_v31", "deepseek_v32": "deepseek_v32",
    "deepseek_v4": "deepseek_v4", "mistral": "mistral", "kimi_k2": "kimi_k2", "glm45": "glm45", "glm47": "glm47",
    "minimax_m2": "minimax_m2", "gemma4": "gemma4", "llama3_json": "llama3_json",
}
# -- xml_a: the formats and layouts of the same names in vLLM 0.34
BUILTIN.update({
    "seed_oss": "seed_oss", "zaya": "zaya", "mimo": "mimo", "longcat": "longcat", "hunyuan_a13b": "hunyuan_a13b",
    "hy_v3": "hy_v3", "hy_v4": "hy_v4", "step3": "step3", "minicpm5": "minicpm5", "step3p5": "step3p5",
})
# -- xml_b: (renderer, vLLM name); ling3 and poolside_v1 write GLM-4.7's and GLM-4.5's calls
XML_B = [("glm47", "ling3"), ("glm45", "poolside_v1"), ("deepseek_v41", "deepseek_v41"), ("dots", "dots"),
         ("ripple", "ripple"), ("plamo3", "plamo3"), ("k2_horizon", "k2_horizon"),
         ("cohere_command3", "cohere_command3"), ("cohere_command3", "cohere_command4"), ("inkling", "inkling"),
         ("minimax_m3", "minimax_m3")]
# -- Kimi K3 (vLLM composes its KimiK3Parser around its kimi_k3 tool parser)
# -- muse: Muse's call messages (vLLM's muse / musespark parser is Spark's, muse_glimmer its Glimmer profile)
MUSE = [("muse", "muse"), ("muse", "musespark"), ("muse_glimmer", "muse_glimmer")]
PAIRS: list[tuple[str, str]] = [*BUILTIN.items(), *XML_B, ("kimi_k3", "kimi_k3"), *MUSE]
VLLM_KWARGS: dict[str, dict[str, Any]] = {
    # vLLM's parsers that start in the thinking unless the template's switch says otherwise (the outputs here
    # carry no thinking: their families have no reasoning parser in thinkgate yet)
    "plamo3": {"enable_thinking": False},
}
VLLM_REASONING: dict[str, str] = {
    # vLLM's Cohere parser is one melody filter for the thinking and the calls: it takes its own reasoning parser
    "cohere_command3": "cohere_command3", "cohere_command4": "cohere_command4",
    # vLLM's Inkling parser is one state machine over the blocks, its reasoning and tool adapters two passes of it
    "inkling": "inkling",
}


def _ws(s: str | None) -> str:
    return " ".join((s or "").split())


def _args(a: str) -> Any:
    try:
        return json.loads(a)
    except ValueError:
        return a


def _loosely_equal(theirs: Any, want: Any) -> bool:
    """``theirs`` is ``want`` with some values left as the text the model wrote (a JSON string of an
    object, ``"True"`` for true, ``"640"`` for 640)."""
    if isinstance(theirs, dict) and isinstance(want, dict):
        return theirs.keys() == want.keys() and all(_loosely_equal(theirs[k], want[k]) for k in want)
    if isinstance(theirs, str) and not isinstance(want, str):
        return _args(theirs) == want or theirs in (json.dumps(want), str(want))
    return theirs == want


def _trimmed(v: Any, strip: bool) -> Any:
    if isinstance(v, dict):
        return {k: _trimmed(x, strip) for k, x in v.items()}
    if not isinstance(v, str):
        return v
    return v.strip() if strip else v.removeprefix("\n").removesuffix("\n")


def _agrees(a: Message, b: Message) -> bool:
    """The same calls (arguments as JSON values) and the same content but for whitespace."""
    return ([(n, _args(x)) for n, x in a.calls] == [(n, _args(x)) for n, x in b.calls]
            and _ws(a.content) == _ws(b.content))


def classify(got: Message, want: Message, change: str, controls: list[str], other: Message,
             lead: str = "") -> set[str]:
    """The kinds of difference between vLLM's answer ``got`` and thinkgate's ``want`` (module docstring);
    ``other``: vLLM's answer on its other path (its stream for its whole answer and back). A difference no
    other kind explains is ``vllm-paths-differ`` where vLLM's other path agrees with thinkgate."""
    kinds = _classify(got, want, change, controls, other, lead)
    if "unexplained" in kinds and _agrees(other, want):
        return (kinds - {"unexplained"}) | {"vllm-paths-differ"}
    return kinds


def _classify(got: Message, want: Message, change: str, controls: list[str], other: Message,
              lead: str = "") -> set[str]:
    if got == want:
        return {"same"}
    if change in ("delete", "cut"):
        return {"malformed"}
    kinds: set[str] = set()
    if got.calls != want.calls:
        g = [(n, _args(a)) for n, a in got.calls]
        w = [(n, _args(a)) for n, a in want.calls]
        extra = [c for c in got.calls if c not in want.calls]
        if g == w:
            kinds.add("args-text")
        elif not got.calls and other.calls:
            return {"vllm-misses-calls"}  # the content then holds the calls' text
        elif len(got.calls) < len(other.calls) and got.calls == other.calls[:len(got.calls)] \
                and [(n, _args(a)) for n, a in other.calls] == w:
            return {"vllm-misses-calls"}  # its other path reads them all (Muse: its stream loses a later call)
        elif g[:-1] == w[:-1] and len(g) == len(w) and got.calls[-1][0] == want.calls[-1][0] \
                and got.calls[-1][1].startswith(want.calls[-1][1]) and "Done." in got.calls[-1][1]:
            return {"text-in-arguments"}
        elif extra and any(any(m in a for m in controls) for _, a in got.calls):
            return {"control-token-in-value"}  # thinkgate's content then holds that call's (or section's) text
        elif [n for n, _ in g] == [n for n, _ in w] and any([a for _, a in g] == [_trimmed(a, strip) for _, a in w]
                                                             for strip in (False, True)):
            kinds.add("value-trim")
        elif [n for n, _ in g] == [n for n, _ in w] and all(ga == wa or (ga == "" and wa == {})
                                                             for (_, ga), (_, wa) in zip(g, w)):
            kinds.add("empty-arguments")
        elif len(g) == len(w) and all(gn == wn and _loosely_equal(ga, wa) for (gn, ga), (wn, wa) in zip(g, w)):
            kinds.add("schema-types")
        else:
            return kinds | {"unexplained"}
    if _ws(got.content) != _ws(want.content):
        if change == "after" and "Done." not in (got.content or "") \
                and _ws(got.content) == _ws((want.content or "").replace("Done.", "")):
            kinds.add("text-after-calls")
        elif not _ws(got.content) and _ws(other.content) == _ws(want.content):
            kinds.add("content-dropped")
        elif lead and lead in (got.content or "") and lead not in (want.content or "") and got.calls:
            kinds.add("call-text-in-content")
        elif not _ws(got.content) and got.calls:
            kinds.add("content-dropped-with-calls")
        else:
            kinds.add("unexplained")
    elif got.content != want.content:
        kinds.add("whitespace")
    return kinds


@pytest.mark.parametrize(("renderer", "builtin"), PAIRS, ids=[b if b != r else r for r, b in PAIRS])
def test_every_difference_from_vllms_builtin_is_explained(renderer: str, builtin: str, vllm_tokenizers) -> None:
    if builtin.startswith("cohere_command"):
        pytest.importorskip("cohere_melody", reason="vLLM's Cohere parsers need cohere-melody (run.sh installs it)")
    fmt = RENDERERS[renderer].format
    fam = FAMILIES[fmt]
    v = vocab(fam.vocab)
    # DeepSeek V4: vLLM's own tokenizer (its tokenizer.json); the others: the table shown as a tokenizer
    tok = vllm_tokenizers["deepseek_v4"][0] if fam.vocab == "deepseek_v4" else tokenizer(fam.vocab)
    reasoning = None if fam.parser is None else f"thinkgate_{fam.parser}"
    theirs = parser_cls(tok, builtin, VLLM_REASONING.get(builtin, reasoning))
    kwargs = {**(fam.kwargs or {}), **VLLM_KWARGS.get(builtin, {})} or None
    prompt = v.encode(fam.prompt)
    syntax = RENDERERS[renderer].write([("f", {})], "")
    controls = [m for m in v.special_tokens if len(m) > 1]  # any control token (thinkgate's grammar keeps them out of values)
    lead = syntax.lstrip()[:8]  # the start of a call's text
    kinds: Counter[str] = Counter()
    inconsistent = 0
    unexplained = []
    for text, change in cases(renderer, 10, seed=zlib.crc32(renderer.encode())):
        ids = v.encode(text)
        want = ours(renderer, ids, "auto")
        request = chat_request(TOOLS, "auto")
        try:
            got_w = whole(theirs, tok, request, prompt, ids, v.decode(ids), kwargs)
            got_s = streamed(theirs, tok, request, prompt, ids, range(len(ids)), detokenizer(v), kwargs)
        except Exception:  # noqa: BLE001  (vLLM's parser raising is a kind of its own)
            kinds["vllm-crash"] += 1
            continue
        inconsistent += got_w != got_s
        found = (classify(got_w, want, change, controls, got_s, lead)
                 | classify(got_s, want, change, controls, got_w, lead))
        kind = "+".join(sorted(found - {"same"})) or "same"
        kinds[kind] += 1
        if "unexplained" in found:
            unexplained.append((change, text, got_w, got_s, want))
    print(f"\n[{builtin} vs thinkgate_{fmt} on {fam.vocab}] {sum(kinds.values())} cases: "
          + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + f"; vLLM whole != streamed: {inconsistent}")
    assert not unexplained, "\n".join(f"{c}: {t!r}\n  vLLM whole {w}\n  vLLM stream {s}\n  thinkgate {o}"
                                      for c, t, w, s, o in unexplained[:3])
