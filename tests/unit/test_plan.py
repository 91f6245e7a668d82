"""CompactionPlan: typed fields, no way around the gate, and an auditable canonical form."""

from __future__ import annotations

import copy
import dataclasses
import gc
import hashlib
import json
import math
import os
import pickle
import subprocess
import sys
import textwrap
from typing import Any

import pytest
from baseaicore import ValidationError, sha256_of
from hypothesis import given
from hypothesis import strategies as st

from cutctx import (
    Action,
    CompactionBudget,
    CompactionPlan,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    Role,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
)
from cutctx._core.digest import canonical_json
from tests.contract import rebuilt

# Two turns: u (USER, 10 tokens) and t (TOOL, 30 tokens); 40 in all. Budget 20, nothing protected.
TRANSCRIPT = Transcript(
    (
        TranscriptTurn("u", Role.USER, "question", 10),
        TranscriptTurn("t", Role.TOOL, "long output", 30, "c1"),
    )
)
BUDGET = CompactionBudget(20, 0)
STUB = TurnReplacement("stub \u00e9\u4e2d", 4)
MASKED = (TurnAction("u", Action.KEEP), TurnAction("t", Action.MASK, None, STUB))


def masked_plan(**changes: Any) -> CompactionPlan:
    """The plan that keeps u and masks t to 4 tokens: 10 + 4 = 14, within 20."""
    fields: dict[str, Any] = {
        "actions": MASKED,
        "summarization_requests": (),
        "tokens_before": 40,
        "tokens_after_estimate": 14,
        "policy_name": "hand_built",
        "policy_version": "1.2.3",
        "estimator_ratio": 4.0,
        "budget_unmet": False,
        "transcript": TRANSCRIPT,
        "budget": BUDGET,
    }
    fields.update(changes)
    return CompactionPlan(**fields)


def is_plain_json(value: object) -> bool:
    """True when ``value`` is built only from dict (str keys), list, str, int, float, bool, None."""
    if value is None or isinstance(value, str | int | float | bool):
        return True
    if type(value) is list:
        return all(is_plain_json(item) for item in value)
    if type(value) is dict:
        return all(isinstance(key, str) and is_plain_json(item) for key, item in value.items())
    return False


class TestCompactionPlanConstruction:
    def test_holds_its_fields(self) -> None:
        plan = masked_plan()
        assert plan.actions == MASKED
        assert plan.summarization_requests == ()
        assert (plan.tokens_before, plan.tokens_after_estimate, plan.budget_unmet) == (
            40,
            14,
            False,
        )
        assert (plan.policy_name, plan.policy_version) == ("hand_built", "1.2.3")
        assert plan.estimator_ratio == 4.0
        assert plan.estimator_name is None

    def test_lists_are_stored_as_tuples(self) -> None:
        plan = masked_plan(actions=list(MASKED), summarization_requests=[])
        assert plan.actions == MASKED
        assert isinstance(plan.summarization_requests, tuple)

    def test_an_int_ratio_is_stored_as_a_float(self) -> None:
        ratio = masked_plan(estimator_ratio=4).estimator_ratio
        assert type(ratio) is float

    def test_no_field_is_accepted_positionally_as_in_0_1(self) -> None:
        positional: tuple[Any, ...] = (MASKED, (), 40, 14, "p", "1", None, False)
        with pytest.raises(TypeError, match="positional"):
            CompactionPlan(*positional, transcript=TRANSCRIPT, budget=BUDGET)  # type: ignore[call-arg]

    @pytest.mark.parametrize("missing", ["transcript", "budget"])
    def test_omitting_transcript_or_budget_is_a_type_error(self, missing: str) -> None:
        fields: dict[str, Any] = {
            "actions": MASKED,
            "tokens_before": 40,
            "tokens_after_estimate": 14,
            "policy_name": "p",
            "policy_version": "1",
            "transcript": TRANSCRIPT,
            "budget": BUDGET,
        }
        del fields[missing]
        with pytest.raises(TypeError, match=missing):
            CompactionPlan(**fields)

    def test_the_0_1_call_without_requests_ratio_or_outcome_is_complete(self) -> None:
        plan = CompactionPlan(
            actions=MASKED,
            tokens_before=40,
            tokens_after_estimate=14,
            policy_name="hand_built",
            policy_version="1.2.3",
            transcript=TRANSCRIPT,
            budget=BUDGET,
        )
        assert plan.summarization_requests == ()
        assert plan.estimator_ratio is None
        assert plan.budget_unmet is False
        assert plan == masked_plan(estimator_ratio=None)

    def test_the_defaulted_outcome_is_still_checked_by_the_gate(self) -> None:
        """``budget_unmet=False`` by default is a claim the gate holds the plan to."""
        with pytest.raises(ValidationError, match="budget_unmet"):
            CompactionPlan(
                actions=MASKED,
                tokens_before=40,
                tokens_after_estimate=14,
                policy_name="p",
                policy_version="1",
                transcript=TRANSCRIPT,
                budget=CompactionBudget(10, 0),
            )


