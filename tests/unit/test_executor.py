"""CompactionExecutor: applies a plan to the transcript it was built for, and reports it.

The transcript (210 tokens; under ``CompactionBudget(100, 1)`` ``s`` and ``a2`` are
untouchable)::

    s   SYSTEM     10
    u1  USER       20
    a1  ASSISTANT  30  call c1
    t1  TOOL       40  call c1   metadata {"source": "wire"}
    u2  USER       50
    a2  ASSISTANT  60
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import (
    Action,
    CompactedTranscript,
    CompactionBudget,
    CompactionExecutor,
    CompactionPlan,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PlanTranscriptMismatch,
    Role,
    SummarizationRequest,
    SummaryMissing,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
)
from tests.contract import REPORT_FIELDS
from tests.excerpt_cases import AGENT, BUILD_LOG, TEST_LOG, capped

TURNS = (
    TranscriptTurn("s", Role.SYSTEM, "You are careful.", 10),
    TranscriptTurn("u1", Role.USER, "first question", 20),
    TranscriptTurn("a1", Role.ASSISTANT, "calling", 30, "c1"),
    TranscriptTurn("t1", Role.TOOL, "tool output", 40, "c1", metadata={"source": "wire"}),
    TranscriptTurn("u2", Role.USER, "second question", 50),
    TranscriptTurn("a2", Role.ASSISTANT, "answer", 60),
)
TRANSCRIPT = Transcript(TURNS)
BUDGET = CompactionBudget(100, 1)
EXECUTOR = CompactionExecutor()


def digest(*turn_ids: str) -> str:
    return "span-" + sha256_of("\0".join(turn_ids))[:16]


def make_plan(
    choices: dict[str, Action | TurnReplacement | str],
    requests: tuple[SummarizationRequest, ...],
    after: int,
    *,
    transcript: Transcript = TRANSCRIPT,
    budget: CompactionBudget = BUDGET,
) -> CompactionPlan:
    actions = []
    for turn_id in transcript.turn_ids():
        choice = choices.get(turn_id, Action.KEEP)
        if isinstance(choice, TurnReplacement):
            actions.append(TurnAction(turn_id, Action.MASK, None, choice))
        elif isinstance(choice, Action):
            actions.append(TurnAction(turn_id, choice))
        else:
            actions.append(TurnAction(turn_id, Action.SUMMARIZE, choice))
    return CompactionPlan(
        actions=tuple(actions),
        summarization_requests=requests,
        tokens_before=transcript.token_estimate(),
        tokens_after_estimate=after,
        policy_name="hand_built",
        policy_version="1.0.0",
        estimator_ratio=None,
        budget_unmet=after > budget.max_tokens,
        transcript=transcript,
        budget=budget,
    )


STUB = TurnReplacement("[masked] sha256:abc", 5)
# Keep s, a1, a2; drop u1 and u2; mask t1 to 5 tokens: 10 + 30 + 5 + 60 = 105 (over 100).
MASK_PLAN = make_plan({"u1": Action.DROP, "t1": STUB, "u2": Action.DROP}, (), 105)
GROUP = digest("u1", "a1", "t1")
# Summarize u1, a1, t1 into 7 tokens; drop u2: 10 + 7 + 60 = 77.
SUMMARY_PLAN = make_plan(
    {"u1": GROUP, "a1": GROUP, "t1": GROUP, "u2": Action.DROP},
    (SummarizationRequest(GROUP, ("u1", "a1", "t1"), 7, "recap-v1"),),
    77,
)
GROUP_A, GROUP_B = digest("u1"), digest("u2")
# Two one-turn groups: 210 - 20 - 50 + 3 + 2 = 145 (over 100).
TWO_GROUPS_PLAN = make_plan(
    {"u1": GROUP_A, "u2": GROUP_B},
    (
        SummarizationRequest(GROUP_A, ("u1",), 3, "p"),
        SummarizationRequest(GROUP_B, ("u2",), 2, "p"),
    ),
    145,
)


def snapshot(transcript: Transcript) -> list[tuple[Any, ...]]:
    return [
        (t.turn_id, t.role, t.content, t.token_estimate, t.tool_call_id, t.pinned, dict(t.metadata))
        for t in transcript.turns
    ]


class TestCompactionExecutorMasking:
    def test_a_masked_turn_keeps_its_identity_and_position_and_changes_only_its_body(
        self,
    ) -> None:
        view = EXECUTOR.apply(TRANSCRIPT, MASK_PLAN).transcript
        assert view.turn_ids() == ("s", "a1", "t1", "a2")
        masked = view.turns[2]
        assert (masked.turn_id, masked.role, masked.tool_call_id, masked.pinned) == (
            "t1",
            Role.TOOL,
            "c1",
            False,
        )
        assert masked.content == "[masked] sha256:abc"
        assert masked.token_estimate == 5
        assert dict(masked.metadata) == {"source": "wire", "cutctx.kind": "masked"}

    def test_kept_turns_are_the_same_objects(self) -> None:
        view = EXECUTOR.apply(TRANSCRIPT, MASK_PLAN).transcript
        assert view.turns[0] is TURNS[0]
        assert view.turns[1] is TURNS[2]
        assert view.turns[3] is TURNS[5]

    def test_the_input_is_untouched(self) -> None:
        before = snapshot(TRANSCRIPT)
        EXECUTOR.apply(TRANSCRIPT, MASK_PLAN)
        EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: "recap"})
        assert snapshot(TRANSCRIPT) == before
        assert TRANSCRIPT.turns == TURNS
        assert dict(TURNS[3].metadata) == {"source": "wire"}

    def test_a_view_carries_the_request_tokens_its_plan_left_room_for(self) -> None:
        """A transcript's request overhead (a reply's priming) stays in every view made from it,
        so the view's estimate is the plan's and the request's whole cost."""
        transcript = Transcript(TURNS, request_tokens=3)
        budget = CompactionBudget(transcript.token_estimate() - 40, 1)
        plan = DropOldestPolicy().decide(transcript, budget)
        view = EXECUTOR.apply(transcript, plan).transcript
        assert view.request_tokens == 3
        assert view.token_estimate() == plan.tokens_after_estimate <= budget.max_tokens
        assert view.token_estimate() == sum(turn.token_estimate for turn in view.turns) + 3


