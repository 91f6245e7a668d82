"""Hypothesis strategies for LangChain and Pydantic AI histories that OpenAI would accept.

Each draws an agent run in the framework's own message objects: a system prompt or not, the
task, then assistant replies, user messages and tool calls (one to three in parallel) each
answered right after; Pydantic AI's also puts a user prompt beside the results, and responses
that send nothing (a framework-only record) anywhere, inside an exchange and at the end.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from tests.format_strategies import bodies, texts

_TOOLS = ("ls", "grep", "run_tests")


@st.composite
def _calls(draw: st.DrawFn, first: int) -> list[tuple[str, str, dict[str, Any], str]]:
    """One to three parallel calls, numbered from ``first``: (id, tool, arguments, result)."""
    count = draw(st.integers(1, 3))
    return [
        (
            f"call_{first + number}",
            draw(st.sampled_from(_TOOLS)),
            {"path": draw(texts(20))},
            draw(bodies()),
        )
        for number in range(count)
    ]


@st.composite
def langchain_conversations(draw: st.DrawFn, max_events: int = 6) -> list[BaseMessage]:
    """A LangChain agent's messages."""
    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(draw(texts(40))))
    messages.append(HumanMessage(draw(texts())))
    made = 0
    for _ in range(draw(st.integers(0, max_events))):
        kind = draw(st.sampled_from(["reply", "user", "calls"]))
        if kind == "reply":
            messages.append(AIMessage(draw(texts())))
        elif kind == "user":
            messages.append(HumanMessage(draw(texts())))
        else:
            calls = draw(_calls(made))
            made += len(calls)
            text = draw(st.sampled_from(["", "Let me look."]))
            tool_calls = [{"name": tool, "args": args, "id": id_} for id_, tool, args, _ in calls]
            messages.append(AIMessage(text, tool_calls=tool_calls))
            messages.extend(ToolMessage(result, tool_call_id=id_) for id_, _, _, result in calls)
    return messages


@st.composite
def pydantic_ai_conversations(draw: st.DrawFn, max_events: int = 6) -> list[ModelMessage]:
    """A Pydantic AI run's messages."""
    first: list[Any] = [SystemPromptPart(draw(texts(40)))] if draw(st.booleans()) else []
    messages: list[ModelMessage] = [ModelRequest(parts=[*first, UserPromptPart(draw(texts()))])]
    made = 0
    silent = st.booleans().map(lambda yes: [ModelResponse(parts=[])] if yes else [])
    for _ in range(draw(st.integers(0, max_events))):
        kind = draw(st.sampled_from(["reply", "calls"]))
        if kind == "reply":
            messages.append(ModelResponse(parts=[TextPart(draw(texts()))]))
            messages.extend(draw(silent))
            messages.append(ModelRequest(parts=[UserPromptPart(draw(texts()))]))
            continue
        calls = draw(_calls(made))
        made += len(calls)
        text: list[Any] = [TextPart("Let me look.")] if draw(st.booleans()) else []
        parts = [ToolCallPart(tool, args, id_) for id_, tool, args, _ in calls]
        messages.append(ModelResponse(parts=[*text, *parts]))
        messages.extend(draw(silent))
        results: list[Any] = [ToolReturnPart(tool, result, id_) for id_, tool, _, result in calls]
        if draw(st.booleans()):
            results.append(UserPromptPart(draw(texts())))
        messages.append(ModelRequest(parts=results))
    if draw(st.booleans()):
        messages.append(ModelResponse(parts=[TextPart(draw(texts()))]))
    messages.extend(draw(silent))
    return messages
