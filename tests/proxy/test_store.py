"""The proxy's stores: the same contract in memory, in SQLite and in PostgreSQL."""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import sys
import threading
from typing import TYPE_CHECKING

import psycopg
import pytest

from cutctx import ValidationError
from cutctx._proxy.store import (
    MemoryStore,
    PostgresStore,
    SqliteStore,
    StoreUnavailable,
    default_path,
    open_store,
)
from tests.proxy.store_worker import postgres_database

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from cutctx._proxy.store import Store

WAIT = 0.3  # seconds a blocked lock is given to (wrongly) go through


class Clock:
    """A clock the test sets."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path, clock: Clock) -> Iterator[Store]:
    made: Store
    if request.param == "memory":
        made = MemoryStore(clock=clock)
    elif request.param == "sqlite":
        made = SqliteStore(tmp_path / "proxy.sqlite3", clock=clock)
    else:
        made = PostgresStore(postgres_database(request), clock=clock)
    yield made
    made.close()


class TestLoadAndSave:
    def test_a_conversation_never_saved_loads_none(self, store: Store) -> None:
        assert store.load("c-1") is None

    def test_a_saved_state_loads_back_as_written(self, store: Store) -> None:
        state = '{"version": 2, "text": "été 中文 \\u0000"}'
        store.save("c-1", state, "d1")
        assert store.load("c-1") == state

    def test_a_second_save_replaces_the_state_and_the_digest(self, store: Store) -> None:
        store.save("c-1", "{}", "d1")
        store.save("c-1", '{"step": 2}', "d2")
        assert store.load("c-1") == '{"step": 2}'
        assert store.continued(["d1"]) is None
        assert store.continued(["d1", "d2"]) == "c-1"

    def test_conversations_are_kept_apart(self, store: Store) -> None:
        store.save("c-1", "one", "d1")
        store.save("c-2", "two", "d2")
        assert (store.load("c-1"), store.load("c-2")) == ("one", "two")


class TestContinued:
    def test_the_conversation_saved_with_the_longest_prefix_wins(self, store: Store) -> None:
        store.save("short", "{}", "d1")
        store.save("long", "{}", "d3")
        store.save("other", "{}", "x")
        assert store.continued(["d0", "d1", "d2", "d3", "d4"]) == "long"
        assert store.continued(["d0", "d1", "d2"]) == "short"

    def test_a_history_no_conversation_served_continues_none(self, store: Store) -> None:
        store.save("c-1", "{}", "d1")
        assert store.continued(["a", "b"]) is None
        assert store.continued([]) is None

    def test_of_two_conversations_with_one_history_the_one_used_last_wins(
        self, store: Store, clock: Clock
    ) -> None:
        store.save("b", "{}", "d1")
        clock.now += 1
        store.save("a", "{}", "d1")
        assert store.continued(["d1"]) == "a"
        clock.now += 1
        store.save("b", "{}", "d1")
        assert store.continued(["d1"]) == "b"

    def test_a_long_history_is_searched_whole(self, store: Store) -> None:
        """More digests than one SQLite query binds: a match in any part is found."""
        digests = [f"d{i}" for i in range(1_234)]
        store.save("early", "{}", "d7")
        assert store.continued(digests) == "early"
        store.save("late", "{}", "d1000")
        assert store.continued(digests) == "late"


class TestLock:
    def test_a_held_conversation_waits_for_its_holder_in_another_thread(self, store: Store) -> None:
        events: list[str] = []
        holding, release = threading.Event(), threading.Event()

        def first() -> None:
            with store.lock("c-1"):
                events.append("first in")
                holding.set()
                release.wait()
                events.append("first out")

        def second() -> None:
            holding.wait()
            with store.lock("c-1"):
                events.append("second in")

        threads = [threading.Thread(target=first), threading.Thread(target=second)]
        for thread in threads:
            thread.start()
        holding.wait()
        threads[1].join(WAIT)
        assert events == ["first in"]  # the second is still waiting
        release.set()
        for thread in threads:
            thread.join()
        assert events == ["first in", "first out", "second in"]

    def test_another_conversation_is_not_held_up(self, store: Store) -> None:
        done = threading.Event()
        with store.lock("c-1"):

            def other() -> None:
                with store.lock("c-2"):
                    done.set()

            thread = threading.Thread(target=other)
            thread.start()
            thread.join()
        assert done.is_set()

    def test_a_lock_is_released_when_its_block_raises(self, store: Store) -> None:
        with pytest.raises(RuntimeError), store.lock("c-1"):
            raise RuntimeError("the step failed")
        with store.lock("c-1"):  # not left held
            pass


class TestExpire:
    def test_conversations_idle_longer_are_deleted_and_counted(
        self, store: Store, clock: Clock
    ) -> None:
        store.save("old", "{}", "d-old")
        clock.now += 100
        store.save("new", "{}", "d-new")
        clock.now += 50
        assert store.expire(60) == 1
        assert store.load("old") is None
        assert store.continued(["d-old"]) is None
        assert store.load("new") == "{}"
        assert store.expire(60) == 0

    def test_a_save_makes_a_conversation_used_again(self, store: Store, clock: Clock) -> None:
        store.save("c-1", "{}", "d1")
        clock.now += 100
        store.save("c-1", "{}", "d2")
        assert store.expire(60) == 0

    @pytest.mark.parametrize("idle", [-1.0, float("nan")])
    def test_a_negative_idle_time_is_refused(self, store: Store, idle: float) -> None:
        with pytest.raises(ValidationError, match="idle_seconds"):
            store.expire(idle)


class TestClose:
    def test_a_closed_store_is_unavailable_and_closes_twice(self, store: Store) -> None:
        store.close()
        with pytest.raises(StoreUnavailable, match="closed"):
            store.load("c-1")
        with pytest.raises(StoreUnavailable, match="closed"):
            store.lock("c-1").__enter__()
        store.close()


class TestSqliteFiles:
    def test_the_file_is_private_to_its_user(self, tmp_path: Path) -> None:
        path = tmp_path / "new" / "proxy.sqlite3"
        store = SqliteStore(path)
        with store.lock("c-1"):
            store.save("c-1", "{}", "d1")
        store.close()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        locks = path.with_name("proxy.sqlite3.locks")
        assert stat.S_IMODE(locks.stat().st_mode) == 0o700
        files = list(locks.iterdir())
        assert len(files) == 1
        assert "c-1" not in files[0].name  # a digest names it, never the id
        assert stat.S_IMODE(files[0].stat().st_mode) == 0o600
        for extra in tmp_path.glob("new/proxy.sqlite3-*"):  # WAL files, when left
            assert stat.S_IMODE(extra.stat().st_mode) == 0o600

    def test_the_default_file_is_in_the_users_cache_directory(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        store = open_store(None)
        store.close()
        path = tmp_path / "cache" / "cutctx" / "proxy.sqlite3"
        assert isinstance(store, SqliteStore)
        assert store.path == path
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700

    @pytest.mark.parametrize("value", ["", "relative/cache"])
    def test_an_unset_or_relative_cache_home_means_dot_cache(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
    ) -> None:
        monkeypatch.setenv("XDG_CACHE_HOME", value)
        monkeypatch.setenv("HOME", str(tmp_path))
        assert default_path() == tmp_path / ".cache" / "cutctx" / "proxy.sqlite3"

    def test_expire_frees_the_lock_files_no_one_holds(self, tmp_path: Path, clock: Clock) -> None:
        store = SqliteStore(tmp_path / "proxy.sqlite3", clock=clock)
        locks = tmp_path / "proxy.sqlite3.locks"
        with store.lock("old"):
            pass
        held = store.lock("old-and-held")
        held.__enter__()
        clock.now += 100
        with store.lock("busy"):
            assert store.expire(10) == 0
            names = {path.name for path in locks.iterdir()}
            # the held ones stay, however old
            assert names == {store._locks.path(name).name for name in ("busy", "old-and-held")}
        held.__exit__(None, None, None)
        store.close()

    def test_a_lock_the_file_system_refuses_is_unavailable(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        store = SqliteStore(tmp_path / "proxy.sqlite3")

        def refuse(*_: object) -> None:
            raise OSError(37, "No locks available")

        monkeypatch.setattr("cutctx._proxy.store.fcntl.flock", refuse)
        with pytest.raises(StoreUnavailable, match="No locks available"), store.lock("c-1"):
            pass
        store.close()

    def test_a_bug_is_raised_as_itself_not_as_an_outage(self, tmp_path: Path) -> None:
        store = SqliteStore(tmp_path / "proxy.sqlite3")
        with pytest.raises(sqlite3.IntegrityError):
            store.save("c-1", None, "d1")  # type: ignore[arg-type]
        store.close()

    def test_a_waiter_whose_lock_file_was_removed_locks_the_file_now_there(
        self, tmp_path: Path
    ) -> None:
        """``expire`` removes a lock file only while holding it; whoever waited on the removed
        file then locks the path again, so it still excludes a newcomer."""
        store = SqliteStore(tmp_path / "proxy.sqlite3")
        path = store._locks.path("c-1")
        events: list[str] = []
        waiting, second_in, release_second = (threading.Event() for _ in range(3))

        def second() -> None:
            waiting.set()
            with store.lock("c-1"):
                events.append("second in")
                second_in.set()
                release_second.wait()
                events.append("second out")

        def third() -> None:
            with store.lock("c-1"):
                events.append("third in")

        with store.lock("c-1"):
            thread = threading.Thread(target=second)
            thread.start()
            waiting.wait()
            thread.join(WAIT)  # blocked on the file about to be removed
            path.unlink()
        second_in.wait()
        newcomer = threading.Thread(target=third)
        newcomer.start()
        newcomer.join(WAIT)
        assert events == ["second in"]  # the newcomer waits on the new file
        release_second.set()
        thread.join()
        newcomer.join()
        assert events == ["second in", "second out", "third in"]
        store.close()


class TestUnavailable:
    def test_a_sqlite_path_that_cannot_be_made_is_unavailable(self, tmp_path: Path) -> None:
        blocker = tmp_path / "a-file"
        blocker.write_text("not a directory")
        with pytest.raises(StoreUnavailable, match="a-file"):
            SqliteStore(blocker / "proxy.sqlite3")

    def test_a_file_that_is_not_a_database_is_unavailable(self, tmp_path: Path) -> None:
        path = tmp_path / "proxy.sqlite3"
        path.write_bytes(b"this is not SQLite" * 100)
        with pytest.raises(StoreUnavailable, match="not a database"):
            SqliteStore(path)

    def test_a_database_whose_directory_is_gone_is_unavailable(self, tmp_path: Path) -> None:
        store = SqliteStore(tmp_path / "db" / "proxy.sqlite3")
        for path in (tmp_path / "db").glob("proxy.sqlite3.locks/*"):
            path.unlink()
        (tmp_path / "db" / "proxy.sqlite3.locks").rmdir()
        with pytest.raises(StoreUnavailable, match="lock"), store.lock("c-1"):
            pass
        store.close()

    def test_a_postgres_server_that_is_down_is_unavailable(self, tmp_path: Path) -> None:
        with pytest.raises(StoreUnavailable, match="PostgreSQL"):
            PostgresStore(f"host={tmp_path} port=5432 user=postgres dbname=postgres")

    def test_a_postgres_store_continues_after_its_connections_are_cut(
        self, request: pytest.FixtureRequest
    ) -> None:
        """A restarted server drops every connection: the next call opens a new one."""
        dsn = postgres_database(request)
        store = PostgresStore(dsn)
        store.save("c-1", "{}", "d1")
        with store.lock("c-2"):
            pass
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        assert store.load("c-1") == "{}"
        with store.lock("c-2"):
            store.save("c-2", "{}", "d2")
        store.close()

    def test_a_postgres_store_whose_server_goes_down_is_unavailable(
        self, request: pytest.FixtureRequest
    ) -> None:
        """The server drops the store's connections and cannot be reached again."""
        dsn = postgres_database(request)
        store = PostgresStore(dsn)
        with store.lock("c-1"):
            store.save("c-1", "{}", "d1")
        store._dsn = "host=/nonexistent-socket-directory port=5432 user=postgres"  # gone
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        with pytest.raises(StoreUnavailable, match="PostgreSQL"):
            store.load("c-1")
        with pytest.raises(StoreUnavailable, match="PostgreSQL"), store.lock("c-1"):
            pass
        store.close()


