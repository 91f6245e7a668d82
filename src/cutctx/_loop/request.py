"""A window's last request: its messages, each one's price, and what each message is (a recipe).

A recipe item says where a request message comes from, so a restored window sends its last
request again from the history: ``int`` ``i`` for the history's message ``i`` as it is,
``Unmarked(i)`` for it without its ``sticky``/``priority`` keys, ``Made(message)`` for a message
the window made, ``LOST`` for a made message a restored state could not carry.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

from baseaicore import ValidationError

from cutctx._loop.ledger import message_costs
from cutctx.formats._marks import unmarked

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx.formats import Binding, Rendered, Scanned

__all__ = [
    "LOST",
    "Lost",
    "Made",
    "Request",
    "Sent",
    "Unmarked",
    "WindowStats",
    "counted",
    "recipe",
    "recipe_of",
    "resolved",
]


@dataclass(frozen=True, slots=True)
class Unmarked:
    """The history's message ``index`` without its ``sticky``/``priority`` keys."""

    index: int


@dataclass(frozen=True, slots=True)
class Made:
    """A message the window made (a stub, an excerpt, a merge): ``message`` itself."""

    message: Any


class Lost:
    """A made message a restored state does not hold (a custom format's object, not JSON).

    The request holding one is rendered again by the next step.
    """

    __slots__ = ()


LOST: Final = Lost()

type Sent = int | Unmarked | Made | Lost
"""One recipe item: where a request message comes from (see the module docstring)."""


@dataclass(frozen=True, slots=True)
class WindowStats:
    """What a ``ContextWindow`` has done, and what its last request shares with the one before.

    ``first_changed_index`` is the first message of the last request that differs from the
    request before it (its length when none does); ``stable_prefix_tokens`` the estimated tokens
    of the messages before it — the part a provider's prompt cache can serve.

    .. versionadded:: 0.1.0
    """

    requests: int = 0
    compactions: int = 0
    resets: int = 0
    first_changed_index: int = 0
    stable_prefix_tokens: int = 0


def counted(
    stats: WindowStats,
    *,
    requests: int = 0,
    compactions: int = 0,
    resets: int = 0,
    first_changed: int | None = None,
    stable: int | None = None,
) -> WindowStats:
    """Return ``stats`` with the counts added and the prefix figures replaced (when given)."""
    return WindowStats(
        stats.requests + requests,
        stats.compactions + compactions,
        stats.resets + resets,
        stats.first_changed_index if first_changed is None else first_changed,
        stats.stable_prefix_tokens if stable is None else stable,
    )


def recipe_of(message: object, index: int, caller: object) -> int | Unmarked:
    """Return the recipe item of a kept message ``index`` of the history.

    ``index`` for the caller's own message, ``Unmarked(index)`` for the copy without its
    ``sticky``/``priority`` keys.
    """
    return index if message is caller else Unmarked(index)


def recipe(messages: Sequence[Any], originals: Sequence[Any], seen: Sequence[Any]) -> list[Sent]:
    """Return the recipe of a rendered request (a message the window made: ``Made``)."""
    where = {id(original): index for index, original in enumerate(originals)}
    return [
        recipe_of(message, where[id(message)], seen[where[id(message)]])
        if id(message) in where
        else Made(message)
        for message in messages
    ]


def resolved(recipe: Sequence[Sent], history: Sequence[Any]) -> list[Any] | None:
    """Return the request ``recipe`` makes from ``history`` (``None`` if it holds ``LOST``)."""
    out: list[Any] = []
    for item in recipe:
        if type(item) is int:
            out.append(history[item])
        elif isinstance(item, Unmarked):
            out.append(unmarked(history[item.index]))
        elif isinstance(item, Made):
            out.append(item.message)
        else:
            return None
    return out


@dataclass(slots=True)
class Request:
    """The request last returned, each message's price, and what it was rendered from.

    ``tokens`` is the estimate of the view (decisions applied, summaries as rendered), ``held``
    the history messages it reflects, ``tail`` whether it ends with the last of them as it is.
    ``digests`` are the digests of its first messages, as far as a state has needed them (the
    codec tops them up): a restored window compares the next request against them.
    """

    messages: list[Any]
    costs: list[int]
    tokens: int
    held: int
    tail: bool
    recipe: list[Sent]
    digests: list[str] = field(default_factory=list)

    @classmethod
    def empty(cls, tokens: int, *, tail: bool) -> Request:
        """Return the request of no message, whose view costs ``tokens`` (the head)."""
        return cls([], [], tokens, 0, tail, [])

    def copy(self) -> Request:
        """Return a copy that may be changed without touching this request."""
        return replace(self, digests=list(self.digests))

    @classmethod
    def rendered(
        cls, rendered: Rendered[Any], tokens: int, binding: Binding[Any], seen: Sequence[Any]
    ) -> Request:
        """Return the request a format rendered from the view of ``binding``'s messages.

        Raises:
            ValidationError: if the format did not price every message it rendered.
        """
        messages, costs = rendered.messages, rendered.costs
        if len(costs) != len(messages):
            raise ValidationError(
                f"ContextWindow: the format {binding.format!r} priced {len(costs)} of the "
                f"{len(messages)} messages it rendered",
                details={"format": binding.format},
            )
        held = len(binding.messages)
        tail = bool(messages) and held > 0 and messages[-1] is binding.originals[held - 1]
        return cls(messages, costs, tokens, held, tail, recipe(messages, binding.originals, seen))

    def extend(self, read: Scanned[Any], history: Sequence[Any]) -> None:
        """Append the messages ``read`` from ``history``, as they are."""
        start = self.held
        self.messages = [*self.messages, *read.originals]
        self.costs = [*self.costs, *message_costs(read)]
        self.recipe = [
            *self.recipe,
            *(
                recipe_of(original, index, history[index])
                for index, original in enumerate(read.originals, start)
            ),
        ]
        self.held = start + len(read.originals)

    def shared(self, previous: Sequence[Any]) -> int:
        """Return how many leading messages this request shares with ``previous``."""
        same = 0
        for old, new in zip(previous, self.messages, strict=False):
            if old is not new and old != new:
                break
            same += 1
        return same
