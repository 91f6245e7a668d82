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

A history is read as a stream (``ViaChat.reader``): the Chat reader's state rides on the
framework reader's, with what a chunk's boundary would otherwise cut (the open call's turn id
and message, the exchange the last message belongs to), and a trailing message that sends
nothing waits for the next chunk, since the exchange it joins depends on what follows it.
"""

from __future__ import annotations

import dataclasses
from abc import abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, cast

from baseaicore import ValidationError

from cutctx._core.values import Role, Transcript, TranscriptTurn
from cutctx.formats._common import (
    Binding,
    Part,
    Pricer,
    collect,
    counting,
    fail,
)
from cutctx.formats._format import Format, Presentation, Rendered, WindowHooks, presentation_of
from cutctx.formats._marks import read_marks
from cutctx.formats._reader import Reader, ReaderState, Scanned, copied
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


class ViaChat[M](Format[M], WindowHooks[M], Presentation):
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
        kinds, read, refused = self.mapped(messages, offset)
        if refused is not None:
            raise refused
        return kinds, read

    def mapped(
        self, messages: Sequence[M], offset: int
    ) -> tuple[list[str], list[list[ChatMessage]], ValidationError | None]:
        """Return the kind and Chat messages of each message up to the first refused one.

        The refusal is returned, not raised: a reader lets a Chat rule the messages before it
        break come first (a history is refused at its first bad message, however it was split).

        Raises:
            ValidationError: for ``messages`` that are not a list.
        """
        if not isinstance(messages, Sequence) or isinstance(messages, str | bytes | bytearray):
            raise fail(self.name, None, f"messages must be a list, got {type(messages).__name__}")
        kinds: list[str] = []
        read: list[list[ChatMessage]] = []
        for index, message in enumerate(messages, offset):
            try:
                kind = self.kind_of(index, message)
                chats = self.chat_of(index, message)
            except ValidationError as error:
                return kinds, read, error
            kinds.append(kind)
            read.append(chats)
        return kinds, read, None

    def reader(
        self,
        *,
        estimator: TokenEstimator | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> Reader[M]:
        return _ViaChatReader(self, self.pricer(estimator).estimator, priority, pin)

    def settled(self, message: M) -> bool:
        """Whether ``message`` keeps its turn when more come: one that sends nothing may not."""
        try:
            self.kind_of(0, message)
            return bool(self.chat_of(0, message))
        except ValidationError:
            return True  # refused wherever it is read

    def pieces(
        self, message: Mapping[str, Any], *, estimator: TokenEstimator, tokens: int
    ) -> tuple[list[tuple[str, int]], int]:
        """Return the tool calls (name, tokens) of the Chat messages ``message`` is sent as."""
        calls: list[tuple[str, int]] = []
        for chat in self.chat_of(0, cast("M", message)):
            if chat.message.get("role") == "assistant":
                found, _ = presentation_of(OPENAI_CHAT).pieces(
                    chat.message, estimator=estimator, tokens=tokens
                )
                calls.extend(found)
        return calls, 0

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
        with _Renamed(self.name, {}):
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
        estimator = counting(estimator)
        pricer = Pricer.of(self.name, estimator)
        _, mapped = self.read(messages)
        flat = [chat.message for chats in mapped for chat in chats]
        owners = dict(enumerate(p for p, chats in enumerate(mapped) for _ in chats))
        with _Renamed(self.name, owners):
            return OPENAI_CHAT.count_tokens(flat, estimator=pricer.estimator, system=system)


class _ViaChatReader[M](Reader[M]):
    """Reads a framework's history as the Chat messages it is sent as, chunk by chunk.

    State: ``count`` (the framework messages read), ``chat`` (the Chat reader's state),
    ``opener`` (the history index and turn id of the message that made the Chat calls still
    open, as ``[index, turn id]``, or ``None``) and ``before`` (the exchange key of the last
    message that sent something).
    """

    __slots__ = ("_chat", "_fmt", "_pin", "_priority", "_state")

    def __init__(
        self,
        fmt: ViaChat[M],
        estimator: TokenEstimator,
        priority: Callable[[int, dict[str, Any]], int] | None,
        pin: Callable[[int, dict[str, Any]], bool] | None,
    ) -> None:
        self._fmt = fmt
        self._chat = OPENAI_CHAT.reader(estimator=estimator)  # scratch: set from the state
        self._priority, self._pin = priority, pin
        self._state = self._initial()

    def _initial(self) -> ReaderState:
        self._chat.reset()
        return {"count": 0, "chat": self._chat.getstate(), "opener": None, "before": None}

    def start(self, count: int) -> None:
        """Continue as if ``count`` messages had been read (their indices follow them)."""
        self._state = {**self._initial(), "count": count}

    def reset(self) -> None:
        self._state = self._initial()

    def getstate(self) -> ReaderState:
        state: ReaderState = copied(self._state)
        return state

    def setstate(self, state: ReaderState) -> None:
        fresh = self._initial()
        try:
            ok = isinstance(state, dict) and set(state) == set(fresh)
            ok = ok and type(state["count"]) is int and state["count"] >= 0
            opener, before = state["opener"], state["before"]
            ok = ok and (before is None or isinstance(before, str))
            ok = ok and (
                opener is None
                or (
                    isinstance(opener, list)
                    and len(opener) == 2
                    and type(opener[0]) is int
                    and isinstance(opener[1], str)
                )
            )
            if ok:
                self._chat.setstate(state["chat"])
        except (KeyError, TypeError, ValidationError):
            ok = False
        if not ok:
            raise fail(self._fmt.name, None, "not a reader state of this format", field="state")
        self._state = copied(state)

    def read(self, messages: Sequence[M], *, final: bool = False) -> Scanned[M]:
        fmt, state = self._fmt, self._state
        offset = int(state["count"])
        kinds, mapped, refused = fmt.mapped(messages, offset)
        end = len(mapped)
        if not final and refused is None:  # a trailing message that sends nothing waits
            while end and not mapped[end - 1]:
                end -= 1
        kinds, mapped = kinds[:end], mapped[:end]
        flat = [chat.message for chats in mapped for chat in chats]
        chat_state = state["chat"]
        first = int(chat_state["count"])
        owners = dict(
            enumerate((p for p, chats in enumerate(mapped, offset) for _ in chats), first)
        )
        if state["opener"] is not None and chat_state["opener"] is not None:
            owners.setdefault(int(chat_state["opener"]), state["opener"][0])
        self._chat.setstate(chat_state)
        with _Renamed(fmt.name, owners):
            chat = self._chat.read(flat, final=final and refused is None)
        if refused is not None:
            raise refused
        new_chat = self._chat.getstate()
        turns, parts, before, renamed = self._regroup(mapped, chat.turns, offset, state)
        sent = tuple(
            {"kind": kind, "messages": [c.message for c in chats]}
            for kind, chats in zip(kinds, mapped, strict=True)
        )
        read_marks(
            fmt.name, sent, turns, parts, {}, priority=self._priority, pin=self._pin, offset=offset
        )
        opener = state["opener"]
        if new_chat["opener"] is not None and new_chat["opener"] >= first:  # made in this chunk
            opener = [owners[new_chat["opener"]], renamed[new_chat["key"]]]
        self._state = {"count": offset + end, "chat": new_chat, "opener": opener, "before": before}
        return Scanned(tuple(turns), parts, sent, tuple(messages[:end]))

    def _regroup(
        self,
        mapped: list[list[ChatMessage]],
        chat_turns: Sequence[TranscriptTurn],
        offset: int,
        state: ReaderState,
    ) -> tuple[list[TranscriptTurn], dict[str, Part], str | None, dict[str, str]]:
        """Give the Chat turns their messages' ids and make each message one unit.

        Return the turns, their parts, the exchange key of the last message that sends
        something (``state``'s when none of these does) and each Chat turn id's new id.
        """
        renamed: dict[str, str] = {}  # a Chat turn id -> this format's turn id
        if state["opener"] is not None and state["chat"]["key"] is not None:
            renamed[state["chat"]["key"]] = state["opener"][1]  # a call of an earlier chunk
        placed: list[list[tuple[TranscriptTurn, ChatMessage]]] = []
        position = 0
        for number, chats in enumerate(mapped):
            index = offset + number
            own: list[tuple[TranscriptTurn, ChatMessage]] = []
            for k, chat in enumerate(chats):
                turn = chat_turns[position]
                position += 1
                renamed[turn.turn_id] = f"m{index}" if k == 0 else f"m{index}.{k}"
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
        before: str | None = state["before"]
        for number, own in enumerate(placed):
            index = offset + number
            key = keys[number]
            if not own:
                after = next((keys[n] for n in range(number + 1, len(placed)) if placed[n]), None)
                silent = TranscriptTurn(
                    f"m{index}",
                    Role.USER,
                    "",
                    0,
                    before if before is not None and before == after else None,
                )
                turns.append(silent)
                parts[silent.turn_id] = Part(silent, index, None, maskable=False, siblings=1)
                continue
            before = key
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
        return turns, parts, before, renamed


class _Renamed:
    """Re-raise ``OPENAI_CHAT``'s errors in the format's name and its history indices.

    ``owners`` maps the index of each Chat message an error may name to its history index.
    """

    def __init__(self, name: str, owners: Mapping[int, int]) -> None:
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
        if isinstance(index, int) and index in self.owners:
            history = self.owners[index]
            message = f"messages[{history}]: " + message.removeprefix(f"messages[{index}]: ")
            details["index"] = history
            first = details.get("first_index")
            if isinstance(first, int) and first in self.owners:
                details["first_index"] = self.owners[first]
        raise ValidationError(f"{self.name}: {message}", details=details) from None
