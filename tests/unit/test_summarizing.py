"""SummarizingPolicy: the 0.1 span rules, with spans and targets worked out by hand."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import (
    GROUP_ID_PREFIX,
    Action,
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionExecutor,
    Role,
    SummarizingPolicy,
    Transcript,
    default_chain,
)
from tests.golden_cases import assistant, system, tool, user

if TYPE_CHECKING:
    from cutctx import CompactionPlan, TranscriptTurn


def digest_of(*turn_ids: str) -> str:
    return "span-" + sha256_of("\0".join(turn_ids))[:16]


def span(plan: CompactionPlan) -> tuple[str, ...] | None:
    """The one request's turn ids (and a check that the plan has at most one)."""
    requests = plan.summarization_requests
    assert len(requests) <= 1
    return requests[0].turn_ids if requests else None


def folded(plan: CompactionPlan) -> list[str]:
    return [a.turn_id for a in plan.actions if a.action is Action.SUMMARIZE]


def removable_chat(*sizes: int) -> list[TranscriptTurn]:
    """Plain user turns r0, r1, ... of the given sizes."""
    return [user(f"r{k}", size) for k, size in enumerate(sizes)]


class TestSummarizingPolicy:
    def test_name_and_version_are_the_0_1_figures(self) -> None:
        policy = SummarizingPolicy("summaries/v1")
        assert (policy.name, policy.version) == ("summarizing", "1.0.0")

    def test_defaults_are_a_fifth_and_four_turns(self) -> None:
        policy = SummarizingPolicy("summaries/v1")
        assert (policy.prompt_id, policy.target_ratio, policy.min_span_turns) == (
            "summaries/v1",
            0.2,
            4,
        )
        assert repr(policy) == (
            "SummarizingPolicy(prompt_id='summaries/v1', target_ratio=0.2, min_span_turns=4)"
        )

    def test_the_oldest_maximal_run_of_removable_turns_is_folded_whole_into_one_request(
        self,
    ) -> None:
        transcript = Transcript(
            (
                system("s", 10),
                user("u1", 30),
                assistant("a1", 20),
                user("u2", 40),
                assistant("a2", 30),
                user("p", 5, pinned=True),
                user("u3", 50),
                assistant("a3", 60),
                user("u4", 10),
                assistant("a4", 10),
            )
        )
        plan = SummarizingPolicy("summaries/v1").decide(transcript, CompactionBudget(100, 2))
        assert span(plan) == ("u1", "a1", "u2", "a2")
        request = plan.summarization_requests[0]
        # 30 + 20 + 40 + 30 = 120 tokens; a fifth is 24.
        assert request.target_tokens == 24
        assert request.prompt_id == "summaries/v1"
        assert request.group_id == digest_of("u1", "a1", "u2", "a2")
        assert request.group_id.startswith(GROUP_ID_PREFIX)
        assert len(request.group_id) == len("span-") + 16
        # One summary only, even though 265 - 120 + 24 = 169 is still over 100.
        assert plan.tokens_before == 265
        assert plan.tokens_after_estimate == 169
        assert plan.budget_unmet is True

    def test_the_summary_turn_is_an_assistant_turn_where_the_span_began(self) -> None:
        transcript = Transcript((user("u0", 5, pinned=True), *removable_chat(10, 10, 10, 10)))
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(5, 0))
        group = digest_of("r0", "r1", "r2", "r3")
        view = CompactionExecutor().apply(transcript, plan, {group: "gist"}).transcript
        assert view.turn_ids() == ("u0", "summary:" + group)
        summary = view.turns[1]
        assert (summary.role, summary.content, summary.token_estimate) == (
            Role.ASSISTANT,
            "gist",
            8,
        )

    @pytest.mark.parametrize(
        ("sizes", "ratio", "target"),
        [
            ((1, 1, 1, 2), 0.5, 2),  # 2.5 rounds to the even 2, not up to 3
            ((1, 2, 2, 2), 0.5, 4),  # 3.5 rounds to the even 4
            ((2, 2, 3, 3), 0.25, 2),  # 2.5 again, at a quarter
            ((4, 3, 4, 3), 0.25, 4),  # 3.5 -> 4
            ((3, 3, 3, 3), 0.2, 2),  # 2.4 -> 2
            ((4, 4, 4, 4), 0.2, 3),  # 3.2 -> 3
            ((1, 0, 1, 0), 0.2, 1),  # 0.4 -> 0 -> at least 1
            ((10, 10, 10, 10), 0.95, 38),  # nearly the span's own size, still smaller
        ],
    )
    def test_target_tokens_is_python_round_half_to_even_and_at_least_one(
        self, sizes: tuple[int, ...], ratio: float, target: int
    ) -> None:
        transcript = Transcript((*removable_chat(*sizes), user("tail", 0)))
        plan = SummarizingPolicy("p", target_ratio=ratio).decide(transcript, CompactionBudget(0, 1))
        assert plan.summarization_requests[0].target_tokens == target

    def test_a_span_of_empty_turns_is_skipped_for_the_next_span(self) -> None:
        """As in 0.1: a span whose target (at least 1) is not below its own 0 tokens is skipped,
        and the next qualifying span is taken."""
        transcript = Transcript(
            (
                *removable_chat(0, 0, 0, 0),
                user("p", 0, pinned=True),
                *[user(f"n{k}", 25) for k in range(4)],
                user("tail", 1, pinned=True),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(50, 0))
        assert span(plan) == ("n0", "n1", "n2", "n3")
        assert plan.summarization_requests[0].target_tokens == 20
        assert plan.tokens_after_estimate == 21

    @pytest.mark.parametrize(
        ("sizes", "ratio"),
        [
            ((10, 10, 10, 10), 1.0),  # a ratio of 1 aims for the span's own size
            ((1, 0, 0, 0), 0.2),  # at least 1 is not below 1
            ((10, 10, 10, 10), 0.99),  # 39.6 rounds to 40
        ],
    )
    def test_a_span_whose_target_does_not_shrink_it_plans_nothing(
        self, sizes: tuple[int, ...], ratio: float
    ) -> None:
        transcript = Transcript((*removable_chat(*sizes), user("tail", 0)))
        plan = SummarizingPolicy("p", target_ratio=ratio).decide(transcript, CompactionBudget(0, 1))
        assert plan.summarization_requests == ()
        assert folded(plan) == []
        assert plan.tokens_after_estimate == sum(sizes)

    @pytest.mark.parametrize("ratio", [1.5, 2, 1e9])
    def test_a_ratio_above_one_is_accepted_and_plans_no_summary(self, ratio: float) -> None:
        """As in 0.1: any finite ratio above 0 is accepted; above 1 no span qualifies."""
        policy = SummarizingPolicy("p", target_ratio=ratio)
        assert policy.target_ratio == float(ratio)
        transcript = Transcript((*removable_chat(10, 10, 10, 10, 10, 10), user("tail", 5)))
        plan = policy.decide(transcript, CompactionBudget(20, 1))
        assert plan.summarization_requests == ()
        assert plan.budget_unmet is True
        assert plan.tokens_after_estimate == 65

    def test_nothing_is_planned_when_the_transcript_fits(self) -> None:
        transcript = Transcript(tuple(removable_chat(10, 10, 10, 10, 10)))
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(50, 0))
        assert span(plan) is None
        assert folded(plan) == []
        assert plan.budget_unmet is False

    def test_a_run_shorter_than_min_span_turns_is_not_taken(self) -> None:
        transcript = Transcript((*removable_chat(10, 10, 10), user("tail", 1)))
        plan = SummarizingPolicy("p", min_span_turns=4).decide(transcript, CompactionBudget(1, 1))
        assert span(plan) is None
        assert plan.tokens_after_estimate == 31
        assert plan.budget_unmet is True
        shorter = SummarizingPolicy("p", min_span_turns=3).decide(
            transcript, CompactionBudget(1, 1)
        )
        assert span(shorter) == ("r0", "r1", "r2")

    def test_a_later_run_is_taken_when_the_oldest_is_too_short(self) -> None:
        transcript = Transcript(
            (
                user("o1", 50),
                user("o2", 50),
                user("p", 1, pinned=True),
                *removable_chat(5, 5, 5, 5),
                user("tail", 1),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(2, 1))
        assert span(plan) == ("r0", "r1", "r2", "r3")
        assert plan.summarization_requests[0].target_tokens == 4  # 20 * 0.2

    def test_a_run_is_trimmed_at_both_ends_where_exchanges_reach_outside_it(self) -> None:
        transcript = Transcript(
            (
                assistant("a0", 10, "cA"),
                user("p1", 5, pinned=True),
                tool("t2", 100, "cA"),  # its call a0 lies before the pinned turn
                user("u3", 20),
                assistant("a4", 20),
                user("u5", 20),
                assistant("a6", 20),
                assistant("a7", 10, "cB"),  # its result t9 lies after the next pinned turn
                user("p8", 5, pinned=True),
                tool("t9", 100, "cB"),
                user("u10", 5),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(200, 1))
        assert span(plan) == ("u3", "a4", "u5", "a6")
        assert plan.summarization_requests[0].target_tokens == 16  # 80 * 0.2
        assert plan.tokens_after_estimate == 315 - 80 + 16
        # The run t2..a7 is six turns, but only four are whole exchanges.
        strict = SummarizingPolicy("p", min_span_turns=5).decide(
            transcript, CompactionBudget(200, 1)
        )
        assert span(strict) is None

    def test_a_scattered_exchange_splits_the_run_in_the_middle(self) -> None:
        transcript = Transcript(
            (
                user("u0", 10),
                assistant("a1", 10, "cA"),
                user("u2", 10),
                assistant("a3", 10),
                user("u4", 10),
                assistant("a5", 10),
                user("p6", 5, pinned=True),
                tool("t7", 100, "cA"),
                user("u8", 5),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(100, 1))
        assert span(plan) == ("u2", "a3", "u4", "a5")
        actions = {a.turn_id: a.action for a in plan.actions}
        assert actions["a1"] is Action.KEEP
        assert actions["t7"] is Action.KEEP
        assert plan.tokens_after_estimate == 170 - 40 + 8

    def test_an_exchange_with_several_results_inside_the_run_is_folded_whole(self) -> None:
        transcript = Transcript(
            (
                user("u0", 10),
                assistant("a1", 10, "batch"),
                tool("t2", 100, "batch"),
                tool("t3", 100, "batch"),
                assistant("a4", 10),
                user("tail", 5),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(100, 1))
        assert span(plan) == ("u0", "a1", "t2", "t3", "a4")
        assert plan.summarization_requests[0].target_tokens == 46  # 230 * 0.2

    def test_interleaved_exchanges_inside_the_run_are_folded_whole(self) -> None:
        transcript = Transcript(
            (
                assistant("a0", 10, "cA"),
                assistant("a1", 10, "cB"),
                tool("t2", 100, "cA"),
                tool("t3", 100, "cB"),
                user("tail", 5),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(100, 1))
        assert span(plan) == ("a0", "a1", "t2", "t3")

    def test_an_orphan_result_is_an_exchange_of_one_and_folds_like_a_plain_turn(self) -> None:
        transcript = Transcript(
            (
                user("u0", 10),
                tool("lost", 300, "nobody"),
                assistant("a2", 10),
                user("u3", 10),
                user("tail", 5),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(100, 1))
        assert span(plan) == ("u0", "lost", "a2", "u3")

    def test_a_pinned_turn_inside_an_exchange_locks_every_member_of_it(self) -> None:
        transcript = Transcript(
            (
                user("u0", 10),
                assistant("a1", 10, "cA", pinned=True),
                user("u2", 10),
                user("u3", 10),
                tool("t4", 300, "cA"),  # not pinned itself, but its exchange is
                *removable_chat(10, 10, 10, 10),
                user("tail", 5),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(100, 1))
        assert span(plan) == ("r0", "r1", "r2", "r3")

    def test_an_exchange_reaching_into_the_protected_tail_is_not_removable(self) -> None:
        transcript = Transcript(
            (
                assistant("a0", 10, "cA"),
                *removable_chat(10, 10, 10, 10),
                tool("t5", 300, "cA"),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(310, 1))
        assert span(plan) == ("r0", "r1", "r2", "r3")

    def test_a_system_turn_mid_transcript_breaks_the_run(self) -> None:
        transcript = Transcript(
            (
                user("u0", 10),
                user("u1", 10),
                user("u2", 10),
                system("s3", 10),
                *removable_chat(10, 10, 10, 10),
                user("tail", 5),
            )
        )
        plan = SummarizingPolicy("p").decide(transcript, CompactionBudget(20, 1))
        assert span(plan) == ("r0", "r1", "r2", "r3")
        three = SummarizingPolicy("p", min_span_turns=3).decide(transcript, CompactionBudget(20, 1))
        assert span(three) == ("u0", "u1", "u2")

    def test_a_summary_turn_fed_back_in_is_folded_like_any_other_turn(self) -> None:
        transcript = Transcript((*removable_chat(40, 40, 40, 40), user("tail", 5)))
        policy = SummarizingPolicy("p", min_span_turns=2)
        first = policy.decide(transcript, CompactionBudget(100, 1))
        group = first.summarization_requests[0].group_id
        view = CompactionExecutor().apply(transcript, first, {group: "gist"}).transcript
        grown = Transcript((*view.turns, user("u5", 50), user("u6", 5)))
        again = policy.decide(grown, CompactionBudget(20, 1))
        assert span(again) == ("summary:" + group, "tail", "u5")
        # 32 (the first summary's target: 160 * 0.2) + 5 + 50 = 87; a fifth is 17.4.
        assert again.summarization_requests[0].target_tokens == 17

    def test_budget_unsatisfiable_names_both_numbers_and_the_untouchable_count(self) -> None:
        transcript = Transcript((system("s", 30), *removable_chat(10, 10, 10, 10), user("t", 9)))
        with pytest.raises(BudgetUnsatisfiable) as caught:
            SummarizingPolicy("p").decide(transcript, CompactionBudget(38, 1))
        assert caught.value.details == {
            "untouchable_tokens": 39,
            "max_tokens": 38,
            "untouchable_turn_count": 2,
        }

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"prompt_id": ""}, "prompt_id"),
            ({"prompt_id": 5}, "prompt_id"),
            ({"prompt_id": "  "}, "prompt_id"),
            ({"target_ratio": 0}, "target_ratio"),
            ({"target_ratio": -0.1}, "target_ratio"),
            ({"target_ratio": float("nan")}, "target_ratio"),
            ({"target_ratio": float("inf")}, "target_ratio"),
            ({"target_ratio": True}, "target_ratio"),
            ({"target_ratio": "0.2"}, "target_ratio"),
            ({"min_span_turns": 0}, "min_span_turns"),
            ({"min_span_turns": -1}, "min_span_turns"),
            ({"min_span_turns": True}, "min_span_turns"),
            ({"min_span_turns": 2.0}, "min_span_turns"),
        ],
    )
    def test_bad_configuration_raises_a_validation_error_naming_the_field(
        self, arguments: dict[str, Any], field: str
    ) -> None:
        values: dict[str, Any] = {"prompt_id": "p", **arguments}
        with pytest.raises(ValidationError) as caught:
            SummarizingPolicy(**values)
        assert caught.value.details["field"] == f"SummarizingPolicy.{field}"
        value = values[field]
        if isinstance(value, int | float | str) and not (
            isinstance(value, float) and math.isnan(value)
        ):
            assert caught.value.details[field] == value

    @pytest.mark.parametrize("prompt_id", ["", " ", "\t"])
    def test_an_empty_or_blank_prompt_id_names_the_versioned_prompt_record(
        self, prompt_id: str
    ) -> None:
        for build in (
            lambda: SummarizingPolicy(prompt_id),
            lambda: default_chain(prompt_id=prompt_id),
        ):
            with pytest.raises(ValidationError, match="versioned prompt record"):
                build()

    @pytest.mark.parametrize("ratio", [0, -1, float("nan"), float("inf")])
    def test_a_bad_ratio_is_refused_as_not_finite_positive(self, ratio: float) -> None:
        with pytest.raises(ValidationError, match="finite positive"):
            SummarizingPolicy("p", target_ratio=ratio)

    def test_a_ratio_of_one_and_a_span_of_one_turn_are_accepted(self) -> None:
        policy = SummarizingPolicy("p", target_ratio=1, min_span_turns=1)
        assert (policy.target_ratio, policy.min_span_turns) == (1.0, 1)
        assert isinstance(policy.target_ratio, float)
