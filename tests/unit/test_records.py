"""CompactionRecord, verify and the policy table: a stored plan, re-derived and compared."""

from __future__ import annotations

import hashlib
import json
import math
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    BoundedSummarizingPolicy,
    CharRatioEstimator,
    CompactionBudget,
    CompactionPlan,
    CompactionRecord,
    DropOldestPolicy,
    ExcerptingPolicy,
    ObservationMaskingPolicy,
    PlanTranscriptMismatch,
    PolicyChain,
    PriorityPolicy,
    Role,
    SummarizingPolicy,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
    Verification,
    default_chain,
    verify,
)
from cutctx._audit.policies import Config, NotRebuildable, describe, policy_config, rebuild
from cutctx._audit.records import SEALED, transcript_digest
from cutctx._core.digest import canonical_json
from cutctx.formats import OPENAI_CHAT

if TYPE_CHECKING:
    from cutctx import CompactionPolicy

TRANSCRIPT = Transcript(
    (
        TranscriptTurn("s", Role.SYSTEM, "You are careful.", 5),
        TranscriptTurn("u1", Role.USER, "What changed?", 30),
        TranscriptTurn("a1", Role.ASSISTANT, "Let me look.", 20, tool_call_id="c1"),
        TranscriptTurn("t1", Role.TOOL, "log line\n" * 200, 500, tool_call_id="c1"),
        TranscriptTurn(
            "u2", Role.USER, "Tests? \u00e9\u4e2d", 40, pinned=True, metadata={"k": "v"}
        ),
        TranscriptTurn("a2", Role.ASSISTANT, "Running.", 20, tool_call_id="c2"),
        TranscriptTurn("t2", Role.TOOL, "ok " * 300, 300, tool_call_id="c2"),
        TranscriptTurn("a3", Role.ASSISTANT, "All green.", 10),
    )
)
BUDGET = CompactionBudget(300, protected_recent_turns=1)
WORDS = TokenizerEstimator(lambda text: [0] * len(text.split()), name="words")


class Custom:
    """A policy of the caller's own (no row in the table): drop-oldest under another name."""

    name = "mine"
    version = "0.0.1"

    def decide(self, transcript: Transcript, budget: CompactionBudget) -> CompactionPlan:
        plan = DropOldestPolicy().decide(transcript, budget)
        return CompactionPlan(
            actions=plan.actions,
            summarization_requests=plan.summarization_requests,
            tokens_before=plan.tokens_before,
            tokens_after_estimate=plan.tokens_after_estimate,
            policy_name=self.name,
            policy_version=self.version,
            estimator_ratio=plan.estimator_ratio,
            budget_unmet=plan.budget_unmet,
            transcript=transcript,
            budget=budget,
        )


BUILT_IN: list[CompactionPolicy] = [
    DropOldestPolicy(),
    ObservationMaskingPolicy(0),
    ObservationMaskingPolicy(1, "[gone]", estimator=CharRatioEstimator(3.0)),
    SummarizingPolicy("p", 0.5, 2),
    default_chain(prompt_id="summaries/v1", min_span_turns=2),
    PolicyChain((SummarizingPolicy("p", min_span_turns=2), DropOldestPolicy())),
    PolicyChain((PolicyChain((ObservationMaskingPolicy(0),)), DropOldestPolicy())),
    ObservationMaskingPolicy(0, exclude_tools=("memory",), min_reclaim=100),
    PriorityPolicy(mask_results=True, keep_recent_results=1),
    PolicyChain((BoundedSummarizingPolicy("p", max_input_tokens=400), DropOldestPolicy())),
    ExcerptingPolicy(recall_tool="cutctx_recall"),
    PolicyChain((ExcerptingPolicy(), ObservationMaskingPolicy(0), DropOldestPolicy())),
]
CAPPED = CompactionBudget(400, protected_recent_turns=2, max_result_tokens=100)


def record_of(
    policy: CompactionPolicy, budget: CompactionBudget = BUDGET, **fields: Any
) -> CompactionRecord:
    return CompactionRecord.of(
        policy.decide(TRANSCRIPT, budget), TRANSCRIPT, budget, policy, **fields
    )


def edited(record: CompactionRecord, change: Any) -> CompactionRecord:
    """The record read back from its JSON after ``change`` edited that JSON."""
    data = json.loads(json.dumps(record.to_dict()))
    change(data)
    return CompactionRecord.from_dict(data)


