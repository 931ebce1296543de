"""Stopping a DuckDB query from any thread, at any moment before it has ended.

DuckDB forgets an interrupt that comes before it has started the query (it clears the flag
as a statement begins), so once fired, ``Interrupter`` interrupts the cursor again every
INTERRUPT_EVERY_SECONDS, from a thread started then, until the query has ended. Used by
the data backend (proxy.backends.duckdb) and the catalog engine (proxy.catalog.engine);
outside proxy.backends, whose import brings the rewriter, which the engine's process
does not need.
"""

from __future__ import annotations

import contextlib
import threading

import duckdb

#: How often a query being stopped is interrupted again, until it has ended.
INTERRUPT_EVERY_SECONDS = 0.01


class Interrupter:
    """Stops the query on one cursor: ``fire`` (any thread, any moment; once the query has
    ended, it does nothing), ``end`` (the query has ended: no more interrupts)."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection) -> None:
        self._cursor = cursor
        self._lock = threading.Lock()
        self._ended = threading.Event()
        self._watcher: threading.Thread | None = None
        self.fired = False

    def fire(self) -> None:
        with self._lock:
            self.fired = True
            if self._watcher is not None or self._ended.is_set():
                return
            self._watcher = threading.Thread(
                target=self._interrupt_until_ended, name="dpproxy-duckdb-stop", daemon=True
            )
            self._watcher.start()

    def end(self) -> None:
        """The query has ended: no more interrupts (returns once none can come)."""
        with self._lock:
            self._ended.set()
            watcher = self._watcher
        if watcher is not None:
            watcher.join()

    def _interrupt_until_ended(self) -> None:
        while not self._ended.is_set():
            with contextlib.suppress(duckdb.Error):  # thread-safe; harmless between statements
                self._cursor.interrupt()
            self._ended.wait(INTERRUPT_EVERY_SECONDS)
