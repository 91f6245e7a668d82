"""LangGraph agents with ``ContextWindowMiddleware`` served by several worker processes from one
checkpointer (``PostgresSaver``, and ``SqliteSaver``, the embedded default): the model receives
what one process's agent would give it, and no thread's messages reach another's."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Self

import pytest
from langchain_core.messages import AIMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.checkpoint.sqlite import SqliteSaver

from cutctx import ContextWindow
from cutctx.formats.langchain import LANGCHAIN
from tests.fleet.agents import (
    MAX_TOKENS,
    SYSTEM,
    TURNS,
    Input,
    ScriptedChatModel,
    agent,
    bare,
    config,
    run_turn,
    stats,
)
from tests.fleet.database import ROOT

if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType

    from langgraph.graph.state import CompiledStateGraph

THREADS = ("alpha", "bravo", "charlie", "delta")


def one_process(thread: str) -> tuple[list[list[Input]], dict[str, int]]:
    """Each turn's model inputs, and the window's final stats, of ``thread`` served by one
    agent in this process (in memory); checked against one uninterrupted window first."""
    model = ScriptedChatModel()
    graph = agent(model, InMemorySaver())
    inputs = [run_turn(graph, model, thread, turn) for turn in range(TURNS)]
    assert [one for turn in inputs for one in turn] == uninterrupted(graph, thread)
    return inputs, dataclasses.asdict(stats(graph, thread))


def uninterrupted(graph: CompiledStateGraph[Any, Any, Any, Any], thread: str) -> list[Input]:
    """The model inputs one window that is never stored gives ``thread``: the history before
    each of the model's replies, prepared in turn, after the system prompt."""
    window = ContextWindow(LANGCHAIN, max_tokens=MAX_TOKENS, keep_first=1, system=SYSTEM)
    messages = graph.get_state(config(thread)).values["messages"]
    return [
        bare([SystemMessage(SYSTEM), *window.prepare(messages[:index])])
        for index, message in enumerate(messages)
        if isinstance(message, AIMessage)
    ]