def oracle_digest(transcript: Transcript) -> str:
    """The transcript digest restated from docs/records.md: every field, the body by its digest."""
    turns = [
        {
            "turn_id": t.turn_id,
            "role": t.role.value,
            "content_sha256": hashlib.sha256(
                t.content.encode("utf-8", "surrogatepass")
            ).hexdigest(),
            "token_estimate": t.token_estimate,
            "tool_call_id": t.tool_call_id,
            "pinned": t.pinned,
            "metadata": dict(t.metadata),
        }
        for t in transcript.turns
    ]
    text = json.dumps(turns, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # A lone surrogate: as its JSON escape in the JSON text (json.dumps with ensure_ascii).
    return hashlib.sha256(text.encode("utf-8", "backslashreplace")).hexdigest()


class TestTranscriptDigest:
    def test_it_is_the_sha256_of_the_canonical_json_of_every_field_with_the_body_digested(
        self,
    ) -> None:
        assert transcript_digest(TRANSCRIPT) == oracle_digest(TRANSCRIPT)
        assert transcript_digest(Transcript(())) == oracle_digest(Transcript(()))

    def test_ids_and_metadata_that_json_escapes_are_written_as_json_dumps_writes_them(
        self,
    ) -> None:
        awkward = Transcript(
            (
                TranscriptTurn('q"\\\u00e9\n\u2028', Role.TOOL, "", 0, 'c"1', pinned=True),
                TranscriptTurn(
                    "m", Role.USER, "x", 1, metadata={"z": 'a"\tb', "a": "\u4e2d", "": ""}
                ),
            )
        )
        assert transcript_digest(awkward) == oracle_digest(awkward)

    def test_lone_surrogates_are_digested_without_an_error_and_apart_from_their_escapes(
        self,
    ) -> None:
        lone = Transcript(
            (TranscriptTurn("\ud800", Role.USER, "a\udfffb" * 3000, 1, metadata={"k": "\ud801"}),)
        )
        escaped = Transcript(
            (
                TranscriptTurn(
                    "\\ud800", Role.USER, "a\\udfffb" * 3000, 1, metadata={"k": "\\ud801"}
                ),
            )
        )
        assert transcript_digest(lone) == oracle_digest(lone)
        assert transcript_digest(escaped) == oracle_digest(escaped)
        assert transcript_digest(lone) != transcript_digest(escaped)

    @pytest.mark.parametrize(
        "change",
        [
            {"turn_id": "u9"},
            {"role": Role.ASSISTANT},
            {"content": "What changed?!"},
            {"token_estimate": 31},
            {"tool_call_id": "c9"},
            {"pinned": True},
            {"metadata": {"k": "w"}},
        ],
    )
    def test_a_change_to_any_field_of_a_turn_changes_it(self, change: dict[str, Any]) -> None:
        turn = TRANSCRIPT.turns[1]
        fields = {
            "turn_id": turn.turn_id,
            "role": turn.role,
            "content": turn.content,
            "token_estimate": turn.token_estimate,
            "tool_call_id": turn.tool_call_id,
            "pinned": turn.pinned,
            "metadata": dict(turn.metadata),
        }
        fields.update(change)
        changed = TranscriptTurn(**fields)  # type: ignore[arg-type]
        other = Transcript((TRANSCRIPT.turns[0], changed, *TRANSCRIPT.turns[2:]))
        assert transcript_digest(other) != transcript_digest(TRANSCRIPT)


class TestCompactionRecordOf:
    def test_it_holds_the_plan_its_hash_the_budget_the_policy_and_the_digest(self) -> None:
        policy = default_chain(prompt_id="summaries/v1", min_span_turns=2)
        plan = policy.decide(TRANSCRIPT, BUDGET)
        record = CompactionRecord.of(plan, TRANSCRIPT, BUDGET, policy, format="anthropic")
        assert record.schema_version == 1
        assert dict(record.to_dict()["plan"]) == plan.to_dict()
        assert canonical_json(record.to_dict()["plan"]) == plan.canonical_json()  # byte identical
        assert record.plan_hash == plan.plan_hash()
        assert record.budget == BUDGET
        assert (record.policy_name, record.policy_version) == (policy.name, policy.version)
        assert record.transcript_digest == oracle_digest(TRANSCRIPT)
        assert (record.format, record.tokenizer, record.keep_first, record.system_digest) == (
            "anthropic",
            None,
            None,
            None,
        )

    def test_the_chain_configuration_names_every_member(self) -> None:
        record = record_of(default_chain(prompt_id="summaries/v1", min_span_turns=2))
        assert record.to_dict()["policy"]["config"] == {
            "policies": [
                {
                    "name": "observation_masking",
                    "version": "1.0.0",
                    "config": {
                        "keep_recent_results": 2,
                        "placeholder": "[tool result masked by cutctx]",
                        "estimator": {"chars_per_token": 4.0},
                        "exclude_tools": [],
                        "min_reclaim": 0,
                    },
                },
                {
                    "name": "summarizing",
                    "version": "1.0.0",
                    "config": {
                        "prompt_id": "summaries/v1",
                        "target_ratio": 0.2,
                        "min_span_turns": 2,
                    },
                },
                {"name": "drop_oldest", "version": "1.0.0", "config": {}},
            ]
        }

    def test_the_newer_policies_and_knobs_are_named_in_full(self) -> None:
        masking = record_of(ObservationMaskingPolicy(0, exclude_tools=("memory",), min_reclaim=9))
        assert masking.to_dict()["policy"]["config"]["exclude_tools"] == ["memory"]
        assert masking.to_dict()["policy"]["config"]["min_reclaim"] == 9
        priority = record_of(PriorityPolicy(mask_results=True))
        assert priority.to_dict()["policy"]["config"] == {
            "mask_results": True,
            "keep_recent_results": 0,
            "placeholder": "[tool result masked by cutctx]",
            "estimator": {"chars_per_token": 4.0},
        }
        bounded = record_of(BoundedSummarizingPolicy("p", max_input_tokens=400))
        assert bounded.to_dict()["policy"]["config"] == {
            "prompt_id": "p",
            "max_input_tokens": 400,
            "target_ratio": 0.2,
        }

    def test_a_masking_configuration_without_the_newer_knobs_rebuilds_with_defaults(self) -> None:
        config = {"keep_recent_results": 1, "placeholder": "x", "estimator": {"chars_per_token": 4}}
        made = rebuild("observation_masking", config)
        assert isinstance(made, ObservationMaskingPolicy)
        assert (made.exclude_tools, made.min_reclaim) == ((), 0)
        assert policy_config(made) == {**config, "exclude_tools": [], "min_reclaim": 0}

    def test_the_plan_and_configuration_are_read_only(self) -> None:
        record = record_of(ObservationMaskingPolicy(0))
        with pytest.raises(TypeError):
            record.plan["budget_unmet"] = True  # type: ignore[index]
        assert record.policy_config is not None
        with pytest.raises(TypeError):
            record.policy_config["placeholder"] = "x"  # type: ignore[index]
        assert isinstance(record.plan["actions"], tuple)

    def test_a_plan_for_another_transcript_is_refused(self) -> None:
        policy = DropOldestPolicy()
        plan = policy.decide(TRANSCRIPT, BUDGET)
        other = Transcript(TRANSCRIPT.turns[:-1])
        with pytest.raises(PlanTranscriptMismatch):
            CompactionRecord.of(plan, other, BUDGET, policy)

    def test_a_plan_that_does_not_hold_under_the_budget_is_refused(self) -> None:
        policy = DropOldestPolicy()
        plan = policy.decide(TRANSCRIPT, BUDGET)
        with pytest.raises(ValidationError, match="invariant"):
            CompactionRecord.of(plan, TRANSCRIPT, CompactionBudget(400, 3), policy)

    def test_a_plan_made_by_another_policy_is_refused(self) -> None:
        plan = DropOldestPolicy().decide(TRANSCRIPT, BUDGET)
        with pytest.raises(ValidationError, match=r"made by drop_oldest@1\.0\.0"):
            CompactionRecord.of(plan, TRANSCRIPT, BUDGET, ObservationMaskingPolicy())

    @pytest.mark.parametrize("position", range(4))
    def test_arguments_of_the_wrong_type_are_refused(self, position: int) -> None:
        policy = DropOldestPolicy()
        arguments: list[Any] = [policy.decide(TRANSCRIPT, BUDGET), TRANSCRIPT, BUDGET, policy]
        arguments[position] = "nonsense"
        with pytest.raises(ValidationError, match=r"CompactionRecord\.of"):
            CompactionRecord.of(*arguments)

    def test_the_command_line_fields_are_checked(self) -> None:
        with pytest.raises(ValidationError, match="keep_first"):
            record_of(DropOldestPolicy(), keep_first=-1)
        with pytest.raises(ValidationError, match="system_digest"):
            record_of(DropOldestPolicy(), system_digest="abc")
        with pytest.raises(ValidationError, match="format"):
            record_of(DropOldestPolicy(), format="")
        digest = hashlib.sha256(b"You are careful.").hexdigest()
        record = record_of(
            DropOldestPolicy(), tokenizer="chars", keep_first=1, system_digest=digest
        )
        assert (record.tokenizer, record.keep_first, record.system_digest) == ("chars", 1, digest)


class TestToDictAndFromDict:
    @pytest.mark.parametrize("policy", BUILT_IN, ids=lambda p: p.name)
    def test_a_record_read_back_from_its_json_is_equal(self, policy: CompactionPolicy) -> None:
        record = record_of(policy, format="openai_chat", tokenizer="chars", keep_first=0)
        text = json.dumps(record.to_dict())
        back = CompactionRecord.from_dict(json.loads(text))
        assert back == record
        assert back.to_dict() == record.to_dict()

    def test_to_dict_is_plain_json_with_every_key(self) -> None:
        data = record_of(DropOldestPolicy()).to_dict()
        assert set(data) == {"schema_version", "plan", "plan_hash", "seal", *SEALED}
        assert json.loads(json.dumps(data)) == data
        assert isinstance(data["plan"], dict)
        assert isinstance(data["plan"]["actions"], list)

    def test_to_dict_is_a_fresh_copy(self) -> None:
        record = record_of(DropOldestPolicy())
        data = record.to_dict()
        data["plan"]["actions"].clear()
        data["policy"]["name"] = "x"
        assert record.to_dict()["plan"]["actions"]
        assert record.policy_name == "drop_oldest"

    def test_a_record_built_directly_is_sealed_as_it_is_made(self) -> None:
        record = record_of(DropOldestPolicy())
        again = CompactionRecord(
            1,
            record.to_dict()["plan"],
            record.plan_hash,
            record.budget,
            record.policy_name,
            record.policy_version,
            {},
            record.transcript_digest,
        )
        assert again == record
        assert verify(again, TRANSCRIPT).ok

    @pytest.mark.parametrize(
        ("change", "named"),
        [
            (lambda d: d.pop("plan"), "record lacks the key 'plan'"),
            (lambda d: d.update(extra=1), "record holds the unknown key 'extra'"),
            (lambda d: d.update(schema_version=2), "schema_version 2 is not supported"),
            (lambda d: d.update(schema_version=True), "schema_version True is not supported"),
            (lambda d: d.update(plan=[]), "CompactionRecord.plan must be a JSON object"),
            (lambda d: d["plan"].update(x=math.nan), "CompactionRecord.plan.x must be a finite"),
            (lambda d: d["plan"].update(x={1: 2}), "CompactionRecord.plan.x must be an object"),
            (lambda d: d["plan"].update(x={1, 2}), "CompactionRecord.plan.x must be JSON data"),
            (
                lambda d: d["plan"]["actions"][1].update(turn_id=[1, b"2"]),
                "CompactionRecord.plan.actions[1].turn_id[1] must be JSON data",
            ),
            (lambda d: d.update(plan_hash="ABC"), "plan_hash must be 64 lowercase hex digits"),
            (lambda d: d.update(budget=[]), "budget must be a JSON object"),
            (lambda d: d["budget"].pop("max_tokens"), "budget lacks the key 'max_tokens'"),
            (lambda d: d["budget"].update(max_tokens=-1), "CompactionBudget.max_tokens"),
            (lambda d: d["policy"].update(rest=1), "policy holds the unknown key 'rest'"),
            (lambda d: d["policy"].update(name=""), "CompactionRecord.policy_name"),
            (lambda d: d["policy"].update(config=[]), "policy_config must be a JSON object"),
            (lambda d: d.update(transcript_digest=None), "transcript_digest must be 64"),
            (lambda d: d.update(tokenizer=3), "CompactionRecord.tokenizer"),
            (lambda d: d.update(keep_first="1"), "CompactionRecord.keep_first"),
            (lambda d: d["seal"].pop("budget"), "seal must be a JSON object with the keys"),
            (lambda d: d.update(seal=None), "seal must be a JSON object with the keys"),
            (lambda d: d["seal"].update(budget="xyz"), "seal['budget'] must be 16 lowercase"),
        ],
    )
    def test_malformed_data_is_a_validation_error_naming_the_field(
        self, change: Any, named: str
    ) -> None:
        data = record_of(DropOldestPolicy()).to_dict()
        change(data)
        with pytest.raises(ValidationError) as caught:
            CompactionRecord.from_dict(data)
        assert named in caught.value.message

    def test_data_that_is_not_an_object_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="record must be a JSON object"):
            CompactionRecord.from_dict([])  # type: ignore[arg-type]

    def test_the_constructor_refuses_a_budget_that_is_not_a_budget(self) -> None:
        record = record_of(DropOldestPolicy())
        with pytest.raises(ValidationError, match=r"CompactionRecord\.budget must be"):
            CompactionRecord(
                1,
                record.to_dict()["plan"],
                record.plan_hash,
                {"max_tokens": 300},  # type: ignore[arg-type]
                record.policy_name,
                record.policy_version,
                {},
                record.transcript_digest,
            )

    def test_subclasses_of_json_scalars_are_kept_as_their_json(self) -> None:
        data = record_of(DropOldestPolicy()).to_dict()
        data["plan"]["policy_name"] = Role.USER  # a str enum: JSON writes its value
        record = CompactionRecord.from_dict(data)
        assert record.to_dict()["plan"]["policy_name"] == "user"


