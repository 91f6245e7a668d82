"""The official SDKs' message types go in and come back out: under mypy --strict and at run time.

The gate type-checks this file with ``mypy --strict`` (``warn_unused_ignores`` included). Every
positive case assigns the result back to the caller's own SDK-typed list with no annotation at
the call site, so it fails the gate if cutctx's signatures stop accepting or returning the SDK
types; every ``# type: ignore[...]`` marks an error mypy must report, so a signature that lets a
misspelt format (or a foreign message type) through fails the gate as an unused ignore. The same
code runs here with real SDK objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from anthropic.types import Message, MessageParam, TextBlock, TextBlockParam, ToolUseBlock, Usage
from baseaicore import ValidationError
from openai.types.chat import (
    ChatCompletionMessage,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
)
from openai.types.chat.chat_completion_message_function_tool_call import Function
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseInputItemParam,
    ResponseOutputItem,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseReasoningItem,
)

from cutctx import (
    CharRatioEstimator,
    CompactedMessages,
    CompactionBudget,
    CompactionExecutor,
    ContextWindow,
    DropOldestPolicy,
    ObservationMaskingPolicy,
    compact_messages,
)
from cutctx.formats import anthropic, openai_chat, openai_responses

if TYPE_CHECKING:
    from cutctx.formats import Binding

LOG = "line of build output\n" * 200
DROP = DropOldestPolicy()
CHARS = CharRatioEstimator()  # the figures below are of four characters a token
MASK = ObservationMaskingPolicy(0)


def chat_history() -> list[ChatCompletionMessageParam]:
    """A system prompt, a question, three tool exchanges with long results, an answer."""
    history: list[ChatCompletionMessageParam] = [
        {"role": "system", "content": "You are careful."},
        {"role": "user", "content": "What changed in the build?"},
    ]
    for number in range(3):
        call_id = f"c{number}"
        history.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "log", "arguments": "{}"},
                    }
                ],
            }
        )
        history.append({"role": "tool", "tool_call_id": call_id, "content": LOG})
    history.append({"role": "assistant", "content": "The cache key changed."})
    return history


def chat_objects() -> tuple[ChatCompletionMessage, ChatCompletionMessage]:
    """Two assistant messages as a Chat Completions response returns them."""
    call = ChatCompletionMessage(
        role="assistant",
        content=None,
        tool_calls=[
            ChatCompletionMessageFunctionToolCall(
                id="c9", type="function", function=Function(name="log", arguments="{}")
            )
        ],
    )
    answer = ChatCompletionMessage(role="assistant", content="Same cause again.")
    return call, answer


class TestChatCompletions:
    def test_a_typed_history_compacts_and_assigns_back(self) -> None:
        history = chat_history()
        history = compact_messages(history, max_tokens=2_500, format="openai_chat").messages
        assert len(history) == 9
        assert "tool result masked by cutctx" in str(history[3].get("content"))
        assert history[5] == {"role": "tool", "tool_call_id": "c1", "content": LOG}

    def test_the_format_functions_return_the_callers_type(self) -> None:
        history = chat_history()
        transcript, binding = openai_chat.to_transcript(history)
        plan = DropOldestPolicy().decide(transcript, CompactionBudget(10_000))
        history = openai_chat.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert history == chat_history()
        typed: Binding[ChatCompletionMessageParam] = binding
        assert typed.format == "openai_chat"

    def test_response_objects_are_read_and_kept_ones_come_back_as_the_same_object(self) -> None:
        call, answer = chat_objects()
        history: list[ChatCompletionMessageParam | ChatCompletionMessage] = [
            {"role": "user", "content": "Look at the log."},
            call,
            {"role": "tool", "tool_call_id": "c9", "content": LOG},
            answer,
            *chat_history()[1:],
        ]
        done = compact_messages(history, max_tokens=10_000, format="openai_chat")
        history = done.messages
        assert history[1] is call
        assert history[3] is answer
        assert not done.report.dropped_turn_ids

        done = compact_messages(history, max_tokens=2_500, format="openai_chat")
        assert done.messages[1] is call  # kept as it is, while its result was masked
        assert done.messages[3] is answer
        assert done.report.masked_turn_ids == ("m2", "m6")
        assert openai_chat.count_tokens(done.messages) <= 2_500

    def test_a_removed_object_is_gone_and_the_rest_still_valid(self) -> None:
        call, answer = chat_objects()
        history: list[ChatCompletionMessageParam | ChatCompletionMessage] = [
            {"role": "user", "content": "Go."},
            call,
            {"role": "tool", "tool_call_id": "c9", "content": LOG},
            answer,
            {"role": "user", "content": "And?"},
        ]
        done = compact_messages(
            history, max_tokens=20, format="openai_chat", protected_recent_turns=2, policy=DROP
        )
        assert done.messages == [answer, history[4]]
        assert done.messages[0] is answer

    def test_a_misspelt_format_is_a_type_error_and_refused(self) -> None:
        with pytest.raises(
            ValidationError, match=r"format must be a cutctx\.formats\.Format or one of"
        ):
            compact_messages(chat_history(), max_tokens=60, format="opneai_chat")  # type: ignore[arg-type]

    def test_the_module_is_accepted_as_the_format(self) -> None:
        done: CompactedMessages[ChatCompletionMessageParam] = compact_messages(
            chat_history(), max_tokens=10_000, format=openai_chat
        )
        assert done.messages == chat_history()

    def test_a_non_message_is_refused(self) -> None:
        # Any message type type-checks (a custom Format's own); the format refuses a non-message.
        with pytest.raises(ValidationError, match=r"messages\[0\]: the message must be an object"):
            compact_messages([1], max_tokens=60, format="openai_chat")

    def test_the_result_does_not_assign_to_another_providers_list(self) -> None:
        done = compact_messages(chat_history(), max_tokens=10_000, format="openai_chat")
        wrong: list[MessageParam] = done.messages  # type: ignore[assignment]
        assert wrong == chat_history()


def anthropic_response() -> Message:
    """An assistant turn as the Messages API returns it."""
    return Message(
        id="msg_1",
        content=[
            TextBlock(type="text", text="Let me look."),
            ToolUseBlock(id="toolu_1", name="log", input={"path": "."}, type="tool_use"),
        ],
        model="claude",
        role="assistant",
        stop_reason="tool_use",
        stop_sequence=None,
        type="message",
        usage=Usage(input_tokens=1, output_tokens=1),
    )


class TestAnthropic:
    def test_a_typed_history_with_response_blocks_compacts_and_assigns_back(self) -> None:
        response = anthropic_response()
        system: list[TextBlockParam] = [{"type": "text", "text": "You are careful."}]
        history: list[MessageParam] = [
            {"role": "user", "content": "What changed?"},
            {"role": "assistant", "content": response.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": LOG}],
            },
            {"role": "assistant", "content": "The cache key changed."},
            {"role": "user", "content": "Thanks."},
        ]
        given = list(history)
        kept = compact_messages(history, max_tokens=10_000, format="anthropic", system=system)
        assert all(a is b for a, b in zip(kept.messages, given, strict=True))

        done = compact_messages(
            history,
            max_tokens=80,
            format="anthropic",
            system=system,
            policy=MASK,
            protected_recent_turns=1,
            estimator=CHARS,
        )
        history = done.messages
        assert done.report.masked_turn_ids == ("m2",)
        assert history[1] is given[1]  # the dict holding the SDK blocks, as given
        assert anthropic.count_tokens(history, system=system, estimator=CHARS) <= 80

    def test_the_format_functions_return_the_callers_type(self) -> None:
        history: list[MessageParam] = [{"role": "user", "content": "hi"}]
        transcript, binding = anthropic.to_transcript(history, system="Be brief.")
        plan = DropOldestPolicy().decide(transcript, CompactionBudget(10_000))
        history = anthropic.from_transcript(CompactionExecutor().apply(transcript, plan), binding)
        assert history == [{"role": "user", "content": "hi"}]


class TestResponses:
    def test_output_items_appended_as_they_are_are_accepted_and_kept(self) -> None:
        call = ResponseFunctionToolCall(
            type="function_call", call_id="c1", name="log", arguments="{}", id="fc_1"
        )
        answer = ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text="Cache key.", annotations=[])],
        )
        history: list[ResponseInputItemParam | ResponseOutputItem] = [
            {"role": "user", "content": "What changed?"},
            call,
            {"type": "function_call_output", "call_id": "c1", "output": LOG},
            answer,
            {"role": "user", "content": "Thanks."},
        ]
        done = compact_messages(
            history,
            max_tokens=60,
            format="openai_responses",
            policy=MASK,
            protected_recent_turns=1,
            estimator=CHARS,
        )
        history = done.messages
        assert history[1] is call
        assert history[3] is answer
        assert done.report.masked_turn_ids == ("m2",)
        assert openai_responses.count_tokens(history, estimator=CHARS) <= 60

    def test_typed_input_items_assign_back(self) -> None:
        items: list[ResponseInputItemParam] = [{"role": "user", "content": "hi"}]
        items = compact_messages(items, max_tokens=100, format="openai_responses").messages
        transcript, binding = openai_responses.to_transcript(items)
        plan = DropOldestPolicy().decide(transcript, CompactionBudget(100))
        items = openai_responses.from_transcript(transcript, binding)
        assert items == [{"role": "user", "content": "hi"}]
        assert plan.budget_unmet is False


class TestWindowOfSdkObjects:
    def test_a_window_continues_after_an_sdk_output_item_and_a_reasoning_item(self) -> None:
        # history += response.output: the window reads the last item it holds, an SDK object,
        # to learn whether the next items change its turns (a reasoning item's do).
        reasoning = ResponseReasoningItem(id="rs_1", type="reasoning", summary=[])
        answer = ResponseOutputMessage(
            id="msg_1",
            type="message",
            role="assistant",
            status="completed",
            content=[ResponseOutputText(type="output_text", text="Cache key.", annotations=[])],
        )
        window = ContextWindow("openai_responses", max_tokens=1_000)
        history: list[ResponseInputItemParam | ResponseOutputItem] = [
            {"role": "user", "content": "What changed?"},
            reasoning,
        ]
        assert window.prepare(history) == history
        history = [*history, answer]
        assert window.prepare(history) == history
        history = [*history, {"role": "user", "content": "Thanks."}]
        assert window.prepare(history) == history
        assert window.stats.resets == 0

    def test_an_anthropic_message_object_may_precede_new_messages(self) -> None:
        reply = Message(
            id="msg_1",
            type="message",
            role="assistant",
            model="claude",
            content=[TextBlock(type="text", text="Cache key.")],
            stop_reason="end_turn",
            stop_sequence=None,
            usage=Usage(input_tokens=1, output_tokens=1),
        )
        window = ContextWindow("anthropic", max_tokens=1_000)
        history: list[object] = [{"role": "user", "content": "What changed?"}, reply]
        window.prepare(history)
        more = [*history, {"role": "user", "content": "Thanks."}]
        assert window.prepare(more)[-1] == {"role": "user", "content": "Thanks."}
        assert window.stats.resets == 0
