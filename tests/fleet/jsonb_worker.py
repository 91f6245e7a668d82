"""One step of a stateless worker over ``jsonb`` columns: ``python -m tests.fleet.jsonb_worker``.

Arguments: the database's DSN, the conversation's id, the step; on standard input the messages
the step brings, as JSON (as the agent loop has them: the model's reply and the tools' results,
keys in their original order). In one transaction the worker reads the conversation's history (a
row per message) and its window's state, both ``jsonb`` (which hands objects back with their keys
reordered), appends the new messages, restores the window (or starts one at
step 0), prepares the request, and writes the new messages, the state, the request and the
window's stats. It holds nothing between steps: every step is a new process.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from tests.fleet.sessions import new_window, restore

SCHEMA = """
CREATE TABLE messages (
    conversation text NOT NULL, position integer NOT NULL, body jsonb NOT NULL,
    PRIMARY KEY (conversation, position));
CREATE TABLE windows (conversation text PRIMARY KEY, state jsonb NOT NULL);
CREATE TABLE requests (
    conversation text NOT NULL, step integer NOT NULL, body jsonb NOT NULL, stats jsonb NOT NULL,
    PRIMARY KEY (conversation, step));
"""


def serve(dsn: str, conversation: str, step: int, new: list[dict[str, Any]]) -> None:
    """Serve ``step`` of ``conversation``, which brings ``new`` (see the module docstring)."""
    with psycopg.connect(dsn) as connection, connection.transaction():
        rows = connection.execute(
            "SELECT body FROM messages WHERE conversation = %s ORDER BY position", (conversation,)
        ).fetchall()
        history = [row[0] for row in rows]
        saved = connection.execute(
            "SELECT state FROM windows WHERE conversation = %s FOR UPDATE", (conversation,)
        ).fetchone()
        window = new_window() if saved is None else restore(saved[0])
        request = window.prepare([*history, *new])
        connection.cursor().executemany(
            "INSERT INTO messages VALUES (%s, %s, %s)",
            [(conversation, len(history) + k, Jsonb(m)) for k, m in enumerate(new)],
        )
        connection.execute(
            "INSERT INTO windows VALUES (%s, %s) ON CONFLICT (conversation) DO UPDATE "
            "SET state = excluded.state",
            (conversation, Jsonb(window.state())),
        )
        connection.execute(
            "INSERT INTO requests VALUES (%s, %s, %s, %s)",
            (conversation, step, Jsonb(request), Jsonb(dataclasses.asdict(window.stats))),
        )


if __name__ == "__main__":
    serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), json.load(sys.stdin))
