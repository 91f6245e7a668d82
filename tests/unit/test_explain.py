"""explain: one short reason per turn, read from the plan, the transcript and the budget."""

from __future__ import annotations

from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    Action,
    CompactionBudget,
    CompactionPlan,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PlanTranscriptMismatch,
    Role,
    SummarizingPolicy,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
    explain,
)
from tests.excerpt_cases import AGENT, capped

# s system; u1 user; a1 + t1 one exchange (c1); u2 pinned; a2 + t2 an exchange (c2); a3 last.
TRANSCRIPT = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "You are careful.", 5),
        TranscriptTurn("u1", Role.USER, "What changed?", 30),
        TranscriptTurn("a1", Role.ASSISTANT, "Let me look.", 20, tool_call_id="c1"),
        TranscriptTurn("t1", Role.TOOL, "log line\n" * 200, 500, tool_call_id="c1"),
        TranscriptTurn("u2", Role.USER, "And the tests?", 40, pinned=True),
        TranscriptTurn("a2", Role.ASSISTANT, "Running.", 20, tool_call_id="c2"),
        TranscriptTurn("t2", Role.TOOL, "ok " * 300, 300, tool_call_id="c2"),
        TranscriptTurn("a3", Role.ASSISTANT, "All green.", 10),
    )
)


def reasons_for(policy: Any, budget: CompactionBudget) -> tuple[str, ...]:
    return explain(policy.decide(TRANSCRIPT, budget), TRANSCRIPT, budget)


