"""``cutctx.formats.openai_chat``: Chat Completions messages to and from transcripts."""

from __future__ import annotations

import copy
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
from cutctx.formats import openai_chat
from tests.format_validators import chat_problems, png
from tests.unit.formats.helpers import WORDS, stub


def call(call_id: str, city: str) -> dict[str, Any]:
    arguments = '{"city": "' + city + '"}'
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "get_weather", "arguments": arguments},
    }


SUNNY, RAIN, CLOUDY = "sunny " * 50, "rain " * 50, "cloudy " * 40
# The shape of OpenAI's function-calling guide: parallel calls, then a follow-up call.
WEATHER: list[dict[str, Any]] = [
    {"role": "developer", "content": "You are a weather bot."},
    {"role": "user", "content": "What's the weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("call_1", "Paris"), call("call_2", "Rome")],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": SUNNY},
    {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": RAIN}]},
    {"role": "assistant", "content": "Paris is sunny, Rome is rainy."},
    {"role": "user", "content": "And tomorrow?", "name": "alice"},
    {"role": "assistant", "content": None, "tool_calls": [call("call_3", "both")]},
    {"role": "tool", "tool_call_id": "call_3", "content": CLOUDY},
    {"role": "assistant", "content": "Cloudy in both."},
]
# Framing 3 per message and per call; one token per word (see the guide's pricing rules).
WEATHER_COSTS = [8, 10, 15, 53, 53, 9, 6, 9, 43, 6]


class TestToTranscript:
    def test_one_turn_per_message_with_roles_and_hand_counted_estimates(self) -> None:
        transcript, _ = openai_chat.to_transcript(WEATHER, estimator=WORDS)
        assert transcript.turn_ids() == tuple(f"m{i}" for i in range(10))
        assert [turn.token_estimate for turn in transcript.turns] == WEATHER_COSTS
        assert [turn.role for turn in transcript.turns][:5] == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.TOOL,
        ]

    def test_a_call_and_all_its_results_share_one_exchange_id(self) -> None:
        transcript, _ = openai_chat.to_transcript(WEATHER)
        ids = [turn.tool_call_id for turn in transcript.turns]
        assert ids == [None, None, "m2", "m2", "m2", None, None, "m7", "m7", None]

    def test_tool_result_text_is_the_turn_content(self) -> None:
        transcript, _ = openai_chat.to_transcript(WEATHER)
        assert transcript.turns[3].content == SUNNY
        assert transcript.turns[4].content == RAIN

    def test_request_level_system_is_a_pinned_priced_turn(self) -> None:
        transcript, binding = openai_chat.to_transcript(
            WEATHER[1:2], estimator=WORDS, system="Be brief."
        )
        first = transcript.turns[0]
        assert (first.turn_id, first.role, first.pinned, first.token_estimate) == (
            "system",
            Role.SYSTEM,
            True,
            5,
        )
        assert openai_chat.from_transcript(transcript, binding) == WEATHER[1:2]

    def test_without_a_tokenizer_there_is_no_framing(self) -> None:
        assert openai_chat.count_tokens([{"role": "user", "content": "twelve chars"}]) == 3

    def test_media_are_priced_from_metadata(self) -> None:
        def image(url: str, detail: str | None = None) -> dict[str, Any]:
            body: dict[str, Any] = {"url": url}
            if detail:
                body["detail"] = detail
            return {"type": "image_url", "image_url": body}

        big = "data:image/png;base64," + png(2048, 4096) + "A" * 10_000
        parts = [
            image("https://x/a.png", "low"),  # 85
            image("https://x/a.jpg"),  # unknown size: 1445
            image(big, "high"),  # OpenAI's own example: 2048 x 4096 -> 6 tiles -> 1105
            image("data:image/png;base64," + png(1024, 1024)),  # 4 tiles -> 765
            {"type": "input_audio", "input_audio": {"data": "AAAA" * 1000, "format": "wav"}},
            {"type": "file", "file": {"file_id": "file-1"}},
            {"type": "text", "text": "look"},
        ]
        message: dict[str, Any] = {"role": "user", "content": parts}
        assert openai_chat.count_tokens([message], estimator=WORDS) == (
            3 + 85 + 1445 + 1105 + 765 + 1000 + 3000 + 1
        )

    def test_names_refusals_and_unknown_parts_are_priced(self) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "hi there", "name": "bob"},
            {
                "role": "assistant",
                "content": [{"type": "refusal", "refusal": "no can do"}],
                "refusal": "no",
            },
            {"role": "user", "content": [{"type": "mystery", "v": "a b"}]},
        ]
        # 3+2+1, 3+3+1, 3 + words of '{"type":"mystery","v":"a b"}' (2)
        assert openai_chat.count_tokens(messages, estimator=WORDS) == 6 + 7 + 5

    def test_custom_tool_calls_pair_like_function_calls(self) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": "c", "type": "custom", "custom": {"name": "sh", "input": "ls -la"}}
                ],
            },
            {"role": "tool", "tool_call_id": "c", "content": "a b c"},
        ]
        transcript, _ = openai_chat.to_transcript(messages, estimator=WORDS)
        assert [t.token_estimate for t in transcript.turns] == [4, 3 + 3 + 1 + 2, 6]


