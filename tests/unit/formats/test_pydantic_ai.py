"""``cutctx.formats.pydantic_ai``: Pydantic AI ``ModelMessage`` lists to and from transcripts."""

from __future__ import annotations

import base64
import json
import warnings
from typing import Any

import pytest
from baseaicore import ValidationError
from pydantic_ai.messages import (
    AudioUrl,
    BinaryContent,
    CachePoint,
    CompactionPart,
    DocumentUrl,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    RetryFeedbackPart,
    RetryInfo,
    RetryPromptPart,
    SystemPromptPart,
    TextContent,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserContent,
    UserPromptPart,
    VideoUrl,
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
from cutctx.formats import Format, hooks_of, openai_chat, presentation_of
from cutctx.formats import pydantic_ai as pa
from cutctx.formats._common import SUMMARY_LABEL
from tests.format_validators import chat_problems, png
from tests.framework_oracles import sent_by_pydantic_ai
from tests.unit.formats.helpers import WORDS, stub

SUNNY, RAIN = "sunny " * 50, "rain " * 40


def chats_of(messages: list[ModelMessage]) -> list[dict[str, Any]]:
    """The Chat messages the format read ``messages`` as (each binding entry holds its own)."""
    _, binding = pa.to_transcript(messages)
    return [chat for sent in binding.messages for chat in sent["messages"]]


def weather() -> list[ModelMessage]:
    """OpenAI's function-calling guide, as a Pydantic AI run records it."""
    return [
        ModelRequest(
            parts=[
                SystemPromptPart("You are a weather bot."),
                UserPromptPart("What's the weather in Paris and Rome?"),
            ]
        ),
        ModelResponse(
            parts=[
                TextPart("Let me look."),
                ToolCallPart("get_weather", {"city": "Paris"}, "call_1"),
                ToolCallPart("get_weather", '{"city": "Rome"}', "call_2"),
            ]
        ),
        ModelRequest(
            parts=[
                ToolReturnPart("get_weather", SUNNY, "call_1"),
                ToolReturnPart("get_weather", RAIN, "call_2", metadata={"raw": 1}),
            ]
        ),
        ModelResponse(parts=[ThinkingPart("both done"), TextPart("Paris is sunny, Rome rainy.")]),
    ]


def legacy_retry(content: str, **fields: Any) -> RetryPromptPart:
    """A deprecated ``RetryPromptPart``, as an old stored history still holds one."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PydanticAIDeprecationWarning, its own category
        return RetryPromptPart(content, **fields)


class TestPydanticAIFormat:
    def test_it_is_a_format_named_pydantic_ai(self) -> None:
        assert isinstance(pa.PYDANTIC_AI, Format)
        assert pa.PYDANTIC_AI.name == pa.FORMAT == "pydantic_ai"

    def test_each_message_reads_as_what_the_openai_chat_model_sends(self) -> None:
        messages = weather()
        assert chats_of(messages) == sent_by_pydantic_ai(messages)

    def test_its_count_is_the_chat_count_of_what_the_chat_model_sends(self) -> None:
        messages = weather()
        sent = sent_by_pydantic_ai(messages)
        assert pa.count_tokens(messages, estimator=WORDS) == openai_chat.count_tokens(
            sent, estimator=WORDS
        )

    def test_user_content_and_failed_results_read_as_the_chat_model_sends_them(self) -> None:
        messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart(["see", ImageUrl("https://example.com/a.png")])]),
            ModelResponse(parts=[ToolCallPart("sh", {}, "c1")]),
            ModelRequest(parts=[ToolReturnPart("sh", {"x": [1, 2]}, "c1", outcome="failed")]),
        ]
        assert chats_of(messages) == sent_by_pydantic_ai(messages)

    def test_equal_messages_give_equal_fingerprint_data_in_any_process(self) -> None:
        messages = weather()
        again = ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(messages))
        data = [hooks_of(pa.PYDANTIC_AI).fingerprint_data(m) for m in messages]
        assert data == [hooks_of(pa.PYDANTIC_AI).fingerprint_data(m) for m in again]
        assert json.loads(json.dumps(data)) == data
        assert data[2] == {"kind": "request", "messages": sent_by_pydantic_ai(messages)[3:5]}

    def test_a_binary_image_is_priced_as_its_data_url(self) -> None:
        image = BinaryContent(base64.b64decode(png(1024, 1024)), media_type="image/png")
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(["what", image])])]
        assert pa.count_tokens(messages, estimator=WORDS) == openai_chat.count_tokens(
            sent_by_pydantic_ai(messages), estimator=WORDS
        )


class TestTheChatMessagesOfEachPart:
    def test_every_kind_of_user_content_becomes_the_chat_part_it_is_priced_as(self) -> None:
        picture = base64.b64decode(png(1024, 1024))
        content: list[UserContent] = [
            "look",
            TextContent("here"),
            ImageUrl("https://example.com/a.png", vendor_metadata={"detail": "low"}),
            BinaryContent(b"notes", media_type="text/plain"),
            BinaryContent(picture, media_type="image/png", vendor_metadata={"detail": "high"}),
            BinaryContent(b"RIFF", media_type="audio/wav"),
            BinaryContent(b"%PDF", media_type="application/pdf"),
            AudioUrl("https://example.com/a.mp3"),
            DocumentUrl("https://example.com/a.pdf"),
            VideoUrl("https://example.com/a.mp4"),
            CachePoint(),
        ]
        messages: list[ModelMessage] = [ModelRequest(parts=[UserPromptPart(content)])]
        (chat,) = chats_of(messages)
        assert [part["type"] for part in chat["content"]] == [
            "text",
            "text",
            "image_url",
            "text",
            "image_url",
            "input_audio",
            "file",
            "input_audio",
            "file",
            "file",
        ]
        assert chat["content"][4]["image_url"]["detail"] == "high"
        assert pa.count_tokens(messages, estimator=WORDS) == openai_chat.count_tokens(
            [chat], estimator=WORDS
        )

    def test_a_result_with_files_sends_them_in_a_user_message_after_the_results(self) -> None:
        messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("draw")]),
            ModelResponse(parts=[ToolCallPart("plot", {}, "c1")]),
            ModelRequest(
                parts=[
                    ToolReturnPart("plot", ["done", ImageUrl("https://example.com/p.png")], "c1")
                ]
            ),
        ]
        assert chats_of(messages) == sent_by_pydantic_ai(messages)
        transcript, _ = pa.to_transcript(messages)
        assert [turn.role for turn in transcript.turns[2:]] == [Role.TOOL, Role.USER]
        assert {turn.tool_call_id for turn in transcript.turns[1:]} == {"m1"}

    def test_a_summary_the_application_wrote_is_a_pinned_user_turn(self) -> None:
        messages: list[ModelMessage] = [
            ModelRequest(parts=[CompactionPart("They fixed the cache key.")]),
            ModelRequest(parts=[UserPromptPart("go on")]),
        ]
        transcript, _ = pa.to_transcript(messages)
        first = transcript.turns[0]
        assert (first.role, first.pinned, first.content) == (
            Role.USER,
            True,
            "They fixed the cache key.",
        )

    def test_retry_feedback_is_sent_as_the_user_text_it_renders(self) -> None:
        feedback = RetryFeedbackPart("try again", retry=RetryInfo(cause="model_retry"))
        messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("go")]),
            ModelResponse(parts=[TextPart("?")]),
            ModelRequest(parts=[feedback]),
        ]
        transcript, _ = pa.to_transcript(messages)
        assert transcript.turns[2].content == feedback.model_response()

    def test_a_user_prompt_of_another_shape_is_refused_by_index(self) -> None:
        part = UserPromptPart("x")
        part.content = 42  # type: ignore[assignment]  # as a careless edit leaves it
        odd = ModelRequest(parts=[part])
        with pytest.raises(ValidationError, match=r"messages\[0\]: a user prompt must be"):
            pa.to_transcript([odd])


class TestToTranscript:
    def test_a_request_is_one_turn_per_part_and_one_unit(self) -> None:
        transcript, binding = pa.to_transcript(weather(), estimator=WORDS)
        assert transcript.turn_ids() == ("m0", "m0.1", "m1", "m2", "m2.1", "m3")
        assert [turn.role for turn in transcript.turns] == [
            Role.SYSTEM,
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.TOOL,
            Role.ASSISTANT,
        ]
        assert [turn.tool_call_id for turn in transcript.turns] == [
            "m0",
            "m0",
            "m1",
            "m1",
            "m1",
            None,
        ]
        assert (binding.parts["m2.1"].index, binding.parts["m2.1"].block) == (2, 1)
        assert binding.parts["m0.1"].siblings == 2

    def test_a_response_with_calls_travels_with_the_request_that_answers_it(self) -> None:
        transcript, _ = pa.to_transcript(weather())
        exchange = [turn.turn_id for turn in transcript.turns if turn.tool_call_id == "m1"]
        assert exchange == ["m1", "m2", "m2.1"]
        assert transcript.turns[3].metadata["cutctx.tool_name"] == "get_weather"

    def test_results_lead_a_request_that_also_holds_a_user_prompt(self) -> None:
        messages = [
            *weather()[:2],
            ModelRequest(
                parts=[
                    UserPromptPart("also check Oslo"),
                    ToolReturnPart("get_weather", SUNNY, "call_1"),
                    ToolReturnPart("get_weather", RAIN, "call_2"),
                ]
            ),
        ]
        transcript, binding = pa.to_transcript(messages)
        assert [turn.role for turn in transcript.turns[3:]] == [Role.TOOL, Role.TOOL, Role.USER]
        assert {turn.tool_call_id for turn in transcript.turns[2:]} == {"m1"}
        assert [binding.parts[t.turn_id].block for t in transcript.turns[3:]] == [1, 2, None]
        assert pa.from_transcript(transcript, binding) == messages

    def test_a_message_that_sends_nothing_has_one_turn_priced_zero(self) -> None:
        messages = [*weather(), ModelResponse(parts=[])]
        transcript, binding = pa.to_transcript(messages)
        last = transcript.turns[-1]
        assert (last.turn_id, last.token_estimate, last.content) == ("m4", 0, "")
        assert pa.from_transcript(transcript, binding)[-1] is messages[-1]

    def test_an_empty_response_inside_an_exchange_joins_it(self) -> None:
        messages = weather()
        messages.insert(2, ModelResponse(parts=[]))  # sends nothing: the results still follow
        transcript, binding = pa.to_transcript(messages)
        silent = transcript.turns[3]
        assert (silent.turn_id, silent.token_estimate, silent.tool_call_id) == ("m2", 0, "m1")
        assert pa.from_transcript(transcript, binding) == messages

    def test_legacy_retries_read_as_a_result_or_as_feedback(self) -> None:
        messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("go")]),
            ModelResponse(parts=[ToolCallPart("sh", {}, "c1")]),
            ModelRequest(parts=[legacy_retry("bad args", tool_name="sh", tool_call_id="c1")]),
            ModelResponse(parts=[TextPart("k")]),
            ModelRequest(parts=[legacy_retry("try again")]),
        ]
        transcript, _ = pa.to_transcript(messages)
        assert [turn.role for turn in transcript.turns] == [
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
            Role.ASSISTANT,
            Role.USER,
        ]
        assert transcript.turns[2].content == '{"error":"bad args"}'
        assert "try again" in transcript.turns[4].content

    def test_priority_and_pin_see_the_history_index_and_the_chat_form(self) -> None:
        seen: list[tuple[int, str]] = []

        def rank(index: int, message: dict[str, Any]) -> int:
            seen.append((index, message["kind"]))
            return 3

        transcript, _ = pa.to_transcript(weather(), priority=rank, pin=lambda i, _: i == 3)
        assert seen == [(0, "request"), (1, "response"), (2, "request"), (3, "response")]
        assert transcript.turns[-1].pinned
        assert {turn.metadata["cutctx.priority"] for turn in transcript.turns} == {"3"}

    def test_anything_but_a_model_message_is_refused_by_index(self) -> None:
        with pytest.raises(ValidationError, match=r"pydantic_ai: messages\[1\]: must be a Py"):
            pa.to_transcript([weather()[0], {"kind": "request"}])  # type: ignore[type-var]

    def test_a_call_no_request_answers_is_refused_in_pydantic_ai_terms(self) -> None:
        with pytest.raises(ValidationError, match=r"^pydantic_ai: messages\[1\]: tool call") as e:
            pa.to_transcript(weather()[:2])
        assert e.value.details == {
            "format": "pydantic_ai",
            "index": 1,
            "call_ids": ["call_1", "call_2"],
        }

    def test_a_partial_history_is_counted(self) -> None:
        assert pa.count_tokens(weather()[:2], estimator=WORDS) == openai_chat.count_tokens(
            sent_by_pydantic_ai(weather()[:2]), estimator=WORDS
        )


class TestReader:
    def test_a_trailing_message_that_sends_nothing_waits_for_the_next_chunk(self) -> None:
        messages = weather()
        messages.insert(2, ModelResponse(parts=[]))  # which exchange it joins: the next says
        reader = pa.PYDANTIC_AI.reader(estimator=WORDS)
        first = reader.read(messages[:3])
        assert len(first.sent) == 2
        rest = reader.read(messages[2:], final=True)
        whole = pa.PYDANTIC_AI.reader(estimator=WORDS).read(messages, final=True)
        assert (*first.turns, *rest.turns) == whole.turns
        assert (rest.turns[0].turn_id, rest.turns[0].tool_call_id) == ("m2", "m1")

    def test_one_that_ends_the_history_joins_no_exchange(self) -> None:
        messages = [*weather()[:3], ModelResponse(parts=[])]
        read = pa.PYDANTIC_AI.reader().read(messages, final=True)
        assert (read.turns[-1].turn_id, read.turns[-1].tool_call_id) == ("m3", None)
        assert not hooks_of(pa.PYDANTIC_AI).settled(messages[-1])
        assert hooks_of(pa.PYDANTIC_AI).settled(messages[0])
        assert hooks_of(pa.PYDANTIC_AI).settled("not a message")  # type: ignore[arg-type]  # refused anyway

    def test_its_pieces_are_the_calls_a_response_is_sent_with(self) -> None:
        response: Any = weather()[1]
        calls, thoughts = presentation_of(pa.PYDANTIC_AI).pieces(
            response, estimator=WORDS, tokens=0
        )
        assert ([name for name, _ in calls], thoughts) == (["get_weather", "get_weather"], 0)
        chat = sent_by_pydantic_ai(weather()[:2])[-1]
        assert (
            calls
            == presentation_of(openai_chat.OPENAI_CHAT).pieces(chat, estimator=WORDS, tokens=0)[0]
        )


class TestFromTranscript:
    def test_kept_messages_are_the_callers_own_objects(self) -> None:
        messages = weather()
        transcript, binding = pa.to_transcript(messages)
        out = pa.from_transcript(transcript, binding)
        assert all(a is b for a, b in zip(out, messages, strict=True))

    def test_a_masked_result_is_a_copy_of_the_request_with_the_stub(self) -> None:
        messages = weather()
        transcript, binding = pa.to_transcript(messages, estimator=WORDS)
        policy = ObservationMaskingPolicy(1, estimator=WORDS)
        plan = policy.decide(transcript, CompactionBudget(max_tokens=80, protected_recent_turns=0))
        view = CompactionExecutor().apply(transcript, plan)
        out = pa.from_transcript(view, binding)
        assert view.report.masked_turn_ids == ("m2",)
        request = out[2]
        assert isinstance(request, ModelRequest)
        first, second = request.parts
        assert isinstance(first, ToolReturnPart)
        assert (first.content, first.tool_call_id) == (stub(SUNNY, 53), "call_1")
        assert second is messages[2].parts[1]
        assert messages[2].parts[0].content == SUNNY  # type: ignore[union-attr]
        assert [a is b for a, b in zip(out, messages, strict=True)] == [True, True, False, True]
        # The view holds the request's own tokens (its request_tokens).
        assert pa.count_tokens(out, estimator=WORDS) == view.transcript.token_estimate()

    def test_a_masked_failure_is_sent_as_the_stub_alone(self) -> None:
        messages: list[ModelMessage] = [
            ModelRequest(parts=[UserPromptPart("go")]),
            ModelResponse(parts=[ToolCallPart("sh", {}, "c1")]),
            ModelRequest(parts=[ToolReturnPart("sh", "boom " * 40, "c1", outcome="failed")]),
            ModelResponse(parts=[ToolCallPart("sh", {}, "c2")]),
            ModelRequest(parts=[legacy_retry("bad " * 40, tool_name="sh", tool_call_id="c2")]),
            ModelResponse(parts=[TextPart("done")]),
        ]
        transcript, binding = pa.to_transcript(messages, estimator=WORDS)
        policy = ObservationMaskingPolicy(0, estimator=WORDS)
        plan = policy.decide(transcript, CompactionBudget(max_tokens=50, protected_recent_turns=1))
        view = CompactionExecutor().apply(transcript, plan)
        out = pa.from_transcript(view, binding)
        assert view.report.masked_turn_ids == ("m2", "m4")
        for request in (out[2], out[4]):
            assert isinstance(request, ModelRequest)
            (part,) = request.parts
            assert isinstance(part, ToolReturnPart)
            assert part.outcome == "success"
            assert part.model_response_str().startswith("[tool result masked")
        # The view holds the request's own tokens (its request_tokens).
        assert pa.count_tokens(out, estimator=WORDS) == view.transcript.token_estimate()

    def test_a_summary_is_a_labelled_request_stamped_like_its_neighbour(self) -> None:
        messages = weather()
        transcript, binding = pa.to_transcript(messages)
        view = Transcript(
            (
                *transcript.turns[:2],
                TranscriptTurn("summary:g1", Role.USER, "They asked about weather.", 5),
                transcript.turns[-1],
            )
        )
        out = pa.from_transcript(view, binding)
        summary = out[1]
        assert isinstance(summary, ModelRequest)
        (part,) = summary.parts
        assert isinstance(part, UserPromptPart)
        assert part.content == f"{SUMMARY_LABEL}\n\nThey asked about weather."
        neighbour = messages[3]
        assert isinstance(neighbour, ModelResponse)
        assert part.timestamp == neighbour.timestamp
        assert pa.from_transcript(view, binding) == out  # the same view, equal messages
        assert chat_problems(sent_by_pydantic_ai(out)) == []

    def test_a_summary_beside_messages_without_a_timestamp_is_still_a_request(self) -> None:
        messages: list[ModelMessage] = [ModelRequest(parts=[])]
        transcript, binding = pa.to_transcript(messages)
        view = Transcript(
            (TranscriptTurn("summary:g1", Role.USER, "Earlier.", 3), *transcript.turns)
        )
        summary, kept = pa.from_transcript(view, binding)
        assert isinstance(summary, ModelRequest)
        assert summary.parts[0].content == f"{SUMMARY_LABEL}\n\nEarlier."  # type: ignore[union-attr]
        assert kept is messages[0]

    def test_only_a_request_holds_results_to_mask(self) -> None:
        response = weather()[1]
        with pytest.raises(ValidationError, match="only a ModelRequest"):
            pa.PYDANTIC_AI.masked(response, {0: "stub"})  # type: ignore[attr-defined]

    def test_a_response_cannot_be_masked(self) -> None:
        transcript, binding = pa.to_transcript(weather())
        turns = list(transcript.turns)
        turns[2] = TranscriptTurn("m1", Role.ASSISTANT, "edited", 1, "m1")
        with pytest.raises(ValidationError, match="only tool results"):
            pa.from_transcript(Transcript(tuple(turns)), binding)


class TestCompactingPydanticAIMessages:
    def test_a_long_history_compacts_to_a_valid_request_keeping_the_first_request(self) -> None:
        messages: list[ModelMessage] = [
            ModelRequest(parts=[SystemPromptPart("Be terse."), UserPromptPart("Go green.")])
        ]
        for step in range(30):
            call = f"call_{step}"
            messages.append(ModelResponse(parts=[ToolCallPart("sh", {"step": step}, call)]))
            result = f"step {step}: " + "ok " * (40 + step * 7)
            messages.append(ModelRequest(parts=[ToolReturnPart("sh", result, call)]))
        transcript, binding = pa.to_transcript(messages, pin=lambda index, _: index == 0)
        policy = PolicyChain((ObservationMaskingPolicy(2), DropOldestPolicy()))
        plan = policy.decide(transcript, CompactionBudget(max_tokens=600, protected_recent_turns=4))
        out = pa.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert not plan.budget_unmet
        assert out[0] is messages[0]
        assert out[-1] is messages[-1]
        # counted with the estimator the plan priced with (to_transcript's character default)
        assert pa.count_tokens(out, estimator=CharRatioEstimator()) <= 600
        assert chat_problems(sent_by_pydantic_ai(out)) == []
