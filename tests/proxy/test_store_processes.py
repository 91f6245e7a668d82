"""The stores across OS processes: locks that exclude and die with their holder, and a
conversation served by several proxy processes sending exactly what one window would."""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from cutctx._proxy.store import SqliteStore
from tests.fleet.sessions import new_window, session
from tests.proxy.store_worker import postgres_database, provider_count, serve

if TYPE_CHECKING:
    from collections.abc import Iterator

ROOT: Final = Path(__file__).resolve().parents[2]
STEPS: Final = 40
WAIT: Final = 0.5  # seconds a blocked process is given to (wrongly) go through
Message = dict[str, Any]


class Worker:
    """A ``tests.proxy.store_worker`` process, driven a line at a time."""

    def __init__(self, kind: str, target: str) -> None:
        self.process = subprocess.Popen(  # noqa: S603 - the test's own interpreter and module
            [sys.executable, "-m", "tests.proxy.store_worker", kind, target],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._answers: list[dict[str, Any]] = []
        self._arrived = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            with self._arrived:
                self._answers.append(json.loads(line))
                self._arrived.notify_all()

    def send(self, command: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()

    def answer(self, timeout: float = 60) -> dict[str, Any] | None:
        """The next answer, or ``None`` when none came within ``timeout`` seconds."""
        with self._arrived:
            if not self._arrived.wait_for(lambda: self._answers, timeout):
                return None
            return self._answers.pop(0)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def stop(self) -> None:
        assert self.process.stdin is not None
        with contextlib.suppress(BrokenPipeError):  # a killed worker's pipe
            self.process.stdin.close()
        self.process.wait(timeout=60)
        self._reader.join()
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, str]:
    """The store every process opens: its kind and its path or DSN."""
    if request.param == "sqlite":
        return "sqlite", str(tmp_path / "proxy.sqlite3")
    return "postgres", postgres_database(request)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """The workers a test starts, stopped after it."""
    made: list[Worker] = []
    yield made
    for worker in made:
        worker.stop()


class TestLockAcrossProcesses:
    def test_a_held_conversation_waits_for_the_holder_in_another_process(
        self, target: tuple[str, str], workers: list[Worker]
    ) -> None:
        first, second = Worker(*target), Worker(*target)
        workers += [first, second]
        first.send({"op": "lock", "conversation": "c-1"})
        assert first.answer() == {"held": "c-1"}
        second.send({"op": "lock", "conversation": "c-1"})
        assert second.answer(WAIT) is None  # waiting for the first
        first.send({})  # release
        assert first.answer() == {"released": "c-1"}
        assert second.answer() == {"held": "c-1"}
        second.send({})
        assert second.answer() == {"released": "c-1"}

    def test_a_lock_held_by_a_killed_process_is_released(
        self, target: tuple[str, str], workers: list[Worker]
    ) -> None:
        first, second = Worker(*target), Worker(*target)
        workers += [first, second]
        first.send({"op": "lock", "conversation": "c-1"})
        assert first.answer() == {"held": "c-1"}
        second.send({"op": "lock", "conversation": "c-1"})
        assert second.answer(WAIT) is None
        first.kill()  # kill -9 while holding the lock
        assert second.answer() == {"held": "c-1"}
        second.send({})
        assert second.answer() == {"released": "c-1"}


def histories(steps: int = STEPS) -> list[list[Message]]:
    """The history each step of the scripted openai_chat session sends (grown at its end)."""
    out: list[list[Message]] = []
    history: list[Message] = []
    for step in session(steps):
        history = [*history, *step]
        out.append(history)
    return out


def in_one_window() -> list[list[Message]]:
    """The requests one in-memory window sends, the provider's counts reported."""
    window = new_window()
    requests = []
    for history in histories():
        request = window.prepare(history)
        window.report_usage(provider_count(request))
        requests.append(request)
    return requests


class TestSameRequestsAcrossProcesses:
    def test_a_window_restored_every_step_from_sqlite_sends_the_same_requests(
        self, tmp_path: Path
    ) -> None:
        """Stateless: every step loads the state, prepares, saves (the proxy's step)."""
        expected = in_one_window()
        store = SqliteStore(tmp_path / "proxy.sqlite3")
        found = [serve(store, history) for history in histories()]
        store.close()
        assert len({conversation for conversation, _ in found}) == 1  # found by its history
        sent = [json.dumps(request) for _, request in found]
        assert sent == [json.dumps(request) for request in expected]  # byte-identical
        assert any("Summary of" in json.dumps(request) for request in expected)  # compacted

    def test_two_processes_taking_turns_and_one_killed_mid_step_send_the_same_requests(
        self, target: tuple[str, str], workers: list[Worker]
    ) -> None:
        """Two proxy processes serve alternate steps over one store; at step 20 one is killed
        with SIGKILL after preparing its request and before saving, the other serves that step
        again, and a restarted process takes its turns: every request is byte-identical to one
        window's (the requests compared as the JSON text each process sent)."""
        expected = in_one_window()
        pair = [Worker(*target), Worker(*target)]
        workers += pair
        conversations = set()
        for step, history in enumerate(histories()):
            worker = pair[step % 2]
            if step == 20:
                worker.send({"op": "step", "history": history, "hold": True})
                held = worker.answer()
                assert held is not None
                assert "prepared" in held
                worker.kill()  # holding the conversation's lock, the state not saved
                pair[0] = Worker(*target)  # restarted, for the next turn
                workers.append(pair[0])
                worker = pair[1]
            worker.send({"op": "step", "history": history})
            answer = worker.answer()
            assert answer is not None, f"step {step}: no answer"
            conversations.add(answer["conversation"])
            assert json.dumps(answer["request"]) == json.dumps(expected[step]), f"step {step}"
        assert len(conversations) == 1
