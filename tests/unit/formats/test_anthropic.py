"""``cutctx.formats.anthropic``: Messages API conversations to and from transcripts."""

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
from cutctx.formats import anthropic
from cutctx.formats._common import SUMMARY_LABEL
from tests.format_validators import anthropic_problems, png
from tests.unit.formats.helpers import WORDS, stub

SUNNY, RAIN = "sunny " * 50, "rain " * 50
SYSTEM = [
    {"type": "text", "text": "You are a weather bot.", "cache_control": {"type": "ephemeral"}}
]
THINKING = {"type": "thinking", "thinking": "Two lookups needed.", "signature": "EqQB"}
RAIN_RESULT = {
    "type": "tool_result",
    "tool_use_id": "toolu_2",
    "cache_control": {"type": "ephemeral"},
    "content": [{"type": "text", "text": RAIN}],
}
# The shape of Anthropic's tool-use guide with extended thinking and parallel tool use.
CONVO: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {
        "role": "assistant",
        "content": [
            THINKING,
            {"type": "text", "text": "Checking."},
            {
                "type": "tool_use",
                "id": "toolu_1",
                "name": "get_weather",
                "input": {"city": "Paris"},
            },
            {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {"city": "Rome"}},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": SUNNY},
            RAIN_RESULT,
            {"type": "text", "text": "Be quick."},
        ],
    },
    {"role": "assistant", "content": "Paris is sunny, Rome is rainy."},
    {"role": "user", "content": "And tomorrow?"},
    {"role": "assistant", "content": "Probably cloudy."},
]
RESERVE = 3 + 4  # framing + the four words of FILLER_TEXT
# system 3+5 (+reserve); m1 3 + thinking 3 + text 1 + two calls of 3 + name 1 + '{"city":"X"}' 1.
COSTS = [8 + RESERVE, 8, 17 + RESERVE, 53, 50, 2, 9, 5, 5]
FILLER = {"role": "user", "content": anthropic.FILLER_TEXT}


def turn(turn_id: str, text: str = "x") -> TranscriptTurn:
    return TranscriptTurn(turn_id, Role.ASSISTANT, text, 1)


class TestToTranscript:
    def test_turns_ids_roles_and_hand_counted_estimates(self) -> None:
        transcript, _ = anthropic.to_transcript(CONVO, estimator=WORDS, system=SYSTEM)
        assert transcript.turn_ids() == (
            "system",
            "m0",
            "m1",
            "m2",
            "m2.1",
            "m2.2",
            "m3",
            "m4",
            "m5",
        )
        assert [t.token_estimate for t in transcript.turns] == COSTS
        assert [t.role for t in transcript.turns][2:6] == [
            Role.ASSISTANT,
            Role.TOOL,
            Role.TOOL,
            Role.USER,
        ]

    def test_the_exchange_is_the_tool_use_turn_and_every_part_of_its_answer(self) -> None:
        transcript, _ = anthropic.to_transcript(CONVO)
        keys = [t.tool_call_id for t in transcript.turns]
        assert keys == [None, None, "m1", "m1", "m1", "m1", None, None, None]

    def test_count_tokens_counts_the_filler_reserves_as_compact_messages_does(self) -> None:
        # One count: what the window and compact_messages price the request at, reserves in.
        transcript, _ = anthropic.to_transcript(CONVO, estimator=WORDS, system=SYSTEM)
        counted = anthropic.count_tokens(CONVO, estimator=WORDS, system=SYSTEM)
        assert counted == transcript.token_estimate() == sum(COSTS)

    def test_the_system_turn_exists_without_a_system_prompt(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO[:1], estimator=WORDS)
        first = transcript.turns[0]
        assert (first.turn_id, first.content, first.token_estimate, first.pinned) == (
            "system",
            "",
            RESERVE,
            True,
        )
        assert binding.system is None

    @pytest.mark.parametrize(
        ("size", "expected"),
        [((1000, 1000), 1334), ((200, 200), 54), ((2000, 1000), 1590), ((4000, 100), 82)],
    )
    def test_images_are_priced_by_their_size(self, size: tuple[int, int], expected: int) -> None:
        source = {"type": "base64", "media_type": "image/png", "data": png(*size) + "A" * 9000}
        message: dict[str, Any] = {"role": "user", "content": [{"type": "image", "source": source}]}
        # the system turn's filler reserve, the message's framing, the image
        assert anthropic.count_tokens([message], estimator=WORDS) == RESERVE + 3 + expected

    def test_other_media_and_blocks_are_priced_by_the_documented_rules(self) -> None:
        content = [
            {"type": "image", "source": {"type": "url", "url": "https://x/cat.jpg"}},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBE"},
            },
            {
                "type": "document",
                "source": {"type": "text", "media_type": "text/plain", "data": "a b c"},
            },
            {"type": "document", "source": {"type": "content", "content": "d e"}},
            {
                "type": "search_result",
                "source": "https://kb/x",
                "title": "t u",
                "content": [{"type": "text", "text": "v w x"}],
                "citations": {"enabled": True},
            },
        ]
        # reserve, framing, 1600 + 3000 + 3 + 2 + search result: title 2 + source 1 + text 3
        assert anthropic.count_tokens([{"role": "user", "content": content}], estimator=WORDS) == (
            RESERVE + 3 + 1600 + 3000 + 3 + 2 + 6
        )

    def test_redacted_thinking_is_priced_by_its_data(self) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "a b"},
                    {"type": "text", "text": "ok"},
                ],
            },
        ]
        transcript, _ = anthropic.to_transcript(messages, estimator=WORDS)
        assert transcript.turns[2].token_estimate == 3 + 2 + 1 + RESERVE


