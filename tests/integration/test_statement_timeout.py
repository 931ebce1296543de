"""A session's statement_timeout stops its statements, as PostgreSQL's does (57014).

A real `dpproxy serve` on both backends and psycopg. ``visits`` is a view that makes every
scan slow (a huge cross join in DuckDB, pg_sleep in PostgreSQL), so that a DP query over it
runs until it is stopped; a cross join of two large generate_series is a slow catalog
query. A DP query stopped by the timeout after its charge keeps the charge (audited as
failed); one stopped before it (while it is planned) and a catalog query cost nothing. 0
means no limit, set by SET or at connect (options=-c statement_timeout=...).
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from proxy.demo_data import DemoSize, generate, load_postgres, write_duckdb
from tests.integration.server import (
    RunningServer,
    dpproxy_in_process,
    slow_visits_duckdb,
    slow_visits_postgres,
    start,
    write_config,
)

pytestmark = pytest.mark.integration

PATIENTS = 200
SCHEMA = f"dpproxy_timeout_{uuid.uuid4().hex[:8]}"  # unique: test runs may share the server
SLOW_DP = "SELECT COUNT(*) FROM visits"
SLOW_DP_WITH_PARAMETER = "SELECT COUNT(*) FROM visits WHERE cost >= %s"
#: A catalog query (it names no table of the analyst's) that runs for minutes; {n} makes
#: each statement new (not answered from the catalog's result cache).
SLOW_CATALOG = (
    "SELECT count(*) FROM generate_series(1, 100000) AS a(x), "
    "generate_series(1, {n}) AS b(y) WHERE x + y > 1"
)
TIMEOUT = "300ms"
TIMEOUT_SECONDS = 0.3
#: A DP query's timeout: room for planning and the charge (an fsync) on a loaded machine,
#: which 300 ms did not always leave (the query was then stopped before its charge).
DP_TIMEOUT = "1s"
DP_TIMEOUT_SECONDS = 1.0
#: A statement stopped by the timeout ends within this of its start.
PROMPT_SECONDS = 1.5
#: A DP query stopped by its timeout ends within this of its start.
DP_PROMPT_SECONDS = DP_TIMEOUT_SECONDS + 1.2
#: How long a statement is waited for before the test gives up and cancels it.
GIVE_UP_SECONDS = 5.0
#: Setup waits (not measurements): long enough for a statement to reach where it waits.
SETTLE_SECONDS = 0.5
TIMED_OUT = "canceling statement due to statement timeout"

Connection = psycopg.Connection[tuple[object, ...]]


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp(f"timeout-{request.param}")
    data = generate(DemoSize(patients=PATIENTS))
    backend = ""
    if request.param == "postgres":
        dsn = request.getfixturevalue("pg_dsn")
        load_postgres(data, dsn, schema=SCHEMA)
        slow_visits_postgres(dsn, SCHEMA)
        # One connection: a slow query holds it while another waits (see the test of a
        # query stopped while it is planned).
        backend = f'engine = "postgres"\ndsn = "{dsn}"\nschema = "{SCHEMA}"\npool_size = 1\n#'
    else:
        write_duckdb(data, directory / "demo.duckdb")
        slow_visits_duckdb(directory / "demo.duckdb")
    running = start(write_config(directory, backend=backend))
    yield running
    log = running.stop()
    assert "Traceback" not in log, log
    if request.param == "postgres":
        with psycopg.connect(request.getfixturevalue("pg_dsn"), autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")


def connect(server: RunningServer, options: str | None = None) -> Connection:
    dsn = server.dsn("alice")
    if options is not None:
        dsn = make_conninfo(dsn, options=options)
    return psycopg.connect(dsn, autocommit=True, connect_timeout=10)


def left(conn: Connection) -> Decimal:
    """What SHOW dpproxy.budget says is left of alice's ε."""
    row = conn.execute("SHOW dpproxy.budget").fetchone()
    assert row is not None and isinstance(row[0], str)
    return Decimal(row[0].split(" left of ", 1)[0].removeprefix("ε="))


