"""The gate: every hand-built plan that breaks an invariant is refused by the plan's constructor.

The base transcript (210 tokens; under ``CompactionBudget(100, 1)`` its untouchable set is ``s``
and ``a2``, 70 tokens)::

    s   SYSTEM     10
    u1  USER       20
    a1  ASSISTANT  30  call c1
    t1  TOOL       40  call c1
    u2  USER       50
    a2  ASSISTANT  60
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionPlan,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    Role,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
)
from cutctx._core.excerpts import excerpt
from cutctx._core.invariants import layout

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

BASE = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "system prompt", 10),
        TranscriptTurn("u1", Role.USER, "question", 20),
        TranscriptTurn("a1", Role.ASSISTANT, "calling a tool", 30, "c1"),
        TranscriptTurn("t1", Role.TOOL, "tool output", 40, "c1"),
        TranscriptTurn("u2", Role.USER, "another question", 50),
        TranscriptTurn("a2", Role.ASSISTANT, "answer", 60),
    )
)
BUDGET = CompactionBudget(100, 1)

type Choice = Action | TurnReplacement | str


def digest(*turn_ids: str) -> str:
    """The group id oracle: ``span-`` and 16 hex digits of ``sha256_of`` the NUL-joined ids."""
    return "span-" + sha256_of("\0".join(turn_ids))[:16]


def actions(choices: Mapping[str, Choice], transcript: Transcript = BASE) -> tuple[TurnAction, ...]:
    """One action per turn: KEEP unless ``choices`` names an Action, a mask stub or a group."""
    built = []
    for turn_id in transcript.turn_ids():
        choice = choices.get(turn_id, Action.KEEP)
        if isinstance(choice, TurnReplacement):
            built.append(TurnAction(turn_id, Action.MASK, None, choice))
        elif isinstance(choice, Action):
            built.append(TurnAction(turn_id, choice))
        else:
            built.append(TurnAction(turn_id, Action.SUMMARIZE, choice))
    return tuple(built)


def request(*turn_ids: str, target: int = 5, group: str | None = None) -> SummarizationRequest:
    return SummarizationRequest(group or digest(*turn_ids), turn_ids, target, "summarize-v1")


def plan(
    plan_actions: Sequence[TurnAction],
    requests: Sequence[SummarizationRequest] = (),
    *,
    after: int,
    unmet: bool,
    before: int = 210,
    transcript: Transcript = BASE,
    budget: CompactionBudget = BUDGET,
) -> CompactionPlan:
    return CompactionPlan(
        actions=tuple(plan_actions),
        summarization_requests=tuple(requests),
        tokens_before=before,
        tokens_after_estimate=after,
        policy_name="hand_built",
        policy_version="0.0.1",
        estimator_ratio=None,
        budget_unmet=unmet,
        transcript=transcript,
        budget=budget,
    )


def violations(
    plan_actions: Sequence[TurnAction],
    requests: Sequence[SummarizationRequest] = (),
    *,
    after: int,
    unmet: bool,
    before: int = 210,
    transcript: Transcript = BASE,
    budget: CompactionBudget = BUDGET,
) -> list[str]:
    """Build the plan, expect the gate to refuse it, and return the violations it listed."""
    with pytest.raises(ValidationError) as caught:
        plan(
            plan_actions,
            requests,
            after=after,
            unmet=unmet,
            before=before,
            transcript=transcript,
            budget=budget,
        )
    error = caught.value
    assert "\n" not in str(error)
    found: list[str] = error.details["violations"]
    assert error.details["violation_count"] >= len(found) > 0
    assert f"{error.details['violation_count']} invariant(s)" in str(error)
    return found


def only(found: list[str], *words: str) -> None:
    """Assert exactly one violation was found and that it mentions every one of ``words``."""
    assert len(found) == 1, found
    for word in words:
        assert word in found[0], (word, found)


class TestLegalPlansPass:
    def test_dropping_removable_turns_to_fit_is_accepted(self) -> None:
        drop = Action.DROP
        # Kept: s 10 + a2 60 = 70 <= 100.
        built = plan(
            actions({"u1": drop, "a1": drop, "t1": drop, "u2": drop}), after=70, unmet=False
        )
        assert built.tokens_after_estimate == 70

    def test_summarizing_a_whole_exchange_is_accepted(self) -> None:
        group = digest("u1", "a1", "t1")
        chosen = actions({"u1": group, "a1": group, "t1": group, "u2": Action.DROP})
        # Kept: s 10 + a2 60, summary 8: 78.
        built = plan(chosen, [request("u1", "a1", "t1", target=8)], after=78, unmet=False)
        assert built.summarization_requests[0].group_id == group

    def test_keep_beside_mask_in_one_exchange_is_accepted(self) -> None:
        # 210 - 40 + 5 = 175, over 100.
        plan(actions({"t1": TurnReplacement("stub", 5)}), after=175, unmet=True)

    def test_an_estimate_equal_to_the_budget_fits(self) -> None:
        plan(actions({}), after=210, unmet=False, budget=CompactionBudget(210, 1))

    def test_a_dropped_turn_may_carry_what_would_be_a_summary_id(self) -> None:
        taken = "summary:" + digest("u1")
        transcript = Transcript(
            (
                TranscriptTurn("u1", Role.USER, "q", 20),
                TranscriptTurn(taken, Role.ASSISTANT, "old summary", 10),
                TranscriptTurn("a2", Role.ASSISTANT, "a", 60),
            )
        )
        chosen = actions({"u1": digest("u1"), taken: Action.DROP}, transcript)
        # 60 kept + 5 summary = 65.
        plan(chosen, [request("u1")], after=65, unmet=False, before=90, transcript=transcript)


class TestActionsCoverTheTranscript:
    @pytest.mark.parametrize(
        "plan_actions",
        [
            actions({})[:-1],
            (*actions({}), TurnAction("extra", Action.KEEP)),
            tuple(actions({})[i] for i in (0, 2, 1, 3, 4, 5)),
            (TurnAction("other", Action.KEEP), *actions({})[1:]),
            (),
        ],
        ids=["one missing", "one extra", "two swapped", "one renamed", "none"],
    )
    def test_actions_that_do_not_name_every_turn_in_order_are_refused(
        self, plan_actions: tuple[TurnAction, ...]
    ) -> None:
        only(violations(plan_actions, after=210, unmet=True), "one for one")


class TestUntouchableTurnsAreKept:
    def test_a_dropped_system_turn_is_refused(self) -> None:
        only(violations(actions({"s": Action.DROP}), after=200, unmet=True), "'s'", "untouchable")

    def test_a_masked_system_turn_is_refused(self) -> None:
        stub = TurnReplacement("stub", 1)
        only(violations(actions({"s": stub}), after=201, unmet=True), "'s'", "MASK")

    def test_a_dropped_system_turn_in_the_middle_is_refused(self) -> None:
        transcript = Transcript(
            (
                TranscriptTurn("u1", Role.USER, "q", 20),
                TranscriptTurn("s", Role.SYSTEM, "mid-run instruction", 10),
                TranscriptTurn("a2", Role.ASSISTANT, "a", 60),
            )
        )
        found = violations(
            actions({"s": Action.DROP}, transcript),
            after=80,
            unmet=False,
            before=90,
            transcript=transcript,
        )
        only(found, "'s'", "untouchable")

    def test_a_dropped_pinned_turn_is_refused(self) -> None:
        transcript = Transcript(
            (
                TranscriptTurn("u1", Role.USER, "q", 20, pinned=True),
                TranscriptTurn("u2", Role.USER, "q", 50),
                TranscriptTurn("a2", Role.ASSISTANT, "a", 60),
            )
        )
        found = violations(
            actions({"u1": Action.DROP}, transcript),
            after=110,
            unmet=True,
            before=130,
            transcript=transcript,
        )
        only(found, "'u1'", "untouchable")

    def test_a_dropped_last_protected_turn_is_refused(self) -> None:
        only(violations(actions({"a2": Action.DROP}), after=150, unmet=True), "'a2'")

    def test_every_turn_of_the_protected_tail_is_untouchable(self) -> None:
        # Protecting 2 turns covers u2 and a2 (s 10 + 50 + 60 = 120 untouchable, within 150);
        # dropping u2 (50) leaves 160.
        budget = CompactionBudget(150, 2)
        found = violations(actions({"u2": Action.DROP}), after=160, unmet=True, budget=budget)
        only(found, "'u2'", "untouchable")

    def test_a_summarized_untouchable_turn_is_refused(self) -> None:
        found = violations(actions({"a2": digest("a2")}), [request("a2")], after=155, unmet=True)
        only(found, "'a2'", "untouchable")


class TestExchangesTravelTogether:
    def test_keep_beside_drop_is_refused(self) -> None:
        only(violations(actions({"a1": Action.DROP}), after=180, unmet=True), "split", "'a1'")

    def test_drop_beside_mask_is_refused(self) -> None:
        chosen = actions({"a1": Action.DROP, "t1": TurnReplacement("stub", 5)})
        only(violations(chosen, after=145, unmet=True), "split")

    def test_drop_beside_summarize_is_refused(self) -> None:
        chosen = actions({"a1": Action.DROP, "t1": digest("t1")})
        only(violations(chosen, [request("t1")], after=145, unmet=True), "split")

    def test_two_groups_for_one_exchange_are_refused(self) -> None:
        chosen = actions({"a1": digest("a1"), "t1": digest("t1")})
        # 210 - 30 - 40 + 5 + 5 = 150.
        found = violations(chosen, [request("a1"), request("t1")], after=150, unmet=True)
        only(found, "split")

    def test_members_far_apart_are_still_one_exchange(self) -> None:
        transcript = Transcript(
            (
                TranscriptTurn("a1", Role.ASSISTANT, "call", 10, "c1"),
                TranscriptTurn("u1", Role.USER, "q", 10),
                TranscriptTurn("t1", Role.TOOL, "result", 10, "c1"),
                TranscriptTurn("u2", Role.USER, "q", 10),
            )
        )
        found = violations(
            actions({"a1": Action.DROP, "u1": Action.DROP}, transcript),
            after=20,
            unmet=True,
            before=40,
            transcript=transcript,
            budget=CompactionBudget(15, 0),
        )
        only(found, "split", "'a1'")

    def test_only_the_split_exchange_is_named_beside_whole_ones(self) -> None:
        transcript = Transcript(
            (
                TranscriptTurn("a1", Role.ASSISTANT, "call", 10, "c1"),
                TranscriptTurn("t1", Role.TOOL, "result", 10, "c1"),
                TranscriptTurn("a2", Role.ASSISTANT, "call", 10, "c2"),
                TranscriptTurn("t2", Role.TOOL, "result", 10, "c2"),
                TranscriptTurn("t3", Role.TOOL, "result", 10, "c2"),
            )
        )
        found = violations(
            actions({"a1": Action.DROP}, transcript),
            after=40,
            unmet=True,
            before=50,
            transcript=transcript,
            budget=CompactionBudget(15, 0),
        )
        only(found, "split", "'a1'", "'t1'")


class TestMasksShrink:
    @pytest.mark.parametrize(("stub_tokens", "after"), [(40, 210), (41, 211)])
    def test_a_mask_that_does_not_shrink_is_refused(self, stub_tokens: int, after: int) -> None:
        chosen = actions({"t1": TurnReplacement("stub", stub_tokens)})
        only(violations(chosen, after=after, unmet=True), "'t1'", "shrink")

    def test_only_the_mask_that_does_not_shrink_is_named(self) -> None:
        # u1 20 -> 5 shrinks, t1 40 -> 40 does not: 210 - 15 = 195.
        chosen = actions({"u1": TurnReplacement("stub", 5), "t1": TurnReplacement("stub", 40)})
        only(violations(chosen, after=195, unmet=True), "'t1'", "shrink")

    def test_a_zero_token_turn_cannot_be_masked(self) -> None:
        transcript = Transcript((TranscriptTurn("t", Role.TOOL, "", 0, "c1"),))
        chosen = actions({"t": TurnReplacement("", 0)}, transcript)
        found = violations(
            chosen, after=0, unmet=False, before=0, transcript=transcript, budget=BUDGET0
        )
        only(found, "shrink")


BUDGET0 = CompactionBudget(0, 0)


class TestFiguresAreHonest:
    def test_a_wrong_tokens_before_is_refused(self) -> None:
        only(violations(actions({}), before=211, after=210, unmet=True), "tokens_before")

    def test_a_wrong_tokens_after_estimate_is_refused(self) -> None:
        only(violations(actions({}), after=209, unmet=True), "tokens_after_estimate")

    def test_a_summary_target_counts_towards_the_estimate(self) -> None:
        # Without the request's 5 tokens the figure would be 190; it must be 195.
        found = violations(actions({"u1": digest("u1")}), [request("u1")], after=190, unmet=True)
        only(found, "tokens_after_estimate")

    def test_claiming_to_fit_while_over_is_refused(self) -> None:
        only(violations(actions({}), after=210, unmet=False), "budget_unmet")

    def test_claiming_unmet_while_fitting_is_refused(self) -> None:
        budget = CompactionBudget(210, 1)
        only(violations(actions({}), after=210, unmet=True, budget=budget), "budget_unmet")


class TestRequestsMatchGroups:
    def test_a_request_without_a_group_is_refused(self) -> None:
        # Nothing is summarized, yet the request's 5 tokens are counted: 215.
        only(violations(actions({}), [request("u1")], after=215, unmet=True), "names no")

    def test_a_group_without_a_request_is_refused(self) -> None:
        found = violations(actions({"u1": digest("u1")}), after=190, unmet=True)
        only(found, "no summarization request")

    @pytest.mark.parametrize("listed", [("u1",), ("u2", "u1"), ("u1", "u2", "a2")])
    def test_a_request_listing_other_turns_than_its_group_is_refused(
        self, listed: tuple[str, ...]
    ) -> None:
        group = digest("u1", "u2")
        chosen = actions({"u1": group, "u2": group})
        # 210 - 20 - 50 + 5 = 145.
        found = violations(chosen, [request(*listed, group=group)], after=145, unmet=True)
        only(found, "other turns")

    @pytest.mark.parametrize(
        "group",
        [
            "g1",
            "span-0000000000000000",
            "span-" + hashlib.sha256(b"u1\0u2").hexdigest()[:16],
            "group-" + sha256_of("u1\0u2")[:16],
            "span-" + sha256_of("u1\0u2")[:16].upper(),
        ],
        ids=["plain name", "zeros", "raw digest", "other prefix", "upper case"],
    )
    def test_a_hand_built_plan_may_name_its_groups_freely(self, group: str) -> None:
        """Only the built-in policies derive group ids from digests; the gate checks that
        groups and requests match, not how they were named."""
        chosen = actions({"u1": group, "u2": group})
        made = plan(chosen, [request("u1", "u2", group=group)], after=145, unmet=True)
        (made_request,) = made.summarization_requests
        assert made_request.group_id == group
        assert made_request.summary_turn_id == "summary:" + group
        assert {action.summary_group for action in made.actions} == {None, group}

    def test_groups_named_apart_from_their_requests_are_refused(self) -> None:
        chosen = actions({"u1": "g1", "u2": "g1"})
        found = violations(chosen, [request("u1", "u2", group="g2")], after=145, unmet=True)
        assert any("'g2' names no summarized turn" in problem for problem in found)
        assert any("'g1' has no summarization request" in problem for problem in found)

    def test_requests_out_of_order_are_refused(self) -> None:
        chosen = actions({"u1": digest("u1"), "u2": digest("u2")})
        # 210 - 20 - 50 + 5 + 5 = 150.
        found = violations(chosen, [request("u2"), request("u1")], after=150, unmet=True)
        only(found, "out of order")

    def test_a_duplicate_request_is_refused(self) -> None:
        # Both copies are counted: 190 + 5 + 5 = 200.
        chosen = actions({"u1": digest("u1")})
        found = violations(chosen, [request("u1"), request("u1")], after=200, unmet=True)
        only(found, "twice")

    def test_a_summary_id_colliding_with_a_kept_turn_is_refused(self) -> None:
        taken = "summary:" + digest("u1")
        transcript = Transcript(
            (
                TranscriptTurn("u1", Role.USER, "q", 20),
                TranscriptTurn(taken, Role.ASSISTANT, "old summary", 10),
                TranscriptTurn("a2", Role.ASSISTANT, "a", 60),
            )
        )
        # 10 + 60 + 5 = 75.
        found = violations(
            actions({"u1": digest("u1")}, transcript),
            [request("u1")],
            after=75,
            unmet=False,
            before=90,
            transcript=transcript,
        )
        only(found, taken, "taken")


class TestUnsatisfiableBudget:
    def test_the_constructor_raises_when_the_untouchable_set_is_over_budget(self) -> None:
        with pytest.raises(BudgetUnsatisfiable) as caught:
            plan(actions({}), after=210, unmet=True, budget=CompactionBudget(69, 1))
        assert caught.value.details == {
            "untouchable_tokens": 70,
            "max_tokens": 69,
            "untouchable_turn_count": 2,
        }

    def test_an_untouchable_set_equal_to_the_budget_is_satisfiable(self) -> None:
        drop = Action.DROP
        chosen = actions({"u1": drop, "a1": drop, "t1": drop, "u2": drop})
        plan(chosen, after=70, unmet=False, budget=CompactionBudget(70, 1))


class TestEveryViolationIsReported:
    def test_several_violations_are_reported_together(self) -> None:
        # s dropped (untouchable), a1 dropped beside a kept t1 (split), tokens_before wrong.
        # The after figure is right: 210 - 10 - 30 = 170.
        found = violations(
            actions({"s": Action.DROP, "a1": Action.DROP}), before=999, after=170, unmet=True
        )
        assert len(found) == 3
        assert any("untouchable" in item for item in found)
        assert any("split" in item for item in found)
        assert any("tokens_before" in item for item in found)

    def test_a_long_list_is_capped_and_counted(self) -> None:
        transcript = Transcript(
            tuple(TranscriptTurn(f"s{i}", Role.SYSTEM, "rule", 1) for i in range(25))
        )
        with pytest.raises(ValidationError) as caught:
            plan(
                actions({f"s{i}": Action.DROP for i in range(25)}, transcript),
                after=0,
                unmet=False,
                before=25,
                transcript=transcript,
                budget=CompactionBudget(25, 0),
            )
        error = caught.value
        assert error.details["violation_count"] == 25
        assert len(error.details["violations"]) == 20
        assert "(+22 more)" in str(error)
        assert "\n" not in str(error)


class TestLayout:
    def test_reads_the_untouchable_set_and_the_exchanges(self) -> None:
        shape = layout(BASE, BUDGET)
        assert list(shape.untouchable) == [1, 0, 0, 0, 0, 1]
        # Units are named by their earliest member: a1 and t1 form the unit 2.
        units = shape.units
        assert list(units.unit_of) == [0, 1, 2, 2, 4, 5]
        assert units.unit_last[2] == 3
        assert units.unit_tokens[2] == 30 + 40
        assert [units.locked[unit] for unit in (0, 1, 2, 4, 5)] == [1, 0, 0, 0, 1]
        assert (shape.untouchable_tokens, shape.untouchable_count) == (70, 2)
        assert (list(shape.tokens), shape.total) == ([10, 20, 30, 40, 50, 60], 210)

    def test_exchanges_are_derived_once_and_only_when_a_plan_removes_something(self) -> None:
        transcript = Transcript(BASE.turns)
        ObservationMaskingPolicy(0).decide(transcript, CompactionBudget(190, 1))
        shape = layout(transcript, CompactionBudget(190, 1))
        assert shape._units is None  # masking alone never needs the exchanges
        DropOldestPolicy().decide(transcript, CompactionBudget(190, 1))
        assert shape._units is not None
        assert shape.units is shape.units

    def test_a_repriced_layout_keeps_the_units_with_new_figures(self) -> None:
        shape = layout(BASE, BUDGET)
        cheaper = shape.repriced([(3, 4)], 174)  # t1: 40 -> 4 tokens
        assert (list(cheaper.tokens), cheaper.total) == ([10, 20, 30, 4, 50, 60], 174)
        assert cheaper.units.unit_tokens[2] == 30 + 4
        assert cheaper.units.unit_of is shape.units.unit_of
        assert cheaper.untouchable is shape.untouchable
        assert shape.units.unit_tokens[2] == 30 + 40  # the original is untouched

    def test_is_computed_once_per_transcript_and_protected_count(self) -> None:
        assert layout(BASE, BUDGET) is layout(BASE, CompactionBudget(5, 1))
        assert layout(BASE, BUDGET) is not layout(BASE, CompactionBudget(100, 2))

    def test_an_untouchable_member_locks_an_exchange_that_began_earlier(self) -> None:
        # Protecting 3 turns covers t1, u2 and a2: t1 locks the exchange opened by a1.
        shape = layout(BASE, CompactionBudget(100, 3))
        assert [shape.units.locked[unit] for unit in (0, 1, 2, 4, 5)] == [1, 0, 1, 1, 1]
        assert shape.untouchable_tokens == 10 + 40 + 50 + 60

    def test_token_totals_beyond_machine_ints_are_still_summed_exactly(self) -> None:
        huge = 2**63
        transcript = Transcript(
            (
                TranscriptTurn("a", Role.ASSISTANT, "call", huge, "c"),
                TranscriptTurn("t", Role.TOOL, "result", huge, "c"),
            )
        )
        shape = layout(transcript, CompactionBudget(0, 0))
        assert shape.units.unit_tokens[0] == 2 * huge

    def test_protecting_more_turns_than_exist_protects_all(self) -> None:
        shape = layout(BASE, CompactionBudget(500, 9))
        assert all(shape.untouchable)
        assert (shape.untouchable_tokens, shape.untouchable_count) == (210, 6)

    def test_require_satisfiable_raises_only_when_strictly_over(self) -> None:
        shape = layout(BASE, BUDGET)
        shape.require_satisfiable(CompactionBudget(70, 1))
        with pytest.raises(BudgetUnsatisfiable):
            shape.require_satisfiable(CompactionBudget(69, 1))


# A transcript whose last turn, protected under CompactionBudget(..., 1), is a large log.
LOG = "".join(f"step {n}: ok\n" for n in range(1, 101))
LOG_TOKENS = 300  # its text prices at 297 by the character default: 3 tokens of framing
BIG = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "system prompt", 10),
        TranscriptTurn("u1", Role.USER, "question", 20),
        TranscriptTurn("a1", Role.ASSISTANT, "calling a tool", 30, "c1"),
        TranscriptTurn("t1", Role.TOOL, LOG, LOG_TOKENS, "c1"),
    )
)
CAP = 80


def chars(text: str) -> int:
    return -(-len(text) // 4)


def excerpt_of_log(cap: int = CAP) -> TurnReplacement:
    made = excerpt(LOG, cap, chars, LOG_TOKENS - chars(LOG))
    assert made is not None
    return TurnReplacement(made, LOG_TOKENS - chars(LOG) + chars(made))


def excerpting(
    replacement: TurnReplacement, others: Mapping[str, Action] | None = None
) -> tuple[TurnAction, ...]:
    chosen = dict(others or {})
    return tuple(
        TurnAction(turn.turn_id, Action.EXCERPT, None, replacement)
        if turn.turn_id == "t1"
        else TurnAction(turn.turn_id, chosen.get(turn.turn_id, Action.KEEP))
        for turn in BIG.turns
    )


def capped(max_tokens: int, cap: int | None = CAP) -> CompactionBudget:
    return CompactionBudget(max_tokens, 1, max_result_tokens=cap)


class TestExcerptsAreChecked:
    def test_an_untouchable_result_over_the_cap_may_be_excerpted(self) -> None:
        replacement = excerpt_of_log()
        after = 60 + replacement.token_estimate
        made = plan(
            excerpting(replacement),
            after=after,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(after),
        )
        assert made.actions[3].action is Action.EXCERPT
        assert replacement.token_estimate <= CAP

    def test_the_untouchable_set_counts_an_excerpt_at_its_price(self) -> None:
        replacement = excerpt_of_log()
        # s and t1 are untouchable: 10 + 300 at full price, 10 + the excerpt as planned.
        budget = capped(10 + replacement.token_estimate)
        with pytest.raises(BudgetUnsatisfiable) as caught:
            plan(
                excerpting(replacement),
                after=60 + replacement.token_estimate,
                unmet=True,
                before=360,
                transcript=BIG,
                budget=capped(10 + replacement.token_estimate - 1),
            )
        assert caught.value.details["untouchable_tokens"] == 10 + replacement.token_estimate
        with pytest.raises(BudgetUnsatisfiable) as kept:
            plan(actions({}, BIG), after=360, unmet=True, before=360, transcript=BIG, budget=budget)
        assert kept.value.details["untouchable_tokens"] == 310  # not excerpted: its full price

    def test_an_excerpt_counts_at_its_price_in_the_estimate(self) -> None:
        replacement = excerpt_of_log()
        found = violations(
            excerpting(replacement),
            after=360,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(1000),
        )
        only(found, "tokens_after_estimate", str(60 + replacement.token_estimate))

    def test_an_excerpt_of_a_turn_that_is_not_a_tool_result_is_refused(self) -> None:
        replacement = excerpt_of_log()
        turns = (*BIG.turns[:3], TranscriptTurn("t1", Role.USER, LOG, LOG_TOKENS, "c1"))
        found = violations(
            excerpting(replacement),
            after=60 + replacement.token_estimate,
            unmet=False,
            before=360,
            transcript=Transcript(turns),
            budget=capped(1000),
        )
        only(found, "'t1'", "not a tool result")

    def test_an_excerpt_under_a_budget_without_a_cap_is_refused(self) -> None:
        replacement = excerpt_of_log()
        found = violations(
            excerpting(replacement),
            after=60 + replacement.token_estimate,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(1000, None),
        )
        only(found, "'t1'", "no max_result_tokens")

    def test_an_excerpt_of_a_result_within_the_cap_is_admitted_when_smaller(self) -> None:
        # Results that arrive together share the room: one under the cap may be cut too.
        replacement = excerpt_of_log()
        made = plan(
            excerpting(replacement),
            after=60 + replacement.token_estimate,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(1000, LOG_TOKENS),
        )
        assert made.tokens_after_estimate == 60 + replacement.token_estimate

    def test_an_excerpt_no_smaller_than_its_result_is_refused(self) -> None:
        replacement = excerpt_of_log()
        found = violations(
            excerpting(TurnReplacement(replacement.content, LOG_TOKENS)),
            after=60 + LOG_TOKENS,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(1000, LOG_TOKENS),
        )
        only(found, "'t1'", "not smaller than the result", "300 >= 300")

    def test_an_excerpt_priced_over_the_cap_is_refused(self) -> None:
        replacement = excerpt_of_log()
        found = violations(
            excerpting(TurnReplacement(replacement.content, CAP + 1)),
            after=60 + CAP + 1,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(1000),
        )
        only(found, "excerpt of 't1'", f"{CAP + 1} > {CAP}")

    @pytest.mark.parametrize(
        "edit",
        [
            lambda text: text.replace("step 1: ok", "step 1: failed"),
            lambda text: text.replace("left out", "omitted"),
            lambda text: "extra line\n" + text,
            lambda _text: "step 1: ok\n",
        ],
        ids=["an edited line", "no elision line", "a line not in the original", "no elision"],
    )
    def test_an_excerpt_that_is_not_the_originals_head_and_tail_is_refused(
        self, edit: object
    ) -> None:
        replacement = excerpt_of_log()
        assert callable(edit)
        found = violations(
            excerpting(TurnReplacement(edit(replacement.content), 20)),
            after=80,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(1000),
        )
        only(found, "excerpt of 't1'", "first lines, one elision line")

    def test_an_excerpted_result_stays_in_its_exchange_as_a_kept_turn_does(self) -> None:
        replacement = excerpt_of_log()
        found = violations(
            excerpting(replacement, {"a1": Action.DROP}),
            after=30 + replacement.token_estimate,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=CompactionBudget(1000, 0, max_result_tokens=CAP),
        )
        only(found, "split", "DROP beside EXCERPT")

    def test_a_cap_does_not_let_an_untouchable_result_be_masked(self) -> None:
        stub = TurnReplacement("stub", 2)
        found = violations(
            tuple(
                TurnAction("t1", Action.MASK, None, stub)
                if turn.turn_id == "t1"
                else TurnAction(turn.turn_id, Action.KEEP)
                for turn in BIG.turns
            ),
            after=62,
            unmet=False,
            before=360,
            transcript=BIG,
            budget=capped(1000),
        )
        only(found, "untouchable turn 't1' is not kept (MASK)")


class TestRequireSatisfiableWithACap:
    def test_an_untouchable_result_over_the_cap_counts_at_the_cap(self) -> None:
        shape = layout(BIG, capped(0))
        shape.require_satisfiable(capped(10 + CAP))
        with pytest.raises(BudgetUnsatisfiable) as caught:
            shape.require_satisfiable(capped(10 + CAP - 1))
        assert caught.value.details == {
            "untouchable_tokens": 10 + CAP,
            "max_tokens": 10 + CAP - 1,
            "untouchable_turn_count": 2,
        }

    def test_without_a_cap_it_counts_at_its_full_price(self) -> None:
        with pytest.raises(BudgetUnsatisfiable) as caught:
            layout(BIG, capped(0)).require_satisfiable(capped(10 + CAP, None))
        assert caught.value.details["untouchable_tokens"] == 310

    def test_only_tool_results_are_counted_at_the_cap(self) -> None:
        transcript = Transcript(
            (
                TranscriptTurn("s", Role.SYSTEM, "rules", 500),
                TranscriptTurn("t", Role.TOOL, "r", 500, "c"),
            )
        )
        with pytest.raises(BudgetUnsatisfiable) as caught:
            layout(transcript, capped(0)).require_satisfiable(capped(500))
        assert caught.value.details["untouchable_tokens"] == 500 + CAP
