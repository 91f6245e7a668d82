"""``cutctx.formats.openai_responses``: Responses API input items to and from transcripts."""

from __future__ import annotations

from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import (
    CompactionBudget,
    CompactionExecutor,
    ObservationMaskingPolicy,
    Role,
    Transcript,
    TranscriptTurn,
    compact_messages,
)
from cutctx.formats import openai_responses
from cutctx.formats._common import SUMMARY_LABEL
from tests.format_validators import responses_problems
from tests.unit.formats.helpers import WORDS, stub

SUNNY, RAIN = "sunny " * 50, "rain " * 50
# The shape of OpenAI's Responses function-calling guide: reasoning, parallel calls, outputs.
ITEMS: list[dict[str, Any]] = [
    {"role": "developer", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "type": "reasoning",
        "id": "rs_1",
        "encrypted_content": "gAAAA",
        "summary": [{"type": "summary_text", "text": "Need two lookups."}],
    },
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Paris"}',
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "call_2",
        "name": "get_weather",
        "arguments": '{"city": "Rome"}',
    },
    {"type": "function_call_output", "call_id": "call_2", "output": RAIN},
    {
        "type": "function_call_output",
        "call_id": "call_1",
        "output": [{"type": "input_text", "text": SUNNY}],
    },
    {
        "type": "message",
        "role": "assistant",
        "id": "msg_1",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Paris sunny, Rome rainy.", "annotations": []}],
    },
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {"role": "assistant", "content": "Anything else?"},
    {"role": "user", "content": "No, thanks."},
]
COSTS = [8, 8, 6, 6, 6, 53, 53, 7, 3, 5, 5]


class TestToTranscript:
    def test_one_turn_per_item_with_hand_counted_estimates(self) -> None:
        transcript, _ = openai_responses.to_transcript(ITEMS, estimator=WORDS)
        assert transcript.turn_ids() == tuple(f"m{i}" for i in range(11))
        assert [turn.token_estimate for turn in transcript.turns] == COSTS
        assert [turn.role for turn in transcript.turns][:6] == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.ASSISTANT,
            Role.ASSISTANT,
            Role.TOOL,
        ]

    def test_reasoning_joins_the_exchange_of_the_item_it_precedes(self) -> None:
        transcript, _ = openai_responses.to_transcript(ITEMS)
        keys = [turn.tool_call_id for turn in transcript.turns]
        assert keys == [None, None, "m2", "m2", "m2", "m2", "m2", None, "m8", "m8", None]

    def test_trailing_reasoning_items_travel_together(self) -> None:
        items: list[dict[str, Any]] = [
            {"role": "user", "content": "q"},
            {"type": "reasoning", "summary": []},
            {"type": "reasoning", "summary": []},
        ]
        transcript, _ = openai_responses.to_transcript(items)
        assert [turn.tool_call_id for turn in transcript.turns] == [None, "m1", "m1"]
        single, _ = openai_responses.to_transcript(items[:2])
        assert single.turns[1].tool_call_id is None

    def test_custom_tool_calls_pair_by_call_id(self) -> None:
        items: list[dict[str, Any]] = [
            {"type": "custom_tool_call", "call_id": "c", "name": "sh", "input": "ls -la"},
            {"type": "custom_tool_call_output", "call_id": "c", "output": "a b"},
        ]
        transcript, _ = openai_responses.to_transcript(items, estimator=WORDS)
        assert [(t.token_estimate, t.tool_call_id) for t in transcript.turns] == [
            (6, "m0"),
            (5, "m0"),
        ]

    def test_media_and_unknown_parts_are_priced(self) -> None:
        content = [
            {"type": "input_image", "image_url": "https://x/a.png", "detail": "low"},
            {"type": "input_file", "file_id": "file-1"},
            {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "mp3"}},
            {"type": "refusal", "refusal": "no"},
            {"type": "mystery", "v": "a b"},
        ]
        # 3 + 85 + 3000 + 1000 + 1 + words of '{"type":"mystery","v":"a b"}' (2)
        items: list[dict[str, Any]] = [{"role": "user", "content": content}]
        assert openai_responses.count_tokens(items, estimator=WORDS) == 3 + 85 + 3000 + 1000 + 1 + 2

    def test_instructions_are_a_pinned_turn_never_emitted(self) -> None:
        transcript, binding = openai_responses.to_transcript(ITEMS[1:2], system="Be brief.")
        assert transcript.turns[0].pinned
        assert openai_responses.from_transcript(transcript, binding) == ITEMS[1:2]
        assert binding.system == "Be brief."


