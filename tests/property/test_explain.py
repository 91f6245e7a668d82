"""explain on random transcripts, budgets and policies: one reason per turn, true to the plan.

Would catch: a reason missing or out of order, a reason that names another action than the plan
takes, an ``untouchable`` reason for a turn outside the untouchable set (restated here from the
contract, not read from the gate) or a cut turn called untouchable, a summary reason naming
another group, and reasons that change between two calls or for the same plan read back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypothesis import given, reject

from cutctx import Action, BudgetUnsatisfiable, CompactionPlan, Role, explain
from tests.policy_strategies import policies
from tests.strategies import cases

if TYPE_CHECKING:
    from cutctx import CompactionBudget, CompactionPolicy, Transcript

type Case = tuple[Transcript, CompactionBudget]
PREFIX = {
    Action.MASK: "masked: ",
    Action.SUMMARIZE: "summarized in group ",
    Action.DROP: "dropped",
}


def untouchable(transcript: Transcript, budget: CompactionBudget) -> list[bool]:
    """Contract 2: every SYSTEM turn, every pinned turn and the last k turns."""
    first = len(transcript.turns) - budget.protected_recent_turns
    return [
        turn.role is Role.SYSTEM or turn.pinned or index >= first
        for index, turn in enumerate(transcript.turns)
    ]


@given(cases(), policies)
def test_every_turn_gets_one_reason_that_matches_its_action(
    case: Case, policy: CompactionPolicy
) -> None:
    """One reason per turn, in order: untouchable turns (and only they) say ``untouchable``, other
    kept turns say ``kept``, and each cut turn names its action (and its summary group)."""
    transcript, budget = case
    try:
        plan = policy.decide(transcript, budget)
    except BudgetUnsatisfiable:
        reject()
    reasons = explain(plan, transcript, budget)
    assert len(reasons) == len(transcript.turns)
    for action, reason, fixed in zip(
        plan.actions, reasons, untouchable(transcript, budget), strict=True
    ):
        if action.action is Action.KEEP:
            assert reason.startswith("untouchable: " if fixed else "kept: ")
        else:
            assert not fixed
            assert reason.startswith(PREFIX[action.action])
        if action.summary_group is not None:
            assert reason.startswith(f"summarized in group {action.summary_group} (")


@given(cases(), policies)
def test_the_reasons_are_deterministic_and_read_from_the_plan_alone(
    case: Case, policy: CompactionPolicy
) -> None:
    """Two calls agree, and the plan read back from its JSON gets the same reasons."""
    transcript, budget = case
    try:
        plan = policy.decide(transcript, budget)
    except BudgetUnsatisfiable:
        reject()
    back = CompactionPlan.from_json(plan.to_json(), transcript=transcript, budget=budget)
    assert explain(plan, transcript, budget) == explain(back, transcript, budget)
    assert explain(plan, transcript, budget) == explain(plan, transcript, budget)
