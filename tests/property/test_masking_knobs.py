"""ObservationMaskingPolicy's ``exclude_tools`` and ``min_reclaim`` on random transcripts.

The oracle (``tests.oracle.masking``) restates both knobs; the properties below also state each
one on its own, without it. With the defaults the policy decides as it always did: the existing
masking oracle test builds it with the defaults.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutctx import Action, BudgetUnsatisfiable, ObservationMaskingPolicy
from tests import oracle
from tests.property.test_policy_contracts import assert_contracts, untouchable
from tests.strategies import TOOL_NAMES, named_tool_cases

if TYPE_CHECKING:
    from cutctx import CompactionBudget, Transcript

knobs = st.builds(
    oracle.Mask,
    keep_recent_results=st.integers(min_value=0, max_value=2),
    exclude_tools=st.lists(st.sampled_from(TOOL_NAMES), max_size=2, unique=True).map(tuple),
    min_reclaim=st.sampled_from([0, 0, 1, 50, 200, 600, 5000]),
)


def policy_for(rule: oracle.Mask) -> ObservationMaskingPolicy:
    return ObservationMaskingPolicy(
        rule.keep_recent_results,
        rule.placeholder,
        exclude_tools=rule.exclude_tools,
        min_reclaim=rule.min_reclaim,
    )


def satisfiable(transcript: Transcript, budget: CompactionBudget) -> bool:
    fixed = untouchable(transcript, budget)
    floor = sum(t.token_estimate for t, f in zip(transcript.turns, fixed, strict=True) if f)
    return floor <= budget.max_tokens


@given(named_tool_cases(), knobs)
def test_masking_with_the_knobs_equals_the_oracle(
    case: tuple[Transcript, CompactionBudget], rule: oracle.Mask
) -> None:
    """Catches an excluded result masked (or one not excluded skipped), masking that stops at
    the fit before ``min_reclaim`` came back, masking that goes on after both are met, or a plan
    that masks although every eligible result together gives less than ``min_reclaim``."""
    transcript, budget = case
    expected = oracle.expected_plan(transcript, budget, [rule], chained=False)
    if expected is None:
        with pytest.raises(BudgetUnsatisfiable):
            policy_for(rule).decide(transcript, budget)
        return
    plan = policy_for(rule).decide(transcript, budget)
    assert plan.to_dict() == expected
    assert_contracts(transcript, budget, plan)


@given(named_tool_cases(), knobs)
def test_excluded_results_stay_and_a_plan_that_masks_reclaims_the_minimum(
    case: tuple[Transcript, CompactionBudget], rule: oracle.Mask
) -> None:
    """Catches, without the oracle, a masked result of an excluded tool, or a plan that masks
    something yet reclaims fewer than ``min_reclaim`` tokens."""
    transcript, budget = case
    if not satisfiable(transcript, budget):
        return
    plan = policy_for(rule).decide(transcript, budget)
    reclaimed = 0
    for turn, action in zip(transcript.turns, plan.actions, strict=True):
        if action.action is Action.MASK:
            assert turn.metadata.get("cutctx.tool_name") not in rule.exclude_tools
            assert action.replacement is not None
            reclaimed += turn.token_estimate - action.replacement.token_estimate
    assert reclaimed == 0 or reclaimed >= rule.min_reclaim
    assert plan.tokens_after_estimate == transcript.token_estimate() - reclaimed
