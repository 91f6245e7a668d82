"""The caller's prompt-cache markers: Anthropic's ``cache_control`` keys, Converse's ``cachePoint``.

A marker says where the caller wants the provider to cache, not what the conversation holds: a
window compares and prices a history without its markers (``without_cache_control``,
``without_cache_points``), so a marker moved from message to message each turn (as Anthropic's
caching guide and Claude Code do) is the same history, and sends the caller's own messages, with
their markers, where it keeps them whole.
"""

from __future__ import annotations

import operator
from collections.abc import Mapping, Sequence
from typing import Any, Final

__all__ = ["with_cache_control", "without_cache_control", "without_cache_points"]

_KEY: Final = "cache_control"


def without_cache_control(message: object) -> object:
    """Return ``message`` without ``cache_control`` on its blocks (itself when it has none).

    The blocks of its ``content`` and the blocks inside a ``tool_result``'s content are read;
    what holds a marker is copied without it, nothing is changed in place.
    """
    if type(message) is not dict:
        return message
    content = message.get("content")
    if type(content) is not list:
        return message
    blocks = _blocks_without(content)
    if blocks is content:
        return message
    return {**message, "content": blocks}


def _blocks_without(content: list[Any], *, nested: bool = True) -> list[Any]:
    """Return ``content`` with each block's marker removed (``content`` itself if none has one).

    With ``nested``, the blocks inside a block's ``content`` too (one level: a tool result's;
    the format refuses deeper nesting, and a block that holds itself is not walked twice).
    """
    made: list[Any] | None = None
    for position, block in enumerate(content):
        if type(block) is not dict:
            continue
        plain = block
        if type(block.get(_KEY)) is dict:  # a marker of another shape is the reader's to refuse
            plain = {key: value for key, value in block.items() if key != _KEY}
        inner = block.get("content")
        if nested and type(inner) is list:
            inner_plain = _blocks_without(inner, nested=False)
            if inner_plain is not inner:
                plain = {**plain, "content": inner_plain}
        if plain is not block:
            if made is None:
                made = list(content)
            made[position] = plain
    return content if made is None else made


def without_cache_points(message: object) -> object:
    """Return a Converse ``message`` without its ``cachePoint`` blocks (itself when it has none).

    A message that holds nothing else keeps them: an empty message is no message.
    """
    if not isinstance(message, Mapping):
        return message
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [  # a cache point of another shape stays, for the reader to refuse
        block
        for block in content
        if not (isinstance(block, Mapping) and isinstance(block.get("cachePoint"), Mapping))
    ]
    if len(kept) == len(content) or not kept:
        return message
    return {**message, "content": kept}


def with_cache_control(request: list[Any], marked: Sequence[tuple[object, object]]) -> list[Any]:
    """Put the caller's ``cache_control`` back on the blocks of ``request`` the window made.

    ``marked`` pairs each message the caller marked, as the window held it (without markers),
    with the caller's own. A block the request sends as the held one is the caller's again; a
    ``tool_result`` the window rewrote (masked, excerpted) takes its marker by ``tool_use_id``
    (unique in a conversation). ``request`` is returned changed in copies, never in place.
    """
    by_block, by_use = _marked_blocks(marked)
    if not by_block and not by_use:
        return request
    pairs = [
        (plain, by_block[id(plain)])
        for held, _ in marked
        if type(held) is dict
        for plain in _content(held)
        if id(plain) in by_block
    ]
    made = list(request)
    for position, message in enumerate(request):
        content = message.get("content") if type(message) is dict else None
        if type(content) is not list:
            continue
        blocks = [_remarked(block, by_block, by_use, pairs) for block in content]
        if any(map(operator.is_not, blocks, content)):
            made[position] = {**message, "content": blocks}
    return made


def _marked_blocks(
    marked: Sequence[tuple[object, object]],
) -> tuple[dict[int, object], dict[str, object]]:
    """Return the caller's blocks by the id of the held block, and tool results' markers."""
    by_block: dict[int, object] = {}
    by_use: dict[str, object] = {}
    for held, own in marked:
        if type(held) is not dict or type(own) is not dict:
            continue
        for plain, block in zip(_content(held), _content(own), strict=False):
            if plain is block or type(block) is not dict:
                continue
            by_block[id(plain)] = block
            use = block.get("tool_use_id")
            if block.get("type") == "tool_result" and _KEY in block and isinstance(use, str):
                by_use[use] = block[_KEY]
    return by_block, by_use


def _remarked(
    block: object,
    by_block: dict[int, object],
    by_use: dict[str, object],
    pairs: Sequence[tuple[object, object]] = (),
) -> object:
    """Return the caller's marked ``block``, or a rewritten tool result with its marker.

    A block is the caller's by identity with the held one, or, in a message the window made
    before (a restored state holds its copy), by equal content.
    """
    own = by_block.get(id(block))
    if own is not None:
        return own
    if type(block) is dict and _KEY not in block:
        for plain, caller in pairs:
            if plain == block:
                return caller
    if type(block) is dict and _KEY not in block and block.get("type") == "tool_result":
        use = block.get("tool_use_id")
        if isinstance(use, str) and use in by_use:
            return {**block, _KEY: by_use[use]}
    return block


def _content(message: dict[str, Any]) -> list[Any]:
    content = message.get("content")
    return content if type(content) is list else []
