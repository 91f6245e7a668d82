"""CompactionPlan.from_dict and from_json: a stored plan read back, through the gate."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    BudgetUnsatisfiable,
    CompactionBudget,
    CompactionPlan,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    Role,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
    default_chain,
)

TRANSCRIPT = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "You are careful.", 5),
        TranscriptTurn("u1", Role.USER, "What changed?", 30),
        TranscriptTurn("a1", Role.ASSISTANT, "Let me look.", 20, tool_call_id="c1"),
        TranscriptTurn("t1", Role.TOOL, "log line\n" * 200, 500, tool_call_id="c1"),
        TranscriptTurn("u2", Role.USER, "And the tests? \u00e9\u4e2d", 40),
        TranscriptTurn("a2", Role.ASSISTANT, "Running.", 20, tool_call_id="c2"),
        TranscriptTurn("t2", Role.TOOL, "ok " * 300, 300, tool_call_id="c2"),
        TranscriptTurn("a3", Role.ASSISTANT, "All green.", 10),
    )
)
BUDGET = CompactionBudget(200, protected_recent_turns=1)


WIDE = CompactionBudget(10_000)
CHAIN_BUDGET = CompactionBudget(300, protected_recent_turns=1)
TAIL_BUDGET = CompactionBudget(400, protected_recent_turns=4)
CAPPED = CompactionBudget(10_000, protected_recent_turns=4, max_result_tokens=100)
CAPPED_TIGHT = CompactionBudget(300, protected_recent_turns=1, max_result_tokens=100)


def cases() -> list[tuple[CompactionPlan, CompactionBudget]]:
    """Plans that keep, mask, summarize, drop and excerpt, one priced by a named estimator."""
    words = TokenizerEstimator(lambda text: [0] * len(text.split()), name="words")
    chain = default_chain(prompt_id="p", min_span_turns=2)
    made = [
        (DropOldestPolicy(), WIDE),
        (DropOldestPolicy(), BUDGET),
        (ObservationMaskingPolicy(0), BUDGET),
        (ObservationMaskingPolicy(0, estimator=words), BUDGET),
        (chain, CHAIN_BUDGET),
        (default_chain(prompt_id="p", keep_recent_results=0, min_span_turns=2), TAIL_BUDGET),
        (ExcerptingPolicy(recall_tool="cutctx_recall"), CAPPED),
        (PolicyChain((ExcerptingPolicy(), ObservationMaskingPolicy(0))), CAPPED_TIGHT),
    ]
    return [(policy.decide(TRANSCRIPT, budget), budget) for policy, budget in made]


def plans() -> list[CompactionPlan]:
    return [plan for plan, _ in cases()]


class TestFromDict:
    @pytest.mark.parametrize(("plan", "budget"), cases())
    def test_a_plan_read_back_from_its_dict_is_equal_and_hashes_the_same(
        self, plan: CompactionPlan, budget: CompactionBudget
    ) -> None:
        back = CompactionPlan.from_dict(plan.to_dict(), transcript=TRANSCRIPT, budget=budget)
        assert back == plan
        assert back.plan_hash() == plan.plan_hash()
        assert back.canonical_json() == plan.canonical_json()

    def test_the_plans_cover_every_action_and_a_named_estimator(self) -> None:
        wires = {a["action"] for p in plans() for a in p.to_dict()["actions"]}
        assert wires == {"keep", "mask", "summarize", "drop", "excerpt"}
        assert any(p.estimator_name == "words" for p in plans())

    def test_the_callers_dict_is_not_changed(self) -> None:
        data = plans()[2].to_dict()
        before = json.dumps(data, sort_keys=True)
        CompactionPlan.from_dict(data, transcript=TRANSCRIPT, budget=BUDGET)
        assert json.dumps(data, sort_keys=True) == before

    def test_a_tampered_action_is_refused_by_the_gate_naming_the_violation(self) -> None:
        data = plans()[1].to_dict()  # drops u1, a1, t1, u2, a2, t2
        assert data["actions"][3]["action"] == "drop"
        data["actions"][3]["action"] = "keep"  # t1 kept, its call a1 dropped
        with pytest.raises(ValidationError) as caught:
            CompactionPlan.from_dict(data, transcript=TRANSCRIPT, budget=BUDGET)
        assert any("exchange of 'a1' is split" in v for v in caught.value.details["violations"])

    def test_a_plan_for_another_budget_is_refused(self) -> None:
        data = plans()[1].to_dict()
        with pytest.raises(ValidationError, match="untouchable turn"):
            CompactionPlan.from_dict(
                data, transcript=TRANSCRIPT, budget=CompactionBudget(400, protected_recent_turns=3)
            )

    def test_an_unsatisfiable_budget_raises_budget_unsatisfiable(self) -> None:
        with pytest.raises(BudgetUnsatisfiable):
            CompactionPlan.from_dict(
                plans()[1].to_dict(), transcript=TRANSCRIPT, budget=CompactionBudget(1)
            )

    @pytest.mark.parametrize(
        ("change", "named"),
        [
            (lambda d: d.pop("actions"), "plan lacks the key 'actions'"),
            (lambda d: d.update(extra=1), "plan holds the unknown key 'extra'"),
            (lambda d: d.update(actions={}), "actions must be a JSON array, got dict"),
            (lambda d: d["actions"].__setitem__(2, 7), "actions[2] must be a JSON object"),
            (lambda d: d["actions"][2].pop("turn_id"), "actions[2] lacks the key 'turn_id'"),
            (lambda d: d["actions"][2].update(action="cut"), "actions[2].action must be one of"),
            (lambda d: d["actions"][2].update(turn_id=3), "actions[2]: TurnAction.turn_id"),
            (
                lambda d: d["actions"][3].update(replacement={"content": "x"}),
                "actions[3].replacement lacks the key 'token_estimate'",
            ),
            (
                lambda d: d["actions"][3]["replacement"].update({"token_estimate": "4"}),
                "actions[3].replacement: TurnReplacement.token_estimate",
            ),
            (
                lambda d: d["actions"][3].update(replacement=None),
                "actions[3]: TurnAction for 't1': replacement is set exactly",
            ),
            (lambda d: d.update(summarization_requests=[1]), "summarization_requests[0] must be"),
            (lambda d: d.update(tokens_before=-1), "CompactionPlan.tokens_before"),
            (lambda d: d.update(budget_unmet="no"), "CompactionPlan.budget_unmet"),
            (lambda d: d.update(estimator_ratio="4"), "CompactionPlan.estimator_ratio"),
            (lambda d: d.update(estimator_name=""), "CompactionPlan.estimator_name"),
            (lambda d: d.update(policy_name=None), "CompactionPlan.policy_name"),
        ],
    )
    def test_malformed_data_is_a_validation_error_naming_the_key_or_index(
        self, change: Any, named: str
    ) -> None:
        data = plans()[2].to_dict()  # masks t1 (index 3)
        change(data)
        with pytest.raises(ValidationError) as caught:
            CompactionPlan.from_dict(data, transcript=TRANSCRIPT, budget=BUDGET)
        assert named in caught.value.message

    def test_a_malformed_request_names_its_index(self) -> None:
        plan = plans()[4]
        assert plan.summarization_requests
        data = plan.to_dict()
        data["summarization_requests"][0]["turn_ids"] = "u1"
        with pytest.raises(ValidationError, match=r"summarization_requests\[0\]\.turn_ids must"):
            CompactionPlan.from_dict(data, transcript=TRANSCRIPT, budget=CHAIN_BUDGET)
        data["summarization_requests"][0]["turn_ids"] = []
        with pytest.raises(ValidationError, match=r"summarization_requests\[0\]: Summarization"):
            CompactionPlan.from_dict(data, transcript=TRANSCRIPT, budget=CHAIN_BUDGET)

    def test_data_that_is_not_an_object_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="plan must be a JSON object, got list"):
            CompactionPlan.from_dict([], transcript=TRANSCRIPT, budget=BUDGET)  # type: ignore[arg-type]

    def test_the_transcript_and_budget_are_checked_as_for_the_constructor(self) -> None:
        data = plans()[1].to_dict()
        with pytest.raises(ValidationError, match="transcript"):
            CompactionPlan.from_dict(data, transcript=None, budget=BUDGET)  # type: ignore[arg-type]


class TestFromJson:
    @pytest.mark.parametrize(("plan", "budget"), cases())
    def test_the_canonical_json_reads_back_as_the_same_plan(
        self, plan: CompactionPlan, budget: CompactionBudget
    ) -> None:
        for text in (plan.to_json(), plan.canonical_json().encode("utf-8")):
            back = CompactionPlan.from_json(text, transcript=TRANSCRIPT, budget=budget)
            assert back == plan
            assert back.plan_hash() == plan.plan_hash()

    def test_indented_json_of_the_dict_reads_back_too(self) -> None:
        plan = plans()[2]
        text = json.dumps(plan.to_dict(), indent=2)
        back = CompactionPlan.from_json(text, transcript=TRANSCRIPT, budget=BUDGET)
        assert back.plan_hash() == plan.plan_hash()

    @pytest.mark.parametrize("text", ["", "{", "not json", b"\xff\xfe{"])
    def test_text_that_is_not_json_is_a_validation_error(self, text: str | bytes) -> None:
        with pytest.raises(ValidationError, match="the text is not JSON"):
            CompactionPlan.from_json(text, transcript=TRANSCRIPT, budget=BUDGET)

    def test_a_non_text_argument_is_a_validation_error(self) -> None:
        with pytest.raises(ValidationError, match="JSON text"):
            CompactionPlan.from_json({}, transcript=TRANSCRIPT, budget=BUDGET)  # type: ignore[arg-type]
