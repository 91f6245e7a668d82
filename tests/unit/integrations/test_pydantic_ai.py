"""``cutctx.integrations.pydantic_ai``: ``ContextWindowProcessor`` in Pydantic AI's agent loop."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
from typing import Any

import pytest
from baseaicore import ValidationError, sha256_of
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    ModelResponsePart,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import RequestUsage, UsageLimits

from cutctx import CharRatioEstimator
from cutctx.formats.pydantic_ai import count_tokens
from cutctx.integrations.pydantic_ai import ContextWindowProcessor
from tests.format_validators import chat_problems
from tests.framework_oracles import run_async, sent_by_pydantic_ai
from tests.unit.integrations.helpers import (
    ANSWER,
    CHANGING_CALLS,
    LONG_SYSTEM,
    MAX_TOKENS,
    MIN_COMPACTIONS,
    MIN_SAME_AFTER_SYSTEM,
    STEPS,
    SYSTEM,
    TASK,
    USAGE_CALLS,
    Audit,
    call_id,
    hidden_count,
    output,
    same_after_system,
    step_of,
)

HALF = STEPS // 2
PROMPT = "Be terse."
INSTRUCTIONS = [{"type": "text", "text": SYSTEM}]


def reply(*parts: ModelResponsePart) -> ModelResponse:
    """A response that reports no usage (``FunctionModel`` makes up one, which is not reported)."""
    return ModelResponse(parts=list(parts))


class Scripted:
    """A ``FunctionModel`` function: calls ``sh`` step after step, answers after steps
    ``HALF - 1`` and ``STEPS - 1``; it records the messages of every request."""

    def __init__(self, answers: tuple[int, ...] = (HALF, STEPS)) -> None:
        self.requests: list[list[ModelMessage]] = []
        self.instructions: list[str | None] = []
        self.answers = answers

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
        if answered and step in self.answers:
            return reply(TextPart(ANSWER))
        return reply(ToolCallPart("sh", {"step": step}, call_id(step)))


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
        # counted with the processor's estimator, four characters a token
        count=lambda request: count_tokens(
            request, system=INSTRUCTIONS, estimator=CharRatioEstimator()
        ),
        price=lambda message: count_tokens([message], estimator=CharRatioEstimator()),
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


TASKS = ("Make the build green.", "Make the docs build.")
ROUNDS = 4
SMALL = 2_000


class ThreeThenAnswer:
    """A ``FunctionModel`` function: in each run, calls ``sh`` three times, then answers; the
    step counts over the conversation. It records each request's messages by task."""

    def __init__(self) -> None:
        self.requests: dict[str, list[list[ModelMessage]]] = {task: [] for task in TASKS}
        self.order: list[str] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        del info
        task = next(
            part.content
            for part in messages[0].parts
            if isinstance(part, UserPromptPart) and isinstance(part.content, str)
        )
        self.requests[task].append(list(messages))
        self.order.append(task)
        returns = [
            part
            for message in messages
            if isinstance(message, ModelRequest)
            for part in message.parts
            if isinstance(part, ToolReturnPart)
        ]
        step = step_of(returns[-1].tool_call_id) + 1 if returns else 0  # what compaction keeps
        answered = any(isinstance(part, ToolReturnPart) for part in messages[-1].parts)
        if answered and step % 3 == 0:
            return reply(TextPart(ANSWER))
        return reply(ToolCallPart("sh", {"step": step}, call_id(step)))


def shared_agent(model: ThreeThenAnswer, processor: ContextWindowProcessor) -> Agent[None, str]:
    made = Agent(FunctionModel(model), instructions=SYSTEM, capabilities=[processor])

    @made.tool_plain
    def sh(step: int) -> str:
        """Run the build step ``step``."""
        return output(step)

    del sh
    return made


