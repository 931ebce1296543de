"""What the ledger, audit and analyst functions need from a state database connection.

The SQL in ``accountant.ledger``, ``accountant.audit`` and ``accountant.analysts`` is
written once, in the subset SQLite and PostgreSQL share, with ``?`` placeholders. A
``sqlite3.Connection`` is a :class:`Connection` as it is; ``accountant.postgres`` wraps a
psycopg connection so that it is one too (it rewrites the placeholders).

A :class:`Database` is one open state store of either kind: the transactions the store
runs its work in (write transactions exclude each other across processes and hosts) and
the *owner* marking this store as alive, so that crash recovery leaves the reservations
of stores still running alone.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Protocol


class Cursor(Protocol):
    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...


class Database(Protocol):
    #: What error messages name: the SQLite file, or the PostgreSQL server and schema.
    @property
    def name(self) -> Path | str: ...

    #: This open store's owner id, recorded with each of its reservations.
    @property
    def owner(self) -> str: ...

    def transaction(
        self, *, write: bool, durable: bool = True
    ) -> AbstractContextManager[Connection]:
        """One transaction, committed durably on success and rolled back on any error;
        database errors come out as StateStoreError. A write transaction excludes every
        other write transaction on the same state (other threads, processes, hosts).
        ``durable=False``: the commit survives this process being killed but not a crash
        of the machine (or database server) before the next durable commit, which makes
        it durable too: only a tail of such commits can be lost, never one in between."""
        ...

    def owner_is_alive(self, owner: str) -> bool:
        """True while the store ``owner`` is open somewhere (call inside a transaction)."""
        ...

    def forget_dead_owners(self) -> None:
        """Clean up after recovery finished the reservations of dead owners."""
        ...

    def close(self) -> None: ...


#: SQLite's result codes for a lock another connection holds (``sqlite_errorname``).
_SQLITE_BUSY = ("SQLITE_BUSY", "SQLITE_LOCKED")
#: PostgreSQL's SQLSTATEs for a lock wait that ran out: lock_not_available, query_canceled
#: (the store's lock_timeout or statement_timeout).
_POSTGRES_BUSY = ("55P03", "57014")


def store_is_busy(error: BaseException) -> bool:
    """True if ``error`` (a StateStoreError) comes from the store staying locked by another
    writer past its timeout: a passing condition (try again), not a broken store."""
    cause = error.__cause__
    if cause is None:
        return False
    if str(getattr(cause, "sqlite_errorname", "")).startswith(_SQLITE_BUSY):
        return True
    return getattr(cause, "sqlstate", None) in _POSTGRES_BUSY