class TestExplain:
    def test_a_transcript_that_fits_says_so_for_every_turn_it_could_cut(self) -> None:
        budget = CompactionBudget(10_000, protected_recent_turns=2)
        assert reasons_for(DropOldestPolicy(), budget) == (
            "untouchable: system turn",
            "kept: the transcript fits the budget",
            "kept: the transcript fits the budget",
            "kept: the transcript fits the budget",
            "untouchable: pinned",
            "kept: the transcript fits the budget",
            "untouchable: protected tail (the last 2 turns)",
            "untouchable: protected tail (the last 2 turns)",
        )

    def test_an_excerpt_names_the_cap_and_both_prices(self) -> None:
        budget = capped(10_000)
        plan = ExcerptingPolicy().decide(AGENT, budget)
        reasons = explain(plan, AGENT, budget)
        r1, r2 = plan.actions[3].replacement, plan.actions[6].replacement
        assert r1 is not None
        assert r2 is not None
        assert reasons[3] == (
            f"excerpted: tool result over the cap of 80 tokens "
            f"({AGENT.turns[3].token_estimate} → {r1.token_estimate} tokens)"
        )
        assert reasons[6] == (
            f"excerpted: tool result over the cap of 80 tokens (untouchable) "
            f"({AGENT.turns[6].token_estimate} → {r2.token_estimate} tokens)"
        )

    def test_dropping_names_each_exchange_and_its_size(self) -> None:
        budget = CompactionBudget(400, protected_recent_turns=1)
        assert reasons_for(DropOldestPolicy(), budget) == (
            "untouchable: system turn",
            "dropped: removed while over budget",
            "dropped with its exchange c1 (2 turns) while over budget",
            "dropped with its exchange c1 (2 turns) while over budget",
            "untouchable: pinned",
            "kept: the budget fits without cutting it",
            "kept: the budget fits without cutting it",
            "untouchable: protected tail (the last turn)",
        )

    def test_a_turn_whose_exchange_is_untouchable_says_so(self) -> None:
        budget = CompactionBudget(400, protected_recent_turns=2)  # t2 protected: a2 is held
        reasons = reasons_for(DropOldestPolicy(), budget)
        assert reasons[5] == "kept: its exchange holds an untouchable turn"
        assert reasons[6] == "untouchable: protected tail (the last 2 turns)"

    def test_masking_gives_both_estimates_and_an_unmet_budget_says_so(self) -> None:
        budget = CompactionBudget(100, protected_recent_turns=1)
        plan = ObservationMaskingPolicy(0).decide(TRANSCRIPT, budget)
        assert plan.budget_unmet
        stubs = [a.replacement.token_estimate for a in plan.actions if a.replacement]
        assert explain(plan, TRANSCRIPT, budget) == (
            "untouchable: system turn",
            "kept: the policy had no move left for it (budget unmet)",
            "kept: the policy had no move left for it (budget unmet)",
            f"masked: old tool result stubbed while over budget (500 → {stubs[0]} tokens)",
            "untouchable: pinned",
            "kept: the policy had no move left for it (budget unmet)",
            f"masked: old tool result stubbed while over budget (300 → {stubs[1]} tokens)",
            "untouchable: protected tail (the last turn)",
        )

    def test_a_summary_names_its_group_its_turns_and_its_tokens(self) -> None:
        budget = CompactionBudget(400, protected_recent_turns=1)
        plan = SummarizingPolicy("p", 0.1, 2).decide(TRANSCRIPT, budget)
        (request,) = plan.summarization_requests
        assert request.turn_ids == ("u1", "a1", "t1")
        reason = f"summarized in group {request.group_id} (3 turns, 550 → 55 tokens)"
        assert explain(plan, TRANSCRIPT, budget)[1:4] == (reason, reason, reason)

    def test_a_summary_of_one_turn_says_turn_in_the_singular(self) -> None:
        transcript = Transcript(
            (
                TranscriptTurn("u1", Role.USER, "x" * 400, 100),
                TranscriptTurn("p", Role.USER, "keep", 5, pinned=True),
                TranscriptTurn("u2", Role.USER, "y", 5),
            )
        )
        budget = CompactionBudget(50, protected_recent_turns=1)
        plan = SummarizingPolicy("p", 0.1, 1).decide(transcript, budget)
        (request,) = plan.summarization_requests
        assert request.turn_ids == ("u1",)
        assert explain(plan, transcript, budget)[0] == (
            f"summarized in group {request.group_id} (1 turn, 100 → 10 tokens)"
        )

    def test_a_masked_turn_that_is_not_a_tool_result_is_named_by_its_role(self) -> None:
        transcript = Transcript((TranscriptTurn("u", Role.USER, "x" * 100, 25),))
        budget = CompactionBudget(10, protected_recent_turns=0)
        plan = CompactionPlan(
            actions=(TurnAction("u", Action.MASK, None, TurnReplacement("[gone]", 2)),),
            summarization_requests=(),
            tokens_before=25,
            tokens_after_estimate=2,
            policy_name="hand_built",
            policy_version="1",
            estimator_ratio=None,
            budget_unmet=False,
            transcript=transcript,
            budget=budget,
        )
        assert explain(plan, transcript, budget) == (
            "masked: user turn body stubbed while over budget (25 → 2 tokens)",
        )

    def test_the_same_arguments_give_the_same_reasons(self) -> None:
        budget = CompactionBudget(400, protected_recent_turns=1)
        plan = DropOldestPolicy().decide(TRANSCRIPT, budget)
        assert explain(plan, TRANSCRIPT, budget) == explain(plan, TRANSCRIPT, budget)

    def test_a_plan_for_another_transcript_is_a_mismatch(self) -> None:
        budget = CompactionBudget(400, protected_recent_turns=1)
        plan = DropOldestPolicy().decide(TRANSCRIPT, budget)
        with pytest.raises(PlanTranscriptMismatch):
            explain(plan, Transcript(TRANSCRIPT.turns[1:]), budget)

    def test_a_plan_that_does_not_hold_under_the_budget_is_refused(self) -> None:
        plan = DropOldestPolicy().decide(TRANSCRIPT, CompactionBudget(400, 1))
        with pytest.raises(ValidationError, match="budget_unmet is False for 375 tokens"):
            explain(plan, TRANSCRIPT, CompactionBudget(300, 1))

    @pytest.mark.parametrize("position", range(3))
    def test_arguments_of_the_wrong_type_are_refused(self, position: int) -> None:
        budget = CompactionBudget(400, protected_recent_turns=1)
        arguments: list[Any] = [DropOldestPolicy().decide(TRANSCRIPT, budget), TRANSCRIPT, budget]
        arguments[position] = "nonsense"
        with pytest.raises(ValidationError, match=r"explain\(\)"):
            explain(*arguments)