def interleaved(agents: list[Agent[None, str]]) -> None:
    """Run both conversations, round after round, the two runs of a round at once."""
    limits = UsageLimits(request_limit=None)

    async def rounds() -> None:
        histories: list[list[ModelMessage] | None] = [None, None]
        for number in range(ROUNDS):
            prompts = TASKS if number == 0 else ("Go on.", "Go on.")
            done = await asyncio.gather(
                *(
                    agent.run(prompt, message_history=history, usage_limits=limits)
                    for agent, prompt, history in zip(agents, prompts, histories, strict=True)
                )
            )
            histories = [result.all_messages() for result in done]

    run_async(rounds())


class TestContextWindowProcessorConversations:
    def test_one_capability_keeps_one_window_per_conversation_across_interleaved_runs(
        self,
    ) -> None:
        processor, model = ContextWindowProcessor(SMALL, keep_first=1), ThreeThenAnswer()
        agent = shared_agent(model, processor)
        interleaved([agent, agent])
        assert len(model.order) == 2 * 4 * ROUNDS
        assert sum(a != b for a, b in itertools.pairwise(model.order)) >= ROUNDS
        alone = ThreeThenAnswer()
        interleaved(
            [shared_agent(alone, ContextWindowProcessor(SMALL, keep_first=1)) for _ in TASKS]
        )
        for task in TASKS:
            assert [sent_by_pydantic_ai(request) for request in model.requests[task]] == [
                sent_by_pydantic_ai(request) for request in alone.requests[task]
            ]
        assert len(processor.windows) == 2
        assert [window.stats.resets for window in processor.windows] == [0, 0]
        assert [window.stats.requests for window in processor.windows] == [4 * ROUNDS] * 2
        assert sum(window.stats.compactions for window in processor.windows) > 0

    def test_a_stored_history_without_its_objects_finds_its_conversation(self) -> None:
        processor, model = ContextWindowProcessor(SMALL, keep_first=1), ThreeThenAnswer()
        agent = shared_agent(model, processor)
        limits = UsageLimits(request_limit=None)
        first = agent.run_sync(TASKS[0], usage_limits=limits).all_messages()
        agent.run_sync(TASKS[1], usage_limits=limits)
        agent.run_sync("Go on.", message_history=stored(first), usage_limits=limits)
        assert len(processor.windows) == 2
        assert processor.window.stats.requests == 8
        assert processor.window.stats.resets == 0


class TestContextWindowProcessorRecall:
    def test_a_model_calling_cutctx_recall_gets_the_page_back(self) -> None:
        big = "".join(f"row {n}: value\n" for n in range(800))
        digest = sha256_of(big)
        pages: list[str] = []

        def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            assert "cutctx_recall" in [tool.name for tool in info.function_tools]
            returns = [
                part
                for message in messages
                if isinstance(message, ModelRequest)
                for part in message.parts
                if isinstance(part, ToolReturnPart)
            ]
            if not returns:
                return reply(ToolCallPart("dump", {}, "c1"))
            if len(returns) == 1:
                arguments = {"sha256": digest, "start_line": 3}
                return reply(ToolCallPart("cutctx_recall", arguments, "r1"))
            pages.append(str(returns[-1].content))
            return reply(TextPart(ANSWER))

        processor = ContextWindowProcessor(SMALL, keep_first=1, recall=True)
        made = Agent(FunctionModel(respond), instructions=SYSTEM, capabilities=[processor])

        @made.tool_plain
        def dump() -> str:
            """Dump the table."""
            return big

        del dump
        assert made.run_sync(TASK).output == ANSWER
        assert pages[0].startswith("row 2: value\nrow 3: value\n")
        assert "continue with start_line=" in pages[0]

    def test_without_recall_no_tool_is_added(self) -> None:
        assert ContextWindowProcessor(SMALL).get_toolset() is None


class TestContextWindowProcessorFromState:
    def test_options_other_than_the_states_are_refused_naming_them(self) -> None:
        _, processor, _ = session()
        state = processor.state()
        with pytest.raises(ValidationError, match=r"keep_first=0 \(the state's 1\)"):
            ContextWindowProcessor.from_state(state, MAX_TOKENS)
        with pytest.raises(ValidationError, match="compact_at"):
            ContextWindowProcessor.from_state(state, MAX_TOKENS, keep_first=1, compact_at=0.7)