class TestFromTranscript:
    def test_untouched_messages_come_back_as_the_same_dicts(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO, system=SYSTEM)
        out = anthropic.from_transcript(transcript, binding)
        assert all(a is b for a, b in zip(out, CONVO, strict=True))
        assert binding.system is SYSTEM

    def test_each_tool_result_is_masked_on_its_own_keeping_ids_and_cache_markers(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO, estimator=WORDS, system=SYSTEM)
        policy = ObservationMaskingPolicy(0, estimator=WORDS)
        total = sum(COSTS)
        one = policy.decide(transcript, CompactionBudget(total - 41, 0))
        out = anthropic.from_transcript(CompactionExecutor().apply(transcript, one), binding)
        assert one.tokens_after_estimate == total - 41
        assert out[2]["content"][0] == {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": stub(SUNNY, 53),
        }
        assert out[2]["content"][1] is RAIN_RESULT
        both = policy.decide(transcript, CompactionBudget(total - 41 - 38, 0))
        out = anthropic.from_transcript(CompactionExecutor().apply(transcript, both), binding)
        assert out[2]["content"][1] == {
            **RAIN_RESULT,
            "content": [{"type": "text", "text": stub(RAIN, 50)}],
        }
        assert out[2]["content"][2] is CONVO[2]["content"][2]
        assert [a is b for a, b in zip(out, CONVO, strict=True)] == [
            True,
            True,
            False,
            True,
            True,
            True,
        ]
        assert anthropic_problems(out) == []

    def test_a_leading_assistant_gets_the_filler_user_message(self) -> None:
        done = compact_messages(
            CONVO,
            max_tokens=sum(COSTS) - 8,
            format="anthropic",
            system=SYSTEM,
            estimator=WORDS,
            protected_recent_turns=7,
        )
        assert done.report.dropped_turn_ids == ("m0",)
        assert done.messages == [FILLER, *CONVO[1:]]
        assert (
            anthropic.count_tokens(done.messages, estimator=WORDS, system=SYSTEM) <= sum(COSTS) - 8
        )
        assert anthropic_problems(done.messages) == []

    def test_a_summary_is_a_labelled_user_message_so_no_filler_is_needed(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO)
        view = Transcript(
            (transcript.turns[0], turn("summary:span-1", "Asked weather.  "), *transcript.turns[6:])
        )
        out = anthropic.from_transcript(view, binding)
        summary = {"role": "user", "content": f"{SUMMARY_LABEL}\n\nAsked weather."}
        assert out == [summary, *CONVO[3:]]
        assert anthropic_problems(out) == []

    def test_a_summary_is_never_merged_ahead_of_a_tool_use(self) -> None:
        convo: list[dict[str, Any]] = [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "user", "content": "Look it up."},
            *CONVO[1:],
        ]
        transcript, binding = anthropic.to_transcript(convo)
        kept = [t for t in transcript.turns if t.turn_id not in ("m0", "m1", "m2")]
        view = Transcript((kept[0], turn("summary:span-1", "Greetings."), *kept[1:]))
        out = anthropic.from_transcript(view, binding)
        assert out[0] == {"role": "user", "content": f"{SUMMARY_LABEL}\n\nGreetings."}
        assert out[1] is convo[3]  # the thinking, tool_use message, untouched and on its own
        assert anthropic_problems(out) == []

    def test_thinking_stays_first_so_a_filler_goes_between_two_assistants(self) -> None:
        thinker = {"role": "assistant", "content": [THINKING, {"type": "text", "text": "Sure."}]}
        convo: list[dict[str, Any]] = [
            CONVO[0],
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "More?"},
            thinker,
        ]
        transcript, binding = anthropic.to_transcript(convo)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m2"))
        out = anthropic.from_transcript(view, binding)
        assert out == [convo[0], convo[1], FILLER, thinker]
        assert anthropic_problems(out) == []

    def test_adjacent_user_messages_are_merged_block_by_block(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m3"))
        out = anthropic.from_transcript(view, binding)
        assert out[2] == {
            "role": "user",
            "content": [*CONVO[2]["content"], {"type": "text", "text": "And tomorrow?"}],
        }
        assert anthropic_problems(out) == []

    def test_a_summary_without_text_is_still_a_non_empty_message(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO)
        view = Transcript((turn("summary:span-1", " \n"), *transcript.turns[6:]))
        out = anthropic.from_transcript(view, binding)
        assert out[0] == {"role": "user", "content": SUMMARY_LABEL}
        assert anthropic_problems(out) == []

    def test_a_view_holding_part_of_a_split_message_is_refused(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO)
        view = Transcript(tuple(t for t in transcript.turns if t.turn_id != "m2.1"))
        with pytest.raises(ValidationError, match="2 of the message's 3 turns") as caught:
            anthropic.from_transcript(view, binding)
        assert caught.value.details["index"] == 2

    def test_an_empty_view_gives_no_messages(self) -> None:
        transcript, binding = anthropic.to_transcript(CONVO)
        assert anthropic.from_transcript(Transcript(transcript.turns[:1]), binding) == []


def use(call_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "f", "input": {}}


def result(call_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "r"}


USER = {"role": "user", "content": "q"}
BAD: list[tuple[Any, int | None, str]] = [
    (None, None, "must be a list"),
    ([{"role": "system", "content": "s"}], 0, "system="),
    ([{"role": "assistant", "content": "a"}], 0, "open with a user"),
    ([USER, USER], 1, "two user messages"),
    ([USER, {"role": "assistant", "content": [use("t1")]}, USER], 1, "no tool_result"),
    ([USER, {"role": "assistant", "content": [use("t1")]}], 1, "no tool_result"),
    ([USER, {"role": "assistant", "content": [use("t1"), use("t1")]}], 1, "repeats"),
    (
        [USER, {"role": "assistant", "content": "a"}, {"role": "user", "content": [result("t1")]}],
        2,
        "no matching",
    ),
    (
        [
            USER,
            {"role": "assistant", "content": [use("t1")]},
            {"role": "user", "content": [result("t1"), result("t1")]},
        ],
        2,
        "answers it twice",
    ),
    ([{"role": "user", "content": [result("t1")]}], 0, "no matching"),
    ([{"role": "user", "content": 5}], 0, "must be a string or a list"),
    ([{"role": "user", "content": [{"text": "x"}]}], 0, "no string type"),
    ([{"role": "user", "content": [{"type": "text"}]}], 0, "text must be a string"),
    ([{"role": "user", "content": ["x"]}], 0, "must be an object"),
    ([USER, {"role": "assistant", "content": [{"type": "thinking"}]}], 1, "thinking must be"),
    (
        [USER, {"role": "assistant", "content": [{"type": "tool_use", "name": "f"}]}],
        1,
        "id must be",
    ),
    (
        [USER, {"role": "assistant", "content": [{"type": "tool_use", "id": "t"}]}],
        1,
        "name must be",
    ),
    ([{"role": "user", "content": [{"type": "tool_result"}]}], 0, "tool_use_id must be"),
]


class TestMalformedInput:
    @pytest.mark.parametrize(("messages", "index", "fragment"), BAD)
    def test_is_refused_with_a_typed_error_naming_the_message(
        self, messages: Any, index: int | None, fragment: str
    ) -> None:
        with pytest.raises(ValidationError, match=fragment) as caught:
            anthropic.to_transcript(messages)
        assert caught.value.details["index"] == index

    def test_a_bad_system_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="system"):
            anthropic.to_transcript([USER], system={"text": "x"})  # type: ignore[arg-type]


