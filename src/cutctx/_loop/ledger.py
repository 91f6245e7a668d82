"""What a window has read of its history: each message's turns, priced once, in order.

The ledger scans only the messages it has not seen (the format reads them as the continuation
of the ones before), pins the first ``keep_first`` non-system messages as it goes, and keeps the
running fingerprint of what it holds. Restored from a state, it starts *cold*: it knows how many
messages it holds, their fingerprint, every turn's price and the decisions by turn id; the first
history is checked against the fingerprint (``attach``), and the old messages are read again
(cheaply, prices taken from the state) only when a step needs their turns: ``warm``, the one
place that does, which returns the decisions placed on those turns.
"""

from __future__ import annotations

import dataclasses
import operator
from typing import TYPE_CHECKING, Any

from baseaicore import ValidationError

from cutctx._core.estimators import CharRatioEstimator
from cutctx._core.values import Role, TranscriptTurn
from cutctx._loop.fingerprint import Fingerprint
from cutctx._loop.jsondata import refused
from cutctx.formats import Binding, Part, ReaderState, Scanned
from cutctx.formats._format import hooks_of
from cutctx.formats._marks import read_observations

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from cutctx._core.protocols import TokenEstimator
    from cutctx._loop.decisions import Decisions, SavedDecisions
    from cutctx._loop.settings import Pin, Settings
    from cutctx.formats import Format

__all__ = [
    "REQUEST_TURN_ID",
    "Ledger",
    "Reading",
    "first_messages",
    "message_costs",
    "observe",
    "pin_first",
    "unfit",
]

REQUEST_TURN_ID = "request"
"""The pinned turn that holds what a request costs beyond its messages (never rendered)."""


def unfit(prices: int, turns: int) -> ValidationError:
    """Return the error for a state whose ``prices`` do not fit the history's ``turns``."""
    return refused(
        f"the state does not fit the history ({prices} prices for {turns} turns)",
        prices=prices,
        turns=turns,
    )


def message_costs(read: Scanned[Any]) -> list[int]:
    """Return each message's price as ``read`` priced it: the sum of its turns'."""
    costs: dict[int | None, int] = {}
    for turn in read.turns:
        index = read.parts[turn.turn_id].index
        costs[index] = costs.get(index, 0) + turn.token_estimate
    return list(costs.values())


def first_messages(
    turns: Sequence[TranscriptTurn], parts: Mapping[str, Part], count: int
) -> list[int]:
    """Return the indices of the first ``count`` non-system messages among ``turns``, in order.

    ``parts`` maps each turn id to its origin; a message counts if any of its turns is not
    ``SYSTEM`` (the task). These are the messages ``keep_first`` pins.
    """
    firsts: list[int] = []
    if count <= 0:
        return firsts
    seen: set[int] = set()
    for turn in turns:
        index = parts[turn.turn_id].index
        if index is not None and turn.role is not Role.SYSTEM and index not in seen:
            if len(firsts) == count:
                break
            seen.add(index)
            firsts.append(index)
    return firsts


def pin_first(
    turns: Sequence[TranscriptTurn], parts: Mapping[str, Part], count: int
) -> tuple[list[TranscriptTurn], list[int]]:
    """Return ``turns`` with those of their first ``count`` non-system messages pinned.

    Also return those messages' indices, in order (at most ``count``; see ``first_messages``).
    """
    firsts = first_messages(turns, parts, count)
    if not firsts:
        return list(turns), []
    chosen = set(firsts)
    pinned = [
        dataclasses.replace(turn, pinned=True)
        if not turn.pinned and parts[turn.turn_id].index in chosen
        else turn
        for turn in turns
    ]
    return pinned, sorted(firsts)


