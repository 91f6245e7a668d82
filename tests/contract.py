"""Names the contract (SPEC §2) fixes, stated once for the tests that check them."""

from __future__ import annotations

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
"""The fields of ``CompactionReport`` in their positional order, and the keys of its dict."""