SEARCH_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_1",
    "name": "web_search",
    "input": {"query": "rain"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_1",
    "content": [{"type": "web_search_result", "url": "u", "title": "t", "encrypted_content": "e"}],
}
MCP_USE = {
    "type": "mcp_tool_use",
    "id": "mcptoolu_1",
    "name": "ask",
    "server_name": "w",
    "input": {},
}
MCP_RESULT = {
    "type": "mcp_tool_result",
    "tool_use_id": "mcptoolu_1",
    "content": [{"type": "text", "text": "an answer"}],
}
SERVED: list[dict[str, Any]] = [
    {"role": "user", "content": "Search for rain."},
    {
        "role": "assistant",
        "content": [
            SEARCH_USE,
            SEARCH_RESULT,
            MCP_USE,
            MCP_RESULT,
            {"type": "text", "text": "Wet."},
        ],
    },
    {
        "role": "user",
        "content": [
            {"type": "container_upload", "file_id": "file_1"},
            {"type": "x_future_block", "v": 1},
            {"type": "text", "text": "Thanks."},
        ],
    },
    {"role": "assistant", "content": [{"type": "compaction", "content": "We searched for rain."}]},
    {"role": "user", "content": "Next?"},
]


class TestServerBlocks:
    def test_server_and_mcp_uses_stay_in_one_turn_with_their_results(self) -> None:
        transcript, binding = anthropic.to_transcript(SERVED)
        assert transcript.turn_ids() == ("system", "m0", "m1", "m2", "m3", "m4")
        assert transcript.turns[2].tool_call_id is None  # nothing to answer in the next message
        assert anthropic.from_transcript(transcript, binding) == SERVED

    def test_a_compaction_block_pins_its_message(self) -> None:
        transcript, _ = anthropic.to_transcript(SERVED)
        assert [turn.turn_id for turn in transcript.turns if turn.pinned] == ["system", "m3"]
        done = compact_messages(SERVED, max_tokens=30, format="anthropic", protected_recent_turns=1)
        assert SERVED[3] in done.messages
        assert anthropic_problems(done.messages) == []

    def test_new_blocks_are_priced_by_the_documented_rules(self) -> None:
        def cost(block: dict[str, Any]) -> int:
            message = {"role": "user", "content": [block]}  # less the reserve and framing
            return anthropic.count_tokens([message], estimator=WORDS) - RESERVE - 3

        assert cost(SEARCH_USE) == 3 + 1 + 1  # framing, name, '{"query":"rain"}'
        assert cost(MCP_USE) == 3 + 1 + 1
        assert cost(SEARCH_RESULT) == 1  # compact JSON without spaces
        assert cost(MCP_RESULT) == 2  # '...[{"type":"text","text":"an' 'answer"}]}'
        assert cost({"type": "container_upload", "file_id": "file_1"}) == 1
        assert cost({"type": "compaction", "content": "We searched for rain."}) == 4
        assert cost({"type": "compaction", "content": None}) == 0
        document = {
            "type": "document",
            "title": "a b",
            "context": "c",
            "citations": {"enabled": True},
            "source": {"type": "content", "content": [{"type": "text", "text": "d e f"}]},
        }
        assert cost(document) == 2 + 1 + 3

    def test_an_unknown_block_is_carried_through_unchanged(self) -> None:
        transcript, binding = anthropic.to_transcript(SERVED)
        out = anthropic.from_transcript(transcript, binding)
        assert out[2] is SERVED[2]

    def test_a_server_result_without_its_use_in_the_message_is_refused(self) -> None:
        messages = [SERVED[0], {"role": "assistant", "content": [SEARCH_RESULT, SEARCH_USE]}]
        with pytest.raises(ValidationError, match="no server_tool_use before it") as caught:
            anthropic.to_transcript(messages)
        assert caught.value.details["index"] == 1


