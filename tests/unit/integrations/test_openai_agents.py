"""``cutctx.integrations.openai_agents``: ``ContextWindowFilter`` in the Agents SDK's run loop."""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import re
import warnings
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent, RunConfig, Runner, Usage, function_tool
from agents.run_config import CallModelData, ModelInputData
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from baseaicore import ValidationError, sha256_of

from cutctx import CharRatioEstimator
from cutctx.formats import openai_responses
from cutctx.integrations.openai_agents import ContextWindowFilter
from tests.format_validators import responses_problems
from tests.framework_oracles import run_async
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
    result = Runner.run_sync(agent, items, run_config=settings, hooks=window, max_turns=STEPS + 10)
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
        # counted with the filter's estimator, four characters a token
        count=lambda items: openai_responses.count_tokens(
            items, system=SYSTEM, estimator=CharRatioEstimator()
        ),
        price=lambda item: openai_responses.count_tokens([item], estimator=CharRatioEstimator()),
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


TASKS = ("Make the build green.", "Make the docs build.")
ROUNDS = 4
"""Runs per conversation; each run calls ``sh`` three times, then answers (4 model calls)."""
SMALL = 2_000


def three_then_answer(call: ModelCall) -> list[TResponseOutputItem]:
    """Call ``sh`` for the next step; answer after every third step of the conversation."""
    items = list(call.input)
    step = last_step(items) + 1
    if items[-1].get("type") == "function_call_output" and step % 3 == 0:
        return [assistant_message(ANSWER)]
    return [function_call("sh", {"step": step}, call_id=call_id(step))]


def short_model() -> ScriptedModel:
    return ScriptedModel([ModelStep.respond(three_then_answer) for _ in range(2 * 4 * ROUNDS)])


async def one_run(
    window: ContextWindowFilter, scripted: ScriptedModel, items: list[Any], **tools: Any
) -> list[dict[str, Any]]:
    agent = Agent(name="coder", instructions=SYSTEM, model=scripted, tools=[sh, *tools.values()])
    settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
    result = await Runner.run(agent, items, run_config=settings, hooks=window, max_turns=20)
    return [dict(item) for item in result.to_input_list()]


def by_task(scripted: ScriptedModel, task: str) -> list[list[Any]]:
    """The inputs of the calls of the conversation about ``task``."""
    return [list(call.input) for call in scripted.calls if call.input[0]["content"] == task]


def conversations_on(windows: list[ContextWindowFilter], scripted: ScriptedModel) -> None:
    """Run both conversations, round after round, the two runs of a round at once."""

    async def rounds() -> None:
        histories: list[list[Any]] = [[{"role": "user", "content": task}] for task in TASKS]
        for _ in range(ROUNDS):
            done = await asyncio.gather(
                *(
                    one_run(window, scripted, history)
                    for window, history in zip(windows, histories, strict=True)
                )
            )
            histories = [follow_up(history) for history in done]

    run_async(rounds())


class TestContextWindowFilterConversations:
    def test_one_filter_keeps_one_window_per_conversation_across_interleaved_runs(self) -> None:
        shared, scripted = ContextWindowFilter(SMALL, keep_first=1), short_model()
        conversations_on([shared, shared], scripted)
        calls = [call.input[0]["content"] for call in scripted.calls]
        assert len(calls) == 2 * 4 * ROUNDS
        assert sum(a != b for a, b in itertools.pairwise(calls)) >= ROUNDS  # interleaved
        apart, alone = [ContextWindowFilter(SMALL, keep_first=1) for _ in TASKS], short_model()
        conversations_on(apart, alone)
        for task in TASKS:
            assert by_task(scripted, task) == by_task(alone, task)
        assert len(shared.windows) == 2
        assert [window.stats.resets for window in shared.windows] == [0, 0]
        assert [window.stats.requests for window in shared.windows] == [4 * ROUNDS] * 2
        assert sum(window.stats.compactions for window in shared.windows) > 0

    def test_at_most_conversations_windows_are_held_the_latest_kept(self) -> None:
        window = ContextWindowFilter(SMALL, conversations=3)
        agent = Agent(name="coder", instructions=SYSTEM)
        for number in range(5):
            data = CallModelData(
                ModelInputData([{"role": "user", "content": f"task {number}"}], SYSTEM), agent, None
            )
            run_async(window(data))
        assert len(window.windows) == 3
        assert window.window is window.windows[-1]

    def test_a_history_that_continues_no_window_is_a_new_conversation(self) -> None:
        window = ContextWindowFilter(SMALL)
        agent = Agent(name="coder", instructions=SYSTEM)
        other: list[Any] = [{"role": "user", "content": "Something else."}]
        for items in (task(), other, task()):
            run_async(window(CallModelData(ModelInputData(items, SYSTEM), agent, None)))
        assert len(window.windows) == 2
        assert window.window.stats.requests == 2  # the first conversation's window, again


