"""Real trajectories replayed through the window: every request valid, within budget, with its
task, and the caller's history unchanged.

The trajectories are public data kept beside the checkout (``shared/data/traces/``, described
by its README); without them these tests skip. ``benchmarks/traces.py`` replays all of them and
measures what these tests only check.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import pytest
from benchmarks import traces

from cutctx import ContextWindow
from cutctx.formats import openai_chat
from tests.format_validators import CHAT_REPLY_PRIMING, chat_problems, chat_tokens

if TYPE_CHECKING:
    from benchmarks.traces import Trajectory

pytestmark = pytest.mark.skipif(
    not traces.DATA.is_dir(),
    reason=f"the public trajectories are not beside the checkout ({traces.DATA})",
)


def sample() -> list[Trajectory]:
    """Three SWE-agent trajectories (one with a demonstration, one with tool calls, one with
    its observations in user messages) and four of tau-bench's."""
    swe = traces.load(traces.DATA, "swe", None)
    demo = next(t for t in swe if t.keep_first == 2)
    calls = next(t for t in swe if any(m["role"] == "tool" for m in t.messages))
    users = next(t for t in swe if t.observations and t.keep_first == 1)
    return [demo, calls, users, *traces.load(traces.DATA, "tau", 4)]


@pytest.mark.parametrize("share", [0.25, 0.5])
def test_a_replayed_trajectory_gets_valid_requests_within_budget_with_its_task(
    share: float,
) -> None:
    price = traces.Pricer()
    for trajectory in sample():
        limit = traces.sizes(trajectory, share, price)
        messages = trajectory.messages
        before = json.dumps(messages)
        head = traces.head_of(trajectory)
        window = ContextWindow(
            "openai_chat",
            max_tokens=limit,
            keep_first=trajectory.keep_first,
            estimator=traces.ESTIMATOR,
            recall=True,
            observation=trajectory.observation if trajectory.observations else None,
        )
        for end in traces.steps_of(trajectory):
            request = window.prepare(messages[:end])
            where = f"{trajectory.name} at {end}"
            assert not chat_problems(request), where
            assert openai_chat.count_tokens(request, estimator=traces.ESTIMATOR) <= limit, where
            oracle = chat_tokens(request, traces.ENCODING.encode_ordinary, traces.FRAMING)
            assert oracle + CHAT_REPLY_PRIMING <= limit, where
            assert request[:head] == messages[:head], where
        assert json.dumps(messages) == before


def test_the_replay_measures_both_loops_without_a_fault() -> None:
    """The benchmark's own replay of the sample: no invalid or oversize request, no error."""
    rows = {key: tally.row() for key, tally in traces.run_set(sample()[:3], (0.25,)).items()}
    assert set(rows) == {"25% window", "25% trim"}
    assert not traces.faults({"sample": rows})
    assert rows["25% window"]["requests"] == rows["25% trim"]["requests"] > 0


def test_the_replay_measures_an_earlier_default_by_its_version() -> None:
    """``--messages-version 3`` replays the window's previous default: the smoke passes."""
    assert traces.main(["--smoke", "--sets", "swe", "--messages-version", "3"]) == 0
