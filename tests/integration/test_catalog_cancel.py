"""Cancel requests stop catalog queries, and a running catalog query holds up nothing else.

A real `dpproxy serve` over DuckDB and real clients (psycopg's cancel, psql's Ctrl-C). A
cross join of two large generate_series is a catalog query (it names no table) that runs
far longer than the catalog's 5 s limit: cancelled, it ends at once with PostgreSQL's
57014, over the simple and the extended protocol (the latter runs it at Describe), and
nothing is charged. A cancel stops only its own connection's statement, and a statement
cancelled while it waits for its turn never runs.
"""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from proxy.catalog.database import CatalogDatabase, CatalogQueryCanceled, QueryStop
from rewriter import ColumnType, TablePolicy, build_catalog
from tests.integration.server import (
    PSQL,
    RunningServer,
    fresh_demo_server,
)

pytestmark = pytest.mark.integration

PATIENTS = 200
#: A catalog query (no table of the analyst's) that runs for minutes unless interrupted
#: (the filter keeps DuckDB from counting the cross join without computing it); {n} makes
#: each test's statement new (not answered from the cache).
SLOW = (
    "SELECT count(*) FROM generate_series(1, 100000) AS a(x), "
    "generate_series(1, {n}) AS b(y) WHERE x + y > 1"
)
SLOW_WITH_PARAMETER = SLOW.replace("> 1", "> %s")
#: Setup waits (not measurements): long enough for a statement to reach the server.
SETTLE_SECONDS = 0.3
#: A cancelled catalog query ends within this (it ran to its 5 s limit before).
PROMPT_SECONDS = 1.5
CANCELED = "canceling statement due to user request"

Connection = psycopg.Connection[tuple[object, ...]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    with fresh_demo_server(tmp_path_factory, "catalog-cancel", patients=PATIENTS) as running:
        yield running


def connect(server: RunningServer) -> Connection:
    return psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10)


class Running:
    """A statement run on its own thread: its rows or its error, and when it ended."""

    def __init__(self, conn: Connection, sql: str, parameters: list[object] | None = None):
        self.rows: list[tuple[object, ...]] | None = None
        self.error: psycopg.Error | None = None
        self.ended = threading.Event()
        self.ended_at = 0.0
        self._thread = threading.Thread(target=self._run, args=(conn, sql, parameters))
        self._thread.start()

    def _run(self, conn: Connection, sql: str, parameters: list[object] | None) -> None:
        try:
            self.rows = conn.execute(sql, parameters).fetchall()
        except psycopg.Error as error:
            self.error = error
        finally:
            self.ended_at = time.monotonic()
            self.ended.set()

    def join(self) -> None:
        self._thread.join(30)
        assert not self._thread.is_alive()


def spent(conn: Connection) -> str:
    row = conn.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None and isinstance(row[0], str)
    return row[0].split(" left of ", 1)[0]


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_cancel_stops_a_running_catalog_query_at_once(server: RunningServer, protocol: str) -> None:
    """The extended protocol (a parameter) runs the query at Describe, the simple one at
    Query: both end with 57014 as soon as the cancel arrives, and nothing is charged."""
    with connect(server) as conn:
        before = spent(conn)
        if protocol == "simple":
            slow = Running(conn, SLOW.format(n=100000 + len(protocol)))
        else:
            slow = Running(conn, SLOW_WITH_PARAMETER.format(n=100000 + len(protocol)), [1])
        time.sleep(SETTLE_SECONDS)
        canceled_at = time.monotonic()
        conn.cancel_safe(timeout=10)
        slow.join()
        assert isinstance(slow.error, psycopg.errors.QueryCanceled), slow.error
        assert str(slow.error) == CANCELED
        assert slow.ended_at - canceled_at < PROMPT_SECONDS
        # The session goes on; a cancel while it is idle changes nothing.
        assert conn.execute("SELECT 'after' AS fresh").fetchall() == [("after",)]
        conn.cancel_safe(timeout=10)
        time.sleep(SETTLE_SECONDS)
        assert conn.execute("SELECT 'idle cancel' AS fresh").fetchall() == [("idle cancel",)]
        assert spent(conn) == before