class TestFromTranscript:
    def test_kept_messages_are_the_callers_own_dicts(self) -> None:
        transcript, binding = openai_chat.to_transcript(WEATHER)
        out = openai_chat.from_transcript(transcript, binding)
        assert all(a is b for a, b in zip(out, WEATHER, strict=True))

    def test_a_masked_result_keeps_its_ids_and_only_its_body_changes(self) -> None:
        transcript, binding = openai_chat.to_transcript(WEATHER, estimator=WORDS)
        policy = ObservationMaskingPolicy(0, estimator=WORDS)
        plan = policy.decide(transcript, CompactionBudget(max_tokens=130, protected_recent_turns=0))
        view = CompactionExecutor().apply(transcript, plan)
        out = openai_chat.from_transcript(view, binding)
        assert view.report.masked_turn_ids == ("m3", "m4")
        assert out[3] == {"role": "tool", "tool_call_id": "call_1", "content": stub(SUNNY, 53)}
        assert out[4] == {
            "role": "tool",
            "tool_call_id": "call_2",
            "content": [{"type": "text", "text": stub(RAIN, 53)}],
        }
        assert [a is b for a, b in zip(out, WEATHER, strict=True)] == [
            True,
            True,
            True,
            False,
            False,
            True,
            True,
            True,
            True,
            True,
        ]

    def test_a_summary_becomes_an_assistant_message_where_its_span_began(self) -> None:
        transcript, binding = openai_chat.to_transcript(WEATHER)
        view = Transcript(
            (
                transcript.turns[0],
                TranscriptTurn("summary:span-1", Role.ASSISTANT, "They asked about weather.", 5),
                *transcript.turns[5:],
            )
        )
        out = openai_chat.from_transcript(view, binding)
        assert out == [
            WEATHER[0],
            {"role": "assistant", "content": "They asked about weather."},
            *WEATHER[5:],
        ]
        assert chat_problems(out) == []

    def test_a_changed_turn_that_is_not_a_tool_result_is_refused(self) -> None:
        transcript, binding = openai_chat.to_transcript(WEATHER)
        turns = list(transcript.turns)
        turns[1] = TranscriptTurn("m1", Role.USER, "edited", 1)
        with pytest.raises(ValidationError, match="only tool results") as caught:
            openai_chat.from_transcript(Transcript(tuple(turns)), binding)
        assert caught.value.details["index"] == 1

    def test_a_turn_from_elsewhere_or_a_foreign_binding_is_refused(self) -> None:
        transcript, binding = openai_chat.to_transcript(WEATHER)
        stranger = Transcript((TranscriptTurn("x9", Role.USER, "?", 1),))
        with pytest.raises(ValidationError, match="not from this binding"):
            openai_chat.from_transcript(stranger, binding)
        with pytest.raises(ValidationError, match="Binding"):
            openai_chat.from_transcript(transcript, object())  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="Transcript"):
            openai_chat.from_transcript(WEATHER, binding)  # type: ignore[arg-type]


