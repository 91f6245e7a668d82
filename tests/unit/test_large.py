"""``LargeResultMaskingPolicy``: the large results outside the newest half of the budget first."""

from __future__ import annotations

from cutctx import CompactionBudget, Role, Transcript, TranscriptTurn
from cutctx._policies.large import LargeResultMaskingPolicy


def exchange(n: int, tokens: int) -> tuple[TranscriptTurn, TranscriptTurn]:
    return (
        TranscriptTurn(f"a{n}", Role.ASSISTANT, "call", 10, f"c{n}"),
        TranscriptTurn(f"t{n}", Role.TOOL, f"body {n} " * tokens, tokens, f"c{n}"),
    )


def masked(transcript: Transcript, budget: CompactionBudget) -> list[str]:
    plan = LargeResultMaskingPolicy(0).decide(transcript, budget)
    return [action.turn_id for action in plan.actions if action.action.value == "mask"]


class TestLargeResultMaskingPolicy:
    def test_a_large_old_result_goes_before_a_small_older_one(self) -> None:
        """Oldest-first masking would mask t1 first (its stub is smaller); t2, over 1/32 of the
        budget (125 tokens of 4 000), reclaims enough alone."""
        transcript = Transcript(
            (
                TranscriptTurn("u", Role.USER, "task", 10),
                *exchange(1, 100),
                *exchange(2, 3_000),
                *exchange(3, 100),
                *exchange(4, 2_500),
            )
        )
        assert masked(transcript, CompactionBudget(4_000, 0)) == ["t2"]

    def test_nothing_in_the_newest_half_of_the_budget_is_offered(self) -> None:
        """t3 is the largest, but the last 500 tokens (half of 1 000) reach back into it."""
        transcript = Transcript(
            (
                TranscriptTurn("u", Role.USER, "task", 10),
                *exchange(1, 100),
                *exchange(2, 200),
                *exchange(3, 900),
            )
        )
        plan = LargeResultMaskingPolicy(0).decide(transcript, CompactionBudget(1_000, 0))
        assert masked(transcript, CompactionBudget(1_000, 0)) == ["t1", "t2"]
        assert plan.budget_unmet

    def test_a_small_result_is_never_offered(self) -> None:
        """Under 1/32 of the budget (31 tokens of 1 000) a result is left to ordinary masking."""
        transcript = Transcript(
            (
                TranscriptTurn("u", Role.USER, "task", 10),
                *(turn for n in range(60) for turn in exchange(n, 30)),
            )
        )
        assert masked(transcript, CompactionBudget(1_000, 0)) == []

    def test_a_transcript_within_the_spared_half_is_left_alone(self) -> None:
        transcript = Transcript((TranscriptTurn("u", Role.USER, "task", 10), *exchange(1, 300)))
        assert masked(transcript, CompactionBudget(200, 0)) == []

    def test_its_repr_names_it(self) -> None:
        assert repr(LargeResultMaskingPolicy(2)).startswith(
            "LargeResultMaskingPolicy(keep_recent_results=2,"
        )
