"""A worker process serving LangGraph threads from a shared checkpointer.

``python -m tests.fleet.graph_worker postgres DSN`` (``PostgresSaver``) or ``... sqlite PATH``
(``SqliteSaver``). Each line on standard input, ``{"thread": ..., "turn": ...}``, runs that turn of
that thread; the worker answers with one line, ``{"inputs": [...], "stats": {...}}``: the model's
inputs in the turn and the stats of the window the thread's checkpoint holds after it. One
middleware serves every thread the worker is given, as in a real worker.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tests.fleet.agents import ScriptedChatModel, agent, run_turn, stats

if TYPE_CHECKING:
    from collections.abc import Iterator

    from langgraph.checkpoint.base import BaseCheckpointSaver


@contextmanager
def checkpointer(backend: str, target: str) -> Iterator[BaseCheckpointSaver[Any]]:
    """The shared checkpointer: PostgreSQL at the DSN ``target`` or SQLite in the file."""
    if backend == "postgres":
        from langgraph.checkpoint.postgres import PostgresSaver  # noqa: PLC0415 - one backend

        with PostgresSaver.from_conn_string(target) as postgres:
            yield postgres
    else:
        from langgraph.checkpoint.sqlite import SqliteSaver  # noqa: PLC0415 - one backend

        with SqliteSaver.from_conn_string(target) as sqlite:
            yield sqlite


def main(backend: str, target: str) -> None:
    model = ScriptedChatModel()
    with checkpointer(backend, target) as saver:
        graph = agent(model, saver)
        for line in sys.stdin:
            order = json.loads(line)
            inputs = run_turn(graph, model, order["thread"], order["turn"])
            held = dataclasses.asdict(stats(graph, order["thread"]))
            sys.stdout.write(json.dumps({"inputs": inputs, "stats": held}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
