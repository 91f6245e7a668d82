"""ExcerptingPolicy: tool results over the budget's result cap, sent as head and tail lines.

The transcript is ``tests.excerpt_cases.AGENT`` (two logs over the cap of 80, ``r2`` protected).
"""

from __future__ import annotations

import math

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import (
    Action,
    BudgetUnsatisfiable,
    CharRatioEstimator,
    CompactionBudget,
    ExcerptingPolicy,
    Role,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
)
from cutctx._core.excerpts import parse_excerpt
from tests.excerpt_cases import AGENT, CAP, FRAMING, capped, chars, log, result

WORDS = TokenizerEstimator(lambda text: [0] * len(text.split()), name="words")


def kinds(plan_actions: object) -> dict[str, str]:
    assert isinstance(plan_actions, tuple)
    return {action.turn_id: action.action.value for action in plan_actions}


class TestExcerptingPolicy:
    def test_is_named_and_versioned(self) -> None:
        policy = ExcerptingPolicy()
        assert (policy.name, policy.version) == ("excerpting", "1.0.0")
        assert policy.estimator == CharRatioEstimator()
        assert policy.recall_tool is None
        assert repr(policy) == (
            "ExcerptingPolicy(estimator=CharRatioEstimator(chars_per_token=4.0), recall_tool=None)"
        )

    def test_bad_configuration_is_refused_naming_it(self) -> None:
        with pytest.raises(ValidationError, match=r"ExcerptingPolicy\.estimator"):
            ExcerptingPolicy(estimator=object())  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match=r"ExcerptingPolicy\.recall_tool"):
            ExcerptingPolicy(recall_tool="two\nlines")
        with pytest.raises(TypeError):
            ExcerptingPolicy(WORDS)  # type: ignore[call-arg]

    def test_without_a_cap_it_keeps_everything(self) -> None:
        plan = ExcerptingPolicy().decide(AGENT, capped(300, cap=None))
        assert set(kinds(plan.actions).values()) == {"keep"}
        assert (plan.tokens_after_estimate, plan.budget_unmet) == (AGENT.token_estimate(), True)
        assert (plan.estimator_ratio, plan.estimator_name) == (None, None)

    def test_every_result_over_the_cap_is_excerpted_the_protected_tail_included(self) -> None:
        plan = ExcerptingPolicy().decide(AGENT, capped(10_000))
        assert kinds(plan.actions) == {
            "s": "keep",
            "task": "keep",
            "a1": "keep",
            "r1": "excerpt",
            "n1": "keep",
            "a2": "keep",
            "r2": "excerpt",  # protected: the cap applies in the tail too
            "n2": "keep",
        }

    def test_an_excerpt_is_priced_as_its_framing_plus_its_text_within_the_cap(self) -> None:
        plan = ExcerptingPolicy().decide(AGENT, capped(10_000))
        saved = 0
        for turn, action in zip(AGENT.turns, plan.actions, strict=True):
            if action.action is not Action.EXCERPT:
                continue
            replacement = action.replacement
            assert replacement is not None
            assert replacement.token_estimate == FRAMING + chars(replacement.content) <= CAP
            read = parse_excerpt(turn.content, replacement.content)
            assert read is not None
            assert read.digest == sha256_of(turn.content)
            saved += turn.token_estimate - replacement.token_estimate
        assert plan.tokens_after_estimate == AGENT.token_estimate() - saved
        assert plan.estimator_ratio == 4.0

    def test_it_excerpts_whether_or_not_the_view_fits(self) -> None:
        fits = ExcerptingPolicy().decide(AGENT, capped(AGENT.token_estimate()))
        assert Action.EXCERPT in {action.action for action in fits.actions}
        assert fits.budget_unmet is False

    def test_what_is_over_after_excerpting_is_said_unmet(self) -> None:
        plan = ExcerptingPolicy().decide(AGENT, capped(200, protected=0))
        assert plan.tokens_after_estimate > 200
        assert plan.budget_unmet is True

    def test_results_within_the_cap_and_other_roles_over_it_are_kept(self) -> None:
        big_user = TranscriptTurn("u", Role.USER, log(200), 2000)
        small = result("r", "c", "short\n")
        transcript = Transcript((big_user, small))
        plan = ExcerptingPolicy().decide(
            transcript, CompactionBudget(10_000, 0, max_result_tokens=CAP)
        )
        assert kinds(plan.actions) == {"u": "keep", "r": "keep"}

    def test_a_masked_stub_is_never_excerpted(self) -> None:
        stub = TranscriptTurn(
            "r", Role.TOOL, "x" * 1000, 250, "c", metadata={"cutctx.kind": "masked"}
        )
        plan = ExcerptingPolicy().decide(
            Transcript((stub,)), CompactionBudget(500, 0, max_result_tokens=CAP)
        )
        assert kinds(plan.actions) == {"r": "keep"}

    def test_a_result_whose_framing_alone_is_over_the_cap_is_kept(self) -> None:
        image = TranscriptTurn("r", Role.TOOL, "", 1600, "c")  # an image: no text to cut
        plan = ExcerptingPolicy().decide(
            Transcript((image,)), CompactionBudget(5000, 0, max_result_tokens=CAP)
        )
        assert kinds(plan.actions) == {"r": "keep"}

    def test_the_estimator_given_prices_the_excerpt_and_is_named_on_the_plan(self) -> None:
        text = "".join(f"word {n} of the log\n" for n in range(400))
        turn = TranscriptTurn("r", Role.TOOL, text, WORDS.estimate_tokens(text) + 5, "c")
        plan = ExcerptingPolicy(estimator=WORDS).decide(
            Transcript((turn,)), CompactionBudget(10_000, 0, max_result_tokens=CAP)
        )
        replacement = plan.actions[0].replacement
        assert replacement is not None
        assert replacement.token_estimate == 5 + WORDS.estimate_tokens(replacement.content) <= CAP
        assert (plan.estimator_ratio, plan.estimator_name) == (None, "words")

    def test_the_recall_tool_is_named_in_every_elision_line(self) -> None:
        plan = ExcerptingPolicy(recall_tool="cutctx_recall").decide(AGENT, capped(10_000))
        for turn, action in zip(AGENT.turns, plan.actions, strict=True):
            if action.replacement is not None:
                read = parse_excerpt(turn.content, action.replacement.content)
                assert read is not None
                assert (read.recall_tool, read.start_line) == ("cutctx_recall", read.head + 1)

    def test_an_untouchable_result_counts_at_the_cap_when_deciding_satisfiability(self) -> None:
        # Untouchable: s 10, task 20, r2 (at most the cap of 80) and n2 10.
        floor = 10 + 20 + CAP + 10
        plan = ExcerptingPolicy().decide(AGENT, capped(floor))
        assert plan.actions[6].action is Action.EXCERPT
        with pytest.raises(BudgetUnsatisfiable) as caught:
            ExcerptingPolicy().decide(AGENT, capped(floor - 1))
        assert caught.value.details["untouchable_tokens"] == floor
        with pytest.raises(BudgetUnsatisfiable) as uncapped:
            ExcerptingPolicy().decide(AGENT, capped(floor, cap=None))
        assert uncapped.value.details["untouchable_tokens"] == 40 + AGENT.turns[6].token_estimate

    def test_an_untouchable_result_that_cannot_be_excerpted_counts_whole(self) -> None:
        image = TranscriptTurn("r", Role.TOOL, "", 1600, "c")
        with pytest.raises(BudgetUnsatisfiable) as caught:
            ExcerptingPolicy().decide(
                Transcript((image,)), CompactionBudget(500, 1, max_result_tokens=CAP)
            )
        assert caught.value.details["untouchable_tokens"] == 1600

    def test_the_same_input_gives_the_same_plan(self) -> None:
        first = ExcerptingPolicy().decide(AGENT, capped(300))
        again = ExcerptingPolicy().decide(Transcript(AGENT.turns), capped(300))
        assert first.canonical_json() == again.canonical_json()

    def test_the_original_is_priced_once(self) -> None:
        """The excerpt builder's first price is the original's, which the policy knows."""
        lengths: list[int] = []

        class Counting:
            def estimate_tokens(self, text: str) -> int:
                lengths.append(len(text))
                return math.ceil(len(text) / 4)

        ExcerptingPolicy(estimator=Counting()).decide(AGENT, capped(10_000))
        assert lengths.count(len(AGENT.turns[3].content)) == 1
