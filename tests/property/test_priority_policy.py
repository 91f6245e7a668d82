"""PriorityPolicy on random transcripts with priorities: its oracle, its special cases, and the
contracts every chain with it keeps.

The transcripts (``tests.strategies.prioritized_cases``) are the contract tests' transcripts
with a few priority levels (negative ones, ties and turns without one) spread over their turns,
so exchanges of mixed priority, locked exchanges and interleaved calls all occur.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CompactionExecutor,
    CompactionPolicy,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    SummarizingPolicy,
    Transcript,
)
from tests import oracle
from tests.property.test_policy_contracts import assert_contracts, untouchable
from tests.property.test_policy_oracles import masks, policy_for, summaries
from tests.strategies import cases, prioritized_agent_cases, prioritized_cases

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx import CompactionBudget, CompactionPlan

priorities = st.builds(
    oracle.Priority,
    mask_results=st.booleans(),
    keep_recent_results=st.integers(min_value=0, max_value=3),
    placeholder=st.sampled_from([oracle.PLACEHOLDER, "[gone]"]),
)


def priority_for(rule: oracle.Priority) -> PriorityPolicy:
    """The real policy a priority rule describes."""
    return PriorityPolicy(
        mask_results=rule.mask_results,
        keep_recent_results=rule.keep_recent_results,
        placeholder=rule.placeholder,
    )


def real(rule: oracle.Rule) -> CompactionPolicy:
    """The real policy of any rule."""
    return priority_for(rule) if isinstance(rule, oracle.Priority) else policy_for(rule)


def shedding() -> PriorityPolicy:
    return PriorityPolicy(mask_results=True)


def summarizing() -> SummarizingPolicy:
    return SummarizingPolicy("summaries/v1", min_span_turns=2)


CHAINS: dict[str, Callable[[], CompactionPolicy]] = {
    "priority": PriorityPolicy,
    "priority(mask)": shedding,
    "priority(mask, floor 1)": lambda: PriorityPolicy(mask_results=True, keep_recent_results=1),
    "mask+priority": lambda: PolicyChain([ObservationMaskingPolicy(), PriorityPolicy()]),
    "mask+priority(mask)": lambda: PolicyChain([ObservationMaskingPolicy(0), shedding()]),
    "priority(mask)+mask": lambda: PolicyChain([shedding(), ObservationMaskingPolicy(0)]),
    "summarize+priority(mask)": lambda: PolicyChain([summarizing(), shedding()]),
    "priority+summarize+drop": lambda: PolicyChain(
        [PriorityPolicy(), summarizing(), DropOldestPolicy()]
    ),
    "mask+summarize+priority": lambda: PolicyChain(
        [ObservationMaskingPolicy(), summarizing(), PriorityPolicy()]
    ),
    "nested": lambda: PolicyChain([PolicyChain([summarizing(), shedding()]), PriorityPolicy()]),
    "foreign": lambda: PolicyChain(
        [oracle.Foreign(ObservationMaskingPolicy()), oracle.Foreign(shedding()), summarizing()]
    ),
}


def without_name(plan: CompactionPlan) -> dict[str, Any]:
    """The plan's dict without the policy's name: what it decided, not who decided it."""
    body = plan.to_dict()
    del body["policy_name"]
    return body


def at_one_priority(transcript: Transcript, level: int | None) -> Transcript:
    """``transcript`` with every turn's priority set to ``level`` (removed for ``None``)."""
    turns = []
    for turn in transcript.turns:
        metadata = {k: v for k, v in turn.metadata.items() if k != "cutctx.priority"}
        if level is not None:
            metadata["cutctx.priority"] = str(level)
        turns.append(dataclasses.replace(turn, metadata=metadata))
    return Transcript(tuple(turns))


@given(prioritized_cases() | prioritized_agent_cases())
def test_every_chain_with_the_priority_policy_keeps_the_contracts(
    case: tuple[Transcript, CompactionBudget],
) -> None:
    """Catches a plan that touches the untouchable set (contract 2), splits an exchange — a
    mixed-priority one included — (contract 3), claims to fit while over or miscounts
    (contract 4), leaks into a stub (contract 8) or differs between runs, under PriorityPolicy
    alone and in chains before, after and between the other policies, foreign and nested;
    and a ``BudgetUnsatisfiable`` for a satisfiable budget."""
    transcript, budget = case
    fixed = untouchable(transcript, budget)
    floor = sum(t.token_estimate for t, f in zip(transcript.turns, fixed, strict=True) if f)
    for key, make in CHAINS.items():
        note(f"policy: {key}")
        if floor > budget.max_tokens:
            with pytest.raises(BudgetUnsatisfiable):
                make().decide(transcript, budget)
            continue
        plan = make().decide(transcript, budget)
        assert_contracts(transcript, budget, plan)
        requests = {r.group_id: "summary" for r in plan.summarization_requests}
        view = CompactionExecutor().apply(transcript, plan, requests).transcript
        assert view.token_estimate() == plan.tokens_after_estimate
        assert make().decide(transcript, budget).plan_hash() == plan.plan_hash()


