"""A message's marks: ``sticky`` and ``priority`` keys, the callables in their place, tool names.

A format reads its messages' marks onto their turns (pinned, ``cutctx.priority``,
``cutctx.tool_name``) and sends a marked message as a copy without its ``sticky``/``priority``
keys; the window's state rebuilds that copy with ``unmarked``.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Final

from cutctx._core.metadata import (
    FRAMING_METADATA,
    PRIORITY_KEY,
    PRIORITY_METADATA,
    STICKY_KEY,
    TOOL_NAME_METADATA,
)
from cutctx._core.values import Role
from cutctx.formats._common import fail

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Mapping, Sequence

    from cutctx._core.values import TranscriptTurn
    from cutctx.formats._common import Part

__all__ = [
    "OBSERVATION_KEY_PREFIX",
    "PRIORITY_KEY",
    "STICKY_KEY",
    "read_marks",
    "read_observations",
    "unmarked",
]

OBSERVATION_KEY_PREFIX: Final = "observation:"
"""How an exchange an observation joins is keyed: the prefix, then its assistant message's index.

With ``observation=``, every assistant message without a call carries this key (an exchange of
one until an observation follows it), so the key is known from the index alone, whichever run of
messages the observation is read in.
"""

_MARK_KEYS: Final = (STICKY_KEY, PRIORITY_KEY)


def unmarked(message: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``message`` without the ``sticky``/``priority`` keys: what is sent of it."""
    return {key: value for key, value in message.items() if key not in _MARK_KEYS}


def read_marks(
    fmt: str,
    items: tuple[dict[str, Any], ...],
    turns: list[TranscriptTurn],
    parts: dict[str, Part],
    tool_names: Mapping[str, str],
    *,
    priority: Callable[[int, dict[str, Any]], int] | None = None,
    pin: Callable[[int, dict[str, Any]], bool] | None = None,
    offset: int = 0,
) -> tuple[dict[str, Any], ...]:
    """Mark the turns of ``items`` in place; return the messages as they are to be sent.

    ``items`` come after ``offset`` earlier messages: the callables get history indices.

    A message's ``sticky: true`` or a true ``pin(index, message)`` pins its turns; its
    ``priority`` key, or ``priority(index, message)`` in its place, becomes their
    ``cutctx.priority``; ``tool_names`` (turn id to tool) becomes ``cutctx.tool_name``. A
    message with either key is sent as a copy without both; any other is sent as it is.

    Raises:
        ValidationError: naming the message for a ``sticky`` that is not a bool or a
            ``priority`` that is not an int (either key's or either callable's), or a
            ``priority``/``pin`` that is not callable.
    """
    for name, function in (("priority", priority), ("pin", pin)):
        if function is not None and not callable(function):
            raise fail(fmt, None, f"{name} must be callable(index, message)", field=name)
    marks: dict[int, tuple[bool, str | None]] = {}
    sent: list[dict[str, Any]] | None = None
    for position, message in enumerate(items):
        index = offset + position
        sticky, rank = False, None
        if STICKY_KEY in message or PRIORITY_KEY in message:
            sticky = _flag(fmt, index, message.get(STICKY_KEY, False), "sticky")
            if PRIORITY_KEY in message:
                rank = _integer(fmt, index, message[PRIORITY_KEY], "priority")
            if sent is None:
                sent = list(items)
            sent[position] = unmarked(message)
        if pin is not None:
            sticky = _flag(fmt, index, pin(index, message), "pin(index, message)") or sticky
        if priority is not None:
            rank = _integer(fmt, index, priority(index, message), "priority(index, message)")
        if sticky or rank is not None:
            marks[index] = (sticky, None if rank is None else str(rank))
    if marks or tool_names:
        _mark_turns(turns, parts, marks, tool_names)
    return items if sent is None else tuple(sent)


def read_callables(
    fmt: str,
    priority: Callable[[int, dict[str, Any]], int] | None,
    pin: Callable[[int, dict[str, Any]], bool] | None,
) -> tuple[
    Callable[[int, dict[str, Any]], int] | None, Callable[[int, dict[str, Any]], bool] | None
]:
    """Return ``priority`` and ``pin`` once checked callable (or ``None``).

    Raises:
        ValidationError: for one that is not callable.
    """
    for name, function in (("priority", priority), ("pin", pin)):
        if function is not None and not callable(function):
            raise fail(fmt, None, f"{name} must be callable(index, message)", field=name)
    return priority, pin


def mark_one(  # noqa: PLR0917 - the reader's one call site
    fmt: str,
    index: int,
    message: dict[str, Any],
    marks: dict[int, tuple[bool, str | None]],
    priority: Callable[[int, dict[str, Any]], int] | None,
    pin: Callable[[int, dict[str, Any]], bool] | None,
) -> dict[str, Any]:
    """Read the marks of message ``index`` into ``marks``; return the message as it is sent.

    The marks are those of ``read_marks``; ``mark_turns`` puts them on the turns.
    """
    sticky, rank = False, None
    shown = message
    if STICKY_KEY in message or PRIORITY_KEY in message:
        sticky = _flag(fmt, index, message.get(STICKY_KEY, False), "sticky")
        if PRIORITY_KEY in message:
            rank = _integer(fmt, index, message[PRIORITY_KEY], "priority")
        shown = unmarked(message)
    if pin is not None:
        sticky = _flag(fmt, index, pin(index, message), "pin(index, message)") or sticky
    if priority is not None:
        rank = _integer(fmt, index, priority(index, message), "priority(index, message)")
    if sticky or rank is not None:
        marks[index] = (sticky, None if rank is None else str(rank))
    return shown


