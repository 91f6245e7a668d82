"""The PostgreSQL the fleet tests run on: the cluster ``scripts/postgres`` starts, one database
per test.

The cluster's DSN comes from ``CUTCTX_TEST_POSTGRES_DSN`` (``.ci/run`` starts the cluster and sets
it). Without it, a local run starts a cluster of its own through the same script; in CI
(``CI=true``) a missing DSN is a failure, never a skip, so the fleet tests cannot silently stop
running.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Final

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

DSN_VARIABLE: Final = "CUTCTX_TEST_POSTGRES_DSN"
ROOT: Final = Path(__file__).resolve().parents[2]
SCRIPT: Final = ROOT / "scripts" / "postgres"


class NoDatabase(Exception):
    """No cluster to test on: the reason, for the failing test to show."""


def given_dsn() -> str | None:
    """The DSN of the cluster CI (or the developer) started, if any.

    Raises:
        NoDatabase: in CI (``CI=true``) when it is missing.
    """
    dsn = os.environ.get(DSN_VARIABLE)
    if dsn:
        return dsn
    if os.environ.get("CI") == "true":
        message = f"{DSN_VARIABLE} is not set: .ci/run starts PostgreSQL (scripts/postgres)"
        raise NoDatabase(message)
    return None


def start_cluster(directory: Path) -> str:
    """Start a throwaway cluster in ``directory`` with ``scripts/postgres``; return its DSN."""
    done = subprocess.run(  # noqa: S603 - our own script
        ["bash", str(SCRIPT), "start", str(directory)],  # noqa: S607
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        message = f"scripts/postgres could not start a cluster: {done.stderr.strip()}"
        raise NoDatabase(message)
    return done.stdout.strip().splitlines()[-1]


def stop_cluster(directory: Path) -> None:
    subprocess.run(["bash", str(SCRIPT), "stop", str(directory)], check=True)  # noqa: S603,S607


def fresh_database(dsn: str, name: str) -> str:
    """Create the empty database ``name`` (dropping one left over); return its DSN."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return make_conninfo(dsn, dbname=name)