class TestContextWindowFilterRecall:
    def test_a_model_calling_cutctx_recall_gets_the_page_back(self) -> None:
        window = ContextWindowFilter(SMALL, keep_first=1, recall=True)
        big = "".join(f"row {n}: value\n" for n in range(800))
        digest = sha256_of(big)

        @function_tool
        def dump() -> str:
            """Dump the table."""
            return big

        scripted = ScriptedModel(
            [
                [function_call("dump", {}, call_id="c1")],
                [function_call("cutctx_recall", {"sha256": digest, "start_line": 3}, call_id="r1")],
                [assistant_message(ANSWER)],
            ]
        )
        agent = Agent(
            name="coder", instructions=SYSTEM, model=scripted, tools=[dump, window.recall_tool]
        )
        settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
        result = Runner.run_sync(agent, task(), run_config=settings, hooks=window, max_turns=10)
        items = [dict(item) for item in result.to_input_list()]
        page = str(
            [item for item in items if item.get("type") == "function_call_output"][-1]["output"]
        )
        assert page.startswith("row 2: value\nrow 3: value\n")
        assert "continue with start_line=" in page
        sent = json.dumps(scripted.calls[1].input)
        assert f"sha256:{digest}" in sent  # the model was shown the stub or elision line
        assert window.recall_tool is window.recall_tool

    def test_recall_tool_needs_recall_on(self) -> None:
        with pytest.raises(ValidationError, match="recall=True"):
            _ = ContextWindowFilter(SMALL).recall_tool


