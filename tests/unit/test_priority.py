"""PriorityPolicy: shedding level by level, with figures computed by hand.

A default stub of a 3-digit count is 126 characters, priced ``ceil(126 / 4) = 32`` tokens (see
tests/unit/test_masking.py).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    DEFAULT_PLACEHOLDER,
    Action,
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    Transcript,
    TranscriptTurn,
)
from tests.golden_cases import assistant, system, tool, user

if TYPE_CHECKING:
    from cutctx import CompactionPlan


def at(priority: int | str, turn: TranscriptTurn) -> TranscriptTurn:
    """``turn`` with ``cutctx.priority`` set to ``priority``."""
    return dataclasses.replace(turn, metadata={**turn.metadata, "cutctx.priority": str(priority)})


def fates(plan: CompactionPlan) -> str:
    return " ".join(f"{a.turn_id}:{a.action.value}" for a in plan.actions)


def levels() -> Transcript:
    """135 tokens: a system prompt, a pair at 1, noise at 0, a pair at 2, a last turn at 0."""
    return Transcript(
        (
            system("s", 10),
            at(1, user("u1", 20)),
            at(1, assistant("a1", 20)),
            user("noise", 30),
            at(2, user("u2", 20)),
            at(2, assistant("a2", 25)),
            user("u3", 10),
        )
    )


def agent() -> Transcript:
    """780 tokens: an exchange at 0 with a 400-token result, a question and an exchange at 1."""
    return Transcript(
        (
            system("s", 10),
            at(0, assistant("a1", 10, "c1")),
            at(0, tool("r1", 400, "c1")),
            at(1, user("u1", 40)),
            at(1, assistant("a2", 10, "c2")),
            at(1, tool("r2", 300, "c2")),
            assistant("a3", 10),
        )
    )


class WordCounter:
    """An estimator with a ``name``: plans record it."""

    name = "words"

    def estimate_tokens(self, text: str) -> int:
        return len(text.split())


class TestPriorityPolicy:
    def test_name_version_defaults_and_repr(self) -> None:
        policy = PriorityPolicy()
        assert (policy.name, policy.version) == ("priority", "1.0.0")
        assert (policy.mask_results, policy.keep_recent_results) == (False, 0)
        assert policy.placeholder == DEFAULT_PLACEHOLDER
        assert policy.estimator == CharRatioEstimator()
        assert repr(policy) == (
            "PriorityPolicy(mask_results=False, keep_recent_results=0, "
            "placeholder='[tool result masked by cutctx]', "
            "estimator=CharRatioEstimator(chars_per_token=4.0))"
        )

    def test_the_knobs_are_read_only(self) -> None:
        policy = PriorityPolicy(mask_results=True, keep_recent_results=3, placeholder="[x]")
        assert (policy.mask_results, policy.keep_recent_results, policy.placeholder) == (
            True,
            3,
            "[x]",
        )
        with pytest.raises(AttributeError):
            policy.mask_results = False  # type: ignore[misc]

    def test_the_lowest_level_gives_everything_before_a_higher_one_is_touched(self) -> None:
        # Level 0: noise (30) -> 105, still over 100 (u3 is protected); level 1: u1 -> 85.
        plan = PriorityPolicy().decide(levels(), CompactionBudget(100, 1))
        assert fates(plan) == ("s:keep u1:drop a1:keep noise:drop u2:keep a2:keep u3:keep")
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (85, False)

    def test_ties_within_a_level_go_oldest_first_and_stop_once_it_fits(self) -> None:
        # Level 0 then level 1 all the way: 135 - 30 - 20 - 20 = 65.
        plan = PriorityPolicy().decide(levels(), CompactionBudget(65, 1))
        assert fates(plan) == "s:keep u1:drop a1:drop noise:drop u2:keep a2:keep u3:keep"
        assert plan.tokens_after_estimate == 65

    def test_drop_oldest_would_shed_the_answer_the_priority_keeps(self) -> None:
        from cutctx import DropOldestPolicy  # noqa: PLC0415 - the contrast, here only

        plan = DropOldestPolicy().decide(levels(), CompactionBudget(100, 1))
        assert fates(plan) == "s:keep u1:drop a1:drop noise:keep u2:keep a2:keep u3:keep"

    def test_negative_priorities_go_before_turns_without_one(self) -> None:
        transcript = Transcript((user("u1", 10), at(-1, user("u2", 10)), user("u3", 10)))
        plan = PriorityPolicy().decide(transcript, CompactionBudget(20, 0))
        assert fates(plan) == "u1:keep u2:drop u3:keep"

    def test_an_exchange_is_shed_at_the_highest_priority_of_its_members(self) -> None:
        # The call is at 0 but its result at 2: the exchange (110) waits for level 2.
        transcript = Transcript(
            (
                at(1, user("u1", 10)),
                at(0, assistant("a1", 10, "c1")),
                at(2, tool("r1", 100, "c1")),
                user("u2", 50),
                assistant("a2", 10),
            )
        )
        plan = PriorityPolicy().decide(transcript, CompactionBudget(125, 1))
        # Level 0: u2 -> 130; level 1: u1 -> 120, fits.
        assert fates(plan) == "u1:drop a1:keep r1:keep u2:drop a2:keep"
        plan = PriorityPolicy().decide(transcript, CompactionBudget(100, 1))
        assert fates(plan) == "u1:drop a1:drop r1:drop u2:drop a2:keep"
        assert plan.tokens_after_estimate == 10

    def test_untouchable_turns_and_locked_exchanges_are_passed_over(self) -> None:
        transcript = Transcript(
            (
                user("task", 40, pinned=True),
                assistant("a1", 10, "c1"),
                user("u1", 20),
                at(1, user("u2", 30)),
                tool("r1", 50, "c1"),  # in the protected tail: its exchange is locked
            )
        )
        plan = PriorityPolicy().decide(transcript, CompactionBudget(95, 1))
        # Level 0: task pinned, a1 locked with r1, u1 -> 130; level 1: u2 -> 100, still over.
        assert fates(plan) == "task:keep a1:keep u1:drop u2:drop r1:keep"
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (100, True)

    def test_with_mask_results_a_level_is_masked_before_it_is_dropped(self) -> None:
        policy = PriorityPolicy(mask_results=True)
        plan = policy.decide(agent(), CompactionBudget(500, 1))
        assert fates(plan) == "s:keep a1:keep r1:mask u1:keep a2:keep r2:keep a3:keep"
        assert (plan.tokens_after_estimate, plan.estimator_ratio) == (412, 4.0)
        stub = plan.actions[2].replacement
        assert stub is not None
        assert stub.content == ObservationMaskingPolicy().stub("result r1", 400)
        assert stub.token_estimate == 32

    def test_a_masked_result_leaves_with_its_dropped_exchange(self) -> None:
        plan = PriorityPolicy(mask_results=True).decide(agent(), CompactionBudget(400, 1))
        # Masking r1 gives 412; dropping a1 with the stub (10 + 32) gives 370.
        assert fates(plan) == "s:keep a1:drop r1:drop u1:keep a2:keep r2:keep a3:keep"
        assert plan.actions[2].replacement is None
        # The stub's price decided the drop, so the ratio that priced it rides on the plan.
        assert (plan.tokens_after_estimate, plan.estimator_ratio) == (370, 4.0)

    def test_each_level_masks_then_drops_before_the_next(self) -> None:
        plan = PriorityPolicy(mask_results=True).decide(agent(), CompactionBudget(100, 1))
        # Level 0: 370 as above; level 1: mask r2 -> 102, then drop u1 -> 62.
        assert fates(plan) == "s:keep a1:drop r1:drop u1:drop a2:keep r2:mask a3:keep"
        assert plan.tokens_after_estimate == 62

    def test_the_recent_results_floor_is_never_masked(self) -> None:
        policy = PriorityPolicy(mask_results=True, keep_recent_results=1)
        plan = policy.decide(agent(), CompactionBudget(100, 1))
        # r2 is the last result: level 1 drops u1 (330), then a2 with r2 whole (20).
        assert fates(plan) == "s:keep a1:drop r1:drop u1:drop a2:drop r2:drop a3:keep"
        assert plan.tokens_after_estimate == 20

    def test_without_mask_results_nothing_is_masked_and_no_ratio_recorded(self) -> None:
        plan = PriorityPolicy().decide(agent(), CompactionBudget(500, 1))
        assert fates(plan) == "s:keep a1:drop r1:drop u1:keep a2:keep r2:keep a3:keep"
        assert (plan.tokens_after_estimate, plan.estimator_ratio) == (370, None)

    def test_another_estimator_prices_the_stub_and_is_recorded_by_name(self) -> None:
        policy = PriorityPolicy(mask_results=True, estimator=WordCounter())
        plan = policy.decide(agent(), CompactionBudget(500, 1))
        stub = plan.actions[2].replacement
        assert stub is not None
        # "[tool result masked by cutctx] (original: 400 tokens, sha256:...)": 9 words.
        assert stub.token_estimate == 9
        assert (plan.estimator_ratio, plan.estimator_name) == (None, "words")

    def test_a_turn_already_masked_is_not_masked_again(self) -> None:
        executor = CompactionExecutor()
        first = PriorityPolicy(mask_results=True).decide(agent(), CompactionBudget(500, 1))
        view = executor.apply(agent(), first).transcript
        assert view.turns[2].metadata["cutctx.priority"] == "0"  # a stub keeps its priority
        plan = PriorityPolicy(mask_results=True).decide(view, CompactionBudget(400, 1))
        assert fates(plan) == "s:keep a1:drop r1:drop u1:keep a2:keep r2:keep a3:keep"
        assert plan.estimator_ratio is None

    def test_after_a_masking_member_it_sees_the_stubs_and_does_not_mask_them_again(
        self,
    ) -> None:
        chain = PolicyChain([ObservationMaskingPolicy(0), PriorityPolicy(mask_results=True)])
        plan = chain.decide(agent(), CompactionBudget(100, 1))
        # Masking: r1 and r2 -> 144. Priority: level 0 drops a1 with its stub -> 102, level 1
        # drops u1 -> 62; r2 keeps the first member's stub.
        assert fates(plan) == "s:keep a1:drop r1:drop u1:drop a2:keep r2:mask a3:keep"
        assert plan.tokens_after_estimate == 62
        assert plan.policy_name == "chain(observation_masking@1.0.0+priority@1.0.0)"

    def test_a_summary_stand_in_in_a_chain_is_at_priority_zero(self) -> None:
        from cutctx import SummarizingPolicy  # noqa: PLC0415 - used by this case only

        transcript = Transcript(
            (
                at(5, user("u1", 30)),
                at(5, assistant("a1", 30)),
                at(5, user("p", 5, pinned=True)),
                at(1, user("u2", 40)),
                assistant("a2", 10),
            )
        )
        chain = PolicyChain([SummarizingPolicy("p", 0.5, 2), PriorityPolicy()])
        plan = chain.decide(transcript, CompactionBudget(56, 1))
        # u1 and a1 fold into a stand-in at 30 (85 in all); at priority 0 it goes before u2.
        assert fates(plan) == "u1:drop a1:drop p:keep u2:keep a2:keep"
        assert (plan.summarization_requests, plan.tokens_after_estimate) == ((), 55)

    def test_the_input_is_never_changed(self) -> None:
        transcript = agent()
        turns = transcript.turns
        before = [(t.turn_id, t.content, t.token_estimate, dict(t.metadata)) for t in turns]
        PriorityPolicy(mask_results=True).decide(transcript, CompactionBudget(100, 1))
        assert transcript.turns is turns
        assert [(t.turn_id, t.content, t.token_estimate, dict(t.metadata)) for t in turns] == (
            before
        )

    @pytest.mark.parametrize("value", ["1.5", "", " 1", "abc", "1_0", "+1", "\u0663", "--1"])
    def test_a_priority_that_is_not_an_integer_is_refused_naming_the_turn(self, value: str) -> None:
        transcript = Transcript((user("u1", 10), at(value, user("u2", 10)), at("x", user("u3", 1))))
        # Refused whatever the budget: the input is wrong, not the outcome.
        for budget in (CompactionBudget(100, 0), CompactionBudget(5, 0)):
            with pytest.raises(ValidationError, match="turn 'u2'") as caught:
                PriorityPolicy().decide(transcript, budget)
            assert caught.value.details["turn_id"] == "u2"
            assert caught.value.details["turn_ids"] == ["u2", "u3"]
            assert caught.value.details["key"] == "cutctx.priority"

    @pytest.mark.parametrize("value", ["0", "-0", "7", "-12", "007", "99999999999999999999"])
    def test_any_decimal_integer_is_a_priority(self, value: str) -> None:
        transcript = Transcript((at(value, user("u1", 10)), user("u2", 10)))
        plan = PriorityPolicy().decide(transcript, CompactionBudget(10, 0))
        dropped = [a.turn_id for a in plan.actions if a.action is Action.DROP]
        # Lowest first, and u2 (no priority) is at 0: a tie at 0 goes oldest first.
        assert dropped == (["u2"] if int(value) > 0 else ["u1"])

    def test_a_priority_too_long_for_int_is_refused_naming_the_turn(self) -> None:
        transcript = Transcript((at("9" * 5000, user("u1", 10)),))
        with pytest.raises(ValidationError, match="turn 'u1'"):
            PriorityPolicy().decide(transcript, CompactionBudget(1, 0))

    def test_budget_unsatisfiable_names_both_numbers(self) -> None:
        with pytest.raises(BudgetUnsatisfiable) as caught:
            PriorityPolicy().decide(levels(), CompactionBudget(15, 1))
        assert caught.value.details == {
            "untouchable_tokens": 20,
            "max_tokens": 15,
            "untouchable_turn_count": 2,
        }

    @pytest.mark.parametrize(
        ("arguments", "field"),
        [
            ({"mask_results": 1}, "mask_results"),
            ({"keep_recent_results": -1}, "keep_recent_results"),
            ({"keep_recent_results": True}, "keep_recent_results"),
            ({"placeholder": ""}, "placeholder"),
            ({"placeholder": "  "}, "placeholder"),
            ({"estimator": object()}, "estimator"),
        ],
    )
    def test_bad_configuration_raises_a_validation_error_naming_the_field(
        self, arguments: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            PriorityPolicy(**arguments)
        assert caught.value.details["field"] == f"PriorityPolicy.{field}"

    def test_the_knobs_are_keyword_only(self) -> None:
        with pytest.raises(TypeError):
            PriorityPolicy(True)  # type: ignore[call-arg]  # noqa: FBT003 - the point of the test
