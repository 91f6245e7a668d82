"""``cutctx.integrations.langchain``: ``ContextWindowMiddleware`` in LangChain's own agent loop."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError, sha256_of
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, dynamic_prompt
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    convert_to_openai_messages,
)
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import Field

from cutctx import CharRatioEstimator, ContextWindow
from cutctx.formats.langchain import LANGCHAIN, count_tokens
from cutctx.integrations.langchain import STATE_KEY, ContextWindowMiddleware
from tests.format_validators import chat_problems
from tests.framework_oracles import run_async
from tests.tool_models import ScriptedToolModel
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

if TYPE_CHECKING:
    from collections.abc import Callable

    from langchain_core.callbacks import (
        AsyncCallbackManagerForLLMRun,
        CallbackManagerForLLMRun,
    )
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph


@tool
def sh(step: int) -> str:
    """Run the build step ``step``."""
    return output(step)


class ScriptedChatModel(ScriptedToolModel):
    """A chat model that calls ``sh`` ``steps`` times, then answers; it records every request.

    Its next step is read from the request's last message (the result it answers), so a resumed
    run continues where the interrupted one stopped. ``fail_at`` raises on that call.
    """

    steps: int = STEPS
    fail_at: int | None = None
    requests: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        del stop, run_manager, kwargs
        self.requests.append(list(messages))
        if self.fail_at is not None and len(self.requests) == self.fail_at:
            message = "the provider is down"
            raise RuntimeError(message)
        last = messages[-1]
        step = step_of(last.tool_call_id) + 1 if isinstance(last, ToolMessage) else 0
        if step < self.steps:
            calls = [{"name": "sh", "args": {"step": step}, "id": call_id(step)}]
            reply = AIMessage("", tool_calls=calls)
        else:
            reply = AIMessage(ANSWER)
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        del run_manager
        return self._generate(messages, stop, **kwargs)


def agent(
    model: ScriptedChatModel,
    middleware: ContextWindowMiddleware,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    system: str | SystemMessage | None = SYSTEM,
) -> CompiledStateGraph[Any, Any, Any, Any]:
    return create_agent(
        model,
        [sh],
        system_prompt=system,
        middleware=[middleware],
        checkpointer=checkpointer or InMemorySaver(),
    )


def config(thread: str = "t1") -> Any:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 4 * STEPS + 20}


def audit(requests: list[list[BaseMessage]]) -> Audit[BaseMessage]:
    checked: Audit[BaseMessage] = Audit(
        problems=lambda request: chat_problems(convert_to_openai_messages(request)),
        # counted with the window's estimator, four characters a token
        count=lambda request: count_tokens(request, estimator=CharRatioEstimator()),
        price=lambda message: count_tokens([message], estimator=CharRatioEstimator()),
        holds_task=lambda request: any(
            isinstance(message, HumanMessage) and message.content == TASK for message in request
        ),
    )
    for request in requests:
        checked.record(request)
    return checked


def bare(requests: list[list[BaseMessage]]) -> list[list[BaseMessage]]:
    """The requests without message ids (LangGraph gives each stored message a random one)."""
    return [
        [message.model_copy(update={"id": None}) for message in request] for request in requests
    ]


def window_of(state: dict[str, Any]) -> ContextWindow:
    """The window a thread's stored state continues (to read its stats)."""
    restore: Callable[..., ContextWindow] = ContextWindow.from_state
    return restore(state[STATE_KEY], format=LANGCHAIN)


@functools.cache
def run(*, asynchronous: bool = False) -> tuple[list[list[BaseMessage]], dict[str, Any]]:
    """One whole session: the model's requests and the thread's final state (run once)."""
    model = ScriptedChatModel()
    chars = CharRatioEstimator()  # the audit counts as the format does: 4 characters a token
    graph = agent(model, ContextWindowMiddleware(MAX_TOKENS, keep_first=1, estimator=chars))
    start = {"messages": [HumanMessage(TASK)]}
    if asynchronous:
        run_async(graph.ainvoke(start, config()))
    else:
        graph.invoke(start, config())
    return model.requests, dict(graph.get_state(config()).values)


