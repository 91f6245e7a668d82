"""The async hooks never run the window's CPU-bound work on the event loop.

Each hook is driven through its framework's async run with a 200 kB JSON tool result. An
estimator records, for every text it prices, whether an event loop was running in its thread
(work that blocks the loop) and whether the call came from inside ``ContextWindow.aprepare``
(the window's own step, which runs its CPU-bound part in a worker thread itself). What the
integration does around the step — finding the conversation, pricing a new prompt, restoring a
window, writing its state — must run off the loop; every step must go through ``aprepare``.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent as SdkAgent
from agents import RunConfig, Runner, function_tool
from agents.testing import ScriptedModel, assistant_message, function_call
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from cutctx import ContextWindow
from cutctx.formats import OPENAI_CHAT
from cutctx.integrations._options import Conversations, Options
from cutctx.integrations.langchain import ContextWindowMiddleware
from cutctx.integrations.openai_agents import ContextWindowFilter
from cutctx.integrations.pydantic_ai import ContextWindowProcessor
from tests.framework_oracles import run_async

if TYPE_CHECKING:
    from pydantic_ai.models.function import AgentInfo

SYSTEM = "You are a coding agent."
TASK = "Dump the table twice."
BIG = json.dumps(
    [{"id": n, "name": f"row {n}", "tags": ["a", "b"], "ok": True} for n in range(3_300)]
)
INSIDE: contextvars.ContextVar[bool] = contextvars.ContextVar("inside_aprepare", default=False)


def on_loop() -> bool:
    """Whether an event loop is running in this thread (work here blocks it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


@dataclass
class Watched:
    """A 4-characters-a-token estimator that records where it ran: (on the loop, in aprepare)."""

    calls: list[tuple[bool, bool]] = field(default_factory=list)

    def estimate_tokens(self, text: str) -> int:
        self.calls.append((on_loop(), INSIDE.get()))
        return math.ceil(len(text) / 4)

    def blocking(self) -> list[tuple[bool, bool]]:
        """The calls made on the loop, outside the window's step."""
        return [call for call in self.calls if call[0] and not call[1]]


@dataclass
class Seen:
    """Each ``ContextWindow.aprepare`` and ``state()`` call: whether it began on the loop."""

    steps: list[bool] = field(default_factory=list)
    states: list[bool] = field(default_factory=list)


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Seen:
    """Record each ``aprepare`` and ``state()``, marking the calls made inside ``aprepare``."""
    made = Seen()
    aprepare, state = ContextWindow.aprepare, ContextWindow.state

    async def watched_aprepare(self: ContextWindow, history: Any) -> Any:
        made.steps.append(on_loop())
        token = INSIDE.set(True)
        try:
            return await aprepare(self, history)
        finally:
            INSIDE.reset(token)

    def watched_state(self: ContextWindow) -> dict[str, Any]:
        made.states.append(on_loop() and not INSIDE.get())
        return state(self)

    monkeypatch.setattr(ContextWindow, "aprepare", watched_aprepare)
    monkeypatch.setattr(ContextWindow, "state", watched_state)
    return made


def check(watched: Watched, seen: Seen, calls: int) -> None:
    assert seen.steps == [True] * calls  # every model call's step went through aprepare
    assert watched.blocking() == []
    assert not any(seen.states)  # no state written on the loop
    assert any(not loop for loop, _ in watched.calls)  # the work ran, in a worker thread


class TestAsyncHooksKeepTheLoopFree:
    def test_the_langchain_middleware_restores_and_writes_its_window_off_the_loop(
        self, seen: Seen
    ) -> None:
        @tool
        def dump() -> str:
            """Dump the table."""
            return BIG

        class Model(GenericFakeChatModel):
            def bind_tools(self, tools: Any, **kwargs: Any) -> Model:
                del tools, kwargs
                return self

        calls = [
            AIMessage("", tool_calls=[{"name": "dump", "args": {}, "id": f"c{n}"}])
            for n in range(2)
        ]
        model = Model(messages=iter([*calls, AIMessage("Done."), AIMessage("Done again.")]))
        watched = Watched()
        middleware = ContextWindowMiddleware(8_000, keep_first=1, estimator=watched)
        graph = create_agent(
            model,
            [dump],
            system_prompt=SYSTEM,
            middleware=[middleware],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": "t"}}
        watched.calls.clear()
        run_async(graph.ainvoke({"messages": [HumanMessage(TASK)]}, config))
        run_async(graph.ainvoke({"messages": [HumanMessage("Again.")]}, config))  # restored
        check(watched, seen, 4)

    def test_the_pydantic_ai_processor_finds_its_conversation_off_the_loop(
        self, seen: Seen
    ) -> None:
        async def respond(messages: list[Any], info: AgentInfo) -> ModelResponse:
            del info
            if len(messages) < 4:
                return ModelResponse(parts=[ToolCallPart("dump", {}, f"c{len(messages)}")])
            return ModelResponse(parts=[TextPart("Done.")])

        watched = Watched()
        agent = Agent(
            FunctionModel(respond),
            instructions=SYSTEM,
            capabilities=[ContextWindowProcessor(8_000, keep_first=1, estimator=watched)],
        )

        @agent.tool_plain
        def dump() -> str:
            """Dump the table."""
            return BIG

        watched.calls.clear()
        result = run_async(agent.run(TASK))
        assert result.output == "Done."
        check(watched, seen, 3)

    def test_the_agents_sdk_filter_finds_its_conversation_off_the_loop(self, seen: Seen) -> None:
        @function_tool
        def dump() -> str:
            """Dump the table."""
            return BIG

        model = ScriptedModel(
            [
                [function_call("dump", {}, call_id="c0")],
                [function_call("dump", {}, call_id="c1")],
                [assistant_message("Done.")],
            ]
        )
        watched = Watched()
        window = ContextWindowFilter(8_000, keep_first=1, estimator=watched)
        agent = SdkAgent(name="coder", instructions=SYSTEM, model=model, tools=[dump])
        settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
        watched.calls.clear()
        run_async(Runner.run(agent, TASK, run_config=settings, hooks=window))
        check(watched, seen, 3)


class Compared(dict[str, Any]):
    """A message that records, in ``seen``, whether each comparison of it ran on the loop."""

    def __init__(self, content: dict[str, Any], seen: list[bool]) -> None:
        super().__init__(content)
        self.seen = seen

    def __eq__(self, other: object) -> bool:
        self.seen.append(on_loop())
        return dict.__eq__(self, other)

    __hash__ = None


class TestConversationsAprepare:
    def test_histories_are_compared_and_prompts_priced_off_the_loop(self, seen: Seen) -> None:
        watched = Watched()
        held = Conversations(Options("Hook", OPENAI_CHAT, 8_000, {"estimator": watched}))
        compared: list[bool] = []
        for turn in range(1, 4):  # every call new objects of equal content, as a store gives
            history = [
                Compared({"role": "user", "content": f"{BIG[:2_000]} {n}"}, compared)
                for n in range(turn)
            ]
            run_async(held.aprepare(history, f"{SYSTEM} Call {turn}."))  # a new prompt each call
        assert len(held.windows) == 1
        assert compared
        assert not any(compared)
        check(watched, seen, 3)
