"""Every built-in policy is rebuilt from its record: the window's own default and its members too.

The classes are found in the code (every concrete policy class the modules of
``cutctx._policies`` define), not in a list kept beside it, so a new policy that no record can
rebuild fails here.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

import cutctx._policies
from cutctx import (
    BoundedSummarizingPolicy,
    CharRatioEstimator,
    CompactionBudget,
    CompactionRecord,
    ContextWindow,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    PriorityPolicy,
    Role,
    SummarizingPolicy,
    TextEstimator,
    Transcript,
    TranscriptTurn,
    default_chain,
    default_messages_policy,
    verify,
)
from cutctx._audit.policies import BUILTINS, ROWS, Config, NotRebuildable, describe, rebuild
from cutctx._core.metadata import KIND_METADATA, MASKED_KIND
from cutctx._policies.draft import BuiltinPolicy
from cutctx._policies.large import LargeResultMaskingPolicy
from cutctx._policies.stubs import INDEX_PROMPT_ID, StubDroppingPolicy

if TYPE_CHECKING:
    from cutctx import CompactionPlan, CompactionPolicy

TEXT = TextEstimator()
_STUB = "[tool result masked by cutctx] (original: 300 tokens, sha256:{digest})"


def policy_classes_in_the_code() -> set[type[Any]]:
    """Every concrete policy class found in a module of ``cutctx._policies``.

    (The public classes name ``cutctx`` as their module, so a class is found wherever a module
    holds it: the set is the same.)
    """
    found: set[type[Any]] = set()
    for module_info in pkgutil.iter_modules(cutctx._policies.__path__):
        module = importlib.import_module(f"cutctx._policies.{module_info.name}")
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BuiltinPolicy) and not inspect.isabstract(value):
                found.add(value)
    return found


def agent_run(exchanges: int = 40, masked: int = 16) -> Transcript:
    """A system prompt, the task, then calls and results; the oldest ``masked`` are stubs."""
    turns = [
        TranscriptTurn("s", Role.SYSTEM, "You are a build assistant.", 10),
        TranscriptTurn("u", Role.USER, "Why is CI slow? " * 10, 40),
    ]
    for n in range(exchanges):
        turns.append(TranscriptTurn(f"a{n}", Role.ASSISTANT, f"Reading log {n}.", 8, f"c{n}"))
        if n < masked:
            stub = _STUB.format(digest=f"{n:064x}")
            turns.append(
                TranscriptTurn(
                    f"t{n}", Role.TOOL, stub, 30, f"c{n}", metadata={KIND_METADATA: MASKED_KIND}
                )
            )
        else:
            body = "".join(f"log {n} line {k}: cache miss\n" for k in range(40))
            turns.append(TranscriptTurn(f"t{n}", Role.TOOL, body, 300 + 10 * n, f"c{n}"))
    turns.append(TranscriptTurn("u9", Role.USER, "Fix it.", 5))
    return Transcript(tuple(turns))


RUN = agent_run()
BUDGET = CompactionBudget(3000, protected_recent_turns=2)
CAPPED = CompactionBudget(6000, protected_recent_turns=2, max_result_tokens=200)

SAMPLES: dict[str, CompactionPolicy] = {
    "observation_masking": ObservationMaskingPolicy(1, estimator=TEXT),
    "observation_masking, characters": ObservationMaskingPolicy(
        0, "[gone]", estimator=CharRatioEstimator(3.0), exclude_tools=("x",), min_reclaim=50
    ),
    "large_result_masking": LargeResultMaskingPolicy(0, estimator=TEXT),
    "summarizing": SummarizingPolicy("p", 0.5, 2),
    "bounded_summarizing": BoundedSummarizingPolicy("p", max_input_tokens=400),
    "priority": PriorityPolicy(mask_results=True, keep_recent_results=1, estimator=TEXT),
    "drop_oldest": DropOldestPolicy(),
    "excerpting": ExcerptingPolicy(estimator=TEXT, recall_tool="cutctx_recall"),
    "stub_dropping": StubDroppingPolicy(),
    "stub_dropping, indexed": StubDroppingPolicy(index=True, estimator=TEXT),
    "default_chain": default_chain(prompt_id="summaries/v1"),
    "messages default, version 1": default_messages_policy(estimator=TEXT),
    "messages default, version 2": default_messages_policy(version=2, estimator=TEXT),
    "messages default, version 2, recall index": default_messages_policy(
        version=2, recall_index=True, estimator=TEXT, summarize=True, max_result_tokens=200
    ),
    "messages default, version 3": default_messages_policy(version=3, estimator=TEXT),
    "messages default, version 4": default_messages_policy(version=4, estimator=TEXT),
    "nested chain": PolicyChain((PolicyChain((StubDroppingPolicy(),)), DropOldestPolicy())),
}


def recorded(policy: CompactionPolicy, budget: CompactionBudget) -> CompactionRecord:
    """The record of ``policy``'s plan for ``RUN``, through its JSON."""
    plan = policy.decide(RUN, budget)
    record = CompactionRecord.of(plan, RUN, budget, policy)
    return CompactionRecord.from_dict(json.loads(json.dumps(record.to_dict())))


def budget_for(policy: CompactionPolicy) -> CompactionBudget:
    return CAPPED if "excerpting" in policy.name else BUDGET


