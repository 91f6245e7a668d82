"""Contracts 1-5 for DropOldestPolicy and the executor, over random transcripts.

Every oracle here restates a contract in a few obvious lines; none calls the library's own
layout or gate.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given

from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionExecutor,
    CompactionPlan,
    DropOldestPolicy,
    Role,
    Transcript,
)
from tests.strategies import cases

POLICY = DropOldestPolicy()
EXECUTOR = CompactionExecutor()
type Case = tuple[Transcript, CompactionBudget]


def snapshot(transcript: Transcript) -> list[tuple[Any, ...]]:
    """A deep, plain copy of everything a transcript holds."""
    return [
        (t.turn_id, t.role, t.content, t.token_estimate, t.tool_call_id, t.pinned, dict(t.metadata))
        for t in transcript.turns
    ]


def untouchable(transcript: Transcript, budget: CompactionBudget) -> list[bool]:
    """Contract 2: every SYSTEM turn, every pinned turn and the last k turns."""
    count = len(transcript.turns)
    return [
        turn.role is Role.SYSTEM or turn.pinned or index >= count - budget.protected_recent_turns
        for index, turn in enumerate(transcript.turns)
    ]


def untouchable_total(transcript: Transcript, budget: CompactionBudget) -> int:
    flags = untouchable(transcript, budget)
    return sum(t.token_estimate for t, flag in zip(transcript.turns, flags, strict=True) if flag)


def exchanges(transcript: Transcript) -> list[list[int]]:
    """Contract 3: turns sharing a tool_call_id form one exchange; every other turn is alone.

    Listed by earliest member, which is also how old an exchange is.
    """
    by_call: dict[str, list[int]] = {}
    units: list[list[int]] = []
    for index, turn in enumerate(transcript.turns):
        if turn.tool_call_id is None:
            units.append([index])
        elif turn.tool_call_id in by_call:
            by_call[turn.tool_call_id].append(index)
        else:
            by_call[turn.tool_call_id] = [index]
            units.append(by_call[turn.tool_call_id])
    return units


def decide(case: Case) -> CompactionPlan | None:
    """The plan, or None after checking BudgetUnsatisfiable was raised exactly when the contract
    says the budget is unsatisfiable: the untouchable total strictly over ``max_tokens``."""
    transcript, budget = case
    total = untouchable_total(transcript, budget)
    if total > budget.max_tokens:
        with pytest.raises(BudgetUnsatisfiable) as caught:
            POLICY.decide(transcript, budget)
        assert caught.value.details == {
            "untouchable_tokens": total,
            "max_tokens": budget.max_tokens,
            "untouchable_turn_count": sum(untouchable(transcript, budget)),
        }
        return None
    return POLICY.decide(transcript, budget)


@given(cases())
def test_contract_1_deciding_and_applying_never_change_the_input(case: Case) -> None:
    """Contract 1 (a plan is a view): deciding and applying leave every turn of the input as it
    was, field for field and object for object."""
    transcript, _ = case
    before = snapshot(transcript)
    objects = transcript.turns
    plan = decide(case)
    if plan is not None:
        EXECUTOR.apply(transcript, plan)
    assert snapshot(transcript) == before
    assert all(new is old for new, old in zip(transcript.turns, objects, strict=True))


@given(cases())
def test_contract_2_untouchable_turns_are_kept_as_they_were(case: Case) -> None:
    """Contract 2: every SYSTEM, pinned and recently protected turn is KEEP, and the view holds
    that very turn object."""
    transcript, budget = case
    plan = decide(case)
    if plan is None:
        return
    view_ids = {id(turn) for turn in EXECUTOR.apply(transcript, plan).transcript.turns}
    flags = untouchable(transcript, budget)
    for turn, action, flag in zip(transcript.turns, plan.actions, flags, strict=True):
        if flag:
            assert action.action is Action.KEEP, turn.turn_id
            assert id(turn) in view_ids


@given(cases())
def test_contract_3_an_exchange_stays_or_goes_as_one(case: Case) -> None:
    """Contract 3: the members of an exchange, however far apart, are all kept or all dropped."""
    transcript, _ = case
    plan = decide(case)
    if plan is None:
        return
    for members in exchanges(transcript):
        kinds = {plan.actions[index].action for index in members}
        assert len(kinds) == 1, [transcript.turns[index].turn_id for index in members]


@given(cases())
def test_contract_4_the_budget_outcome_is_trichotomous(case: Case) -> None:
    """Contract 4: the plan fits; or it says budget_unmet with an estimate over budget; or it
    raised BudgetUnsatisfiable exactly when the untouchable set alone is over (checked in
    ``decide``). No plan claims to fit while over."""
    _, budget = case
    plan = decide(case)
    if plan is None:
        return
    if plan.budget_unmet:
        assert plan.tokens_after_estimate > budget.max_tokens
    else:
        assert plan.tokens_after_estimate <= budget.max_tokens


@given(cases())
def test_drop_oldest_matches_a_restated_rule(case: Case) -> None:
    """DropOldestPolicy drops whole unlocked exchanges, oldest first, while over budget, and
    nothing else: a plan that differs from this restatement dropped too much or too little."""
    transcript, budget = case
    plan = decide(case)
    if plan is None:
        return
    flags = untouchable(transcript, budget)
    expected = [Action.KEEP] * len(transcript.turns)
    total = transcript.token_estimate()
    for members in exchanges(transcript):
        if total <= budget.max_tokens:
            break
        if any(flags[index] for index in members):
            continue
        for index in members:
            expected[index] = Action.DROP
            total -= transcript.turns[index].token_estimate
    assert [action.action for action in plan.actions] == expected
    assert plan.tokens_after_estimate == total
    assert plan.summarization_requests == ()


@given(cases())
def test_contract_5_deciding_twice_gives_the_same_plan_hash(case: Case) -> None:
    """Contract 5 (determinism): the same transcript and budget give an equal plan with a
    byte-identical canonical form, from a fresh policy object too."""
    first = decide(case)
    if first is None:
        return
    second = DropOldestPolicy().decide(*case)
    assert second == first
    assert second.to_json() == first.to_json()
    assert second.plan_hash() == first.plan_hash()


@given(cases())
def test_the_view_holds_exactly_the_planned_token_total(case: Case) -> None:
    """Contract 6 (honest figures): the applied view adds up to the plan's estimate."""
    transcript, _ = case
    plan = decide(case)
    if plan is None:
        return
    result = EXECUTOR.apply(transcript, plan)
    summed = sum(turn.token_estimate for turn in result.transcript.turns)
    assert summed == result.transcript.token_estimate() == plan.tokens_after_estimate
    assert result.report.tokens_after_estimate == plan.tokens_after_estimate
    assert result.report.plan_hash == plan.plan_hash()


