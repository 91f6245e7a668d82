"""The error tree: stable codes, one-line messages, numbers in details, pickle-safe."""

from __future__ import annotations

import pickle

import pytest
from baseaicore import SuiteError

from cutctx import BudgetUnsatisfiable, CompactionError, PlanTranscriptMismatch, SummaryMissing
from cutctx._core.errors import budget_unsatisfiable


class TestCompactionError:
    def test_is_a_suite_error_and_the_base_of_the_others(self) -> None:
        assert issubclass(CompactionError, SuiteError)
        for kind in (BudgetUnsatisfiable, SummaryMissing, PlanTranscriptMismatch):
            assert issubclass(kind, CompactionError)

    def test_message_and_details_are_kept_apart(self) -> None:
        error = CompactionError("something went wrong", details={"n": 3})
        assert str(error) == "something went wrong"
        assert error.details == {"n": 3}
        assert error.code == "COMPACTION_ERROR"

    @pytest.mark.parametrize(
        "error",
        [
            CompactionError("base", details={"n": 1}),
            BudgetUnsatisfiable(
                "over",
                details={"untouchable_tokens": 9, "max_tokens": 5, "untouchable_turn_count": 2},
            ),
            SummaryMissing("missing", details={"group_id": "span-ab", "missing_group_ids": ["x"]}),
            PlanTranscriptMismatch("mismatch", details={"unknown_turn_ids": ["a"]}),
        ],
        ids=lambda error: type(error).__name__,
    )
    def test_pickles_round_trip_with_details(self, error: CompactionError) -> None:
        twin = pickle.loads(pickle.dumps(error))  # noqa: S301 - our own bytes
        assert type(twin) is type(error)
        assert str(twin) == str(error)
        assert twin.details == error.details
        assert twin.code == error.code


class TestBudgetUnsatisfiable:
    def test_names_both_numbers_in_details_and_properties(self) -> None:
        error = budget_unsatisfiable(120, 100, 3)
        assert isinstance(error, BudgetUnsatisfiable)
        assert error.details == {
            "untouchable_tokens": 120,
            "max_tokens": 100,
            "untouchable_turn_count": 3,
        }
        assert (error.untouchable_tokens, error.max_tokens) == (120, 100)
        message = str(error)
        assert "\n" not in message
        assert "120" in message
        assert "100" in message

    def test_the_message_counts_the_untouchable_turns_in_words(self) -> None:
        assert str(budget_unsatisfiable(120, 100, 3)) == (
            "the 3 untouchable turns need 120 tokens, over the budget of 100"
        )
        assert str(budget_unsatisfiable(120, 100, 1)) == (
            "the 1 untouchable turn needs 120 tokens, over the budget of 100"
        )


class TestSummaryMissing:
    def test_group_id_property_reads_details(self) -> None:
        error = SummaryMissing("no summary for span-1", details={"group_id": "span-1"})
        assert error.group_id == "span-1"
        assert error.code == "COMPACTION_SUMMARY_MISSING"


class TestPlanTranscriptMismatch:
    def test_has_its_own_code(self) -> None:
        assert PlanTranscriptMismatch("x").code == "COMPACTION_PLAN_MISMATCH"
        assert PlanTranscriptMismatch("x").details == {}
