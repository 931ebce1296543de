"""The in-memory DuckDB holding the emulated catalog, in the catalog engine's process
(proxy.catalog.engine_process): never in the server's own, whose memory it could exhaust.

It holds no data of any database: only the rows of ``contents.py``. It cannot read or
write files (nor spill to a temporary directory) or load extensions, every query is
interrupted after TIMEOUT_SECONDS or at once when its QueryStop is cancelled, and its
answer is fetched in small batches and given up past MAX_ROWS rows or MAX_BYTES bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import duckdb
import numpy

from proxy.catalog.datetimes import UTC_ZONE, OutputPlan, SessionZone, UnshownValues, output_plan
from proxy.catalog.messages import Step, TableRows
from proxy.catalog.numeric_udfs import register as register_numeric_functions
from proxy.catalog.outputs import (
    MAX_BYTES,
    MAX_ROWS,
    MEMORY_LIMIT,
    TIMEOUT_SECONDS,
    CatalogQueryCanceled,
    CatalogQueryFailed,
    CatalogQueryTimedOut,
    CatalogQueryTooLong,
    CatalogResultTooLarge,
    QueryOutput,
    memory_refusal,
    value_size,
)
from proxy.catalog.stops import QueryStop
from proxy.duckdb_interrupt import Interrupter

_MAX_BATCH = 2048  # rows fetched at a time, at most (fewer while the rows are large)
#: The engine's settings, locked once the catalog is built.
SETTINGS = (
    # Times are computed in UTC unless the translation names the session's zone
    # (DuckDB's default is the machine's).
    "SET TimeZone = 'UTC'",
    # Past its memory_limit, an in-memory DuckDB writes to ./.tmp: not this one.
    "SET temp_directory = ''",
    "SET enable_external_access = false",
    "SET threads = 1",
    f"SET memory_limit = '{MEMORY_LIMIT}'",
    # Memory freed goes back to the system within seconds (else the process keeps what a
    # query took at its largest, up to ENGINE_MEMORY_BYTES).
    "SET allocator_background_threads = true",
    "SET enable_progress_bar = false",
    "SET lock_configuration = true",
)


class CatalogEngine:
    def __init__(self, script: Sequence[Step]) -> None:
        self._connection = duckdb.connect(":memory:")
        self._lock = threading.Lock()
        register_numeric_functions(self._connection)  # before the macros that call them
        for step in script:
            if isinstance(step, TableRows):
                _insert(self._connection, step)
            else:
                self._connection.execute(step)
        for statement in SETTINGS:
            self._connection.execute(statement)

    def run(self, sql: str, stop: QueryStop, zone: SessionZone = UTC_ZONE) -> QueryOutput:
        """Run ``sql`` (blocks). Raises CatalogQueryCanceled when ``stop`` is cancelled,
        before or while it runs, and the other CatalogQueryFailed errors.

        Values DuckDB's Python client would not give as PostgreSQL shows them (intervals,
        timestamps and times with time zone: see datetimes.py) come as their text,
        timestamptz values in ``zone``, the session's TimeZone."""
        with self._lock:
            cursor = self._connection.cursor()
        interrupter = Interrupter(cursor)
        stop.attach(interrupter)  # a cancel from now on reaches the query
        timer = threading.Timer(TIMEOUT_SECONDS, interrupter.fire)
        timer.start()
        try:
            if stop.canceled:
                raise CatalogQueryCanceled("canceled before it started")
            # The columns' types from binding the query alone (a relation runs nothing
            # until asked), so that it runs once, with the columns DuckDB's values would
            # not show right projected (catalog queries are SELECTs only: classify).
            relation = cursor.sql(sql)
            names = tuple(relation.columns)
            types = list(relation.types)
            plan = output_plan(names, types, zone)
            cursor.execute(sql if plan is None else plan.query(sql))
            rows, size = _fetch(cursor, stop, plan)
        except duckdb.InterruptException:
            if stop.canceled:
                raise CatalogQueryCanceled("canceled on request") from None
            raise CatalogQueryTimedOut(f"stopped after {TIMEOUT_SECONDS:g} s") from None
        except (duckdb.OutOfMemoryException, MemoryError):
            raise memory_refusal() from None
        except duckdb.Error as error:
            raise CatalogQueryFailed(str(error).split("\n", 1)[0]) from None
        except UnshownValues as error:
            raise CatalogQueryFailed(str(error)) from None
        finally:
            timer.cancel()
            stop.attach(None)
            interrupter.end()
            cursor.close()
        return QueryOutput(names, tuple(str(t) for t in types), rows, size)

    def close(self) -> None:
        self._connection.close()


def _fetch(
    cursor: duckdb.DuckDBPyConnection, stop: QueryStop, plan: OutputPlan | None
) -> tuple[list[tuple[object, ...]], int]:
    """The rows of the query run on ``cursor`` and their size, fetched a few at a time:
    as many as are expected to fit in what is left of MAX_BYTES (at least one row, at
    most _MAX_BATCH), so that an answer too large is given up after little more than
    MAX_BYTES were fetched. Raises CatalogQueryTooLong past MAX_ROWS rows,
    CatalogResultTooLarge past MAX_BYTES and CatalogQueryCanceled once ``stop`` is.
    ``plan``: how the rows of a projected query are shown (OutputPlan.convert)."""
    rows: list[tuple[object, ...]] = []
    size = 0
    batch = 1
    while True:
        if stop.canceled:
            raise CatalogQueryCanceled("canceled on request")
        fetched = cursor.fetchmany(batch)
        if not fetched:
            return rows, size
        if plan is not None:
            fetched = [plan.convert(row) for row in fetched]
        size += sum(value_size(row) for row in fetched)
        rows.extend(fetched)
        if size > MAX_BYTES:
            raise CatalogResultTooLarge(
                f"its answer is larger than {MAX_BYTES // (1024 * 1024)} MB"
            )
        if len(rows) > MAX_ROWS:
            raise CatalogQueryTooLong(f"more than {MAX_ROWS} rows")
        fitting = (MAX_BYTES - size) // (size // len(rows) + 1)
        batch = max(1, min(batch * 4, _MAX_BATCH, fitting, MAX_ROWS + 1 - len(rows)))


def _insert(connection: duckdb.DuckDBPyConnection, rows: TableRows) -> None:
    # A dict of NumPy object arrays is a relation DuckDB scans directly (fast, no SQL text).
    # Filled value by value: numpy.array of lists of one length (pg_index.indkey) would
    # make a second axis.
    source = {name: numpy.empty(len(rows.rows), dtype=object) for name in rows.columns}
    for position, row in enumerate(rows.rows):
        for name, value in zip(rows.columns, row, strict=True):
            source[name][position] = value
    connection.register("dp_rows", source)
    try:
        connection.execute(f"INSERT INTO {rows.table} SELECT * FROM dp_rows")
    finally:
        connection.unregister("dp_rows")
