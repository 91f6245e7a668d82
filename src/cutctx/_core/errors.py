"""The error tree of cutctx.

Every error carries a stable ``code``, a one-line message for a person and the numbers in
``details`` for a machine::

    baseaicore.SuiteError
    ├── baseaicore.ValidationError        a value refused where it is born (bad field, bad plan)
    └── CompactionError                   COMPACTION_ERROR
        ├── BudgetUnsatisfiable           COMPACTION_BUDGET_UNSATISFIABLE
        ├── SummaryMissing                COMPACTION_SUMMARY_MISSING
        └── PlanTranscriptMismatch        COMPACTION_PLAN_MISMATCH

``BudgetUnsatisfiable`` is raised when no legal plan can exist; a plan that merely could not reach
its budget is a value (``CompactionPlan.budget_unmet``), not an error.
"""

from __future__ import annotations

from typing import Any, ClassVar

from baseaicore import SuiteError, ValidationError

__all__ = [
    "BudgetUnsatisfiable",
    "CompactionError",
    "PlanTranscriptMismatch",
    "SummaryMissing",
    "ValidationError",
]


class CompactionError(SuiteError):
    """Base of every error cutctx raises about compaction itself."""

    code: ClassVar[str] = "COMPACTION_ERROR"


class BudgetUnsatisfiable(CompactionError):
    """The untouchable turns alone are over the budget, so no legal plan exists.

    ``details`` holds ``untouchable_tokens``, ``max_tokens`` and ``untouchable_turn_count``.
    """

    code: ClassVar[str] = "COMPACTION_BUDGET_UNSATISFIABLE"

    @property
    def untouchable_tokens(self) -> int:
        """The estimated tokens of the untouchable set."""
        value: int = self.details["untouchable_tokens"]
        return value

    @property
    def max_tokens(self) -> int:
        """The budget the untouchable set exceeds."""
        value: int = self.details["max_tokens"]
        return value


class SummaryMissing(CompactionError):
    """A plan's summarization request was not fulfilled; ``details["group_id"]`` names it."""

    code: ClassVar[str] = "COMPACTION_SUMMARY_MISSING"

    @property
    def group_id(self) -> str:
        """The first unfulfilled group, in plan order."""
        value: str = self.details["group_id"]
        return value


class PlanTranscriptMismatch(CompactionError):
    """A plan was applied to a transcript it was not built for.

    ``details`` holds ``unknown_turn_ids`` (planned but absent) and ``unplanned_turn_ids``
    (present but not planned), each sorted and at most ten, their full counts, ``order_differs``,
    and the two ``tokens_before`` figures when those disagree; when the plan would remove a
    ``SYSTEM`` or pinned turn, also that ``turn_id`` and the ``action``.
    """

    code: ClassVar[str] = "COMPACTION_PLAN_MISMATCH"


def budget_unsatisfiable(
    untouchable_tokens: int, max_tokens: int, untouchable_turn_count: int
) -> BudgetUnsatisfiable:
    """Build the error for an untouchable set over budget, with both numbers in ``details``."""
    details: dict[str, Any] = {
        "untouchable_tokens": untouchable_tokens,
        "max_tokens": max_tokens,
        "untouchable_turn_count": untouchable_turn_count,
    }
    turns = (
        "the 1 untouchable turn needs"
        if untouchable_turn_count == 1
        else f"the {untouchable_turn_count} untouchable turns need"
    )
    return BudgetUnsatisfiable(
        f"{turns} {untouchable_tokens} tokens, over the budget of {max_tokens}",
        details=details,
    )
