"""Independent oracles for the provider formats: request validators and token counters.

Written from the providers' documented rules and the pricing rules in ``docs/formats/``, without
importing the code under test. A validator returns the list of rules a request breaks (empty when
the provider would accept it); a counter prices a request the way the guides say.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Any

Encode = Callable[[str], Sequence[int]]
THINKING = ("thinking", "redacted_thinking")


# -- validators ---------------------------------------------------------------------------------


def chat_problems(messages: list[dict[str, Any]]) -> list[str]:
    """Chat Completions: known roles; tool messages answer, right after it, every call of the
    assistant message before them, each exactly once."""
    problems: list[str] = []
    if not messages:
        problems.append("no messages")
    waiting: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("system", "developer", "user", "assistant", "tool"):
            problems.append(f"{index}: role {role!r}")
        if role == "tool":
            call = message.get("tool_call_id")
            if call not in waiting:
                problems.append(f"{index}: tool message for {call!r} answers no open call")
            waiting.discard(call)
            continue
        if waiting:
            problems.append(f"{index}: calls {sorted(waiting)} left unanswered")
            waiting = set()
        if role == "assistant":
            waiting = {call["id"] for call in message.get("tool_calls") or []}
    if waiting:
        problems.append(f"end: calls {sorted(waiting)} left unanswered")
    return problems


def responses_problems(  # noqa: PLR0912 - one branch per documented rule
    items: list[dict[str, Any]], original: list[dict[str, Any]] | None = None
) -> list[str]:
    """Responses input: every output follows its call (same kind) once, every call is answered,
    a reasoning item is followed by an item, and (given the original input) by the same item it
    preceded there."""
    problems: list[str] = []
    if not items:
        problems.append("no items")
    pairs = {"function_call_output": "function_call", "custom_tool_call_output": "custom_tool_call"}
    calls: dict[str, str] = {}
    answered: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type", "message")
        if kind in ("function_call", "custom_tool_call"):
            if item["call_id"] in calls:
                problems.append(f"{index}: call id {item['call_id']} twice")
            calls[item["call_id"]] = kind
        elif kind in pairs:
            call = item["call_id"]
            if calls.get(call) != pairs[kind] or call in answered:
                problems.append(f"{index}: output for {call!r} has no earlier call")
            answered.add(call)
        elif kind == "reasoning":
            if index + 1 >= len(items) or items[index + 1].get("type") in pairs:
                problems.append(f"{index}: reasoning not followed by its item")
        elif kind == "message":
            if item.get("role") not in ("system", "developer", "user", "assistant"):
                problems.append(f"{index}: role {item.get('role')!r}")
        else:
            problems.append(f"{index}: unknown type {kind!r}")
    problems.extend(f"call {call!r} unanswered" for call in calls if call not in answered)
    if original is not None:
        follower = {
            id(item): original[i + 1] if i + 1 < len(original) else None
            for i, item in enumerate(original)
            if item.get("type") == "reasoning"
        }
        for index, item in enumerate(items):
            if id(item) in follower:
                after = items[index + 1] if index + 1 < len(items) else None
                if after is not follower[id(item)]:
                    problems.append(f"{index}: reasoning separated from the item it preceded")
    return problems


def _blocks(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    assert isinstance(content, list)
    return content


def anthropic_problems(messages: list[dict[str, Any]]) -> list[str]:  # noqa: PLR0912 - one branch per rule
    """Messages API: user first, strict alternation, each tool_use answered in the next message
    and each tool_result answering the message before, tool results first in their message,
    thinking first in its message, no empty text, no trailing whitespace at the very end."""
    problems: list[str] = []
    if not messages:
        return ["no messages"]
    if messages[0].get("role") != "user":
        problems.append("0: does not open with a user message")
    previous_uses: set[str] = set()
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{index}: role {role!r}")
        if index and messages[index - 1].get("role") == role:
            problems.append(f"{index}: two {role} messages in a row")
        content = message.get("content")
        if isinstance(content, str) and not content:
            problems.append(f"{index}: empty content")
        blocks = _blocks(content)
        if not blocks:
            problems.append(f"{index}: no content blocks")
        kinds = [block.get("type") for block in blocks]
        for block in blocks:
            if block.get("type") == "text" and not block.get("text"):
                problems.append(f"{index}: empty text block")
        results = {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"}
        if role == "user":
            if results != previous_uses:
                problems.append(
                    f"{index}: answers {sorted(results)}, expected {sorted(previous_uses)}"
                )
            first_other = next((i for i, k in enumerate(kinds) if k != "tool_result"), len(kinds))
            if "tool_result" in kinds[first_other:]:
                problems.append(f"{index}: a tool_result after other content")
            previous_uses = set()
        else:
            if previous_uses:
                problems.append(f"{index}: tool_use {sorted(previous_uses)} unanswered")
            first_other = next((i for i, k in enumerate(kinds) if k not in THINKING), len(kinds))
            if any(kind in THINKING for kind in kinds[first_other:]):
                problems.append(f"{index}: thinking block after other content")
            previous_uses = {b["id"] for b in blocks if b.get("type") == "tool_use"}
    if previous_uses:
        problems.append(f"end: tool_use {sorted(previous_uses)} unanswered")
    last = messages[-1]
    if last.get("role") == "assistant":
        tail = _blocks(last.get("content"))[-1]
        if tail.get("type") == "text" and tail["text"] != tail["text"].rstrip():
            problems.append("end: final assistant text ends with whitespace")
    return problems


def anthropic_cache_problems(
    messages: list[dict[str, Any]], system: str | list[dict[str, Any]] | None = None
) -> list[str]:
    """Messages API prompt caching: at most four ``cache_control`` breakpoints in a request,
    the blocks of ``system`` included."""
    blocks = [] if system is None or isinstance(system, str) else list(system)
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            blocks.extend(content)
    markers = sum(1 for block in blocks if isinstance(block, dict) and "cache_control" in block)
    return [f"{markers} cache_control breakpoints, more than four"] if markers > 4 else []


# -- counters -----------------------------------------------------------------------------------


def png(width: int, height: int) -> str:
    """The base64 of a PNG signature and IHDR chunk of the given size (enough to read it)."""
    header = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"
    header += width.to_bytes(4, "big") + height.to_bytes(4, "big") + b"\x08\x02\x00\x00\x00"
    return base64.b64encode(header).decode("ascii")


def openai_image(url: str, detail: str | None) -> int:
    """OpenAI's documented image rule, restated: 85 at low detail, else 85 + 170 per tile."""
    if detail == "low":
        return 85
    if not url.startswith("data:image/png;base64,"):
        return 1445
    raw = base64.b64decode(url.split(",", 1)[1][:44])
    width = Fraction(int.from_bytes(raw[16:20], "big"))
    height = Fraction(int.from_bytes(raw[20:24], "big"))
    if max(width, height) > 2048:
        ratio = 2048 / max(width, height)
        width, height = width * ratio, height * ratio
    if min(width, height) > 768:
        ratio = 768 / min(width, height)
        width, height = width * ratio, height * ratio
    return 85 + 170 * math.ceil(width / 512) * math.ceil(height / 512)


