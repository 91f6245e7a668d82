"""Conversations the command-line tests write to files: one per format, small and readable."""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

LOG = "error: cache miss on step {n}\n" * 60


def chat_messages(steps: int = 3) -> list[dict[str, Any]]:
    """An OpenAI Chat agent session: a system prompt, a task, ``steps`` tool exchanges."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a build assistant."},
        {"role": "user", "content": "Why did the build fail?"},
    ]
    for n in range(steps):
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{n}",
                        "type": "function",
                        "function": {"name": "read_log", "arguments": json.dumps({"job": n})},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": f"call_{n}", "content": LOG.format(n=n)})
    messages.append({"role": "assistant", "content": "The cache key changed."})
    messages.append({"role": "user", "content": "Fix it."})
    return messages


def anthropic_body() -> dict[str, Any]:
    """An Anthropic Messages request body with a top-level system and two tool exchanges."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Why did the build fail?"}]
    for n in range(2):
        messages.append(
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Reading the log."},
                    {"type": "tool_use", "id": f"tu_{n}", "name": "read_log", "input": {"job": n}},
                ],
            }
        )
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": f"tu_{n}", "content": LOG.format(n=n)}
                ],
            }
        )
    messages.append({"role": "assistant", "content": "The cache key changed."})
    messages.append({"role": "user", "content": "Fix it."})
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 1024,
        "system": "You are a build assistant.",
        "messages": messages,
    }


def responses_body() -> dict[str, Any]:
    """An OpenAI Responses request body: instructions and input items with function calls."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Why did the build fail?"}]
    for n in range(2):
        items.append(
            {
                "type": "function_call",
                "call_id": f"fc_{n}",
                "name": "read_log",
                "arguments": json.dumps({"job": n}),
            }
        )
        items.append({"type": "function_call_output", "call_id": f"fc_{n}", "output": LOG})
    items.append({"role": "user", "content": "Fix it."})
    return {"model": "gpt-4.1", "instructions": "You are a build assistant.", "input": items}


def write_json(path: Path, value: object) -> Path:
    """Write ``value`` as JSON to ``path`` and return the path."""
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def write_jsonl(path: Path, messages: list[dict[str, Any]]) -> Path:
    """Write one message a line to ``path`` and return the path."""
    path.write_text("".join(json.dumps(m) + "\n" for m in messages), encoding="utf-8")
    return path


def long_session(exchanges: int = 200, seed: int = 1) -> list[dict[str, Any]]:
    """A long Chat session: ``exchanges`` tool calls (2 turns each) with results of mixed sizes.

    Exchange 50's result is 125 000 tokens and exchange 120's 1 000 (4 characters a token);
    the others are 20 to 3 000 tokens, chosen by ``seed``.
    """
    sizes = random.Random(seed)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a build assistant."},
        {"role": "user", "content": "Fix the build."},
    ]
    for n in range(exchanges):
        tokens = {50: 125_000, 120: 1_000}.get(n) or sizes.choice([20, 60, 200, 800, 3000])
        call = {
            "id": f"call_{n}",
            "type": "function",
            "function": {"name": "run", "arguments": "{}"},
        }
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{n}", "content": "x" * (4 * tokens)}
        )
    return messages
