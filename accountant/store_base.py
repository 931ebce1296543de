"""What every state store is: opened at a location, one database, one lock, one clock, and
the transaction each of its operations runs in (:class:`StoreBase`).

Apart from ``accountant.store`` (the charges, refusals and admin changes callers make)
because opening is a concern of its own: which database a location is (a SQLite file or a
PostgreSQL schema), a writer or a read-only reader, and whether its schema can be read as
it is. :meth:`StoreBase._run` is the one way in: the store's lock, the refusal of writes
to a read-only store, and stored values dpproxy cannot read reported as StateStoreError.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from accountant.connection import Connection, Database
from accountant.errors import AccountantError, StateStoreError
from accountant.postgres_state import PostgresState
from accountant.records import require_utc, utc_now
from accountant.sqlite import APPLICATION_ID, SCHEMA_VERSION
from accountant.sqlite_state import SqliteDatabase

T = TypeVar("T")
#: Where a state store lives: a SQLite file, or a schema in PostgreSQL.
StateLocation = Path | PostgresState


class StoreBase:
    """A state store opened at :attr:`location`, without its operations (``StateStore``).
    Create with :meth:`open` or :meth:`open_reader`."""

    def __init__(
        self,
        location: StateLocation,
        db: Database,
        clock: Callable[[], datetime],
        *,
        read_only: bool = False,
    ) -> None:
        self._location = location
        self._db = db
        self._clock = clock
        self._lock = threading.Lock()
        self._read_only = read_only

    @classmethod
    def open(
        cls,
        location: StateLocation,
        *,
        timeout: float = 30.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> Self:
        """Open the state store at ``location``, creating it (and its schema) if absent:
        a SQLite file (a path), or a schema in PostgreSQL (:class:`PostgresState`).

        ``timeout``: seconds a writer waits for other writers before giving up with
        StateStoreError. ``clock``: the source of record times (tests inject one).
        """
        require_utc(clock(), "the store's clock")
        if isinstance(location, PostgresState):
            # Imported here: accountant.postgres imports psycopg, a tenth of a second that a
            # SQLite store (and so most admin commands) need not pay.
            from accountant.postgres import PostgresDatabase  # noqa: PLC0415

            return cls(location, PostgresDatabase.open(location, timeout), clock)
        path = Path(location)
        return cls(path, SqliteDatabase.open(path, timeout), clock)

    @classmethod
    def open_reader(
        cls,
        location: StateLocation,
        *,
        timeout: float = 30.0,
        clock: Callable[[], datetime] = utc_now,
        bounded: bool = True,
    ) -> Self:
        """Open the state store at ``location`` to read only, on a read-only connection of
        its own: another process holding the write lock (a long write transaction) does
        not hold it up (SQLite's WAL readers never wait for writers; PostgreSQL readers
        take no lock). Its writes raise StateStoreError. ``bounded=False``: reads from
        PostgreSQL take as long as they need (for admin commands reading the whole audit
        log; see ``PostgresDatabase.open_reader``).

        A store that does not exist yet, or whose schema is not this dpproxy's version,
        cannot be read as it is: it is opened as :meth:`open` does instead (created,
        upgraded, or refused with a message saying why)."""
        require_utc(clock(), "the store's clock")
        db: Database
        if isinstance(location, PostgresState):
            from accountant.postgres import PostgresDatabase  # noqa: PLC0415 - psycopg: see open

            db = PostgresDatabase.open_reader(location, timeout, bounded=bounded)
        else:
            path = Path(location)
            if not path.exists():
                return cls.open(path, timeout=timeout, clock=clock)
            location = path
            db = SqliteDatabase.open_reader(path, timeout)
        store = cls(location, db, clock, read_only=True)
        try:
            current = store._run(lambda conn: _schema_is_current(conn, location), write=False)
        except BaseException:
            store.close()
            raise
        if current:
            return store
        store.close()
        return cls.open(location, timeout=timeout, clock=clock)

    @property
    def location(self) -> StateLocation:
        """The SQLite file or the PostgreSQL schema this store was opened at."""
        return self._location

    @property
    def path(self) -> Path:
        """The SQLite file (StateStoreError for a store in PostgreSQL)."""
        if not isinstance(self._location, Path):
            raise StateStoreError(
                self._db.name, "it is in PostgreSQL, not in a file", "use .location instead"
            )
        return self._location

    def close(self) -> None:
        """Close the store. Reservations still open are finished by a later recovery."""
        with self._lock:
            self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _now(self) -> datetime:
        return require_utc(self._clock(), "the store's clock")

    def _run(
        self, work: Callable[[Connection], T], *, write: bool = True, durable: bool = True
    ) -> T:
        if write and self._read_only:
            raise StateStoreError(
                self._db.name,
                "it was opened read-only",
                "open it with StateStore.open to change it",
            )
        with self._lock, self._db.transaction(write=write, durable=durable) as conn:
            try:
                return work(conn)
            except (ValueError, TypeError, KeyError) as exc:
                if isinstance(exc, AccountantError):
                    raise
                raise StateStoreError(
                    self._db.name,
                    f"it holds a value dpproxy cannot read ({exc})",
                    "run `dpproxy audit verify`; restore the file from a backup if damaged",
                ) from exc


def _schema_is_current(conn: Connection, location: StateLocation) -> bool:
    """True if the store at ``location`` exists and its schema is this dpproxy's version."""
    if isinstance(location, PostgresState):
        from accountant.postgres_schema import APPLICATION  # noqa: PLC0415 - psycopg: see open

        table = f'"{location.schema}".schema_version'
        (present,) = conn.execute("SELECT to_regclass(?) IS NOT NULL", (table,)).fetchone()
        version_sql = "SELECT max(version) FROM schema_version WHERE application = ?"
        params: tuple[str, ...] = (APPLICATION,)
    else:
        (app_id,) = conn.execute("PRAGMA application_id").fetchone()
        (tables,) = conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
        ).fetchone()
        present = app_id == APPLICATION_ID and tables == 1
        version_sql, params = "SELECT max(version) FROM schema_version", ()
    if not present:
        return False
    (version,) = conn.execute(version_sql, params).fetchone()
    return bool(version == SCHEMA_VERSION)