class Workers:
    """Worker processes (``tests.fleet.graph_worker``) on one checkpointer, driven turn by turn."""

    def __init__(self, count: int, backend: str, target: str) -> None:
        self.processes = [
            subprocess.Popen(  # noqa: S603 - the test's own interpreter and module
                [sys.executable, "-m", "tests.fleet.graph_worker", backend, target],
                cwd=ROOT,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for _ in range(count)
        ]

    def send(self, worker: int, thread: str, turn: int) -> None:
        """Have ``worker`` start ``turn`` of ``thread`` (it runs while others do)."""
        stdin = self.processes[worker].stdin
        assert stdin is not None
        stdin.write(json.dumps({"thread": thread, "turn": turn}) + "\n")
        stdin.flush()

    def receive(self, worker: int) -> tuple[list[Input], dict[str, int]]:
        """The model's inputs in the turn ``worker`` was given, and the thread's window stats."""
        stdout = self.processes[worker].stdout
        assert stdout is not None
        line = stdout.readline()
        assert line, f"worker {worker} stopped (exit {self.processes[worker].wait()})"
        answer = json.loads(line)
        return answer["inputs"], answer["stats"]

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.close()  # a worker stops at the end of its input
            if kind is not None:
                process.kill()  # a failed test leaves no worker behind
        for process in self.processes:
            status = process.wait(timeout=60)
            assert process.stdout is not None
            process.stdout.close()
            if status != 0 and kind is None:
                pytest.fail(f"a worker exited with {status}")


def alternate(backend: str, target: str) -> None:
    """Two workers take the turns of one thread in turn: the model inputs, turn by turn, and
    the window's stats are one process's."""
    expected, expected_stats = one_process("alpha")
    assert expected_stats["compactions"] >= 8  # the thread outgrows the window many times
    with Workers(2, backend, target) as workers:
        for turn in range(TURNS):
            workers.send(turn % 2, "alpha", turn)
            inputs, held = workers.receive(turn % 2)
            assert held["resets"] == 0, f"turn {turn}: the window started over"
            assert inputs == expected[turn], f"turn {turn}: other model inputs"
    assert held == expected_stats


def own_thread_only(thread: str, inputs: Input) -> list[str]:
    """What in one model input does not belong to ``thread``."""
    wrong = []
    others = [other for other in THREADS if other != thread]
    for message in inputs:
        kind, data = message["type"], message["data"]
        text = json.dumps(data, ensure_ascii=False)
        if any(f"[{other}]" in text or f'"{other}-' in text for other in others):
            wrong.append(f"{kind} message of another thread: {text[:80]}")
        elif kind == "system":
            if data["content"] != SYSTEM:
                wrong.append(f"another system prompt: {text[:80]}")
        elif kind == "tool":
            if not data["tool_call_id"].startswith(f"{thread}-"):
                wrong.append(f"a result of another thread's call: {text[:80]}")
        elif f"[{thread}]" not in str(data["content"]):
            wrong.append(f"{kind} message without the thread's tag: {text[:80]}")
    return wrong


@pytest.fixture
def postgres_saver(database: str) -> str:
    """A database with LangGraph's checkpoint tables (made once, before any worker starts)."""
    with PostgresSaver.from_conn_string(database) as saver:
        saver.setup()
    return database


@pytest.fixture
def sqlite_saver(tmp_path: Path) -> str:
    """A SQLite file with LangGraph's checkpoint tables."""
    path = str(tmp_path / "checkpoints.sqlite")
    with SqliteSaver.from_conn_string(path) as saver:
        saver.setup()
    return path


class TestPostgresSaverAcrossProcesses:
    def test_two_workers_alternating_on_one_thread_give_one_processs_model_inputs(
        self, postgres_saver: str
    ) -> None:
        alternate("postgres", postgres_saver)

    def test_concurrent_conversations_on_several_workers_never_cross(
        self, postgres_saver: str
    ) -> None:
        """Four threads, three workers, each worker serving a different thread at once and a
        thread moving between workers: every model input holds its own thread's messages only,
        and is the one a single process gives that thread."""
        expected = {thread: one_process(thread) for thread in THREADS}
        done = dict.fromkeys(THREADS, 0)
        served: dict[str, set[int]] = {thread: set() for thread in THREADS}
        with Workers(3, "postgres", postgres_saver) as workers:
            round_ = 0
            while min(done.values()) < TURNS:
                given = []
                for worker in range(3):
                    thread = THREADS[(3 * round_ + worker) % len(THREADS)]
                    if done[thread] < TURNS:
                        workers.send(worker, thread, done[thread])
                        given.append((worker, thread))
                for worker, thread in given:
                    inputs, held = workers.receive(worker)
                    turn = done[thread]
                    for number, one in enumerate(inputs):
                        assert own_thread_only(thread, one) == [], f"{thread} {turn}.{number}"
                    assert inputs == expected[thread][0][turn], f"{thread} turn {turn}"
                    assert held["resets"] == 0, f"{thread} turn {turn}"
                    done[thread] += 1
                    served[thread].add(worker)
                    if done[thread] == TURNS:
                        assert held == expected[thread][1], thread
                round_ += 1
        assert all(len(workers_) == 3 for workers_ in served.values())  # each moved around


class TestSqliteSaverAcrossProcesses:
    def test_two_workers_alternating_on_one_thread_give_one_processs_model_inputs(
        self, sqlite_saver: str
    ) -> None:
        alternate("sqlite", sqlite_saver)


class TestOwnThreadOnly:
    def test_it_names_another_threads_messages_in_an_input(self) -> None:
        """The check the concurrent test relies on sees a crossed input."""
        inputs, _ = one_process("bravo")
        crossed = inputs[1][-1]
        assert own_thread_only("bravo", crossed) == []
        assert own_thread_only("alpha", crossed) != []
        mixed = [*one_process("alpha")[0][1][-1], crossed[-1]]
        assert len(own_thread_only("alpha", mixed)) == 1
