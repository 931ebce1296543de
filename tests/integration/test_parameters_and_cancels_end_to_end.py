"""Custom-parameter limits, the parameters dpproxy keeps at one value, and the audit of
statements stopped before the DP pipeline, through a real `dpproxy serve` and psycopg.

The server runs on PostgreSQL with one backend connection, and ``visits`` is a view that
sleeps, so that a slow DP query holds the only connection while another query, planned
meanwhile, waits for it (to compute its constant). Before: a session took any number of
custom parameters (the server's memory grew with each new statement), SHOW xmloption and
pg_dump's ``SET xmloption = content`` were refused, and a DP query stopped by the
statement timeout while it waited to be classified, or at Describe, left no audit
record.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from proxy.demo_data import DemoSize, generate, load_postgres
from proxy.pg_settings import MAX_CUSTOM_PARAMETERS, MAX_VALUE_LENGTH
from tests.integration.server import RunningServer, start, write_config

pytestmark = pytest.mark.integration

PATIENTS = 200
SCHEMA = f"dpproxy_limits_{uuid.uuid4().hex[:8]}"  # unique: test runs may share the server
SLOW_DP = "SELECT COUNT(*) FROM visits"
#: A catalog statement of nearly 100,000 characters: translating it (is it a catalog
#: query?) takes most of a second, during which alice's other statements wait their turn.
LONG_CATALOG = (
    "SELECT CASE " + " ".join(f"WHEN {i} = 1 THEN {i}" for i in range(4200)) + " END AS x"
)
#: Setup waits (not measurements): long enough for a statement to reach where it waits.
SETTLE_SECONDS = 0.5
GIVE_UP_SECONDS = 10.0

Connection = psycopg.Connection[tuple[object, ...]]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, pg_dsn: str) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("parameters-and-cancels")
    load_postgres(generate(DemoSize(patients=PATIENTS)), pg_dsn, schema=SCHEMA)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {SCHEMA}.visits RENAME TO visits_data")
        conn.execute(
            f"CREATE VIEW {SCHEMA}.visits AS SELECT v.* FROM {SCHEMA}.visits_data v "
            "CROSS JOIN (SELECT pg_sleep(60)) AS s"
        )
    backend = f'engine = "postgres"\ndsn = "{pg_dsn}"\nschema = "{SCHEMA}"\npool_size = 1\n#'
    running = start(write_config(directory, backend=backend))
    try:
        yield running
    finally:
        log = running.stop()
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    assert "Traceback" not in log, log


def connect(server: RunningServer, options: str | None = None) -> Connection:
    dsn = server.dsn("alice")
    if options is not None:
        dsn = make_conninfo(dsn, options=options)
    return psycopg.connect(dsn, autocommit=True, connect_timeout=10)


class Running:
    """A statement run on its own thread: its error, if any."""

    def __init__(self, conn: Connection, sql: str, parameters: list[object] | None = None):
        self.error: psycopg.Error | None = None
        self.ended = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(conn, sql, parameters))
        self._thread.start()

    def _run(self, conn: Connection, sql: str, parameters: list[object] | None) -> None:
        try:
            conn.execute(sql, parameters).fetchall()
        except psycopg.Error as error:
            self.error = error
        finally:
            self.ended.set()

    def join(self) -> None:
        self._thread.join(GIVE_UP_SECONDS)
        assert not self._thread.is_alive(), "the statement did not end"


def records_of(conn: Connection, sql: str) -> list[tuple[object, ...]]:
    """(decision, reason, ε) of alice's audit records of ``sql`` (dpproxy.my_queries)."""
    rows = conn.execute("SELECT * FROM dpproxy.my_queries LIMIT 20").fetchall()
    return [(row[4], row[5], str(row[6])) for row in rows if row[3] == sql]


def spent(conn: Connection) -> str:
    row = conn.execute("SELECT * FROM dpproxy.my_budget").fetchone()
    assert row is not None
    return str(row[2])


def test_custom_parameters_are_limited_and_the_session_goes_on(server: RunningServer) -> None:
    with connect(server) as conn:
        with conn.pipeline():  # as the report's reproduction: psycopg's pipeline mode
            for i in range(MAX_CUSTOM_PARAMETERS):
                conn.execute(f"SET z.p{i} = 'v{i}'")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as caught:
            conn.execute(f"SET z.p{MAX_CUSTOM_PARAMETERS} = 'v'")
        assert caught.value.diag.message_primary == (
            f'cannot define custom parameter "z.p{MAX_CUSTOM_PARAMETERS}": this session '
            f"already has {MAX_CUSTOM_PARAMETERS} custom parameters, the most dpproxy keeps"
        )
        assert "reuse the custom parameters" in (caught.value.diag.message_hint or "")
        with pytest.raises(psycopg.errors.ProgramLimitExceeded):
            conn.execute(f"SET z.p0 = '{'x' * (MAX_VALUE_LENGTH + 1)}'")
        assert conn.execute("SHOW z.p0").fetchone() == ("v0",)
        conn.execute(f"SET z.p1 = '{'x' * MAX_VALUE_LENGTH}'")
        assert conn.execute("SELECT current_setting('z.p1')").fetchone() == (
            "x" * MAX_VALUE_LENGTH,
        )
        assert conn.execute("SELECT 'after' AS fresh").fetchone() == ("after",)
    many = " ".join(f"-c z.p{i}=v" for i in range(MAX_CUSTOM_PARAMETERS + 1))
    with pytest.raises(psycopg.OperationalError, match="cannot define custom parameter"):
        connect(server, options=many)