@given(cases())
def test_the_report_id_lists_partition_the_input_ids(case: Case) -> None:
    """The report accounts for every input turn exactly once, in transcript order."""
    transcript, _ = case
    plan = decide(case)
    if plan is None:
        return
    report = EXECUTOR.apply(transcript, plan).report
    lists = (
        report.kept_turn_ids,
        report.masked_turn_ids,
        report.summarized_turn_ids,
        report.dropped_turn_ids,
    )
    order = {turn_id: index for index, turn_id in enumerate(transcript.turn_ids())}
    assert sorted(sum(lists, ()), key=order.__getitem__) == list(transcript.turn_ids())
    assert sum(len(ids) for ids in lists) == len(transcript.turns)
    for ids in lists:
        assert list(ids) == sorted(ids, key=order.__getitem__)
    assert (report.turns_before, report.turns_after) == (
        len(transcript.turns),
        len(report.kept_turn_ids),
    )


@given(cases())
def test_a_view_planned_again_is_legal_and_a_fitting_view_is_left_alone(case: Case) -> None:
    """A view is an ordinary transcript: planning over it again follows the same contracts, and
    when the first plan fit, the second keeps every turn and requests nothing."""
    transcript, budget = case
    plan = decide(case)
    if plan is None:
        return
    view = EXECUTOR.apply(transcript, plan).transcript
    again = decide((view, budget))
    if not plan.budget_unmet:
        assert again is not None
        assert all(action.action is Action.KEEP for action in again.actions)
        assert again.summarization_requests == ()
        assert again.tokens_after_estimate == view.token_estimate()
    if again is not None:
        turns = EXECUTOR.apply(view, again).transcript.turns
        assert sum(turn.token_estimate for turn in turns) == again.tokens_after_estimate
