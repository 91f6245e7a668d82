"""How each Converse content block is read and priced, and the cache points a request holds.

A block is a one-key object (``{"text": ...}``, ``{"toolUse": {...}}``). It reads as the text a
summarizer is shown (a text its text; a tool use a ``[tool call name {input}]`` line; reasoning
``""``; media a label line such as ``[image]``) and is priced as ``docs/formats/
bedrock_converse.md`` says: images as the Anthropic models on Bedrock price them. Image and
document bytes are raw ``bytes`` (boto3) or base64 text (Converse's JSON); both are read.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from cutctx.formats._common import (
    AUDIO_TOKENS,
    FILE_TOKENS,
    check_dict,
    fail,
    joined,
    shown,
    text_field,
)
from cutctx.formats._images import anthropic_image_tokens
from cutctx.formats._plain import plain

if TYPE_CHECKING:
    from cutctx.formats._common import Pricer

__all__ = [
    "FORMAT",
    "block_of",
    "cache_points",
    "kind_of",
    "result_of",
    "strict_json",
]

FORMAT: Final = "bedrock_converse"


def kind_of(index: int, value: object, where: str) -> tuple[str, Any]:
    """Return a block's one key and its value; raise for a block that is not one-key object."""
    block = check_dict(FORMAT, index, value, where)
    if len(block) != 1:
        keys = sorted(str(key) for key in block)[:3]
        raise fail(
            FORMAT, index, f"{where} must hold exactly one of text, image, toolUse, ...; got {keys}"
        )
    ((kind, body),) = block.items()
    if not isinstance(kind, str):
        raise fail(FORMAT, index, f"{where} has a key that is not a string")
    return kind, body


def strict_json(index: int, value: object, where: str) -> str:
    """Return ``value`` as compact JSON, or raise naming ``where`` if JSON cannot hold it."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise fail(FORMAT, index, f"{where} is not JSON data: {shown(value)}") from None


def _image(source: object) -> int:
    """Price an image ``source``: its ``bytes`` (raw or base64) by Anthropic's rule."""
    data = source.get("bytes") if isinstance(source, Mapping) else None
    if isinstance(data, bytes | bytearray):
        data = base64.b64encode(data).decode("ascii")
    return anthropic_image_tokens({"data": data} if isinstance(data, str) else None)


def _media(index: int, body: object, where: str) -> object:
    """Return an image's, a video's or an audio clip's ``source``; raise where one is no object."""
    media = check_dict(FORMAT, index, body, where)
    source = media.get("source")
    if source is not None:
        check_dict(FORMAT, index, source, f"{where}.source")
    return source


def _document(pricer: Pricer, index: int, body: object, where: str) -> int:
    document = check_dict(FORMAT, index, body, where)
    cost = sum(
        pricer.text(text_field(FORMAT, index, document[name], f"{where}.{name}"))
        for name in ("name", "context")
        if document.get(name) is not None
    )
    source = _media(index, document, where)
    if isinstance(source, Mapping) and isinstance(source.get("text"), str):
        return cost + pricer.text(source["text"])
    if isinstance(source, Mapping) and isinstance(source.get("content"), list):
        return cost + sum(
            pricer.text(item["text"])
            for item in source["content"]
            if isinstance(item, Mapping) and isinstance(item.get("text"), str)
        )
    return cost + FILE_TOKENS


def result_of(pricer: Pricer, index: int, body: object, where: str) -> tuple[str, int]:
    """Read and price a ``toolResult``'s content: texts, JSON, images, documents, video."""
    result = check_dict(FORMAT, index, body, where)
    content = result.get("content")
    if not isinstance(content, list | tuple):
        raise fail(FORMAT, index, f"{where}.content must be a list, got {type(content).__name__}")
    texts: list[str] = []
    cost = 0
    for position, value in enumerate(content):
        place = f"{where}.content[{position}]"
        kind, item = kind_of(index, value, place)
        if kind == "text":
            text = text_field(FORMAT, index, item, f"{place}.text")
        elif kind == "json":
            text = strict_json(index, item, f"{place}.json")
        elif kind == "toolResult":  # the Converse API's tool results hold no tool result
            raise fail(FORMAT, index, f"{place}: a toolResult cannot hold a toolResult")
        else:
            text, price = block_of(pricer, index, value, place)
            texts.append(text)
            cost += price
            continue
        texts.append(text)
        cost += pricer.text(text)
    return joined([text for text in texts if text]), cost


def block_of(pricer: Pricer, index: int, value: object, where: str) -> tuple[str, int]:  # noqa: PLR0911 - one branch per kind of block
    """Render (for summarizers) and price one content block."""
    kind, body = kind_of(index, value, where)
    if kind == "text":
        text = text_field(FORMAT, index, body, f"{where}.text")
        return text, pricer.text(text)
    if kind == "toolUse":
        use = check_dict(FORMAT, index, body, f"{where}.toolUse")
        name = text_field(FORMAT, index, use.get("name"), f"{where}.toolUse.name")
        text_field(FORMAT, index, use.get("toolUseId"), f"{where}.toolUse.toolUseId")
        arguments = strict_json(index, use.get("input"), f"{where}.toolUse.input")
        price = pricer.framing + pricer.text(name) + pricer.text(arguments)
        return f"[tool call {name} {arguments}]", price
    if kind == "toolResult":
        return result_of(pricer, index, body, f"{where}.toolResult")
    if kind == "reasoningContent":
        return "", _reasoning(pricer, index, body, f"{where}.reasoningContent")
    if kind == "image":
        return "[image]", _image(_media(index, body, f"{where}.image"))
    if kind == "document":
        return "[document]", _document(pricer, index, body, f"{where}.document")
    if kind == "video":
        _media(index, body, f"{where}.video")
        return "[video]", FILE_TOKENS
    if kind == "audio":
        _media(index, body, f"{where}.audio")
        return "[audio]", AUDIO_TOKENS
    if kind == "cachePoint":
        check_dict(FORMAT, index, body, f"{where}.cachePoint")
        return "", 0
    if kind == "guardContent":
        guard = check_dict(FORMAT, index, body, f"{where}.guardContent")
        inner = guard.get("text")
        if isinstance(inner, Mapping) and isinstance(inner.get("text"), str):
            return inner["text"], pricer.text(inner["text"])
        if "image" in guard:
            return "[image]", _image(_media(index, guard["image"], f"{where}.guardContent.image"))
    return f"[{kind}]", pricer.text(strict_json(index, plain(body), f"{where}.{kind}"))


def _reasoning(pricer: Pricer, index: int, body: object, where: str) -> int:
    """Price reasoning: its text (the signature is not priced), or its redacted content."""
    reasoning = check_dict(FORMAT, index, body, where)
    text = reasoning.get("reasoningText")
    if text is not None:
        text = check_dict(FORMAT, index, text, f"{where}.reasoningText")
        return pricer.text(
            text_field(FORMAT, index, text.get("text"), f"{where}.reasoningText.text")
        )
    redacted = reasoning.get("redactedContent")
    if isinstance(redacted, bytes | bytearray):
        redacted = base64.b64encode(redacted).decode("ascii")
    if not isinstance(redacted, str):
        raise fail(FORMAT, index, f"{where} must hold reasoningText or redactedContent")
    return pricer.text(redacted)


def cache_points(content: object) -> int:
    """Count the ``cachePoint`` blocks of ``content`` (a message's blocks, or ``system``)."""
    if not isinstance(content, list | tuple):
        return 0
    return sum(1 for block in content if isinstance(block, Mapping) and "cachePoint" in block)