class TestCompactionExecutorSummaries:
    def test_a_summary_turn_follows_the_documented_rules(self) -> None:
        text = "They asked about the build;\nthe tool said \u00e9\u4e2d.  "
        view = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: text}).transcript
        assert view.turn_ids() == ("s", "summary:" + GROUP, "a2")
        summary = view.turns[1]
        assert summary.role is Role.ASSISTANT
        assert summary.pinned is False
        assert summary.tool_call_id is None
        assert summary.content == text
        assert summary.token_estimate == 7
        assert dict(summary.metadata) == {
            "cutctx.kind": "summary",
            "cutctx.summary_group": GROUP,
            "cutctx.replaced_turn_count": "3",
        }
        assert view.token_estimate() == SUMMARY_PLAN.tokens_after_estimate == 77
        assert sum(turn.token_estimate for turn in view.turns) == 77

    def test_a_hand_named_group_becomes_the_summary_turn_of_that_name(self) -> None:
        """As in 0.1, a hand-built plan may call its group ``g1``: the turn is ``summary:g1``."""
        request = SummarizationRequest("g1", ("u1", "a1", "t1"), 7, "recap-v1")
        plan = make_plan({"u1": "g1", "a1": "g1", "t1": "g1", "u2": Action.DROP}, (request,), 77)
        compacted = EXECUTOR.apply(TRANSCRIPT, plan, {"g1": "recap"})
        assert compacted.transcript.turn_ids() == ("s", request.summary_turn_id, "a2")
        assert request.summary_turn_id == "summary:g1"
        assert compacted.transcript.turns[1].metadata["cutctx.summary_group"] == "g1"
        assert compacted.report.summary_turn_ids == ("summary:g1",)
        with pytest.raises(SummaryMissing, match="'g1'"):
            EXECUTOR.apply(TRANSCRIPT, plan)

    def test_a_scattered_group_is_placed_once_at_its_earliest_turn(self) -> None:
        group = digest("u1", "u2")
        # 210 - 20 - 50 + 4 = 144.
        plan = make_plan(
            {"u1": group, "u2": group}, (SummarizationRequest(group, ("u1", "u2"), 4, "p"),), 144
        )
        view = EXECUTOR.apply(TRANSCRIPT, plan, {group: "both questions"}).transcript
        assert view.turn_ids() == ("s", "summary:" + group, "a1", "t1", "a2")
        assert view.turns[1].metadata["cutctx.replaced_turn_count"] == "2"

    def test_each_group_takes_its_own_place(self) -> None:
        result = EXECUTOR.apply(TRANSCRIPT, TWO_GROUPS_PLAN, {GROUP_B: "two", GROUP_A: "one"})
        view = result.transcript
        assert view.turn_ids() == (
            "s",
            "summary:" + GROUP_A,
            "a1",
            "t1",
            "summary:" + GROUP_B,
            "a2",
        )
        assert (view.turns[1].content, view.turns[4].content) == ("one", "two")
        assert view.token_estimate() == 145
        assert sum(turn.token_estimate for turn in view.turns) == 145

    def test_a_missing_summary_raises_naming_the_group(self) -> None:
        with pytest.raises(SummaryMissing) as caught:
            EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN)
        error = caught.value
        assert error.details["group_id"] == GROUP
        assert error.group_id == GROUP
        assert GROUP in str(error)
        assert "\n" not in str(error)

    def test_the_first_missing_group_in_plan_order_is_named(self) -> None:
        with pytest.raises(SummaryMissing) as caught:
            EXECUTOR.apply(TRANSCRIPT, TWO_GROUPS_PLAN, {GROUP_A: "one"})
        assert caught.value.details["group_id"] == GROUP_B
        with pytest.raises(SummaryMissing) as caught:
            EXECUTOR.apply(TRANSCRIPT, TWO_GROUPS_PLAN, {})
        assert caught.value.details["group_id"] == GROUP_A
        assert caught.value.details["missing_group_ids"] == [GROUP_A, GROUP_B]

    def test_summaries_for_groups_the_plan_does_not_name_are_ignored(self) -> None:
        extra = {GROUP: "recap", "span-0000000000000000": "stray", "anything": "else"}
        with_extra = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, extra)
        exact = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: "recap"})
        assert with_extra == exact
        assert EXECUTOR.apply(TRANSCRIPT, MASK_PLAN, {"span-x": "stray"}).transcript.turn_ids() == (
            "s",
            "a1",
            "t1",
            "a2",
        )

    def test_summaries_may_be_passed_positionally_or_by_keyword(self) -> None:
        positional = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: "recap"})
        keyword = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, summaries={GROUP: "recap"})
        assert positional == keyword

    @pytest.mark.parametrize("text", [None, b"recap", 3])
    def test_a_summary_that_is_not_a_string_is_refused(self, text: object) -> None:
        with pytest.raises(ValidationError) as caught:
            EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: text})  # type: ignore[dict-item]
        assert GROUP in caught.value.details["field"]
        assert "\n" not in str(caught.value)


