"""``LargeResultMaskingPolicy``: the window's default masks the large old results first.

A cut that masks oldest first spends most of what it reclaims on results the agent may still
cite, a few lines each; one large old result (a file dump, a build log) reclaims as much as a
dozen small ones. The newest half of the budget is spared: what the agent needs next is mostly
there, and a large recent result is as likely to be needed as a small one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Final

from cutctx._policies.masking import ObservationMaskingPolicy

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from cutctx._core.values import CompactionBudget, TranscriptTurn

__all__ = ["LargeResultMaskingPolicy"]

LARGE_SHARE: Final = 32
"""A result is large when it costs at least ``1 / LARGE_SHARE`` of the budget."""
SPARED_SHARE: Final = 2
"""The newest ``1 / SPARED_SHARE`` of the budget, counted from the end, is never offered."""


class LargeResultMaskingPolicy(ObservationMaskingPolicy):
    """Masks the large results outside the newest half of the budget, oldest first.

    As ``ObservationMaskingPolicy`` (the same stubs, floor, exclusions and minimum), but only a
    result priced at 1/32 of the budget or more is offered, and only one that starts before the
    newest half of the budget (the turns at the end of the transcript whose prices add up to
    half of ``max_tokens``). It is a first pass: the chain's ordinary masking comes after it.
    """

    __slots__ = ()

    _NAME: ClassVar[str] = "large_result_masking"
    _VERSION: ClassVar[str] = "1.0.0"

    def __repr__(self) -> str:
        return (
            super().__repr__().replace("ObservationMaskingPolicy(", "LargeResultMaskingPolicy(", 1)
        )

    def _candidates(
        self, turns: Sequence[TranscriptTurn], stop: int, budget: CompactionBudget
    ) -> Iterable[int]:
        spared = budget.max_tokens // SPARED_SHARE
        tail = 0
        for index in range(len(turns) - 1, -1, -1):
            tail += turns[index].token_estimate
            if tail >= spared:
                stop = min(stop, index)
                break
        else:
            return ()  # the whole transcript is within the spared half
        large = budget.max_tokens / LARGE_SHARE
        return (index for index in range(stop) if turns[index].token_estimate >= large)
