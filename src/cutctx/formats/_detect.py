"""Which built-in format a list of messages (and its request body) is in, by documented rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from cutctx.formats.anthropic import ANTHROPIC
from cutctx.formats.bedrock_converse import BEDROCK_CONVERSE
from cutctx.formats.gemini import GEMINI
from cutctx.formats.openai_chat import OPENAI_CHAT
from cutctx.formats.openai_responses import OPENAI_RESPONSES

if TYPE_CHECKING:
    from cutctx.formats._common import Message
    from cutctx.formats._format import Format

__all__ = ["detect"]

_RESPONSES_ITEMS: Final = frozenset(
    {
        "message",
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "reasoning",
    }
)
_RESPONSES_PARTS: Final = frozenset({"input_text", "output_text", "input_image", "input_file"})
_ANTHROPIC_BLOCKS: Final = frozenset(
    {"tool_use", "tool_result", "thinking", "redacted_thinking", "image", "document"}
)
# Converse's blocks are one-key objects named by their kind, with no ``type`` (Anthropic's and
# OpenAI's always have one): ``{"text": ...}`` is Converse, ``{"type": "text", ...}`` is not.
_CONVERSE_BLOCKS: Final = frozenset(
    {
        "text",
        "image",
        "document",
        "video",
        "audio",
        "toolUse",
        "toolResult",
        "reasoningContent",
        "cachePoint",
        "guardContent",
        "citationsContent",
    }
)
_CONVERSE_BODY: Final = frozenset({"modelId", "inferenceConfig", "toolConfig"})


def detect(messages: list[Any], body: dict[str, Any] | None) -> Format[Message]:
    """Return the format of ``messages`` (and their request body), by the first rule that holds.

    1. A body with ``contents`` is a Gemini request, one with ``input`` an OpenAI Responses
       request; one with ``modelId``, ``inferenceConfig`` or ``toolConfig``, or whose
       ``system`` is a list of blocks without a ``type``, a Bedrock Converse request; any other
       body with a top-level ``system`` is an Anthropic request.
    2. A message with a ``parts`` list or the role ``model``: Gemini.
    3. An item with a ``type`` of a Responses item (``function_call``, ``reasoning``, ...) or
       without a ``role``: OpenAI Responses.
    4. A message with role ``tool``, ``system`` or ``developer``, or with ``tool_calls``:
       OpenAI Chat Completions.
    5. The first message with a list of content blocks decides by their keys: a ``type``
       ``tool_use``, ``tool_result``, ``thinking``, ``image`` or ``document``: Anthropic; a
       part ``input_text``, ``output_text``, ... : OpenAI Responses; a block without a
       ``type`` whose one key is a Converse block (``text``, ``toolUse``, ``toolResult``,
       ``reasoningContent``, ``image``, ...): Bedrock Converse.
    6. Otherwise (plain text messages, which every format reads alike): OpenAI Chat Completions.
    """
    if body is not None:
        found = _by_body(body)
        if found is not None:
            return found
    dicts = [message for message in messages if isinstance(message, dict)]
    if any(
        isinstance(message.get("parts"), list) or message.get("role") == "model"
        for message in dicts
    ):
        return GEMINI
    if any(message.get("type") in _RESPONSES_ITEMS or "role" not in message for message in dicts):
        return OPENAI_RESPONSES
    if any(
        message.get("role") in ("tool", "system", "developer") or "tool_calls" in message
        for message in dicts
    ):
        return OPENAI_CHAT
    for message in dicts:
        content = message.get("content")
        if isinstance(content, list):
            found = _by_blocks([part for part in content if isinstance(part, dict)])
            if found is not None:
                return found
    return OPENAI_CHAT


def _by_body(body: dict[str, Any]) -> Format[Message] | None:
    """Rule 1: the format a request body's top-level keys name, if any."""
    if "contents" in body:
        return GEMINI
    if "input" in body:
        return OPENAI_RESPONSES
    system = body.get("system")
    if body.keys() & _CONVERSE_BODY or (isinstance(system, list) and system and not _typed(system)):
        return BEDROCK_CONVERSE
    if "system" in body:
        return ANTHROPIC
    return None


def _by_blocks(blocks: list[dict[str, Any]]) -> Format[Message] | None:
    """Rule 5: the format a message's content blocks are in, by their keys, if they tell."""
    kinds = {block.get("type") for block in blocks}
    if kinds & _ANTHROPIC_BLOCKS:
        return ANTHROPIC
    if kinds & _RESPONSES_PARTS:
        return OPENAI_RESPONSES
    if any("type" not in block and block.keys() & _CONVERSE_BLOCKS for block in blocks):
        return BEDROCK_CONVERSE
    return None


def _typed(blocks: list[Any]) -> bool:
    """Whether any of ``blocks`` is an object with a ``type`` (Anthropic's system blocks)."""
    return any(isinstance(block, dict) and "type" in block for block in blocks)