class TestFromTranscript:
    def test_a_masked_output_keeps_its_call_id_and_only_its_output_changes(self) -> None:
        transcript, binding = openai_responses.to_transcript(ITEMS, estimator=WORDS)
        plan = ObservationMaskingPolicy(0, estimator=WORDS).decide(
            transcript, CompactionBudget(max_tokens=78, protected_recent_turns=0)
        )
        out = openai_responses.from_transcript(
            CompactionExecutor().apply(transcript, plan), binding
        )
        assert out[5] == {
            "type": "function_call_output",
            "call_id": "call_2",
            "output": stub(RAIN, 53),
        }
        assert out[6] == {
            "type": "function_call_output",
            "call_id": "call_1",
            "output": [{"type": "input_text", "text": stub(SUNNY, 53)}],
        }
        assert all(out[i] is ITEMS[i] for i in range(11) if i not in (5, 6))

    def test_a_summary_is_a_labelled_user_message_item(self) -> None:
        transcript, binding = openai_responses.to_transcript(ITEMS)
        view = Transcript(
            (
                TranscriptTurn("summary:span-1", Role.ASSISTANT, "Asked weather.", 4),
                *transcript.turns[7:],
            )
        )
        out = openai_responses.from_transcript(view, binding)
        assert out[0] == {
            "type": "message",
            "role": "user",
            "content": f"{SUMMARY_LABEL}\n\nAsked weather.",
        }
        assert responses_problems(out, ITEMS) == []

    def test_dropping_takes_reasoning_calls_and_outputs_together(self) -> None:
        done = compact_messages(
            ITEMS,
            max_tokens=60,
            format="openai_responses",
            estimator=WORDS,
            protected_recent_turns=3,
        )
        assert done.report.dropped_turn_ids == ("m1", "m2", "m3", "m4", "m5", "m6")
        assert done.messages == [ITEMS[0], *ITEMS[7:]]
        assert done.plan.tokens_after_estimate == 28
        assert responses_problems(done.messages, ITEMS) == []


BAD: list[tuple[Any, int | None, str]] = [
    ("items", None, "must be a list"),
    ([{"foo": 1}], 0, "no string type"),
    ([{"type": 7}], 0, "no string type"),
    ([{"role": "tool", "content": "x"}], 0, "unknown role"),
    ([{"type": "function_call_output", "call_id": "c", "output": "x"}], 0, "no earlier"),
    (
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "custom_tool_call_output", "call_id": "c", "output": "x"},
        ],
        1,
        "no earlier",
    ),
    (
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c", "output": "x"},
            {"type": "function_call_output", "call_id": "c", "output": "y"},
        ],
        2,
        "already answered",
    ),
    (
        [
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ],
        1,
        "used by two calls",
    ),
    (
        [
            {"role": "user", "content": "q"},
            {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
        ],
        1,
        "no output",
    ),
    (
        [{"type": "function_call", "call_id": 1, "name": "f", "arguments": "{}"}],
        0,
        "call_id must be",
    ),
    ([{"type": "function_call", "call_id": "c", "name": "f"}], 0, "arguments must be"),
    ([{"type": "reasoning", "summary": "x"}], 0, "summary must be a list"),
    ([{"type": "reasoning", "summary": [{"text": 3}]}], 0, "text must be a string"),
    ([{"role": "user", "content": 3}], 0, "content must be a string or a list"),
    ([{"role": "user", "content": [{"text": "x"}]}], 0, "no string type"),
    ([{"role": "user", "content": [{"type": "input_text"}]}], 0, "text must be a string"),
]


class TestMalformedInput:
    @pytest.mark.parametrize(("items", "index", "fragment"), BAD)
    def test_is_refused_with_a_typed_error_naming_the_item(
        self, items: Any, index: int | None, fragment: str
    ) -> None:
        with pytest.raises(ValidationError, match=fragment) as caught:
            openai_responses.to_transcript(items)
        assert caught.value.details["index"] == index
