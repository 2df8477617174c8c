"""The per-name differential: vLLM 0.34's tool parser and thinkgate's ``thinkgate_<name>`` on the same outputs.

A registry of cases per vLLM tool-parser name (:data:`CASES`, filled with :func:`add`): each case is a
model output (the text after the reasoning), where it comes from (``template``: the family's chat template
writing calls, ``tests/template_render.py``; ``variation:<kind>``: what models write beside the template;
``vllm-test:<test>``: an input of vLLM's own ``tests/tool_parsers/test_*.py``), and the request's tools
(``None``: a request that declares none, as vLLM's tests build it; ``request_none``: no request at all).
A family plugs in by adding cases for its names (``add("name", Case(...), ...)``); a name thinkgate does
not serve yet is skipped and counted.

:func:`run_case` runs both parsers through vLLM's ``ToolParser`` API, as vLLM's serving layer and its unit
tests call it: whole (``extract_tool_calls``), streamed with token-id deltas (one token per delta, text from
an incremental detokenizer), and streamed with text-only deltas (``delta_token_ids`` empty, the text one
token's worth at a time, as vLLM's tests feed them). Each answer is (content, calls); :func:`classify`
names the kind of every difference (``test_vllm_tool_differential.py`` lists the kinds and fails on an
unexplained one). A helper module, not a test.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Answer", "Case", "CASES", "ELSEWHERE", "add", "run_case", "served_format", "classify"]


@dataclass(frozen=True)
class Case:
    text: str
    origin: str
    tools: tuple[dict[str, Any], ...] | None = None
    request_none: bool = False


CASES: dict[str, list[Case]] = {}
ELSEWHERE: dict[str, str] = {
    # vLLM name -> where thinkgate's answer is compared with vLLM's instead: vLLM 0.34 serves these names only
    # as its unified parser (their ToolParser selects it and extracts nothing), so the ToolParser API this
    # harness drives has nothing to compare
    "hf": "test_vllm_response_template.py (vLLM's ResponseTemplateParser)",
    "beam": "test_vllm_response_template.py (vLLM's BeamParser)",
    # the xml_a names: vLLM's own test outputs side by side through the serving Parser in
    # test_vllm_diff_xml_a.py, the templates' outputs in test_vllm_tool_parity.py
    **{n: "test_vllm_diff_xml_a.py (vLLM's own test outputs) and test_vllm_tool_parity.py (the template's)"
       for n in ("ernie45", "hunyuan_a13b", "hy_v3", "hy_v4", "longcat", "mimo", "minicpm5", "seed_oss", "step3",
                 "step3p5", "step5", "zaya_xml")},
    "zaya": "test_vllm_tool_parity.py (the template's outputs; vLLM's own tests are zaya_xml's)",
}
GAPS: dict[str, str] = {
    # vLLM name -> the layout of vLLM's own tests that thinkgate does not read yet (a name listed here makes those
    # cases "thinkgate-misses-calls"; give it a row in docs/vllm_tool_differences.md). None now: deepseek_v41's
    # block under V4's name in V4.1's spacing (<｜DSML｜ tool_calls>) is read (CallFormat.alt_sections).
}


def add(name: str, *cases: Case) -> None:
    """Register cases for vLLM tool-parser ``name``."""
    CASES.setdefault(name, []).extend(cases)


@dataclass(frozen=True)
class Answer:
    content: str | None
    calls: tuple[tuple[str, Any], ...]
    """(name, arguments parsed as JSON, or the text when it is not JSON)"""
    raw_args: tuple[str, ...] = field(default=(), compare=False)
    error: str | None = field(default=None, compare=False)


def _args(a: str | None) -> Any:
    try:
        return json.loads(a or "")
    except ValueError:
        return a


def _norm(content: str | None) -> str | None:
    return content if content and content.strip() else None


def served_format(name: str) -> str | None:
    """The thinkgate format ``thinkgate_<name>`` serves, or None."""
    from thinkgate.structured_output.tools import get_tool_format, list_tool_formats

    return get_tool_format(name).name if name in list_tool_formats(aliases=True) else None


def _request(case: Case) -> Any:
    if case.request_none:
        return None
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    kw: dict[str, Any] = {"tools": list(case.tools), "tool_choice": "auto"} if case.tools else {}
    return ChatCompletionRequest(messages=[{"role": "user", "content": "hi"}], model="m", **kw)


def whole(parser: Any, case: Case) -> Answer:
    try:
        info = parser.extract_tool_calls(case.text, _request(case))
    except Exception as e:  # noqa: BLE001  (a parser that raises is an answer of its own)
        return Answer(None, (), error=f"{type(e).__name__}: {e}")
    calls = tuple((c.function.name, _args(c.function.arguments)) for c in info.tool_calls or ())
    return Answer(_norm(info.content), calls, tuple(c.function.arguments for c in info.tool_calls or ()))


def streamed(parser: Any, case: Case, ids: list[int], texts: list[str], with_ids: bool) -> Answer:
    """One delta per token (``texts``: each token's text from an incremental detokenizer); the deltas
    merged as a client merges them (name from a call's first delta, arguments appended)."""
    request = _request(case)
    prev_text, prev_ids = "", []
    content: list[str] = []
    calls: dict[int, list[str]] = {}
    try:
        deltas = []
        for tid, t in zip(ids, texts):
            cur_text = prev_text + t
            cur_ids = prev_ids + [tid] if with_ids else []
            deltas.append(parser.extract_tool_calls_streaming(
                previous_text=prev_text, current_text=cur_text, delta_text=t,
                previous_token_ids=prev_ids, current_token_ids=cur_ids,
                delta_token_ids=[tid] if with_ids else [], request=request))
            prev_text, prev_ids = cur_text, cur_ids
        finish = getattr(parser, "finish_streaming", None)  # vLLM's 0.34 hook, not every parser has it
        if callable(finish):
            deltas.append(finish())
    except Exception as e:  # noqa: BLE001
        return Answer(None, (), error=f"{type(e).__name__}: {e}")
    for d in deltas:
        if d is None:
            continue
        content.append(d.content or "")
        for tc in d.tool_calls or ():
            call = calls.setdefault(tc.index, ["", ""])
            if tc.function is not None:
                call[0] = call[0] or (tc.function.name or "")
                call[1] += tc.function.arguments or ""
    order = sorted(calls)
    return Answer(_norm("".join(content)), tuple((calls[i][0], _args(calls[i][1])) for i in order),
                  tuple(calls[i][1] for i in order))


def run_case(name: str, case: Case, tokenizer: Any, vocab: Any) -> dict[str, tuple[Answer, Answer]]:
    """path -> (vLLM's answer, thinkgate's answer) for the paths ``whole``, ``ids`` and ``text``."""
    import codecs

    from vllm.tool_parsers import ToolParserManager

    import thinkgate.engines.vllm.tool_parsers  # noqa: F401  (registers thinkgate_<name>)

    ids = vocab.encode(case.text)
    dec = codecs.getincrementaldecoder("utf-8")("replace")
    texts = [dec.decode(vocab.decode_bytes([t])) for t in ids]
    out = {}
    for path in ("whole", "ids", "text"):
        pair = []
        for cls_name in (name, "thinkgate_" + name):
            cls = ToolParserManager.get_tool_parser(cls_name)
            tools = None if case.request_none else _request(case) and _request(case).tools
            parser = cls(tokenizer, tools)
            if path == "whole":
                pair.append(whole(parser, case))
            else:
                pair.append(streamed(parser, case, ids, texts, with_ids=path == "ids"))
        out[path] = (pair[0], pair[1])
    return out


def _ends_with_call_end(name: str, text: str) -> bool:
    """Whether ``text`` ends with the closing literal of the format's calls (its section's, if it has one)."""
    from thinkgate.structured_output.tools import get_tool_format

    fmt = get_tool_format(name)
    fmt = getattr(fmt, "calls", fmt)  # Kimi K3's channels: the calls' own format
    end = getattr(fmt, "section", None)
    end = end[1] if end else getattr(fmt, "call_end", "")
    return not end.strip() or text.rstrip().endswith(end.strip())


_MARKERS = re.compile(r"<｜[^｜<>]*｜>|<\|[^|<>]*\|>")
_XTML_WRAPPERS = re.compile(r"<\|(?:open|close)\|>(?:response|message)<\|sep\|>")  # Kimi K3's channel wrappers


def _ws(s: str | None) -> str:
    return "".join((s or "").split())


def _loosely_equal(theirs: Any, ours: Any) -> bool:
    """``theirs`` is ``ours`` with some values left as the text the model wrote (``"3"`` for 3, ``"true"``,
    ``"None"``, the JSON text of an object)."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        return theirs.keys() == ours.keys() and all(_loosely_equal(theirs[k], ours[k]) for k in ours)
    if isinstance(theirs, list) and isinstance(ours, list):
        return len(theirs) == len(ours) and all(_loosely_equal(a, b) for a, b in zip(theirs, ours))
    if isinstance(theirs, str) and not isinstance(ours, str):
        return _args(theirs) == ours or theirs in (json.dumps(ours), str(ours))
    return theirs == ours


_M3_NS = re.escape("]<]minimax[>[")
_M3_REPEATED = re.compile(_M3_NS + r"</([^<>]+)>" + _M3_NS + r"<\1>")


def _repeated_element(text: str) -> bool:
    """MiniMax M3: an element followed by one of the same name, not a list's ``<item>`` (``...</tag>NS<tag>``):
    an object's key written twice."""
    return any(m.group(1) != "item" for m in _M3_REPEATED.finditer(text))


def _items_as_lists(v: Any) -> Any:
    """``v`` with every object whose one key is ``item`` as the list of its values (vLLM's reading of the
    ``<item>`` elements of a list whose schema does not say array)."""
    if isinstance(v, dict):
        if list(v) == ["item"]:
            x = v["item"]
            return [_items_as_lists(y) for y in x] if isinstance(x, list) else [_items_as_lists(x)]
        return {k: _items_as_lists(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_items_as_lists(x) for x in v]
    return v


def _calls_kind(name: str, theirs: Answer, ours: Answer, case: Case, theirs_whole: Answer) -> str:
    kind = case.origin.split(":")[-1]
    if theirs.calls and not ours.calls and _repeated_element(case.text):
        return "repeated-element"  # vLLM collects the values into a list; thinkgate refuses a key written twice
    if theirs.calls and not ours.calls and kind == "malformed":
        return "malformed-block"  # vLLM keeps what reads before the fault (drops the rest); thinkgate: content
    if kind == "mismatched-close" and len(theirs.calls) == len(ours.calls):
        return "vllm-stops-at-a-mismatched-close"
    if not theirs.calls and ours.calls and theirs_whole.calls:
        return "vllm-stream-misses-calls"
    if theirs.calls and not ours.calls and case.origin.startswith("vllm-test") and name in GAPS:
        return "thinkgate-misses-calls"  # a layout vLLM's tests read and thinkgate does not (GAPS says which)
    if len(theirs.calls) > len(ours.calls) and theirs.calls[:len(ours.calls)] == ours.calls \
            and not _ends_with_call_end(name, case.text):
        return "unterminated-call"  # the output ends inside a call: vLLM returns it, ours keeps its text
    if len(theirs.calls) > len(ours.calls) and any(not isinstance(a, dict) for _, a in theirs.calls):
        return "arguments-not-an-object"
    if not theirs.calls and ours.calls and kind in ("no-newlines", "undeclared", "whitespace", "after"):
        return "vllm-misses-calls"
    if not theirs.calls and ours.calls and any("]" in a for a in ours.raw_args):
        return "vllm-cuts-at-bracket"  # a list read up to the first "]", one inside the arguments
    diff = [(t, o) for t, o in zip(theirs.calls, ours.calls) if t != o]
    if len(theirs.calls) == len(ours.calls) and diff and all(tn == on for (tn, _), (on, _) in diff):
        if all(isinstance(ta, str) and _args(ta) == oa for (_, ta), (_, oa) in diff):
            return "vllm-double-encodes-string-arguments"
        if all(_loosely_equal(ta, oa) for (_, ta), (_, oa) in diff):
            return "vllm-values-as-strings"
        if all(_loosely_equal(_items_as_lists(ta), oa) for (_, ta), (_, oa) in diff):
            return "vllm-items-as-object"  # <item> elements of a value whose schema does not say array
        if kind == "undeclared" and all(_loosely_equal(oa, ta) for (_, ta), (_, oa) in diff):
            return "undeclared-values-as-text"  # no schema: the format's reader keeps the text (poolside_v1)
        if all(ta == "" for (_, ta), _ in diff):
            return "vllm-empty-arguments"  # vLLM's stream sends the name and no argument text
        if all(ta == {} and oa for (_, ta), (_, oa) in diff):
            return "vllm-drops-arguments"  # Inkling: vLLM's converter reads arguments under "args" only
        if kind == "after" and all(isinstance(ta, str) and ta.rstrip().endswith("Done.") for (_, ta), _ in diff):
            return "vllm-text-in-arguments"  # vLLM's stream appends the text after the call to its arguments
    return "unexplained"


def _content_kind(theirs: Answer, ours: Answer, case: Case, theirs_whole: Answer) -> str:
    kind = case.origin.split(":")[-1]
    if _ws(theirs.content) == _ws(ours.content):
        return "whitespace"
    if theirs.calls and _ws(theirs.content) and _ws(ours.content).startswith(_ws(theirs.content)):
        return "vllm-drops-text-after-calls"
    if not theirs.calls and (_ws(ours.content).startswith(_ws(theirs.content))
                             or _ws(ours.content).endswith(_ws(theirs.content))):
        return "vllm-drops-unread-block"  # vLLM drops the text of a block it could not read
    dropped = _MARKERS.sub(lambda m: "" if m.group() not in (theirs.content or "") else m.group(), ours.content or "")
    if not theirs.calls and _ws(dropped) == _ws(theirs.content):
        return "vllm-strips-markers"  # vLLM's content of a block it could not read lacks its marker tokens
    if theirs.content is None and ours.content and theirs_whole.content and theirs is not theirs_whole:
        return "vllm-stream-drops-content"
    if theirs is not theirs_whole and _ws(_XTML_WRAPPERS.sub("", theirs.content or "")) == _ws(ours.content) \
            and _ws(theirs_whole.content) == _ws(ours.content):
        return "vllm-stream-leaks-markers"  # Kimi K3: its stream sends <|close|>message<|sep|>, its whole path not
    if theirs.content is None and ours.content:
        return "vllm-drops-content"
    return "unexplained"


def classify(name: str, theirs: Answer, ours: Answer, case: Case, theirs_whole: Answer) -> str:
    """The kinds of difference between vLLM's answer and ours on one path, ``+``-joined (``theirs_whole``:
    vLLM's whole answer, to tell its stream's misses). ``same`` when they agree; a kind ``unexplained``
    when none fits."""
    if theirs.error is not None:
        return "vllm-crash"
    if theirs == ours:
        return "same"
    if case.origin.split(":")[-1] == "cut":
        # vLLM returns the cut call with partial arguments, drops the whole calls before it, or drops the
        # cut call's text
        return "cut-output"
    kinds = set()
    if theirs.calls != ours.calls:
        k = _calls_kind(name, theirs, ours, case, theirs_whole)
        if k in ("vllm-stream-misses-calls", "unterminated-call", "arguments-not-an-object", "vllm-misses-calls",
                 "vllm-cuts-at-bracket", "thinkgate-misses-calls", "repeated-element", "malformed-block"):
            return k  # the content then holds the text of the calls one side did not read
        kinds.add(k)
    if theirs.content != ours.content:
        kinds.add(_content_kind(theirs, ours, case, theirs_whole))
    return "+".join(sorted(kinds))