def last_query(conn: Connection) -> tuple[str, str]:
    """The sql and decision of alice's last audited attempt (dpproxy.my_queries)."""
    row = conn.execute("SELECT * FROM dpproxy.my_queries LIMIT 1").fetchone()
    assert row is not None
    return str(row[3]), str(row[4])


def last_audit(server: RunningServer) -> dict[str, object]:
    """alice's last audit record as the admin reads it (with the stored reason)."""
    result = dpproxy_in_process(
        "audit", "list", "--analyst", "alice", "--limit", "1", "--format", "json",
        "--config", str(server.config),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = json.loads(result.stdout)
    record = records[-1] if isinstance(records, list) else records
    assert isinstance(record, dict)
    return record


class Running:
    """A statement run on its own thread: its error (if any), and how long it ran."""

    def __init__(self, conn: Connection, sql: str, parameters: list[object] | None = None):
        self.error: psycopg.Error | None = None
        self.ended = threading.Event()
        self.began = time.monotonic()
        self.ran = 0.0
        self._conn = conn
        self._thread = threading.Thread(target=self._run, args=(sql, parameters))
        self._thread.start()

    def _run(self, sql: str, parameters: list[object] | None) -> None:
        try:
            self._conn.execute(sql, parameters).fetchall()
        except psycopg.Error as error:
            self.error = error
        finally:
            self.ran = time.monotonic() - self.began
            self.ended.set()

    def join(self) -> None:
        """Waits GIVE_UP_SECONDS; a statement still running then is cancelled and the test
        fails (nothing stopped it)."""
        if not self.ended.wait(GIVE_UP_SECONDS):
            self._conn.cancel_safe(timeout=10)
            self._thread.join(30)
            pytest.fail(f"still running after {GIVE_UP_SECONDS} s: nothing stopped it")
        self._thread.join()


def stopped(
    conn: Connection, sql: str, parameters: list[object] | None = None
) -> tuple[psycopg.Error, float]:
    """The error ``sql`` ended with and how long it ran (see Running.join)."""
    running = Running(conn, sql, parameters)
    running.join()
    assert running.error is not None, "the statement was answered"
    return running.error, running.ran


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_a_slow_dp_query_times_out_and_its_charge_stands(
    server: RunningServer, protocol: str
) -> None:
    with connect(server) as conn:
        conn.execute(f"SET statement_timeout = '{DP_TIMEOUT}'")
        assert conn.execute("SHOW statement_timeout").fetchone() == (DP_TIMEOUT,)
        before = left(conn)
        if protocol == "simple":
            error, elapsed = stopped(conn, SLOW_DP)
            audited = SLOW_DP
        else:  # psycopg binds the parameter: Parse, Bind, Describe, Execute
            error, elapsed = stopped(conn, SLOW_DP_WITH_PARAMETER, [0])
            audited = SLOW_DP_WITH_PARAMETER.replace("%s", "0")
        assert isinstance(error, psycopg.errors.QueryCanceled), error
        assert str(error) == f"{TIMED_OUT}; the charge of ε=1 stands"
        assert DP_TIMEOUT_SECONDS <= elapsed < DP_PROMPT_SECONDS
        assert left(conn) == before - 1
        assert last_query(conn) == (audited, "failed")
        record = last_audit(server)
        assert record["decision"] == "failed", record
        assert record["reason"] == "QueryCanceled: canceled due to statement timeout", record


@pytest.mark.parametrize("protocol", ["simple", "extended"])
def test_a_slow_catalog_query_times_out_free(server: RunningServer, protocol: str) -> None:
    """The extended protocol (a parameter) runs the catalog query at Describe."""
    with connect(server) as conn:
        conn.execute(f"SET statement_timeout = {TIMEOUT_SECONDS * 1000:.0f}")  # ms by default
        assert conn.execute("SHOW statement_timeout").fetchone() == (TIMEOUT,)
        before = left(conn)
        if protocol == "simple":
            error, elapsed = stopped(conn, SLOW_CATALOG.format(n=100001))
        else:
            slow = SLOW_CATALOG.format(n=100001).replace("> 1", "> %s")
            error, elapsed = stopped(conn, slow, [1])
        assert isinstance(error, psycopg.errors.QueryCanceled), error
        assert str(error) == TIMED_OUT
        assert TIMEOUT_SECONDS <= elapsed < PROMPT_SECONDS
        assert left(conn) == before
        # The session goes on: a fast statement is answered under the same timeout.
        assert conn.execute("SELECT 'after' AS fresh").fetchall() == [("after",)]


@pytest.mark.parametrize("server", ["postgres"], indirect=True)  # its pool of one connection
@pytest.mark.parametrize("reason", ["user request", "statement timeout"])
def test_a_query_stopped_while_it_is_planned_is_not_charged(
    server: RunningServer, reason: str
) -> None:
    """A query whose constant waits, while it is planned, for the only PostgreSQL
    connection (held by a slow query): a cancel request or the timeout that comes
    meanwhile stops it before the charge, free (it was charged, then stopped, before)."""
    sql = f"SELECT COUNT(*) FROM patients WHERE birth_year > 1900 + {len(reason)}"
    with connect(server) as holder, connect(server) as conn:
        slow = Running(holder, SLOW_DP)  # holds the only connection to PostgreSQL
        time.sleep(SETTLE_SECONDS)
        if reason == "statement timeout":
            conn.execute(f"SET statement_timeout = '{TIMEOUT}'")
        before = left(conn)
        planned = Running(conn, sql)
        time.sleep(SETTLE_SECONDS)  # translated and planned: waits to compute 1900 + n
        if reason == "user request":
            conn.cancel_safe(timeout=10)
        time.sleep(TIMEOUT_SECONDS)
        assert not planned.ended.is_set()  # still waiting for the connection
        holder.cancel_safe(timeout=10)
        slow.join()
        planned.join()
        assert isinstance(planned.error, psycopg.errors.QueryCanceled), planned.error
        assert planned.error.diag.message_primary == f"canceling statement due to {reason}"
        assert planned.error.diag.message_detail == (
            "the query was stopped before it was charged: nothing was charged"
        )
        assert str(slow.error).startswith("canceling statement due to user request; the charge")
        assert left(conn) == before
        rows = conn.execute("SELECT * FROM dpproxy.my_queries LIMIT 3").fetchall()
        mine = [(row[4], row[5], row[6]) for row in rows if row[3] == sql]
        assert mine == [("error", f"canceled due to {reason} before the charge", 0)]


def test_set_at_connect_and_zero_means_no_limit(server: RunningServer) -> None:
    """``options=-c statement_timeout=1000`` (ms) applies from the first statement; after
    SET statement_timeout = 0 the slow query runs on until a cancel request stops it."""
    with connect(server, options="-c statement_timeout=1000") as conn:
        assert conn.execute("SHOW statement_timeout").fetchone() == (DP_TIMEOUT,)
        error, _ = stopped(conn, SLOW_DP)
        assert str(error) == f"{TIMED_OUT}; the charge of ε=1 stands"
        conn.execute("SET statement_timeout = 0")
        before = left(conn)
        slow = Running(conn, SLOW_DP)
        assert not slow.ended.wait(2 * DP_TIMEOUT_SECONDS)  # well past the timeout it had
        conn.cancel_safe(timeout=10)
        slow.join()
        assert str(slow.error) == (
            "canceling statement due to user request; the charge of ε=1 stands"
        )
        assert left(conn) == before - 1
        assert last_query(conn) == (SLOW_DP, "failed")


def test_a_timeout_in_a_transaction_fails_it(server: RunningServer) -> None:
    """As any error: the block is aborted until ROLLBACK, which undoes its SET."""
    with connect(server) as conn:
        conn.execute("BEGIN")
        conn.execute("SET statement_timeout = '1min'")
        conn.execute(f"SET LOCAL statement_timeout = '{TIMEOUT}'")
        error, _ = stopped(conn, SLOW_CATALOG.format(n=100002))
        assert isinstance(error, psycopg.errors.QueryCanceled), error
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("SELECT 1")
        conn.execute("ROLLBACK")
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
