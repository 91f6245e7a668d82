"""What the contract fixes, stated once for the tests that check it: the plan's and the report's
field names, and the public constructor's way of making a plan from another plan's fields."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cutctx import CompactionPlan

if TYPE_CHECKING:
    from cutctx import CompactionBudget, Transcript

PLAN_FIELDS: tuple[str, ...] = (
    "actions",
    "summarization_requests",
    "tokens_before",
    "tokens_after_estimate",
    "policy_name",
    "policy_version",
    "estimator_ratio",
    "budget_unmet",
)
"""The fields of ``CompactionPlan`` in their declared order (all keyword-only, as in 0.1)."""

REPORT_FIELDS: tuple[str, ...] = (
    "plan_hash",
    "policy_name",
    "policy_version",
    "tokens_before",
    "tokens_after_estimate",
    "estimator_ratio",
    "budget_unmet",
    "turns_before",
    "turns_after",
    "kept_turn_ids",
    "masked_turn_ids",
    "summarized_turn_ids",
    "dropped_turn_ids",
    "summary_turn_ids",
)
"""The fields of ``CompactionReport`` in their declared order, and the keys of its dict."""


def rebuilt(
    plan: CompactionPlan, transcript: Transcript, budget: CompactionBudget
) -> CompactionPlan:
    """Return the plan ``CompactionPlan(...)`` makes from ``plan``'s fields (its actions read)."""
    return CompactionPlan(
        actions=plan.actions,
        summarization_requests=plan.summarization_requests,
        tokens_before=plan.tokens_before,
        tokens_after_estimate=plan.tokens_after_estimate,
        policy_name=plan.policy_name,
        policy_version=plan.policy_version,
        estimator_ratio=plan.estimator_ratio,
        budget_unmet=plan.budget_unmet,
        transcript=transcript,
        budget=budget,
        estimator_name=plan.estimator_name,
    )
