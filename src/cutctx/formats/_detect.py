"""Which built-in format a list of messages (and its request body) is in, by documented rules."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from cutctx.formats.anthropic import ANTHROPIC
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


def detect(messages: list[Any], body: dict[str, Any] | None) -> Format[Message]:  # noqa: PLR0911 - one return per documented rule
    """Return the format of ``messages`` (and their request body), by the first rule that holds.

    1. A body with ``input`` is an OpenAI Responses request; a body with a top-level ``system``
       is an Anthropic request.
    2. An item with a ``type`` of a Responses item (``function_call``, ``reasoning``, ...) or
       without a ``role``: OpenAI Responses.
    3. A message with role ``tool``, ``system`` or ``developer``, or with ``tool_calls``:
       OpenAI Chat Completions.
    4. A content block ``tool_use``, ``tool_result``, ``thinking``, ``image`` or ``document``:
       Anthropic; a content part ``input_text``, ``output_text``, ... : OpenAI Responses.
    5. Otherwise (plain text messages, which every format reads alike): OpenAI Chat Completions.
    """
    if body is not None:
        if "input" in body:
            return OPENAI_RESPONSES
        if "system" in body:
            return ANTHROPIC
    dicts = [message for message in messages if isinstance(message, dict)]
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
            kinds = {part.get("type") for part in content if isinstance(part, dict)}
            if kinds & _ANTHROPIC_BLOCKS:
                return ANTHROPIC
            if kinds & _RESPONSES_PARTS:
                return OPENAI_RESPONSES
    return OPENAI_CHAT
