"""The emulated catalog's database, one per server: an in-memory DuckDB in a process of
its own (the catalog engine: proxy.catalog.engine_process, engine.py), so that no catalog
query can take the server's memory or hold a core for long.

It holds no data of any database: only the rows of ``contents.py``. It cannot read files
or load extensions; every query is interrupted after TIMEOUT_SECONDS, or at once when its
QueryStop is cancelled, and the engine's process is killed (and started again for the
next query) if it does not stop then; its answer is given up past MAX_ROWS rows or
MAX_BYTES bytes; and the process may use at most ENGINE_MEMORY_BYTES for its data.

A query whose engine was killed for another query's sake (one that would not stop) is
sent again, once, to the new engine: it did nothing wrong, and catalog queries read
nothing and cost nothing. The query that had the engine killed is not, nor one whose
engine ended for no known reason (it may be the cause), nor one lost a second time.
"""

from __future__ import annotations

import threading

from proxy.catalog.build_script import build_script
from proxy.catalog.contents import Declared, Keys
from proxy.catalog.datetimes import UTC_ZONE, SessionZone
from proxy.catalog.engine_client import (
    CatalogEngineDidNotStart,
    EngineLostForAnother,
    EngineProcess,
)
from proxy.catalog.messages import EngineSetup
from proxy.catalog.outputs import (
    ENGINE_MEMORY_BYTES,
    MAX_BYTES,
    MAX_ROWS,
    MEMORY_LIMIT,
    TIMEOUT_SECONDS,
    CatalogEngineLost,
    CatalogQueryCanceled,
    CatalogQueryFailed,
    CatalogQueryTimedOut,
    CatalogQueryTooLong,
    CatalogResultTooLarge,
    QueryOutput,
    value_size,
)
from proxy.catalog.stops import QueryStop
from rewriter import Catalog

__all__ = [
    "ENGINE_MEMORY_BYTES",
    "MAX_BYTES",
    "MAX_ROWS",
    "MEMORY_LIMIT",
    "TIMEOUT_SECONDS",
    "CatalogDatabase",
    "CatalogEngineDidNotStart",
    "CatalogEngineLost",
    "CatalogQueryCanceled",
    "CatalogQueryFailed",
    "CatalogQueryTimedOut",
    "CatalogQueryTooLong",
    "CatalogResultTooLarge",
    "QueryOutput",
    "QueryStop",
    "value_size",
]


class CatalogDatabase:
    def __init__(
        self,
        catalog: Catalog,
        declared: Declared | None = None,
        *,
        keys: Keys = (),
        memory_bytes: int = ENGINE_MEMORY_BYTES,
    ) -> None:
        """Starts the engine and builds the catalog there (returns once it is built);
        raises CatalogEngineDidNotStart if it does not. ``keys``: the constraints the
        database declares (proxy.catalog.keys)."""
        self._setup = EngineSetup(build_script(catalog, declared, keys), memory_bytes)
        self._lock = threading.Lock()
        self._closed = False
        self._engine = EngineProcess(self._setup)
        self._engine.wait_ready()  # CatalogEngineDidNotStart: the runner says why

    @property
    def engine_pid(self) -> int:
        """The process id of the engine now running (or last run)."""
        return self._engine.pid

    def run_blocking(
        self, sql: str, stop: QueryStop | None = None, zone: SessionZone = UTC_ZONE
    ) -> QueryOutput:
        """Run ``sql`` (blocks: call it from a worker thread, see CatalogResponder).
        Raises CatalogQueryCanceled when ``stop`` is cancelled, before or while it runs,
        and the other CatalogQueryFailed errors. Sent again once to a new engine if its
        engine was killed for another query (EngineLostForAnother).

        Values DuckDB's Python client would not give as PostgreSQL shows them (intervals,
        timestamps and times with time zone: see datetimes.py) come as their text,
        timestamptz values in ``zone``, the session's TimeZone."""
        stop = QueryStop() if stop is None else stop
        if stop.canceled:
            raise CatalogQueryCanceled("canceled before it started")
        try:
            return self._running_engine().run(sql, zone.name, stop)
        except EngineLostForAnother:
            if stop.canceled:
                raise CatalogQueryCanceled("canceled on request") from None
        # Once: lost again, it fails (EngineLostForAnother is a CatalogEngineLost).
        return self._running_engine().run(sql, zone.name, stop)

    def _running_engine(self) -> EngineProcess:
        """The engine, started again (and awaited) if it has ended."""
        with self._lock:
            if self._closed:
                raise CatalogQueryFailed("the catalog database is closed")
            if self._engine.lost:
                try:
                    self._engine = EngineProcess(self._setup)
                except OSError as error:  # tried again at the next query
                    raise CatalogEngineDidNotStart(
                        f"the catalog engine did not start: {error}"
                    ) from None
            engine = self._engine
        engine.wait_ready()
        return engine

    def close(self) -> None:
        with self._lock:
            self._closed = True
            engine = self._engine
        engine.close()
