"""The catalog's database runs its queries in a process of its own (the catalog engine),
whose memory for data is bounded: what DuckDB's functions make outside its memory_limit
(repeat, range, list_resize) is refused there, the server's process (here, the test's)
does not grow, and an engine that ends or is killed (a query it could not interrupt) is
started again for the next query. Before, all of it ran in the server's process: these
queries took gigabytes there (10 GB for the lists), and nothing could stop a levenshtein()
of long strings once it had started.

Real DuckDB in a real engine process; no timings are asserted (the waits only let a
query start).
"""

from __future__ import annotations

import os
import resource
import signal
import threading
import time
from pathlib import Path

import pytest

from proxy.catalog.database import (
    ENGINE_MEMORY_BYTES,
    CatalogDatabase,
    CatalogEngineDidNotStart,
    CatalogEngineLost,
    CatalogQueryCanceled,
    CatalogQueryFailed,
    CatalogResultTooLarge,
    QueryOutput,
    QueryStop,
)
from rewriter import Catalog, ColumnType, TablePolicy, build_catalog

MB = 1024 * 1024
#: Setup waits (not measurements): long enough for a query to reach DuckDB.
SETTLE_SECONDS = 0.5
#: A cross join DuckDB interrupts between chunks: it would run for minutes.
SLOW = (
    "SELECT count(*) FROM generate_series(1, 100000) AS a(x), "
    "generate_series(1, 100000) AS b(y) WHERE x + y > 1"
)
#: One function call DuckDB cannot interrupt (a minute on one core).
UNSTOPPABLE = "SELECT levenshtein(repeat('a', 200000), repeat('b', 200000))"
AMPLIFIERS = (
    "SELECT len(list_resize([1], 150000000))",
    "SELECT len(range(150000000))",
    "SELECT repeat('x', 2000000000)",
    "SELECT length(repeat(repeat('x', 100000), 10000))",
)


def _catalog() -> Catalog:
    columns = {"patients": {"patient_id": ColumnType.INTEGER, "sex": ColumnType.TEXT}}
    policies = {"patients": TablePolicy(privacy_unit="patient_id")}
    return build_catalog(columns, policies, schema="main")


def peak_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmHWM for process {pid}")


class Running:
    """A query run on its own thread: its output or its error."""

    def __init__(self, database: CatalogDatabase, sql: str, stop: QueryStop) -> None:
        self.output: QueryOutput | None = None
        self.error: CatalogQueryFailed | None = None
        self._thread = threading.Thread(target=self._run, args=(database, sql, stop))
        self._thread.start()

    def _run(self, database: CatalogDatabase, sql: str, stop: QueryStop) -> None:
        try:
            self.output = database.run_blocking(sql, stop)
        except CatalogQueryFailed as error:
            self.error = error

    def join(self) -> None:
        self._thread.join(timeout=120)
        assert not self._thread.is_alive()


def test_functions_that_would_take_gigabytes_are_refused_by_the_engine() -> None:
    database = CatalogDatabase(_catalog())
    try:
        engine = database.engine_pid
        ours = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        for sql in AMPLIFIERS:
            with pytest.raises(CatalogResultTooLarge, match="memory"):
                database.run_blocking(sql)
            assert database.run_blocking("SELECT 42").rows == [(42,)]
        # Large values within the limits are still answered.
        answer = database.run_blocking("SELECT length(repeat('x', 50000000)) AS n")
        assert answer.rows == [(50_000_000,)]
        assert database.engine_pid == engine  # refused, not restarted
        assert peak_bytes(engine) < ENGINE_MEMORY_BYTES + 300 * MB
        assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 < ours + 200 * MB
    finally:
        database.close()


def test_a_smaller_memory_bound_is_kept() -> None:
    database = CatalogDatabase(_catalog(), memory_bytes=300 * MB)
    try:
        with pytest.raises(CatalogResultTooLarge, match="memory"):
            database.run_blocking("SELECT length(repeat('x', 400000000)) AS n")
        assert database.run_blocking("SELECT 42").rows == [(42,)]
    finally:
        database.close()


def test_an_engine_that_ends_fails_its_queries_and_starts_again() -> None:
    database = CatalogDatabase(_catalog())
    try:
        engine = database.engine_pid
        slow = Running(database, SLOW, QueryStop())
        time.sleep(SETTLE_SECONDS)
        os.kill(engine, signal.SIGKILL)  # as the system would, out of memory
        slow.join()
        assert isinstance(slow.error, CatalogEngineLost), slow.error
        assert "starts again" in str(slow.error)
        assert database.run_blocking("SELECT 42").rows == [(42,)]
        assert database.engine_pid != engine
    finally:
        database.close()


def test_a_query_that_cannot_be_interrupted_is_stopped_with_its_engine() -> None:
    database = CatalogDatabase(_catalog())
    try:
        engine = database.engine_pid
        stop = QueryStop()
        unstoppable = Running(database, UNSTOPPABLE, stop)
        other_stop = QueryStop()
        other = Running(database, SLOW, other_stop)  # another analyst's, meanwhile
        time.sleep(SETTLE_SECONDS)
        stop.cancel()
        unstoppable.join()
        assert isinstance(unstoppable.error, CatalogQueryCanceled), unstoppable.error
        # The other query is sent again to the new engine (test_catalog_engine_retry.py),
        # where it runs until it is cancelled.
        assert database.run_blocking("SELECT 42").rows == [(42,)]
        time.sleep(SETTLE_SECONDS)
        other_stop.cancel()
        other.join()
        assert isinstance(other.error, CatalogQueryCanceled), other.error
        assert database.engine_pid != engine
    finally:
        database.close()


def test_an_engine_that_cannot_start_is_an_error_at_once() -> None:
    with pytest.raises(CatalogEngineDidNotStart, match="did not start"):
        CatalogDatabase(_catalog(), memory_bytes=1 * MB)