class TestContextWindowMiddleware:
    def test_a_long_session_sends_valid_fitting_requests_that_keep_their_prefix(self) -> None:
        requests, state = run()
        assert len(requests) == STEPS + 1
        audit(requests).check()
        assert all(request[0] == SystemMessage(SYSTEM) for request in requests)
        assert window_of(state).stats.compactions >= MIN_COMPACTIONS

    def test_the_graph_state_keeps_every_original_message(self) -> None:
        _, state = run()
        messages = state["messages"]
        assert len(messages) == 2 * STEPS + 2
        results = [message for message in messages if isinstance(message, ToolMessage)]
        assert [result.content for result in results] == [output(step) for step in range(STEPS)]
        assert messages[-1].content == ANSWER

    def test_ainvoke_sends_the_same_requests_as_invoke(self) -> None:
        assert bare(run(asynchronous=True)[0]) == bare(run()[0])

    def test_a_run_that_failed_resumes_from_its_checkpoint_with_the_same_requests(self) -> None:
        uninterrupted, _ = run()
        saver = InMemorySaver()
        failing = ScriptedChatModel(fail_at=60)
        with pytest.raises(RuntimeError, match="provider is down"):
            agent(
                failing,
                ContextWindowMiddleware(MAX_TOKENS, keep_first=1, estimator=CharRatioEstimator()),
                saver,
            ).invoke({"messages": [HumanMessage(TASK)]}, config())
        resumed = ScriptedChatModel()  # a new process: new model, middleware and agent
        graph = agent(
            resumed,
            ContextWindowMiddleware(MAX_TOKENS, keep_first=1, estimator=CharRatioEstimator()),
            saver,
        )
        graph.invoke(None, config())
        assert bare(failing.requests[:59]) == bare(uninterrupted[:59])
        assert bare(resumed.requests) == bare(uninterrupted[59:])

    def test_threads_keep_their_own_windows_on_one_middleware(self) -> None:
        middleware = ContextWindowMiddleware(MAX_TOKENS, keep_first=1)
        shared = ScriptedChatModel(steps=12)
        graph = agent(shared, middleware)
        for thread in ("a", "b", "a"):
            graph.invoke({"messages": [HumanMessage(TASK)]}, config(thread))
        alone = ScriptedChatModel(steps=12)
        lone = agent(alone, ContextWindowMiddleware(MAX_TOKENS, keep_first=1))
        for _ in range(2):
            lone.invoke({"messages": [HumanMessage(TASK)]}, config("a"))
        thread_a = shared.requests[:13] + shared.requests[26:]
        assert bare(thread_a) == bare(alone.requests)
        assert bare(shared.requests[13:26]) == bare(alone.requests[:13])

    def test_a_state_stored_as_json_text_is_continued(self) -> None:
        model = ScriptedChatModel(steps=6)
        graph = agent(model, ContextWindowMiddleware(MAX_TOKENS, keep_first=1))
        graph.invoke({"messages": [HumanMessage(TASK)]}, config())
        saved = graph.get_state(config()).values[STATE_KEY]
        graph.update_state(config(), {STATE_KEY: json.dumps(saved)})
        graph.invoke({"messages": [HumanMessage("Again.")]}, config())
        assert len(model.requests) == 14
        assert bare(model.requests)[-1][1] == HumanMessage(TASK)

    @pytest.mark.parametrize(
        ("system", "priced"),
        [
            (None, None),
            (
                SystemMessage([{"type": "text", "text": SYSTEM}, "Be brief."]),
                [{"type": "text", "text": SYSTEM}, {"type": "text", "text": "Be brief."}],
            ),
        ],
    )
    def test_the_system_message_is_priced_as_the_windows_system(
        self, system: SystemMessage | None, priced: object
    ) -> None:
        model = ScriptedChatModel(steps=40)
        middleware = ContextWindowMiddleware(2_000, keep_first=1)
        graph = agent(model, middleware, system=system)
        graph.invoke({"messages": [HumanMessage(TASK)]}, config())
        saved = graph.get_state(config()).values[STATE_KEY]
        assert window_of({STATE_KEY: saved}).system == priced
        assert all(count_tokens(request) <= 2_000 for request in model.requests)

    def test_many_threads_keep_at_most_a_few_windows_in_memory(self) -> None:
        middleware = ContextWindowMiddleware(MAX_TOKENS)
        graph = agent(ScriptedChatModel(steps=1), middleware)
        for thread in range(40):
            graph.invoke({"messages": [HumanMessage(TASK)]}, config(str(thread)))
        assert len(middleware.windows) == 32  # the cache keeps the 32 latest

    def test_system_and_format_are_taken_from_the_request_not_as_options(self) -> None:
        for name in ("system", "format"):
            with pytest.raises(ValidationError, match=f"{name}= is not an option") as caught:
                ContextWindowMiddleware(MAX_TOKENS, **{name: "x"})  # type: ignore[arg-type]
            assert caught.value.details == {"field": name}

    def test_a_bad_window_option_is_refused_when_the_middleware_is_made(self) -> None:
        with pytest.raises(ValidationError, match="compact_to"):
            ContextWindowMiddleware(MAX_TOKENS, compact_at=0.5, compact_to=0.9)

    def test_it_keeps_its_state_under_one_private_key(self) -> None:
        schema = ContextWindowMiddleware.state_schema
        assert STATE_KEY in schema.__annotations__
        assert ContextWindowMiddleware(MAX_TOKENS).name == "ContextWindowMiddleware"


