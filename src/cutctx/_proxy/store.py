"""The proxy's state: one window state per conversation, behind one small protocol.

A ``Store`` keeps, for each conversation id, the window's state (JSON text, as
``ContextWindow.state()`` gives it), the digest of the history the conversation's latest request
served, and when it was last used. Nothing else is ever written: no headers, no keys, no request
bodies. Three stores implement it, each synchronous and safe to share between threads:

- ``MemoryStore``: a dict, for tests and ``--store memory:``;
- ``SqliteStore``: one file (WAL), the embedded default; any number of processes open it; a
  conversation's lock is an ``flock`` on a file of its own beside the database;
- ``PostgresStore``: a shared PostgreSQL for a fleet of proxies (psycopg 3, the
  ``cutctx[postgres]`` extra); a conversation's lock is a session advisory lock.

Both cross-process locks are released by the operating system or the server when their holder
dies, so a proxy killed with ``kill -9`` never leaves a conversation locked. ``open_store``
builds one from a ``--store`` URL. A backend that is down raises ``StoreUnavailable`` from any
method; see ``docs/proxy-store.md``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

from cutctx import ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from types import ModuleType

    import psycopg

__all__ = [
    "MemoryStore",
    "PostgresStore",
    "SqliteStore",
    "Store",
    "StoreUnavailable",
    "default_path",
    "open_store",
]

_CHUNK: Final = 500  # digests per SQLite query (SQLite caps the parameters of one statement)
_POOL: Final = 8  # idle PostgreSQL connections kept for reuse
_CONNECT_TIMEOUT: Final = 10  # seconds a PostgreSQL connection may take to open
_SCHEMA_LOCK: Final = 0x6375_7463_7478_0001  # advisory lock key serialising table creation


class StoreUnavailable(Exception):
    """The store's backend is down or unreachable: its file, its directory or its server.

    The message names the store and the cause; the original error is its ``__cause__``.
    """


class Store(Protocol):
    """What the proxy keeps per conversation, and a lock to serve it one request at a time.

    Every method raises ``StoreUnavailable`` when the backend is down or unreachable.
    """

    def load(self, conversation: str) -> str | None:
        """Return the conversation's saved window state (JSON text), or ``None``."""
        ...

    def save(self, conversation: str, state: str, history_digest: str) -> None:
        """Write the state and the digest of the history this step served; mark it used now."""
        ...

    def continued(self, prefix_digests: Sequence[str]) -> str | None:
        """Return the conversation saved with one of ``prefix_digests``, the latest index first.

        Among conversations saved with the same digest, the one used last.
        """
        ...

    def lock(self, conversation: str) -> contextlib.AbstractContextManager[None]:
        """Hold the conversation against every other thread and process (not reentrant)."""
        ...

    def expire(self, idle_seconds: float) -> int:
        """Delete the conversations unused for longer than ``idle_seconds``; return how many."""
        ...

    def close(self) -> None:
        """Release the store's connections and files (idempotent)."""
        ...


def default_path() -> Path:
    """The embedded store's file: ``$XDG_CACHE_HOME/cutctx/proxy.sqlite3``.

    ``~/.cache`` stands for ``$XDG_CACHE_HOME`` when it is unset, empty or relative (the XDG
    rule).
    """
    base = Path(os.environ.get("XDG_CACHE_HOME", ""))
    root = base if base.is_absolute() else Path.home() / ".cache"
    return root / "cutctx" / "proxy.sqlite3"


def open_store(url: str | None) -> Store:
    """Return the store ``url`` names (``--store``).

    ``None``: a SQLite file at ``default_path()``; ``"memory:"``; ``"sqlite:///abs/path"``;
    ``"postgresql://..."`` (or ``postgres://``; a socket directory as ``?host=/dir``). The
    file, its directory and the tables are created when missing.

    Raises:
        ValidationError: for a URL of another kind, or a SQLite path that is not absolute.
        StoreUnavailable: when the file cannot be created or the server cannot be reached.
        ImportError: for PostgreSQL without psycopg, naming the ``cutctx[postgres]`` extra.
    """
    if url is None:
        return SqliteStore(default_path())
    if url == "memory:":
        return MemoryStore()
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        if not path.startswith("/"):
            raise ValidationError(
                f"--store: a SQLite store needs an absolute path, sqlite:///abs/path: {url!r}",
                details={"field": "store"},
            )
        return SqliteStore(path)
    if url.startswith(("postgresql://", "postgres://")):
        return PostgresStore(url)
    raise ValidationError(
        "--store: expected memory:, sqlite:///abs/path or postgresql://..., got "
        f"{url.split(':', 1)[0]!r}",
        details={"field": "store"},
    )


