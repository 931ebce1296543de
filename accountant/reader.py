"""Quick read-only lookups in the state store, for callers that cannot wait on the writer.

The server checks a password inside the login exchange, synchronously: it must not queue
behind charges being fsynced. A :class:`StateReader` has its own read-only connection
(WAL readers never wait for writers; PostgreSQL readers take no lock) and always sees
the latest committed state.
"""

from __future__ import annotations

import threading
from pathlib import Path

from accountant import analysts
from accountant.analysts import StoredAnalyst
from accountant.connection import Database
from accountant.postgres_state import PostgresState
from accountant.sqlite_state import SqliteDatabase


class StateReader:
    def __init__(self, location: Path | PostgresState, timeout: float = 5.0) -> None:
        """Open the state store at ``location`` (which must exist: open a StateStore
        first) read-only."""
        self._lock = threading.Lock()
        self._db: Database
        if isinstance(location, PostgresState):
            # Here: accountant.postgres imports psycopg, which a SQLite store need not pay.
            from accountant.postgres import PostgresDatabase  # noqa: PLC0415

            self._db = PostgresDatabase.open_reader(location, timeout)
        else:
            self._db = SqliteDatabase.open_reader(Path(location), timeout)

    def analyst(self, name: str) -> StoredAnalyst | None:
        """The analyst called ``name`` if present and not removed."""
        with self._lock, self._db.transaction(write=False) as conn:
            found = analysts.find(conn, name)
        return None if found is None or found.removed else found

    def answer_cache_epoch(self) -> int:
        """Raised by ``StateStore.clear_answer_cache``: cached answers of an older epoch are
        forgotten."""
        with self._lock, self._db.transaction(write=False) as conn:
            row = conn.execute("SELECT epoch FROM answer_cache_epoch").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            self._db.close()