def prompt_run(*, changing: bool) -> tuple[Scripted, ContextWindowProcessor]:
    """One run of ``CHANGING_CALLS`` requests whose instructions are made on every request."""
    processor = ContextWindowProcessor(MAX_TOKENS, keep_first=1)
    scripted = Scripted(answers=(CHANGING_CALLS - 1,))
    made = Agent(FunctionModel(scripted), capabilities=[processor])
    calls = itertools.count(1)

    @made.instructions
    def instructions() -> str:
        number = next(calls)
        # The fixed run's instructions are as long: only their change is under test.
        return f"{SYSTEM} Call {number:02d}." if changing else f"{SYSTEM} Call 00."

    @made.tool_plain
    def sh(step: int) -> str:
        """Run the build step ``step``."""
        return output(step)

    del instructions, sh
    limits = UsageLimits(request_limit=None)
    history = made.run_sync(TASK, usage_limits=limits).all_messages()
    while len(scripted.requests) < CHANGING_CALLS:
        history = made.run_sync(
            "Go on.", message_history=history, usage_limits=limits
        ).all_messages()
    return scripted, processor


def unprompted(scripted: Scripted) -> list[list[dict[str, Any]]]:
    """What the model was sent, request by request, its instructions (system messages) aside."""
    return [
        [message for message in request if message["role"] != "system"]
        for request in sent(scripted)
    ]


class TestContextWindowProcessorChangingPrompt:
    def test_instructions_made_on_every_request_keep_the_window(self) -> None:
        changing, processor = prompt_run(changing=True)
        fixed, _ = prompt_run(changing=False)
        assert len(changing.requests) == CHANGING_CALLS
        assert len(set(changing.instructions)) == CHANGING_CALLS
        assert (processor.stats.requests, processor.stats.resets) == (CHANGING_CALLS, 0)
        assert processor.stats.compactions >= 2
        assert len(processor.windows) == 1
        for request, instructions in zip(changing.requests, changing.instructions, strict=True):
            assert count_tokens(request, system=instructions) <= MAX_TOKENS
        assert same_after_system(unprompted(changing), unprompted(fixed)) >= MIN_SAME_AFTER_SYSTEM


class Reporting(Scripted):
    """``Scripted`` whose responses report ``hidden_count`` of each request."""

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        made = super().__call__(messages, info)
        counted = count_tokens(messages, system=[{"type": "text", "text": LONG_SYSTEM}])
        made.usage = RequestUsage(input_tokens=hidden_count(counted), output_tokens=5)
        return made


class TestContextWindowProcessorUsage:
    def test_the_usage_a_test_model_makes_up_is_not_reported(self) -> None:
        _, processor, _ = session()  # FunctionModel made up a usage for every response
        assert processor.state()["calibration"]["reports"] == []

    def test_the_responses_usage_calibrates_the_window_no_request_over_after_the_first(
        self,
    ) -> None:
        processor = ContextWindowProcessor(MAX_TOKENS, keep_first=1)
        scripted = Reporting(answers=(USAGE_CALLS - 1,))
        made = Agent(FunctionModel(scripted), instructions=LONG_SYSTEM, capabilities=[processor])

        @made.tool_plain
        def sh(step: int) -> str:
            """Run the build step ``step``."""
            return output(step)

        del sh
        made.run_sync(TASK, usage_limits=UsageLimits(request_limit=None))
        system = [{"type": "text", "text": LONG_SYSTEM}]
        counts = [
            hidden_count(count_tokens(request, system=system)) for request in scripted.requests
        ]
        assert len(counts) == USAGE_CALLS
        assert max(counts[1:]) <= MAX_TOKENS
        assert max(counts) > MAX_TOKENS // 2