# -- in memory -------------------------------------------------------------------------------


class _ThreadLocks:
    """One ``threading.Lock`` per key, made on first use and let go when no one holds it."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._held: dict[str, tuple[threading.Lock, list[int]]] = {}

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        with self._mutex:
            lock, users = self._held.setdefault(key, (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._mutex:
                users[0] -= 1
                if not users[0]:
                    del self._held[key]


class MemoryStore:
    """A store in this process's memory: for tests, and ``--store memory:`` (lost on exit).

    Args:
        clock: the time source for last-used times (seconds); ``time.time`` by default.
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._mutex = threading.Lock()
        self._rows: dict[str, tuple[str, str, float]] = {}
        self._by_digest: dict[str, set[str]] = {}
        self._locks = _ThreadLocks()
        self._closed = False

    def load(self, conversation: str) -> str | None:
        """Return the conversation's saved state, or ``None``."""
        with self._open():
            row = self._rows.get(conversation)
            return None if row is None else row[0]

    def save(self, conversation: str, state: str, history_digest: str) -> None:
        """Write the state and the history's digest; mark the conversation used now."""
        with self._open():
            self._forget(conversation)
            self._rows[conversation] = (state, history_digest, self._clock())
            self._by_digest.setdefault(history_digest, set()).add(conversation)

    def continued(self, prefix_digests: Sequence[str]) -> str | None:
        """Return the conversation saved with the latest of ``prefix_digests``, if any."""
        with self._open():
            for digest in reversed(prefix_digests):
                found = self._by_digest.get(digest)
                if found:
                    return max(found, key=lambda name: (self._rows[name][2], name))
            return None

    def lock(self, conversation: str) -> contextlib.AbstractContextManager[None]:
        """Hold the conversation against the other threads of this process."""
        with self._open():
            return self._locks.hold(conversation)

    def expire(self, idle_seconds: float) -> int:
        """Delete the conversations unused for longer than ``idle_seconds``."""
        before = _before(self._clock, idle_seconds)
        with self._open():
            gone = [name for name, row in self._rows.items() if row[2] < before]
            for name in gone:
                self._forget(name)
            return len(gone)

    def close(self) -> None:
        """Drop everything held; later calls raise ``StoreUnavailable``."""
        with self._mutex:
            self._closed = True
            self._rows.clear()
            self._by_digest.clear()

    @contextlib.contextmanager
    def _open(self) -> Iterator[None]:
        with self._mutex:
            if self._closed:
                raise StoreUnavailable("the memory store is closed")
            yield

    def _forget(self, conversation: str) -> None:
        row = self._rows.pop(conversation, None)
        if row is not None:
            names = self._by_digest[row[1]]
            names.discard(conversation)
            if not names:
                del self._by_digest[row[1]]


# -- SQLite ----------------------------------------------------------------------------------

_SQLITE_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS conversations (
    id TEXT PRIMARY KEY, state TEXT NOT NULL, history_digest TEXT NOT NULL, used REAL NOT NULL);
