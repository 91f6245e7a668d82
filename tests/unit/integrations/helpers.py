"""Shared for the integration tests: one scripted agent session and what every request must hold.

Each framework's test drives the same session through the framework's own run loop: the task,
then ``STEPS`` calls of one tool whose outputs vary in size (``output``), then a final answer, in
a window (``MAX_TOKENS``) the session outgrows many times over. ``Audit`` checks what the model
received on every call: valid (the caller's validator), within ``MAX_TOKENS`` by the format's own
count, holding the task, and sharing its leading messages with the call before (prefix-hit).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

STEPS: Final = 130
"""Tool calls in the session: with the final answer, ``STEPS + 1`` model calls."""

MAX_TOKENS: Final = 8_000
SIZES: Final = (200, 3_600, 600, 1_200, 80, 2_400, 400, 5_000, 120, 900)
"""Tool output sizes in characters, in turn (about 300 tokens a step on average)."""

TASK: Final = "Make the build green."
SYSTEM: Final = "You are a coding agent."
ANSWER: Final = "All green."
MIN_COMPACTIONS: Final = 8
MIN_PREFIX_HIT: Final = 0.85


def output(step: int) -> str:
    """The tool's output at ``step``: a few words, repeated to the step's size."""
    size = SIZES[step % len(SIZES)]
    return (f"step {step}: " + "build ok, " * size)[:size]


def call_id(step: int) -> str:
    return f"call_{step}"


def step_of(call: str) -> int:
    """The step a call id names (the scripted models answer the last result's step + 1)."""
    return int(call.removeprefix("call_"))


@dataclass
class Audit[M]:
    """What the model received on each call, checked as the integrations promise.

    ``problems(request)`` lists what a provider would refuse, ``count(request)`` is the format's
    count of a request (system included), ``price(message)`` one message's tokens, and
    ``holds_task(request)`` whether the task is in it.
    """

    problems: Callable[[list[M]], list[str]]
    count: Callable[[list[M]], int]
    price: Callable[[M], int]
    holds_task: Callable[[list[M]], bool]
    requests: list[list[M]] = field(default_factory=list)

    def record(self, request: Sequence[M]) -> None:
        self.requests.append(list(request))

    def check(self) -> None:
        """Assert every request valid, within ``MAX_TOKENS``, holding the task; prefix-hit."""
        assert len(self.requests) >= STEPS + 1
        for number, request in enumerate(self.requests):
            assert self.problems(request) == [], f"request {number}"
            assert self.count(request) <= MAX_TOKENS, f"request {number}"
            assert self.holds_task(request), f"request {number}"
        assert self.prefix_hit() >= MIN_PREFIX_HIT

    def prefix_hit(self) -> float:
        """The tokens of each request's leading messages equal to the previous request's, over
        all request tokens (the share a provider's prompt cache can serve)."""
        shared = total = 0
        previous: list[Any] = []
        for request in self.requests:
            same = True
            for index, message in enumerate(request):
                tokens = self.price(message)
                total += tokens
                same = same and index < len(previous) and message == previous[index]
                shared += tokens if same else 0
            previous = request
        return shared / total if total else 0.0


CHANGING_CALLS: Final = 80
"""Model calls of the changing-prompt sessions (79 tool calls, then the answer)."""
MIN_SAME_AFTER_SYSTEM: Final = 0.9


def same_after_system[M](changing: list[list[M]], fixed: list[list[M]]) -> float:
    """The share of calls whose messages (the system prompt aside) are the fixed run's."""
    assert len(changing) == len(fixed)
    return sum(a == b for a, b in zip(changing, fixed, strict=True)) / len(fixed)


USAGE_CALLS: Final = 80
"""Model calls of the sessions whose model reports a usage the window cannot see."""
LONG_SYSTEM: Final = SYSTEM + "".join(
    f" Rule {n}: run the tests before you answer." for n in range(180)
)
"""A system prompt of about 2 000 tokens: the first request a calibration learns from."""


def hidden_count(counted: int) -> int:
    """What a provider reports for a request the format counts ``counted``: 1.25 times it,
    plus 400 tokens the window never sees (tool definitions, the provider's framing)."""
    return round(1.25 * counted) + 400
