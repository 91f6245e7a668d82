"""The values refuse bad fields where they are born, and are frozen, slotted and copy-safe."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    DEFAULT_PLACEHOLDER,
    EMPTY_METADATA,
    GROUP_ID_PREFIX,
    SUMMARY_TURN_ID_PREFIX,
    Action,
    CompactionBudget,
    CompactionError,
    Role,
    SummarizationRequest,
    Transcript,
    TranscriptTurn,
    TurnAction,
    TurnReplacement,
)
from cutctx._core.invariants import layout

if TYPE_CHECKING:
    from collections.abc import Callable


def refused(build: Callable[[], object], field: str) -> ValidationError | CompactionError:
    """Run ``build``, expect a typed one-line error whose details name ``field``; return it."""
    with pytest.raises((ValidationError, CompactionError)) as caught:
        build()
    error = caught.value
    assert isinstance(error, ValidationError | CompactionError)
    assert "\n" not in str(error)
    assert str(error)
    assert field in str(error.details.get("field", ""))
    return error


def user(turn_id: str, tokens: int = 10) -> TranscriptTurn:
    return TranscriptTurn(turn_id, Role.USER, "text", tokens)


class TestRole:
    def test_values_are_the_wire_strings(self) -> None:
        assert [role.value for role in Role] == ["system", "user", "assistant", "tool"]
        assert Role("tool") is Role.TOOL
        assert isinstance(Role.SYSTEM, str)


class TestAction:
    def test_has_the_four_0_1_actions_in_order_then_excerpt(self) -> None:
        assert [action.name for action in Action] == [
            "KEEP",
            "MASK",
            "SUMMARIZE",
            "DROP",
            "EXCERPT",
        ]

    def test_excerpts_wire_string_is_excerpt(self) -> None:
        assert Action.EXCERPT.value == "excerpt"
        assert Action("excerpt") is Action.EXCERPT


class TestConstants:
    def test_prefixes_and_placeholder_are_the_documented_strings(self) -> None:
        assert SUMMARY_TURN_ID_PREFIX == "summary:"
        assert GROUP_ID_PREFIX == "span-"
        assert DEFAULT_PLACEHOLDER == "[tool result masked by cutctx]"

    def test_empty_metadata_is_empty_and_read_only(self) -> None:
        assert len(EMPTY_METADATA) == 0
        with pytest.raises(TypeError):
            EMPTY_METADATA["k"] = "v"  # type: ignore[index]


BAD_TURNS: list[tuple[str, Callable[[], object], str]] = [
    ("empty id", lambda: TranscriptTurn("", Role.USER, "c", 1), "turn_id"),
    ("non-str id", lambda: TranscriptTurn(7, Role.USER, "c", 1), "turn_id"),  # type: ignore[arg-type]
    ("role as plain string", lambda: TranscriptTurn("t", "tool", "c", 1), "role"),  # type: ignore[arg-type]
    ("role as None", lambda: TranscriptTurn("t", None, "c", 1), "role"),  # type: ignore[arg-type]
    ("bytes content", lambda: TranscriptTurn("t", Role.USER, b"c", 1), "content"),  # type: ignore[arg-type]
    ("None content", lambda: TranscriptTurn("t", Role.USER, None, 1), "content"),  # type: ignore[arg-type]
    ("negative estimate", lambda: TranscriptTurn("t", Role.USER, "c", -1), "token_estimate"),
    (
        "bool estimate",
        lambda: TranscriptTurn("t", Role.USER, "c", token_estimate=True),
        "token_estimate",
    ),
    ("float estimate", lambda: TranscriptTurn("t", Role.USER, "c", 1.0), "token_estimate"),  # type: ignore[arg-type]
    ("empty call id", lambda: TranscriptTurn("t", Role.TOOL, "c", 1, ""), "tool_call_id"),
    ("int call id", lambda: TranscriptTurn("t", Role.TOOL, "c", 1, 3), "tool_call_id"),  # type: ignore[arg-type]
    ("int pinned", lambda: TranscriptTurn("t", Role.USER, "c", 1, pinned=1), "pinned"),  # type: ignore[arg-type]
    ("str pinned", lambda: TranscriptTurn("t", Role.USER, "c", 1, pinned="yes"), "pinned"),  # type: ignore[arg-type]
    (
        "non-mapping metadata",
        lambda: TranscriptTurn("t", Role.USER, "c", 1, metadata=[("k", "v")]),  # type: ignore[arg-type]
        "metadata",
    ),
    (
        "non-str metadata key",
        lambda: TranscriptTurn("t", Role.USER, "c", 1, metadata={1: "v"}),  # type: ignore[dict-item]
        "metadata",
    ),
    (
        "non-str metadata value",
        lambda: TranscriptTurn("t", Role.USER, "c", 1, metadata={"k": 1}),  # type: ignore[dict-item]
        "metadata",
    ),
]


class TestTranscriptTurn:
    def test_defaults_are_no_call_not_pinned_and_the_shared_empty_metadata(self) -> None:
        turn = TranscriptTurn("t", Role.USER, "hello", 2)
        assert turn.tool_call_id is None
        assert turn.pinned is False
        assert turn.metadata is EMPTY_METADATA

    def test_positional_fields_follow_the_documented_order(self) -> None:
        turn = TranscriptTurn("t", Role.TOOL, "body", 5, "c1", True, {"k": "v"})  # noqa: FBT003 - positional order is the point
        assert (turn.turn_id, turn.role, turn.content, turn.token_estimate) == (
            "t",
            Role.TOOL,
            "body",
            5,
        )
        assert (turn.tool_call_id, turn.pinned, dict(turn.metadata)) == ("c1", True, {"k": "v"})

    def test_empty_content_and_zero_estimate_are_allowed(self) -> None:
        turn = TranscriptTurn("t", Role.USER, "", 0)
        assert (turn.content, turn.token_estimate) == ("", 0)

    @pytest.mark.parametrize(
        ("build", "field"), [case[1:] for case in BAD_TURNS], ids=[case[0] for case in BAD_TURNS]
    )
    def test_bad_field_is_refused_with_a_typed_error_naming_it(
        self, build: Callable[[], object], field: str
    ) -> None:
        error = refused(build, f"TranscriptTurn.{field}")
        assert isinstance(error, ValidationError)

    def test_callers_metadata_dict_is_copied(self) -> None:
        mine = {"source": "wire"}
        turn = TranscriptTurn("t", Role.USER, "c", 1, metadata=mine)
        mine["source"] = "changed"
        mine["extra"] = "added"
        assert dict(turn.metadata) == {"source": "wire"}

    def test_metadata_is_read_only(self) -> None:
        turn = TranscriptTurn("t", Role.USER, "c", 1, metadata={"k": "v"})
        with pytest.raises(TypeError):
            turn.metadata["k"] = "w"  # type: ignore[index]

    def test_empty_metadata_dict_becomes_the_shared_empty_mapping(self) -> None:
        assert TranscriptTurn("t", Role.USER, "c", 1, metadata={}).metadata is EMPTY_METADATA

    def test_is_frozen(self) -> None:
        turn = user("t")
        with pytest.raises(dataclasses.FrozenInstanceError):
            turn.content = "other"  # type: ignore[misc]

    def test_is_slotted(self) -> None:
        assert "__slots__" in vars(TranscriptTurn)
        assert not hasattr(user("t"), "__dict__")

    def test_equal_turns_hash_alike_despite_their_metadata(self) -> None:
        one = TranscriptTurn("t", Role.USER, "c", 1, metadata={"k": "v"})
        two = TranscriptTurn("t", Role.USER, "c", 1, metadata={"k": "v"})
        assert one == two
        assert hash(one) == hash(two)

    def test_survives_pickle_and_deepcopy_with_its_metadata(self) -> None:
        turn = TranscriptTurn("t", Role.TOOL, "body", 3, "c1", True, {"k": "v"})  # noqa: FBT003 - positional
        for twin in (pickle.loads(pickle.dumps(turn)), copy.deepcopy(turn), copy.copy(turn)):  # noqa: S301 - our own bytes
            assert twin == turn
            assert dict(twin.metadata) == {"k": "v"}
            with pytest.raises(TypeError):
                twin.metadata["k"] = "w"  # type: ignore[index]
        assert pickle.loads(pickle.dumps(user("u"))).metadata is EMPTY_METADATA  # noqa: S301 - our own bytes


class TestTranscript:
    def test_a_list_is_accepted_and_stored_as_a_tuple(self) -> None:
        turns = [user("a", 3), user("b", 4)]
        transcript = Transcript(turns)  # type: ignore[arg-type]
        assert isinstance(transcript.turns, tuple)
        turns.append(user("c", 5))
        assert transcript.turn_ids() == ("a", "b")

    def test_token_estimate_is_the_sum_and_turn_ids_are_in_order(self) -> None:
        transcript = Transcript((user("b", 3), user("a", 4), user("c", 0)))
        assert transcript.token_estimate() == 7
        assert transcript.turn_ids() == ("b", "a", "c")

    def test_empty_transcript_holds_nothing(self) -> None:
        empty = Transcript(())
        assert (empty.token_estimate(), empty.turn_ids()) == (0, ())

    def test_transcript_without_arguments_is_the_empty_transcript(self) -> None:
        """As in 0.1, ``turns`` defaults to ``()``."""
        empty = Transcript()
        assert empty.turns == ()
        assert (empty.token_estimate(), empty.turn_ids()) == (0, ())
        assert empty == Transcript(())

    def test_duplicate_turn_ids_are_refused(self) -> None:
        error = refused(lambda: Transcript((user("a"), user("b"), user("a"))), "Transcript.turns")
        assert error.details["turn_id"] == "a"
        assert error.details["index"] == 2

    def test_a_non_turn_member_is_refused(self) -> None:
        error = refused(lambda: Transcript((user("a"), "b")), "Transcript.turns")  # type: ignore[arg-type]
        assert error.details["index"] == 1

    @pytest.mark.parametrize("turns", [None, "ab", {"a": 1}, 3])
    def test_a_non_sequence_is_refused(self, turns: Any) -> None:
        refused(lambda: Transcript(turns), "Transcript.turns")

    def test_is_frozen_and_slotted(self) -> None:
        transcript = Transcript((user("a"),))
        with pytest.raises(dataclasses.FrozenInstanceError):
            transcript.turns = ()  # type: ignore[misc]
        assert "__slots__" in vars(Transcript)
        assert not hasattr(transcript, "__dict__")

    def test_equality_is_by_turns(self) -> None:
        assert Transcript((user("a"),)) == Transcript([user("a")])  # type: ignore[arg-type]
        assert Transcript((user("a"),)) != Transcript((user("b"),))

    def test_survives_pickle_and_deepcopy(self) -> None:
        with_metadata = TranscriptTurn("b", Role.USER, "c", 3, metadata={"k": "v"})
        transcript = Transcript((user("a", 2), with_metadata))
        for twin in (pickle.loads(pickle.dumps(transcript)), copy.deepcopy(transcript)):  # noqa: S301 - our own bytes
            assert twin == transcript
            assert twin.token_estimate() == 5

    def test_request_tokens_are_counted_but_not_compared(self) -> None:
        """What a request costs beyond its turns (a reply's priming) is part of the estimate
        and of no turn; two transcripts of the same turns stay equal."""
        transcript = Transcript((user("a", 2), user("b", 3)), request_tokens=3)
        assert transcript.token_estimate() == 8
        assert transcript == Transcript((user("a", 2), user("b", 3)))
        twin = pickle.loads(pickle.dumps(transcript))  # noqa: S301 - our own bytes
        assert (twin.request_tokens, twin.token_estimate()) == (3, 8)

    def test_request_tokens_are_untouchable_under_every_budget(self) -> None:
        transcript = Transcript((user("a", 2),), request_tokens=3)
        assert layout(transcript, CompactionBudget(100, 0)).untouchable_tokens == 3

    @pytest.mark.parametrize("bad", [-1, 1.5, True, "3", None])
    def test_request_tokens_that_are_not_a_count_are_refused(self, bad: Any) -> None:
        refused(lambda: Transcript((user("a"),), request_tokens=bad), "Transcript.request_tokens")


class TestCompactionBudget:
    def test_protects_four_recent_turns_by_default(self) -> None:
        assert CompactionBudget(100).protected_recent_turns == 4

    def test_zero_is_allowed_for_both(self) -> None:
        budget = CompactionBudget(0, 0)
        assert (budget.max_tokens, budget.protected_recent_turns) == (0, 0)

    @pytest.mark.parametrize(
        ("kwargs", "field"),
        [
            ({"max_tokens": -1}, "max_tokens"),
            ({"max_tokens": False}, "max_tokens"),
            ({"max_tokens": 10.0}, "max_tokens"),
            ({"max_tokens": "10"}, "max_tokens"),
            ({"max_tokens": 10, "protected_recent_turns": -1}, "protected_recent_turns"),
            ({"max_tokens": 10, "protected_recent_turns": True}, "protected_recent_turns"),
        ],
    )
    def test_bad_figure_is_refused(self, kwargs: dict[str, Any], field: str) -> None:
        refused(lambda: CompactionBudget(**kwargs), f"CompactionBudget.{field}")

    def test_the_result_cap_is_off_by_default_and_keeps_0_1_repr(self) -> None:
        budget = CompactionBudget(100, 2)
        assert budget.max_result_tokens is None
        assert repr(budget) == "CompactionBudget(max_tokens=100, protected_recent_turns=2)"
        assert budget == CompactionBudget(100, 2, max_result_tokens=None)

    def test_a_set_cap_is_held_compared_and_shown(self) -> None:
        budget = CompactionBudget(100, 2, max_result_tokens=1)
        assert budget.max_result_tokens == 1
        assert budget != CompactionBudget(100, 2)
        assert repr(budget) == (
            "CompactionBudget(max_tokens=100, protected_recent_turns=2, max_result_tokens=1)"
        )
        assert copy.deepcopy(budget) == budget
        assert pickle.loads(pickle.dumps(budget)) == budget  # noqa: S301 - our own bytes

    @pytest.mark.parametrize("cap", [0, -3, True, 2.0, "10"])
    def test_a_cap_below_one_or_not_an_int_is_refused(self, cap: object) -> None:
        error = refused(
            lambda: CompactionBudget(100, max_result_tokens=cap),  # type: ignore[arg-type]
            "CompactionBudget.max_result_tokens",
        )
        assert "None or an int >= 1" in str(error)

    def test_the_cap_is_keyword_only(self) -> None:
        with pytest.raises(TypeError):
            CompactionBudget(100, 4, 50)  # type: ignore[call-arg]

    def test_is_frozen_and_slotted(self) -> None:
        budget = CompactionBudget(5)
        with pytest.raises(dataclasses.FrozenInstanceError):
            budget.max_tokens = 6  # type: ignore[misc]
        assert not hasattr(budget, "__dict__")


class TestTurnReplacement:
    def test_holds_content_and_estimate(self) -> None:
        replacement = TurnReplacement("stub", 2)
        assert (replacement.content, replacement.token_estimate) == ("stub", 2)

    @pytest.mark.parametrize(
        ("build", "field"),
        [
            (lambda: TurnReplacement(None, 1), "content"),  # type: ignore[arg-type]
            (lambda: TurnReplacement("s", -1), "token_estimate"),
            (lambda: TurnReplacement("s", token_estimate=True), "token_estimate"),
        ],
    )
    def test_bad_field_is_refused(self, build: Callable[[], object], field: str) -> None:
        refused(build, f"TurnReplacement.{field}")

    def test_to_dict_is_its_plain_json_piece(self) -> None:
        assert TurnReplacement("stub \u00e9", 2).to_dict() == {
            "content": "stub \u00e9",
            "token_estimate": 2,
        }

    def test_is_frozen_and_slotted(self) -> None:
        replacement = TurnReplacement("s", 1)
        with pytest.raises(dataclasses.FrozenInstanceError):
            replacement.content = "t"  # type: ignore[misc]
        assert not hasattr(replacement, "__dict__")


STUB = TurnReplacement("stub", 1)
BAD_ACTIONS: list[tuple[str, Callable[[], object], str]] = [
    ("empty id", lambda: TurnAction("", Action.KEEP), "turn_id"),
    ("action as string", lambda: TurnAction("t", "keep"), "action"),  # type: ignore[arg-type]
    ("replacement on KEEP", lambda: TurnAction("t", Action.KEEP, None, STUB), "replacement"),
    ("replacement on DROP", lambda: TurnAction("t", Action.DROP, None, STUB), "replacement"),
    ("MASK without replacement", lambda: TurnAction("t", Action.MASK), "replacement"),
    ("EXCERPT without replacement", lambda: TurnAction("t", Action.EXCERPT), "replacement"),
    ("group on EXCERPT", lambda: TurnAction("t", Action.EXCERPT, "g", STUB), "summary_group"),
    ("group on KEEP", lambda: TurnAction("t", Action.KEEP, "span-1"), "summary_group"),
    ("group on DROP", lambda: TurnAction("t", Action.DROP, "span-1"), "summary_group"),
    ("group on MASK", lambda: TurnAction("t", Action.MASK, "span-1", STUB), "summary_group"),
    ("SUMMARIZE without group", lambda: TurnAction("t", Action.SUMMARIZE), "summary_group"),
    ("empty group", lambda: TurnAction("t", Action.SUMMARIZE, ""), "summary_group"),
    (
        "replacement of the wrong type",
        lambda: TurnAction("t", Action.MASK, None, "stub"),  # type: ignore[arg-type]
        "replacement",
    ),
]


class TestTurnAction:
    def test_mask_carries_its_replacement_and_summarize_its_group(self) -> None:
        assert TurnAction("t", Action.MASK, None, STUB).replacement is STUB
        assert TurnAction("t", Action.EXCERPT, None, STUB).replacement is STUB
        assert TurnAction("t", Action.SUMMARIZE, "span-1").summary_group == "span-1"

    @pytest.mark.parametrize(
        ("action", "expected"),
        [
            (
                TurnAction("t", Action.KEEP),
                {"action": "keep", "replacement": None, "summary_group": None, "turn_id": "t"},
            ),
            (
                TurnAction("t", Action.DROP),
                {"action": "drop", "replacement": None, "summary_group": None, "turn_id": "t"},
            ),
            (
                TurnAction("t", Action.MASK, None, STUB),
                {
                    "action": "mask",
                    "replacement": {"content": "stub", "token_estimate": 1},
                    "summary_group": None,
                    "turn_id": "t",
                },
            ),
            (
                TurnAction("t", Action.SUMMARIZE, "g1"),
                {"action": "summarize", "replacement": None, "summary_group": "g1", "turn_id": "t"},
            ),
            (
                TurnAction("t", Action.EXCERPT, None, STUB),
                {
                    "action": "excerpt",
                    "replacement": {"content": "stub", "token_estimate": 1},
                    "summary_group": None,
                    "turn_id": "t",
                },
            ),
        ],
        ids=["keep", "drop", "mask", "summarize", "excerpt"],
    )
    def test_to_dict_is_its_plain_json_piece(
        self, action: TurnAction, expected: dict[str, Any]
    ) -> None:
        data = action.to_dict()
        assert data == expected
        assert type(data["action"]) is str

    @pytest.mark.parametrize(
        ("build", "field"),
        [case[1:] for case in BAD_ACTIONS],
        ids=[case[0] for case in BAD_ACTIONS],
    )
    def test_bad_field_is_refused(self, build: Callable[[], object], field: str) -> None:
        refused(build, f"TurnAction.{field}")

    def test_is_frozen_and_slotted(self) -> None:
        action = TurnAction("t", Action.KEEP)
        with pytest.raises(dataclasses.FrozenInstanceError):
            action.action = Action.DROP  # type: ignore[misc]
        assert not hasattr(action, "__dict__")


class TestSummarizationRequest:
    def test_a_list_of_ids_is_stored_as_a_tuple(self) -> None:
        request = SummarizationRequest("span-1", ["a", "b"], 5, "prompt")  # type: ignore[arg-type]
        assert request.turn_ids == ("a", "b")

    def test_zero_target_is_allowed(self) -> None:
        assert SummarizationRequest("g", ("a",), 0, "p").target_tokens == 0

    def test_summary_turn_id_is_the_prefix_and_the_group_id(self) -> None:
        request = SummarizationRequest("g1", ("a", "b"), 5, "p")
        assert request.summary_turn_id == SUMMARY_TURN_ID_PREFIX + "g1" == "summary:g1"

    def test_to_dict_is_its_plain_json_piece(self) -> None:
        data = SummarizationRequest("g1", ("a", "b"), 5, "recap").to_dict()
        assert data == {
            "group_id": "g1",
            "turn_ids": ["a", "b"],
            "target_tokens": 5,
            "prompt_id": "recap",
        }
        assert type(data["turn_ids"]) is list

    @pytest.mark.parametrize(
        ("build", "field"),
        [
            (lambda: SummarizationRequest("", ("a",), 5, "p"), "group_id"),
            (lambda: SummarizationRequest("g", (), 5, "p"), "turn_ids"),
            (lambda: SummarizationRequest("g", [], 5, "p"), "turn_ids"),  # type: ignore[arg-type]
            (lambda: SummarizationRequest("g", "ab", 5, "p"), "turn_ids"),  # type: ignore[arg-type]
            (lambda: SummarizationRequest("g", ("a", ""), 5, "p"), "turn_ids[]"),
            (lambda: SummarizationRequest("g", ("a",), -1, "p"), "target_tokens"),
            (
                lambda: SummarizationRequest("g", ("a",), target_tokens=True, prompt_id="p"),
                "target_tokens",
            ),
            (lambda: SummarizationRequest("g", ("a",), 5, ""), "prompt_id"),
            (lambda: SummarizationRequest("g", ("a",), 5, None), "prompt_id"),  # type: ignore[arg-type]
        ],
    )
    def test_bad_field_is_refused(self, build: Callable[[], object], field: str) -> None:
        refused(build, f"SummarizationRequest.{field}")

    def test_is_frozen_and_slotted(self) -> None:
        request = SummarizationRequest("g", ("a",), 5, "p")
        with pytest.raises(dataclasses.FrozenInstanceError):
            request.target_tokens = 6  # type: ignore[misc]
        assert not hasattr(request, "__dict__")


def test_refusal_messages_truncate_long_values_to_one_line() -> None:
    """A huge or multi-line bad value must not turn the message into a wall of text."""
    error = refused(
        lambda: TranscriptTurn("t", Role.USER, "c", 1, pinned="x\n" * 500),  # type: ignore[arg-type]
        "TranscriptTurn.pinned",
    )
    assert len(str(error)) < 200


BLANKS = [" ", "\t\n", "\u3000", "  \r  "]


class TestBlankNamesAreRefusedLikeEmptyOnes:
    """As in 0.1: a turn id, group id or prompt id of whitespace alone is refused as empty."""

    @pytest.mark.parametrize("blank", ["", *BLANKS])
    @pytest.mark.parametrize(
        ("build", "field", "words"),
        [
            (lambda v: TranscriptTurn(v, Role.USER, "c", 1), "turn_id", "non-empty turn_id"),
            (lambda v: TurnAction(v, Action.KEEP), "turn_id", "non-empty turn_id"),
            (
                lambda v: TurnAction("t", Action.SUMMARIZE, v),
                "summary_group",
                "non-empty group_id",
            ),
            (
                lambda v: SummarizationRequest(v, ("a",), 1, "p"),
                "group_id",
                "non-empty group_id",
            ),
            (
                lambda v: SummarizationRequest("g", ("a", v), 1, "p"),
                "turn_ids[]",
                "non-empty turn_id",
            ),
            (
                lambda v: SummarizationRequest("g", ("a",), 1, v),
                "prompt_id",
                "versioned prompt record",
            ),
        ],
        ids=["turn", "action", "action group", "request group", "request turn", "prompt"],
    )
    def test_is_refused_naming_the_field_with_0_1_words(
        self, build: Callable[[str], object], field: str, words: str, blank: str
    ) -> None:
        error = refused(lambda: build(blank), field)
        assert words in str(error)
        key = "turn_id" if field == "turn_ids[]" else field
        assert error.details[key] == blank

    def test_a_name_with_spaces_around_text_is_accepted_as_it_is(self) -> None:
        assert TranscriptTurn(" a ", Role.USER, "c", 1).turn_id == " a "
        request = SummarizationRequest(" g ", (" a",), 1, " p ")
        assert (request.group_id, request.turn_ids, request.prompt_id) == (" g ", (" a",), " p ")


class TestErrorDetailsCarryTheOffendingValue:
    """As in 0.1, under the field's own name; the current keys stay."""

    @pytest.mark.parametrize(
        ("build", "field", "name", "value"),
        [
            (
                lambda: TranscriptTurn("t", Role.USER, "c", -1),
                "TranscriptTurn",
                "token_estimate",
                -1,
            ),
            (lambda: TurnReplacement("s", -3), "TurnReplacement", "token_estimate", -3),
            (lambda: CompactionBudget(-1), "CompactionBudget", "max_tokens", -1),
            (lambda: CompactionBudget(5, -2), "CompactionBudget", "protected_recent_turns", -2),
            (
                lambda: SummarizationRequest("g", ("a",), -4, "p"),
                "SummarizationRequest",
                "target_tokens",
                -4,
            ),
            (
                lambda: CompactionBudget(max_tokens=1.5),  # type: ignore[arg-type]
                "CompactionBudget",
                "max_tokens",
                1.5,
            ),
        ],
        ids=["turn estimate", "stub estimate", "max_tokens", "protected", "target", "float"],
    )
    def test_a_bad_figure_is_in_details_under_its_name(
        self, build: Callable[[], object], field: str, name: str, value: object
    ) -> None:
        error = refused(build, f"{field}.{name}")
        assert error.details[name] == value
        assert error.details["field"] == f"{field}.{name}"
        assert error.details["expected"] == "an int >= 0"
        assert error.details["type"] == type(value).__name__

    def test_a_negative_target_is_named_in_the_message(self) -> None:
        error = refused(lambda: SummarizationRequest("g", ("a",), -1, "p"), "target_tokens")
        assert "negative target_tokens" in str(error)

    def test_a_turns_content_never_goes_into_details(self) -> None:
        error = refused(lambda: TranscriptTurn("t", Role.USER, b"secret", 1), "content")  # type: ignore[arg-type]
        assert "content" not in error.details
        assert error.details["type"] == "bytes"


class TestRepeatedTurnIds:
    def test_a_request_repeating_an_id_is_refused_with_the_sorted_repeats(self) -> None:
        error = refused(
            lambda: SummarizationRequest("g", ("b", "a", "b", "c", "a"), 1, "p"),
            "SummarizationRequest.turn_ids",
        )
        assert error.details["duplicate_turn_ids"] == ["a", "b"]
        assert "repeats a turn id" in str(error)

    def test_a_request_repeating_one_id_names_it(self) -> None:
        error = refused(lambda: SummarizationRequest("g", ("a", "a"), 1, "p"), "turn_ids")
        assert error.details["duplicate_turn_ids"] == ["a"]
        assert str(error) == "SummarizationRequest 'g' repeats a turn id: ['a']"

    def test_a_request_covering_no_turns_says_so(self) -> None:
        error = refused(lambda: SummarizationRequest("g", (), 1, "p"), "turn_ids")
        assert "covers no turns" in str(error)

    def test_a_transcript_repeating_ids_names_every_repeat_sorted_and_the_first(self) -> None:
        turns = (user("b"), user("a"), user("b"), user("c"), user("a"), user("a"))
        error = refused(lambda: Transcript(turns), "Transcript.turns")
        assert error.details["duplicate_turn_ids"] == ["a", "b"]
        assert (error.details["turn_id"], error.details["index"]) == ("b", 2)
