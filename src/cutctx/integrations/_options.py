"""What the three integrations share: the window's options, one window per conversation, recall.

Imports no framework. An integration holds ``ContextWindow``'s keyword options as the user gave
them; the request-level system prompt comes from the framework's request (never an option),
and the callables a window state cannot hold are given again to ``from_state``. An integration
object serves many conversations (``Conversations``): each has its own window, found by the key
the framework gives (Pydantic AI's ``conversation_id``) or by its history, and at most
``keep`` of them are held, the least recently used let go.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol, Self, TypedDict, Unpack, cast

from baseaicore import ValidationError

from cutctx._loop.recall import knows
from cutctx._loop.window import ContextWindow

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._core.values import SummarizationRequest, TranscriptTurn
    from cutctx._loop.compact import CompactedMessages
    from cutctx._loop.request import WindowStats
    from cutctx.formats import Format

__all__ = [
    "KEEP",
    "UNCHANGED",
    "Conversations",
    "HeldWindow",
    "Options",
    "Recent",
    "ShowsWindows",
    "WindowOptions",
    "report",
]

KEEP: Final = 32
"""Conversations whose windows one integration object holds in memory (the most recent)."""

# The window's constructor and from_state take a Format object and format= (the loop rebuild);
# called through these names so the calls check against either signature.
_NEW: Final[Callable[..., ContextWindow]] = ContextWindow
_RESTORE: Final[Callable[..., ContextWindow]] = ContextWindow.from_state

_FROM_REQUEST: Final = ("format", "system")
_CALLABLES: Final = ("estimator", "summarize", "policy", "priority", "pin", "observation")
"""The options a window's state does not hold: ``from_state`` takes them again."""
_HELD: Final = (
    "max_tokens", "compact_at", "compact_to", "keep_first", "protected_recent_turns",
    "keep_recent_results", "summary_input_tokens", "cache_breakpoints", "max_result_tokens",
    "recall",
)  # fmt: skip
"""The options a window's state holds, as they were given: ``from_state`` checks them."""


class WindowOptions(TypedDict, total=False):
    """``ContextWindow``'s keyword options an integration passes on (all but ``system``).

    .. versionadded:: 0.1.1
    """

    compact_at: float | int
    compact_to: float | int | None
    keep_first: int
    protected_recent_turns: int
    keep_recent_results: int
    estimator: TokenEstimator | str | None
    summarize: (
        Callable[[SummarizationRequest, Sequence[TranscriptTurn]], str | Awaitable[str]] | None
    )
    policy: CompactionPolicy | None
    summary_input_tokens: float | int | None
    cache_breakpoints: bool
    priority: Callable[[int, dict[str, Any]], int] | None
    pin: Callable[[int, dict[str, Any]], bool] | None
    max_result_tokens: float | int | None
    recall: bool
    observation: Callable[[int, dict[str, Any]], bool] | Callable[[dict[str, Any]], bool] | None


class Options:
    """``ContextWindow``'s keyword options for one integration, checked once.

    Raises:
        ValidationError: for ``format`` or ``system`` (the integration sets them) or any option
            ``ContextWindow`` refuses, naming it.
    """

    __slots__ = ("fmt", "max_tokens", "options", "owner")

    def __init__(
        self, owner: str, fmt: Format[Any], max_tokens: int, options: WindowOptions
    ) -> None:
        for name in _FROM_REQUEST:
            if name in options:
                raise ValidationError(
                    f"{owner}: {name}= is not an option here; the integration takes it from "
                    "the framework's request",
                    details={"field": name},
                )
        self.owner, self.fmt, self.max_tokens = owner, fmt, max_tokens
        self.options: dict[str, Any] = dict(options)
        self.new(None)  # refuse a bad option now, not on the first model call

    def new(self, system: object) -> ContextWindow:
        """Return a fresh window for a conversation whose request-level prompt is ``system``."""
        return _NEW(self.fmt, max_tokens=self.max_tokens, system=system, **self.options)

    def restore(self, state: object) -> ContextWindow:
        """Return the window ``state`` (a ``ContextWindow.state()``) continues, callables given.

        Raises:
            ValidationError: for anything but a window's state (``from_state`` says why).
        """
        given = {name: self.options.get(name) for name in _CALLABLES}
        read = dict(state) if isinstance(state, Mapping) else state
        return _RESTORE(read, format=self.fmt, **given)

    def differences(self, window: ContextWindow) -> list[str]:
        """Return the options (as ``name=value``) whose value in ``window``'s state is not these."""
        made, held = self.new(None).state(), window.state()
        return [
            f"{name}={made[name]!r} (the state's {held.get(name)!r})"
            for name in _HELD
            if held.get(name) != made[name]
        ]

    def check(self, window: ContextWindow) -> ContextWindow:
        """Return ``window`` (restored from a state) if it was made with these options.

        Raises:
            ValidationError: naming every option given that the state's window was not made with.
        """
        differ = self.differences(window)
        if differ:
            raise ValidationError(
                f"{self.owner}.from_state: options other than the state's: {'; '.join(differ)}",
                details={"fields": [entry.partition("=")[0] for entry in differ]},
            )
        return window

    def with_system(self, window: ContextWindow, system: object) -> ContextWindow:
        """Return ``window``, going on with ``system`` as its request-level prompt.

        A new prompt is a new head: priced, every decision on the messages kept (``set_system``).
        """
        window.set_system(cast("str | list[dict[str, Any]] | None", system))
        return window


