"""Quick read-only lookups in the state file, for callers that cannot wait on the writer.

The server checks a password inside the login exchange, synchronously: it must not queue
behind charges being fsynced. A :class:`StateReader` has its own read-only connection
(WAL readers never wait for writers) and always sees the latest committed state.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from accountant import analysts
from accountant.analysts import StoredAnalyst
from accountant.errors import StateStoreError
from accountant.sqlite import errors_named, transaction


class StateReader:
    def __init__(self, path: Path, timeout: float = 5.0) -> None:
        """Open ``path`` (which must exist: open a StateStore first) read-only."""
        self._path = Path(path)
        self._lock = threading.Lock()
        with errors_named(self._path):
            self._conn: sqlite3.Connection | None = sqlite3.connect(
                self._path.resolve().as_uri() + "?mode=ro",
                uri=True,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
            )

    def analyst(self, name: str) -> StoredAnalyst | None:
        """The analyst called ``name`` if present and not removed."""
        with self._lock:
            if self._conn is None:
                raise StateStoreError(self._path, "this reader was closed", "open it again")
            with errors_named(self._path), transaction(self._conn, write=False):
                found = analysts.find(self._conn, name)
        return None if found is None or found.removed else found

    def answer_cache_epoch(self) -> int:
        """Raised by ``StateStore.clear_answer_cache``: cached answers of an older epoch are
        forgotten."""
        with self._lock:
            if self._conn is None:
                raise StateStoreError(self._path, "this reader was closed", "open it again")
            with errors_named(self._path), transaction(self._conn, write=False):
                row = self._conn.execute("SELECT epoch FROM answer_cache_epoch").fetchone()
        return int(row[0])

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
