"""Differential test per reasoning name: vLLM 0.34's own parser beside ``thinkgate_<name>`` (the plugin).

For each name, the same prompts (as the family's chat template writes them: thinking opened, closed,
neither), chat-template kwargs and outputs (as models write them: with and without the start marker,
whitespace and newline variants, cut before the end, empty thinking, a tool call from the thinking,
unicode; plus the inputs of vLLM's own tests/reasoning/test_<family>*.py) go through:

- vLLM's serving parser (``ParserManager.get_parser``): ``parse`` on the whole output and
  ``parse_delta`` token by token and in random chunks, as the chat server calls them (``observe`` of
  test_vllm_reasoning_parity.py);
- the engine side: ``is_reasoning_end(prompt)``; and, as vLLM's unit tests call them,
  ``is_reasoning_end(output)`` then ``extract_content_ids(output)``.

ours must be self-consistent (whole == every streaming) in every case. Every difference from vLLM is
classified by a check that recomputes ours the way vLLM differs (docs/reasoning-differences.md lists
each kind with its reason); a difference no check explains fails the test. The test prints, per
name, how many cases agree and how many differ, by kind.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

import pytest
from test_vllm_reasoning_parity import Obs, explain, observe
from vocab_tokenizer import VocabTokenizer

import thinkgate.engines.vllm.reasoning_parsers as plugin
from thinkgate.reasoning import Vocabulary, load_vocabulary


def with_specials(base: Vocabulary, specials: tuple[str, ...], name: str) -> Vocabulary:
    """``base`` plus ``specials`` as new special tokens (tests/support.py's helper, which imports
    bench/, not importable in the vLLM venv's overlay)."""
    token_bytes = list(base.token_bytes)
    special_map = dict(base.special_tokens)
    for s in specials:
        if s not in base.special_tokens:
            special_map[s] = len(token_bytes)
            token_bytes.append(s.encode("utf-8"))
    added = sorted(specials, key=len, reverse=True)

    def encode(text: str) -> list[int]:
        out: list[int] = []
        i = start = 0
        while i < len(text):
            for s in added:
                if text.startswith(s, i):
                    if start < i:
                        out += base.encode(text[start:i])
                    out.append(special_map[s])
                    i = start = i + len(s)
                    break
            else:
                i += 1
        if start < len(text):
            out += base.encode(text[start:])
        return out

    return Vocabulary(name, token_bytes, special_map, base.stop_token_ids, encode=encode)


@dataclass(frozen=True)
class Spec:
    base: str
    specials: tuple[str, ...]
    user: str  # the prompt up to the assistant header
    gen: str  # the assistant header
    start: str
    end: str
    implicit: str = ""
    kwargs: tuple[dict, ...] = ({},)
    extra_outputs: tuple[str, ...] = ()  # vLLM's own test inputs for the family
    prompts: dict = field(default_factory=dict)
    typed_blocks: bool = False  # the model always writes the block kind (Inkling)
    init_kwargs: tuple = ()  # the tokenizer's init_kwargs vLLM reads (HY-V3's token_suffix)


def _outputs(s: Spec) -> list[str]:
    S, E = s.start, s.end
    out = [
        f"Let me think.{E}\n\nThe answer is 4.",
        f"{S}\nhmm{E}\n\nok",
        "never ends",
        f"{E}This is the rest",
        "",
        f"héllo 😀 wörld{E}\n\n{{\"a\": \"ü\"}}",
        f"a{E}b{E}c",
        f"reason  \n\n{E}\nans",
        f"{S}This\nThat{E}This is the rest\nThat",
        f"{S}{E}x",
        "The answer is 4.",
    ]
    if s.implicit:
        out.append(f"need a tool{s.implicit}call")
    if s.typed_blocks:  # every block of the output names its kind: thinking text comes in a thinking block
        out = [o if o.startswith(S) else S + o for o in out]
    return out + list(s.extra_outputs)


CHATML_U, CHATML_G = "<|im_start|>user\nhi<|im_end|>\n", "<|im_start|>assistant\n"
DS_U, DS_G = "<｜User｜>hi", "<｜Assistant｜>"
ON_OFF = ({}, {"enable_thinking": True}, {"enable_thinking": False})
TH_ON_OFF = ({}, {"thinking": True}, {"thinking": False})
XTML_OPEN, XTML_CLOSE = "<|open|>think<|sep|>", "<|close|>think<|sep|>"
PLAMO_OPEN, PLAMO_CLOSE = "<|plamo:begin_think:plamo|>", "<|plamo:end_think:plamo|>"
HY = ":6124c78e"

SPECS: dict[str, Spec] = {
    "deepseek_v41": Spec("deepseek_v4", (), DS_U, DS_G, "<think>", "</think>", kwargs=TH_ON_OFF),
    "poolside_v1": Spec("qwen3_6", ("<assistant>", "<user>"), "<user>hi", "<assistant>", "<think>", "</think>",
                        kwargs=TH_ON_OFF),
    "ling3": Spec("qwen3_6", ("<|user|>", "<|assistant|>", "<|system|>", "<|observation|>"), "<|user|>\nhi",
                  "<|assistant|>", "<think>", "</think>", "<tool_call>", kwargs=ON_OFF),
    "granite_thinking_parser": Spec("qwen3_6", ("<|start_of_role|>", "<|end_of_role|>"),
                                    "<|start_of_role|>user<|end_of_role|>hi",
                                    "<|start_of_role|>assistant<|end_of_role|>", "<think>", "</think>",
                                    "<tool_call>", kwargs=ON_OFF),
    "holo2": Spec("qwen3_6", (), CHATML_U, CHATML_G, "<think>", "</think>", kwargs=TH_ON_OFF),
    "hy_v3": Spec("tekken", (f"<think{HY}>", f"</think{HY}>", f"<tool_calls{HY}>"), "hi", "<|assistant|>",
                  f"<think{HY}>", f"</think{HY}>",
                  kwargs=({}, {"reasoning_effort": "high"}, {"reasoning_effort": "no_think"}),
                  init_kwargs=(("token_suffix", HY),)),
    "hy_v4": Spec("tekken", (f"<think{HY}>", f"</think{HY}>", f"<tool_calls{HY}>"), "hi", "<|assistant|>",
                  f"<think{HY}>", f"</think{HY}>",
                  kwargs=({}, {"reasoning_effort": "high"}, {"reasoning_effort": "no_think"})),
    "kimi_k3": Spec("qwen3_6", ("<|open|>", "<|close|>", "<|sep|>"), "<|open|>user<|sep|>hi<|close|>user<|sep|>",
                    "<|open|>assistant<|sep|>", XTML_OPEN, XTML_CLOSE, kwargs=TH_ON_OFF,
                    extra_outputs=(f"r{XTML_CLOSE}<|open|>response<|sep|>Hi!<|close|>response<|sep|>"
                                   "<|close|>message<|sep|>", "<|open|>response<|sep|>direct<|close|>response<|sep|>")),
    "k2_horizon": Spec("qwen3_6", ("<ifm|think>", "</ifm|think>", "<ifm|think_fast>", "</ifm|think_fast>",
                                   "<ifm|think_faster>", "</ifm|think_faster>", "<ifm|tool_calls>"),
                       "hi", "<|assistant|>", "<ifm|think>", "</ifm|think>", "<ifm|tool_calls>"),
    "minicpmv": Spec("qwen3_6", (), CHATML_U, CHATML_G, "<think>", "</think>", "<tool_call>", kwargs=ON_OFF),
    "minimax_m2_append_think": Spec("qwen3_6", ("]~b]", "[e~[", "<minimax:tool_call>"), "]~b]user\nhi[e~[\n",
                                    "]~b]ai\n", "<think>", "</think>"),
    "minimax_m3": Spec("qwen3_6", ("<mm:think>", "</mm:think>", "]~b]", "[e~["), "]~b]user\nhi[e~[\n", "]~b]ai\n",
                       "<mm:think>", "</mm:think>", kwargs=({}, {"thinking_mode": "enabled"})),
    "plamo3": Spec("qwen3_6", ("<|plamo:begin_", "<|plamo:end_", ":plamo|>", "<|plamo:tag|>"), "user: hi",
                   "<|plamo:bos|>", PLAMO_OPEN, PLAMO_CLOSE, kwargs=({}, {"enable_thinking": False})),
    "step5": Spec("deepseek_v4", (), DS_U, DS_G, "<think>", "</think>"),
    "ripple": Spec("qwen3_6", (), CHATML_U, CHATML_G, "<think>\n", "\n</think>\n", "<tool_call>"),
    "inkling": Spec("qwen3_6", ("<|message_model|>", "<|content_text|>", "<|content_thinking|>",
                                "<|content_invoke_tool_json|>", "<|content_invoke_tool_text|>",
                                "<|content_tool_error|>", "<|content_model_end_sampling|>", "<|end_message|>",
                                "<|message_user|>"),
                    "<|message_user|><|content_text|>hi<|end_message|>", "<|message_model|>",
                    "<|content_thinking|>", "<|end_message|><|message_model|><|content_text|>",
                    "<|content_invoke_tool_json|>", typed_blocks=True),
    "zaya": Spec("qwen3_6", ("<zyphra_tool_call>", "</zyphra_tool_call>"), CHATML_U, CHATML_G, "<think>", "</think>",
                 "<zyphra_tool_call>", kwargs=ON_OFF),
}


@lru_cache(maxsize=None)
def _vocab(name: str) -> tuple[VocabTokenizer, Vocabulary]:
    s = SPECS[name]
    base = load_vocabulary(s.base)
    v = with_specials(base, s.specials, f"{s.base}+{name}") if s.specials else base
    tok = VocabTokenizer(v)
    tok.init_kwargs = dict(s.init_kwargs)
    return tok, v


def _prompts(s: Spec) -> dict[str, str]:
    return {"bare": s.user + s.gen, "open": s.user + s.gen + s.start, "closed": s.user + s.gen + s.start + s.end}


_WRAPPERS = ("<|open|>response<|sep|>", "<|close|>response<|sep|>", "<|close|>message<|sep|>")
_THINK_BLOCK = re.compile(r"<think>.*?</think>", re.S)


def _unwrap(c):
    for w in _WRAPPERS:
        c = c.replace(w, "")
    return c or None


_NORMALIZERS = (  # (kind, what vLLM does to the same split) -- docs/reasoning-differences.md
    ("reasoning-trailing-ws", lambda r, c: (r.rstrip() if r is not None else r, c)),
    ("content-leading-newline", lambda r, c: (r, (c.lstrip("\n") or None) if c is not None else c)),
    ("content-wrapper", lambda r, c: (r, _unwrap(c) if c is not None else c)),
    ("thinking-off-discards-reasoning", lambda r, c: (None, (_THINK_BLOCK.sub("", c) or None) if c else c)),
    ("empty-reasoning", lambda r, c: (r or None, c)),
)


def _kinds_for(name: str, v: Obs, o: Obs, variants, markers, starts, extra_implicit: bool) -> str | None:
    """The explained kind of a serving-level difference: vLLM's own inconsistency first; then ours, or
    ours computed as vLLM decides the state (``variants``: without the prompt, thinking on), under
    vLLM's presentation choices (a combination of ``_NORMALIZERS``, each of which must change the
    answer; ``empty-reasoning`` applies to both sides); then ``explain``."""
    from itertools import combinations

    if not v.consistent:
        return "vllm-inconsistent"
    for vlabel, get in (("", lambda: o), *variants):
        base = get().whole
        for k in range(1, len(_NORMALIZERS) + 1):
            for combo in combinations(_NORMALIZERS, k):
                ours, theirs, changed = base, v.whole, True
                for label, f in combo:
                    new = f(*ours)
                    if label == "empty-reasoning":  # symmetric: either side may hold the ''
                        new_theirs = f(*theirs)
                        changed = changed and (new != ours or new_theirs != theirs)
                        theirs = new_theirs
                    else:
                        changed = changed and new != ours
                    ours = new
                if changed and ours == theirs:
                    return "+".join([vlabel] * bool(vlabel) + [label for label, _ in combo])
    return explain(v, o, variants, markers, starts, extra_implicit)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_differential_against_vllm(name, capsys):
    from vllm.reasoning import ReasoningParserManager

    s = SPECS[name]
    tok, vocab = _vocab(name)
    ours_name = plugin.vllm_name(name)
    ours_engine = plugin.REGISTERED[ours_name](tok)
    parser = ours_engine.parser
    theirs_cls = ReasoningParserManager.get_reasoning_parser(name)
    markers = sorted({s.start, s.end, *(m for m in (s.start.strip(), s.end.strip()))}, key=len, reverse=True)
    kinds: Counter[str] = Counter()
    unexplained, ours_inconsistent, n, agree = [], [], 0, 0
    for pname, ptext in _prompts(s).items():
        prompt = vocab.encode(ptext)
        for kw in s.kwargs:
            for i, out in enumerate(_outputs(s)):
                n += 1
                ids = vocab.encode(out)
                o = observe(tok, vocab, ours_name, prompt, ids, kw, seed=i)
                v = observe(tok, vocab, name, prompt, ids, kw, seed=i)
                where = f"{pname} {kw} {out!r}"
                if not all(_norm(x) == _norm(o.whole) for x in o.streamed):  # '' whole = no delta streamed
                    ours_inconsistent.append(f"{where}: whole {o.whole} streamed {o.streamed}")
                # the engine side as vLLM's unit tests call it: is_reasoning_end(output), then the content ids
                t = theirs_cls(tok, chat_template_kwargs=kw)
                e = plugin.REGISTERED[ours_name](tok, chat_template_kwargs=kw)
                e.set_prompt_token_ids(prompt)
                t_end, o_end = t.is_reasoning_end(ids), e.is_reasoning_end(ids)
                t_ids, o_ids = t.extract_content_ids(list(ids)), e.extract_content_ids(list(ids))
                engine_same = t_end == o_end and t_ids == o_ids
                if t_end != o_end:
                    k = _end_kind(s, parser, ids, kw, t_end, theirs_cls(tok, chat_template_kwargs=kw).is_reasoning_end([]))
                    if k is None:
                        unexplained.append(f"{where}: is_reasoning_end(output) vllm {t_end} ours {o_end}")
                    kinds[f"output-end:{k}"] += 1
                assert o_ids == parser.split(ids, prompt, kw).content_ids, where  # is_reasoning_end changed nothing
                if t_ids != o_ids:
                    k = _ids_kind(parser, prompt, ids, kw, t_ids)
                    if k is None:
                        unexplained.append(f"{where}: extract_content_ids vllm {t_ids} ours {o_ids}")
                    kinds[f"content-ids:{k}"] += 1
                if (o.whole, o.ended_at_prompt) == (v.whole, v.ended_at_prompt) and v.consistent:
                    agree += engine_same
                    continue
                variants = (
                    ("prompt", lambda: observe(tok, vocab, ours_name, [], ids, kw, seed=i)),
                    ("default", lambda: observe(tok, vocab, ours_name, prompt, ids,
                                                {**kw, **_on(parser)}, seed=i)),
                )
                kind = _kinds_for(name, v, o, variants, markers, [s.start], bool(s.implicit and s.implicit in out))
                if kind is None:
                    unexplained.append(f"{where}: vllm {v} ours {o}")
                else:
                    kinds[kind] += 1
    with capsys.disabled():  # a case agrees when the serving answers and the engine calls all agree
        print(f"\n[{name}] {n} cases: agree {agree}, differ {n - agree}; differences by kind: " + ", ".join(
            f"{k} {c}" for k, c in sorted(kinds.items())))
    assert not ours_inconsistent, ours_inconsistent
    assert not unexplained, "\n".join(unexplained)


def _off(parser) -> dict:
    keys = getattr(type(parser), "thinking_kwargs", ())
    return {keys[0]: False} if keys else {}


def _norm(msg) -> tuple:
    return tuple(x or None for x in msg)


def _on(parser) -> dict:
    keys = getattr(type(parser), "thinking_kwargs", ())
    return {keys[0]: True} if keys else {}


def _end_kind(spec, parser, ids, kw, theirs: bool, theirs_empty: bool) -> str | None:
    """Why vLLM's ``is_reasoning_end(output)`` differs from ours on the same ids (read as a turn's
    start). None: unexplained."""
    if theirs and theirs_empty and not parser.is_reasoning_end([], kw):
        return "vllm-never-waits"  # vLLM's gate says ended even for an empty prompt (ripple)
    end = parser.find_reasoning_end(ids)
    if not theirs and end is not None and (
            end.is_content or not parser.vocabulary.decode(ids[:end.offset + 1]).endswith(spec.end)):
        return "end-vllm-does-not-know"  # an implicit end / answer channel ended ours; vLLM's gate ignores it
    for other in ({}, {**kw, **_on(parser)}, {**kw, **_off(parser)}):
        if parser.is_reasoning_end(ids, other) == theirs:
            return "kwargs-or-default"
    return None


def _ids_kind(parser, prompt, ids, kw, theirs) -> str | None:
    """Why vLLM's ``extract_content_ids(output)`` differs from the exact split. None: unexplained."""
    split = parser.split(ids, prompt, kw)
    ids = list(ids)
    if split.ended_before:
        return "prompt-or-kwargs"  # ours starts from the prompt's / kwargs' state: all ids are content
    if theirs == ids:
        return "vllm-all-ids"
    if split.end is not None and split.end.is_content and split.end.offset == 0:
        return "model-skipped-thinking"  # the first token started the content; vLLM's id split reads on  # vLLM reads the request as not thinking (kwargs/default) or finds no id end
    if split.end is not None and not split.end.is_content:
        end_id = ids[split.end.offset]
        last = max(i for i, t in enumerate(ids) if t == end_id)
        if theirs == ids[last + 1:]:
            return "vllm-last-end"  # vLLM's engine parsers take the content after the last end marker
    if split.end is not None and theirs == []:
        return "vllm-no-end"  # an end vLLM's token split does not know (an answer channel, a tool block)
    return None


# --- Muse (muse, musespark, muse_glimmer): channel messages, no start / end pair. The same observation, its own
# prompts (the generation prompt, a prefilled reasoning body, a prefilled answer, an earlier turn with a call) and
# outputs (vLLM's own Muse tests' and what models write: reasoning then an answer or a call, a body left without
# <|eom|>, commentary, a bare message, cut short, unicode). The kinds of difference (docs/reasoning-differences.md):
# - vllm-inconsistent: vLLM's whole and streamed answers differ;
# - prompt: vLLM's text split ignores the prompt; ours starts inside the prefilled body / answer it opened
#   (checked: ours without the prompt equals vLLM's);
# - tool-channel-as-content: vLLM hands a call's framed message on as content (for its tool parser); a call's
#   message is in neither here (the muse tool format reads calls from the whole output);
# - glimmer-bare-message: vLLM's muse_glimmer reasoning parser reads no message without ``to=``; its tool parser and
#   ours read it as the answer;
# and on the engine side (is_reasoning_end(output), extract_content_ids(output), as vLLM's unit tests call them):
# - vllm-no-content-ids: vLLM's Muse parsers return no content ids (text split only);
# - end-at-answer: ours ends at the answer's header too (the grammar of a response applies to its body); vLLM's ends
#   only at a call's;
# - vllm-any-earlier-call: vLLM ends when any message of the turn is a call; ours reads the last message.

def _muse_atem(name: str, **args: str) -> str:
    params = "".join(f'<atem:parameter name="{k}">{v}</atem:parameter>\n' for k, v in args.items())
    return f'<atem:function_calls>\n<atem:invoke name="{name}">\n{params}</atem:invoke>\n</atem:function_calls>'


MUSE_SPECIALS = ("<|start|>", "<|message|>", "<|eom|>", "<|eot|>", "<|end_of_text|>")
_MU, _MG = "<|start|>user<|message|>hi<|eot|>", "<|start|>assistant"
MUSE_PROMPTS = {
    "bare": _MU + _MG, "self": _MU + _MG + " to=self<|message|>", "user": _MU + _MG + " to=user<|message|>",
    "earlier-call": _MU + _MG + " to=get_weather<|message|>" + _muse_atem("get_weather", city="X")
    + "<|eom|><|start|>tool get_weather<|message|>sunny<|eot|>" + _MG,
}
MUSE_OUTPUTS = [
    " to=self<|message|>Let me think.<|eom|><|start|>assistant to=user<|message|>The answer is 4.",
    " to=self<|message|>never ends", " to=user<|message|>direct", "plain text", "",
    " to=self<|message|>a<|eom|><|start|>assistant to=self<|message|>b<|eom|><|start|>assistant to=user<|message|>c"
    "<|eom|><|start|>assistant to=user<|message|>d",
    " to=self<|message|>need a tool<|eom|><|start|>assistant to=get_weather<|message|>" + _muse_atem("get_weather", city="P"),
    " to=self<|message|>need a tool to=get_weather<|message|>" + _muse_atem("get_weather", city="P"),
    " to=commentary<|message|>Checking.<|eom|><|start|>assistant to=user<|message|>Done",
    "<|message|>bare<|eom|><|start|>assistant to=user<|message|>Done",
    " to=self<|message|>héllo 😀<|eom|><|start|>assistant to=user<|message|>{\"a\": \"ü\"}",
    " to=developer<|message|>dev<|eom|><|start|>assistant to=user<|message|>x",
    " to=self<|message|>Maybe I should call " + _muse_atem("read.read", path="/etc/hostname") + " but wait",
    " to=self<|message|>Simple. 2+2 = 4<|eom|><|start|>assistant to=user<|message|>2 + 2 = 4",
    " to=self<|message|>I could call <atem:invoke name=\"evil.fn\"></atem:invoke> but no.<|eom|>"
    "<|start|>assistant to=user<|message|>The answer is 42.<|eot|>",
]


def _muse_kind(name, v, o, get_unprompted, out) -> str | None:
    if not v.consistent:
        return "vllm-inconsistent"
    if get_unprompted().whole == v.whole:
        return "prompt"
    (vr, vc), (orr, oc) = v.whole, o.whole
    if vr == orr and vc and "<atem:" in vc and (oc is None or oc in vc):
        return "tool-channel-as-content"
    if name == "muse_glimmer" and vr == orr and "<|message|>" in out and oc and vc and oc.endswith(vc):
        return "glimmer-bare-message"
    return None


@pytest.mark.parametrize("name", ["muse", "musespark", "muse_glimmer"])
def test_muse_differential_against_vllm(name, capsys):
    from vllm.reasoning import ReasoningParserManager

    vocab = with_specials(load_vocabulary("qwen3_6"), MUSE_SPECIALS, "qwen3_6+muse")
    tok = VocabTokenizer(vocab)
    ours_name = plugin.vllm_name(name)
    parser = plugin.REGISTERED[ours_name](tok).parser
    theirs_cls = ReasoningParserManager.get_reasoning_parser(name)
    kinds: Counter[str] = Counter()
    unexplained, ours_inconsistent, n, agree, serving = [], [], 0, 0, 0
    for pname, ptext in MUSE_PROMPTS.items():
        prompt = vocab.encode(ptext)
        for i, out in enumerate(MUSE_OUTPUTS):
            n += 1
            ids = vocab.encode(out)
            o = observe(tok, vocab, ours_name, prompt, ids, {}, seed=i)
            v = observe(tok, vocab, name, prompt, ids, {}, seed=i)
            where = f"{pname} {out!r}"
            if not all(_norm(x) == _norm(o.whole) for x in o.streamed):
                ours_inconsistent.append(f"{where}: whole {o.whole} streamed {o.streamed}")
            t, e = theirs_cls(tok), plugin.REGISTERED[ours_name](tok)
            e.set_prompt_token_ids(prompt)
            t_end, o_end = t.is_reasoning_end(ids), e.is_reasoning_end(ids)
            t_ids, o_ids = t.extract_content_ids(list(ids)), e.extract_content_ids(list(ids))
            assert o_ids == parser.split(ids, prompt).content_ids, where
            engine_same = t_end == o_end and t_ids == o_ids
            if t_ids != o_ids:
                k = "vllm-no-content-ids" if t_ids == [] else None
                if k is None:
                    unexplained.append(f"{where}: extract_content_ids vllm {t_ids} ours {o_ids}")
                kinds[f"content-ids:{k}"] += 1
            if t_end != o_end:
                last = parser.find_reasoning_end(ids)
                k = ("end-at-answer" if o_end and not t_end and last is not None
                     else "vllm-any-earlier-call" if t_end and "<atem:" in out else None)
                if k is None:
                    unexplained.append(f"{where}: is_reasoning_end(output) vllm {t_end} ours {o_end}")
                kinds[f"output-end:{k}"] += 1
            if o.whole == v.whole and v.consistent and o.ended_at_prompt == v.ended_at_prompt:
                agree += engine_same
                serving += 1
                continue
            kind = _muse_kind(name, v, o, lambda: observe(tok, vocab, ours_name, [], ids, {}, seed=i), out)
            if kind is None:
                unexplained.append(f"{where}: vllm {v} ours {o}")
            else:
                kinds[kind] += 1
    with capsys.disabled():
        print(f"\n[{name}] {n} cases: agree {agree} (the serving answers alone: {serving}), differ {n - agree}; "
              "differences by kind: " + ", ".join(
            f"{k} {c}" for k, c in sorted(kinds.items())))
    assert not ours_inconsistent, ours_inconsistent
    assert not unexplained, "\n".join(unexplained)
