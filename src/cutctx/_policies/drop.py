"""``DropOldestPolicy``: the deterministic last resort."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from cutctx._core.values import Action, CompactionBudget, Transcript
from cutctx._policies.draft import BuiltinPolicy, Draft, keep_all

if TYPE_CHECKING:
    from cutctx._core.invariants import Layout

__all__ = ["DropOldestPolicy"]


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
    _PRICES_ONLY: ClassVar[bool] = True

    def __repr__(self) -> str:
        return "DropOldestPolicy()"

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        del transcript  # decided from the layout alone (_PRICES_ONLY)
        total = shape.total
        if total <= budget.max_tokens:
            return keep_all(shape)
        units = shape.units
        locked, unit_tokens = units.locked, units.unit_tokens
        dropped: set[int] = set()
        # Units in order of their earliest member: the oldest exchange first.
        for index, unit in enumerate(units.unit_of):
            if total <= budget.max_tokens:
                break
            if unit == index and not locked[unit]:
                dropped.add(unit)
                total -= unit_tokens[unit]
        keep, drop = Action.KEEP, Action.DROP
        return Draft([drop if unit in dropped else keep for unit in units.unit_of], total)
