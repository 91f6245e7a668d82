"""``Reader``: a format's reading of one history, chunk by chunk, with its state as JSON data.

A reader is to a history what ``codecs.IncrementalDecoder`` is to a byte stream: it carries from
one ``read(chunk)`` to the next what the rules spanning a boundary need (the calls still waiting
for their answers, the ids already used, the role before), so reading a history in any split
gives the turns, the messages as sent and the verdict that reading it whole gives. Its state is
plain JSON data (``getstate``/``setstate``), small enough to be stored with every step of a
window. ``StreamReader`` is the driver the built-in formats share.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Final, NamedTuple

from baseaicore import ValidationError

from cutctx._core.values import Role, TranscriptTurn
from cutctx.formats._common import Part, Pricer, fail, joined, read_message
from cutctx.formats._marks import mark_one, mark_turns, read_callables

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["Answer", "Reader", "ReaderState", "Scanned", "StreamReader"]

type ReaderState = dict[str, Any]
"""A reader's state: plain JSON data (dicts with string keys, lists, strings, numbers, booleans,
``None``), so ``json.loads(json.dumps(state))`` restores the same reader. The keys are the
format's own; ``"count"``, the number of messages read so far, is in every built-in's.

.. versionadded:: 0.1.1
"""


class Scanned[M](NamedTuple):
    """What a reader read of a run of messages.

    ``turns`` in order, their origins in ``parts`` (by turn id; every ``Part.index`` is the
    message's position in the whole history), the messages as they are to be sent (``sent``:
    dicts, never the caller's objects changed) and the caller's objects as they are returned
    when kept (``originals``), one of each per message read: ``len(sent)`` is how many of the
    messages given were read.

    .. versionadded:: 0.1.1
    """

    turns: tuple[TranscriptTurn, ...]
    parts: Mapping[str, Part]
    sent: tuple[dict[str, Any], ...]
    originals: tuple[M, ...]


class Reader[M](ABC):
    """Reads one history of a format, in chunks, carrying its state from one to the next.

    ``read(messages)`` reads the messages that come next and returns their turns; with
    ``final=True`` the history ends after them (a call left unanswered is refused then).
    Without ``final`` a reader may leave trailing messages whose turns depend on what follows
    (Responses' reasoning items, Anthropic's empty last assistant message) unread: they are the
    ones after ``len(scanned.sent)``, to be given again at the start of the next chunk, the way
    ``codecs.utf_8_decode`` returns how much it consumed. Whatever the split, the turns, parts,
    messages sent and the error of an invalid history are those of reading it whole. A read
    that raises leaves the reader as it was.

    Make one with ``Format.reader(estimator=..., priority=..., pin=...)``.

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    @abstractmethod
    def read(self, messages: Sequence[M], *, final: bool = False) -> Scanned[M]:
        """Read the next ``messages``; return the turns of those read (all of them if ``final``).

        Raises:
            ValidationError: for a message the provider would refuse, naming its history index.
        """

    @abstractmethod
    def getstate(self) -> ReaderState:
        """Return the reader's state: JSON data, a copy the reader never changes."""

    @abstractmethod
    def setstate(self, state: ReaderState) -> None:
        """Continue from ``state`` (one ``getstate`` returned, perhaps through JSON).

        Raises:
            ValidationError: for a value that is not a state of this format's readers.
        """

    @abstractmethod
    def reset(self) -> None:
        """Start over at the beginning of a history."""

    @property
    def count(self) -> int:
        """How many messages the reader has read."""
        return int(self.getstate()["count"])


class StreamReader[M](Reader[M]):
    """The built-in formats' reader: a message at a time, the rules in ``message``/``finish``.

    A subclass gives ``initial()`` (its fresh state, with ``"count": 0``), ``message(state,
    index, item, out)`` (read one message, already a dict, into ``out``: its turns, parts and
    tool names) and ``finish(state)`` (the checks at the end of a history), and names its
    format in ``fmt``. ``settled`` says which trailing messages wait for the next chunk; without
    ``strict`` only the shape of each field is checked, not the provider's rules (what
    ``count_tokens`` reads). The driver converts each message, reads its marks, keeps the
    caller's objects and commits the state only when the whole chunk is read.
    """

    __slots__ = ("_pin", "_pricer", "_priority", "_settled", "_state", "strict")

    fmt: ClassVar[str]

    def __init__(
        self,
        pricer: Pricer,
        *,
        strict: bool = True,
        settled: Callable[[object], bool] | None = None,
        priority: Callable[[int, dict[str, Any]], int] | None = None,
        pin: Callable[[int, dict[str, Any]], bool] | None = None,
    ) -> None:
        self.strict = strict
        self._pricer = pricer
        self._settled = settled
        self._priority, self._pin = read_callables(self.fmt, priority, pin)
        self._state = self.initial()

    @property
    def pricer(self) -> Pricer:
        """The pricer of this reader's pieces."""
        return self._pricer

    @abstractmethod
    def initial(self) -> ReaderState:
        """Return the state at the start of a history."""

    @abstractmethod
    def message(self, state: ReaderState, index: int, item: dict[str, Any], out: Out) -> None:
        """Read message ``index`` (``item``) into ``out``, updating ``state`` in place."""

    def finish(self, state: ReaderState) -> None:
        """Raise for what a history may not end with (``state`` is after its last message)."""
        del state

    def item(self, index: int, message: M) -> dict[str, Any]:
        """Return message ``index`` read as a dict (a new one where it must change)."""
        return read_message(self.fmt, index, message)

    def start(self, count: int) -> None:
        """Continue as if ``count`` messages had been read (their ids and indices follow them)."""
        self._state = {**self.initial(), "count": count}

    def read(self, messages: Sequence[M], *, final: bool = False) -> Scanned[M]:
        if not isinstance(messages, Sequence) or isinstance(messages, str | bytes | bytearray):
            raise fail(self.fmt, None, f"messages must be a list, got {type(messages).__name__}")
        end = len(messages)
        if not final and self._settled is not None:
            while end and not self._settled(messages[end - 1]):
                end -= 1
        # The chunk's messages change a copy, adopted when every one was read (an empty chunk
        # changes nothing: the end of a history is checked on the state as it is).
        state = copied(self._state) if end else self._state
        offset = int(state["count"])
        out = Out()
        sent: list[dict[str, Any]] = []
        originals: list[M] = []
        for position in range(end):
            index = offset + position
            message = messages[position]
            item = self.item(index, message)
            out.last = final and position == end - 1
            try:
                self.message(state, index, item, out)
            except ValidationError as error:  # one that names no message: this one, then
                if "index" in error.details:
                    raise
                raise ValidationError(
                    f"{self.fmt}: messages[{index}]: {error}",
                    details={**error.details, "format": self.fmt, "index": index},
                ) from None
            shown = mark_one(self.fmt, index, item, out.marks, self._priority, self._pin)
            sent.append(shown)
            originals.append(message if shown is item else shown)  # type: ignore[arg-type]
        state["count"] = offset + end
        if final:
            self.finish(state)
        mark_turns(out.turns, out.parts, out.marks, out.tool_names)
        self._state = state
        return Scanned(tuple(out.turns), out.parts, tuple(sent), tuple(originals))

    def getstate(self) -> ReaderState:
        state: ReaderState = copied(self._state)
        return state

    def setstate(self, state: ReaderState) -> None:
        fresh = self.initial()
        if (
            not isinstance(state, dict)
            or set(state) != set(fresh)
            or isinstance(state.get("count"), bool)
            or not isinstance(state.get("count"), int)
            or state["count"] < 0
        ):
            raise fail(self.fmt, None, "not a reader state of this format", field="state")
        taken = self.taken(copied(state))
        # A value of another kind where the fresh state holds a map, a list or a text (an
        # edited state's) is refused here, not by the read that would trip on it.
        for key, value in fresh.items():
            if isinstance(value, dict | list | str) and type(taken[key]) is not type(value):
                raise fail(
                    self.fmt, None, f"not a reader state of this format ({key})", field="state"
                )
        self._state = taken

    def taken(self, state: ReaderState) -> ReaderState:
        """Return ``state`` (a copy ``setstate`` took, its keys checked) as this reader holds it.

        A subclass reads earlier shapes here, or raises for a state it cannot continue from.
        """
        return state

    def reset(self) -> None:
        self._state = self.initial()


class Out:
    """What a chunk's messages became: turns in order, their parts, tool names by turn id."""

    __slots__ = ("last", "marks", "parts", "tool_names", "turns")

    def __init__(self) -> None:
        self.turns: list[TranscriptTurn] = []
        self.parts: dict[str, Part] = {}
        self.tool_names: dict[str, str] = {}
        self.marks: dict[int, tuple[bool, str | None]] = {}  # pinned, priority by message
        self.last = False  # the message being read ends the history

    def add(self, turn: TranscriptTurn, part: Part) -> None:
        """Add one turn and where it came from."""
        self.turns.append(turn)
        self.parts[turn.turn_id] = part

    def whole(self, turn: TranscriptTurn, index: int) -> None:
        """Add the one turn message ``index`` is read as (never masked)."""
        self.add(turn, Part(turn, index, None, maskable=False, siblings=1))

    def answers(  # noqa: PLR0917 - one rule for every format that splits a message of answers
        self,
        framing: int,
        index: int,
        key: str | None,
        answers: Sequence[Answer],
        content: Sequence[Any],
        where: str,
        part: Callable[[object, str], tuple[str, int]],
    ) -> None:
        """Add the turns of message ``index``, whose ``content`` (at ``where``) holds results.

        Each answer is a ``TOOL`` turn of its own (the first ``m<index>``, carrying the
        message's ``framing``, the others ``m<index>.<position>``), so each can be masked alone;
        the other pieces, each read by ``part(value, place)`` (as ``render_content`` reads
        them), are one ``USER`` turn ``m<index>.<first position>``. All of them share the call
        group ``key``; an answer's tool name is recorded.
        """
        turn_id = f"m{index}"
        answered = {answer.position for answer in answers}
        rest = [position for position in range(len(content)) if position not in answered]
        siblings = len(answers) + (1 if rest else 0)
        for number, answer in enumerate(answers):
            part_id = turn_id if number == 0 else f"{turn_id}.{answer.position}"
            cost = answer.cost + (framing if number == 0 else 0)
            turn = TranscriptTurn(part_id, Role.TOOL, answer.text, cost, key)
            self.add(turn, Part(turn, index, answer.position, maskable=True, siblings=siblings))
            if answer.name is not None:
                self.tool_names[part_id] = answer.name
        if rest:
            read = [part(content[position], f"{where}[{position}]") for position in rest]
            text = joined([text for text, _ in read if text])
            turn = TranscriptTurn(
                f"{turn_id}.{rest[0]}", Role.USER, text, sum(cost for _, cost in read), key
            )
            self.add(turn, Part(turn, index, rest[0], maskable=False, siblings=siblings))


class Answer(NamedTuple):
    """One tool result in a message: its position, text, price and the tool's name if known."""

    position: int
    text: str
    cost: int
    name: str | None


_ATOMS: Final = frozenset({str, int, float, bool, type(None)})


def copied(value: Any) -> Any:  # noqa: ANN401 - JSON data of any shape
    """Return a copy of JSON data (dicts and lists copied all the way down)."""
    # A reader's state holds every tool use id seen (a dict of atoms), copied at every read: a
    # container of atoms alone is copied in C (its item types gathered by one ``map``), and
    # atoms elsewhere are tested inline, not by a call each.
    if type(value) is dict:
        if set(map(type, value.values())) <= _ATOMS:
            return value.copy()
        return {key: item if type(item) in _ATOMS else copied(item) for key, item in value.items()}
    if type(value) is list:
        if set(map(type, value)) <= _ATOMS:
            return value.copy()
        return [item if type(item) in _ATOMS else copied(item) for item in value]
    return value
