"""What the three integrations share: the window's options and how a window is made or restored.

Imports no framework. An integration holds ``ContextWindow``'s keyword options as the user gave
them; the request-level system prompt comes from the framework's request (never an option),
and the callables a window state cannot hold are given again to ``from_state``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final, Self, TypedDict, Unpack, cast

from baseaicore import ValidationError

from cutctx._loop.window import ContextWindow

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from cutctx._core.protocols import CompactionPolicy, TokenEstimator
    from cutctx._core.values import SummarizationRequest, TranscriptTurn
    from cutctx._loop.compact import CompactedMessages
    from cutctx._loop.request import WindowStats
    from cutctx.formats import Format

__all__ = ["HeldWindow", "Options", "WindowOptions"]

# The window's constructor and from_state take a Format object and format= (the loop rebuild);
# called through these names so the calls check against either signature.
_NEW: Final[Callable[..., ContextWindow]] = ContextWindow
_RESTORE: Final[Callable[..., ContextWindow]] = ContextWindow.from_state

_FROM_REQUEST: Final = ("format", "system")
_CALLABLES: Final = ("estimator", "summarize", "policy", "priority", "pin", "observation")
"""The options a window's state does not hold: ``from_state`` takes them again."""


class WindowOptions(TypedDict, total=False):
    """``ContextWindow``'s keyword options an integration passes on (all but ``system``).

    .. versionadded:: 0.1.1
    """

    compact_at: float | int
    compact_to: float | int
    keep_first: int
    protected_recent_turns: int
    keep_recent_results: int
    estimator: TokenEstimator | None
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


class HeldWindow:
    """What an integration that holds one conversation's window shows of it, and its state.

    The class it is mixed into sets ``_options`` and ``_window`` and takes ``(max_tokens,
    **window_options)``.
    """

    __slots__ = ()
    _options: Options
    _window: ContextWindow

    @property
    def window(self) -> ContextWindow:
        """The conversation's window (its ``stats``, ``last`` compaction and ``system``)."""
        return self._window

    @property
    def stats(self) -> WindowStats:
        """The window's ``stats``: requests, compactions, resets, the stable prefix."""
        return self._window.stats

    @property
    def last(self) -> CompactedMessages[Any] | None:
        """The window's latest compaction (its request, report and plan), if any."""
        return self._window.last

    def state(self) -> dict[str, Any]:
        """Return the window's ``state()``: JSON data, for ``from_state`` in another process."""
        return self._window.state()

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], max_tokens: int, **window_options: Unpack[WindowOptions]
    ) -> Self:
        """Return the integration that continues ``state``, given the same options again.

        The callables (``estimator``, ``summarize``, ``policy``, ``priority``, ``pin``,
        ``observation``) must be
        the ones the state was made with; the rest of the window's settings travel in the state.

        Raises:
            ValidationError: for a state that is not a window's, or callables it was not made with.
        """
        made: Any = cast("Any", cls)(max_tokens, **window_options)  # the class mixed into
        made._window = made._options.restore(state)
        return cast("Self", made)
