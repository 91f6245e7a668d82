"""``StubDroppingPolicy``: the messages default's second version makes stubs pay for their place.

A masked exchange still costs its call and its stub; hundreds of them fill a window, and masking
fresher results to keep them loses what the agent needs next. This policy drops the oldest
exchanges whose results are all stubs already, before any fresher result is masked.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from cutctx._core.metadata import KIND_METADATA, MASKED_KIND
from cutctx._core.values import Role
from cutctx._policies.draft import BuiltinPolicy, Draft, keep_all
from cutctx._policies.drop import drop_actions, drop_in_order, unit_heads

if TYPE_CHECKING:
    from collections.abc import Sequence

    from cutctx._core.invariants import Layout
    from cutctx._core.values import CompactionBudget, Transcript, TranscriptTurn

__all__ = ["StubDroppingPolicy"]


class StubDroppingPolicy(BuiltinPolicy):
    """Drops whole exchanges whose tool results are all masked stubs, oldest first, until it fits.

    An exchange qualifies when it holds at least one ``TOOL`` turn and every one of them is
    masked (``cutctx.kind: masked``); an exchange with an untouchable member is skipped, as
    ``DropOldestPolicy`` skips it. Nothing else is touched.

    .. versionadded:: 0.1.1
    """

    __slots__ = ()

    _NAME: ClassVar[str] = "stub_dropping"
    _VERSION: ClassVar[str] = "1.0.0"

    def __repr__(self) -> str:
        return "StubDroppingPolicy()"

    def _draft(self, transcript: Transcript, budget: CompactionBudget, shape: Layout) -> Draft:
        total = shape.total
        if total <= budget.max_tokens:
            return keep_all(shape)
        units = shape.units
        stubbed = _stubbed_units(transcript.turns, units.unit_of)
        dropped: set[int] = set()
        total = drop_in_order(
            units,
            (unit for unit in unit_heads(units) if unit in stubbed),
            units.unit_tokens,
            total,
            budget.max_tokens,
            dropped,
        )
        return Draft(drop_actions(units, dropped), total)


def _stubbed_units(turns: Sequence[TranscriptTurn], unit_of: Sequence[int]) -> set[int]:
    """Return the units holding a tool result and only masked ones."""
    results: dict[int, bool] = {}
    for turn, unit in zip(turns, unit_of, strict=True):
        if turn.role is Role.TOOL:
            masked = bool(turn.metadata) and turn.metadata.get(KIND_METADATA) == MASKED_KIND
            results[unit] = results.get(unit, True) and masked
    return {unit for unit, masked in results.items() if masked}