CREATE INDEX IF NOT EXISTS conversations_history_digest ON conversations (history_digest);
CREATE INDEX IF NOT EXISTS conversations_used ON conversations (used);
"""
_SQLITE_CONTINUED: Final = (
    "SELECT id, history_digest, used FROM conversations WHERE history_digest IN ({})"
)


class _FileLocks:
    """An exclusive ``flock`` on one file per key, in a directory of the store's own.

    ``flock`` belongs to the open file, so two threads (each opening the file) exclude each
    other as two processes do, and the kernel releases it when its holder dies. A file is
    removed (by ``expire``) only while it is locked; a waiter that then gets the lock of a
    removed file opens the path again, so no two holders ever hold two different files.
    """

    def __init__(self, directory: Path, clock: Callable[[], float]) -> None:
        self.directory, self._clock = directory, clock

    def path(self, key: str) -> Path:
        # a digest, not the id: a client-chosen id never names a path
        return self.directory / (hashlib.sha256(key.encode()).hexdigest() + ".lock")

    @contextlib.contextmanager
    def hold(self, key: str) -> Iterator[None]:
        path = self.path(key)
        with _unavailable("the SQLite store's lock"):
            fd = _locked(path)
        try:
            with _unavailable("the SQLite store's lock"):
                os.utime(fd, (now := self._clock(), now))  # when it was last used, for expire
            yield
        finally:
            os.close(fd)  # releases the lock

    def sweep(self, before: float) -> None:
        """Remove the lock files unused since ``before`` that no one holds."""
        for path in self.directory.glob("*.lock"):
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_mtime >= before:
                    continue
                fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    pass  # held: in use
                else:
                    if _same_file(fd, path):
                        path.unlink()
                finally:
                    os.close(fd)


def _locked(path: Path) -> int:
    """Open ``path`` (made 0600 when missing) and take its ``flock``; return the descriptor."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if _same_file(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # removed while we waited: lock the file now at the path


def _same_file(fd: int, path: Path) -> bool:
    try:
        named = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)


class SqliteStore:
    """A store in one SQLite file, shared by every process that opens it.

    The file (mode 0600) and its directory (0700) are created when missing, the database in WAL
    mode; locks are ``flock`` files in ``<file>.locks/`` (0700) beside it.

    Args:
        path: the database file.
        clock: the time source for last-used times (seconds); ``time.time`` by default.
        timeout: seconds a write waits for another process's write before giving up.

    Raises:
        StoreUnavailable: when the file or its directory cannot be created or opened.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Callable[[], float] = time.time,
        timeout: float = 10.0,
    ) -> None:
        self.path = Path(path)
        self._clock = clock
        self._mutex = threading.Lock()
        self._locks = _FileLocks(self.path.with_name(self.path.name + ".locks"), clock)
        self._connection: sqlite3.Connection | None = None
        with _unavailable(f"the SQLite store {str(self.path)!r}"):
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            os.close(os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
            self._locks.directory.mkdir(mode=0o700, exist_ok=True)
            connection = sqlite3.connect(
                self.path, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            try:
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute("PRAGMA synchronous=NORMAL")  # WAL: durable when killed
                connection.executescript(_SQLITE_SCHEMA)
            except BaseException:
                connection.close()
                raise
            self._connection = connection

    def load(self, conversation: str) -> str | None:
        """Return the conversation's saved state, or ``None``."""
        with self._use() as connection:
            row = connection.execute(
                "SELECT state FROM conversations WHERE id = ?", (conversation,)
            ).fetchone()
        return None if row is None else str(row[0])

    def save(self, conversation: str, state: str, history_digest: str) -> None:
        """Write the state and the history's digest; mark the conversation used now."""
        with self._use() as connection:
            connection.execute(
                "INSERT INTO conversations VALUES (?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "state = excluded.state, history_digest = excluded.history_digest, "
                "used = excluded.used",
                (conversation, state, history_digest, self._clock()),
            )

    def continued(self, prefix_digests: Sequence[str]) -> str | None:
        """Return the conversation saved with the latest of ``prefix_digests``, if any."""
        digests = list(prefix_digests)
        with self._use() as connection:
            # the latest digests first: the first chunk that matches holds the longest prefix
            for end in range(len(digests), 0, -_CHUNK):
                chunk = digests[max(0, end - _CHUNK) : end]
                marks = ", ".join("?" * len(chunk))  # placeholders only: the values are bound
                rows = connection.execute(_SQLITE_CONTINUED.format(marks), chunk).fetchall()
                if rows:
                    return _latest(chunk, rows)
        return None

    def lock(self, conversation: str) -> contextlib.AbstractContextManager[None]:
        """Hold the conversation against every other thread and process on this file."""
        with self._use():
            return self._locks.hold(conversation)

    def expire(self, idle_seconds: float) -> int:
        """Delete the conversations (and free lock files) unused for ``idle_seconds``."""
        before = _before(self._clock, idle_seconds)
        with self._use() as connection:
            gone = connection.execute("DELETE FROM conversations WHERE used < ?", (before,))
            self._locks.sweep(before)
            return gone.rowcount

    def close(self) -> None:
        """Close the database; later calls raise ``StoreUnavailable``."""
        with self._mutex:
            if self._connection is not None:
                self._connection.close()
                self._connection = None

    @contextlib.contextmanager
    def _use(self) -> Iterator[sqlite3.Connection]:
        with self._mutex:
            if self._connection is None:
                raise StoreUnavailable(f"the SQLite store {str(self.path)!r} is closed")
            with _unavailable(f"the SQLite store {str(self.path)!r}"):
                yield self._connection


