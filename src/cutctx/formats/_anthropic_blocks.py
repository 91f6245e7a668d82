"""How each Anthropic content block is read and priced, and an excerpted tool result as sent.

A block reads as text a summarizer is shown (a text block its text; a tool use a
``[tool call name {arguments}]`` line; an image, a document and other blocks a label line such
as ``[image]``) and is priced as the API counts it; a message's or a tool result's blocks read as
their texts joined by line breaks. See ``docs/formats/anthropic.md`` for the prices.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Final

from cutctx.formats._common import (
    FILE_TOKENS,
    Pricer,
    as_json,
    check_dict,
    excerpt_content,
    fail,
    joined,
    render_content,
    text_field,
)
from cutctx.formats._images import anthropic_image_tokens

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["FORMAT", "USES", "block_of", "blocks", "excerpted"]

FORMAT: Final = "anthropic"

# Blocks that open a call: the client's tool_use, and the server-run and MCP tool uses whose
# results the API puts in the same assistant message.
USES: Final = frozenset({"tool_use", "server_tool_use", "mcp_tool_use"})
_TEXT: Final = ("text",)


def excerpted(pricer: Pricer, index: int, result: Mapping[str, Any], excerpt: str) -> object:
    """Return a tool result's content as sent with ``excerpt`` (``excerpt_content``).

    One text block, then the result's images, documents and other blocks as they are.
    """
    return excerpt_content(
        result.get("content"),
        excerpt,
        partial(block_of, pricer, index, within="tool_result"),
        _TEXT,
        "text",
        skip_empty=True,  # as ``blocks`` reads them
    )


def blocks(
    pricer: Pricer, index: int, content: object, where: str, *, within: str | None = None
) -> tuple[str, int]:
    """Render and price content that is a string, a list of blocks, or absent.

    ``within``: the kind of block the content is inside (``tool_result``, ``document`` or
    ``search_result``), whose content holds no block of the kinds ``_HOLDS_NO`` names.
    """
    return render_content(
        FORMAT,
        pricer,
        index,
        content,
        where,
        partial(block_of, pricer, index, within=within),
        skip_empty=True,
    )


# The blocks a block's content cannot hold, as the Messages API has it: a tool result holds no
# tool result, a document's or a search result's content only text and images. So content nests
# at most three blocks deep (a tool result, a document in it, its text), however it is built.
_HOLDS_NO: Final = {
    "tool_result": frozenset({"tool_result"}),
    "document": frozenset({"tool_result", "document", "search_result"}),
    "search_result": frozenset({"tool_result", "document", "search_result"}),
}


def block_of(  # noqa: PLR0911 - one branch per block type reads best
    pricer: Pricer, index: int, value: object, where: str, *, within: str | None = None
) -> tuple[str, int]:
    """Render (for summarizers) and price one content block (inside a ``within`` block)."""
    block = check_dict(FORMAT, index, value, where)
    kind = block.get("type")
    if not isinstance(kind, str):
        raise fail(FORMAT, index, f"{where} has no string type")
    if within is not None and kind in _HOLDS_NO[within]:
        raise fail(FORMAT, index, f"{where}: a {within} block cannot hold a {kind} block")
    if kind == "text":
        text = text_field(FORMAT, index, block.get("text"), f"{where}.text")
        return text, pricer.text(text)
    if kind == "thinking":
        thought = text_field(FORMAT, index, block.get("thinking"), f"{where}.thinking")
        return "", pricer.text(thought)
    if kind == "redacted_thinking":
        data = text_field(FORMAT, index, block.get("data"), f"{where}.data")
        return "", pricer.text(data)
    if kind in USES:
        name = text_field(FORMAT, index, block.get("name"), f"{where}.name")
        arguments = as_json(block.get("input"))
        label = "tool call" if kind == "tool_use" else kind.replace("_", " ")
        return (
            f"[{label} {name} {arguments}]",
            pricer.framing + pricer.text(name) + pricer.text(arguments),
        )
    if kind == "tool_result":
        return blocks(pricer, index, block.get("content"), f"{where}.content", within=kind)
    if kind == "image":
        return "[image]", anthropic_image_tokens(block.get("source"))
    if kind == "document":
        return "[document]", _document_tokens(pricer, index, block, where)
    if kind == "search_result":
        return _search_result(pricer, index, block, where)
    if kind == "compaction":
        summary = block.get("content")
        if summary is None:
            return "", 0
        summary = text_field(FORMAT, index, summary, f"{where}.content")
        return summary, pricer.text(summary)
    # server tool results, container_upload, unknown blocks
    return f"[{kind}]", pricer.text(as_json(block))


def _document_tokens(pricer: Pricer, index: int, block: Mapping[str, Any], where: str) -> int:
    """Price a document: its ``title`` and ``context``, plus its source.

    A text source costs its text, a content source its blocks, any other (PDF, URL, file)
    ``FILE_TOKENS``. ``citations`` is a switch and costs nothing.
    """
    cost = 0
    for name in ("title", "context"):
        value = block.get(name)
        if value is not None:
            cost += pricer.text(text_field(FORMAT, index, value, f"{where}.{name}"))
    source = block.get("source")
    if isinstance(source, dict):
        if source.get("type") == "text" and isinstance(source.get("data"), str):
            return cost + pricer.text(source["data"])
        if source.get("type") == "content":
            content = source.get("content")
            return (
                cost
                + blocks(pricer, index, content, f"{where}.source.content", within="document")[1]
            )
    return cost + FILE_TOKENS


def _search_result(
    pricer: Pricer, index: int, block: Mapping[str, Any], where: str
) -> tuple[str, int]:
    """Render and price a search result: its title, source and text blocks."""
    title = text_field(FORMAT, index, block.get("title"), f"{where}.title")
    source = text_field(FORMAT, index, block.get("source"), f"{where}.source")
    content = block.get("content")
    text, cost = blocks(pricer, index, content, f"{where}.content", within="search_result")
    return joined([title, text]), pricer.text(title) + pricer.text(source) + cost