class TestCompactMessagesOnChat:
    def test_masking_first_the_floor_last_then_dropping_whole_exchanges(self) -> None:
        masked = compact_messages(WEATHER, max_tokens=180, format="openai_chat", estimator=WORDS)
        assert masked.report.masked_turn_ids == ("m3",)
        assert masked.messages[3]["content"] == stub(SUNNY, 53)
        assert masked.plan.tokens_after_estimate == 212 - 53 + 12
        floor = compact_messages(WEATHER, max_tokens=150, format="openai_chat", estimator=WORDS)
        assert floor.report.masked_turn_ids == ("m3", "m4")  # m4 is inside the floor
        assert floor.report.dropped_turn_ids == ()
        dropped = compact_messages(WEATHER, max_tokens=100, format="openai_chat", estimator=WORDS)
        assert dropped.report.dropped_turn_ids == ("m1", "m2", "m3", "m4")
        assert dropped.messages == [WEATHER[0], *WEATHER[5:]]
        assert dropped.plan.tokens_after_estimate == 8 + 9 + 6 + 9 + 43 + 6
        assert chat_problems(dropped.messages) == []

    def test_the_input_is_left_as_it_was(self) -> None:
        before = copy.deepcopy(WEATHER)
        compact_messages(
            WEATHER,
            max_tokens=120,
            format="openai_chat",
            estimator=WORDS,
            policy=ObservationMaskingPolicy(0, estimator=WORDS),
        )
        assert before == WEATHER


BAD: list[tuple[Any, int | None, str]] = [
    ({"role": "user"}, None, "must be a list"),
    ([["user", "hi"]], 0, "must be an object"),
    ([{"role": "function", "content": "x"}], 0, "unknown role"),
    ([{"content": "x"}], 0, "unknown role"),
    (
        [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c9", "content": "r"}],
        1,
        "did not make",
    ),
    (
        [{"role": "assistant", "tool_calls": [call("c1", "P")]}, {"role": "user", "content": "q"}],
        0,
        "no tool message",
    ),
    ([{"role": "assistant", "tool_calls": [call("c1", "P")]}], 0, "no tool message"),
    ([{"role": "assistant", "tool_calls": [call("c1", "P"), call("c1", "Q")]}], 0, "repeats"),
    ([{"role": "assistant", "tool_calls": {"id": "c"}}], 0, "tool_calls must be a list"),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "type": "web"}]}], 0, "unknown type"),
    (
        [{"role": "assistant", "tool_calls": [{"type": "function", "function": {}}]}],
        0,
        "id must be a string",
    ),
    (
        [{"role": "assistant", "tool_calls": [{"id": "c", "function": {"name": "f"}}]}],
        0,
        "arguments must be",
    ),
    ([{"role": "assistant", "tool_calls": [{"id": "c", "function": "f"}]}], 0, "must be an object"),
    ([{"role": "user", "content": 7}], 0, "content must be a string or a list"),
    ([{"role": "user", "content": [{"text": "no type"}]}], 0, "no string type"),
    ([{"role": "user", "content": [{"type": "text", "text": 1}]}], 0, "text must be a string"),
    (
        [{"role": "user", "content": [{"type": "image_url", "image_url": "u"}]}],
        0,
        "must be an object",
    ),
    ([{"role": "user", "content": "q", "name": 5}], 0, "name must be a string"),
    ([{"role": "tool", "content": "r"}], 0, "tool_call_id must be a string"),
]


class TestMalformedInput:
    @pytest.mark.parametrize(("messages", "index", "fragment"), BAD)
    def test_is_refused_with_a_typed_error_naming_the_message(
        self, messages: Any, index: int | None, fragment: str
    ) -> None:
        with pytest.raises(ValidationError, match=fragment) as caught:
            openai_chat.to_transcript(messages)
        assert caught.value.details["index"] == index
        assert "\n" not in str(caught.value)

    def test_a_bad_estimator_or_system_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="estimate_tokens"):
            openai_chat.to_transcript([], estimator=object())  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="system"):
            openai_chat.to_transcript([], system=3)  # type: ignore[arg-type]
        with pytest.raises(ValidationError, match="system"):
            openai_chat.to_transcript([], system=[{"type": "image"}])