LONG_RULES = " ".join(f"Rule {n}: keep the build green." for n in range(60))


@dynamic_prompt
def longer_prompt(request: ModelRequest[Any]) -> str:
    """A prompt longer than the agent's (about 500 tokens more), made on every call."""
    del request
    return f"{SYSTEM} {LONG_RULES}"


def ordered(
    model: ScriptedChatModel, first: Any, second: Any
) -> CompiledStateGraph[Any, Any, Any, Any]:
    return create_agent(
        model, [sh], system_prompt=SYSTEM, middleware=[first, second], checkpointer=InMemorySaver()
    )


class TestContextWindowMiddlewareOrder:
    def test_listed_after_a_dynamic_prompt_every_request_fits_with_the_longer_prompt(self) -> None:
        model = ScriptedChatModel(steps=40)
        graph = ordered(model, longer_prompt, ContextWindowMiddleware(2_000, keep_first=1))
        graph.invoke({"messages": [HumanMessage(TASK)]}, config())
        assert len(model.requests) == 41
        assert all(request[0].content == f"{SYSTEM} {LONG_RULES}" for request in model.requests)
        assert max(count_tokens(request) for request in model.requests) <= 2_000

    @pytest.mark.parametrize("asynchronous", [False, True])
    def test_listed_before_other_model_call_middleware_it_refuses_the_call(
        self, *, asynchronous: bool
    ) -> None:
        model = ScriptedChatModel(steps=40)
        graph = ordered(model, ContextWindowMiddleware(2_000, keep_first=1), longer_prompt)
        start = {"messages": [HumanMessage(TASK)]}

        def call() -> object:
            if asynchronous:
                return run_async(graph.ainvoke(start, config()))
            return graph.invoke(start, config())

        with pytest.raises(ValidationError, match="must be the last middleware") as caught:
            call()
        assert caught.value.details == {"field": "middleware"}
        assert model.requests == []  # refused before any request is sent


