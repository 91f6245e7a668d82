"""``DropOldestPolicy``: the deterministic last resort.

Dropping whole exchanges in a given order (``drop_in_order``) is shared with ``PriorityPolicy``,
which drops one priority level at a time exactly as this policy drops the whole transcript.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from cutctx._core.values import Action, CompactionBudget, Transcript
from cutctx._policies.draft import BuiltinPolicy, Draft, keep_all

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from typing import Any, Self

    from cutctx._core.invariants import Layout, Units
    from cutctx._policies.config import Config
    from cutctx._policies.draft import Describe

__all__ = ["DropOldestPolicy", "drop_actions", "drop_in_order", "unit_heads"]


class DropOldestPolicy(BuiltinPolicy):
    """Drops whole exchanges (and lone turns), oldest first, until the budget fits.

    An exchange is every turn sharing a ``tool_call_id``, however far apart; it is as old as its
    earliest member, and it is skipped whole when any member is untouchable. With nothing pinned
    and ``protected_recent_turns=0`` it drops down to an empty view if the budget needs that.

    >>> from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn
    >>> t = Transcript((TranscriptTurn("u1", Role.USER, "a", 5),
    ...                 TranscriptTurn("u2", Role.USER, "b", 5)))
    >>> [a.action.value for a in DropOldestPolicy().decide(t, CompactionBudget(6, 0)).actions]
    ['drop', 'keep']
    """

    __slots__ = ()

    _NAME: ClassVar[str] = "drop_oldest"
    _VERSION: ClassVar[str] = "1.0.0"
    drops: ClassVar[bool] = True
    _PRICES_ONLY: ClassVar[bool] = True

    def _config(self, describe: Describe) -> dict[str, Any]:
        del describe  # no knobs
        return {}

    @classmethod
    def _from_config(cls, config: Config) -> Self:
        del config  # no knobs: the reader refuses any key
        return cls()

    def __repr__(self) -> str:
        return "DropOldestPolicy()"

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        del transcript  # decided from the layout alone (_PRICES_ONLY)
        total = shape.total
        if total <= budget.max_tokens:
            return keep_all(shape)
        units = shape.units
        dropped: set[int] = set()
        total = drop_in_order(
            units, unit_heads(units), units.unit_tokens, total, budget.max_tokens, dropped
        )
        return Draft(drop_actions(units, dropped), total)


def unit_heads(units: Units) -> Iterator[int]:
    """Yield every unit (the index of its earliest member), oldest first."""
    return (index for index, unit in enumerate(units.unit_of) if unit == index)


def drop_in_order(  # noqa: PLR0917 - the units, the order, their prices and the running figures
    units: Units,
    heads: Iterable[int],
    unit_tokens: Sequence[int],
    total: int,
    limit: int,
    dropped: set[int],
) -> int:
    """Drop each unlocked unit of ``heads``, in that order, until ``total`` fits ``limit``.

    ``unit_tokens`` prices each unit; the dropped units are added to ``dropped``. Returns the
    estimate left.
    """
    locked = units.locked
    for unit in heads:
        if total <= limit:
            break
        if not locked[unit]:
            dropped.add(unit)
            total -= unit_tokens[unit]
    return total


def drop_actions(units: Units, dropped: set[int]) -> list[Action]:
    """Return one action per turn: ``DROP`` for every member of a ``dropped`` unit, else keep."""
    keep, drop = Action.KEEP, Action.DROP
    return [drop if unit in dropped else keep for unit in units.unit_of]
