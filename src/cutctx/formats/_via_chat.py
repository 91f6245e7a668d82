"""A ``Format`` for a framework's message objects, priced as the OpenAI Chat messages they become.

A framework (LangChain, Pydantic AI) keeps its own message type and sends each message to an
OpenAI model as one or more Chat Completions messages. ``ViaChat`` reads a message through that
mapping (``chat_of``), lets ``OPENAI_CHAT`` read and price the Chat messages (so the two formats'
counts agree), and keeps the framework's objects as the originals: a kept message comes back as
the caller's own object, and only the framework subclass builds a masked copy or a summary.

The turns of one framework message travel together: a message that becomes several Chat
messages is one exchange (the call's, when it answers one), so a plan keeps or removes all of it.
Turn ids are ``m<i>`` for the first Chat message of history message ``i`` and ``m<i>.<k>`` for
its ``k``-th; a message that sends nothing (a framework-only record) has one turn priced 0.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from baseaicore import ValidationError

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._common import (
    Binding,
    Part,
    Pricer,
    collect,
    fail,
)
from cutctx.formats._format import Format, Rendered
from cutctx.formats._marks import read_marks
from cutctx.formats._reader import Scanned
from cutctx.formats.openai_chat import OPENAI_CHAT

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from cutctx._core.protocols import TokenEstimator
    from cutctx._core.report import CompactedTranscript

__all__ = ["ChatMessage", "ViaChat"]

_CHAT = OPENAI_CHAT.name


class ChatMessage(NamedTuple):
    """One Chat Completions message a framework message is sent as.

    ``block`` names the framework part it carries when that part is a tool result the format can
    mask (``None`` for a message masked whole); ``maskable`` is false for everything else, and a
    Chat ``tool`` message that is not maskable is priced as it is but planned as a user turn.
    ``pinned`` makes its turn untouchable (a summary the framework keeps in its history).
    """

    message: dict[str, Any]
    maskable: bool = False
    block: int | None = None
    pinned: bool = False


class ViaChat[M](Format[M]):
    """A framework's format: each message read as the Chat messages it is sent as.

    Subclasses name the format and implement ``kind_of`` (a short name of the message's type),
    ``chat_of`` (the Chat messages of one message), ``masked`` (a copy with tool results
    replaced by stubs) and ``summary`` (a labelled user-side message of the framework).
    """

    __slots__ = ()

    @abstractmethod
    def kind_of(self, index: int, message: object) -> str:
        """Return the kind of ``message`` (its type's short name); raise if it is not one."""

    @abstractmethod
    def chat_of(self, index: int, message: M) -> list[ChatMessage]:
        """Return the Chat messages ``message`` is sent as (none for a framework-only record)."""

    @abstractmethod
    def masked(self, message: M, stubs: Mapping[int | None, str]) -> M:
        """Return a copy of ``message`` whose tool results named by ``stubs`` hold the stubs."""

    @abstractmethod
    def summary(self, text: str, beside: Sequence[M]) -> M:
        """Return the message a summary becomes; ``beside`` are the view's messages near it."""

    def read(
        self, messages: Sequence[M], offset: int = 0
    ) -> tuple[list[str], list[list[ChatMessage]]]:
        """Return the kind and the Chat messages of each of ``messages`` (indices from ``offset``).

        Raises:
            ValidationError: for a non-list, or a message that is not one of the framework's.
        """
        if not isinstance(messages, Sequence) or isinstance(messages, str | bytes | bytearray):
            raise fail(self.name, None, f"messages must be a list, got {type(messages).__name__}")
        kinds: list[str] = []
        read: list[list[ChatMessage]] = []
        for index, message in enumerate(messages, offset):
            kinds.append(self.kind_of(index, message))
            read.append(self.chat_of(index, message))
        return kinds, read

    def scan(
        self,
        messages: Sequence[M],
        *,
        estimator: TokenEstimator,
        offset: int = 0,
        follows: M | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Scanned[M]:
        del follows  # every message's Chat messages are complete: calls end answered
        kinds, mapped = self.read(messages, offset)
        flat = [chat.message for chats in mapped for chat in chats]
        owners = [
            (offset + position, number)
            for position, chats in enumerate(mapped)
            for number in range(len(chats))
        ]
        with _Renamed(self.name, owners):
            chat = OPENAI_CHAT.scan(flat, estimator=estimator)
        turns, parts = self._regroup(mapped, chat.turns, offset)
        sent = tuple(
            {"kind": kind, "messages": [c.message for c in chats]}
            for kind, chats in zip(kinds, mapped, strict=True)
        )
        read_marks(self.name, sent, turns, parts, {}, priority=priority, pin=pin, offset=offset)
        return Scanned(tuple(turns), parts, sent, tuple(messages))

    def render(self, view: Transcript | CompactedTranscript, binding: Binding[M]) -> Rendered[M]:
        pieces = collect(self.name, view, binding)
        originals = binding.originals
        out: list[M | None] = []
        for piece in pieces:
            if piece.index is None:
                out.append(None)  # a summary: built once its neighbours are known
            elif piece.masked:
                out.append(self.masked(originals[piece.index], piece.masked))
            else:
                out.append(originals[piece.index])
        kept = [message for message in out if message is not None]
        for position, piece in enumerate(pieces):
            if piece.index is None:
                after = [message for message in out[position + 1 :] if message is not None]
                before = [message for message in out[:position] if message is not None]
                out[position] = self.summary(piece.text, [*after, *reversed(before)] or kept)
        return Rendered(
            [message for message in out if message is not None], [p.cost for p in pieces]
        )

    def fingerprint_data(self, message: M) -> dict[str, Any]:
        """Return ``message`` as JSON data (its kind and Chat messages), for a fingerprint.

        A framework's message object need not be JSON data (Pydantic AI's are dataclasses with
        timestamps); what it is sent as is, and equal content gives equal data in any process.

        Raises:
            ValidationError: for a message that is not one of the framework's.
        """
        kinds, mapped = self.read([message])
        return {"kind": kinds[0], "messages": [chat.message for chat in mapped[0]]}

    def head(self, system: object, *, estimator: TokenEstimator) -> tuple[TranscriptTurn, ...]:
        with _Renamed(self.name, []):
            return OPENAI_CHAT.head(system, estimator=estimator)

    def pricer(self, estimator: TokenEstimator | None) -> Pricer:
        return OPENAI_CHAT.pricer(estimator)

    def price_summary(self, text: str, *, estimator: TokenEstimator) -> int:
        return OPENAI_CHAT.price_summary(text, estimator=estimator)

    def request_overhead(self, estimator: TokenEstimator) -> int:
        return OPENAI_CHAT.request_overhead(estimator)

    def count_tokens(
        self,
        messages: Sequence[M],
        *,
        estimator: TokenEstimator | None = None,
        system: object = None,
    ) -> int:
        pricer = Pricer.of(self.name, estimator)
        _, mapped = self.read(messages)
        flat = [chat.message for chats in mapped for chat in chats]
        owners = [(position, n) for position, chats in enumerate(mapped) for n in range(len(chats))]
        with _Renamed(self.name, owners):
            return OPENAI_CHAT.count_tokens(flat, estimator=pricer.estimator, system=system)

    def _regroup(
        self, mapped: list[list[ChatMessage]], chat_turns: Sequence[TranscriptTurn], offset: int
    ) -> tuple[list[TranscriptTurn], dict[str, Part]]:
        """Give the Chat turns their messages' ids and make each message one unit."""
        renamed: dict[str, str] = {}  # a Chat turn id -> this format's turn id
        placed: list[list[tuple[TranscriptTurn, ChatMessage]]] = []
        position = 0
        for number, chats in enumerate(mapped):
            index = offset + number
            own: list[tuple[TranscriptTurn, ChatMessage]] = []
            for k, chat in enumerate(chats):
                turn = chat_turns[position]
                position += 1
                turn_id = f"m{index}" if k == 0 else f"m{index}.{k}"
                renamed[turn.turn_id] = turn_id
                own.append((turn, chat))
            placed.append(own)
        # A message's Chat turns share at most one key (its results answer the call just before
        # them); a message of several Chat messages without one is a unit of its own.
        keys: list[str | None] = []
        for number, own in enumerate(placed):
            found = [renamed[turn.tool_call_id] for turn, _ in own if turn.tool_call_id is not None]
            if found:
                keys.append(found[0])
            else:
                keys.append(f"m{offset + number}" if len(own) > 1 else None)
        turns: list[TranscriptTurn] = []
        parts: dict[str, Part] = {}
        for number, own in enumerate(placed):
            index = offset + number
            key = keys[number]
            if not own:
                turns.append(_silent(index, number, keys, placed))
                parts[turns[-1].turn_id] = Part(turns[-1], index, None, maskable=False, siblings=1)
                continue
            for k, (turn, chat) in enumerate(own):
                role = turn.role
                if role is Role.TOOL and not chat.maskable:
                    role = Role.USER  # a result the framework cannot mask: kept or removed whole
                made = dataclasses.replace(
                    turn,
                    turn_id=f"m{index}" if k == 0 else f"m{index}.{k}",
                    role=role,
                    tool_call_id=key,
                    pinned=turn.pinned or chat.pinned,
                )
                turns.append(made)
                parts[made.turn_id] = Part(
                    made, index, chat.block, maskable=role is Role.TOOL, siblings=len(own)
                )
        return turns, parts


def _silent(
    index: int,
    number: int,
    keys: list[str | None],
    placed: list[list[tuple[TranscriptTurn, ChatMessage]]],
) -> TranscriptTurn:
    """Return the turn of a message that sends nothing: inside an exchange, part of it."""
    before = next((keys[n] for n in range(number - 1, -1, -1) if placed[n]), None)
    after = next((keys[n] for n in range(number + 1, len(placed)) if placed[n]), None)
    key = before if before is not None and before == after else None
    return TranscriptTurn(f"m{index}", Role.USER, "", 0, key)


class _Renamed:
    """Re-raise ``OPENAI_CHAT``'s errors in the format's name and its history indices.

    ``owners[j]`` is the history index of Chat message ``j`` (and its place in that message).
    """

    def __init__(self, name: str, owners: Sequence[tuple[int, int]]) -> None:
        self.name, self.owners = name, owners

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        if not isinstance(error, ValidationError) or error.details.get("format") != _CHAT:
            return
        details = dict(error.details)
        details["format"] = self.name
        message = error.message.removeprefix(f"{_CHAT}: ")
        index = details.get("index")
        if isinstance(index, int) and 0 <= index < len(self.owners):
            history = self.owners[index][0]
            message = f"messages[{history}]: " + message.removeprefix(f"messages[{index}]: ")
            details["index"] = history
            first = details.get("first_index")
            if isinstance(first, int) and 0 <= first < len(self.owners):
                details["first_index"] = self.owners[first][0]
        raise ValidationError(f"{self.name}: {message}", details=details) from None