def chat_tokens(
    messages: list[dict[str, Any]], encode: Encode, framing: int, system: str | None = None
) -> int:
    """Chat Completions pricing: framing per message and per call, every text, name, refusal,
    call name and arguments by the tokenizer, media by the documented constants."""

    def count(text: str) -> int:
        return len(encode(text))

    def content(value: object) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return count(value)
        total = 0
        for part in value:  # type: ignore[attr-defined]
            kind = part["type"]
            if kind in ("text", "refusal"):
                total += count(part[kind])
            elif kind == "image_url":
                total += openai_image(part["image_url"]["url"], part["image_url"].get("detail"))
            elif kind == "input_audio":
                total += 1000
            elif kind == "file":
                total += 3000
            else:
                total += count(json.dumps(part, ensure_ascii=False, separators=(",", ":")))
        return total

    total = framing + count(system) if system is not None else 0
    for message in messages:
        total += framing + content(message.get("content"))
        for key in ("name", "refusal"):
            if message.get(key) is not None:
                total += count(message[key])
        for call in message.get("tool_calls") or []:
            body = call.get("function") or call.get("custom")
            total += framing + count(body["name"]) + count(body.get("arguments", body.get("input")))
    return total


def responses_tokens(
    items: list[dict[str, Any]], encode: Encode, framing: int, system: str | None = None
) -> int:
    """Responses pricing: framing per item; texts, call names and arguments, reasoning summaries
    by the tokenizer; media by the documented constants."""

    def count(text: str) -> int:
        return len(encode(text))

    def parts(value: object) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return count(value)
        total = 0
        for part in value:  # type: ignore[attr-defined]
            kind = part["type"]
            if kind in ("input_text", "output_text"):
                total += count(part["text"])
            elif kind == "refusal":
                total += count(part["refusal"])
            elif kind == "input_image":
                total += openai_image(part.get("image_url") or "", part.get("detail"))
            elif kind == "input_file":
                total += 3000
            else:
                raise AssertionError(kind)
        return total

    total = framing + count(system) if system is not None else 0
    for item in items:
        kind = item.get("type", "message")
        total += framing
        if kind == "message":
            total += parts(item.get("content"))
        elif kind in ("function_call", "custom_tool_call"):
            total += count(item["name"]) + count(item.get("arguments", item.get("input", "")))
        elif kind == "reasoning":
            total += sum(count(s["text"]) for s in item.get("summary", []))
            total += sum(count(s["text"]) for s in item.get("content") or [])
        else:
            total += parts(item.get("output"))
    return total


