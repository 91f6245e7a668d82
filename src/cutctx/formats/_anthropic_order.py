"""Anthropic's sequencing rules and prompt-cache markers: what a request must keep.

``check_order`` and ``check_unique`` refuse a conversation the API would (its opening, empty
content, thinking that cannot open its message, a tool use id used twice).

The Messages API merges adjacent messages of one role into one turn (their blocks
concatenated). Messages that compaction makes neighbours are merged the same way here, except
that an assistant message holding thinking or compaction blocks is never merged behind another
(they must stay first): a short user message, ``FILLER_TEXT``, goes between them, and before an
assistant or ``system`` message that would open the conversation. ``place_breakpoint`` marks
the end of a request's stable prefix for the cache.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from cutctx.formats._anthropic_blocks import FORMAT as _FORMAT  # the name its errors give
from cutctx.formats._common import fail, is_empty
from cutctx.formats._ids import first_use, with_ids

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "FILLER_TEXT",
    "THINKING",
    "alternate",
    "check_order",
    "check_unique",
    "place_breakpoint",
]


FILLER_TEXT: Final = "(earlier turns were compacted)"
"""The user message put before an assistant message that would otherwise open the output or
follow another assistant message it cannot be merged with."""

THINKING: Final = frozenset({"thinking", "redacted_thinking"})
# Blocks that must open their message (after any thinking), so it is never merged behind another.
_OPENERS: Final = THINKING | {"compaction"}


def alternate(
    built: list[tuple[dict[str, Any], int, int | None]], filler: int
) -> tuple[list[dict[str, Any]], list[int], frozenset[int]]:
    """Restore user-first alternation by merging neighbours, or a filler between them.

    ``built`` holds each message with its price and its source index (``None`` for a summary);
    return the messages, their prices (a filler costs ``filler``) and the source indices that
    were merged into the message before them. Messages of one role that were neighbours in the
    history stay as they are (the API merges them as it did there); a ``system`` message is
    never merged, and gets a filler before it where it would open the request or follow an
    assistant message it did not follow in the history.
    """
    out: list[dict[str, Any]] = []
    costs: list[int] = []
    joined_: set[int] = set()
    last: int | None = None  # the source of the last message out (merged into it)
    for message, cost, source in built:
        role = message["role"]
        follows = source is not None and last == source - 1  # as in the history
        last = source
        if role == "system":
            if not out or (out[-1]["role"] == "assistant" and not follows):
                out.append({"role": "user", "content": FILLER_TEXT})
                costs.append(filler)
        elif not out or (out[-1]["role"] == role and not follows):
            if role == "assistant" and (not out or _thinks(message)):
                out.append({"role": "user", "content": FILLER_TEXT})
                costs.append(filler)
            elif out:
                out[-1] = _merge(out[-1], message)
                costs[-1] += cost
                if source is not None:
                    joined_.add(source)
                continue
        out.append(message)
        costs.append(cost)
    return out, costs, frozenset(joined_)


def _thinks(message: Mapping[str, Any]) -> bool:
    return _opens(message.get("content"))


def _opens(content: object) -> bool:
    """Whether ``content`` holds a block that must open its message (thinking, compaction)."""
    return isinstance(content, list | tuple) and any(
        isinstance(block, dict) and block.get("type") in _OPENERS for block in content
    )


def _merge(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(first)
    merged["content"] = _as_blocks(first.get("content")) + _as_blocks(second.get("content"))
    return merged


def _as_blocks(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    return list(content) if isinstance(content, list | tuple) else []


_EPHEMERAL: Final = {"type": "ephemeral"}
_MAX_BREAKPOINTS: Final = 4


def place_breakpoint(request: list[Any], stable: int, system: object) -> None:
    """Mark the last block of the stable prefix ``cache_control: ephemeral``, in copies.

    The caller's own markers stay; none is added when the prefix is empty, already marked, or
    the caller's markers already take the provider's four.
    """
    if stable <= 0:
        return
    markers = _markers(system)
    for message in request:
        content = message.get("content")
        if isinstance(content, list | tuple):
            markers += _markers(content)
    if markers >= _MAX_BREAKPOINTS:
        return
    message = request[stable - 1]
    content = message.get("content")
    if isinstance(content, str):
        if not content:
            return
        blocks: list[Any] = [{"type": "text", "text": content, "cache_control": _EPHEMERAL}]
    elif isinstance(content, list) and content:
        position = len(content) - 1
        while position >= 0 and (
            not isinstance(content[position], dict) or content[position].get("type") in THINKING
        ):
            position -= 1
        if position < 0 or "cache_control" in content[position]:
            return
        blocks = list(content)
        blocks[position] = {**content[position], "cache_control": dict(_EPHEMERAL)}
    else:
        return
    request[stable - 1] = {**message, "content": blocks}


def _markers(content: object) -> int:
    """Count ``cache_control`` markers on the blocks of ``content`` (and inside tool results)."""
    if not isinstance(content, list | tuple):
        return 0
    count = 0
    for block in content:
        if isinstance(block, dict):
            if block.get("cache_control") is not None:
                count += 1
            if block.get("type") == "tool_result":
                inner = block.get("content")
                if isinstance(inner, list | tuple):  # a string holds no marker
                    count += _markers(inner)
    return count


def check_order(
    index: int, role: str, previous: str | None, content: object, *, last: bool
) -> None:
    """Raise where the API refuses the message: opening, alternation and empty content."""
    if previous is None and role != "user":
        hint = " (pass the system prompt as system=)" if role == "system" else ""
        raise fail(_FORMAT, index, f"the conversation must open with a user message{hint}")
    if role == previous == "assistant" and _opens(content):
        raise fail(
            _FORMAT,
            index,
            "an assistant message with thinking or compaction blocks cannot follow another "
            "assistant message (the API merges them, and those blocks must open the message)",
        )
    if is_empty(content) and not (last and role == "assistant"):
        raise fail(_FORMAT, index, f"a {role} message must have content")


def check_unique(index: int, ids: Mapping[str, list[str]], seen: str) -> str:
    """Raise for a tool use id an earlier message (or block) already used.

    Return ``seen`` (the log of the ids used so far, ``formats._ids``) with this message's.
    """
    mine: dict[str, None] = {}
    for call_id in (call_id for group in ids.values() for call_id in group):
        first = index if call_id in mine else first_use(seen, call_id)
        if first is not None:
            raise fail(
                _FORMAT,
                index,
                f"the tool use id {call_id!r:.60} is used by two calls",
                tool_use_id=call_id,
                first_index=first,
            )
        mine[call_id] = None
    return with_ids(seen, mine, index)
