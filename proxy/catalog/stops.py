"""Stopping one catalog query from any thread, at any moment.

On the server's side a QueryStop reaches the query in the catalog engine's process (a
message: proxy.catalog.engine_client); there, it interrupts the DuckDB cursor that runs it
(proxy.duckdb_interrupt.Interrupter).
"""

from __future__ import annotations

import threading
from typing import Protocol


class Fireable(Protocol):
    def fire(self) -> None: ...


class QueryStop:
    """Stops one catalog query from any thread: cancelled before the query starts, it never
    starts; while it runs, it is interrupted at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._canceled = False
        self._target: Fireable | None = None

    @property
    def canceled(self) -> bool:
        return self._canceled

    def cancel(self) -> None:
        with self._lock:
            self._canceled = True
            target = self._target
        if target is not None:
            target.fire()

    def attach(self, target: Fireable | None) -> None:
        """What stops the query now running (fired at once if already cancelled), or None."""
        with self._lock:
            self._target = target
            canceled = self._canceled
        if target is not None and canceled:
            target.fire()
