"""How each Responses input item and content part is read and priced.

An item reads as the text a summarizer is shown (a message its parts' text; a function call a
``[tool call name arguments]`` line; an output its text; an item cutctx never edits its compact
JSON after its type) and is priced as ``docs/formats/openai_responses.md`` says.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

from cutctx._core.values import Role
from cutctx.formats._common import (
    AUDIO_TOKENS,
    FILE_TOKENS,
    as_json,
    check_dict,
    fail,
    is_empty,
    joined,
    openai_image_tokens,
    render_content,
    shown,
    text_field,
)

if TYPE_CHECKING:
    from cutctx.formats._common import Pricer

__all__ = [
    "ARGUMENTS",
    "FORMAT",
    "MASKABLE",
    "ROLES",
    "TEXT_PARTS",
    "as_text",
    "call_item",
    "generated_image",
    "kind_of",
    "message_item",
    "output_item",
    "part_of",
    "parts_of",
    "reasoning_item",
]

FORMAT: Final = "openai_responses"

ROLES: Final = {
    "system": Role.SYSTEM,
    "developer": Role.SYSTEM,
    "user": Role.USER,
    "assistant": Role.ASSISTANT,
}
# Parts that read as their text; the rest read as labels. A tuple: a part's type may be any value.
TEXT_PARTS: Final = ("input_text", "output_text", "refusal")
ARGUMENTS: Final = {"function_call": "arguments", "custom_tool_call": "input"}
# Outputs whose whole body is the text field ``output``: the only items ever masked.
MASKABLE: Final = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "apply_patch_call_output",
    }
)


def kind_of(index: int, item: dict[str, Any]) -> str:
    """Return the item's type: ``message`` for a bare ``role``, ``item_reference`` for a bare id.

    The API lets both omit ``type``.
    """
    kind = item.get("type")
    if kind is None:
        if "role" in item:
            return "message"
        if "id" in item:
            return "item_reference"
    if not isinstance(kind, str):
        raise fail(FORMAT, index, "the item has no string type", type=shown(kind))
    return kind


def message_item(
    pricer: Pricer, index: int, item: dict[str, Any], *, strict: bool
) -> tuple[Role, str, int]:
    role = item.get("role")
    kind = ROLES.get(role) if isinstance(role, str) else None
    if kind is None:
        raise fail(FORMAT, index, f"unknown role {shown(role)}", role=shown(role))
    content = item.get("content")
    if strict and kind is Role.USER and is_empty(content):
        raise fail(FORMAT, index, "a user message must have content")
    text, cost = parts_of(pricer, index, content, "content")
    return kind, text, cost


def call_item(pricer: Pricer, index: int, item: dict[str, Any], kind: str) -> tuple[str, int, str]:
    """Render and price a call; return its tool's name (or the call's type) too."""
    argument = ARGUMENTS.get(kind)
    if argument is None:
        text, cost = as_text(pricer, kind, item)
        return text, cost, kind
    name = text_field(FORMAT, index, item.get("name"), "name")
    arguments = text_field(FORMAT, index, item.get(argument), argument)
    return f"[tool call {name} {arguments}]", pricer.text(name) + pricer.text(arguments), name


def output_item(pricer: Pricer, index: int, item: dict[str, Any], kind: str) -> tuple[str, int]:
    """Render and price an output item."""
    output = item.get("output")
    if kind in ("function_call_output", "custom_tool_call_output"):
        return parts_of(pricer, index, output, "output")
    if kind in MASKABLE:
        if output is None:
            return "", 0
        text = text_field(FORMAT, index, output, "output")
        return text, pricer.text(text)
    if kind == "computer_call_output":
        screenshot = check_dict(FORMAT, index, output, "output")
        return "[screenshot]", openai_image_tokens(screenshot.get("image_url"), None)
    return as_text(pricer, kind, item)


def as_text(pricer: Pricer, kind: str, item: dict[str, Any]) -> tuple[str, int]:
    """Render and price an item cutctx never edits by its compact JSON, as text."""
    body = as_json(item)
    return f"[{kind}] {body}", pricer.text(body)


def generated_image(index: int, item: dict[str, Any]) -> int:
    """Price a generated image (base64 in ``result``) as an input image of its size."""
    result = item.get("result")
    if result is None:
        return 0
    data = text_field(FORMAT, index, result, "result")
    return openai_image_tokens(f"data:image/png;base64,{data}", None)


def reasoning_item(pricer: Pricer, index: int, item: dict[str, Any]) -> tuple[str, int]:
    """Price a reasoning item by its summary and content texts.

    ``encrypted_content`` is opaque and not priced.
    """
    texts: list[str] = []
    for field in ("summary", "content"):
        blocks = item.get(field)
        if blocks is None:
            continue
        if not isinstance(blocks, list | tuple):
            raise fail(FORMAT, index, f"{field} must be a list, got {type(blocks).__name__}")
        for position, value in enumerate(blocks):
            block = check_dict(FORMAT, index, value, f"{field}[{position}]")
            texts.append(text_field(FORMAT, index, block.get("text"), f"{field}[{position}].text"))
    return joined(texts), sum(pricer.text(text) for text in texts)


def parts_of(pricer: Pricer, index: int, content: object, name: str) -> tuple[str, int]:
    """Render and price a message's ``content`` or an output's ``output``."""
    return render_content(
        FORMAT,
        pricer,
        index,
        content,
        name,
        partial(part_of, pricer, index),
    )


def part_of(pricer: Pricer, index: int, value: object, where: str) -> tuple[str, int]:
    """Render and price one part: text, refusal, image, audio, file or another type."""
    part = check_dict(FORMAT, index, value, where)
    kind = part.get("type")
    if kind in TEXT_PARTS:
        field = "refusal" if kind == "refusal" else "text"
        text = text_field(FORMAT, index, part.get(field), f"{where}.{field}")
        return text, pricer.text(text)
    if kind == "input_image":
        return "[image]", openai_image_tokens(part.get("image_url"), part.get("detail"))
    if kind == "input_audio":
        return "[audio]", AUDIO_TOKENS
    if kind == "input_file":
        return "[file]", FILE_TOKENS
    if isinstance(kind, str):
        return f"[{kind}]", pricer.text(as_json(part))
    raise fail(FORMAT, index, f"{where} has no string type")
