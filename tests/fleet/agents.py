"""A LangChain agent with ``ContextWindowMiddleware`` whose scripted model records its inputs.

A conversation (a LangGraph thread) is a series of turns: the user's task for the turn, then
``CALLS`` calls of the ``sh`` tool, then the model's answer, each invoke of the agent one turn.
Every text the thread holds carries the thread's tag (``[alpha]``) and every tool call id starts
with the thread's name, so a model input can be checked to hold its own thread's messages only.
The model reads its next move from the input's last message, so any process continues any turn.
``inputs`` are what the model received, as ``messages_to_dict`` writes them, message ids left out
(LangGraph gives every stored message a random one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage, messages_to_dict
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import Field

from cutctx import ContextWindow, WindowStats
from cutctx.formats.langchain import LANGCHAIN
from cutctx.integrations.langchain import STATE_KEY, ContextWindowMiddleware
from tests.tool_models import ScriptedToolModel

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from langchain_core.callbacks import CallbackManagerForLLMRun
    from langchain_core.messages import BaseMessage
    from langchain_core.runnables import RunnableConfig
    from langgraph.checkpoint.base import BaseCheckpointSaver
    from langgraph.graph.state import CompiledStateGraph

TURNS: Final = 16
CALLS: Final = 4
MAX_TOKENS: Final = 3_000
SYSTEM: Final = "You are a coding agent."
SIZES: Final = (300, 2_400, 600, 4_000, 120, 1_500, 900)
"""Tool output sizes in characters, in turn."""

Input = list[dict[str, Any]]


def task(thread: str, turn: int) -> str:
    return f"[{thread}] turn {turn}: make the build green again."


def call_id(thread: str, turn: int, call: int) -> str:
    return f"{thread}-{turn}-{call}"


@tool
def sh(thread: str, turn: int, call: int) -> str:
    """Run the build step ``call`` of ``turn`` in ``thread``'s checkout."""
    size = SIZES[(turn * CALLS + call) % len(SIZES)]
    return (f"[{thread}] step {turn}.{call}: " + "build ok, " * size)[:size]


class ScriptedChatModel(ScriptedToolModel):
    """Calls ``sh`` ``CALLS`` times a turn, then answers; records every input."""

    inputs: list[Input] = Field(default_factory=list)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        del stop, run_manager, kwargs
        self.inputs.append(bare(messages))
        last = messages[-1]
        if isinstance(last, ToolMessage):  # the result of call k: call k + 1 (or the answer)
            thread, turn, done = last.tool_call_id.rsplit("-", 2)
            number, call = int(turn), int(done) + 1
        else:  # the turn's task: its first call
            assert isinstance(last, HumanMessage), last
            thread, rest = str(last.content).removeprefix("[").split("] turn ", 1)
            number, call = int(rest.split(":", 1)[0]), 0
        if call < CALLS:
            calls = [
                {
                    "name": "sh",
                    "args": {"thread": thread, "turn": number, "call": call},
                    "id": call_id(thread, number, call),
                }
            ]
            reply = AIMessage(f"[{thread}] running step {number}.{call}", tool_calls=calls)
        else:
            reply = AIMessage(f"[{thread}] turn {number} is green.")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def bare(messages: Sequence[BaseMessage]) -> Input:
    """``messages`` as ``messages_to_dict`` writes them, without their ids."""
    out = messages_to_dict(messages)
    for message in out:
        message["data"].pop("id", None)
    return out


def agent(
    model: ScriptedChatModel, checkpointer: BaseCheckpointSaver[Any]
) -> CompiledStateGraph[Any, Any, Any, Any]:
    return create_agent(
        model,
        [sh],
        system_prompt=SYSTEM,
        middleware=[ContextWindowMiddleware(MAX_TOKENS, keep_first=1)],
        checkpointer=checkpointer,
    )


def config(thread: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 4 * CALLS + 10}


def run_turn(
    graph: CompiledStateGraph[Any, Any, Any, Any],
    model: ScriptedChatModel,
    thread: str,
    turn: int,
) -> list[Input]:
    """Invoke one turn of ``thread``; return the model's inputs in it."""
    before = len(model.inputs)
    graph.invoke({"messages": [HumanMessage(task(thread, turn))]}, config(thread))
    return model.inputs[before:]


def stats(graph: CompiledStateGraph[Any, Any, Any, Any], thread: str) -> WindowStats:
    """The stats of the window ``thread``'s checkpoint holds."""
    restore: Callable[..., ContextWindow] = ContextWindow.from_state
    return restore(graph.get_state(config(thread)).values[STATE_KEY], format=LANGCHAIN).stats
