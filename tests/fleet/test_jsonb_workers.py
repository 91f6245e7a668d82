"""A conversation served by stateless workers that keep the history and the window's state in
PostgreSQL ``jsonb`` columns: every step a new process, every request the in-process window's."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from typing import Any

import psycopg

from tests.fleet.database import ROOT
from tests.fleet.jsonb_worker import SCHEMA
from tests.fleet.sessions import new_window, session

CONVERSATION = "c-1"


def in_process() -> tuple[list[list[Any]], list[dict[str, int]]]:
    """The requests and stats of one window that serves the whole session in this process."""
    window = new_window()
    history: list[dict[str, Any]] = []
    requests, stats = [], []
    for step in session():
        history = [*history, *step]
        requests.append(window.prepare(history))
        stats.append(dataclasses.asdict(window.stats))
    return requests, stats


def run_worker(dsn: str, step: int, new: list[dict[str, Any]]) -> None:
    done = subprocess.run(  # noqa: S603 - the test's own interpreter and module
        [sys.executable, "-m", "tests.fleet.jsonb_worker", dsn, CONVERSATION, str(step)],
        input=json.dumps(new),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, f"step {step}: {done.stderr}"


class TestStatelessWorkersOnJsonb:
    def test_each_step_in_a_new_process_sends_the_in_process_windows_request(
        self, database: str
    ) -> None:
        """Every step of a 200-step session runs in a fresh process that restores the window
        from ``jsonb`` (keys reordered): the requests and stats are the in-process window's,
        with no reset."""
        expected, expected_stats = in_process()
        assert expected_stats[-1]["compactions"] >= 20  # the session outgrows the window often
        assert expected_stats[-1]["resets"] == 0
        assert any("Summary of" in json.dumps(request) for request in expected)  # summaries too
        with psycopg.connect(database, autocommit=True) as connection:
            connection.execute(SCHEMA)
        for step, new in enumerate(session()):
            run_worker(database, step, new)
        with psycopg.connect(database) as connection:
            rows = connection.execute(
                "SELECT step, body, stats FROM requests WHERE conversation = %s ORDER BY step",
                (CONVERSATION,),
            ).fetchall()
            stored = connection.execute(
                "SELECT body FROM messages WHERE conversation = %s ORDER BY position",
                (CONVERSATION,),
            ).fetchall()
        history = [message for step in session() for message in step]
        assert [row[0] for row in stored] == history
        # the premise: jsonb handed the messages back with their keys in another order
        assert any(
            list(row[0]) != list(message) for row, message in zip(stored, history, strict=True)
        )
        assert [row[0] for row in rows] == list(range(len(expected)))
        for step, request, stats in rows:
            assert stats["resets"] == 0, f"step {step}: the restored window started over"
            assert request == expected[step], f"step {step}: another request"
            assert stats == expected_stats[step], f"step {step}"
