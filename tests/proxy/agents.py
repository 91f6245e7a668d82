"""Agent loops driven by the official SDKs, pointed at a base URL (the proxy, in the tests).

Each loop starts from a task, asks the model, runs the one tool call it answers with (a shell
command whose output is a few hundred tokens of lines) and sends the grown history again, for
``steps`` steps. The history is the client's own; the upstream sees what the proxy sends.

The history goes in ``extra_body``: the SDKs re-type every message of a request's typed
parameters in Python on every call (quadratic over a long loop, a second a step at 200 items),
while the request they send and the responses and streams they read are the same either way.
"""

from __future__ import annotations

import json
from typing import Any, Final

import anthropic
import openai

KEY: Final = "sk-test-0123456789abcdef-SECRET"
SYSTEM: Final = "You are a careful coding agent. Run one command at a time."
ANTHROPIC_TOOLS: Final = [
    {
        "name": "sh",
        "description": "Run a shell command and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    }
]
CHAT_TOOLS: Final = [
    {
        "type": "function",
        "function": {
            "name": "sh",
            "description": "Run a shell command and return its output.",
            "parameters": ANTHROPIC_TOOLS[0]["input_schema"],
        },
    }
]
RESPONSES_TOOLS: Final = [
    {
        "type": "function",
        "name": "sh",
        "description": "Run a shell command and return its output.",
        "parameters": ANTHROPIC_TOOLS[0]["input_schema"],
    }
]


def output(task: str, step: int, lines: int = 25) -> str:
    """What the tool printed at ``step``: a few hundred tokens, different every step."""
    return f"$ step {step} of {task}\n" + "".join(
        f"line {k}: checked module_{step}_{k}.py, {k * step % 97} warnings\n" for k in range(lines)
    )


def anthropic_client(base_url: str, **options: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(api_key=KEY, base_url=base_url, max_retries=0, **options)


def openai_client(base_url: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(api_key=KEY, base_url=f"{base_url}/v1", max_retries=0, **options)


def anthropic_step(
    client: anthropic.Anthropic, history: list[dict[str, Any]], *, stream: bool, **extra: Any
) -> dict[str, Any]:
    """Send the history once; return the assistant message to append."""
    request: dict[str, Any] = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": SYSTEM,
        "tools": ANTHROPIC_TOOLS,
        "messages": [],
        "extra_body": {"messages": history},
        **extra,
    }
    if stream:
        with client.messages.stream(**request) as events:
            message = events.get_final_message()
    else:
        message = client.messages.create(**request)
    content = [block.model_dump(mode="json", exclude_none=True) for block in message.content]
    return {"role": "assistant", "content": content}


def anthropic_loop(
    client: anthropic.Anthropic, task: str, steps: int, *, stream: bool
) -> list[dict[str, Any]]:
    """Run the loop; return the client's history at the end."""
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for step in range(steps):
        reply = anthropic_step(client, history, stream=stream)
        use = next(block for block in reply["content"] if block["type"] == "tool_use")
        history.append(reply)
        result = {"type": "tool_result", "tool_use_id": use["id"], "content": output(task, step)}
        history.append({"role": "user", "content": [result]})
    return history


def chat_step(
    client: openai.OpenAI, history: list[dict[str, Any]], *, stream: bool
) -> dict[str, Any]:
    """Send the history once; return the assistant message to append."""
    body = {"messages": [{"role": "system", "content": SYSTEM}, *history]}
    tools: Any = CHAT_TOOLS
    if not stream:
        completion = client.chat.completions.create(
            model="gpt-4o", messages=[], tools=tools, max_completion_tokens=1024, extra_body=body
        )
        message = completion.choices[0].message
        calls = [call.model_dump(mode="json") for call in message.tool_calls or []]
        return {"role": "assistant", "content": message.content, "tool_calls": calls}
    chunks = client.chat.completions.create(
        model="gpt-4o",
        messages=[],
        tools=tools,
        max_completion_tokens=1024,
        extra_body=body,
        stream=True,
        stream_options={"include_usage": True},
    )
    call: dict[str, Any] = {"type": "function", "function": {"name": "", "arguments": ""}}
    for chunk in chunks:
        for choice in chunk.choices:
            for delta in choice.delta.tool_calls or []:
                if delta.id:
                    call["id"] = delta.id
                if delta.function is not None:
                    call["function"]["name"] += delta.function.name or ""
                    call["function"]["arguments"] += delta.function.arguments or ""
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def chat_loop(
    client: openai.OpenAI, task: str, steps: int, *, stream: bool
) -> list[dict[str, Any]]:
    """Run the loop; return the client's history at the end."""
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for step in range(steps):
        reply = chat_step(client, history, stream=stream)
        history.append(reply)
        history.append(
            {
                "role": "tool",
                "tool_call_id": reply["tool_calls"][0]["id"],
                "content": output(task, step),
            }
        )
    return history


def responses_step(
    client: openai.OpenAI, history: list[dict[str, Any]], *, stream: bool
) -> list[dict[str, Any]]:
    """Send the history once; return the output items to append."""
    tools: Any = RESPONSES_TOOLS
    body = {"input": history}
    if not stream:
        response = client.responses.create(
            model="gpt-5", instructions=SYSTEM, tools=tools, store=False, extra_body=body
        )
    else:
        events = client.responses.create(
            model="gpt-5", instructions=SYSTEM, tools=tools, store=False, extra_body=body,
            stream=True,
        )  # fmt: skip
        completed = [event for event in events if event.type == "response.completed"]
        response = completed[-1].response
    return [item.model_dump(mode="json", exclude_none=True) for item in response.output]


def responses_loop(
    client: openai.OpenAI, task: str, steps: int, *, stream: bool
) -> list[dict[str, Any]]:
    """Run the loop; return the client's history at the end."""
    history: list[dict[str, Any]] = [{"role": "user", "content": task}]
    for step in range(steps):
        items = responses_step(client, history, stream=stream)
        history.extend(items)
        call = next(item for item in items if item["type"] == "function_call")
        history.append(
            {
                "type": "function_call_output",
                "call_id": call["call_id"],
                "output": output(task, step),
            }
        )
    return history


def arguments_of(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as data (the tests read the command)."""
    data = json.loads(call["function"]["arguments"])
    assert isinstance(data, dict)
    return data
