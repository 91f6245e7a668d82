"""PolicyChain and default_chain: projection, stop-once-fits, stand-ins, merges, names, ratios."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    CompactionPlan,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    Role,
    SummarizationRequest,
    SummarizingPolicy,
    TokenizerEstimator,
    Transcript,
    TurnAction,
    TurnReplacement,
    default_chain,
)
from tests.excerpt_cases import AGENT, capped, chars
from tests.golden_cases import assistant, system, tool, user
from tests.oracle import Foreign

if TYPE_CHECKING:
    from cutctx import CompactionPolicy


def digest_of(*turn_ids: str) -> str:
    return "span-" + sha256_of("\0".join(turn_ids))[:16]


def fates(plan: CompactionPlan) -> dict[str, str]:
    return {a.turn_id: a.action.value for a in plan.actions}


class Spy:
    """A foreign policy that records every view it is asked about and keeps everything."""

    name = "spy"
    version = "0.0.1"

    def __init__(self) -> None:
        self.views: list[Transcript] = []

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        self.views.append(transcript)
        total = transcript.token_estimate()
        return CompactionPlan(
            actions=tuple(TurnAction(turn.turn_id, Action.KEEP) for turn in transcript.turns),
            summarization_requests=(),
            tokens_before=total,
            tokens_after_estimate=total,
            policy_name=self.name,
            policy_version=self.version,
            estimator_ratio=None,
            budget_unmet=total > budget.max_tokens,
            transcript=transcript,
            budget=budget,
        )


class FoldIds:
    """A foreign policy folding the named turns (whole exchanges, adjacent) into one summary."""

    version = "0.0.1"

    def __init__(self, ids: tuple[str, ...], target: int, name: str = "fold") -> None:
        self.ids, self.target, self.name = ids, target, name

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        ids = tuple(turn.turn_id for turn in transcript.turns if turn.turn_id in self.ids)
        group = digest_of(*ids)
        actions = tuple(
            TurnAction(turn.turn_id, Action.SUMMARIZE, group)
            if turn.turn_id in self.ids
            else TurnAction(turn.turn_id, Action.KEEP)
            for turn in transcript.turns
        )
        kept = sum(t.token_estimate for t in transcript.turns if t.turn_id not in self.ids)
        after = kept + self.target
        return CompactionPlan(
            actions=actions,
            summarization_requests=(SummarizationRequest(group, ids, self.target, "p"),),
            tokens_before=transcript.token_estimate(),
            tokens_after_estimate=after,
            policy_name=self.name,
            policy_version=self.version,
            estimator_ratio=None,
            budget_unmet=after > budget.max_tokens,
            transcript=transcript,
            budget=budget,
        )


class MaskFirst:
    """A foreign policy masking the first turn of its view with a one-token body."""

    name = "mask_first"
    version = "0.0.1"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        first, *rest = transcript.turns
        actions = (
            TurnAction(first.turn_id, Action.MASK, None, TurnReplacement("x", 1)),
            *(TurnAction(turn.turn_id, Action.KEEP) for turn in rest),
        )
        after = 1 + sum(turn.token_estimate for turn in rest)
        return CompactionPlan(
            actions=actions,
            summarization_requests=(),
            tokens_before=transcript.token_estimate(),
            tokens_after_estimate=after,
            policy_name=self.name,
            policy_version=self.version,
            estimator_ratio=None,
            budget_unmet=after > budget.max_tokens,
            transcript=transcript,
            budget=budget,
        )


class Elsewhere:
    """A foreign policy that answers with a plan for another transcript."""

    name = "elsewhere"
    version = "0.0.1"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        other = Transcript((user("not " + transcript.turns[0].turn_id, 1),))
        return DropOldestPolicy().decide(other, CompactionBudget(budget.max_tokens, 0))


class NotAPlan:
    """A foreign policy that answers with something other than a plan."""

    name = "not_a_plan"
    version = "0.0.1"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        del transcript, budget
        return {"actions": []}  # type: ignore[return-value]


def agent_run() -> Transcript:
    """780 tokens; with two protected turns the untouchable set is s, p, a4 and u9 (30)."""
    return Transcript(
        (
            system("s", 10),
            user("u1", 20),
            assistant("a1", 10, "cA"),
            tool("t1", 400, "cA", content="log"),
            assistant("a2", 10),
            user("p", 5, pinned=True),
            assistant("a3", 10, "cB"),
            tool("t3", 300, "cB"),
            assistant("a4", 10),
            user("u9", 5),
        )
    )


class TestPolicyChain:
    def test_name_joins_every_member_at_its_version_and_the_chain_version_is_1_0_0(self) -> None:
        chain = PolicyChain([SummarizingPolicy("p"), DropOldestPolicy(), Spy()])
        assert chain.name == "chain(summarizing@1.0.0+drop_oldest@1.0.0+spy@0.0.1)"
        assert chain.version == "1.0.0"

    def test_a_nested_chain_is_named_like_any_member(self) -> None:
        inner = PolicyChain([SummarizingPolicy("p"), DropOldestPolicy()])
        chain = PolicyChain([ObservationMaskingPolicy(), inner])
        assert chain.name == (
            "chain(observation_masking@1.0.0+chain(summarizing@1.0.0+drop_oldest@1.0.0)@1.0.0)"
        )
        flat = PolicyChain([ObservationMaskingPolicy(), SummarizingPolicy("p"), DropOldestPolicy()])
        budget = CompactionBudget(100, 2)
        nested_plan = chain.decide(agent_run(), budget)
        flat_plan = flat.decide(agent_run(), budget)
        assert nested_plan.actions == flat_plan.actions
        assert nested_plan.summarization_requests == flat_plan.summarization_requests

    def test_members_and_repr_are_exposed_in_order(self) -> None:
        members: list[CompactionPolicy] = [DropOldestPolicy(), SummarizingPolicy("p")]
        chain = PolicyChain(iter(members))
        assert chain.policies == tuple(members)
        assert repr(chain) == (
            "PolicyChain([DropOldestPolicy(), SummarizingPolicy(prompt_id='p', "
            "target_ratio=0.2, min_span_turns=4)])"
        )

    @pytest.mark.parametrize("policies", [[], (), "abc"])
    def test_an_empty_chain_is_refused(self, policies: list[CompactionPolicy]) -> None:
        with pytest.raises(ValidationError) as caught:
            PolicyChain(policies)
        assert caught.value.details["field"] == "PolicyChain.policies"

    def test_a_member_that_is_not_a_policy_is_refused_by_position(self) -> None:
        with pytest.raises(ValidationError) as caught:
            PolicyChain([DropOldestPolicy(), object()])  # type: ignore[list-item]
        assert "not a CompactionPolicy" in str(caught.value)
        assert caught.value.details == {
            "field": "PolicyChain.policies",
            "index": 1,
            "expected": "a CompactionPolicy",
            "type": "object",
        }

    def test_a_transcript_that_fits_is_kept_whole_and_no_member_runs(self) -> None:
        spy = Spy()
        transcript = agent_run()
        plan = PolicyChain([spy, DropOldestPolicy()]).decide(transcript, CompactionBudget(780, 2))
        assert spy.views == []
        assert set(fates(plan).values()) == {"keep"}
        assert plan.tokens_after_estimate == 780

    def test_members_stop_running_once_the_projected_view_fits(self) -> None:
        spy = Spy()
        chain = PolicyChain([ObservationMaskingPolicy(keep_recent_results=1), spy])
        # Masking t1 gives 780 - 400 + 32 = 412: fits 412, so the spy never runs.
        plan = chain.decide(agent_run(), CompactionBudget(412, 2))
        assert spy.views == []
        assert [a.turn_id for a in plan.actions if a.action is Action.MASK] == ["t1"]
        assert plan.tokens_after_estimate == 412
        assert plan.policy_name == "chain(observation_masking@1.0.0+spy@0.0.1)"
        # One token less and the spy is asked, once, about the masked view.
        chain.decide(agent_run(), CompactionBudget(411, 2))
        assert len(spy.views) == 1

    def test_the_projection_carries_stubs_and_one_stand_in_per_group_priced_at_target(
        self,
    ) -> None:
        spy = Spy()
        chain = PolicyChain(
            [ObservationMaskingPolicy(keep_recent_results=1), SummarizingPolicy("p"), spy]
        )
        plan = chain.decide(agent_run(), CompactionBudget(100, 2))
        (view,) = spy.views
        # Masking t1: 780 - 368 = 412. The oldest run u1, a1, t1, a2 then costs
        # 20 + 10 + 32 + 10 = 72 and folds to round(14.4) = 14: 412 - 72 + 14 = 354.
        group = digest_of("u1", "a1", "t1", "a2")
        assert view.turn_ids() == ("s", "summary:" + group, "p", "a3", "t3", "a4", "u9")
        standin = view.turns[1]
        assert (standin.role, standin.token_estimate, standin.pinned) == (Role.ASSISTANT, 14, False)
        assert view.token_estimate() == 354
        # The plan is built against the real transcript: t1 is folded, not masked.
        assert fates(plan) == {
            "s": "keep",
            "u1": "summarize",
            "a1": "summarize",
            "t1": "summarize",
            "a2": "summarize",
            "p": "keep",
            "a3": "keep",
            "t3": "keep",
            "a4": "keep",
            "u9": "keep",
        }
        (request,) = plan.summarization_requests
        assert (request.group_id, request.target_tokens) == (group, 14)
        assert plan.tokens_after_estimate == 354
        assert plan.budget_unmet is True

    def test_a_masked_turn_in_the_projection_is_marked_and_stub_priced(self) -> None:
        spy = Spy()
        PolicyChain([ObservationMaskingPolicy(keep_recent_results=1), spy]).decide(
            agent_run(), CompactionBudget(100, 2)
        )
        (view,) = spy.views
        masked = view.turns[3]
        assert masked.turn_id == "t1"
        assert masked.metadata["cutctx.kind"] == "masked"
        assert masked.token_estimate == 32
        assert masked.tool_call_id == "cA"
        # A foreign member sees the whole stub, digest included.
        digest = sha256_of("log")
        assert masked.content == (
            f"[tool result masked by cutctx] (original: 400 tokens, sha256:{digest})"
        )

    def test_dropping_a_stand_in_drops_its_whole_group_and_retires_the_request(self) -> None:
        chain = PolicyChain(
            [
                ObservationMaskingPolicy(keep_recent_results=1),
                SummarizingPolicy("p"),
                DropOldestPolicy(),
            ]
        )
        plan = chain.decide(agent_run(), CompactionBudget(100, 2))
        # From 354 (see above) drop-oldest drops the stand-in (14): 340, still over; then the
        # exchange a3 + t3 (310): 30, which fits.
        assert fates(plan) == {
            "s": "keep",
            "u1": "drop",
            "a1": "drop",
            "t1": "drop",
            "a2": "drop",
            "p": "keep",
            "a3": "drop",
            "t3": "drop",
            "a4": "keep",
            "u9": "keep",
        }
        assert plan.summarization_requests == ()
        assert plan.tokens_after_estimate == 30
        assert plan.budget_unmet is False

    def test_the_chain_keeps_a_ratio_recorded_before_its_stubs_were_folded_or_dropped(
        self,
    ) -> None:
        # The stub's 32 tokens priced the fold (and so where dropping stopped), so the ratio
        # that produced them rides on the plan although no MASK is left in it.
        chain = default_chain(prompt_id="p", keep_recent_results=1)
        plan = chain.decide(agent_run(), CompactionBudget(100, 2))
        assert all(a.action is not Action.MASK for a in plan.actions)
        assert plan.estimator_ratio == 4.0

    def test_a_fold_over_a_stand_in_merges_the_groups_under_a_new_id(self) -> None:
        transcript = Transcript((*(user(f"r{k}", 10) for k in range(4)), user("tail", 1)))
        first = FoldIds(("r1", "r2"), 3)
        chain = PolicyChain([first, SummarizingPolicy("p", min_span_turns=2)])
        plan = chain.decide(transcript, CompactionBudget(5, 1))
        # The view r0, S(3), r3, tail: summarizing folds r0 + S + r3 = 23 tokens -> round(4.6).
        (request,) = plan.summarization_requests
        assert request.turn_ids == ("r0", "r1", "r2", "r3")
        assert request.group_id == digest_of("r0", "r1", "r2", "r3")
        assert request.target_tokens == 5
        assert plan.tokens_after_estimate == 5 + 1
        assert {a.summary_group for a in plan.actions[:4]} == {request.group_id}

    def test_two_foreign_folds_merge_into_the_later_target(self) -> None:
        transcript = Transcript((*(user(f"r{k}", 10) for k in range(3)), user("tail", 1)))
        standin = "summary:" + digest_of("r0", "r1")
        chain = PolicyChain([FoldIds(("r0", "r1"), 4), FoldIds((standin, "r2"), 2, "fold2")])
        plan = chain.decide(transcript, CompactionBudget(1, 1))
        (request,) = plan.summarization_requests
        assert (request.turn_ids, request.target_tokens) == (("r0", "r1", "r2"), 2)
        assert request.group_id == digest_of("r0", "r1", "r2")

    def test_requests_are_ordered_by_their_earliest_turn_not_by_when_they_were_made(
        self,
    ) -> None:
        transcript = Transcript(
            (
                user("o0", 50),
                user("o1", 50),
                user("p", 1, pinned=True),
                *(user(f"r{k}", 10) for k in range(4)),
                user("tail", 1),
            )
        )
        chain = PolicyChain(
            [SummarizingPolicy("p", min_span_turns=4), SummarizingPolicy("p", min_span_turns=2)]
        )
        plan = chain.decide(transcript, CompactionBudget(2, 1))
        # The first member folds the later run r0..r3 (the older o0, o1 is too short for it);
        # the second, with a shorter minimum, then folds o0, o1.
        assert [r.turn_ids for r in plan.summarization_requests] == [
            ("o0", "o1"),
            ("r0", "r1", "r2", "r3"),
        ]
        assert [r.target_tokens for r in plan.summarization_requests] == [20, 8]
        assert plan.tokens_after_estimate == 20 + 1 + 8 + 1

    def test_the_chain_keeps_the_first_estimator_mark_any_member_recorded(self) -> None:
        words = TokenizerEstimator(lambda text: [0] * len(text.split()), name="words")
        transcript = Transcript((*(tool(f"t{k}", 400) for k in range(3)), user("u", 1)))
        chain = PolicyChain(
            [
                ObservationMaskingPolicy(keep_recent_results=2, estimator=words),
                ObservationMaskingPolicy(keep_recent_results=0),
            ]
        )
        plan = chain.decide(transcript, CompactionBudget(50, 0))
        masked = [a.replacement for a in plan.actions if a.replacement is not None]
        # t0 by words (9 words + 3), then t1 and t2 by the character default (32 each).
        assert [r.token_estimate for r in masked] == [12, 32, 32]
        assert (plan.estimator_name, plan.estimator_ratio) == ("words", None)
        # A member that records nothing (no span of ten turns to fold) leaves the mark free.
        later = PolicyChain(
            [SummarizingPolicy("p", min_span_turns=10), ObservationMaskingPolicy(0)]
        )
        assert later.decide(transcript, CompactionBudget(50, 0)).estimator_ratio == 4.0

    def test_a_foreign_member_is_called_through_decide_and_its_masks_are_kept(self) -> None:
        transcript = Transcript((user("u0", 50), user("u1", 5)))
        plan = PolicyChain([MaskFirst()]).decide(transcript, CompactionBudget(10, 1))
        assert plan.actions[0].replacement == TurnReplacement("x", 1)
        assert plan.tokens_after_estimate == 6

    def test_a_member_that_masks_a_summary_stand_in_is_refused(self) -> None:
        transcript = Transcript((*(user(f"r{k}", 10) for k in range(4)), user("tail", 1)))
        chain = PolicyChain([SummarizingPolicy("p"), MaskFirst()])
        with pytest.raises(ValidationError) as caught:
            chain.decide(transcript, CompactionBudget(1, 1))
        assert caught.value.details == {"policy": "mask_first", "version": "0.0.1"}

    def test_a_foreign_plan_for_another_transcript_is_refused(self) -> None:
        with pytest.raises(ValidationError) as caught:
            PolicyChain([Elsewhere()]).decide(agent_run(), CompactionBudget(100, 2))
        assert caught.value.details == {"policy": "elsewhere", "version": "0.0.1"}

    def test_a_foreign_answer_that_is_not_a_plan_is_refused_with_the_members_name(self) -> None:
        with pytest.raises(ValidationError, match=r"not_a_plan@0\.0\.1 returned dict") as caught:
            PolicyChain([NotAPlan()]).decide(agent_run(), CompactionBudget(100, 2))
        assert caught.value.details == {"policy": "not_a_plan", "version": "0.0.1"}

    def test_budget_unsatisfiable_is_raised_before_any_member_runs(self) -> None:
        spy = Spy()
        with pytest.raises(BudgetUnsatisfiable) as caught:
            PolicyChain([spy]).decide(agent_run(), CompactionBudget(29, 2))
        assert caught.value.details == {
            "untouchable_tokens": 30,
            "max_tokens": 29,
            "untouchable_turn_count": 4,
        }
        assert spy.views == []


class TestDefaultChain:
    def test_is_masking_then_summarizing_then_drop_oldest_with_the_0_1_name(self) -> None:
        chain = default_chain(prompt_id="summaries/v1")
        assert chain.name == "chain(observation_masking@1.0.0+summarizing@1.0.0+drop_oldest@1.0.0)"
        assert chain.version == "1.0.0"
        masking, summarizing, dropping = chain.policies
        assert isinstance(masking, ObservationMaskingPolicy)
        assert isinstance(summarizing, SummarizingPolicy)
        assert isinstance(dropping, DropOldestPolicy)
        assert masking.keep_recent_results == 2
        assert (summarizing.prompt_id, summarizing.target_ratio, summarizing.min_span_turns) == (
            "summaries/v1",
            0.2,
            4,
        )

    def test_passes_its_configuration_to_the_members(self) -> None:
        chain = default_chain(
            prompt_id="q", keep_recent_results=0, target_ratio=0.5, min_span_turns=2
        )
        masking, summarizing, _ = chain.policies
        assert isinstance(masking, ObservationMaskingPolicy)
        assert isinstance(summarizing, SummarizingPolicy)
        assert masking.keep_recent_results == 0
        assert (summarizing.prompt_id, summarizing.target_ratio, summarizing.min_span_turns) == (
            "q",
            0.5,
            2,
        )

    def test_prices_its_stubs_with_the_estimator_it_is_given(self) -> None:
        estimator = CharRatioEstimator(1.5)
        masking = default_chain(prompt_id="p", estimator=estimator).policies[0]
        assert isinstance(masking, ObservationMaskingPolicy)
        assert masking.estimator is estimator
        default = default_chain(prompt_id="p").policies[0]
        assert isinstance(default, ObservationMaskingPolicy)
        assert default.estimator == CharRatioEstimator()

    def test_masks_first_and_needs_no_summary_when_masking_suffices(self) -> None:
        plan = default_chain(prompt_id="p", keep_recent_results=1).decide(
            agent_run(), CompactionBudget(412, 2)
        )
        assert plan.summarization_requests == ()
        assert [a.turn_id for a in plan.actions if a.action is not Action.KEEP] == ["t1"]


class TestChainsWithExcerpts:
    """An excerpting member first: later members mask, summarize or drop excerpted results."""

    @staticmethod
    def chain(*members: CompactionPolicy) -> PolicyChain:
        return PolicyChain((ExcerptingPolicy(), *members))

    def test_an_excerpted_result_that_must_go_is_masked_with_the_originals_figures(
        self,
    ) -> None:
        plan = self.chain(ObservationMaskingPolicy(0)).decide(AGENT, capped(150))
        r1 = AGENT.turns[3]
        assert fates(plan)["r1"] == "mask"
        assert fates(plan)["r2"] == "excerpt"
        stub = plan.actions[3].replacement
        assert stub is not None
        assert stub.content == ObservationMaskingPolicy().stub(r1.content, r1.token_estimate)
        assert stub.token_estimate == chars(stub.content)

    def test_a_tokenizers_stub_of_an_excerpt_also_names_the_original(self) -> None:
        words = TokenizerEstimator(lambda text: [0] * len(text.split()), name="words")
        chain = PolicyChain(
            (ExcerptingPolicy(estimator=words), ObservationMaskingPolicy(0, estimator=words))
        )
        plan = chain.decide(AGENT, capped(150))
        r1 = AGENT.turns[3]
        stub = plan.actions[3].replacement
        assert fates(plan)["r1"] == "mask"
        assert stub is not None
        assert stub.content == ObservationMaskingPolicy().stub(r1.content, r1.token_estimate)
        assert stub.token_estimate == words.estimate_tokens(stub.content)
        assert plan.estimator_name == "words"

    def test_an_excerpted_result_is_dropped_with_its_exchange(self) -> None:
        plan = self.chain(DropOldestPolicy()).decide(AGENT, capped(150))
        assert [fates(plan)[turn_id] for turn_id in ("a1", "r1", "r2")] == [
            "drop",
            "drop",
            "excerpt",
        ]

    def test_an_excerpted_result_is_summarized_at_its_excerpts_price(self) -> None:
        plan = self.chain(SummarizingPolicy("p", 0.5, 2)).decide(AGENT, capped(150))
        excerpted = ExcerptingPolicy().decide(AGENT, capped(150))
        request = plan.summarization_requests[0]
        assert "r1" in request.turn_ids
        span = sum(
            action.replacement.token_estimate if action.replacement else turn.token_estimate
            for turn, action in zip(AGENT.turns, excerpted.actions, strict=True)
            if turn.turn_id in request.turn_ids
        )
        assert request.target_tokens == max(1, round(span * 0.5))

    def test_it_runs_even_when_the_view_fits_wherever_it_stands(self) -> None:
        roomy = capped(10_000)
        for chain in (
            PolicyChain((ObservationMaskingPolicy(), ExcerptingPolicy())),
            PolicyChain((DropOldestPolicy(), PolicyChain((ExcerptingPolicy(),)))),
        ):
            assert fates(chain.decide(AGENT, roomy))["r1"] == "excerpt"

    def test_without_a_cap_a_chain_with_it_plans_as_the_chain_without(self) -> None:
        for members, budget in (
            ((ObservationMaskingPolicy(), SummarizingPolicy("p"), DropOldestPolicy()), 320),
            ((ObservationMaskingPolicy(0), DropOldestPolicy()), 300),
            ((SummarizingPolicy("p", min_span_turns=2), DropOldestPolicy()), 400),
        ):
            uncapped = capped(budget, cap=None)
            with_it = self.chain(*members).decide(AGENT, uncapped).to_dict()
            without = PolicyChain(members).decide(AGENT, uncapped).to_dict()
            assert with_it.pop("policy_name").startswith("chain(excerpting@1.0.0+")
            without.pop("policy_name")
            assert with_it == without

    def test_a_priority_member_tolerates_excerpts(self) -> None:
        masking = self.chain(PriorityPolicy(mask_results=True)).decide(AGENT, capped(190))
        r1 = AGENT.turns[3]
        assert fates(masking)["r1"] == "mask"
        stub = masking.actions[3].replacement
        assert stub is not None
        assert stub.content == ObservationMaskingPolicy().stub(r1.content, r1.token_estimate)
        dropping = self.chain(PriorityPolicy()).decide(AGENT, capped(150))
        assert fates(dropping)["r1"] == "drop"
        assert fates(dropping)["r2"] == "excerpt"

    def test_a_foreign_member_sees_the_excerpts_in_its_projection(self) -> None:
        spy = Spy()
        plan = self.chain(spy).decide(AGENT, capped(150))
        (view,) = spy.views
        assert view.turns[3].content == plan.actions[3].replacement.content  # type: ignore[union-attr]
        assert view.turns[3].metadata["cutctx.kind"] == "excerpt"
        assert view.turns[3].metadata["cutctx.original_tokens"] == str(
            AGENT.turns[3].token_estimate
        )

    def test_a_foreign_excerpting_member_is_composed_like_a_built_in_one(self) -> None:
        foreign = PolicyChain((Foreign(ExcerptingPolicy()), ObservationMaskingPolicy(0)))
        built_in = self.chain(ObservationMaskingPolicy(0))
        assert (
            foreign.decide(AGENT, capped(150)).to_dict()
            == built_in.decide(AGENT, capped(150)).to_dict()
        )


def test_a_chain_keeps_the_marks_of_a_first_member_that_changed_nothing() -> None:
    """A member that kept everything but recorded its estimator: the next member decides over
    the real transcript, and the chain still keeps the first marks recorded."""

    class Named:
        name, version = "named", "1"

        def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
            total = transcript.token_estimate()
            return CompactionPlan(
                actions=tuple(TurnAction(t.turn_id, Action.KEEP) for t in transcript.turns),
                tokens_before=total,
                tokens_after_estimate=total,
                policy_name=self.name,
                policy_version=self.version,
                budget_unmet=total > budget.max_tokens,
                transcript=transcript,
                budget=budget,
                estimator_name="first",
            )

    plan = PolicyChain((Named(), ObservationMaskingPolicy(0))).decide(AGENT, capped(300))
    assert "mask" in fates(plan).values()
    assert (plan.estimator_ratio, plan.estimator_name) == (None, "first")
