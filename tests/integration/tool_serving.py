"""Driving vLLM 0.34's serving ``Parser`` as its chat-completion server does, for the tool-plugin tests.

``ParserManager.get_parser`` composes the reasoning and tool parsers by name (the ``vllm serve`` flags);
:func:`whole` is the non-streaming path (``set_prompt_token_ids`` then ``parse``), :func:`streamed` the
streaming one (``parse_delta`` per chunk, ``finished`` on the last). Both return a :class:`Message`:
reasoning, content (None when empty or blank, as vLLM returns it) and the calls as (name, arguments),
plus, for a stream, the tool-call deltas as they came. :func:`cases` draws the outputs (the model's chat
template writing the corpus's calls after the family's thinking, some damaged), :func:`ours` is thinkgate's
own Parser's answer. A helper module, not a test.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from support import EXAMPLES, FAMILIES, request_for, stream_chunks, vocab
from template_render import RENDERERS, render
from vocab_tokenizer import VocabTokenizer


@dataclass(frozen=True)
class Message:
    reasoning: str | None
    content: str | None
    calls: tuple[tuple[str, str], ...]
    deltas: tuple[Any, ...] = field(default=(), compare=False)


def norm(text: str | None) -> str | None:
    return text if text and text.strip() else None


def parser_cls(tok: Any, tool_parser: str, reasoning_parser: str | None) -> type:
    from vllm.parser.parser_manager import ParserManager

    return ParserManager.get_parser(tool_parser_name=tool_parser, reasoning_parser_name=reasoning_parser,
                                    enable_auto_tools=True, tokenizer=tok, model_name="m")


def chat_request(tools: list[dict[str, Any]], tool_choice: Any = "auto", **kw: Any) -> Any:
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest

    return ChatCompletionRequest(messages=[{"role": "user", "content": "Weather?"}], model="m", tools=tools,
                                 tool_choice=tool_choice, **kw)


def whole(cls: type, tok: Any, request: Any, prompt: Sequence[int], ids: Sequence[int], text: str,
          kwargs: dict[str, Any] | None) -> Message:
    p = cls(tok, request.tools, chat_template_kwargs=kwargs)
    p.set_prompt_token_ids(list(prompt))
    reasoning, content, calls = p.parse(text, request, enable_auto_tools=True, model_output_token_ids=list(ids))
    return Message(norm(reasoning), norm(content), tuple((c.name, c.arguments) for c in calls or ()))


def streamed(cls: type, tok: Any, request: Any, prompt: Sequence[int], ids: Sequence[int], cuts: Sequence[int],
             detok: Any, kwargs: dict[str, Any] | None) -> Message:
    """``ids`` cut at ``cuts``; each chunk's text from ``detok`` (an incremental detokenizer). Tool-call
    deltas are merged by index, as a client does: the name and id from the first, arguments appended."""
    p = cls(tok, request.tools, chat_template_kwargs=kwargs)
    bounds = [0, *sorted({c for c in cuts if 0 < c < len(ids)}), len(ids)]
    reasoning, content, deltas = [], [], []
    calls: dict[int, list[str]] = {}
    for n, (a, b) in enumerate(zip(bounds, bounds[1:])):
        chunk = list(ids[a:b])
        d = p.parse_delta(detok(chunk), chunk, request, list(prompt), finished=n == len(bounds) - 2)
        if d is None:
            continue
        reasoning.append(d.reasoning or "")
        content.append(d.content or "")
        for tc in d.tool_calls:
            deltas.append(tc)
            if tc.index not in calls:
                assert tc.id and tc.type == "function" and tc.function and tc.function.name, \
                    f"the first delta of call {tc.index} lacks its id, type or name: {tc}"
                calls[tc.index] = [tc.function.name, ""]
            else:
                assert tc.id is None and (tc.function is None or tc.function.name is None), \
                    f"call {tc.index} named twice: {tc}"
            if tc.function is not None and tc.function.arguments:
                calls[tc.index][1] += tc.function.arguments
    assert sorted(calls) == list(range(len(calls))), f"call indices {sorted(calls)}"
    return Message(norm("".join(reasoning)), norm("".join(content)),
                   tuple((calls[i][0], calls[i][1]) for i in sorted(calls)), tuple(deltas))


_TOK: dict[str, Any] = {}
NOT_SPECIAL: dict[str, tuple[str, ...]] = {"minimax_m3": ("]<]minimax[>[", "<tool_call>", "</tool_call>")}
"""Added tokens a family's own tokenizer does not mark special. vLLM 0.34's MiniMax M3 parser: "The M3 markers
are non-special added tokens"; it matches ``]<]minimax[>[<tool_call>`` as text, with no token-id terminal,
so the tokenizer it was written for does not mark ``<tool_call>`` special either (the Qwen3.6 table under
the synthetic vocabulary does). vLLM's parser engine drops the text of every special token it has no terminal
for, so the tokenizer it gets must not list these among its special tokens (thinkgate takes every added token
as a control token either way)."""


def tokenizer(vocab_name: str) -> Any:
    if vocab_name not in _TOK:
        _TOK[vocab_name] = VocabTokenizer(vocab(vocab_name), NOT_SPECIAL.get(vocab_name, ()))
    return _TOK[vocab_name]


def cases(renderer: str, n: int, seed: int, first: str | None = None) -> list[tuple[str, str]]:
    """(output text, what was changed): ``n`` outputs drawn with ``seed`` (``first``: the first call's tool)."""
    r = RENDERERS[renderer]
    fam = FAMILIES[r.format]
    rng = random.Random(seed)
    out = []
    for i in range(n):
        names = rng.sample(sorted(EXAMPLES), 2 if r.parallel and i % 2 else 1)
        if first is not None:
            names = [first, *(x for x in names if x != first)][:len(names)]
        calls = [(name, rng.choice(EXAMPLES[name])) for name in names]
        content = rng.choice(["", "Let me check that.", "Ünïcode ✓ 北京"])
        try:
            body = render(renderer, calls, content)
        except ValueError:  # a template that writes no content beside calls (Llama 3.1)
            try:
                body = render(renderer, calls)
            except ValueError:  # a value the template cannot write (Olmo 3's quotes): another draw
                continue
        change = ["none", "none", "after", "delete", "cut"][i % 5]
        if change in ("none", "after") and any(m in json.dumps(calls, ensure_ascii=False)
                                               for m in vocab(fam.vocab).special_tokens if m):
            # a value holding a control token of the vocabulary: no grammar lets a model write it
            change = "control-token" if change == "none" else "control-token-after"
        if change in ("after", "control-token-after"):
            body += "\n\nDone."
        elif change == "delete":
            k = rng.randrange(len(body))
            body = body[:k] + body[k + 1:]
        elif change == "cut":
            body = body[:rng.randrange(len(body) // 2, len(body))]
        out.append((fam.thinking + body, change))
    return out


def ours(renderer: str, ids: list[int], tool_choice: Any, read_undeclared: bool = False) -> Message:
    """thinkgate's own Parser's answer (``read_undeclared``: as the vLLM plugin reads by default)."""
    r = request_for(renderer, FAMILIES[RENDERERS[renderer].format].parser, tool_choice=tool_choice,
                    read_undeclared=read_undeclared).parse(ids)
    return Message(norm(r.reasoning), norm(r.content), tuple((c.name, c.arguments) for c in r.tool_calls))


def ours_streamed(renderer: str, ids: Sequence[int], tool_choice: Any, cuts: Sequence[int],
                  read_undeclared: bool = False) -> Message:
    """Thinkgate's own Parser streamed with the chunks of ``cuts`` (ids only), its deltas merged as
    :func:`streamed` merges vLLM's. A constrained request (required / named) streams a call from its
    name on, so on an output its grammar would not have let through (cut, damaged) the stream keeps a
    call that the whole parse reads as content: vLLM's stream is compared with this, not with ``ours``."""
    req = request_for(renderer, FAMILIES[RENDERERS[renderer].format].parser, tool_choice=tool_choice,
                      read_undeclared=read_undeclared)
    deltas, _ = stream_chunks(req, ids, cuts, give_text=False)
    reasoning, content = [], []
    calls: dict[int, list[str]] = {}
    for d in deltas:
        if not d:
            continue
        reasoning.append(d.get("reasoning") or "")
        content.append(d.get("content") or "")
        for tc in d.get("tool_calls") or ():
            fn = tc.get("function") or {}
            call = calls.setdefault(tc["index"], [fn.get("name") or "", ""])
            call[1] += fn.get("arguments") or ""
    return Message(norm("".join(reasoning)), norm("".join(content)),
                   tuple((calls[i][0], calls[i][1]) for i in sorted(calls)))