@contextlib.contextmanager
def _unavailable(what: str) -> Iterator[None]:
    """Raise ``StoreUnavailable`` for the file system's and SQLite's operational errors."""
    try:
        yield
    except (OSError, sqlite3.OperationalError) as error:
        raise StoreUnavailable(f"{what} is unavailable: {error}") from error
    except sqlite3.DatabaseError as error:
        if type(error) is not sqlite3.DatabaseError:
            raise  # an integrity or programming error is a bug, not an outage
        raise StoreUnavailable(f"{what} is unavailable: {error}") from error  # not a database


# -- PostgreSQL ------------------------------------------------------------------------------


def _psycopg() -> ModuleType:
    # imported here, not at the top: psycopg is an optional extra, and only this store needs it
    try:
        import psycopg  # noqa: PLC0415
    except ImportError as missing:
        raise ImportError(
            "a PostgreSQL store needs psycopg 3: the cutctx[postgres] extra "
            '(in a cutctx checkout, pip install ".[postgres]")'
        ) from missing
    return psycopg


class PostgresStore:
    """A store in a PostgreSQL database, shared by a fleet of proxies (psycopg 3).

    The table ``cutctx_proxy_conversations`` is created when missing. A conversation's lock is
    ``pg_advisory_lock`` on a connection of its own, held for the lock's duration (the server
    releases it when the holder's connection ends). Connections are reused; one that broke (a
    restarted server) is replaced once before ``StoreUnavailable`` is raised.

    Args:
        dsn: a libpq connection string or URL.
        clock: the time source for last-used times (seconds); ``time.time`` by default.

    Raises:
        StoreUnavailable: when the server cannot be reached.
        ImportError: without psycopg (the ``cutctx[postgres]`` extra).
    """

    def __init__(self, dsn: str, *, clock: Callable[[], float] = time.time) -> None:
        self._pg = _psycopg()
        self._dsn, self._clock = dsn, clock
        self._mutex = threading.Lock()
        self._idle: list[psycopg.Connection[Any]] = []
        self._closed = False
        self._run(_create_tables)

    def load(self, conversation: str) -> str | None:
        """Return the conversation's saved state, or ``None``."""

        def work(connection: psycopg.Connection[Any]) -> str | None:
            row = connection.execute(
                "SELECT state FROM cutctx_proxy_conversations WHERE id = %s", (conversation,)
            ).fetchone()
            return None if row is None else str(row[0])

        return self._run(work)

    def save(self, conversation: str, state: str, history_digest: str) -> None:
        """Write the state and the history's digest; mark the conversation used now."""
        used = self._clock()

        def work(connection: psycopg.Connection[Any]) -> None:
            connection.execute(
                "INSERT INTO cutctx_proxy_conversations VALUES (%s, %s, %s, %s) "
                "ON CONFLICT (id) DO UPDATE SET "
                "state = excluded.state, history_digest = excluded.history_digest, "
                "used = excluded.used",
                (conversation, state, history_digest, used),
            )

        self._run(work)

    def continued(self, prefix_digests: Sequence[str]) -> str | None:
        """Return the conversation saved with the latest of ``prefix_digests``, if any."""
        digests = list(prefix_digests)

        def work(connection: psycopg.Connection[Any]) -> str | None:
            rows = connection.execute(
                "SELECT id, history_digest, used FROM cutctx_proxy_conversations "
                "WHERE history_digest = ANY(%s)",
                (digests,),
            ).fetchall()
            return _latest(digests, rows) if rows else None

        return self._run(work) if digests else None

    @contextlib.contextmanager
    def lock(self, conversation: str) -> Iterator[None]:
        """Hold the conversation against every thread and process on this database."""
        key = _advisory_key(conversation)

        def work(connection: psycopg.Connection[Any]) -> psycopg.Connection[Any]:
            connection.execute("SELECT pg_advisory_lock(%s)", (key,))  # waits for the holder
            return connection

        connection = self._run(work, keep=False)
        try:
            yield
        finally:
            try:
                connection.execute("SELECT pg_advisory_unlock(%s)", (key,))
            except self._pg.Error:
                connection.close()  # the connection broke: the server released the lock with it
            else:
                self._give(connection)

    def expire(self, idle_seconds: float) -> int:
        """Delete the conversations unused for longer than ``idle_seconds``."""
        before = _before(self._clock, idle_seconds)

        def work(connection: psycopg.Connection[Any]) -> int:
            done = connection.execute(
                "DELETE FROM cutctx_proxy_conversations WHERE used < %s", (before,)
            )
            return int(done.rowcount)

        return self._run(work)

    def close(self) -> None:
        """Close the idle connections; later calls raise ``StoreUnavailable``."""
        with self._mutex:
            self._closed = True
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    def _run[T](self, work: Callable[[psycopg.Connection[Any]], T], *, keep: bool = True) -> T:
        """Run ``work`` on a pooled connection (a broken one is replaced once) and return it.

        ``keep=False``: the connection is not given back (the caller holds it, for a lock).
        """
        while True:
            connection, fresh = self._take()
            try:
                result = work(connection)
            except (self._pg.OperationalError, self._pg.InterfaceError) as error:
                connection.close()
                if fresh:
                    message = f"the PostgreSQL store is unavailable: {error}"
                    raise StoreUnavailable(message) from error
                continue  # a pooled connection the server dropped: try a new one
            except BaseException:
                connection.close()
                raise
            if keep:
                self._give(connection)
            return result

    def _take(self) -> tuple[psycopg.Connection[Any], bool]:
        """An idle connection, or a new one (``True``: it is new)."""
        with self._mutex:
            if self._closed:
                raise StoreUnavailable("the PostgreSQL store is closed")
            if self._idle:
                return self._idle.pop(), False
        try:
            options = self._pg.conninfo.conninfo_to_dict(self._dsn)
            options.setdefault("connect_timeout", _CONNECT_TIMEOUT)
            connected: psycopg.Connection[Any] = self._pg.connect(**options, autocommit=True)
        except (self._pg.OperationalError, self._pg.InterfaceError) as error:
            raise StoreUnavailable(f"the PostgreSQL store is unavailable: {error}") from error
        return connected, True

    def _give(self, connection: psycopg.Connection[Any]) -> None:
        with self._mutex:
            if not self._closed and len(self._idle) < _POOL and not connection.closed:
                self._idle.append(connection)
                return
        connection.close()