class TestProviderRules:
    @pytest.mark.parametrize(
        ("messages", "index", "fragment"),
        [
            ([{"role": "user", "content": ""}], 0, "must have content"),
            ([{"role": "user", "content": []}], 0, "must have content"),
            ([USER, {"role": "assistant", "content": []}, USER], 1, "must have content"),
            (
                [
                    USER,
                    {"role": "assistant", "content": [use("t1")]},
                    {"role": "user", "content": [result("t1")]},
                    {"role": "assistant", "content": [use("t1")]},
                    {"role": "user", "content": [result("t1")]},
                ],
                3,
                "used by two calls",
            ),
            (
                [USER, {"role": "assistant", "content": [SEARCH_USE, SEARCH_RESULT, SEARCH_USE]}],
                1,
                "repeats",
            ),
        ],
    )
    def test_inputs_the_provider_refuses_get_a_typed_error_naming_the_message(
        self, messages: list[dict[str, Any]], index: int, fragment: str
    ) -> None:
        with pytest.raises(ValidationError, match=fragment) as caught:
            anthropic.to_transcript(messages)
        assert caught.value.details["index"] == index

    def test_an_empty_final_assistant_message_is_allowed(self) -> None:
        messages: list[dict[str, Any]] = [USER, {"role": "assistant", "content": []}]
        transcript, _ = anthropic.to_transcript(messages)
        assert transcript.turn_ids() == ("system", "m0", "m1")

    def test_count_tokens_accepts_a_partial_history(self) -> None:
        prefix = CONVO[:2]  # two tool_use blocks still waiting for their results
        with pytest.raises(ValidationError, match="no tool_result"):
            anthropic.to_transcript(prefix)
        assert anthropic.count_tokens(prefix, estimator=WORDS, system=SYSTEM) == sum(COSTS[:3])
        # no validity needed at all: a results message alone, two user messages in a row
        assert anthropic.count_tokens([CONVO[2], CONVO[4]], estimator=WORDS) == (
            RESERVE + sum(COSTS[3:6]) + COSTS[7]
        )