def observe(  # noqa: PLR0917 - the reading, the predicate and where it starts
    fmt: Format[Any],
    turns: Sequence[TranscriptTurn],
    parts: Mapping[str, Part],
    sent: Sequence[dict[str, Any]],
    observation: Pin,
    estimator: TokenEstimator,
    *,
    keep_first: int,
    offset: int = 0,
) -> tuple[list[TranscriptTurn], dict[str, Part]]:
    """Return ``turns`` and ``parts`` with the observations read as tool results.

    The one reading of ``observation=`` (the window's and ``compact_messages``'): each user
    message read whole for which ``observation(index, message)`` is true becomes a tool result
    (``read_observations``), priced as it is sent. A pin wins over the predicate: the first
    ``keep_first`` non-system messages among ``turns`` (the ones ``pin_first`` pins next), every
    turn already pinned (``pin=``) and every system message are never read as observations, so
    they are never masked, excerpted, recalled or dropped. ``sent`` holds the messages from
    history index ``offset`` on.

    Raises:
        ValidationError: naming the message, for an ``observation`` that returns no bool.
    """
    return read_observations(
        fmt.name,
        turns,
        parts,
        sent,
        observation,
        offset=offset,
        framing=fmt.pricer(estimator).role("user"),
        pinned=frozenset(first_messages(turns, parts, keep_first)),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Reading:
    """The format's reader state (JSON data) after the first ``count`` messages (``None``: none).

    ``restored``: the state came from a window's saved state, not from this process's reader.
    """

    count: int
    state: ReaderState | None
    restored: bool = False


@dataclasses.dataclass(slots=True)
class _Cold:
    """Messages a restored ledger holds but has not read again.

    How many, their turns' prices and the decisions on them (by turn id); ``fingerprint`` is
    the state's until a history is attached (``None`` after), ``tail`` the messages held since,
    read already.
    """

    count: int
    prices: list[int]
    decisions: SavedDecisions
    fingerprint: str | None
    tail: list[tuple[Scanned[Any], list[int]]] = dataclasses.field(default_factory=list)


class Ledger:
    """Every message the window has read: turns, origins, the messages as sent, the callers'."""

    __slots__ = (
        "_pending",
        "_reader",
        "cold",
        "ends",
        "first_indices",
        "firsts",
        "fmt",
        "head",
        "index_of",
        "originals",
        "parts",
        "reading",
        "running",
        "seen",
        "sent",
        "settings",
        "turns",
    )

    def __init__(self, fmt: Format[Any], settings: Settings) -> None:
        self.fmt = fmt
        self.settings = settings
        self.head = self._head()
        # The format's reader is scratch: every ``read`` sets it from ``reading`` first, so a
        # copy of the ledger may share it (one step at a time uses it).
        self._reader = fmt.reader(
            estimator=settings.estimator, priority=settings.priority, pin=settings.pin
        )
        self._pending: tuple[int, int, Reading] | None = None  # read, not held yet
        self.clear()

    def _head(self) -> tuple[TranscriptTurn, ...]:
        """Return the head's turns for the settings: the system prompt, the request's extras."""
        fmt, settings = self.fmt, self.settings
        # What a request costs beyond its messages (a reply's priming) is held as one more
        # pinned turn that is never rendered, so every budget leaves room for it.
        overhead = fmt.request_overhead(settings.estimator)
        extra = (TranscriptTurn(REQUEST_TURN_ID, Role.SYSTEM, "", overhead, pinned=True),)
        prices = settings.head_prices
        if prices is None:
            head = fmt.head(settings.system, estimator=settings.estimator)
        else:  # restored: the turns read cheaply, the prices the state's
            read = fmt.head(settings.system, estimator=CharRatioEstimator())
            if len(read) != len(prices):
                raise unfit(len(prices), len(read))
            head = tuple(
                dataclasses.replace(turn, token_estimate=price)
                for turn, price in zip(read, prices, strict=True)
            )
        return (*head, *(extra if overhead else ()))

    def rehead(self, settings: Settings) -> int:
        """Take a new head (a new system prompt in ``settings``), the messages kept.

        Return how many turns the head grew by (the held turns' indices move by as many).
        """
        old = self.head
        self.settings = settings
        self.head = self._head()
        moved = len(self.head) - len(old)
        for turn in old:
            del self.parts[turn.turn_id], self.index_of[turn.turn_id]
        self.turns[: len(old)] = self.head
        for turn in self.head:
            self.parts[turn.turn_id] = Part(turn, None, None, maskable=False, siblings=1)
        if moved:
            self.index_of.clear()
            self.index_of.update({turn.turn_id: index for index, turn in enumerate(self.turns)})
            self.ends[:] = [end + moved for end in self.ends]
        else:
            self.index_of.update({turn.turn_id: index for index, turn in enumerate(self.head)})
        return moved

    def clear(self) -> None:
        """Forget every message."""
        self.turns: list[TranscriptTurn] = list(self.head)
        self.parts: dict[str, Part] = {
            turn.turn_id: Part(turn, None, None, maskable=False, siblings=1) for turn in self.head
        }
        self.index_of = {turn.turn_id: index for index, turn in enumerate(self.head)}
        self.sent: list[dict[str, Any]] = []
        self.originals: list[Any] = []
        self.seen: list[Any] = []  # the caller's messages, compared by content
        self.ends: list[int] = []  # each message's end in ``turns`` (exclusive)
        self.firsts = 0  # messages pinned as the first ones (``keep_first``)
        self.first_indices: list[int] = []  # which ones (known once warm)
        self.running: Fingerprint | None = None
        self.cold: _Cold | None = None
        # The format's reader state after the held messages it has settled (all but a trailing
        # run whose turns the next message may change), and how many those are.
        self.reading: Reading = Reading(0, None)

    def copy(self) -> Ledger:
        """Return a copy that may be changed without touching this ledger."""
        made = object.__new__(Ledger)
        made.fmt, made.settings, made.head = self.fmt, self.settings, self.head
        made.turns, made.parts = list(self.turns), dict(self.parts)
        made.index_of, made.sent = dict(self.index_of), list(self.sent)
        made.originals, made.seen, made.ends = (
            list(self.originals),
            list(self.seen),
            list(self.ends),
        )
        made.firsts, made.first_indices = self.firsts, list(self.first_indices)
        made.running = None if self.running is None else self.running.copy()
        made._reader, made._pending, made.reading = self._reader, self._pending, self.reading
        cold = self.cold
        made.cold = None if cold is None else dataclasses.replace(cold, tail=list(cold.tail))
        return made

    @property
    def count(self) -> int:
        """How many messages the ledger holds."""
        cold = self.cold
        if cold is not None and cold.fingerprint is not None:  # restored, no history yet
            return cold.count
        return len(self.seen)

    @property
    def unseen(self) -> bool:
        """Whether the ledger was restored and has not been handed a history yet (``attach``)."""
        return self.cold is not None and self.cold.fingerprint is not None

    @property
    def saved_decisions(self) -> SavedDecisions | None:
        """The decisions of a cold ledger, by turn id (``None`` once warm: the window's)."""
        return None if self.cold is None else self.cold.decisions

    def matching(self, history: Sequence[Any]) -> int:
        """Return how many held messages ``history`` starts with (equal content, any object)."""
        seen = self.seen
        if len(history) >= len(seen) and all(map(operator.is_, history, seen)):
            return len(seen)
        same = 0
        for new, old in zip(history, seen, strict=False):
            if new is not old and new != old:
                break
            same += 1
        return same

    def read(self, history: Sequence[Any], start: int) -> Scanned[Any]:
        """Price ``history[start:]`` as the continuation of the held messages (not kept yet).

        The format's reader continues from its state after ``history[:start]``; the history is
        checked as one that ends here. ``add`` adopts the reader's new state with the turns.
        """
        reader, restored = self._reader, False
        if start == 0:
            reader.reset()
        elif start == self.reading.count and self.reading.state is not None:
            reader.setstate(self.reading.state)
            restored = self.reading.restored
        else:  # a state without the reader's (or read past): read the settled messages again
            reader.reset()
            settled = reader.read(history[:start])
            if len(settled.sent) != start:
                raise ValidationError(
                    "the history does not continue where the window's reading stopped",
                    details={"field": "history", "index": len(settled.sent)},
                )
        new = history[start:]
        try:
            settled = reader.read(new)
            reading = Reading(start + len(settled.sent), reader.getstate())
            tail = reader.read(new[len(settled.sent) :], final=True)  # and the end is checked
        except (TypeError, KeyError, IndexError, ValueError, AttributeError) as error:
            if not restored:
                raise
            # A reader fails on its own state only where a saved one was edited and resealed.
            raise refused(
                "the state does not fit the history (the format's reader cannot continue from "
                f"its reading: {type(error).__name__}: {error})",
                field="reading",
            ) from None
        scanned = settled
        if tail.sent:
            scanned = Scanned(
                (*settled.turns, *tail.turns),
                {**settled.parts, **tail.parts},
                (*settled.sent, *tail.sent),
                (*settled.originals, *tail.originals),
            )
        self._pending = (start, len(scanned.sent), reading)
        return self._observed(scanned, start)

    def _observed(self, read: Scanned[Any], offset: int) -> Scanned[Any]:
        """Return ``read`` with its observations read as tool results (``observation=``)."""
        settings = self.settings
        if settings.observation is None:
            return read
        turns, parts = observe(
            self.fmt, read.turns, read.parts, read.sent, settings.observation, settings.estimator,
            keep_first=settings.keep_first - self.firsts, offset=offset,
        )  # fmt: skip
        return read._replace(turns=tuple(turns), parts=parts)

    def add(self, scanned: Scanned[Any], history: Sequence[Any]) -> None:
        """Hold the messages ``scanned`` read from ``history`` (after the held ones)."""
        start = self.count
        if self._pending is not None and self._pending[:2] == (start, len(scanned.sent)):
            self.reading = self._pending[2]
        self._pending = None
        turns, used = pin_first(
            scanned.turns, scanned.parts, self.settings.keep_first - self.firsts
        )
        self.firsts += len(used)
        self.seen.extend(history[start : start + len(scanned.sent)])
        if self.running is not None:
            self.running.feed(self.seen, self.running.count)
        if self.cold is not None:
            self.cold.tail.append((scanned._replace(turns=tuple(turns)), used))
            return
        self.first_indices.extend(used)
        self._hold(turns, scanned)

    def _hold(self, turns: Sequence[TranscriptTurn], scanned: Scanned[Any]) -> None:
        parts, index_of, ends, all_turns = self.parts, self.index_of, self.ends, self.turns
        current: int | None = None
        for turn in turns:
            part = scanned.parts[turn.turn_id]
            if part.index != current and current is not None:
                ends.append(len(all_turns))
            current = part.index
            index_of[turn.turn_id] = len(all_turns)
            all_turns.append(turn)
            parts[turn.turn_id] = (
                part if part.turn is turn else dataclasses.replace(part, turn=turn)
            )
        if current is not None:
            ends.append(len(all_turns))
        self.sent.extend(scanned.sent)
        self.originals.extend(scanned.originals)

    def truncate(self, count: int) -> None:
        """Forget the messages from ``count`` on (to read them again); the ledger is warm."""
        kept = self.ends[count - 1] if count else len(self.head)
        for turn in self.turns[kept:]:
            del self.parts[turn.turn_id], self.index_of[turn.turn_id]
        del self.turns[kept:], self.sent[count:], self.originals[count:], self.seen[count:]
        del self.ends[count:]
        if count != self.reading.count:
            self.reading = Reading(0, None)
        self.first_indices = [index for index in self.first_indices if index < count]
        self.firsts = len(self.first_indices)
        self.running = None

    def warm(self) -> Decisions | None:
        """Read the old messages of a restored ledger again, once; return the decisions on them.

        The turns are read with a cheap estimator and take the state's prices; the decisions
        the state named by turn id are placed on them. ``None`` when the ledger is warm already
        (the window's decisions stand).

        Raises:
            ValidationError: if the prices or the decisions do not fit the turns read.
        """
        cold = self.cold
        if cold is None:
            return None
        self.cold = None
        seen, fingerprint, reading = self.seen, self.running, self.reading
        self.clear()
        settings = self.settings
        reader = self.fmt.reader(
            estimator=CharRatioEstimator(),  # only the turns are wanted: the prices are known
            priority=settings.priority,
            pin=settings.pin,
        )
        scanned = self._observed(reader.read(seen[: cold.count], final=True), 0)
        if len(scanned.turns) != len(cold.prices):
            raise unfit(len(cold.prices), len(scanned.turns))
        priced = [
            dataclasses.replace(turn, token_estimate=price)
            for turn, price in zip(scanned.turns, cold.prices, strict=True)
        ]
        turns, self.first_indices = pin_first(priced, scanned.parts, settings.keep_first)
        self._hold(turns, scanned)
        for chunk, used in cold.tail:
            self._hold(chunk.turns, chunk)
            self.first_indices.extend(used)
        self.firsts = len(self.first_indices)
        self.seen, self.running, self.reading = seen, fingerprint, reading
        return cold.decisions.over(self.turns, self.index_of)

    def restore(  # noqa: PLR0917 - the codec's one call site
        self,
        count: int,
        fingerprint: str,
        prices: list[int],
        firsts: int,
        decisions: SavedDecisions,
        reading: Reading | None = None,
    ) -> None:
        """Hold ``count`` messages cold, known by a state: not read, nor handed yet (``attach``).

        ``fingerprint`` is theirs, ``prices`` their turns', ``decisions`` the state's on them;
        ``reading`` the format's reader state the window saved (``None``: read again if needed).
        """
        self.clear()
        if reading is not None:
            self.reading = reading
        self.firsts = firsts
        self.cold = _Cold(count, prices, decisions, fingerprint)

    def attach(self, history: Sequence[Any]) -> bool:
        """Take ``history`` as the messages a restored ledger holds; whether it starts with them.

        One pass checks its first messages against the state's fingerprint, which then runs
        on. A history that does not start with them leaves the ledger as it was.
        """
        cold = self.cold
        assert cold is not None  # noqa: S101 - only called while unseen
        assert cold.fingerprint is not None  # noqa: S101 - as above
        count = cold.count
        made = (
            None
            if len(history) < count
            else Fingerprint.resume(
                history[:count], hooks_of(self.fmt).fingerprint_data, cold.fingerprint
            )
        )
        if made is None:
            return False
        self.seen, self.running, cold.fingerprint = list(history[:count]), made, None
        return True

    def fingerprint(self) -> str:
        """Return the fingerprint of the held messages."""
        cold = self.cold
        if cold is not None and cold.fingerprint is not None:
            return cold.fingerprint
        if self.running is None:
            self.running = Fingerprint.of(self.seen, hooks_of(self.fmt).fingerprint_data)
        return self.running.hexdigest()

    def head_prices(self) -> list[int]:
        """Return the prices of the head's turns (the request-level system prompt)."""
        return [turn.token_estimate for turn in self.head if turn.turn_id != REQUEST_TURN_ID]

    def prices(self) -> list[int]:
        """Return every held message turn's price, in order (the head's left out)."""
        cold = self.cold
        if cold is None:
            return [turn.token_estimate for turn in self.turns[len(self.head) :]]
        tail = [turn.token_estimate for chunk, _ in cold.tail for turn in chunk.turns]
        return [*cold.prices, *tail]

    def binding(self, count: int) -> Binding[Any]:
        """Return the binding of the first ``count`` messages, to render views of them."""
        return Binding(
            self.fmt.name,
            tuple(self.sent[:count]),
            self.settings.system,
            self.parts,
            self.settings.estimator,
            tuple(self.originals[:count]),
        )

    def end(self, count: int) -> int:
        """Return where the turns of the first ``count`` messages end."""
        return self.ends[count - 1] if count else len(self.head)