class _Unchanged:
    """The system prompt of a call that names none (a history processor): the window's own."""

    __slots__ = ()


UNCHANGED: Final = _Unchanged()


class _Entry:
    """One conversation's window, the keys it is known by and the history it was handed last."""

    __slots__ = ("keys", "seen", "window")

    def __init__(self, window: ContextWindow, seen: list[Any] | None) -> None:
        self.window, self.seen = window, seen
        self.keys: set[Hashable] = set()


class Conversations:
    """The windows of the conversations one integration object serves.

    A call names its conversation by ``key`` when the framework gives one; otherwise (or for a
    key not seen yet) its history does: the conversation whose last history it continues
    (starts with equal messages, as a window compares them; the longest such), then a window
    restored from a state that has not been handed a history yet, else a new conversation.
    At most ``keep`` windows are held; the least recently used is let go (its conversation,
    coming back, starts a new window). ``latest`` is the window of the latest call.
    """

    __slots__ = ("_entries", "_keep", "_keys", "_options", "_serial", "latest")

    def __init__(self, options: Options, keep: int = KEEP) -> None:
        self._options, self._keep = options, keep
        self._entries: OrderedDict[int, _Entry] = OrderedDict()
        self._keys: dict[Hashable, int] = {}
        self._serial = itertools.count()
        self.latest = options.new(None)

    @property
    def windows(self) -> tuple[ContextWindow, ...]:
        """The windows held, the least recently used first."""
        return tuple(entry.window for entry in self._entries.values())

    def adopt(self, window: ContextWindow) -> None:
        """Hold ``window`` (restored from a state) for the first conversation it continues."""
        self._hold(_Entry(window, None))
        self.latest = window

    def prepare[M](self, history: list[M], system: object, key: Hashable | None = None) -> list[M]:
        """Return the request the conversation's window sends now for ``history``."""
        serial, entry = self._find(history, system, key)
        request = entry.window.prepare(history)
        self._saw(serial, entry, history, key)
        return request

    async def aprepare[M](
        self, history: list[M], system: object, key: Hashable | None = None
    ) -> list[M]:
        """``prepare`` for an async framework: an async ``summarize`` is awaited.

        Nothing CPU-bound runs on the event loop: finding the conversation (comparing
        histories, pricing a new prompt) runs in a worker thread, over a snapshot of the
        windows held taken on the loop, and the step is the window's ``aprepare``.
        """
        held = self._snapshot(key)
        serial, entry = await asyncio.to_thread(self._found, held, history, system)
        request = await entry.window.aprepare(history)
        self._saw(serial, entry, history, key)
        return request

    def keyed(self, key: Hashable) -> ContextWindow | None:
        """The window of the conversation ``key`` names, if it is held."""
        serial = self._keys.get(key)
        return None if serial is None else self._entries[serial].window

    def recall(self, arguments: object) -> str:
        """Answer a ``cutctx_recall`` call from the window that has seen its original.

        The latest conversation's window first, then the others: the original is found by its
        digest, whichever conversation it came from.
        """
        return _recall(self.latest, self.windows, arguments)

    def _find(self, history: list[Any], system: object, key: Hashable | None) -> tuple[int, _Entry]:
        return self._found(self._snapshot(key), history, system)

    def _snapshot(self, key: Hashable | None) -> _Held:
        """The entries a call may continue, as they are now: its key's, else all, latest first.

        A snapshot: ``_found`` may run in a worker thread while the loop goes on.
        """
        serial = self._keys.get(key) if key is not None else None
        if serial is not None:
            return _Held(self._entries[serial], serial, ())
        return _Held(None, None, tuple(reversed(self._entries.items())))

    def _found(self, held: _Held, history: list[Any], system: object) -> tuple[int, _Entry]:
        """Return the conversation's entry (a new one if none is continued), with ``system``."""
        serial, entry = held.serial, held.keyed
        if entry is None:
            serial, entry = _continued(held.candidates, history)
        if entry is None:
            serial, entry = next(
                ((number, old) for number, old in held.candidates if old.seen is None),
                (None, None),
            )
        if entry is None or serial is None:
            made = self._options.new(None if system is UNCHANGED else system)
            return next(self._serial), _Entry(made, None)
        if system is not UNCHANGED:
            entry.window = self._options.with_system(entry.window, system)
        return serial, entry

    def _saw(self, serial: int, entry: _Entry, history: list[Any], key: Hashable | None) -> None:
        entry.seen = list(history)
        if key is not None and key not in entry.keys:
            entry.keys.add(key)
            self._keys[key] = serial
        if serial not in self._entries:
            self._entries[serial] = entry
        self._entries.move_to_end(serial)
        self.latest = entry.window
        while len(self._entries) > self._keep:
            _, gone = self._entries.popitem(last=False)
            for name in gone.keys:
                del self._keys[name]

    def _hold(self, entry: _Entry) -> None:
        self._entries[next(self._serial)] = entry
        while len(self._entries) > self._keep:
            _, gone = self._entries.popitem(last=False)
            for name in gone.keys:
                del self._keys[name]


