"""A proxy process's state half, run as its own process: ``python -m tests.proxy.store_worker``.

Arguments: ``sqlite PATH`` or ``postgres DSN``, the store to open. Commands come one JSON object
a line on standard input; each answer is one JSON line on standard output:

- ``{"op": "lock", "conversation": c}``: take the conversation's lock, answer ``{"held": c}``,
  wait for the next line, release it, answer ``{"released": c}``.
- ``{"op": "step", "history": [...], "hold": false}``: serve one request as the proxy does: find
  the conversation the history continues (or start one), and under its lock load the window's
  state, prepare the request, report the provider's count, save; answer ``{"request": [...],
  "conversation": c}``. With ``"hold": true`` it answers ``{"prepared": c}`` before saving and
  then waits for ever (the test kills it there).

``serve`` is also what the tests run in their own process, so every process does the same.
Also here: ``postgres_database``, the PostgreSQL database a test runs on (or its skip).
"""

from __future__ import annotations

import json
import re
import sys
import threading
from typing import TYPE_CHECKING, Any, Final

import pytest

from cutctx._proxy.conversations import new_conversation_id, prefix_digests
from cutctx._proxy.store import PostgresStore, SqliteStore
from tests.fleet.database import NoDatabase, fresh_database, given_dsn
from tests.fleet.sessions import new_window, restore

if TYPE_CHECKING:
    from collections.abc import Callable

    from cutctx import ContextWindow
    from cutctx._proxy.store import Store

SALT: Final = "/v1/chat/completions model=fake"


def provider_count(request: list[dict[str, Any]]) -> int:
    """What a provider would count for ``request``: its JSON text's characters over four."""
    return len(json.dumps(request, ensure_ascii=False)) // 4


def serve(
    store: Store,
    history: list[dict[str, Any]],
    prepared: Callable[[str], None] | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """Serve one request of ``history`` over ``store``; return its conversation and request.

    ``prepared(conversation)`` is called after the request is made and before it is saved.
    """
    digests = prefix_digests(history, salt=SALT)
    conversation = store.continued(digests) or new_conversation_id()
    with store.lock(conversation):
        saved = store.load(conversation)
        window: ContextWindow = new_window() if saved is None else restore(json.loads(saved))
        request = window.prepare(history)
        window.report_usage(provider_count(request))
        if prepared is not None:
            prepared(conversation)
        store.save(conversation, json.dumps(window.state()), digests[-1])
    return conversation, request


def postgres_database(request: pytest.FixtureRequest) -> str:
    """A fresh database named after the test, on the cluster ``CUTCTX_TEST_POSTGRES_DSN`` names.

    Skips without it (CI always sets it: there a missing DSN fails).
    """
    try:
        dsn = given_dsn()
    except NoDatabase as missing:
        pytest.fail(str(missing), pytrace=False)
    if dsn is None:
        pytest.skip(
            "CUTCTX_TEST_POSTGRES_DSN is not set: start a cluster with "
            "`bash scripts/postgres start DIR` and export the DSN it prints"
        )
    name = "proxy_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    return fresh_database(dsn, name)


def _answer(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def main(kind: str, target: str) -> None:
    store: Store = SqliteStore(target) if kind == "sqlite" else PostgresStore(target)
    for line in sys.stdin:
        command = json.loads(line)
        if command["op"] == "lock":
            conversation = command["conversation"]
            with store.lock(conversation):
                _answer({"held": conversation})
                sys.stdin.readline()
            _answer({"released": conversation})
        else:

            def hold(conversation: str) -> None:
                _answer({"prepared": conversation})
                threading.Event().wait()  # until killed

            conversation, request = serve(
                store, command["history"], hold if command.get("hold") else None
            )
            _answer({"request": request, "conversation": conversation})


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
