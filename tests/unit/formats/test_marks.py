"""``sticky`` and ``priority`` message keys, the ``pin``/``priority`` callables and tool names,
in each of the three formats (``cutctx.formats._common.read_marks``)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from baseaicore import ValidationError

from cutctx import CompactionBudget, CompactionExecutor, DropOldestPolicy, PriorityPolicy, Role
from cutctx.formats import anthropic, openai_chat, openai_responses
from cutctx.formats._marks import read_observations

CHAT: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief.", "sticky": True, "priority": 100},
    {"role": "user", "content": "Weather?", "priority": 1},
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "weather", "arguments": "{}"}},
            {"id": "c2", "type": "custom", "custom": {"name": "clock", "input": "now"}},
        ],
    },
    {"role": "tool", "tool_call_id": "c2", "content": "noon"},
    {"role": "tool", "tool_call_id": "c1", "content": "sunny", "priority": 0},
    {"role": "user", "content": "Thanks.", "sticky": False},
]
RESPONSES: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather?", "sticky": True},
    {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{}"},
    {"type": "custom_tool_call", "call_id": "c2", "name": "clock", "input": "now"},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": "noon", "priority": -3},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
]
ANTHROPIC: list[dict[str, Any]] = [
    {"role": "user", "content": "Weather?", "priority": 2},
    {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "weather", "input": {}},
            {"type": "tool_use", "id": "t2", "name": "clock", "input": {}},
        ],
    },
    {
        "role": "user",
        "sticky": True,
        "priority": 1,
        "content": [
            {"type": "tool_result", "tool_use_id": "t2", "content": "noon"},
            {"type": "tool_result", "tool_use_id": "t1", "content": "sunny"},
            {"type": "text", "text": "Hurry."},
        ],
    },
]


def marks(turn: Any) -> tuple[bool, str | None, str | None]:
    return (
        turn.pinned,
        turn.metadata.get("cutctx.priority"),
        turn.metadata.get("cutctx.tool_name"),
    )


def keep_all(module: Any, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    transcript, binding = module.to_transcript(messages)
    plan = DropOldestPolicy().decide(transcript, CompactionBudget(transcript.token_estimate(), 0))
    out: list[dict[str, Any]] = module.from_transcript(
        CompactionExecutor().apply(transcript, plan), binding
    )
    return out


def without_marks(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k not in ("sticky", "priority")}


class TestMessageMarks:
    def test_chat_keys_become_pins_and_priorities_and_results_name_their_tool(self) -> None:
        transcript, _ = openai_chat.to_transcript(CHAT)
        assert [marks(turn) for turn in transcript.turns] == [
            (True, "100", None),
            (False, "1", None),
            (False, None, None),
            (False, None, "clock"),
            (False, "0", "weather"),
            (False, None, None),
        ]

    def test_responses_keys_and_tool_names(self) -> None:
        transcript, _ = openai_responses.to_transcript(RESPONSES)
        assert [marks(turn) for turn in transcript.turns] == [
            (True, None, None),
            (False, None, None),
            (False, None, None),
            (False, "-3", "clock"),
            (False, None, "weather"),
        ]

    def test_anthropic_marks_every_turn_of_a_split_message(self) -> None:
        transcript, _ = anthropic.to_transcript(ANTHROPIC)
        assert [(t.turn_id, t.role, *marks(t)) for t in transcript.turns] == [
            ("system", Role.SYSTEM, True, None, None),
            ("m0", Role.USER, False, "2", None),
            ("m1", Role.ASSISTANT, False, None, None),
            ("m2", Role.TOOL, True, "1", "clock"),
            ("m2.1", Role.TOOL, True, "1", "weather"),
            ("m2.2", Role.USER, True, "1", None),
        ]

    @pytest.mark.parametrize(
        ("module", "messages"),
        [(openai_chat, CHAT), (openai_responses, RESPONSES), (anthropic, ANTHROPIC)],
        ids=["openai_chat", "openai_responses", "anthropic"],
    )
    def test_the_keys_are_never_sent_on_and_the_callers_dicts_never_change(
        self, module: Any, messages: list[dict[str, Any]]
    ) -> None:
        before = copy.deepcopy(messages)
        out = keep_all(module, messages)
        assert out == [without_marks(message) for message in messages]
        for sent, given in zip(out, messages, strict=True):
            marked = "sticky" in given or "priority" in given
            assert (sent is given) is not marked
        assert messages == before

    def test_a_masked_marked_message_loses_the_keys_too(self) -> None:
        body = "sunny " * 200
        messages = [*CHAT[:4], {**CHAT[4], "content": body}, CHAT[5]]
        transcript, binding = openai_chat.to_transcript(messages)
        # 314 tokens; the 300-token result is the only one worth a stub (32): 46 fits.
        plan = PriorityPolicy(mask_results=True).decide(transcript, CompactionBudget(60, 1))
        out = openai_chat.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert out[4]["content"].startswith("[tool result masked by cutctx]")
        assert "priority" not in out[4]
        assert out[3] is messages[3]

    def test_callables_mark_without_changing_the_messages(self) -> None:
        messages = [without_marks(message) for message in CHAT]
        seen: list[int] = []

        def rank(index: int, message: dict[str, Any]) -> int:
            seen.append(index)
            return 100 if message["role"] == "system" else index

        transcript, binding = openai_chat.to_transcript(
            messages, priority=rank, pin=lambda index, _message: index == 1
        )
        assert [marks(turn)[:2] for turn in transcript.turns] == [
            (False, "100"),
            (True, "1"),
            (False, "2"),
            (False, "3"),
            (False, "4"),
            (False, "5"),
        ]
        assert seen == [0, 1, 2, 3, 4, 5]
        assert all(a is b for a, b in zip(binding.messages, messages, strict=True))

    def test_a_callable_priority_replaces_the_key_and_pin_adds_to_sticky(self) -> None:
        transcript, _ = openai_chat.to_transcript(
            CHAT, priority=lambda _index, _message: 7, pin=lambda _index, _message: False
        )
        assert [marks(turn)[:2] for turn in transcript.turns][:2] == [(True, "7"), (False, "7")]

    @pytest.mark.parametrize(
        ("message", "match"),
        [
            ({"role": "user", "content": "x", "sticky": "yes"}, "sticky must be true or false"),
            ({"role": "user", "content": "x", "sticky": None}, "sticky must be true or false"),
            ({"role": "user", "content": "x", "priority": "1"}, "priority must be an integer"),
            ({"role": "user", "content": "x", "priority": 1.0}, "priority must be an integer"),
            ({"role": "user", "content": "x", "priority": True}, "priority must be an integer"),
        ],
    )
    def test_a_bad_key_is_refused_naming_the_message(
        self, message: dict[str, Any], match: str
    ) -> None:
        with pytest.raises(ValidationError, match=match) as caught:
            openai_chat.to_transcript([{"role": "user", "content": "ok"}, message])
        assert caught.value.details["index"] == 1

    def test_a_callable_returning_the_wrong_type_is_refused_naming_the_message(self) -> None:
        with pytest.raises(ValidationError, match=r"priority\(index, message\)") as caught:
            anthropic.to_transcript(ANTHROPIC, priority=lambda _index, _message: "high")  # type: ignore[arg-type, return-value]
        assert caught.value.details["index"] == 0
        with pytest.raises(ValidationError, match=r"pin\(index, message\)"):
            openai_responses.to_transcript(RESPONSES, pin=lambda _index, _message: 1)  # type: ignore[arg-type, return-value]

    def test_a_callable_that_is_not_callable_is_refused(self) -> None:
        with pytest.raises(ValidationError, match="pin must be callable") as caught:
            openai_chat.to_transcript(CHAT, pin=True)  # type: ignore[arg-type]
        assert caught.value.details["field"] == "pin"

    def test_count_tokens_ignores_the_keys(self) -> None:
        assert openai_chat.count_tokens(CHAT) == openai_chat.count_tokens(
            [without_marks(message) for message in CHAT]
        )


def react(steps: int, size: int = 40) -> list[dict[str, Any]]:
    """A ReAct history in Chat: the task, then thought/action and its observation, by turns."""
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Answer with Thought/Action/Observation."},
        {"role": "user", "content": "Question: how tall is the tower?"},
    ]
    for step in range(steps):
        history.append({"role": "assistant", "content": f"Thought: look.\nAction: search[{step}]"})
        history.append({"role": "user", "content": f"Observation: {step} " + "w" * size})
    return history


def is_observation(message: dict[str, Any]) -> bool:
    return str(message.get("content", "")).startswith("Observation:")


class TestReadObservations:
    def test_a_marked_user_message_is_a_tool_result_in_the_assistants_exchange(self) -> None:
        transcript, binding = openai_chat.to_transcript(react(2))
        turns, parts = read_observations(
            "openai_chat",
            transcript.turns,
            binding.parts,
            binding.messages,
            lambda _index, message: is_observation(message),
        )
        roles = [turn.role for turn in turns]
        assert roles == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.ASSISTANT,
            Role.TOOL,
        ]
        assert turns[2].tool_call_id == turns[3].tool_call_id == "observation:2"
        assert turns[4].tool_call_id == turns[5].tool_call_id == "observation:4"
        assert turns[1] is transcript.turns[1]  # the question: an unmarked user message, untouched
        assert parts["m3"].maskable
        assert not parts["m1"].maskable

    def test_a_history_read_in_two_runs_keys_its_exchanges_as_read_whole(self) -> None:
        history = react(3)
        mark = lambda _index, message: is_observation(message)  # noqa: E731
        whole, binding = openai_chat.to_transcript(history)
        once, _ = read_observations(
            "openai_chat", whole.turns, binding.parts, binding.messages, mark
        )
        split = []
        for start, end in ((0, 3), (3, len(history))):
            reader = openai_chat.OPENAI_CHAT.reader(estimator=binding.estimator)
            reader.start(start)  # type: ignore[attr-defined]
            read = reader.read(history[start:end], final=True)
            turns, _ = read_observations(
                "openai_chat", read.turns, read.parts, read.sent, mark, offset=start
            )
            split.extend(turns)
        assert split == once

    def test_the_framing_rides_on_the_observation(self) -> None:
        transcript, binding = openai_chat.to_transcript(react(1))
        turns, _ = read_observations(
            "openai_chat",
            transcript.turns,
            binding.parts,
            binding.messages,
            lambda _index, message: is_observation(message),
            framing=1,
        )
        assert turns[3].metadata["cutctx.framing"] == "1"

    def test_a_user_message_holding_tool_results_is_never_an_observation(self) -> None:
        transcript, binding = anthropic.to_transcript(ANTHROPIC)
        turns, _ = read_observations(
            "anthropic", transcript.turns, binding.parts, binding.messages, lambda *_: True
        )
        by_message = {
            turn.turn_id: (binding.parts[turn.turn_id].index, turn.role) for turn in turns
        }
        before = {turn.turn_id: turn.role for turn in transcript.turns}
        for turn_id, (index, role) in by_message.items():
            if index == 2:  # the message with tool_result blocks: as read
                assert role is before[turn_id]
        assert by_message["m0"] == (0, Role.TOOL)  # the first user message, read whole: marked

    def test_an_answer_that_is_not_a_bool_is_refused_naming_the_message(self) -> None:
        transcript, binding = openai_chat.to_transcript(react(1))
        with pytest.raises(ValidationError, match=r"messages\[1\]: observation\(index, message\)"):
            read_observations(
                "openai_chat",
                transcript.turns,
                binding.parts,
                binding.messages,
                lambda *_: 1,  # type: ignore[arg-type]
            )