class TestContextWindowFilterFromState:
    def test_options_other_than_the_states_are_refused_naming_them(self) -> None:
        window = ContextWindowFilter(MAX_TOKENS, keep_first=1)
        data = CallModelData(ModelInputData(task(), SYSTEM), Agent(name="coder"), None)
        run_async(window(data))
        state = window.state()
        with pytest.raises(ValidationError, match=r"keep_first=0 \(the state's 1\)") as caught:
            ContextWindowFilter.from_state(state, MAX_TOKENS)
        assert caught.value.details == {"fields": ["keep_first"]}
        with pytest.raises(ValidationError, match="max_tokens"):
            ContextWindowFilter.from_state(state, MAX_TOKENS // 2, keep_first=1)
        restored = ContextWindowFilter.from_state(state, MAX_TOKENS, keep_first=1)
        assert restored.stats.requests == 1


def prompt_run(*, changing: bool) -> tuple[ScriptedModel, ContextWindowFilter]:
    """One run of ``CHANGING_CALLS`` calls whose instructions are made on every call."""
    calls = itertools.count(1)

    def instructions(context: Any, agent: Any) -> str:
        del context, agent
        number = next(calls)
        # The fixed run's instructions are as long: only their change is under test.
        return f"{SYSTEM} Call {number:02d}." if changing else f"{SYSTEM} Call 00."

    window = ContextWindowFilter(MAX_TOKENS, keep_first=1)
    scripted = ScriptedModel(
        [ModelStep.respond(answer_at(CHANGING_CALLS - 1)) for _ in range(CHANGING_CALLS)]
    )
    agent = Agent(name="coder", instructions=instructions, model=scripted, tools=[sh])
    settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
    Runner.run_sync(agent, task(), run_config=settings, hooks=window, max_turns=CHANGING_CALLS + 5)
    return scripted, window


def answer_at(steps: int) -> Callable[[ModelCall], list[TResponseOutputItem]]:
    """A responder calling ``sh`` step after step, answering after ``steps`` results."""

    def respond(call: ModelCall) -> list[TResponseOutputItem]:
        step = last_step(list(call.input)) + 1
        if step == steps:
            return [assistant_message(ANSWER)]
        return [function_call("sh", {"step": step}, call_id=call_id(step))]

    return respond


class TestContextWindowFilterChangingPrompt:
    def test_instructions_made_on_every_call_keep_the_window(self) -> None:
        changing, window = prompt_run(changing=True)
        fixed, _ = prompt_run(changing=False)
        assert len(changing.calls) == CHANGING_CALLS
        assert changing.calls[1].system_instructions == f"{SYSTEM} Call 02."
        assert window.window.system == f"{SYSTEM} Call {CHANGING_CALLS}."
        assert (window.stats.requests, window.stats.resets) == (CHANGING_CALLS, 0)
        assert window.stats.compactions >= 2
        assert len(window.windows) == 1
        for call in changing.calls:
            count = openai_responses.count_tokens(call.input, system=call.system_instructions)
            assert count <= MAX_TOKENS
        assert (
            same_after_system(
                [list(call.input) for call in changing.calls],
                [list(call.input) for call in fixed.calls],
            )
            >= MIN_SAME_AFTER_SYSTEM
        )


def reporting(steps: int) -> Callable[[ModelCall], ModelStep]:
    """``answer_at(steps)``, each response reporting ``hidden_count`` of its request."""
    respond = answer_at(steps)

    def step(call: ModelCall) -> ModelStep:
        counted = openai_responses.count_tokens(list(call.input), system=call.system_instructions)
        usage = Usage(
            requests=1, input_tokens=hidden_count(counted), output_tokens=5, total_tokens=0
        )
        return ModelStep(output=respond(call), usage=usage)

    return step


class TestContextWindowFilterUsage:
    def test_as_the_run_hooks_it_calibrates_the_window_no_request_over_after_the_first(
        self,
    ) -> None:
        window = ContextWindowFilter(MAX_TOKENS, keep_first=1)
        scripted = ScriptedModel(
            [ModelStep.respond(reporting(USAGE_CALLS - 1)) for _ in range(USAGE_CALLS)]
        )
        agent = Agent(name="coder", instructions=LONG_SYSTEM, model=scripted, tools=[sh])
        settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
        Runner.run_sync(agent, task(), run_config=settings, hooks=window, max_turns=USAGE_CALLS + 5)
        counts = [
            hidden_count(openai_responses.count_tokens(list(call.input), system=LONG_SYSTEM))
            for call in scripted.calls
        ]
        assert len(counts) == USAGE_CALLS
        assert max(counts[1:]) <= MAX_TOKENS
        assert max(counts) > MAX_TOKENS // 2  # not uselessly cautious either

    def test_without_hooks_it_warns_once_that_it_cannot_calibrate(self) -> None:
        window = ContextWindowFilter(MAX_TOKENS, keep_first=1)
        scripted = ScriptedModel([ModelStep.respond(reporting(5)) for _ in range(12)])
        agent = Agent(name="coder", instructions=SYSTEM, model=scripted, tools=[sh])
        settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(2):
                Runner.run_sync(agent, task(), run_config=settings, max_turns=10)
        said = [str(w.message) for w in caught if issubclass(w.category, UserWarning)]
        assert len(said) == 1
        assert re.search(r"cannot calibrate.*hooks=window", said[0])
        assert len(scripted.calls) == 12
        assert window.state()["calibration"]["reports"] == []  # nothing reached the window

    def test_as_the_run_hooks_it_never_warns(self) -> None:
        window = ContextWindowFilter(MAX_TOKENS, keep_first=1)
        scripted = ScriptedModel([ModelStep.respond(reporting(5)) for _ in range(6)])
        agent = Agent(name="coder", instructions=SYSTEM, model=scripted, tools=[sh])
        settings = RunConfig(call_model_input_filter=window, tracing_disabled=True)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            Runner.run_sync(agent, task(), run_config=settings, hooks=window, max_turns=10)
        assert len(scripted.calls) == 6
        assert len(window.state()["calibration"]["reports"]) > 0