class _Held:
    """What ``Conversations._held`` saw: the entry a key names, or the candidates, latest first."""

    __slots__ = ("candidates", "keyed", "serial")

    def __init__(
        self, keyed: _Entry | None, serial: int | None, candidates: tuple[tuple[int, _Entry], ...]
    ) -> None:
        self.keyed, self.serial, self.candidates = keyed, serial, candidates


def _continued(
    candidates: tuple[tuple[int, _Entry], ...], history: list[Any]
) -> tuple[int | None, _Entry | None]:
    """Return the entry whose last history ``history`` continues (the longest), if any."""
    found: tuple[int | None, _Entry | None] = (None, None)
    longest = -1
    for serial, entry in candidates:
        seen = entry.seen
        if seen is None or len(seen) > len(history) or len(seen) <= longest:
            continue
        if seen and not (_same(seen[0], history[0]) and _same(seen[-1], history[len(seen) - 1])):
            continue  # another conversation, told apart at its ends before comparing it all
        if list(itertools.islice(history, len(seen))) == seen:
            found, longest = (serial, entry), len(seen)
    return found


class Recent:
    """The windows of the conversations an integration that keeps them elsewhere used last.

    LangChain's middleware finds a thread's window in the thread's own state; this holds the
    windows it made or restored, each with the state it wrote last (so the next call of that
    thread reuses the window rather than restoring it), at most ``keep``, the least recently
    used let go. ``latest`` is the window of the latest call.
    """

    __slots__ = ("_entries", "_keep", "latest")

    def __init__(self, options: Options, keep: int = KEEP) -> None:
        self._keep = keep
        self._entries: OrderedDict[int, tuple[object, ContextWindow]] = OrderedDict()
        self.latest = options.new(None)

    @property
    def windows(self) -> tuple[ContextWindow, ...]:
        """The windows held, the least recently used first."""
        return tuple(window for _, window in self._entries.values())

    def find(self, state: object) -> ContextWindow | None:
        """The window that wrote ``state`` (this very object) last, if it is held."""
        for written, window in reversed(self._entries.values()):
            if written is state:
                return window
        return None

    def put(self, window: ContextWindow, state: object) -> None:
        """Hold ``window`` as the latest, with the ``state`` it wrote."""
        self._entries[id(window)] = (state, window)
        self._entries.move_to_end(id(window))
        self.latest = window
        while len(self._entries) > self._keep:
            self._entries.popitem(last=False)

    def recall(self, arguments: object) -> str:
        """Answer a ``cutctx_recall`` call from the windows held, the latest first."""
        return _recall(self.latest, self.windows, arguments)


