"""``StubDroppingPolicy``: exchanges already masked go first, oldest first, and nothing else."""

from __future__ import annotations

import pytest
from baseaicore import ValidationError, sha256_of

from cutctx import (
    CharRatioEstimator,
    CompactionBudget,
    Role,
    Transcript,
    TranscriptTurn,
    default_messages_policy,
)
from cutctx._core.metadata import KIND_METADATA, MASKED_KIND
from cutctx._loop.compact import fulfil
from cutctx._policies.stubs import INDEX_LABEL, INDEX_PROMPT_ID, StubDroppingPolicy, index_text

MASKED = {KIND_METADATA: MASKED_KIND}


def exchange(n: int, *, masked: bool, tokens: int = 50) -> tuple[TranscriptTurn, TranscriptTurn]:
    return (
        TranscriptTurn(f"a{n}", Role.ASSISTANT, "call", 10, f"c{n}"),
        TranscriptTurn(
            f"t{n}", Role.TOOL, "body", tokens, f"c{n}", metadata=MASKED if masked else {}
        ),
    )


def transcript() -> Transcript:
    return Transcript(
        (
            TranscriptTurn("u", Role.USER, "task", 10),
            *exchange(1, masked=False),
            *exchange(2, masked=True),
            *exchange(3, masked=True),
            *exchange(4, masked=False),
        )
    )


class TestStubDroppingPolicy:
    def test_the_oldest_stubbed_exchange_goes_first_and_only_as_far_as_needed(self) -> None:
        plan = StubDroppingPolicy().decide(transcript(), CompactionBudget(200, 2))
        actions = {action.turn_id: action.action.value for action in plan.actions}
        assert actions == {
            "u": "keep", "a1": "keep", "t1": "keep", "a2": "drop", "t2": "drop",
            "a3": "keep", "t3": "keep", "a4": "keep", "t4": "keep",
        }  # fmt: skip
        assert not plan.budget_unmet

    def test_an_exchange_with_a_whole_result_is_never_dropped(self) -> None:
        plan = StubDroppingPolicy().decide(transcript(), CompactionBudget(100, 2))
        dropped = {action.turn_id for action in plan.actions if action.action.value == "drop"}
        assert dropped == {"a2", "t2", "a3", "t3"}
        assert plan.budget_unmet  # the rest is for the next member of a chain

    def test_a_view_that_fits_is_kept(self) -> None:
        plan = StubDroppingPolicy().decide(transcript(), CompactionBudget(1000, 2))
        assert {action.action.value for action in plan.actions} == {"keep"}
        assert repr(StubDroppingPolicy()) == "StubDroppingPolicy()"


def stubbed(n: int, digest: str) -> tuple[TranscriptTurn, TranscriptTurn]:
    """An exchange whose result is a stub naming ``digest``."""
    return (
        TranscriptTurn(f"a{n}", Role.ASSISTANT, "call", 10, f"c{n}"),
        TranscriptTurn(
            f"t{n}", Role.TOOL, f"[masked] (original: 900 tokens, sha256:{digest})", 40, f"c{n}",
            metadata=MASKED,
        ),
    )  # fmt: skip


class TestStubDroppingPolicyIndex:
    def test_the_stubs_it_would_drop_are_folded_into_one_index_the_library_writes(self) -> None:
        turns = (
            TranscriptTurn("u", Role.USER, "task", 10),
            *stubbed(1, "1" * 64),
            *stubbed(2, "2" * 64),
            *exchange(3, masked=False, tokens=400),
        )
        policy = StubDroppingPolicy(index=True, estimator=CharRatioEstimator())
        plan = policy.decide(Transcript(turns), CompactionBudget(450, 2))
        (request,) = plan.summarization_requests
        assert request.prompt_id == INDEX_PROMPT_ID
        assert request.turn_ids == ("a1", "t1", "a2", "t2")
        text = index_text(turns[1:5])
        assert text == f"{INDEX_LABEL} sha256:{'1' * 12} sha256:{'2' * 12}"
        assert request.target_tokens == CharRatioEstimator().estimate_tokens(text) + 32
        assert fulfil([(request, turns[1:5])], None, owner="test", instead="-") == {
            request.group_id: text
        }
        assert "drop" not in {action.action.value for action in plan.actions}
        assert repr(policy).startswith("StubDroppingPolicy(index=True, estimator=")

    def test_once_the_indexes_cost_a_quarter_of_the_budget_stubs_are_dropped_plainly(
        self,
    ) -> None:
        index = TranscriptTurn("summary:span-0", Role.ASSISTANT, INDEX_LABEL + " sha256:0", 120)
        turns = (
            TranscriptTurn("u", Role.USER, "task", 10),
            index,
            *stubbed(1, "1" * 64),
            *exchange(3, masked=False, tokens=400),
        )
        plan = StubDroppingPolicy(index=True).decide(Transcript(turns), CompactionBudget(480, 2))
        assert not plan.summarization_requests
        assert {a.turn_id for a in plan.actions if a.action.value == "drop"} == {"a1", "t1"}

    def test_an_index_covers_at_most_a_quarter_of_the_budget_in_stubs(self) -> None:
        turns = (
            TranscriptTurn("u", Role.USER, "task", 10),
            *(turn for n in range(8) for turn in stubbed(n, f"{n}" * 64)),
            *exchange(9, masked=False, tokens=400),
        )
        plan = StubDroppingPolicy(index=True).decide(Transcript(turns), CompactionBudget(500, 2))
        assert [len(r.turn_ids) for r in plan.summarization_requests] == [4, 4, 4, 4]

    def test_an_unmasked_result_is_named_by_the_digest_of_its_body(self) -> None:
        turn = TranscriptTurn("t", Role.TOOL, "plain", 5, "c")
        assert index_text([turn]) == f"{INDEX_LABEL} sha256:{sha256_of('plain')[:12]}"

    def test_a_flag_that_is_not_a_bool_is_refused_by_name(self) -> None:
        with pytest.raises(ValidationError, match="index"):
            StubDroppingPolicy(index=1)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="recall_index"):
            default_messages_policy(version=2, recall_index="yes")  # type: ignore[arg-type]