def _create_tables(connection: psycopg.Connection[Any]) -> None:
    with connection.transaction():
        # two proxies starting at once would race CREATE ... IF NOT EXISTS: one at a time
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
        connection.execute(
            "CREATE TABLE IF NOT EXISTS cutctx_proxy_conversations (id text PRIMARY KEY, "
            "state text NOT NULL, history_digest text NOT NULL, used double precision NOT NULL)"
        )
        connection.execute(
            "CREATE INDEX IF NOT EXISTS cutctx_proxy_conversations_history_digest "
            "ON cutctx_proxy_conversations (history_digest)"
        )
        connection.execute(
            "CREATE INDEX IF NOT EXISTS cutctx_proxy_conversations_used "
            "ON cutctx_proxy_conversations (used)"
        )


def _advisory_key(conversation: str) -> int:
    """A signed 64-bit advisory lock key for ``conversation`` (the same in every process)."""
    digest = hashlib.sha256(b"cutctx-proxy-lock\0" + conversation.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


# -- shared ----------------------------------------------------------------------------------


def _latest(digests: Sequence[str], rows: Sequence[tuple[Any, ...]]) -> str:
    """The id among ``rows`` saved with the latest of ``digests``; the one used last on a tie."""
    index = {digest: position for position, digest in enumerate(digests)}
    best = max(rows, key=lambda row: (index[row[1]], row[2], row[0]))
    return str(best[0])


def _before(clock: Callable[[], float], idle_seconds: float) -> float:
    if not idle_seconds >= 0:  # also refuses NaN
        raise ValidationError(
            f"expire: idle_seconds must be a number >= 0, got {idle_seconds!r}",
            details={"field": "idle_seconds"},
        )
    return clock() - idle_seconds
