"""``cutctx.formats.langchain``: LangChain ``BaseMessage`` lists to and from transcripts."""

from __future__ import annotations

import json
from typing import Any

import pytest
from baseaicore import ValidationError
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from cutctx import (
    CharRatioEstimator,
    CompactionBudget,
    CompactionExecutor,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    PolicyChain,
    Role,
    Transcript,
    TranscriptTurn,
)
from cutctx.formats import Format, openai_chat, presentation_of
from cutctx.formats import langchain as lc
from cutctx.formats._common import SUMMARY_LABEL
from tests.format_validators import chat_problems, chat_tokens, png
from tests.framework_oracles import sent_by_langchain
from tests.unit.formats.helpers import WORDS, stub, words

SUNNY, RAIN = "sunny " * 50, "rain " * 40


def weather() -> list[BaseMessage]:
    """OpenAI's function-calling guide, as a LangChain agent's state holds it."""
    return [
        SystemMessage("You are a weather bot."),
        HumanMessage("What's the weather in Paris and Rome?", id="h1"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1"},
                {"name": "get_weather", "args": {"city": "Rome"}, "id": "call_2"},
            ],
        ),
        ToolMessage(SUNNY, tool_call_id="call_1", artifact={"raw": 1}, id="t1"),
        ToolMessage([{"type": "text", "text": RAIN}], tool_call_id="call_2"),
        AIMessage("Paris is sunny, Rome is rainy."),
    ]


class TestLangChainFormat:
    def test_it_is_a_format_named_langchain(self) -> None:
        assert isinstance(lc.LANGCHAIN, Format)
        assert lc.LANGCHAIN.name == lc.FORMAT == "langchain"

    def test_its_count_is_the_chat_count_of_what_langchain_sends(self) -> None:
        messages = weather()
        assert lc.count_tokens(messages, estimator=WORDS) == openai_chat.count_tokens(
            sent_by_langchain(messages), estimator=WORDS
        )
        assert lc.count_tokens(messages) == openai_chat.count_tokens(sent_by_langchain(messages))

    def test_its_pieces_are_the_calls_of_the_chat_message_it_is_sent_as(self) -> None:
        call: Any = weather()[2]
        calls, thoughts = presentation_of(lc.LANGCHAIN).pieces(call, estimator=WORDS, tokens=0)
        chat = sent_by_langchain([call])[0]
        assert (calls, thoughts) == presentation_of(openai_chat.OPENAI_CHAT).pieces(
            chat, estimator=WORDS, tokens=0
        )
        assert [name for name, _ in calls] == ["get_weather", "get_weather"]
        human: Any = weather()[1]
        assert presentation_of(lc.LANGCHAIN).pieces(human, estimator=WORDS, tokens=0) == ([], 0)

    def test_a_reader_started_after_offset_messages_counts_history_indices(self) -> None:
        messages = weather()
        reader = lc.LANGCHAIN.reader(estimator=WORDS)
        reader.start(5)  # type: ignore[attr-defined]
        read = reader.read(messages[5:], final=True)
        assert [turn.turn_id for turn in read.turns] == ["m5"]
        assert read.parts["m5"].index == 5
        assert read.originals[0] is messages[5]
        assert read.sent == ({"kind": "ai", "messages": sent_by_langchain(messages[5:])},)