class TestCompactionExecutorArguments:
    @pytest.mark.parametrize(
        ("args", "field"),
        [
            ((TURNS, MASK_PLAN, {}), "transcript"),
            ((TRANSCRIPT, MASK_PLAN.to_dict(), {}), "plan"),
            ((TRANSCRIPT, MASK_PLAN, [("g", "s")]), "summaries"),
        ],
    )
    def test_an_argument_of_the_wrong_type_is_refused(
        self, args: tuple[Any, Any, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            EXECUTOR.apply(*args)
        assert caught.value.details["field"] == field


def ids(prefix: str, count: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i:02d}" for i in range(count))


def users(turn_ids: tuple[str, ...], tokens: int = 1) -> Transcript:
    return Transcript(tuple(TranscriptTurn(i, Role.USER, "x", tokens) for i in turn_ids))


def keep_all(transcript: Transcript) -> CompactionPlan:
    total = transcript.token_estimate()
    return make_plan({}, (), total, transcript=transcript, budget=CompactionBudget(total, 0))


class TestPlanTranscriptMismatch:
    def test_a_plan_for_other_turns_lists_them_sorted_and_capped_at_ten(self) -> None:
        plan = keep_all(users(ids("p", 12)[::-1]))
        with pytest.raises(PlanTranscriptMismatch) as caught:
            EXECUTOR.apply(users(ids("q", 12)[::-1]), plan)
        details = caught.value.details
        assert details["unknown_turn_ids"] == list(ids("p", 10))
        assert details["unknown_turn_count"] == 12
        assert details["unplanned_turn_ids"] == list(ids("q", 10))
        assert details["unplanned_turn_count"] == 12
        assert details["order_differs"] is False
        assert "\n" not in str(caught.value)

    def test_partly_overlapping_turns_name_only_the_differences(self) -> None:
        plan = keep_all(users(("b", "a", "c")))
        with pytest.raises(PlanTranscriptMismatch) as caught:
            EXECUTOR.apply(users(("c", "z", "y")), plan)
        details = caught.value.details
        assert (details["unknown_turn_ids"], details["unknown_turn_count"]) == (["a", "b"], 2)
        assert (details["unplanned_turn_ids"], details["unplanned_turn_count"]) == (["y", "z"], 2)
        assert details["order_differs"] is False

    def test_the_same_turns_in_another_order_are_a_mismatch(self) -> None:
        plan = keep_all(users(("a", "b", "c")))
        with pytest.raises(PlanTranscriptMismatch) as caught:
            EXECUTOR.apply(users(("a", "c", "b")), plan)
        details = caught.value.details
        assert details["unknown_turn_ids"] == details["unplanned_turn_ids"] == []
        assert details["order_differs"] is True
        assert "order" in str(caught.value)

    def test_a_missing_turn_is_a_mismatch(self) -> None:
        plan = keep_all(users(("a", "b", "c")))
        with pytest.raises(PlanTranscriptMismatch) as caught:
            EXECUTOR.apply(users(("a", "c")), plan)
        details = caught.value.details
        assert (details["unknown_turn_ids"], details["unplanned_turn_ids"]) == (["b"], [])
        assert details["order_differs"] is False

    def test_the_same_ids_with_other_estimates_are_a_mismatch(self) -> None:
        changed = Transcript(
            (*TURNS[:3], TranscriptTurn("t1", Role.TOOL, "longer output", 41, "c1"), *TURNS[4:])
        )
        with pytest.raises(PlanTranscriptMismatch) as caught:
            EXECUTOR.apply(changed, MASK_PLAN)
        details = caught.value.details
        assert (details["plan_tokens_before"], details["transcript_tokens"]) == (210, 211)
        assert details["unknown_turn_ids"] == details["unplanned_turn_ids"] == []
        assert details["order_differs"] is False
        assert "210" in str(caught.value)
        assert "211" in str(caught.value)

    @pytest.mark.parametrize(
        "changed",
        [
            TranscriptTurn("u1", Role.USER, "first question", 20, pinned=True),
            TranscriptTurn("u1", Role.SYSTEM, "first question", 20),
        ],
        ids=["now pinned", "now a system turn"],
    )
    def test_a_plan_removing_a_turn_that_is_now_untouchable_is_a_mismatch(
        self, changed: TranscriptTurn
    ) -> None:
        # Same ids, same token total: only the pin or the role changed since planning.
        transcript = Transcript((TURNS[0], changed, *TURNS[2:]))
        with pytest.raises(PlanTranscriptMismatch) as caught:
            EXECUTOR.apply(transcript, MASK_PLAN)
        details = caught.value.details
        assert (details["turn_id"], details["action"]) == ("u1", "drop")
        assert details["unknown_turn_ids"] == details["unplanned_turn_ids"] == []
        assert "\n" not in str(caught.value)

    def test_the_mismatch_is_found_before_missing_summaries(self) -> None:
        with pytest.raises(PlanTranscriptMismatch):
            EXECUTOR.apply(users(("a",)), SUMMARY_PLAN)

    def test_a_removed_untouchable_turn_is_found_before_missing_summaries(self) -> None:
        # SUMMARY_PLAN folds u1 and drops u2; u2 is now pinned and no summary is supplied.
        pinned = TranscriptTurn(
            "u2", Role.USER, TURNS[4].content, TURNS[4].token_estimate, pinned=True
        )
        transcript = Transcript((*TURNS[:4], pinned, *TURNS[5:]))
        with pytest.raises(PlanTranscriptMismatch) as caught:
            EXECUTOR.apply(transcript, SUMMARY_PLAN)
        assert (caught.value.details["turn_id"], caught.value.details["action"]) == ("u2", "drop")


SPEC_REPORT_FIELDS = set(REPORT_FIELDS)


class TestCompactionExecutorReport:
    def test_figures_are_copied_from_the_plan_and_ids_sorted_by_action(self) -> None:
        result = EXECUTOR.apply(TRANSCRIPT, MASK_PLAN)
        assert isinstance(result, CompactedTranscript)
        report = result.report
        assert report.plan_hash == MASK_PLAN.plan_hash()
        assert (report.policy_name, report.policy_version) == ("hand_built", "1.0.0")
        assert (report.tokens_before, report.tokens_after_estimate) == (210, 105)
        assert report.estimator_ratio is None
        assert report.budget_unmet is True
        assert (report.turns_before, report.turns_after) == (6, 4)
        assert report.kept_turn_ids == ("s", "a1", "a2")
        assert report.masked_turn_ids == ("t1",)
        assert report.summarized_turn_ids == ()
        assert report.dropped_turn_ids == ("u1", "u2")
        assert report.summary_turn_ids == ()
        assert report.estimator_name is None

    def test_id_lists_are_in_transcript_order(self) -> None:
        report = EXECUTOR.apply(TRANSCRIPT, TWO_GROUPS_PLAN, {GROUP_A: "1", GROUP_B: "2"}).report
        assert report.kept_turn_ids == ("s", "a1", "t1", "a2")
        assert report.summarized_turn_ids == ("u1", "u2")
        assert report.summary_turn_ids == ("summary:" + GROUP_A, "summary:" + GROUP_B)
        assert (report.turns_before, report.turns_after) == (6, 6)

    def test_to_dict_is_plain_json_with_every_field(self) -> None:
        report = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: "recap"}).report
        data = report.to_dict()
        assert set(data) == SPEC_REPORT_FIELDS
        assert json.loads(json.dumps(data)) == data
        assert data["summarized_turn_ids"] == ["u1", "a1", "t1"]
        assert data["dropped_turn_ids"] == ["u2"]
        assert data["summary_turn_ids"] == ["summary:" + GROUP]
        assert data["tokens_after_estimate"] == 77

    def test_the_estimator_name_travels_from_plan_to_report(self) -> None:
        total = TRANSCRIPT.token_estimate()
        plan = CompactionPlan(
            actions=tuple(TurnAction(i, Action.KEEP) for i in TRANSCRIPT.turn_ids()),
            summarization_requests=(),
            tokens_before=total,
            tokens_after_estimate=total,
            policy_name="p",
            policy_version="1",
            estimator_ratio=None,
            budget_unmet=False,
            transcript=TRANSCRIPT,
            budget=CompactionBudget(total, 1),
            estimator_name="words",
        )
        report = EXECUTOR.apply(TRANSCRIPT, plan).report
        assert report.estimator_name == "words"
        assert report.to_dict()["estimator_name"] == "words"


