"""The protocols a caller can implement: token estimators and compaction policies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cutctx._core.plan import CompactionPlan
    from cutctx._core.values import CompactionBudget, Transcript

__all__ = ["CompactionPolicy", "Named", "TokenEstimator"]


@runtime_checkable
class TokenEstimator(Protocol):
    """Prices a text in tokens. Implementations must be deterministic and never negative."""

    def estimate_tokens(self, text: str) -> int:
        """Return the estimated token count of ``text``."""
        ...


class Named(Protocol):
    """Anything with a stable ``name``: what a record needs of a message format."""

    @property
    def name(self) -> str:
        """The stable name."""
        ...


@runtime_checkable
class CompactionPolicy(Protocol):
    """Decides, without side effects, how a transcript is cut down to a budget.

    ``decide`` returns a ``CompactionPlan`` (which has passed the invariants gate) or raises
    ``BudgetUnsatisfiable`` when the untouchable turns alone are over the budget.
    """

    @property
    def name(self) -> str:
        """The policy's stable name, recorded on every plan."""
        ...

    @property
    def version(self) -> str:
        """The version of the policy's behaviour; a change of behaviour bumps it."""
        ...

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        """Return the plan for ``transcript`` under ``budget``."""
        ...
