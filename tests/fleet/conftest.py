"""Test-run settings for the fleet tests: the PostgreSQL cluster, one database per test."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.fleet.database import NoDatabase, fresh_database, given_dsn, start_cluster, stop_cluster

if TYPE_CHECKING:
    from collections.abc import Iterator


@pytest.fixture(scope="session")
def postgres() -> Iterator[str]:
    """The cluster's DSN: CI's, or a local cluster started for this run (and stopped after)."""
    try:
        dsn = given_dsn()
        if dsn is not None:
            yield dsn
            return
        # not under pytest's tmp_path: as root the server runs as `postgres`, which must reach
        # its directory, and pytest's base directory is private to the user
        directory = Path(tempfile.mkdtemp(prefix="cutctx-postgres-"))
        dsn = start_cluster(directory)
    except NoDatabase as missing:
        pytest.fail(str(missing), pytrace=False)
    try:
        yield dsn
    finally:
        stop_cluster(directory)


@pytest.fixture
def database(postgres: str, request: pytest.FixtureRequest) -> str:
    """An empty database of the test's own (named after it); its DSN."""
    name = "fleet_" + re.sub(r"[^a-z0-9]+", "_", request.node.name.lower())[:50]
    return fresh_database(postgres, name)
