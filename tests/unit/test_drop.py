"""DropOldestPolicy: whole exchanges, oldest first, until the budget fits."""

from __future__ import annotations

import pytest
from baseaicore import ValidationError

from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionExecutor,
    CompactionPolicy,
    DropOldestPolicy,
    Role,
    Transcript,
    TranscriptTurn,
)

POLICY = DropOldestPolicy()


def turn(
    turn_id: str,
    tokens: int,
    role: Role = Role.USER,
    call: str | None = None,
    *,
    pinned: bool = False,
) -> TranscriptTurn:
    return TranscriptTurn(turn_id, role, f"body of {turn_id}", tokens, call, pinned)


def decided(transcript: Transcript, budget: CompactionBudget) -> dict[str, str]:
    plan = POLICY.decide(transcript, budget)
    return {action.turn_id: action.action.value for action in plan.actions}


def dropped(transcript: Transcript, budget: CompactionBudget) -> list[str]:
    plan = POLICY.decide(transcript, budget)
    return [action.turn_id for action in plan.actions if action.action is Action.DROP]


class TestDropOldestPolicy:
    def test_name_and_version_are_the_compatible_ones(self) -> None:
        assert (POLICY.name, POLICY.version) == ("drop_oldest", "1.0.0")
        assert repr(POLICY) == "DropOldestPolicy()"
        assert isinstance(POLICY, CompactionPolicy)

    def test_drops_oldest_first_and_stops_as_soon_as_it_fits(self) -> None:
        transcript = Transcript(tuple(turn(f"u{i}", 10) for i in range(5)))
        # 50 tokens, budget 25: dropping u0, u1, u2 leaves 20 (two drops would leave 30).
        plan = POLICY.decide(transcript, CompactionBudget(25, 0))
        assert [a.action.value for a in plan.actions] == ["drop", "drop", "drop", "keep", "keep"]
        assert (plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet) == (
            50,
            20,
            False,
        )
        assert plan.summarization_requests == ()
        assert plan.estimator_ratio is None
        assert (plan.policy_name, plan.policy_version) == ("drop_oldest", "1.0.0")

    def test_drops_a_whole_exchange_even_past_the_point_of_fitting(self) -> None:
        transcript = Transcript(
            (
                turn("a1", 10, Role.ASSISTANT, "c1"),
                turn("t1", 100, Role.TOOL, "c1"),
                turn("u2", 10),
            )
        )
        # 120 tokens, budget 110: the a1/t1 exchange goes whole, leaving 10.
        assert dropped(transcript, CompactionBudget(110, 0)) == ["a1", "t1"]

    def test_an_exchange_is_as_old_as_its_earliest_member_and_drops_together(self) -> None:
        transcript = Transcript(
            (
                turn("a1", 5, Role.ASSISTANT, "c1"),
                turn("u1", 20),
                turn("u2", 20),
                turn("t1", 5, Role.TOOL, "c1"),
                turn("u3", 20),
            )
        )
        # 70 tokens, budget 60: the exchange (a1 + t1 = 10) is oldest; dropping it gives 60.
        assert dropped(transcript, CompactionBudget(60, 0)) == ["a1", "t1"]

    def test_one_assistant_turn_issuing_several_calls_is_not_split_by_them(self) -> None:
        # Two calls c1 and c2 share no id, so each is its own exchange: a1+t1 and a2+t2.
        transcript = Transcript(
            (
                turn("a1", 5, Role.ASSISTANT, "c1"),
                turn("a2", 5, Role.ASSISTANT, "c2"),
                turn("t2", 30, Role.TOOL, "c2"),
                turn("t1", 30, Role.TOOL, "c1"),
                turn("u", 10),
            )
        )
        # 80 tokens, budget 50: a1+t1 (35) goes first, leaving 45.
        assert dropped(transcript, CompactionBudget(50, 0)) == ["a1", "t1"]

    def test_an_untouchable_member_locks_its_whole_exchange(self) -> None:
        transcript = Transcript(
            (
                turn("a1", 30, Role.ASSISTANT, "c1"),
                turn("u1", 10),
                turn("u2", 10),
                turn("t1", 5, Role.TOOL, "c1", pinned=True),
            )
        )
        # 55 tokens, budget 40: a1 is locked by the pinned t1, so u1 and u2 go: 35.
        plan = POLICY.decide(transcript, CompactionBudget(40, 0))
        assert [a.action.value for a in plan.actions] == ["keep", "drop", "drop", "keep"]
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (35, False)

    def test_a_locked_exchange_that_keeps_it_over_is_reported_unmet(self) -> None:
        transcript = Transcript(
            (
                turn("s", 10, Role.SYSTEM),
                turn("a1", 50, Role.ASSISTANT, "c1"),
                turn("u1", 20),
                turn("t1", 5, Role.TOOL, "c1"),
            )
        )
        # Protecting the last turn (t1) locks a1 too. The untouchable set is s + t1 = 15, within
        # 30, but only u1 can go: 10 + 50 + 5 = 65, over 30.
        plan = POLICY.decide(transcript, CompactionBudget(30, 1))
        assert [a.action.value for a in plan.actions] == ["keep", "keep", "drop", "keep"]
        assert (plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet) == (85, 65, True)

    def test_system_turns_anywhere_are_kept(self) -> None:
        transcript = Transcript((turn("u1", 10), turn("s", 10, Role.SYSTEM), turn("u2", 10)))
        assert decided(transcript, CompactionBudget(10, 0)) == {
            "u1": "drop",
            "s": "keep",
            "u2": "drop",
        }

    def test_does_nothing_when_the_transcript_already_fits(self) -> None:
        transcript = Transcript((turn("u1", 10), turn("u2", 10)))
        plan = POLICY.decide(transcript, CompactionBudget(20, 0))
        assert all(action.action is Action.KEEP for action in plan.actions)
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (20, False)

    def test_an_untouchable_set_over_budget_raises_with_both_numbers(self) -> None:
        transcript = Transcript(
            (turn("s", 30, Role.SYSTEM), turn("u1", 10), turn("p", 20, pinned=True), turn("u2", 5))
        )
        # Untouchable: s 30 + p 20 + the last turn u2 5 = 55, over 54.
        with pytest.raises(BudgetUnsatisfiable) as caught:
            POLICY.decide(transcript, CompactionBudget(54, 1))
        assert caught.value.details == {
            "untouchable_tokens": 55,
            "max_tokens": 54,
            "untouchable_turn_count": 3,
        }
        assert "\n" not in str(caught.value)

    def test_an_untouchable_set_equal_to_the_budget_is_satisfied(self) -> None:
        transcript = Transcript(
            (turn("s", 30, Role.SYSTEM), turn("u1", 10), turn("p", 20, pinned=True), turn("u2", 5))
        )
        plan = POLICY.decide(transcript, CompactionBudget(55, 1))
        assert dropped(transcript, CompactionBudget(55, 1)) == ["u1"]
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (55, False)

    def test_a_locked_exchange_does_not_count_towards_the_unsatisfiable_threshold(self) -> None:
        transcript = Transcript(
            (turn("a1", 100, Role.ASSISTANT, "c1"), turn("t1", 5, Role.TOOL, "c1"))
        )
        # Only t1 (5) is strictly untouchable, so a budget of 5 is satisfiable, though unmet.
        plan = POLICY.decide(transcript, CompactionBudget(5, 1))
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (105, True)

    def test_with_nothing_protected_it_drops_down_to_an_empty_view(self) -> None:
        transcript = Transcript(
            (turn("u1", 10), turn("a1", 10, Role.ASSISTANT, "c1"), turn("t1", 10, Role.TOOL, "c1"))
        )
        plan = POLICY.decide(transcript, CompactionBudget(0, 0))
        assert dropped(transcript, CompactionBudget(0, 0)) == ["u1", "a1", "t1"]
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (0, False)
        view = CompactionExecutor().apply(transcript, plan).transcript
        assert view.turns == ()

    def test_zero_token_turns_older_than_the_cut_go_too(self) -> None:
        transcript = Transcript((turn("z", 0), turn("u1", 10), turn("u2", 10)))
        # 20 tokens, budget 10: z (0) is older than u1 and dropped on the way: 10 left.
        assert dropped(transcript, CompactionBudget(10, 0)) == ["z", "u1"]

    def test_an_empty_transcript_gives_an_empty_plan(self) -> None:
        plan = POLICY.decide(Transcript(()), CompactionBudget(0, 0))
        assert (plan.actions, plan.tokens_before, plan.tokens_after_estimate) == ((), 0, 0)

    def test_deciding_twice_gives_the_same_plan(self) -> None:
        transcript = Transcript(tuple(turn(f"u{i}", 7) for i in range(6)))
        budget = CompactionBudget(20, 1)
        assert POLICY.decide(transcript, budget) == DropOldestPolicy().decide(transcript, budget)

    @pytest.mark.parametrize(
        ("transcript", "budget", "field"),
        [
            ((turn("u", 1),), CompactionBudget(1), "transcript"),
            (Transcript((turn("u", 1),)), 10, "budget"),
        ],
    )
    def test_arguments_that_are_not_cutctx_values_are_refused(
        self, transcript: object, budget: object, field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            POLICY.decide(transcript, budget)  # type: ignore[arg-type]
        assert caught.value.details["field"] == field