def _recall(latest: ContextWindow, held: tuple[ContextWindow, ...], arguments: object) -> str:
    """Answer from ``latest``, else from the most recent of ``held`` that knows the original.

    Neither knowing it, the answer is ``latest``'s explanation.
    """
    answer = latest.recall(arguments)
    if knows(answer):
        return answer
    for window in reversed(held):
        if window is not latest:
            other = window.recall(arguments)
            if knows(other):
                return other
    return answer


def report(window: ContextWindow, input_tokens: object) -> None:
    """Report a provider's input token count to ``window``, if the framework gave one.

    A scripted or local model reports none (``None``, or 0): nothing is reported then.
    """
    if isinstance(input_tokens, int) and not isinstance(input_tokens, bool) and input_tokens > 0:
        window.report_usage(input_tokens)


def _same(old: object, new: object) -> bool:
    return old is new or old == new


class Held(Protocol):
    """The windows an integration holds: ``Conversations`` or ``Recent``."""

    @property
    def latest(self) -> ContextWindow:
        """The window of the latest model call."""
        ...

    @property
    def windows(self) -> tuple[ContextWindow, ...]:
        """The windows held, the least recently used first."""
        ...

    def recall(self, arguments: object) -> str:
        """Answer a ``cutctx_recall`` call from the windows held."""
        ...


class ShowsWindows:
    """What every integration shows of the conversations it serves (one surface for all).

    The class it is mixed into sets ``_held``. ``window``, ``stats``, ``last`` and ``state()``
    are the latest conversation's (the one of the latest model call); ``windows`` are all
    the windows held.
    """

    __slots__ = ()
    _held: Held

    @property
    def window(self) -> ContextWindow:
        """The latest conversation's window (its ``stats``, ``last`` compaction and ``system``)."""
        return self._held.latest

    @property
    def stats(self) -> WindowStats:
        """The latest window's ``stats``: requests, compactions, resets, the stable prefix."""
        return self._held.latest.stats

    @property
    def last(self) -> CompactedMessages[Any] | None:
        """The latest window's latest compaction (its request, report and plan), if any."""
        return self._held.latest.last

    @property
    def windows(self) -> tuple[ContextWindow, ...]:
        """The windows of the conversations held (at most ``conversations``), latest last."""
        return self._held.windows

    def state(self) -> dict[str, Any]:
        """Return the latest window's ``state()``: JSON data, for ``from_state`` elsewhere."""
        return self._held.latest.state()

    def recall(self, arguments: object) -> str:
        """Answer a ``cutctx_recall`` call (its arguments, a mapping or JSON text) with a page.

        The original is found by its digest in any conversation this object holds; a bad
        argument or an unknown digest gives back a one-line explanation.
        """
        return self._held.recall(arguments)


class HeldWindow(ShowsWindows):
    """``ShowsWindows`` for an integration that holds its conversations (``Conversations``).

    The class it is mixed into sets ``_options`` and ``_held`` and takes
    ``(max_tokens, **window_options)``; it adds ``from_state``.
    """

    __slots__ = ()
    _options: Options
    _held: Conversations

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], max_tokens: int, **window_options: Unpack[WindowOptions]
    ) -> Self:
        """Return the integration that continues ``state``, given the same options again.

        The options must be the ones the state was made with (they are checked: a conversation
        that starts later gets a window made with them), and the callables (``estimator``,
        ``summarize``, ``policy``, ``priority``, ``pin``, ``observation``) the ones it was made
        with. The state's window continues the first conversation whose history it fits.

        Raises:
            ValidationError: for a state that is not a window's, options or callables it was
                not made with (naming them).
        """
        made: Any = cast("Any", cls)(max_tokens, **window_options)  # the class mixed into
        options: Options = made._options
        made._held.adopt(options.check(options.restore(state)))
        return cast("Self", made)
