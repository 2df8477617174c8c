"""The README's server-side loop with the Parser, run as a test so that it never rots: one request
answered whole, and streamed chunk by chunk, the two agreeing."""

from __future__ import annotations

import json


def test_readme_parser_loop():
    # --- README example begins ---
    from thinkgate.reasoning import load_vocabulary
    from thinkgate.structured_output import Parser

    vocab = load_vocabulary("qwen3_6")
    parser = Parser(vocab, reasoning="qwen3", tools="qwen3_6")  # once per model
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    prompt = vocab.encode("<|im_start|>user\nWeather in Paris?<|im_end|>\n<|im_start|>assistant\n<think>\n")
    # what the engine generated (a stand-in): thinking, a sentence, then a call in Qwen3.6's syntax
    output = vocab.encode("The user wants the weather.\n</think>\n\nLet me check.\n<tool_call>\n"
                          "<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>")

    # a non-streaming response
    req = parser.request(tools=tools, tool_choice="auto", prompt_token_ids=prompt)
    result = req.parse(output, finish_reason="stop")  # the engine's reason: "stop", "length", ...
    response = {"object": "chat.completion", "choices": [{"index": 0, "message": result.message,
                                                           "finish_reason": result.finish_reason}],
                "usage": result.usage}

    # a streaming response: one chunk per engine step that has something to say
    req = parser.request(tools=tools, tool_choice="auto", prompt_token_ids=prompt)
    chunks = []
    for step in range(0, len(output), 3):  # the engine's deltas (3 tokens per step here)
        delta = req.parse_delta(output[step:step + 3])  # or parse_delta(ids, detokenized_text)
        if delta is not None:
            chunks.append({"object": "chat.completion.chunk",
                           "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    end = req.finish("stop")  # what was held back, finish_reason, usage
    chunks.append({"object": "chat.completion.chunk",
                   "choices": [{"index": 0, "delta": end.delta or {}, "finish_reason": end.finish_reason}],
                   "usage": end.usage})
    # --- README example ends ---

    msg = response["choices"][0]["message"]
    assert msg["reasoning"] == "The user wants the weather.\n"
    assert msg["content"] == "Let me check."
    [call] = msg["tool_calls"]
    assert call["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert response["choices"][0]["finish_reason"] == "tool_calls"
    assert response["usage"]["completion_tokens"] == len(output)
    assert response["usage"]["completion_tokens_details"]["reasoning_tokens"] == \
        len(vocab.encode("The user wants the weather.\n"))
    deltas = [c["choices"][0]["delta"] for c in chunks]
    assert "".join(d.get("reasoning", "") for d in deltas) == msg["reasoning"]
    assert "".join(d.get("content", "") for d in deltas) == msg["content"]
    streamed = [tc for d in deltas for tc in d.get("tool_calls", [])]
    assert [(tc["index"], tc["type"], tc["function"]) for tc in streamed] == [(0, "function", call["function"])]
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1]["usage"] == response["usage"]
    json.dumps(response), json.dumps(chunks)  # plain JSON
