"""The state store in one SQLite file (the default): a :class:`~accountant.connection.Database`.

Write transactions are ``BEGIN IMMEDIATE`` (writers wait for each other, across processes
on this host); commits are fsynced (``synchronous=FULL``, see ``accountant.sqlite``). The
owner of an open store is a ``flock``-ed file next to the state file (``accountant.owners``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from accountant.connection import Connection
from accountant.errors import StateStoreError
from accountant.owners import OwnerLock, owner_is_alive, sweep_dead_owners
from accountant.sqlite import connect, errors_named, refuse_directory, transaction


class SqliteDatabase:
    def __init__(self, path: Path, conn: sqlite3.Connection, owner: OwnerLock | None) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = conn
        self._owner = owner

    @classmethod
    def open(cls, path: Path, timeout: float) -> SqliteDatabase:
        """Open (creating if absent) the state file at ``path`` as a new owner."""
        refuse_directory(path)
        owner = OwnerLock(path)
        try:
            conn = connect(path, timeout)
        except BaseException:
            owner.release()
            raise
        return cls(path, conn, owner)

    @classmethod
    def open_reader(cls, path: Path, timeout: float) -> SqliteDatabase:
        """A read-only connection to an existing state file (no owner: it never writes).
        WAL readers never wait for writers."""
        refuse_directory(path)
        with errors_named(path):
            conn = sqlite3.connect(
                path.resolve().as_uri() + "?mode=ro",
                uri=True,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
            )
        return cls(path, conn, None)

    @property
    def name(self) -> Path:
        return self._path

    @property
    def owner(self) -> str:
        if self._owner is None:
            raise StateStoreError(self._path, "a read-only connection owns nothing", "open a store")
        return self._owner.id

    @contextmanager
    def transaction(self, *, write: bool, durable: bool = True) -> Iterator[Connection]:
        if self._conn is None:
            raise StateStoreError(self._path, "this store was closed", "open it again")
        with errors_named(self._path), transaction(self._conn, write=write, durable=durable):
            yield self._conn

    def owner_is_alive(self, owner: str) -> bool:
        return owner_is_alive(self._path, owner)

    def forget_dead_owners(self) -> None:
        sweep_dead_owners(self._path)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self._owner is not None:
            self._owner.release()