def test_pg_dump_s_settings_and_postgresql_s_defaults(server: RunningServer) -> None:
    """pg_dump's preamble (less its set_config(), which dpproxy refuses) is accepted;
    SHOW and RESET give PostgreSQL's defaults; another value is refused."""
    preamble = [
        "SET statement_timeout = 0",
        "SET lock_timeout = 0",
        "SET idle_in_transaction_session_timeout = 0",
        "SET client_encoding = 'UTF8'",
        "SET standard_conforming_strings = on",
        "SET check_function_bodies = false",
        "SET xmloption = content",
        "SET client_min_messages = warning",
        "SET row_security = off",
        "SET default_tablespace = ''",
        "SET default_table_access_method = heap",
    ]
    with connect(server, options="-c exit_on_error=off") as conn:
        for sql in preamble:
            conn.execute(sql)
        assert conn.execute("SHOW xmloption").fetchone() == ("content",)
        conn.execute("RESET transform_null_equals")
        assert conn.execute("SHOW transform_null_equals").fetchone() == ("off",)
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="only xmloption = content"):
            conn.execute("SET xmloption = document")
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="Available values: heap"):
            conn.execute("SET default_table_access_method = columnar")
        assert conn.execute("SHOW default_table_access_method").fetchone() == ("heap",)
        row = conn.execute(
            "SELECT setting, unit, current_setting('work_mem'), "
            "current_setting('no.such', 'true') FROM pg_settings WHERE name = 'work_mem'"
        ).fetchone()
        assert row == ("4096", "kB", "4MB", None)


def test_a_dp_query_stopped_while_it_waits_to_be_classified_is_audited(
    server: RunningServer,
) -> None:
    """alice's long catalog statement holds her translating turn; her DP query on another
    connection, waiting for it, is stopped by its statement_timeout: audited, free."""
    sql = "SELECT COUNT(*) FROM patients WHERE birth_year > 1941"
    with connect(server) as first, connect(server) as second:
        before = spent(second)
        second.execute("SET statement_timeout = '50ms'")
        long = Running(first, LONG_CATALOG)
        time.sleep(0.1)
        with pytest.raises(psycopg.errors.QueryCanceled) as caught:
            second.execute(sql)
        waited = not long.ended.is_set()
        long.join()
        assert long.error is None
        assert waited, "the long statement ended before: the test proves nothing"
        assert str(caught.value) == "canceling statement due to statement timeout"
        second.execute("SET statement_timeout = 0")
        assert records_of(second, sql) == [
            ("error", "canceled due to statement timeout before the charge", "0")
        ]
        assert spent(second) == before


def test_a_dp_query_stopped_at_describe_is_audited_once(server: RunningServer) -> None:
    """Extended protocol (a parameter): Describe plans the query, whose constant waits for
    the only PostgreSQL connection (held by a slow query); the statement timeout stops it
    there. One record; the Execute never comes."""
    sql = "SELECT COUNT(*) FROM patients WHERE birth_year > 1900 + %s"
    with connect(server) as holder, connect(server) as conn:
        before = spent(conn)
        slow = Running(holder, SLOW_DP)
        time.sleep(SETTLE_SECONDS)
        conn.execute("SET statement_timeout = '300ms'")
        planned = Running(conn, sql, [42])
        time.sleep(SETTLE_SECONDS)
        assert not planned.ended.is_set()  # still waiting for the connection
        holder.cancel_safe(timeout=10)
        slow.join()
        planned.join()
        assert isinstance(planned.error, psycopg.errors.QueryCanceled), planned.error
        assert str(planned.error) == "canceling statement due to statement timeout"
        conn.execute("SET statement_timeout = 0")
        rows = conn.execute("SELECT * FROM dpproxy.my_queries LIMIT 5").fetchall()
        mine = [
            (row[4], row[5], str(row[6])) for row in rows if "birth_year > 1900 +" in str(row[3])
        ]
        assert mine == [("error", "canceled due to statement timeout before the charge", "0")]
        # Only the slow query's charge (canceled after it): the stopped one cost nothing.
        assert Decimal(spent(conn)) == Decimal(before) + 1