class TestPostgresConnections:
    def test_a_lock_whose_connection_broke_is_left_without_an_error(
        self, request: pytest.FixtureRequest
    ) -> None:
        """The server released the lock with the connection: nothing is left to release."""
        dsn = postgres_database(request)
        store = PostgresStore(dsn)
        with store.lock("c-1"), psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        with store.lock("c-1"):
            store.save("c-1", "{}", "d1")
        store.close()

    def test_at_most_a_few_idle_connections_are_kept(self, request: pytest.FixtureRequest) -> None:
        store = PostgresStore(postgres_database(request))
        with contextlib.ExitStack() as held:
            for number in range(12):
                held.enter_context(store.lock(f"c-{number}"))
        assert len(store._idle) == 8
        store.close()
        assert store._idle == []

    def test_a_bug_is_raised_as_itself_not_as_an_outage(
        self, request: pytest.FixtureRequest
    ) -> None:
        dsn = postgres_database(request)
        store = PostgresStore(dsn)
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute("DROP TABLE cutctx_proxy_conversations")
        with pytest.raises(psycopg.errors.UndefinedTable):
            store.load("c-1")
        store.close()


class TestOpenStore:
    def test_memory_is_a_memory_store(self) -> None:
        assert isinstance(open_store("memory:"), MemoryStore)

    def test_a_sqlite_url_names_its_absolute_path(self, tmp_path: Path) -> None:
        store = open_store(f"sqlite://{tmp_path}/x.sqlite3")
        assert isinstance(store, SqliteStore)
        assert store.path == tmp_path / "x.sqlite3"
        store.close()

    @pytest.mark.parametrize("url", ["sqlite://relative.db", "sqlite://"])
    def test_a_relative_sqlite_path_is_refused(self, url: str) -> None:
        with pytest.raises(ValidationError, match="absolute path"):
            open_store(url)

    @pytest.mark.parametrize("url", ["redis://localhost", "relative/x.db", "mysql://u:secret@h/db"])
    def test_another_kind_of_url_is_refused_without_echoing_it(self, url: str) -> None:
        with pytest.raises(ValidationError, match="expected memory:") as raised:
            open_store(url)
        assert "secret" not in str(raised.value)

    def test_a_postgres_url_opens_a_postgres_store(self, request: pytest.FixtureRequest) -> None:
        dsn = postgres_database(request)
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        url = f"postgresql:///{info['dbname']}?host={info['host']}&user={info['user']}"
        store = open_store(url)
        assert isinstance(store, PostgresStore)
        store.save("c-1", "{}", "d1")
        assert store.load("c-1") == "{}"
        store.close()

    def test_postgres_without_psycopg_names_the_extra(
        self, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg fails
        with pytest.raises(ImportError, match=r"cutctx\[postgres\]"):
            open_store("postgresql://localhost/db")

    def test_importing_the_store_imports_no_psycopg(self) -> None:
        code = (
            "import sys, cutctx._proxy.store, cutctx._proxy.conversations; "
            "assert 'psycopg' not in sys.modules"
        )
        assert os.system(f'"{sys.executable}" -c "{code}"') == 0  # noqa: S605