class TestAViewIsAnOrdinaryTranscript:
    def test_a_view_with_a_summary_turn_can_be_planned_again(self) -> None:
        view = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: "recap"}).transcript
        # s 10 and a2 60 are untouchable; the 7-token summary turn is not, so it goes.
        plan = DropOldestPolicy().decide(view, CompactionBudget(70, 1))
        assert [a.action for a in plan.actions] == [Action.KEEP, Action.DROP, Action.KEEP]
        again = EXECUTOR.apply(view, plan)
        assert again.transcript.turn_ids() == ("s", "a2")
        assert again.report.dropped_turn_ids == ("summary:" + GROUP,)

    def test_a_view_with_a_masked_turn_can_be_planned_again(self) -> None:
        view = EXECUTOR.apply(TRANSCRIPT, MASK_PLAN).transcript
        # 105 tokens: dropping the a1/t1 exchange (30 + 5) leaves 70.
        plan = DropOldestPolicy().decide(view, CompactionBudget(100, 1))
        assert EXECUTOR.apply(view, plan).transcript.turn_ids() == ("s", "a2")

    def test_planning_over_a_view_that_fits_changes_nothing(self) -> None:
        view = EXECUTOR.apply(TRANSCRIPT, SUMMARY_PLAN, {GROUP: "recap"}).transcript
        plan = DropOldestPolicy().decide(view, BUDGET)
        assert all(action.action is Action.KEEP for action in plan.actions)
        assert plan.summarization_requests == ()
        assert (plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet) == (
            77,
            77,
            False,
        )
        again = EXECUTOR.apply(view, plan).transcript
        assert again == view
        assert all(new is old for new, old in zip(again.turns, view.turns, strict=True))