class TestContextWindowMiddlewareRecall:
    def test_a_model_calling_cutctx_recall_gets_the_page_back(self) -> None:
        big = "".join(f"row {n}: value\n" for n in range(800))
        digest = sha256_of(big)

        @tool
        def dump() -> str:
            """Dump the table."""
            return big

        received: list[list[BaseMessage]] = []

        class Recalling(ScriptedChatModel):
            def _generate(
                self,
                messages: list[BaseMessage],
                stop: list[str] | None = None,
                run_manager: CallbackManagerForLLMRun | None = None,
                **kwargs: Any,
            ) -> ChatResult:
                del stop, run_manager, kwargs
                received.append(list(messages))
                calls = {
                    1: [{"name": "dump", "args": {}, "id": "c1"}],
                    2: [
                        {
                            "name": "cutctx_recall",
                            "args": {"sha256": digest, "start_line": 3},
                            "id": "r1",
                        }
                    ],
                }.get(len(received))
                reply = AIMessage("", tool_calls=calls) if calls else AIMessage(ANSWER)
                return ChatResult(generations=[ChatGeneration(message=reply)])

        middleware = ContextWindowMiddleware(2_000, keep_first=1, recall=True)
        assert [made.name for made in middleware.tools] == ["cutctx_recall"]
        graph = create_agent(
            Recalling(),
            [dump],
            system_prompt=SYSTEM,
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        graph.invoke({"messages": [HumanMessage(TASK)]}, config())
        assert f"sha256:{digest}" in str(received[1][-1].content)
        page = received[2][-1]
        assert isinstance(page, ToolMessage)
        assert str(page.content).startswith("row 2: value\nrow 3: value\n")
        assert "continue with start_line=" in str(page.content)

    def test_another_process_answers_from_the_threads_state(self) -> None:
        big = "".join(f"row {n}: value\n" for n in range(800))
        history = [
            HumanMessage(TASK),
            AIMessage("", tool_calls=[{"name": "dump", "args": {}, "id": "c1"}]),
            ToolMessage(big, tool_call_id="c1"),
        ]
        first = ContextWindowMiddleware(2_000, keep_first=1, recall=True)
        window = first._options.new(SYSTEM)
        window.prepare(history)
        asking = AIMessage("", tool_calls=[{"name": "cutctx_recall", "args": {}, "id": "r1"}])
        state = {"messages": [*history, asking], STATE_KEY: json.loads(json.dumps(window.state()))}
        other = ContextWindowMiddleware(2_000, keep_first=1, recall=True)  # nothing held
        page = other._recall({"sha256": sha256_of(big), "start_line": 5}, state)
        assert page.startswith("row 4: value\n")
        fresh = ContextWindowMiddleware(2_000, keep_first=1, recall=True)
        assert fresh._recall(
            {"sha256": sha256_of(big)}, {"messages": [*history, asking]}
        ).startswith("row 0: value\n")

    def test_without_recall_it_adds_no_tool(self) -> None:
        assert ContextWindowMiddleware(MAX_TOKENS).tools == []


class TestContextWindowMiddlewareOptions:
    def test_a_thread_whose_state_was_made_with_other_options_starts_over_with_these(self) -> None:
        saver = InMemorySaver()
        agent(
            ScriptedChatModel(steps=6), ContextWindowMiddleware(MAX_TOKENS, keep_first=1), saver
        ).invoke({"messages": [HumanMessage(TASK)]}, config())
        graph = agent(ScriptedChatModel(steps=6), ContextWindowMiddleware(MAX_TOKENS // 2), saver)
        graph.invoke({"messages": [HumanMessage("Again.")]}, config())
        restored = window_of(dict(graph.get_state(config()).values))
        assert restored.state()["max_tokens"] == MAX_TOKENS // 2
        assert restored.state()["keep_first"] == 0


def prompt_run(*, changing: bool) -> tuple[list[list[BaseMessage]], dict[str, Any]]:
    """A session whose system prompt is made on every call: the same, or naming the call."""

    @dynamic_prompt
    def prompt(request: ModelRequest[Any]) -> str:
        return f"{SYSTEM} Call {len(request.messages)}." if changing else SYSTEM

    model = ScriptedChatModel(steps=CHANGING_CALLS - 1)
    middleware = ContextWindowMiddleware(MAX_TOKENS, keep_first=1)
    graph = ordered(model, prompt, middleware)
    graph.invoke({"messages": [HumanMessage(TASK)]}, config())
    return model.requests, dict(graph.get_state(config()).values)


class TestContextWindowMiddlewareChangingPrompt:
    def test_a_prompt_made_on_every_call_keeps_the_threads_window(self) -> None:
        changing, state = prompt_run(changing=True)
        fixed, _ = prompt_run(changing=False)
        assert len(changing) == CHANGING_CALLS
        assert [request[0].content for request in changing[:2]] == [
            f"{SYSTEM} Call 1.",
            f"{SYSTEM} Call 3.",
        ]
        assert max(count_tokens(request) for request in changing) <= MAX_TOKENS
        stats = window_of(state).stats
        assert (stats.requests, stats.resets) == (CHANGING_CALLS, 0)
        assert stats.compactions >= 2
        after = [request[1:] for request in bare(changing)]
        assert same_after_system(after, [request[1:] for request in bare(fixed)]) >= (
            MIN_SAME_AFTER_SYSTEM
        )


class Reporting(ScriptedChatModel):
    """``ScriptedChatModel`` whose replies report ``hidden_count`` of each request."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        made = super()._generate(messages, stop, run_manager, **kwargs)
        tokens = hidden_count(count_tokens(messages))
        reply = made.generations[0].message
        assert isinstance(reply, AIMessage)
        reply.usage_metadata = {
            "input_tokens": tokens,
            "output_tokens": 5,
            "total_tokens": tokens + 5,
        }
        return made


class TestContextWindowMiddlewareUsage:
    def test_the_replies_usage_calibrates_the_window_no_request_over_after_the_first(self) -> None:
        model = Reporting(steps=USAGE_CALLS - 1)
        graph = agent(model, ContextWindowMiddleware(MAX_TOKENS, keep_first=1), system=LONG_SYSTEM)
        graph.invoke({"messages": [HumanMessage(TASK)]}, config())
        assert len(model.requests) == USAGE_CALLS
        over = [hidden_count(count_tokens(request)) > MAX_TOKENS for request in model.requests]
        assert not any(over[1:])
        assert max(hidden_count(count_tokens(request)) for request in model.requests) > (
            MAX_TOKENS // 2
        )


class TestContextWindowMiddlewareSurface:
    def test_it_shows_the_latest_threads_window_as_a_window_fed_the_same_histories(self) -> None:
        model = ScriptedChatModel(steps=12)
        middleware = ContextWindowMiddleware(2_000, keep_first=1)
        graph = agent(model, middleware)
        graph.invoke({"messages": [HumanMessage(TASK)]}, config())
        stored = graph.get_state(config()).values
        alone: Callable[..., ContextWindow] = ContextWindow
        plain = alone(LANGCHAIN, max_tokens=2_000, keep_first=1, system=SYSTEM)
        for call in range(len(model.requests)):  # call k saw the task and k exchanges
            plain.prepare(stored["messages"][: 2 * call + 1])
        assert plain.stats.compactions > 0
        assert middleware.stats == plain.stats
        assert middleware.state() == plain.state() == stored[STATE_KEY]
        assert middleware.last is not None
        assert plain.last is not None
        assert middleware.last.report == plain.last.report
        assert middleware.window.stats is middleware.stats
        assert middleware.windows == (middleware.window,)

    def test_windows_holds_each_threads_window_and_window_is_the_latest_calls(self) -> None:
        middleware = ContextWindowMiddleware(MAX_TOKENS, keep_first=1)
        graph = agent(ScriptedChatModel(steps=3), middleware)
        graph.invoke({"messages": [HumanMessage(TASK)]}, config("a"))
        first = middleware.window
        graph.invoke({"messages": [HumanMessage(TASK)]}, config("b"))
        assert middleware.windows == (first, middleware.window)
        assert middleware.window is not first
        assert middleware.state() == graph.get_state(config("b")).values[STATE_KEY]
        graph.invoke({"messages": [HumanMessage("Again.")]}, config("a"))
        assert middleware.windows[-1] is middleware.window
        assert middleware.stats.requests == 4 + 4  # thread a's window, continued
        assert middleware.state() == graph.get_state(config("a")).values[STATE_KEY]