def mark_turns(
    turns: list[TranscriptTurn],
    parts: dict[str, Part],
    marks: Mapping[int, tuple[bool, str | None]],
    tool_names: Mapping[str, str],
) -> None:
    """Put ``marks`` (by message index) and ``tool_names`` (by turn id) on the turns, in place."""
    if marks or tool_names:
        _mark_turns(turns, parts, marks, tool_names)


def _mark_turns(
    turns: list[TranscriptTurn],
    parts: dict[str, Part],
    marks: Mapping[int, tuple[bool, str | None]],
    tool_names: Mapping[str, str],
) -> None:
    """Replace each marked turn (pinned, priority, tool name) in ``turns`` and ``parts``."""
    for position, turn in enumerate(turns):
        part = parts[turn.turn_id]
        mark = None if part.index is None else marks.get(part.index)
        tool_name = tool_names.get(turn.turn_id)
        if mark is None and tool_name is None:
            continue
        metadata = dict(turn.metadata)
        pinned = turn.pinned
        if mark is not None:
            pinned = pinned or mark[0]
            if mark[1] is not None:
                metadata[PRIORITY_METADATA] = mark[1]
        if tool_name is not None:
            metadata[TOOL_NAME_METADATA] = tool_name
        marked = dataclasses.replace(turn, pinned=pinned, metadata=metadata)
        turns[position] = marked
        parts[turn.turn_id] = dataclasses.replace(part, turn=marked)


def _flag(fmt: str, index: int, value: object, what: str) -> bool:
    if not isinstance(value, bool):
        raise fail(fmt, index, f"{what} must be true or false, got {type(value).__name__}")
    return value


def _integer(fmt: str, index: int, value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise fail(fmt, index, f"{what} must be an integer, got {type(value).__name__}")
    return value


def read_observations(
    fmt: str,
    turns: Sequence[TranscriptTurn],
    parts: Mapping[str, Part],
    sent: Sequence[dict[str, Any]],
    observation: Callable[[int, dict[str, Any]], bool],
    *,
    offset: int = 0,
    framing: int = 0,
    pinned: Container[int] = (),
) -> tuple[list[TranscriptTurn], dict[str, Part]]:
    """Return ``turns`` and ``parts`` with each observation read as a tool result.

    An observation is a user message read whole as one turn (no tool result, no call) for which
    ``observation(index, message)`` is true: its turn becomes a ``TOOL`` turn, maskable, in the
    exchange of the assistant message just before it (one of its own when there is none), and
    carries ``framing`` (what its message costs beyond a stub's price) in ``cutctx.framing``.
    Every assistant turn without a call gets the key an observation after it joins. ``sent``
    holds the messages from history index ``offset`` on. Unmarked user messages are untouched,
    and so are pinned ones: a message in ``pinned`` (history indices: the ``keep_first`` ones) or
    with a pinned turn (``pin=``) is never read as an observation, and the predicate is not
    asked about it (a pinned assistant message is keyed all the same: an observation after it
    joins its exchange, which its pin makes unremovable).

    Raises:
        ValidationError: naming the message, for an ``observation`` that returns no bool.
    """
    by_message: dict[int, list[int]] = {}
    for position, turn in enumerate(turns):
        index = parts[turn.turn_id].index
        if index is not None:
            by_message.setdefault(index, []).append(position)
    out, read = list(turns), dict(parts)
    for index, positions in by_message.items():
        members = [turns[position] for position in positions]
        if all(t.role is Role.ASSISTANT and t.tool_call_id is None for t in members):
            key = f"{OBSERVATION_KEY_PREFIX}{index}"
            for position in positions:
                _replace(out, read, position, key)
            continue
        turn = members[0]
        if (
            len(members) != 1
            or turn.role is not Role.USER
            or turn.tool_call_id is not None
            or parts[turn.turn_id].block is not None
            or turn.pinned
            or index in pinned
        ):
            continue  # not read whole as one user turn, or pinned: a pin wins over the predicate
        mark = observation(index, sent[index - offset])
        if not _flag(fmt, index, mark, "observation(index, message)"):
            continue
        metadata = dict(turn.metadata)
        if framing:
            metadata[FRAMING_METADATA] = str(framing)
        key = f"{OBSERVATION_KEY_PREFIX}{index - 1}"
        _replace(out, read, positions[0], key, Role.TOOL, metadata, maskable=True)
    return out, read


def _replace(  # noqa: PLR0917 - one private helper, its fields as named
    turns: list[TranscriptTurn],
    parts: dict[str, Part],
    position: int,
    tool_call_id: str,
    role: Role | None = None,
    metadata: Mapping[str, str] | None = None,
    *,
    maskable: bool | None = None,
) -> None:
    """Replace the turn at ``position`` (and its part) with the fields given changed."""
    old = turns[position]
    turn = dataclasses.replace(
        old,
        tool_call_id=tool_call_id,
        role=old.role if role is None else role,
        metadata=old.metadata if metadata is None else metadata,
    )
    turns[position] = turn
    part = parts[turn.turn_id]
    parts[turn.turn_id] = dataclasses.replace(
        part, turn=turn, maskable=part.maskable if maskable is None else maskable
    )
