"""CompactionReport and CompactedTranscript: the event body and the view it travels with."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from cutctx import CompactedTranscript, CompactionReport, Role, Transcript, TranscriptTurn
from tests.contract import REPORT_FIELDS

SPEC_FIELDS = REPORT_FIELDS


def report(**changes: Any) -> CompactionReport:
    fields: dict[str, Any] = {
        "plan_hash": "ab" * 32,
        "policy_name": "drop_oldest",
        "policy_version": "1.0.0",
        "tokens_before": 987,
        "tokens_after_estimate": 37,
        "estimator_ratio": 4.0,
        "budget_unmet": False,
        "turns_before": 5,
        "turns_after": 2,
        "kept_turn_ids": ("s", "a2"),
        "masked_turn_ids": (),
        "summarized_turn_ids": (),
        "dropped_turn_ids": ("u1", "a1", "t1"),
        "summary_turn_ids": (),
    }
    fields.update(changes)
    return CompactionReport(**fields)


class TestCompactionReport:
    def test_fields_follow_the_documented_order(self) -> None:
        names = tuple(field.name for field in dataclasses.fields(CompactionReport))
        assert names[: len(SPEC_FIELDS)] == SPEC_FIELDS

    def test_no_field_is_accepted_positionally_as_in_0_1(self) -> None:
        values = tuple(report().to_dict().values())
        with pytest.raises(TypeError, match="positional"):
            CompactionReport(*values)  # type: ignore[call-arg]

    def test_to_dict_has_every_field_as_a_key_with_plain_values(self) -> None:
        data = report().to_dict()
        assert data == {
            "plan_hash": "ab" * 32,
            "policy_name": "drop_oldest",
            "policy_version": "1.0.0",
            "tokens_before": 987,
            "tokens_after_estimate": 37,
            "estimator_ratio": 4.0,
            "budget_unmet": False,
            "turns_before": 5,
            "turns_after": 2,
            "kept_turn_ids": ["s", "a2"],
            "masked_turn_ids": [],
            "summarized_turn_ids": [],
            "dropped_turn_ids": ["u1", "a1", "t1"],
            "summary_turn_ids": [],
        }
        for name in SPEC_FIELDS:
            if name.endswith("_ids"):
                assert type(data[name]) is list

    def test_to_dict_survives_a_json_round_trip(self) -> None:
        data = report(estimator_ratio=None, budget_unmet=True).to_dict()
        assert json.loads(json.dumps(data)) == data

    def test_estimator_name_is_a_key_only_when_set(self) -> None:
        assert "estimator_name" not in report().to_dict()
        named = report(estimator_ratio=None, estimator_name="tiktoken:cl100k_base").to_dict()
        assert named["estimator_name"] == "tiktoken:cl100k_base"
        assert set(named) == {*SPEC_FIELDS, "estimator_name"}

    def test_excerpted_turn_ids_is_a_key_only_when_not_empty(self) -> None:
        assert report().excerpted_turn_ids == ()
        assert "excerpted_turn_ids" not in report().to_dict()
        data = report(excerpted_turn_ids=("t9",)).to_dict()
        assert data["excerpted_turn_ids"] == ["t9"]
        assert type(data["excerpted_turn_ids"]) is list
        assert set(data) == {*SPEC_FIELDS, "excerpted_turn_ids"}

    def test_is_frozen_and_slotted(self) -> None:
        value = report()
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.turns_after = 3  # type: ignore[misc]
        assert not hasattr(value, "__dict__")


class TestCompactedTranscript:
    def test_holds_the_view_and_its_report_and_is_frozen(self) -> None:
        view = Transcript((TranscriptTurn("s", Role.SYSTEM, "rules", 12),))
        result = CompactedTranscript(view, report())
        assert result.transcript is view
        assert result.report == report()
        assert [field.name for field in dataclasses.fields(CompactedTranscript)] == [
            "transcript",
            "report",
        ]
        with pytest.raises(dataclasses.FrozenInstanceError):
            result.transcript = view  # type: ignore[misc]
        assert not hasattr(result, "__dict__")
