"""``aprepare`` runs the step's work off the event loop, as one transaction."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest
from baseaicore import ValidationError

from cutctx import ContextWindow, TextEstimator
from cutctx._loop.offload import off_loop

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

BIG = 200_000
"""Characters of the large tool result."""
TICK = 0.005


def big_json(size: int = BIG) -> str:
    """Return an indented JSON document of about ``size`` characters (many lines)."""
    rows = [
        {"id": n, "name": f"item-{n}", "tags": ["alpha", "beta", f"t{n % 7}"], "score": n * 0.5}
        for n in range(size // 100)
    ]
    return json.dumps(rows, indent=2)


def history(result: str | None = None) -> list[dict[str, Any]]:
    """Return a task, one tool call and its result (``result``, or a short one)."""
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    return [
        {"role": "user", "content": "TASK: find the failing record."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result or "ok"},
    ]


class Recording:
    """``TextEstimator`` that records the thread of every call pricing a long text."""

    name = "recording"

    def __init__(self, *, spin: float = 0.0) -> None:
        self.inner = TextEstimator()
        self.threads: set[int] = set()
        self.spin = spin  # seconds of CPU work added to each long pricing (holds the GIL)

    def estimate_tokens(self, text: str) -> int:
        if len(text) > 10_000:
            self.threads.add(threading.get_ident())
            end = time.perf_counter() + self.spin
            while time.perf_counter() < end:
                pass
        return self.inner.estimate_tokens(text)


class Blocking:
    """``TextEstimator`` that, pricing a long text, says so and waits until it is released."""

    name = "blocking"

    def __init__(self) -> None:
        self.inner = TextEstimator()
        self.entered = threading.Event()
        self.release = threading.Event()
        self.armed = False

    def estimate_tokens(self, text: str) -> int:
        if self.armed and len(text) > 10_000:
            self.entered.set()
            assert self.release.wait(30)
        return self.inner.estimate_tokens(text)


async def ticking[T](work: Awaitable[T]) -> tuple[T, list[float], float, float]:
    """Await ``work`` while another coroutine ticks every ``TICK`` seconds.

    Returns what ``work`` returned, the tick times, and when ``work`` started and ended.
    """
    ticks: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        while not done.is_set():
            ticks.append(time.perf_counter())
            await asyncio.sleep(TICK)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(TICK * 2)
    start = time.perf_counter()
    made = await work
    end = time.perf_counter()
    done.set()
    await task
    return made, ticks, start, end


def longest_gap(ticks: list[float], start: float, end: float) -> float:
    """Return the longest time between two ticks (or a tick and an end) around ``start..end``."""
    points = [start, *(tick for tick in ticks if start < tick < end), end]
    return max(later - earlier for earlier, later in itertools.pairwise(points))


class TestOffLoop:
    def test_returns_what_the_function_returns_and_raises_what_it_raises(self) -> None:
        async def run() -> None:
            assert await off_loop(divmod, 7, 2) == (3, 1)
            with pytest.raises(ZeroDivisionError):
                await off_loop(divmod, 7, 0)

        asyncio.run(run())

    def test_runs_the_function_on_another_thread(self) -> None:
        async def run() -> int:
            return await off_loop(threading.get_ident)

        assert asyncio.run(run()) != threading.get_ident()

    @pytest.mark.parametrize("fails", [False, True], ids=["returns", "raises"])
    def test_a_cancelled_call_waits_for_the_worker_and_drops_its_outcome(self, fails: bool) -> None:
        release = threading.Event()
        finished: list[bool] = []

        def work() -> int:
            assert release.wait(30)
            finished.append(True)
            if fails:
                raise RuntimeError("dropped")
            return 1

        async def run() -> None:
            task = asyncio.create_task(off_loop(work))
            await asyncio.sleep(TICK)
            task.cancel()
            await asyncio.sleep(TICK)
            task.cancel()  # a second cancellation waits too
            await asyncio.sleep(TICK)
            assert not task.done()  # the worker still runs: the task waits for it
            release.set()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert finished == [True]

        asyncio.run(run())


class TestAprepare:
    def test_the_steps_work_runs_off_the_loop_and_other_coroutines_keep_ticking(self) -> None:
        estimator = Recording(spin=0.15)
        window = ContextWindow("openai_chat", max_tokens=32_000, estimator=estimator)
        big = history(big_json())

        async def run() -> tuple[list[Any], list[float], float, float, int]:
            await window.aprepare(big[:1])
            made, ticks, start, end = await ticking(window.aprepare(big))
            return made, ticks, start, end, threading.get_ident()

        request, ticks, start, end, loop_thread = asyncio.run(run())
        assert estimator.threads
        assert loop_thread not in estimator.threads
        during = sum(start < tick < end for tick in ticks)
        gap = longest_gap(ticks, start, end)
        # At least 0.15 s of CPU work held the GIL; a tick every 5 ms would give 30 and more.
        # Three is a bound a loaded machine keeps; run on the loop, the step lets none through.
        assert during >= 3, f"{during} ticks in {end - start:.3f} s, the longest gap {gap:.3f} s"
        assert "[cutctx: " in request[-1]["content"]  # the result was excerpted

    def test_aprepare_sends_the_requests_prepare_sends(self) -> None:
        steps = [history(big_json(size)) for size in (1_000, 50_000, 200_000)]
        settings: dict[str, Any] = {"max_tokens": 8_000, "compact_at": 0.5}
        synchronous = ContextWindow("openai_chat", **settings)
        asynchronous = ContextWindow("openai_chat", **settings)
        grown: list[dict[str, Any]] = []
        histories = []
        for number, step in enumerate(steps):
            call = f"c{number}"
            grown = [
                *(grown or step[:1]),
                {**step[1], "tool_calls": [{**step[1]["tool_calls"][0], "id": call}]},
                {**step[2], "tool_call_id": call},
            ]
            histories.append(grown)

        async def run() -> list[list[dict[str, Any]]]:
            return [await asynchronous.aprepare(made) for made in histories]

        assert asyncio.run(run()) == [synchronous.prepare(made) for made in histories]
        assert asynchronous.state() == synchronous.state()
        assert asynchronous.stats == synchronous.stats

    def test_a_second_call_is_refused_while_the_first_runs_off_the_loop(self) -> None:
        estimator = Blocking()
        window = ContextWindow("openai_chat", max_tokens=32_000, estimator=estimator)
        big = history(big_json())

        async def run() -> None:
            await window.aprepare(big[:1])
            estimator.armed = True
            first = asyncio.create_task(window.aprepare(big))
            await wait_for(estimator.entered.is_set)
            with pytest.raises(ValidationError, match="a step is in flight"):
                await window.aprepare(big[:1])
            with pytest.raises(ValidationError, match="a step is in flight"):
                window.prepare(big[:1])
            estimator.release.set()
            assert (await first)[-1]["content"] != big[-1]["content"]

        asyncio.run(run())

    def test_a_cancelled_step_changes_nothing_and_frees_the_window(self) -> None:
        estimator = Blocking()
        window = ContextWindow("openai_chat", max_tokens=32_000, estimator=estimator)
        twin = ContextWindow("openai_chat", max_tokens=32_000)
        big = history(big_json())

        async def run() -> None:
            assert await window.aprepare(big[:1]) == twin.prepare(big[:1])
            before, stats = window.state(), window.stats
            estimator.armed = True
            task = asyncio.create_task(window.aprepare(big))
            await wait_for(estimator.entered.is_set)
            task.cancel()
            await asyncio.sleep(TICK)
            with pytest.raises(ValidationError, match="a step is in flight"):
                await window.aprepare(big[:1])  # the worker still runs
            estimator.release.set()  # it finishes its step, which is dropped
            with pytest.raises(asyncio.CancelledError):
                await task
            assert window.state() == before
            assert window.stats == stats
            estimator.armed = False
            assert await window.aprepare(big) == twin.prepare(big)
            assert window.state()["stats"] == twin.state()["stats"]

        asyncio.run(run())

    def test_a_failing_step_changes_nothing(self) -> None:
        class Failing:
            name = "failing"

            def __init__(self) -> None:
                self.inner = TextEstimator()
                self.armed = False

            def estimate_tokens(self, text: str) -> int:
                if self.armed and len(text) > 10_000:
                    raise RuntimeError("the estimator failed")
                return self.inner.estimate_tokens(text)

        estimator = Failing()
        window = ContextWindow("openai_chat", max_tokens=32_000, estimator=estimator)
        big = history(big_json())

        async def run() -> None:
            await window.aprepare(big[:1])
            before = window.state()
            estimator.armed = True
            with pytest.raises(RuntimeError, match="the estimator failed"):
                await window.aprepare(big)
            assert window.state() == before
            estimator.armed = False
            await window.aprepare(big)  # the token is back

        asyncio.run(run())


def conversation(sizes: list[int]) -> list[list[dict[str, Any]]]:
    """Return the histories of a conversation whose steps return results of ``sizes`` chars."""
    histories, grown = [], history()[:1]
    for number, size in enumerate(sizes):
        function = {"name": "read", "arguments": "{}"}
        call = {"id": f"c{number}", "type": "function", "function": function}
        grown = [
            *grown,
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": f"c{number}", "content": big_json(size)},
        ]
        histories.append(grown)
    return histories


class TestReadsDuringAStep:
    """A restored window's reads of its old messages wait for no step's worker: refused."""

    def test_last_of_a_restored_window_is_refused_while_a_step_runs_off_the_loop(self) -> None:
        estimator = Blocking()
        steps = conversation([3_000] * 5 + [100, BIG])
        window = ContextWindow("openai_chat", max_tokens=8_000, estimator=estimator)
        for made in steps[:5]:
            window.prepare(made)
        assert window.stats.compactions
        restored = ContextWindow.from_state(window.state(), estimator=estimator)

        async def run() -> None:
            await restored.aprepare(steps[5])  # taken up, no compaction: `last` reads again
            estimator.armed = True
            task = asyncio.create_task(restored.aprepare(steps[6]))
            await wait_for(estimator.entered.is_set)
            with pytest.raises(ValidationError, match="a step is in flight"):
                _ = restored.last
            estimator.release.set()
            await task
            assert restored.last is not None

        asyncio.run(run())

    def test_the_first_recall_of_a_restored_window_is_refused_while_a_step_runs(self) -> None:
        estimator = Blocking()
        steps = conversation([3_000, 3_000, BIG])
        window = ContextWindow("openai_chat", max_tokens=8_000, estimator=estimator, recall=True)
        window.prepare(steps[0])
        restored = ContextWindow.from_state(window.state(), estimator=estimator)
        asking = {"sha256": "0" * 64}

        async def run() -> None:
            await restored.aprepare(steps[1])
            estimator.armed = True
            task = asyncio.create_task(restored.aprepare(steps[2]))
            await wait_for(estimator.entered.is_set)
            with pytest.raises(ValidationError, match="a step is in flight"):
                restored.recall(asking)
            estimator.release.set()
            await task
            assert restored.recall(asking).startswith("[cutctx_recall:")

        asyncio.run(run())


async def wait_for(condition: Callable[[], bool]) -> None:
    """Yield to the loop until ``condition()`` holds (at most 30 s)."""
    deadline = time.perf_counter() + 30
    while not condition():
        assert time.perf_counter() < deadline, "the condition never held"
        await asyncio.sleep(TICK)
