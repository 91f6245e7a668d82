"""``StubDroppingPolicy``: exchanges already masked go first, oldest first, and nothing else."""

from __future__ import annotations

from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn
from cutctx._core.metadata import KIND_METADATA, MASKED_KIND
from cutctx._policies.stubs import StubDroppingPolicy

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