def test_psql_ctrl_c_stops_a_catalog_query(server: RunningServer) -> None:
    psql = subprocess.Popen(
        [PSQL, "-X", server.dsn("alice"), "-c", SLOW.format(n=100003)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(SETTLE_SECONDS * 2)  # psql connects first
    canceled_at = time.monotonic()
    psql.send_signal(signal.SIGINT)  # Ctrl-C: psql sends a cancel request
    _, stderr = psql.communicate(timeout=30)
    assert time.monotonic() - canceled_at < PROMPT_SECONDS
    assert CANCELED in stderr, stderr
    assert psql.returncode != 0


def test_a_statement_cancelled_while_it_waits_never_runs_and_others_go_on(
    server: RunningServer,
) -> None:
    """Two connections of alice: the second's catalog query waits for the first's (one
    catalog query at a time per analyst). Cancelling the second ends it at once and leaves
    the first running; once the first is cancelled too, a new catalog query is answered
    at once: the second's never ran."""
    with connect(server) as first, connect(server) as second:
        running = Running(first, SLOW.format(n=100004))
        time.sleep(SETTLE_SECONDS)
        waiting = Running(second, SLOW.format(n=100005))
        time.sleep(SETTLE_SECONDS)
        assert not running.ended.is_set() and not waiting.ended.is_set()
        canceled_at = time.monotonic()
        second.cancel_safe(timeout=10)
        waiting.join()
        assert isinstance(waiting.error, psycopg.errors.QueryCanceled), waiting.error
        assert waiting.ended_at - canceled_at < PROMPT_SECONDS
        assert not running.ended.is_set()  # the cancel was for the second connection only
        first.cancel_safe(timeout=10)
        running.join()
        assert isinstance(running.error, psycopg.errors.QueryCanceled), running.error
        began = time.monotonic()
        assert second.execute("SELECT 'next' AS fresh").fetchall() == [("next",)]
        assert time.monotonic() - began < PROMPT_SECONDS


def test_a_dp_query_is_not_held_up_by_a_catalog_query_of_the_same_analyst(
    server: RunningServer,
) -> None:
    """Every statement is first translated (is it a catalog query?): that must not wait
    for the analyst's catalog query running on another connection."""
    with connect(server) as first, connect(server) as second:
        running = Running(first, SLOW.format(n=100006))
        time.sleep(SETTLE_SECONDS)
        began = time.monotonic()
        rows = second.execute("SELECT COUNT(*) FROM patients WHERE birth_year > 1960").fetchall()
        answered_in = time.monotonic() - began
        still_running = not running.ended.is_set()
        first.cancel_safe(timeout=10)
        running.join()
    assert len(rows) == 1 and still_running
    assert answered_in < PROMPT_SECONDS


def test_a_stop_before_or_just_after_the_query_starts_is_not_lost() -> None:
    """DuckDB forgets an interrupt that comes before it has started the query: a stop at
    any moment, even one that lands just before, still ends the query promptly."""
    columns = {"patients": {"patient_id": ColumnType.INTEGER, "sex": ColumnType.TEXT}}
    policies = {"patients": TablePolicy(privacy_unit="patient_id")}
    database = CatalogDatabase(build_catalog(columns, policies, schema="main"))
    try:
        stop = QueryStop()
        stop.cancel()
        with pytest.raises(CatalogQueryCanceled, match="before it started"):
            database.run_blocking(SLOW.format(n=100000), stop)
        for attempt in range(40):
            stop = QueryStop()
            timer = threading.Timer(attempt * 0.0002, stop.cancel)
            began = time.monotonic()
            timer.start()
            with pytest.raises(CatalogQueryCanceled):
                database.run_blocking(SLOW.format(n=100000), stop)
            assert time.monotonic() - began < PROMPT_SECONDS
        assert database.run_blocking("SELECT 42").rows == [(42,)]
    finally:
        database.close()