class TestVerify:
    @pytest.mark.parametrize("policy", BUILT_IN, ids=lambda p: p.name)
    @pytest.mark.parametrize(
        "budget", [BUDGET, CompactionBudget(10_000), CompactionBudget(400, 2), CAPPED], ids=str
    )
    def test_a_fresh_record_verifies(
        self, policy: CompactionPolicy, budget: CompactionBudget
    ) -> None:
        record = record_of(policy, budget)
        assert verify(record, TRANSCRIPT) == Verification(ok=True, differences=())
        assert verify(CompactionRecord.from_dict(record.to_dict()), TRANSCRIPT).ok

    def test_the_policies_used_here_mask_summarize_and_drop(self) -> None:
        actions = {
            action["action"]
            for policy in BUILT_IN
            for action in record_of(policy).to_dict()["plan"]["actions"]
        }
        assert actions == {"keep", "mask", "summarize", "drop"}

    def test_another_transcript_is_named(self) -> None:
        record = record_of(DropOldestPolicy())
        turns = list(TRANSCRIPT.turns)
        turns[1] = TranscriptTurn("u1", Role.USER, "What changed??", 30)
        result = verify(record, Transcript(tuple(turns)))
        assert not result.ok
        assert result.differences[0].startswith(
            "the transcript is not the one the record was made for"
        )
        assert len(result.differences) == 1  # the plan does not depend on that text

    def test_an_edited_plan_is_named_with_its_first_differing_turns(self) -> None:
        record = record_of(DropOldestPolicy())

        def keep_all(data: dict[str, Any]) -> None:
            for action in data["plan"]["actions"]:
                action["action"] = "keep"

        result = verify(edited(record, keep_all), TRANSCRIPT)
        assert result.differences[0] == "the record's plan_hash does not match its plan"
        assert result.differences[1] == (
            "the actions differ at 5 turn(s): 'u1' (keep in the record, drop re-derived), "
            "'a1' (keep in the record, drop re-derived), 't1' (keep in the record, drop "
            "re-derived) (+2 more)"
        )

    def test_an_edited_stub_is_named_on_its_turn(self) -> None:
        record = record_of(ObservationMaskingPolicy(0), CompactionBudget(400, 1))
        index = [a["action"] for a in record.to_dict()["plan"]["actions"]].index("mask")

        def restub(data: dict[str, Any]) -> None:
            data["plan"]["actions"][index]["replacement"]["content"] += "!"

        result = verify(edited(record, restub), TRANSCRIPT)
        assert "the actions differ at 1 turn(s): 't1' (mask (" in result.differences[1]

    def test_an_edited_excerpt_is_named_on_its_turn(self) -> None:
        record = record_of(ExcerptingPolicy(), CAPPED)
        index = [a["action"] for a in record.to_dict()["plan"]["actions"]].index("excerpt")

        def edit(data: dict[str, Any]) -> None:
            data["plan"]["actions"][index]["replacement"]["token_estimate"] -= 1

        result = verify(edited(record, edit), TRANSCRIPT)
        assert result.differences[1].startswith("the actions differ at 1 turn(s): 't1' (excerpt (")
        assert ", excerpt " in result.differences[1]

    def test_an_edited_figure_of_the_plan_is_named(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(
            edited(record, lambda d: d["plan"].update(tokens_after_estimate=1)), TRANSCRIPT
        )
        assert any(
            d.startswith("tokens_after_estimate differs: 1 in the record")
            for d in result.differences
        )

    def test_an_unknown_or_missing_plan_key_is_named(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(edited(record, lambda d: d["plan"].update(extra=1)), TRANSCRIPT)
        assert "the record's plan holds the unknown key 'extra'" in result.differences
        result = verify(edited(record, lambda d: d["plan"].pop("budget_unmet")), TRANSCRIPT)
        assert "the record's plan lacks 'budget_unmet'" in result.differences

    def test_a_plan_for_other_turns_is_named(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(edited(record, lambda d: d["plan"]["actions"].pop()), TRANSCRIPT)
        assert any(
            d.startswith("the record's plan is for other turns: 7 actions for 8 turns")
            for d in result.differences
        )
        result = verify(edited(record, lambda d: d["plan"].update(actions=3)), TRANSCRIPT)
        assert "the record's plan holds no list of actions" in result.differences

    def test_an_edited_plan_hash_is_named(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(edited(record, lambda d: d.update(plan_hash="0" * 64)), TRANSCRIPT)
        assert result.differences[0] == "the record's plan_hash does not match its plan"
        assert result.differences[-1].startswith("the plan hash differs: 000000000000…")

    def test_an_edited_budget_is_named_even_when_the_plan_is_the_same(self) -> None:
        record = record_of(DropOldestPolicy(), CompactionBudget(10_000))
        result = verify(edited(record, lambda d: d["budget"].update(max_tokens=9_999)), TRANSCRIPT)
        assert result.differences == (
            "the record's budget was edited after it was made (its seal differs)",
        )

    def test_a_budget_the_transcript_cannot_meet_is_named(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(edited(record, lambda d: d["budget"].update(max_tokens=1)), TRANSCRIPT)
        assert result.differences[-1].startswith(
            "the policy refuses this transcript under the record's budget: the 3 untouchable"
        )

    @pytest.mark.parametrize(
        "key", ["transcript_digest", "format", "tokenizer", "keep_first", "system_digest"]
    )
    def test_an_edited_command_line_field_or_digest_is_named(self, key: str) -> None:
        record = record_of(DropOldestPolicy(), format="anthropic", tokenizer="chars", keep_first=1)
        value = {"transcript_digest": "0" * 64, "system_digest": "1" * 64, "keep_first": 2}
        result = verify(
            edited(record, lambda d: d.update({key: value.get(key, "other")})), TRANSCRIPT
        )
        label = key.replace("_digest", " digest")
        assert f"the record's {label} was edited after it was made (its seal differs)" in (
            result.differences
        )

    def test_an_edited_seal_is_named_by_its_field(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(edited(record, lambda d: d["seal"].update(format="0" * 16)), TRANSCRIPT)
        assert result.differences == (
            "the record's format was edited after it was made (its seal differs)",
        )

    def test_an_edited_configuration_is_named_and_re_derived(self) -> None:
        record = record_of(ObservationMaskingPolicy(0), CompactionBudget(400, 1))

        def keep_more(data: dict[str, Any]) -> None:
            data["policy"]["config"]["keep_recent_results"] = 2

        result = verify(edited(record, keep_more), TRANSCRIPT)
        assert result.differences[0].startswith("the record's policy (name, version or config")
        assert any(d.startswith("the actions differ") for d in result.differences)

    def test_an_edited_policy_name_cannot_be_rebuilt_and_says_so(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(
            edited(record, lambda d: d["policy"].update(name="drop_newest")), TRANSCRIPT
        )
        assert result.differences[-1] == (
            "the record's policy cannot be rebuilt: 'drop_newest' is not a built-in policy "
            "cutctx can rebuild"
        )

    def test_an_edited_policy_version_is_named(self) -> None:
        record = record_of(DropOldestPolicy())
        result = verify(edited(record, lambda d: d["policy"].update(version="2.0.0")), TRANSCRIPT)
        assert (
            "the policy differs: the record names drop_oldest@2.0.0, the policy is "
            "drop_oldest@1.0.0"
        ) in result.differences

    def test_a_malformed_configuration_is_a_difference(self) -> None:
        record = record_of(ObservationMaskingPolicy(0))

        def negative(data: dict[str, Any]) -> None:
            data["policy"]["config"]["keep_recent_results"] = -1

        result = verify(edited(record, negative), TRANSCRIPT)
        assert result.differences[-1].startswith(
            "the record's policy configuration cannot be rebuilt: "
            "policy.config.keep_recent_results must be an int >= 0"
        )

    def test_a_policy_priced_by_a_tokenizer_needs_the_policy(self) -> None:
        policy = ObservationMaskingPolicy(0, estimator=WORDS)
        record = record_of(policy, CompactionBudget(400, 1))
        assert record.to_dict()["policy"]["config"]["estimator"] == {"name": "words"}
        with pytest.raises(ValidationError, match=r"verify\(\) needs policy=: the estimator"):
            verify(record, TRANSCRIPT)
        assert verify(record, TRANSCRIPT, policy).ok
        assert verify(record, TRANSCRIPT, ObservationMaskingPolicy(0, estimator=WORDS)).ok

    def test_a_policy_of_the_callers_own_needs_the_policy(self) -> None:
        policy = Custom()
        record = CompactionRecord.of(policy.decide(TRANSCRIPT, BUDGET), TRANSCRIPT, BUDGET, policy)
        assert record.policy_config is None
        with pytest.raises(ValidationError, match="'mine' is not a built-in policy"):
            verify(record, TRANSCRIPT)
        assert verify(record, TRANSCRIPT, policy).ok

    def test_a_given_policy_of_another_name_or_configuration_is_named(self) -> None:
        record = record_of(ObservationMaskingPolicy(0))
        result = verify(record, TRANSCRIPT, DropOldestPolicy())
        assert result.differences[0] == (
            "the policy differs: the record names observation_masking@1.0.0, the policy is "
            "drop_oldest@1.0.0"
        )
        result = verify(record, TRANSCRIPT, ObservationMaskingPolicy(0, "[other]"))
        assert result.differences[0] == "the policy's configuration differs from the record's"

    @pytest.mark.parametrize("position", range(3))
    def test_arguments_of_the_wrong_type_are_refused(self, position: int) -> None:
        arguments: list[Any] = [record_of(DropOldestPolicy()), TRANSCRIPT, DropOldestPolicy()]
        arguments[position] = "nonsense"
        with pytest.raises(ValidationError, match=r"verify: "):
            verify(*arguments)


class TestBudgetsWithAResultCap:
    def test_a_budget_without_a_cap_is_written_as_before_it_existed(self) -> None:
        assert record_of(DropOldestPolicy()).to_dict()["budget"] == {
            "max_tokens": 300,
            "protected_recent_turns": 1,
        }

    def test_a_capped_budget_is_written_with_its_cap_and_read_back(self) -> None:
        policy = PolicyChain((ExcerptingPolicy(), ObservationMaskingPolicy(0)))
        record = record_of(policy, CompactionBudget(1000, 2, max_result_tokens=100))
        data = json.loads(json.dumps(record.to_dict()))
        assert data["budget"] == {
            "max_tokens": 1000,
            "protected_recent_turns": 2,
            "max_result_tokens": 100,
        }
        assert "excerpt" in {action["action"] for action in data["plan"]["actions"]}
        back = CompactionRecord.from_dict(data)
        assert back == record
        assert back.budget.max_result_tokens == 100
        assert verify(back, TRANSCRIPT).ok

    def test_a_cap_edited_after_the_record_was_made_is_named(self) -> None:
        record = record_of(ExcerptingPolicy(), CAPPED)
        result = verify(
            edited(record, lambda d: d["budget"].update(max_result_tokens=120)), TRANSCRIPT
        )
        assert not result.ok
        assert result.differences[0] == (
            "the record's budget was edited after it was made (its seal differs)"
        )
        assert any("differ" in line for line in result.differences[1:])

    def test_a_cap_removed_from_the_record_is_named(self) -> None:
        record = record_of(ExcerptingPolicy(), CAPPED)
        result = verify(edited(record, lambda d: d["budget"].pop("max_result_tokens")), TRANSCRIPT)
        assert result.differences[0].startswith("the record's budget was edited")

    def test_a_bad_cap_in_a_record_is_refused_naming_it(self) -> None:
        record = record_of(ExcerptingPolicy(), CAPPED)
        with pytest.raises(ValidationError, match="max_result_tokens"):
            edited(record, lambda d: d["budget"].update(max_result_tokens=0))

    def test_another_budget_key_is_still_refused(self) -> None:
        record = record_of(ExcerptingPolicy(), CAPPED)
        with pytest.raises(ValidationError, match="budget holds the unknown key 'cap'"):
            edited(record, lambda d: d["budget"].update(cap=3))


class TestVerification:
    def test_ok_means_no_differences(self) -> None:
        assert Verification(ok=True).differences == ()
        assert Verification(ok=False, differences=("x",)).differences == ("x",)
        with pytest.raises(ValidationError, match="ok must be True exactly"):
            Verification(ok=True, differences=("x",))
        with pytest.raises(ValidationError, match="ok must be True exactly"):
            Verification(ok=False)
        with pytest.raises(ValidationError, match="tuple of str"):
            Verification(ok=False, differences=["x"])  # type: ignore[arg-type]


class TestPolicyTable:
    def test_every_row_rebuilds_the_policy_it_describes(self) -> None:
        for policy in BUILT_IN:
            entry = describe(policy)
            made = rebuild(entry["name"], entry["config"])
            assert type(made) is type(policy)
            assert describe(made) == entry

    def test_a_knob_with_a_default_reads_the_default_when_absent(self) -> None:
        config = Config({"present": 2}, "policy.config")
        assert config.count("present") == 2
        assert config.count("absent", 7) == 7
        assert config.text("label", "x") == "x"
        assert config.number("ratio", 0.5) == 0.5
        config.finish()

    def test_the_excerpting_row_reads_its_tool_and_estimator(self) -> None:
        assert policy_config(ExcerptingPolicy(recall_tool="look")) == {
            "estimator": {"chars_per_token": 4.0},
            "recall_tool": "look",
        }
        made = rebuild("excerpting", {"estimator": {"chars_per_token": 3.0}})
        assert isinstance(made, ExcerptingPolicy)
        assert made.recall_tool is None
        with pytest.raises(ValidationError, match=r"policy\.config\.recall_tool"):
            rebuild("excerpting", {"estimator": {"chars_per_token": 3.0}, "recall_tool": 3})

    def test_a_class_without_a_row_has_no_configuration(self) -> None:
        assert policy_config(Custom()) is None
        with pytest.raises(NotRebuildable):
            rebuild("mine", None)

    def test_an_unnamed_estimator_is_named_by_its_class(self) -> None:
        class Halves:
            def estimate_tokens(self, text: str) -> int:
                return len(text) // 2

        config = policy_config(ObservationMaskingPolicy(estimator=Halves()))
        assert config is not None
        assert config["estimator"]["name"].endswith("Halves")

    @pytest.mark.parametrize(
        ("name", "config", "named"),
        [
            ("drop_oldest", [], "policy.config must be a JSON object"),
            ("drop_oldest", {"x": 1}, "policy.config holds the unknown key 'x'"),
            ("summarizing", {"prompt_id": "p"}, "policy.config lacks the key 'target_ratio'"),
            (
                "summarizing",
                {"prompt_id": "p", "target_ratio": "1", "min_span_turns": 2},
                "policy.config.target_ratio must be a finite number",
            ),
            (
                "summarizing",
                {"prompt_id": 1, "target_ratio": 0.5, "min_span_turns": 2},
                "policy.config.prompt_id must be a string",
            ),
            (
                "observation_masking",
                {"keep_recent_results": 1, "placeholder": "x", "estimator": {}},
                "policy.config.estimator lacks the key 'chars_per_token'",
            ),
            (
                "observation_masking",
                {
                    "keep_recent_results": 1,
                    "placeholder": "x",
                    "estimator": {"chars_per_token": 4.0, "y": 1},
                },
                "policy.config.estimator holds the unknown key 'y'",
            ),
            ("chain(x)", {"policies": {}}, "policy.config.policies must be a JSON array"),
            (
                "chain(x)",
                {"policies": [{"name": "drop_oldest", "version": "9", "config": {}}]},
                "policy.config.policies[0] records drop_oldest@9, which rebuilds as drop_oldest@1",
            ),
            (
                "chain(x)",
                {"policies": [{"name": "drop_oldest", "version": "1.0.0", "config": {}, "z": 0}]},
                "policy.config.policies[0] holds the unknown key 'z'",
            ),
        ],
    )
    def test_a_malformed_configuration_is_a_validation_error_naming_the_key(
        self, name: str, config: object, named: str
    ) -> None:
        with pytest.raises(ValidationError) as caught:
            rebuild(name, config)
        assert named in caught.value.message


class TestRecordFormat:
    def test_a_format_object_is_recorded_by_its_name(self) -> None:
        transcript = Transcript((TranscriptTurn("u", Role.USER, "hi", 1),))
        budget, policy = CompactionBudget(10), DropOldestPolicy()
        plan = policy.decide(transcript, budget)
        by_object = CompactionRecord.of(plan, transcript, budget, policy, format=OPENAI_CHAT)
        by_name = CompactionRecord.of(plan, transcript, budget, policy, format="openai_chat")
        assert by_object.format == "openai_chat"
        assert by_object == by_name
