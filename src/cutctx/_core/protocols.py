"""The protocols a caller can implement: token estimators and compaction policies."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from cutctx._core.plan import CompactionPlan
    from cutctx._core.values import CompactionBudget, Transcript

__all__ = ["CAPABILITIES", "CompactionPolicy", "Named", "TokenEstimator", "declares"]

CAPABILITIES = ("masks", "drops", "summarizes")
"""What a policy may declare it does, each a class attribute set to ``True`` (see ``declares``)."""


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

    A policy may also say what it does, with class attributes set to ``True`` (each optional,
    ``False`` when absent; see ``CAPABILITIES`` and ``declares``): ``masks`` (it only masks
    tool results, or removes exchanges whose results are all masked already: it never removes
    a result the model still sees whole), ``drops`` (it removes whole exchanges) and
    ``summarizes`` (it plans summaries that the caller's ``summarize`` writes, a model call).
    ``ContextWindow`` reads them: a chain's leading ``masks`` members run before a member that
    does anything but mask or drop, so a summarizer is handed the stubs; a ``summarizes``
    member is left out when the window plans again close to ``max_tokens``.
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


def declares(policy: object, capability: str) -> bool:
    """Whether ``policy`` declares ``capability`` (one of ``CAPABILITIES``): set to ``True``.

    Anything else (absent, ``False``, a value that is not ``True``) declares nothing.
    """
    return getattr(policy, capability, False) is True