class TestToTranscript:
    def test_one_turn_per_message_priced_as_its_chat_message(self) -> None:
        messages = weather()
        transcript, _ = lc.to_transcript(messages, estimator=WORDS)
        assert transcript.turn_ids() == tuple(f"m{i}" for i in range(6))
        assert [turn.role for turn in transcript.turns] == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.TOOL,
            Role.ASSISTANT,
        ]
        oracle = [chat_tokens([message], words, 3) for message in sent_by_langchain(messages)]
        assert [turn.token_estimate for turn in transcript.turns] == oracle

    def test_a_call_and_its_tool_messages_are_one_exchange_naming_the_tool(self) -> None:
        transcript, _ = lc.to_transcript(weather())
        calls = [turn.tool_call_id for turn in transcript.turns]
        assert calls == [None, None, "m2", "m2", "m2", None]
        assert transcript.turns[3].metadata["cutctx.tool_name"] == "get_weather"

    def test_request_level_system_is_a_pinned_head_priced_as_a_system_message(self) -> None:
        transcript, binding = lc.to_transcript(weather()[1:], estimator=WORDS, system="Be brief.")
        head = transcript.turns[0]
        assert (head.turn_id, head.role, head.pinned) == ("system", Role.SYSTEM, True)
        alone, _ = openai_chat.to_transcript([], estimator=WORDS, system="Be brief.")
        assert head.token_estimate == alone.turns[0].token_estimate
        assert binding.system == "Be brief."
        assert lc.from_transcript(transcript, binding)[0] is binding.originals[0]

    def test_images_in_content_blocks_are_priced_as_openai_prices_them(self) -> None:
        url = f"data:image/png;base64,{png(1024, 1024)}"
        message = HumanMessage(
            [
                {"type": "text", "text": "what is this"},
                {"type": "image", "base64": png(1024, 1024), "mime_type": "image/png"},
            ]
        )
        expected = openai_chat.count_tokens(
            [
                {
                    "role": "user",
                    "content": [
                        {"type": "text", "text": "what is this"},
                        {"type": "image_url", "image_url": {"url": url}},
                    ],
                }
            ],
            estimator=WORDS,
        )
        assert lc.count_tokens([message], estimator=WORDS) == expected
        assert expected > 700  # 85 + 170 per tile of the 768 x 768 image it is scaled to

    def test_priority_and_pin_see_the_history_index_and_the_chat_form(self) -> None:
        seen: list[tuple[int, dict[str, Any]]] = []

        def rank(index: int, message: dict[str, Any]) -> int:
            seen.append((index, message))
            return 5 if message["kind"] == "tool" else 1

        transcript, _ = lc.to_transcript(weather(), priority=rank, pin=lambda i, _: i == 1)
        assert [index for index, _ in seen] == list(range(6))
        assert seen[1][1] == {"kind": "human", "messages": [sent_by_langchain(weather())[1]]}
        assert transcript.turns[1].pinned
        assert transcript.turns[3].metadata["cutctx.priority"] == "5"

    def test_tool_result_blocks_in_a_human_message_are_kept_or_removed_whole(self) -> None:
        calls = [{"name": "sh", "args": {}, "id": f"toolu_{n}"} for n in (1, 2)]
        messages: list[BaseMessage] = [
            HumanMessage("go"),
            AIMessage("", tool_calls=calls),
            HumanMessage(
                [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "also"},
                ]
            ),
        ]
        transcript, binding = lc.to_transcript(messages)
        assert transcript.turn_ids() == ("m0", "m1", "m2", "m2.1")
        assert {turn.role for turn in transcript.turns[2:]} == {Role.USER}  # never masked
        assert {turn.tool_call_id for turn in transcript.turns[1:]} == {"m1"}
        assert binding.parts["m2.1"].siblings == 2
        assert lc.from_transcript(transcript, binding) == messages

    def test_a_message_that_is_not_a_base_message_is_refused_by_index(self) -> None:
        with pytest.raises(ValidationError, match=r"langchain: messages\[1\]: must be a Lang"):
            lc.to_transcript([HumanMessage("hi"), {"role": "user", "content": "x"}])  # type: ignore[type-var]
        with pytest.raises(ValidationError, match="must be a list"):
            lc.to_transcript("hi")  # type: ignore[type-var]

    def test_a_history_openai_would_refuse_is_refused_in_langchain_terms(self) -> None:
        with pytest.raises(
            ValidationError, match=r"^langchain: messages\[2\]: tool call"
        ) as caught:
            lc.to_transcript(weather()[:3])
        assert caught.value.details["format"] == "langchain"
        assert caught.value.details["index"] == 2
        with pytest.raises(ValidationError, match=r"messages\[1\]: tool message answers"):
            lc.to_transcript([HumanMessage("hi"), ToolMessage("x", tool_call_id="nope")])

    def test_a_reused_call_id_names_both_history_indices(self) -> None:
        call = {"name": "sh", "args": {}, "id": "c1"}
        messages: list[BaseMessage] = [
            HumanMessage("hi"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("a", tool_call_id="c1"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("b", tool_call_id="c1"),
        ]
        try:  # the rule is Chat's: a reused id is refused, or paired with the nearest call
            openai_chat.to_transcript(sent_by_langchain(messages))
        except ValidationError:
            with pytest.raises(ValidationError, match="used by two calls") as caught:
                lc.to_transcript(messages)
            assert (caught.value.details["index"], caught.value.details["first_index"]) == (3, 1)
        else:
            transcript, _ = lc.to_transcript(messages)
            assert transcript.turns[4].tool_call_id == "m3"

    def test_content_langchain_cannot_convert_is_refused_by_index(self) -> None:
        odd = HumanMessage([{"type": "text"}])  # a text block without its text
        with pytest.raises(ValidationError, match=r"messages\[0\]: cannot be read as an OpenAI"):
            lc.to_transcript([odd])

    def test_a_partial_history_is_counted_but_not_read(self) -> None:
        partial = weather()[:3]
        assert lc.count_tokens(partial, estimator=WORDS) == openai_chat.count_tokens(
            sent_by_langchain(partial), estimator=WORDS
        )
        with pytest.raises(ValidationError, match=r"messages\[1\]: must be a LangChain"):
            lc.count_tokens([HumanMessage("hi"), "hi"])  # type: ignore[list-item]


class TestReader:
    def test_a_call_answered_in_the_next_chunk_reads_as_the_whole_history(self) -> None:
        messages = weather()
        reader = lc.LANGCHAIN.reader(estimator=WORDS)
        first = reader.read(messages[:3])
        again = lc.LANGCHAIN.reader(estimator=WORDS)
        again.setstate(json.loads(json.dumps(reader.getstate())))
        rest = again.read(messages[3:], final=True)
        whole = lc.LANGCHAIN.reader(estimator=WORDS).read(messages, final=True)
        assert (*first.turns, *rest.turns) == whole.turns
        assert [turn.tool_call_id for turn in rest.turns[:2]] == ["m2", "m2"]
        assert rest.turns[0].metadata["cutctx.tool_name"] == "get_weather"

    def test_a_call_left_open_is_refused_at_its_message_when_the_history_ends(self) -> None:
        reader = lc.LANGCHAIN.reader()
        assert len(reader.read(weather()[:3]).sent) == 3
        with pytest.raises(
            ValidationError, match=r"^langchain: messages\[2\]: tool call"
        ) as caught:
            reader.read([], final=True)
        assert caught.value.details["index"] == 2

    def test_a_history_is_refused_at_its_first_bad_message(self) -> None:
        messages = [*weather()[:3], HumanMessage("next"), "not a message"]
        with pytest.raises(ValidationError, match=r"messages\[2\]: tool call"):
            lc.LANGCHAIN.reader().read(messages, final=True)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "state",
        [
            None,
            {"count": 0},
            {"count": -1, "chat": {}, "opener": None, "before": None},
            {"count": 0, "chat": {"count": 0}, "opener": None, "before": None},
            {
                "count": 0,
                "chat": {"count": 0, "pending": {}, "opener": None, "key": None},
                "opener": [1],
                "before": None,
            },
            {
                "count": 0,
                "chat": {"count": 0, "pending": {}, "opener": None, "key": None},
                "opener": None,
                "before": 3,
            },
        ],
    )
    def test_a_value_that_is_not_its_state_is_refused(self, state: Any) -> None:
        reader = lc.LANGCHAIN.reader()
        with pytest.raises(ValidationError, match=r"^langchain: not a reader state"):
            reader.setstate(state)
        assert reader.getstate() == lc.LANGCHAIN.reader().getstate()


class TestFromTranscript:
    def test_kept_messages_are_the_callers_own_objects(self) -> None:
        messages = weather()
        transcript, binding = lc.to_transcript(messages)
        out = lc.from_transcript(transcript, binding)
        assert all(a is b for a, b in zip(out, messages, strict=True))

    def test_a_masked_tool_message_is_a_copy_with_the_stub_and_every_other_field(self) -> None:
        messages = weather()
        transcript, binding = lc.to_transcript(messages, estimator=WORDS)
        policy = ObservationMaskingPolicy(0, estimator=WORDS)
        plan = policy.decide(transcript, CompactionBudget(max_tokens=60, protected_recent_turns=0))
        view = CompactionExecutor().apply(transcript, plan)
        out = lc.from_transcript(view, binding)
        assert view.report.masked_turn_ids == ("m3", "m4")
        first, second = out[3], out[4]
        assert isinstance(first, ToolMessage)
        assert isinstance(second, ToolMessage)
        assert first.content == stub(SUNNY, 53)
        assert (first.tool_call_id, first.artifact, first.id) == ("call_1", {"raw": 1}, "t1")
        assert second.content == [{"type": "text", "text": stub(RAIN, 43)}]
        assert messages[3].content == SUNNY  # the caller's message is untouched
        assert [a is b for a, b in zip(out, messages, strict=True)] == [
            True,
            True,
            True,
            False,
            False,
            True,
        ]
        # The view holds the request's own tokens (its request_tokens).
        assert lc.count_tokens(out, estimator=WORDS) == view.transcript.token_estimate()

    def test_a_summary_is_a_labelled_human_message(self) -> None:
        messages = weather()
        transcript, binding = lc.to_transcript(messages)
        view = Transcript(
            (
                transcript.turns[0],
                TranscriptTurn("summary:g1", Role.USER, "They asked about weather.", 5),
                *transcript.turns[5:],
            )
        )
        out = lc.from_transcript(view, binding)
        assert out[1] == HumanMessage(f"{SUMMARY_LABEL}\n\nThey asked about weather.")
        assert out[0] is messages[0]
        assert out[2] is messages[5]
        assert chat_problems(sent_by_langchain(out)) == []

    def test_a_changed_turn_that_is_not_a_tool_result_is_refused(self) -> None:
        transcript, binding = lc.to_transcript(weather())
        turns = list(transcript.turns)
        turns[1] = TranscriptTurn("m1", Role.USER, "edited", 1)
        with pytest.raises(ValidationError, match="only tool results") as caught:
            lc.from_transcript(Transcript(tuple(turns)), binding)
        assert caught.value.details["index"] == 1

    def test_a_binding_of_another_format_is_refused(self) -> None:
        transcript, binding = openai_chat.to_transcript([{"role": "user", "content": "hi"}])
        with pytest.raises(ValidationError, match="langchain Binding"):
            lc.from_transcript(transcript, binding)  # type: ignore[type-var]


class TestCompactingLangChainMessages:
    def test_a_long_history_compacts_to_a_valid_request_of_its_own_objects(self) -> None:
        messages: list[BaseMessage] = [HumanMessage("Make the build green.")]
        for step in range(30):
            call = f"call_{step}"
            messages.append(AIMessage("", tool_calls=[{"name": "sh", "args": {}, "id": call}]))
            messages.append(
                ToolMessage(f"step {step}: " + "ok " * (40 + step * 7), tool_call_id=call)
            )
        transcript, binding = lc.to_transcript(messages, pin=lambda index, _: index == 0)
        policy = PolicyChain((ObservationMaskingPolicy(2), DropOldestPolicy()))
        plan = policy.decide(transcript, CompactionBudget(max_tokens=600, protected_recent_turns=4))
        out = lc.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert not plan.budget_unmet
        assert out[0] is messages[0]
        # counted with the estimator the plan priced with (to_transcript's character default)
        assert lc.count_tokens(out, estimator=CharRatioEstimator()) <= 600
        assert chat_problems(sent_by_langchain(out)) == []
        originals = {id(message) for message in messages}
        assert all(id(message) in originals or isinstance(message, ToolMessage) for message in out)
        assert out[-1] is messages[-1]
