"""``cutctx.integrations.openai_agents``: ``ContextWindowFilter`` in the Agents SDK's run loop."""

from __future__ import annotations

import functools
import json
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from baseaicore import ValidationError

from cutctx import CharRatioEstimator
from cutctx.formats import openai_responses
from cutctx.integrations.openai_agents import ContextWindowFilter
from tests.format_validators import responses_problems
from tests.framework_oracles import run_async
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

if TYPE_CHECKING:
    from agents.items import TResponseOutputItem
    from agents.testing import ModelCall

HALF = STEPS // 2


@function_tool
def sh(step: int) -> str:
    """Run the build step ``step``."""
    return output(step)


def last_step(items: list[Any]) -> int:
    """The step of the last tool output in ``items`` (-1 before the first)."""
    for item in reversed(items):
        if isinstance(item, dict) and item.get("type") == "function_call_output":
            return step_of(item["call_id"])
    return -1


def respond(call: ModelCall) -> list[TResponseOutputItem]:
    """Call ``sh`` for the next step; answer after steps ``HALF - 1`` and ``STEPS - 1``."""
    items = list(call.input)
    step = last_step(items) + 1
    answers = items[-1].get("type") == "function_call_output" and step in (HALF, STEPS)
    if answers:
        return [assistant_message(ANSWER)]
    return [function_call("sh", {"step": step}, call_id=call_id(step))]


def model() -> ScriptedModel:
    return ScriptedModel([ModelStep.respond(respond) for _ in range(STEPS + 2)])


def turn(
    window: ContextWindowFilter, scripted: ScriptedModel, items: list[Any]
) -> list[dict[str, Any]]:
    """One run of the agent over ``items``; return the items it leaves (the conversation)."""
    agent = Agent(name="coder", instructions=SYSTEM, model=scripted, tools=[sh])
    settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
    result = Runner.run_sync(agent, items, run_config=settings, max_turns=STEPS + 10)
    assert result.final_output == ANSWER
    return [dict(item) for item in result.to_input_list()]


def task() -> list[Any]:
    return [{"role": "user", "content": TASK}]


def follow_up(history: list[dict[str, Any]]) -> list[Any]:
    return [*history, {"role": "user", "content": "Go on."}]


@functools.cache
def session() -> tuple[ScriptedModel, ContextWindowFilter, list[dict[str, Any]]]:
    """The whole conversation (two runs, one filter): the model, the filter, the final items."""
    chars = CharRatioEstimator()  # the audit counts as the format does: 4 characters a token
    window = ContextWindowFilter(MAX_TOKENS, keep_first=1, estimator=chars)
    scripted = model()
    history = turn(window, scripted, task())
    return scripted, window, turn(window, scripted, follow_up(history))


def audit(scripted: ScriptedModel) -> Audit[Any]:
    checked: Audit[Any] = Audit(
        problems=lambda items: responses_problems(list(items)),
        count=lambda items: openai_responses.count_tokens(items, system=SYSTEM),
        price=lambda item: openai_responses.count_tokens([item]),
        holds_task=lambda items: {"role": "user", "content": TASK} in items,
    )
    for call in scripted.calls:
        checked.record(call.input)
    return checked


class TestContextWindowFilter:
    def test_a_long_session_sends_valid_fitting_requests_that_keep_their_prefix(self) -> None:
        scripted, window, _ = session()
        assert len(scripted.calls) == STEPS + 2
        audit(scripted).check()
        assert window.stats.compactions >= MIN_COMPACTIONS
        assert window.stats.resets == 0  # the SDK's rebuilt items are the same history

    def test_the_instructions_are_sent_unchanged(self) -> None:
        scripted, window, _ = session()
        assert {call.system_instructions for call in scripted.calls} == {SYSTEM}
        assert window.window.system == SYSTEM

    def test_the_conversation_keeps_every_original_item(self) -> None:
        _, _, items = session()
        outputs = [item["output"] for item in items if item.get("type") == "function_call_output"]
        assert outputs == [output(step) for step in range(STEPS)]

    def test_a_filter_restored_from_its_state_sends_the_same_requests(self) -> None:
        uninterrupted, _, _ = session()
        first, scripted = (
            ContextWindowFilter(MAX_TOKENS, keep_first=1, estimator=CharRatioEstimator()),
            model(),
        )
        history = turn(first, scripted, task())
        stored = json.loads(json.dumps(first.state()))  # beside the SDK session, as JSON
        restored = ContextWindowFilter.from_state(
            stored, MAX_TOKENS, keep_first=1, estimator=CharRatioEstimator()
        )
        turn(restored, scripted, json.loads(json.dumps(follow_up(history))))
        assert [call.input for call in scripted.calls] == [
            call.input for call in uninterrupted.calls
        ]
        assert restored.last is not None
        assert restored.stats.requests == STEPS + 2

    def test_called_directly_it_returns_model_input_data(self) -> None:
        window = ContextWindowFilter(MAX_TOKENS)
        agent = Agent(name="coder", instructions="Be brief.")
        data = CallModelData(ModelInputData(task(), "Be brief."), agent, None)
        made = run_async(window(data))
        assert isinstance(made, ModelInputData)
        assert (made.input, made.instructions) == (task(), "Be brief.")
        assert window.window.system == "Be brief."

    def test_system_and_format_are_taken_from_the_call_not_as_options(self) -> None:
        with pytest.raises(ValidationError, match="system= is not an option"):
            ContextWindowFilter(MAX_TOKENS, system="x")  # type: ignore[call-arg]