class TestEveryBuiltInPolicyRebuilds:
    def test_every_policy_class_in_the_code_is_a_built_in_with_a_row(self) -> None:
        classes = policy_classes_in_the_code()
        assert LargeResultMaskingPolicy in classes  # the walk finds subclasses too
        assert classes == set(BUILTINS)
        assert {row.kind for row in ROWS} == classes
        # a chain's versions share its name: PolicyChain 1.0.0, FloorChain 1.1.0, RoomChain 1.2.0
        assert len({(row.name, row.kind._VERSION) for row in ROWS}) == len(ROWS)

    def test_every_policy_class_in_the_code_has_a_sample_here(self) -> None:
        """So the tests below cover every class the code defines."""
        sampled: set[type[Any]] = set()

        def walk(policy: CompactionPolicy) -> None:
            sampled.add(type(policy))
            if isinstance(policy, PolicyChain):
                for member in policy.policies:
                    walk(member)

        for policy in SAMPLES.values():
            walk(policy)
        assert policy_classes_in_the_code() <= sampled

    @pytest.mark.parametrize("key", sorted(SAMPLES))
    def test_a_record_of_each_built_in_policy_verifies_without_the_policy(self, key: str) -> None:
        policy = SAMPLES[key]
        budget = budget_for(policy)
        record = recorded(policy, budget)
        assert verify(record, RUN).ok, verify(record, RUN).differences
        entry = describe(policy)
        made = rebuild(entry["name"], entry["config"], version=entry["version"])
        assert type(made) is type(policy)
        assert describe(made) == entry

    @pytest.mark.parametrize("key", sorted(SAMPLES))
    def test_a_tampered_record_of_each_built_in_policy_fails(self, key: str) -> None:
        policy = SAMPLES[key]
        data = recorded(policy, budget_for(policy)).to_dict()
        data["budget"]["max_tokens"] += 1
        outcome = verify(CompactionRecord.from_dict(data), RUN)
        assert not outcome.ok
        assert "budget was edited" in outcome.differences[0]
        other = agent_run(exchanges=41)
        assert not verify(recorded(policy, budget_for(policy)), other).ok


class TestTheWindowsPolicyVerifies:
    @pytest.mark.parametrize("recall", [False, True])
    def test_a_record_of_a_plan_by_window_policy_verifies(self, recall: bool) -> None:
        window = ContextWindow("openai_chat", max_tokens=4000, recall=recall)
        policy = window.policy
        assert policy.name.startswith("chain(stub_dropping@1.0.0+large_result_masking@1.0.0")
        plan: CompactionPlan = policy.decide(RUN, BUDGET)
        # The members act: stubbed exchanges leave (folded into an index with recall), and
        # large old results are masked.
        indexed = [r for r in plan.summarization_requests if r.prompt_id == INDEX_PROMPT_ID]
        assert bool(indexed) is recall
        assert plan.to_dict()["actions"][3]["action"] == ("summarize" if recall else "drop")
        record = CompactionRecord.of(plan, RUN, BUDGET, policy)
        assert verify(record, RUN).ok, verify(record, RUN).differences
        stored = CompactionRecord.from_dict(json.loads(json.dumps(record.to_dict())))
        assert verify(stored, RUN).ok

    @pytest.mark.parametrize("recall", [False, True])
    def test_a_tampered_record_of_the_windows_policy_fails(self, recall: bool) -> None:
        policy = ContextWindow("openai_chat", max_tokens=4000, recall=recall).policy
        data = CompactionRecord.of(policy.decide(RUN, BUDGET), RUN, BUDGET, policy).to_dict()
        members = data["policy"]["config"]["policies"]
        assert members[0]["name"] == "stub_dropping"
        members[0]["config"]["index"] = not recall  # the other recall: another plan
        outcome = verify(CompactionRecord.from_dict(data), RUN)
        assert not outcome.ok
        assert outcome.differences[0] == (
            "the record's policy (name, version or configuration) was edited after it was made "
            "(its seal differs)"
        )
        assert any(d.startswith("the actions differ") for d in outcome.differences)


class TestEstimatorsAsData:
    def test_the_text_estimator_is_rebuilt_by_its_versioned_name(self) -> None:
        config = describe(ObservationMaskingPolicy(estimator=TEXT))["config"]
        assert config["estimator"] == {"name": TextEstimator.name}
        made = rebuild("observation_masking", config)
        assert isinstance(made, ObservationMaskingPolicy)
        assert type(made.estimator) is TextEstimator

    def test_another_name_or_an_unknown_key_beside_the_name_is_refused(self) -> None:
        config = describe(ObservationMaskingPolicy(estimator=TEXT))["config"]
        with pytest.raises(NotRebuildable, match="'text/0' is not data"):
            rebuild("observation_masking", {**config, "estimator": {"name": "text/0"}})
        extra = {**config, "estimator": {"name": TextEstimator.name, "x": 1}}
        with pytest.raises(ValidationError, match=r"policy\.config\.estimator holds the unknown"):
            rebuild("observation_masking", extra)

    def test_a_reader_without_a_member_rebuilder_cannot_read_members(self) -> None:
        with pytest.raises(NotRebuildable, match="no way to rebuild a member"):
            Config({"policies": []}, "policy.config").policies("policies")

    @pytest.mark.parametrize(
        ("name", "config", "named"),
        [
            (
                "stub_dropping",
                {"index": 1, "estimator": {"chars_per_token": 4.0}},
                "policy.config.index must be true or false",
            ),
            (
                "observation_masking",
                {
                    "keep_recent_results": 1,
                    "placeholder": "x",
                    "estimator": {"chars_per_token": 4.0},
                    "exclude_tools": "memory",
                },
                "policy.config.exclude_tools must be a JSON array of strings",
            ),
        ],
    )
    def test_a_malformed_knob_of_a_window_member_names_its_key(
        self, name: str, config: dict[str, Any], named: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            rebuild(name, config)
        assert named in caught.value.message
