"""Every policy's plan equals, field for field, the plan its independent oracle expects.

The oracles (``tests/oracle.py``) restate each 0.1 rule as a plain loop; a difference in any
action, stub, figure, group id, request order or recorded ratio fails these tests.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cutctx import (
    BudgetUnsatisfiable,
    CompactionPolicy,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    SummarizingPolicy,
)
from tests import oracle
from tests.strategies import cases

if TYPE_CHECKING:
    from cutctx import CompactionBudget, Transcript

masks = st.builds(
    oracle.Mask,
    keep_recent_results=st.integers(min_value=0, max_value=3),
    placeholder=st.sampled_from([oracle.PLACEHOLDER, "[gone]", "x"]),
)
summaries = st.builds(
    oracle.Summarize,
    prompt_id=st.just("summaries/v1"),
    target_ratio=st.sampled_from([0.2, 0.5, 0.25, 1.0, 0.1, 0.35, 0.9, 1.5]),
    min_span_turns=st.integers(min_value=1, max_value=5),
)
rules = st.one_of(masks, summaries, st.just(oracle.Drop()))


def policy_for(rule: oracle.Rule) -> CompactionPolicy:
    """The real policy a rule describes."""
    if isinstance(rule, oracle.Mask):
        return ObservationMaskingPolicy(rule.keep_recent_results, rule.placeholder)
    if isinstance(rule, oracle.Summarize):
        return SummarizingPolicy(rule.prompt_id, rule.target_ratio, rule.min_span_turns)
    return DropOldestPolicy()


def check_against_oracle(
    policy: CompactionPolicy,
    transcript: Transcript,
    budget: CompactionBudget,
    rules: list[oracle.Rule],
    *,
    chained: bool,
) -> None:
    expected = oracle.expected_plan(transcript, budget, rules, chained=chained)
    if expected is None:
        with pytest.raises(BudgetUnsatisfiable):
            policy.decide(transcript, budget)
        return
    assert policy.decide(transcript, budget).to_dict() == expected


@given(cases(), masks)
def test_masking_plan_equals_the_oracle(
    case: tuple[Transcript, CompactionBudget], rule: oracle.Mask
) -> None:
    """Catches any drift in eligibility, the floor, oldest-first order, stop-once-fits, the
    stub's text and price, skip-when-not-smaller, or when the ratio is recorded."""
    transcript, budget = case
    check_against_oracle(policy_for(rule), transcript, budget, [rule], chained=False)


@given(cases(), summaries)
def test_summarizing_plan_equals_the_oracle(
    case: tuple[Transcript, CompactionBudget], rule: oracle.Summarize
) -> None:
    """Catches a wrong span (not the oldest piece of whole removable exchanges, too short),
    a wrong target (rounding) or a wrong group id."""
    transcript, budget = case
    check_against_oracle(policy_for(rule), transcript, budget, [rule], chained=False)


@given(cases())
def test_drop_oldest_plan_equals_the_oracle(case: tuple[Transcript, CompactionBudget]) -> None:
    """Catches dropping out of order, half an exchange, a locked exchange, or past the fit."""
    transcript, budget = case
    check_against_oracle(DropOldestPolicy(), transcript, budget, [oracle.Drop()], chained=False)


@given(
    cases(max_turns=16),
    st.lists(st.tuples(rules, st.booleans()), min_size=1, max_size=4),
)
def test_chain_plan_equals_the_oracle_composition(
    case: tuple[Transcript, CompactionBudget], members: list[tuple[oracle.Rule, bool]]
) -> None:
    """Catches a chain that projects wrongly (stubs, stand-ins and their price), runs a member
    after the view fits, mis-maps a member's action on a stand-in (drop retires, fold merges),
    orders requests wrongly or keeps the wrong estimator ratio — whether a member is a built-in
    the chain drafts with directly or a foreign policy it must ask through ``decide``."""
    transcript, budget = case
    chain = [rule for rule, _ in members]
    policy = PolicyChain(
        [
            oracle.Foreign(policy_for(rule)) if foreign else policy_for(rule)
            for rule, foreign in members
        ]
    )
    check_against_oracle(policy, transcript, budget, chain, chained=True)
