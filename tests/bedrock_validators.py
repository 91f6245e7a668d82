"""Independent oracles for the Bedrock Converse format: validators and a token counter.

Written from Converse's documented rules (user first, strict alternation, every ``toolUse``
answered in the next user message by as many ``toolResult`` blocks with the same ids, at most
four ``cachePoint`` blocks, reasoning sent back unchanged) and from ``docs/formats/
bedrock_converse.md``'s pricing rules, without importing the code under test; the shapes of
the blocks are checked against botocore's own service model of ``Converse``.
"""

from __future__ import annotations

import base64
import json
from functools import cache
from typing import Any

from tests.format_validators import SUMMARY_OPENING, Encode, anthropic_image

FILLER = "(earlier turns were compacted)"


@cache
def _converse_input() -> Any:
    import botocore.session  # type: ignore[import-untyped]  # noqa: PLC0415 - a dev dependency

    model = botocore.session.get_session().get_service_model("bedrock-runtime")
    return model.operation_model("Converse").input_shape


def shape_problems(messages: list[dict[str, Any]], system: object = None) -> list[str]:
    """What botocore's parameter validator finds wrong with a ``converse`` call's messages."""
    from botocore.validate import ParamValidator  # type: ignore[import-untyped]  # noqa: PLC0415

    params: dict[str, Any] = {"modelId": "model", "messages": messages}
    if isinstance(system, str):
        params["system"] = [{"text": system}]
    elif system is not None:
        params["system"] = system
    report = ParamValidator().validate(params, _converse_input())
    return [report.generate_report()] if report.has_errors() else []


def _kinds(message: dict[str, Any]) -> list[str]:
    return [next(iter(block)) for block in message["content"]]


def _points(content: object) -> int:
    if not isinstance(content, list):
        return 0
    return sum(1 for block in content if "cachePoint" in block)


def bedrock_problems(  # noqa: PLR0912 - one branch per documented rule
    messages: list[dict[str, Any]],
    original: list[dict[str, Any]] | None = None,
    system: object = None,
) -> list[str]:
    """User first; strict alternation; non-empty content of one-key blocks; every toolUse
    answered in the next message by toolResults with the same ids and count, results only
    there; an error result with content; at most four cachePoints with ``system``'s; and given
    the original: reasoning sent only at the start of its message, unchanged, and every changed
    result a stub keeping its id and status."""
    problems: list[str] = []
    if not messages:
        return ["no messages"]
    if messages[0].get("role") != "user":
        problems.append("0: does not open with a user message")
    waiting: list[str] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role not in ("user", "assistant"):
            problems.append(f"{index}: role {role!r}")
        if index and messages[index - 1].get("role") == role:
            problems.append(f"{index}: two {role} messages in a row")
        content = message.get("content")
        if not isinstance(content, list) or not content:
            problems.append(f"{index}: no content")
            continue
        if any(len(block) != 1 for block in content):
            problems.append(f"{index}: a block with other than one key")
            continue
        results = [block["toolResult"] for block in content if "toolResult" in block]
        ids = [result["toolUseId"] for result in results]
        if waiting and (role != "user" or sorted(ids) != sorted(waiting)):
            problems.append(f"{index}: uses {waiting} answered by {ids}")
        elif not waiting and results:
            problems.append(f"{index}: results {ids} answer no use")
        for result in results:
            if result.get("status") == "error" and not result.get("content"):
                problems.append(f"{index}: an error result without content")
        uses = [block["toolUse"]["toolUseId"] for block in content if "toolUse" in block]
        if role == "user" and uses:
            problems.append(f"{index}: toolUse in a user message")
        waiting = uses
    if waiting:
        problems.append(f"end: uses {waiting} unanswered")
    points = _points(system) + sum(_points(message["content"]) for message in messages)
    if points > 4:
        problems.append(f"{points} cachePoints")
    if original is not None:
        problems.extend(_against(messages, original))
    return problems