def anthropic_image(source: dict[str, Any]) -> int:
    """Anthropic's documented rule, restated: width * height / 750 after fitting the long edge
    in 1568 px, at most 1600; 1600 when the size is unknown."""
    if source.get("type") != "base64" or source.get("media_type") != "image/png":
        return 1600
    raw = base64.b64decode(source["data"][:44])
    width = Fraction(int.from_bytes(raw[16:20], "big"))
    height = Fraction(int.from_bytes(raw[20:24], "big"))
    if max(width, height) > 1568:
        ratio = 1568 / max(width, height)
        width, height = width * ratio, height * ratio
    return min(math.ceil(width * height / 750), 1600)


def anthropic_tokens(
    messages: list[dict[str, Any]],
    encode: Encode,
    framing: int,
    system: str | list[dict[str, Any]] | None = None,
) -> int:
    """Messages API pricing: framing per message and per tool_use; texts, thinking, tool names
    and compact JSON inputs by the tokenizer; images by size; documents by the constant."""

    def count(text: str) -> int:
        return len(encode(text))

    def block(value: dict[str, Any]) -> int:  # noqa: PLR0911 - one return per block type
        kind = value["type"]
        if kind == "text":
            return count(value["text"])
        if kind == "thinking":
            return count(value["thinking"])
        if kind == "redacted_thinking":
            return count(value["data"])
        if kind == "tool_use":
            arguments = json.dumps(value["input"], ensure_ascii=False, separators=(",", ":"))
            return framing + count(value["name"]) + count(arguments)
        if kind == "tool_result":
            inner = value.get("content")
            return 0 if inner is None else sum(block(b) for b in _blocks(inner))
        if kind == "image":
            return anthropic_image(value["source"])
        if kind == "document":
            source = value["source"]
            return count(source["data"]) if source.get("type") == "text" else 3000
        raise AssertionError(kind)

    total = 0
    if system is not None:
        texts = [system] if isinstance(system, str) else [b["text"] for b in system]
        total += framing + sum(count(text) for text in texts)
    for message in messages:
        total += framing + sum(block(b) for b in _blocks(message["content"]))
    return total