@given(prioritized_cases() | prioritized_agent_cases(), priorities)
def test_the_priority_plan_equals_the_oracle(
    case: tuple[Transcript, CompactionBudget], rule: oracle.Priority
) -> None:
    """Catches a wrong level (an exchange not shed at its highest member's priority), a level
    shed before a lower one is exhausted, masking after dropping within a level, a tie broken
    other than oldest first, a locked exchange dropped, a stub kept on a dropped result, a
    wrong floor or stub, or a ratio recorded when nothing was masked."""
    transcript, budget = case
    expected = oracle.expected_plan(transcript, budget, [rule], chained=False)
    if expected is None:
        with pytest.raises(BudgetUnsatisfiable):
            priority_for(rule).decide(transcript, budget)
        return
    assert priority_for(rule).decide(transcript, budget).to_dict() == expected


@given(
    prioritized_cases(max_turns=16) | prioritized_agent_cases(),
    st.lists(
        st.tuples(st.one_of(priorities, masks, summaries, st.just(oracle.Drop())), st.booleans()),
        min_size=1,
        max_size=3,
    ),
)
def test_a_chain_with_priority_members_equals_the_oracle_composition(
    case: tuple[Transcript, CompactionBudget], members: list[tuple[oracle.Rule, bool]]
) -> None:
    """Catches a chain that hands PriorityPolicy the wrong view: a re-priced real layout where
    it must see a projection (it would mask a turn a member already masked), stand-ins at a
    priority other than 0, or a projection that loses a masked turn's priority."""
    transcript, budget = case
    rules = [rule for rule, _ in members]
    chain = PolicyChain([oracle.Foreign(real(r)) if foreign else real(r) for r, foreign in members])
    expected = oracle.expected_plan(transcript, budget, rules, chained=True)
    if expected is None:
        with pytest.raises(BudgetUnsatisfiable):
            chain.decide(transcript, budget)
        return
    assert chain.decide(transcript, budget).to_dict() == expected


@given(cases(), st.none() | st.integers(min_value=-3, max_value=100))
def test_at_one_priority_without_masking_it_decides_exactly_as_drop_oldest(
    case: tuple[Transcript, CompactionBudget], level: int | None
) -> None:
    """Catches any difference from DropOldestPolicy — in an action, a figure or the outcome —
    when every turn has the same priority (or none): one level is drop-oldest."""
    transcript, budget = case
    transcript = at_one_priority(transcript, level)
    fixed = untouchable(transcript, budget)
    if sum(t.token_estimate for t, f in zip(transcript.turns, fixed, strict=True) if f) > (
        budget.max_tokens
    ):
        with pytest.raises(BudgetUnsatisfiable) as caught:
            PriorityPolicy().decide(transcript, budget)
        with pytest.raises(BudgetUnsatisfiable) as reference:
            DropOldestPolicy().decide(transcript, budget)
        assert caught.value.details == reference.value.details
        return
    expected = DropOldestPolicy().decide(transcript, budget)
    plan = PriorityPolicy().decide(transcript, budget)
    assert without_name(plan) == without_name(expected)
    assert (plan.policy_name, plan.policy_version) == ("priority", "1.0.0")


@given(cases(), st.integers(min_value=0, max_value=3))
def test_at_one_priority_with_masking_it_decides_as_masking_then_drop_oldest(
    case: tuple[Transcript, CompactionBudget], keep: int
) -> None:
    """Catches stubs that differ from ObservationMaskingPolicy's, or a mask-then-drop order
    that differs from the default chain's two free-then-lossy steps, at a single level."""
    transcript, budget = case
    chain = PolicyChain([ObservationMaskingPolicy(keep), DropOldestPolicy()])
    policy = PriorityPolicy(mask_results=True, keep_recent_results=keep)
    try:
        expected = chain.decide(transcript, budget)
    except BudgetUnsatisfiable:
        with pytest.raises(BudgetUnsatisfiable):
            policy.decide(transcript, budget)
        return
    assert without_name(policy.decide(transcript, budget)) == without_name(expected)


@given(prioritized_cases() | prioritized_agent_cases(), st.booleans())
def test_no_exchange_is_touched_while_a_lower_level_still_has_an_exchange_to_give(
    case: tuple[Transcript, CompactionBudget], mask_results: bool
) -> None:
    """Catches shedding out of level order, stated without the oracle: whenever any member of
    an exchange at level L is masked or dropped, every removable exchange below L is dropped."""
    transcript, budget = case
    fixed = untouchable(transcript, budget)
    if sum(t.token_estimate for t, f in zip(transcript.turns, fixed, strict=True) if f) > (
        budget.max_tokens
    ):
        return
    plan = PriorityPolicy(mask_results=mask_results).decide(transcript, budget)
    turns = transcript.turns
    levels = [oracle.level_of(transcript, p) for p in range(len(turns))]
    touched = [a.action is not Action.KEEP for a in plan.actions]
    if not any(touched):
        return
    highest = max(level for level, hit in zip(levels, touched, strict=True) if hit)
    for p, action in enumerate(plan.actions):
        if levels[p] < highest and oracle.is_removable(transcript, budget, p):
            assert action.action is Action.DROP, (turns[p].turn_id, levels[p], highest)
