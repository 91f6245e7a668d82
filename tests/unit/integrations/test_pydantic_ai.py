"""``cutctx.integrations.pydantic_ai``: ``ContextWindowProcessor`` in Pydantic AI's agent loop."""

from __future__ import annotations

import functools
import json
from typing import Any

import pytest
from baseaicore import ValidationError
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

from cutctx import CharRatioEstimator
from cutctx.formats.pydantic_ai import count_tokens
from cutctx.integrations.pydantic_ai import ContextWindowProcessor
from tests.format_validators import chat_problems
from tests.framework_oracles import sent_by_pydantic_ai
from tests.unit.integrations.helpers import (
    ANSWER,
    MAX_TOKENS,
    MIN_COMPACTIONS,
    STEPS,
    SYSTEM,
    TASK,
    Audit,
    call_id,
    output,
    step_of,
)

HALF = STEPS // 2
PROMPT = "Be terse."
INSTRUCTIONS = [{"type": "text", "text": SYSTEM}]


class Scripted:
    """A ``FunctionModel`` function: calls ``sh`` step after step, answers after steps
    ``HALF - 1`` and ``STEPS - 1``; it records the messages of every request."""

    def __init__(self) -> None:
        self.requests: list[list[ModelMessage]] = []
        self.instructions: list[str | None] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.requests.append(list(messages))
        self.instructions.append(info.instructions)
        last = messages[-1]
        answered = [part for part in last.parts if isinstance(part, ToolReturnPart)]
        returns = [
            part
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        step = step_of(returns[-1].tool_call_id) + 1 if returns else 0
        if answered and step in (HALF, STEPS):
            return ModelResponse(parts=[TextPart(ANSWER)])
        return ModelResponse(parts=[ToolCallPart("sh", {"step": step}, call_id(step))])


def agent(scripted: Scripted, processor: ContextWindowProcessor) -> Agent[None, str]:
    made = Agent(
        FunctionModel(scripted),
        system_prompt=PROMPT,
        instructions=SYSTEM,
        capabilities=[processor],
    )

    @made.tool_plain
    def sh(step: int) -> str:
        """Run the build step ``step``."""
        return output(step)

    del sh
    return made


def turn(
    processor: ContextWindowProcessor,
    scripted: Scripted,
    prompt: str,
    history: list[ModelMessage] | None = None,
) -> list[ModelMessage]:
    """One run of the agent; return its whole message history."""
    limits = UsageLimits(request_limit=None)
    result = agent(scripted, processor).run_sync(
        prompt, message_history=history, usage_limits=limits
    )
    assert result.output == ANSWER
    return result.all_messages()


@functools.cache
def session() -> tuple[Scripted, ContextWindowProcessor, list[ModelMessage]]:
    """The whole conversation (two runs, one processor): the model, processor and history."""
    chars = CharRatioEstimator()  # the audit counts as the format does: 4 characters a token
    processor = ContextWindowProcessor(MAX_TOKENS, keep_first=1, estimator=chars)
    scripted = Scripted()
    history = turn(processor, scripted, TASK)
    return scripted, processor, turn(processor, scripted, "Go on.", history)


def holds_task(request: list[ModelMessage]) -> bool:
    first = request[0]
    return isinstance(first, ModelRequest) and any(
        isinstance(part, UserPromptPart) and part.content == TASK for part in first.parts
    )


def audit(scripted: Scripted) -> Audit[ModelMessage]:
    checked: Audit[ModelMessage] = Audit(
        problems=lambda request: chat_problems(sent_by_pydantic_ai(request)),
        count=lambda request: count_tokens(request, system=INSTRUCTIONS),
        price=lambda message: count_tokens([message]),
        holds_task=holds_task,
    )
    for request in scripted.requests:
        checked.record(request)
    return checked


def sent(scripted: Scripted) -> list[list[dict[str, Any]]]:
    """What the model was sent, request by request (timestamps and run ids left out)."""
    return [sent_by_pydantic_ai(request) for request in scripted.requests]


def stored(history: list[ModelMessage]) -> list[ModelMessage]:
    """``history`` as a store gives it back: dumped to JSON and read again (new objects)."""
    return ModelMessagesTypeAdapter.validate_json(ModelMessagesTypeAdapter.dump_json(history))


class TestContextWindowProcessor:
    def test_a_long_session_sends_valid_fitting_requests_that_keep_their_prefix(self) -> None:
        scripted, processor, _ = session()
        assert len(scripted.requests) == STEPS + 2
        audit(scripted).check()
        assert processor.stats.compactions >= MIN_COMPACTIONS
        assert processor.stats.resets == 0

    def test_the_system_prompt_part_and_the_instructions_are_in_every_request(self) -> None:
        scripted, processor, _ = session()
        for request in scripted.requests:
            first = request[0]
            assert isinstance(first, ModelRequest)
            assert isinstance(first.parts[0], SystemPromptPart)
            assert first.parts[0].content == PROMPT
        assert set(scripted.instructions) == {SYSTEM}
        assert processor.window.system == INSTRUCTIONS

    def test_the_run_history_keeps_every_original_message(self) -> None:
        _, _, history = session()
        returns = [
            part
            for message in history
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        assert [part.content for part in returns] == [output(step) for step in range(STEPS)]

    def test_a_processor_restored_from_its_state_sends_the_same_requests(self) -> None:
        uninterrupted, _, _ = session()
        first, scripted = (
            ContextWindowProcessor(MAX_TOKENS, keep_first=1, estimator=CharRatioEstimator()),
            Scripted(),
        )
        history = turn(first, scripted, TASK)
        state = json.loads(json.dumps(first.state()))
        restored = ContextWindowProcessor.from_state(
            state, MAX_TOKENS, keep_first=1, estimator=CharRatioEstimator()
        )
        turn(restored, scripted, "Go on.", stored(history))
        assert sent(scripted) == sent(uninterrupted)
        assert restored.last is not None

    def test_called_as_a_history_processor_it_returns_the_request(self) -> None:
        _, _, history = session()
        processor = ContextWindowProcessor(MAX_TOKENS, keep_first=1)
        request = processor(history)
        assert count_tokens(request) <= MAX_TOKENS
        assert request[0] is history[0]
        assert request[-1] is history[-1]
        assert chat_problems(sent_by_pydantic_ai(request)) == []

    def test_system_and_format_are_taken_from_the_request_not_as_options(self) -> None:
        with pytest.raises(ValidationError, match="format= is not an option"):
            ContextWindowProcessor(MAX_TOKENS, format="openai_chat")  # type: ignore[call-arg]