class TestTranscriptAndBudgetAreNotCarried:
    @pytest.mark.parametrize("name", ["transcript", "budget"])
    def test_reading_them_gives_a_marker_saying_so(self, name: str) -> None:
        for plan in (masked_plan(), policy_plan()):
            marker = getattr(plan, name)
            assert "not carried on the plan" in repr(marker)
            assert name in repr(marker)
            assert marker is not TRANSCRIPT
            assert marker is not BUDGET

    def test_a_pretty_printer_walking_the_dataclass_fields_reads_every_one(self) -> None:
        """Pretty-printers walk ``__dataclass_fields__`` (InitVars included) with ``getattr``."""
        plan = masked_plan()
        shown = {name: repr(getattr(plan, name)) for name in plan.__dataclass_fields__}
        assert "not carried on the plan" in shown["transcript"]
        assert "not carried on the plan" in shown["budget"]
        assert shown["policy_name"] == "'hand_built'"

    def test_the_plan_holds_no_reference_to_them(self) -> None:
        transcript = Transcript(TRANSCRIPT.turns)
        budget = CompactionBudget(20, 0)
        for plan in (
            masked_plan(transcript=transcript, budget=budget),
            ObservationMaskingPolicy(0).decide(transcript, budget),
        ):
            referents = gc.get_referents(plan)
            assert not any(item is transcript or item is budget for item in referents)
            assert not any(item is transcript.turns for item in referents)

    @pytest.mark.parametrize(
        ("changes", "field"),
        [
            ({"transcript": TRANSCRIPT.turns}, "CompactionPlan.transcript"),
            ({"budget": 20}, "CompactionPlan.budget"),
            ({"actions": "keep"}, "CompactionPlan.actions"),
            ({"actions": (MASKED[0], "mask")}, "CompactionPlan.actions"),
            ({"summarization_requests": None}, "CompactionPlan.summarization_requests"),
            ({"tokens_before": -1}, "CompactionPlan.tokens_before"),
            ({"tokens_before": 40.0}, "CompactionPlan.tokens_before"),
            ({"tokens_after_estimate": True}, "CompactionPlan.tokens_after_estimate"),
            ({"policy_name": ""}, "CompactionPlan.policy_name"),
            ({"policy_version": None}, "CompactionPlan.policy_version"),
            ({"estimator_ratio": 0.0}, "CompactionPlan.estimator_ratio"),
            ({"estimator_ratio": math.nan}, "CompactionPlan.estimator_ratio"),
            ({"estimator_ratio": True}, "CompactionPlan.estimator_ratio"),
            ({"budget_unmet": 0}, "CompactionPlan.budget_unmet"),
            ({"estimator_name": ""}, "CompactionPlan.estimator_name"),
        ],
    )
    def test_a_field_of_the_wrong_type_is_refused(
        self, changes: dict[str, Any], field: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            masked_plan(**changes)
        assert caught.value.details["field"] == field
        assert "\n" not in str(caught.value)

    def test_is_frozen_and_slotted(self) -> None:
        plan = masked_plan()
        with pytest.raises(dataclasses.FrozenInstanceError):
            plan.tokens_after_estimate = 1  # type: ignore[misc]
        assert "__slots__" in vars(CompactionPlan)
        assert not hasattr(plan, "__dict__")


class TestNoWayAroundTheGate:
    def test_replace_without_transcript_and_budget_raises(self) -> None:
        # dataclasses itself refuses: ValueError on Python 3.12, TypeError from 3.13 on.
        with pytest.raises((ValueError, TypeError), match="transcript"):
            dataclasses.replace(masked_plan(), tokens_after_estimate=1)  # type: ignore[call-arg]

    def test_replace_with_transcript_and_budget_runs_the_gate(self) -> None:
        plan = masked_plan()
        with pytest.raises(ValidationError) as caught:
            dataclasses.replace(plan, tokens_after_estimate=1, transcript=TRANSCRIPT, budget=BUDGET)
        assert any("tokens_after_estimate" in item for item in caught.value.details["violations"])

    def test_a_faithful_replace_gives_an_equal_plan(self) -> None:
        plan = masked_plan()
        twin = dataclasses.replace(plan, transcript=TRANSCRIPT, budget=BUDGET)
        assert twin == plan
        assert twin.plan_hash() == plan.plan_hash()

    def test_replace_against_another_budget_is_checked_against_that_budget(self) -> None:
        # 14 tokens no longer fit a budget of 13, so budget_unmet=False is now a lie.
        with pytest.raises(ValidationError):
            dataclasses.replace(
                masked_plan(), transcript=TRANSCRIPT, budget=CompactionBudget(13, 0)
            )


# The canonical form of masked_plan(), written out by hand: sorted keys, no whitespace,
# non-ASCII characters as themselves.
EXPECTED_JSON = (
    '{"actions":['
    '{"action":"keep","replacement":null,"summary_group":null,"turn_id":"u"},'
    '{"action":"mask","replacement":{"content":"stub \u00e9\u4e2d","token_estimate":4},'
    '"summary_group":null,"turn_id":"t"}],'
    '"budget_unmet":false,"estimator_ratio":4.0,"policy_name":"hand_built",'
    '"policy_version":"1.2.3","summarization_requests":[],'
    '"tokens_after_estimate":14,"tokens_before":40}'
)


# A policy's plan: masking t (100 tokens -> its stub) brings 120 tokens within 60.
POLICY_TURNS = (
    TranscriptTurn("u", Role.USER, "question", 10),
    TranscriptTurn("a", Role.ASSISTANT, "call", 5, "c1"),
    TranscriptTurn("t", Role.TOOL, "x" * 400, 100, "c1"),
    TranscriptTurn("r", Role.ASSISTANT, "answer", 5),
)
POLICY_BUDGET = CompactionBudget(60, 1)


def policy_plan() -> CompactionPlan:
    """A fresh plan from a policy, its actions not read yet."""
    return ObservationMaskingPolicy(0).decide(Transcript(POLICY_TURNS), POLICY_BUDGET)


class TestActionsOfAPolicysPlan:
    """A policy's plan holds its actions as columns and makes ``actions`` on first read."""

    def test_actions_are_made_once_as_a_tuple_of_turn_actions(self) -> None:
        plan = policy_plan()
        actions = plan.actions
        assert type(actions) is tuple
        assert [type(action) for action in actions] == [TurnAction] * 4
        kinds = [action.action for action in actions]
        assert kinds == [Action.KEEP, Action.KEEP, Action.MASK, Action.KEEP]
        assert plan.actions is actions

    def test_equals_hashes_and_prints_like_the_plan_built_from_its_actions(self) -> None:
        made = rebuilt(policy_plan(), Transcript(POLICY_TURNS), POLICY_BUDGET)
        # Each comparison starts from a plan whose actions were not read yet.
        assert policy_plan() == made
        assert hash(policy_plan()) == hash(made)
        assert repr(policy_plan()) == repr(made)
        assert policy_plan().to_json() == made.to_json()

    def test_survives_pickle_and_deepcopy_before_and_after_actions_are_read(self) -> None:
        for read in (False, True):
            plan = policy_plan()
            if read:
                assert len(plan.actions) == 4
            for twin in (pickle.loads(pickle.dumps(plan)), copy.deepcopy(plan)):  # noqa: S301 - our own bytes
                assert twin == plan
                assert twin.plan_hash() == plan.plan_hash()

    def test_another_missing_attribute_is_an_ordinary_attribute_error(self) -> None:
        plan = policy_plan()
        with pytest.raises(AttributeError, match="no attribute 'acts'") as caught:
            _ = plan.acts  # type: ignore[attr-defined]
        assert caught.value.name == "acts"
        assert caught.value.obj is plan


SPAN = "span-" + sha256_of("u\0t")[:16]
"""The group id the built-in policies would give the span (u, t)."""


def summarized_plan() -> CompactionPlan:
    """A hand-built plan that folds ``u`` and ``t`` into one summary group."""
    return CompactionPlan(
        actions=(
            TurnAction("u", Action.SUMMARIZE, SPAN),
            TurnAction("t", Action.SUMMARIZE, SPAN),
        ),
        summarization_requests=(SummarizationRequest(SPAN, ("u", "t"), 6, "recap"),),
        tokens_before=40,
        tokens_after_estimate=6,
        policy_name="hand_built",
        policy_version="1.0.0",
        transcript=TRANSCRIPT,
        budget=BUDGET,
    )


class TestCompactionPlanSerialization:
    def test_to_dict_is_plain_json_data(self) -> None:
        data = masked_plan().to_dict()
        assert is_plain_json(data)
        assert json.loads(json.dumps(data)) == data

    def test_to_dict_is_made_of_the_actions_and_requests_own_pieces(self) -> None:
        summarized = summarized_plan()
        for plan in (masked_plan(), policy_plan(), summarized):
            data = plan.to_dict()
            assert data["actions"] == [action.to_dict() for action in plan.actions]
            assert data["summarization_requests"] == [
                request.to_dict() for request in plan.summarization_requests
            ]
            assert plan.to_json() == canonical_json(data)

    def test_to_dict_holds_every_field_and_the_requests(self) -> None:
        group = SPAN
        plan = summarized_plan()
        assert plan.to_dict() == {
            "actions": [
                {
                    "turn_id": "u",
                    "action": "summarize",
                    "summary_group": group,
                    "replacement": None,
                },
                {
                    "turn_id": "t",
                    "action": "summarize",
                    "summary_group": group,
                    "replacement": None,
                },
            ],
            "summarization_requests": [
                {
                    "group_id": group,
                    "turn_ids": ["u", "t"],
                    "target_tokens": 6,
                    "prompt_id": "recap",
                }
            ],
            "tokens_before": 40,
            "tokens_after_estimate": 6,
            "policy_name": "hand_built",
            "policy_version": "1.0.0",
            "estimator_ratio": None,
            "budget_unmet": False,
        }

    def test_to_json_is_canonical(self) -> None:
        text = masked_plan().to_json()
        assert text == EXPECTED_JSON
        assert "\u4e2d" in text
        assert "\\u" not in text
        assert ": " not in text
        assert ", " not in text
        assert "\n" not in text

    def test_plan_hash_and_canonical_json_are_methods_as_in_0_1(self) -> None:
        plan = masked_plan()
        assert callable(plan.plan_hash)
        assert plan.canonical_json() == plan.to_json()
        assert plan.plan_hash() == hashlib.sha256(plan.canonical_json().encode()).hexdigest()

    def test_plan_hash_is_the_sha256_of_the_utf8_canonical_json(self) -> None:
        plan = masked_plan()
        expected = hashlib.sha256(EXPECTED_JSON.encode("utf-8")).hexdigest()
        assert plan.plan_hash() == expected
        assert plan.plan_hash() == expected  # the cached value agrees with the first
        assert plan.plan_hash() == hashlib.sha256(plan.to_json().encode()).hexdigest()

    def test_different_plans_hash_differently_and_equal_plans_alike(self) -> None:
        assert masked_plan().plan_hash() == masked_plan().plan_hash()
        assert masked_plan().plan_hash() != masked_plan(policy_version="1.2.4").plan_hash()

    def test_estimator_name_appears_only_when_set(self) -> None:
        assert "estimator_name" not in masked_plan().to_dict()
        named = masked_plan(estimator_ratio=None, estimator_name="tiktoken:o200k_base")
        assert named.to_dict()["estimator_name"] == "tiktoken:o200k_base"
        assert '"estimator_name":"tiktoken:o200k_base"' in named.to_json()
        assert named.plan_hash() != masked_plan(estimator_ratio=None).plan_hash()

    def test_plan_hash_is_identical_in_processes_with_other_hash_seeds(self) -> None:
        script = textwrap.dedent(
            """
            from baseaicore import sha256_of
            from cutctx import (Action, CompactionBudget, CompactionPlan, Role,
                SummarizationRequest, Transcript, TranscriptTurn, TurnAction, TurnReplacement)
            ids = ("a", "b", "c", "d")
            t = Transcript(tuple(TranscriptTurn(i, Role.TOOL, "x", 10, "call-" + i) for i in ids))
            g = "span-" + sha256_of("a\\0b")[:16]
            plan = CompactionPlan(
                actions=(TurnAction("a", Action.SUMMARIZE, g),
                 TurnAction("b", Action.SUMMARIZE, g),
                 TurnAction("c", Action.MASK, None, TurnReplacement("\\u00e9 stub", 2)),
                 TurnAction("d", Action.KEEP)),
                summarization_requests=(SummarizationRequest(g, ("a", "b"), 3, "recap"),),
                tokens_before=40, tokens_after_estimate=15, policy_name="p",
                policy_version="1", estimator_ratio=4.0, budget_unmet=False,
                transcript=t, budget=CompactionBudget(20, 1))
            print(plan.plan_hash())
            """
        )
        namespace: dict[str, Any] = {}
        hashes = set()
        for seed in ("1", "2", "4242"):
            env = {**os.environ, "PYTHONHASHSEED": seed}
            done = subprocess.run(  # noqa: S603 - our own interpreter and script
                [sys.executable, "-c", script],
                capture_output=True,
                text=True,
                check=True,
                env=env,
                timeout=60,
            )
            hashes.add(done.stdout.strip())
        exec(script.replace("print(plan.plan_hash())", ""), namespace)  # noqa: S102 - our own script
        assert hashes == {namespace["plan"].plan_hash()}
        assert len(next(iter(hashes))) == 64


@st.composite
def awkward_plans(draw: st.DrawFn) -> CompactionPlan:
    """Hand-built plans over TOOL turns whose ids, stubs, prompt ids, policy names and estimator
    names are arbitrary text (quotes, backslashes, control characters, non-ASCII)."""
    # Ids and prompt ids are names: blank ones are refused (as in 0.1), any other text goes.
    names = st.text(min_size=1).filter(lambda text: not text.isspace())
    ids = draw(st.lists(names, min_size=1, max_size=8, unique=True))
    turns = tuple(TranscriptTurn(i, Role.TOOL, "body", 50, f"call-{n}") for n, i in enumerate(ids))
    # An excerpt must be one of its original's excerpts: the excerpt tests cover its text.
    choices = [action for action in Action if action is not Action.EXCERPT]
    kinds = draw(st.lists(st.sampled_from(choices), min_size=len(ids), max_size=len(ids)))
    stubs = draw(st.lists(st.text(), min_size=len(ids), max_size=len(ids)))
    summarized = tuple(i for i, kind in zip(ids, kinds, strict=True) if kind is Action.SUMMARIZE)
    group_id = "span-" + sha256_of("\0".join(summarized))[:16]
    actions = []
    after = 0
    for turn_id, kind, stub in zip(ids, kinds, stubs, strict=True):
        if kind is Action.MASK:
            actions.append(TurnAction(turn_id, kind, None, TurnReplacement(stub, 7)))
            after += 7
        elif kind is Action.SUMMARIZE:
            actions.append(TurnAction(turn_id, kind, group_id))
        else:
            actions.append(TurnAction(turn_id, kind))
            after += 50 if kind is Action.KEEP else 0
    requests: tuple[SummarizationRequest, ...] = ()
    if summarized:
        requests = (SummarizationRequest(group_id, summarized, 3, draw(names)),)
        after += 3
    return CompactionPlan(
        actions=tuple(actions),
        summarization_requests=requests,
        tokens_before=50 * len(ids),
        tokens_after_estimate=after,
        policy_name=draw(st.text(min_size=1)),
        policy_version=draw(st.text(min_size=1)),
        estimator_ratio=draw(st.none() | st.floats(0.001, 100.0)),
        budget_unmet=after > 10_000,
        transcript=Transcript(turns),
        budget=CompactionBudget(10_000, 0),
        estimator_name=draw(st.none() | st.text(min_size=1)),
    )


@given(plan=awkward_plans())
def test_to_json_is_the_canonical_json_of_to_dict_for_any_text(plan: CompactionPlan) -> None:
    """Catches a ``to_json`` (which formats the actions itself, for speed) that differs by a
    byte from ``canonical_json(plan.to_dict())`` on any turn id, stub, prompt id or name — an
    escaping, key-order or number-format slip would change every plan hash."""
    assert plan.to_json() == canonical_json(plan.to_dict())
    assert json.loads(plan.to_json()) == plan.to_dict()


def test_a_plan_longer_than_one_piece_hashes_its_whole_canonical_json() -> None:
    """``plan_hash`` digests the canonical JSON a bounded number of actions at a time; across
    piece boundaries it must still be the SHA-256 of ``canonical_json(to_dict())``."""
    turns = [TranscriptTurn("u", Role.USER, "task", 5, pinned=True)]
    for n in range(1_300):  # 2 601 turns: three pieces of actions
        turns.append(TranscriptTurn(f"a{n}", Role.ASSISTANT, "call", 3, f"c{n}"))
        turns.append(TranscriptTurn(f"t{n}", Role.TOOL, "x" * 400, 100, f"c{n}"))
    plan = ObservationMaskingPolicy().decide(Transcript(tuple(turns)), CompactionBudget(60_000, 2))
    assert len(plan.actions) > 2 * 1024
    assert {action.action for action in plan.actions} == {Action.KEEP, Action.MASK}
    expected = canonical_json(plan.to_dict())
    assert plan.to_json() == expected
    assert plan.plan_hash() == hashlib.sha256(expected.encode("utf-8")).hexdigest()


@pytest.mark.parametrize(
    "placeholder", ["[masked]", 'say "masked"', "back\\slash", "line\nbreak", "é 中 \x7f"]
)
def test_stubs_are_written_as_canonical_json_whatever_their_label(placeholder: str) -> None:
    """A stub whose label needs no JSON escape is written without escaping (a shortcut); any
    other label goes through the encoder. Either way the text is ``canonical_json``'s."""
    plan = ObservationMaskingPolicy(0, placeholder).decide(Transcript(POLICY_TURNS), POLICY_BUDGET)
    assert any(action.action is Action.MASK for action in plan.actions)
    assert plan.to_json() == canonical_json(plan.to_dict())
    assert plan.plan_hash() == hashlib.sha256(plan.to_json().encode("utf-8")).hexdigest()


def test_an_excerpt_is_written_as_canonical_json_whatever_its_text() -> None:
    """An excerpt holds the result's own lines (quotes, backslashes, control characters,
    non-ASCII): it is never written by the stubs' no-escape shortcut."""
    body = "".join(f'line {n}: "quoted" back\\slash \x01 é中 \t\n' for n in range(200))
    transcript = Transcript((TranscriptTurn("r", Role.TOOL, body, math.ceil(len(body) / 4), "c"),))
    budget = CompactionBudget(10_000, 1, max_result_tokens=200)
    plan = ExcerptingPolicy().decide(transcript, budget)
    assert plan.actions[0].action is Action.EXCERPT
    assert plan.to_json() == canonical_json(plan.to_dict())
    assert plan.plan_hash() == hashlib.sha256(plan.to_json().encode("utf-8")).hexdigest()
    back = CompactionPlan.from_json(plan.to_json(), transcript=transcript, budget=budget)
    assert back == plan
    assert back.plan_hash() == plan.plan_hash()
