"""``observation=`` on generated ReAct-style histories (the observation in a user message).

What the option promises is restated from ``docs/agent-loop.md``: a marked user message is a
tool result travelling with the assistant message before it; an unmarked one is never touched.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from cutctx import BudgetUnsatisfiable, ContextWindow, TextEstimator, compact_messages
from cutctx.formats import openai_chat

SETTINGS = settings(max_examples=60, deadline=None)


@st.composite
def react(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A question, then thoughts and observations (some user messages are plain questions)."""
    history: list[dict[str, Any]] = [{"role": "user", "content": "Question: what broke?"}]
    for step in range(draw(st.integers(1, 14))):
        history.append({"role": "assistant", "content": f"Thought {step}.\nAction: look[{step}]"})
        if draw(st.integers(0, 5)) == 0:
            history.append({"role": "user", "content": f"Also: check step {step}."})
            history.append({"role": "assistant", "content": f"Noted {step}."})
        size = draw(st.integers(1, 120))
        body = "".join(f"line {k} of step {step}\n" for k in range(size))
        history.append({"role": "user", "content": f"Observation: {body}"})
    return history


def is_observation(message: dict[str, Any]) -> bool:
    return str(message["content"]).startswith("Observation:")


def check(history: list[dict[str, Any]], request: list[dict[str, Any]], budget: int) -> None:
    by_id = {id(message): index for index, message in enumerate(history)}
    kept = set()
    for message in request:
        index = by_id.get(id(message))
        if index is None:  # a copy: only an observation's body may change
            assert message["role"] == "user"
            assert "cutctx" in message["content"]
            continue
        kept.add(index)
    for index in kept:
        if is_observation(history[index]) and history[index - 1]["role"] == "assistant":
            assert index - 1 in kept, "an observation sent without the action it observes"
    # Counted as compact_messages and the window count with nothing configured.
    assert openai_chat.count_tokens(request, estimator=TextEstimator()) <= budget


class TestObservations:
    @SETTINGS
    @given(history=react(), budget=st.integers(200, 6000))
    def test_an_unmarked_message_is_never_changed_and_an_observation_keeps_its_action(
        self, history: list[dict[str, Any]], budget: int
    ) -> None:
        """Catches an unmarked user message masked or excerpted, a marked one separated from the
        assistant message before it, and a request over the budget, in one call."""
        with contextlib.suppress(BudgetUnsatisfiable):
            done = compact_messages(
                history, max_tokens=budget, format="openai_chat", observation=is_observation,
                max_result_tokens=max(2, budget // 4),
            )  # fmt: skip
            check(history, done.messages, budget)

    @SETTINGS
    @given(history=react(), budget=st.integers(300, 6000))
    def test_the_window_keeps_the_same_promises_step_by_step(
        self, history: list[dict[str, Any]], budget: int
    ) -> None:
        """Catches the same faults in the window, where an observation arrives after its action
        was already held and priced."""
        window = ContextWindow("openai_chat", max_tokens=budget, observation=is_observation)
        with contextlib.suppress(BudgetUnsatisfiable):
            for end in range(1, len(history) + 1):
                check(history[:end], window.prepare(history[:end]), budget)


def everything(message: dict[str, Any]) -> bool:
    """Marks every message: the pins must win over it."""
    del message
    return True


@st.composite
def pinned_heads(draw: st.DrawFn) -> tuple[list[dict[str, Any]], int]:
    """A ReAct history behind a system prompt and a long head of user messages, and keep_first.

    The head (a demonstration, the task: long enough to be excerpted or masked) is what
    ``keep_first`` pins.
    """
    keep_first = draw(st.integers(1, 3))
    lines = draw(st.integers(1, 200))
    head = [
        {"role": "user", "content": "".join(f"head {n} line {k}\n" for k in range(lines))}
        for n in range(keep_first)
    ]
    system = {"role": "system", "content": "".join(f"rule {k}\n" for k in range(lines))}
    return [system, *head, *draw(react())], keep_first


class TestPinsWin:
    @SETTINGS
    @given(case=pinned_heads(), budget=st.integers(200, 8000), cap=st.integers(2, 400))
    def test_pinned_and_system_messages_come_back_as_the_callers_objects(
        self, case: tuple[list[dict[str, Any]], int], budget: int, cap: int
    ) -> None:
        """Invariant: with a predicate that marks every message, the system message and the
        ``keep_first`` messages are sent as the caller's own objects (never masked, excerpted
        or dropped), by ``compact_messages`` and by the window at every step. Catches a pinned
        message read as an observation (the predicate winning over the pin)."""
        history, keep_first = case
        pins = 1 + keep_first
        cap = min(cap, budget)
        with contextlib.suppress(BudgetUnsatisfiable):
            done = compact_messages(
                history, max_tokens=budget, format="openai_chat", observation=everything,
                keep_first=keep_first, max_result_tokens=cap,
            )  # fmt: skip
            assert all(done.messages[i] is history[i] for i in range(pins))
        window = ContextWindow(
            "openai_chat", max_tokens=budget, observation=everything, keep_first=keep_first,
            max_result_tokens=cap,
        )  # fmt: skip
        with contextlib.suppress(BudgetUnsatisfiable):
            for end in range(pins, len(history) + 1):
                request = window.prepare(history[:end])
                assert all(request[i] is history[i] for i in range(pins))