def _without_points(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [block for block in content if "cachePoint" not in block]


def _against(messages: list[dict[str, Any]], original: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    reasoning = [
        _without_points(message["content"])
        for message in original
        if message["role"] == "assistant" and "reasoningContent" in _kinds(message)
    ]
    results = [
        block["toolResult"]
        for message in original
        for block in message["content"]
        if "toolResult" in block
    ]
    by_id = {result["toolUseId"]: result for result in results}
    for index, message in enumerate(messages):
        content = _without_points(message["content"])
        kinds = [next(iter(block)) for block in content]
        if message["role"] == "assistant" and "reasoningContent" in kinds:
            lead = next((n for n, kind in enumerate(kinds) if kind != "reasoningContent"), None)
            lead = len(kinds) if lead is None else lead
            if "reasoningContent" in kinds[lead:] or not any(
                content[:lead] == [b for b in old if "reasoningContent" in b] for old in reasoning
            ):
                problems.append(
                    f"{index}: reasoning not sent at the start of its message as it was"
                )
        for block in content:
            result = block.get("toolResult")
            if result is None or result in results:
                continue
            was = by_id.get(result["toolUseId"])
            stub = result.get("content")
            if (
                was is None
                or result.get("status") != was.get("status")
                or not (isinstance(stub, list) and len(stub) == 1 and "text" in stub[0])
                or not stub[0]["text"]
            ):
                problems.append(f"{index}: a changed toolResult that is not a stub of its own")
        if message["role"] == "user" and str(content[0].get("text", "")).startswith(
            SUMMARY_OPENING
        ):
            continue
    return problems


# -- the counter ----------------------------------------------------------------------------


def bedrock_image(source: dict[str, Any]) -> int:
    """Anthropic's rule (``tests.format_validators.anthropic_image``) over the source's bytes
    (raw, or base64 text); 1600 for an S3 location or bytes that are no PNG."""
    data = source.get("bytes")
    if isinstance(data, bytes):
        data = base64.b64encode(data).decode()
    if not isinstance(data, str):
        return 1600
    try:
        head = base64.b64decode(data[:44])
    except ValueError:
        return 1600
    if not head.startswith(b"\x89PNG"):
        return 1600
    return anthropic_image({"type": "base64", "media_type": "image/png", "data": data})


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def bedrock_tokens(
    messages: list[dict[str, Any]],
    encode: Encode,
    framing: int,
    system: str | list[dict[str, Any]] | None = None,
) -> int:
    """Converse pricing as the guide states it: framing per message and per tool use; texts,
    reasoning texts, tool names, compact JSON inputs and JSON results by the tokenizer; images
    by Anthropic's rule; text documents by their texts (and name), others 3 000; audio 1 000,
    video 3 000; a cachePoint nothing. The head costs framing and the system's texts, plus one
    filler's price (framing and the filler's tokens), always; a message holding reasoning
    reserves one more; a filler message costs nothing."""

    def count(text: str) -> int:
        return len(encode(text))

    def block(value: dict[str, Any]) -> int:  # noqa: PLR0911, PLR0912 - one return per kind
        ((kind, body),) = value.items()
        if kind == "text":
            return count(body)
        if kind == "json":
            return count(_json(body))
        if kind == "toolUse":
            return framing + count(body["name"]) + count(_json(body["input"]))
        if kind == "toolResult":
            return sum(block(inner) for inner in body["content"])
        if kind == "reasoningContent":
            if "reasoningText" in body:
                return count(body["reasoningText"]["text"])
            redacted = body["redactedContent"]
            if isinstance(redacted, bytes):
                redacted = base64.b64encode(redacted).decode()
            return count(redacted)
        if kind == "image":
            return bedrock_image(body["source"])
        if kind == "document":
            extra = sum(count(body[key]) for key in ("name", "context") if key in body)
            source = body["source"]
            if "text" in source:
                return extra + count(source["text"])
            return extra + 3000
        if kind == "video":
            return 3000
        if kind == "audio":
            return 1000
        if kind == "cachePoint":
            return 0
        if kind == "guardContent":
            return count(body["text"]["text"])
        return count(_json(body))

    filler = framing + count(FILLER)
    total = filler
    if system is not None:
        texts = [system] if isinstance(system, str) else [b["text"] for b in system if "text" in b]
        total += framing + sum(count(text) for text in texts)
    for message in messages:
        if message["role"] == "user" and message["content"] == [{"text": FILLER}]:
            continue
        total += framing + sum(block(b) for b in message["content"])
        if any("reasoningContent" in b for b in message["content"]):
            total += filler
    return total