class TestCompactionExecutorExcerpts:
    """An excerpted result is placed as a masked one is: same id, role, call id and place."""

    def test_an_excerpted_turn_keeps_its_place_and_gains_its_excerpt(self) -> None:
        plan = ExcerptingPolicy().decide(AGENT, capped(10_000))
        view = EXECUTOR.apply(AGENT, plan).transcript
        assert view.turn_ids() == AGENT.turn_ids()
        for before, after, action in zip(AGENT.turns, view.turns, plan.actions, strict=True):
            if action.action is Action.KEEP:
                assert after is before
                continue
            assert action.action is Action.EXCERPT
            assert action.replacement is not None
            assert (after.turn_id, after.role, after.tool_call_id, after.pinned) == (
                before.turn_id,
                before.role,
                before.tool_call_id,
                before.pinned,
            )
            assert after.content == action.replacement.content
            assert after.token_estimate == action.replacement.token_estimate
            assert dict(after.metadata) == {
                "cutctx.kind": "excerpt",
                "cutctx.original_tokens": str(before.token_estimate),
                "cutctx.original_sha256": sha256_of(before.content),
            }
        assert view.token_estimate() == plan.tokens_after_estimate
        assert [turn.content for turn in AGENT.turns if turn.role is Role.TOOL] == [
            BUILD_LOG,
            TEST_LOG,
        ]

    def test_the_turns_own_metadata_is_kept_beside_the_excerpt_marks(self) -> None:
        turns = list(AGENT.turns)
        r1 = turns[3]
        turns[3] = TranscriptTurn(
            r1.turn_id,
            r1.role,
            r1.content,
            r1.token_estimate,
            r1.tool_call_id,
            metadata={"cutctx.tool_name": "build"},
        )
        transcript = Transcript(tuple(turns))
        view = EXECUTOR.apply(transcript, ExcerptingPolicy().decide(transcript, capped(10_000)))
        assert view.transcript.turns[3].metadata["cutctx.tool_name"] == "build"
        assert view.transcript.turns[3].metadata["cutctx.kind"] == "excerpt"

    def test_the_report_lists_the_excerpted_turns_apart_from_the_kept_ones(self) -> None:
        plan = ExcerptingPolicy().decide(AGENT, capped(10_000))
        report = EXECUTOR.apply(AGENT, plan).report
        assert report.excerpted_turn_ids == ("r1", "r2")
        assert "r1" not in report.kept_turn_ids
        assert (report.turns_before, report.turns_after) == (8, 8)
        data = report.to_dict()
        assert data["excerpted_turn_ids"] == ["r1", "r2"]
        assert set(data) == SPEC_REPORT_FIELDS | {"excerpted_turn_ids"}

    def test_a_report_without_excerpts_has_no_excerpted_key(self) -> None:
        plan = ExcerptingPolicy().decide(AGENT, capped(10_000, cap=None))
        data = EXECUTOR.apply(AGENT, plan).report.to_dict()
        assert "excerpted_turn_ids" not in data
        assert set(data) == SPEC_REPORT_FIELDS

    def test_an_excerpted_pinned_result_is_applied_not_refused_as_removed(self) -> None:
        turns = list(AGENT.turns)
        r2 = turns[6]
        turns[6] = TranscriptTurn(
            r2.turn_id, r2.role, r2.content, r2.token_estimate, r2.tool_call_id, pinned=True
        )
        transcript = Transcript(tuple(turns))
        plan = ExcerptingPolicy().decide(transcript, capped(10_000, protected=0))
        view = EXECUTOR.apply(transcript, plan).transcript
        assert view.turns[6].pinned
        assert view.turns[6].metadata["cutctx.kind"] == "excerpt"

    def test_a_view_with_an_excerpt_masks_it_with_the_originals_digest_and_estimate(
        self,
    ) -> None:
        view = EXECUTOR.apply(AGENT, ExcerptingPolicy().decide(AGENT, capped(10_000))).transcript
        plan = ObservationMaskingPolicy(0).decide(view, capped(150, protected=0, cap=None))
        masked = plan.actions[3]
        assert masked.action is Action.MASK
        assert masked.replacement is not None
        original = AGENT.turns[3]
        assert masked.replacement.content == ObservationMaskingPolicy().stub(
            original.content, original.token_estimate
        )
