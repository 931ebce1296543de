"""pg_cursors through a real `dpproxy serve` (on DuckDB and on PostgreSQL) with psycopg,
SQLAlchemy and pandas, compared with what the real PostgreSQL 15 answers.

Before, pg_cursors was refused (0A000): psycopg's close() of a named cursor it never
executed, in a transaction, failed and aborted the transaction, and pandas' read_sql of a
text() query on a stream_results connection (whose first, failed, named cursor psycopg
closes so) then failed with InFailedSqlTransaction. Now pg_cursors lists the session's
own cursors, free, as PostgreSQL lists them."""

from __future__ import annotations

import json
from datetime import datetime

import pandas
import psycopg
import pytest
import sqlalchemy

from tests.integration.server import PASSWORDS, Connection, RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 60
DIRECTORY_PREFIX = "pg-cursors-"
BY_DEPARTMENT = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department ORDER BY 1"
DEPARTMENTS = 8  # the demo's public domain
LISTED = (
    "SELECT name, statement, is_holdable, is_binary, is_scrollable FROM pg_cursors ORDER BY name"
)
INTRANS = psycopg.pq.TransactionStatus.INTRANS


def spent(server: RunningServer) -> float:
    result = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)[0]["spent"])


def listed(conn: Connection) -> list[tuple[object, ...]]:
    return conn.execute(LISTED).fetchall()


def test_psycopg_closes_named_cursors_it_never_executed(server: RunningServer) -> None:
    """psycopg asks pg_cursors whether the cursor exists (in a transaction; and outside
    one for a withhold=True cursor); the transaction goes on."""
    before = spent(server)
    with psycopg.connect(server.dsn("alice")) as conn:
        conn.execute("SELECT 1")
        assert conn.info.transaction_status is INTRANS
        conn.cursor(name="never").close()  # SELECT 1 FROM pg_catalog.pg_cursors WHERE ...
        assert conn.info.transaction_status is INTRANS
        rows = conn.execute(BY_DEPARTMENT).fetchall()  # not InFailedSqlTransaction
        assert len(rows) == DEPARTMENTS
        conn.commit()
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.cursor(name="never", withhold=True).close()
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert spent(server) == pytest.approx(before + 1.0)  # the query alone: pg_cursors is free


def test_named_cursor_executed_fetched_and_closed(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice")) as conn:
        with conn.cursor(name="streamed") as cur:
            cur.execute(BY_DEPARTMENT)
            assert len(cur.fetchmany(3)) == 3
            shown = listed(conn)
            assert shown == [
                ("streamed", f'DECLARE "streamed" CURSOR FOR {BY_DEPARTMENT}', False, False, False)
            ]
            [(created,)] = conn.execute("SELECT creation_time FROM pg_cursors").fetchall()
            assert isinstance(created, datetime) and created.tzinfo is not None
            assert len(cur.fetchall()) == DEPARTMENTS - 3
        assert listed(conn) == []  # closed (CLOSE "streamed")
        with conn.cursor(name="held", withhold=True, scrollable=True) as cur:
            cur.execute(BY_DEPARTMENT)
            conn.commit()
            assert [row[0] for row in listed(conn)] == ["held"]  # outlives the COMMIT
            conn.commit()
            assert len(cur.fetchall()) == DEPARTMENTS
        assert listed(conn) == []
        conn.commit()


#: Run on dpproxy and on PostgreSQL alike: (statement, the names pg_cursors then lists,
#: None after a statement that fails).
SCRIPT: tuple[tuple[str, list[str] | None], ...] = (
    ("BEGIN", []),
    ("DECLARE a CURSOR FOR SELECT count(*) FROM pg_catalog.pg_class", ["a"]),
    ('DECLARE "Held" SCROLL CURSOR WITH HOLD FOR SELECT relname FROM pg_class', ["Held", "a"]),
    ("DECLARE n NO SCROLL CURSOR FOR SELECT 1", ["Held", "a", "n"]),
    ("SAVEPOINT s", ["Held", "a", "n"]),
    ("DECLARE b CURSOR WITH HOLD FOR SELECT 2", ["Held", "a", "b", "n"]),
    ("SELECT 1/0", None),
    ("ROLLBACK TO s", ["Held", "a", "n"]),
    ("CLOSE n", ["Held", "a"]),
    ("COMMIT", ["Held"]),
    ("BEGIN", ["Held"]),
    ("DECLARE x CURSOR WITH HOLD FOR SELECT 3", ["Held", "x"]),
    ("SELECT 1/0", None),
    ("ROLLBACK", ["Held"]),
    ("DECLARE y SCROLL CURSOR WITH HOLD FOR SELECT 4", ["Held", "y"]),
    ("CLOSE ALL", []),
)


def _run_script(conn: Connection) -> list[list[tuple[object, ...]]]:
    """pg_cursors' rows after each statement of SCRIPT that succeeds."""
    shown = []
    for statement, names in SCRIPT:
        if names is None:
            with pytest.raises(psycopg.errors.DivisionByZero):
                conn.execute(statement)
            continue
        conn.execute(statement)
        rows = listed(conn)
        assert [row[0] for row in rows] == names, statement
        shown.append(rows)
    return shown


def test_pg_cursors_as_postgres_shows_it(
    server: RunningServer, proxy: Connection, postgres: Connection
) -> None:
    """The same DECLAREs (sent alone, without parameters) through dpproxy and to
    PostgreSQL: the same columns, types and rows (but creation_time)."""
    for conn in (proxy, postgres):
        # Not prepared: PostgreSQL lists the unnamed portal running a prepared statement
        # (as psycopg prepares a query from its fifth run) in pg_cursors; dpproxy lists
        # only DECLAREd cursors.
        conn.prepare_threshold = None
    assert _run_script(proxy) == _run_script(postgres)
    for conn in (proxy, postgres):
        conn.execute("BEGIN")
        conn.execute("DECLARE c CURSOR FOR SELECT 1")
    query = "SELECT * FROM pg_cursors"
    described = [
        [(c.name, c.type_code) for c in conn.execute(query).description or ()]
        for conn in (proxy, postgres)
    ]
    assert (
        described[0]
        == described[1]
        == [
            ("name", 25),
            ("statement", 25),
            ("is_holdable", 16),
            ("is_binary", 16),
            ("is_scrollable", 16),
            ("creation_time", 1184),
        ]
    )
    rows = [conn.execute(query).fetchall() for conn in (proxy, postgres)]
    assert [row[:5] for row in rows[0]] == [row[:5] for row in rows[1]]
    for conn in (proxy, postgres):
        conn.execute("ROLLBACK")


def test_pandas_reads_a_text_query_with_stream_results(server: RunningServer) -> None:
    """pandas.read_sql(text(q), conn, chunksize) on a stream_results connection: a named
    cursor for the table lookup that fails, closed by asking pg_cursors, then the query's
    own named cursor; twice on the same connection."""
    url = f"postgresql+psycopg://alice:{PASSWORDS['alice']}@127.0.0.1:{server.port}/demo"
    engine = sqlalchemy.create_engine(url)
    before = spent(server)
    try:
        with engine.connect().execution_options(stream_results=True) as conn:
            for _ in range(2):
                chunks = list(pandas.read_sql(sqlalchemy.text(BY_DEPARTMENT), conn, chunksize=3))
                assert [len(c) for c in chunks] == [3, 3, 2]
                departments = list(pandas.concat(chunks)["department"])
                assert departments == sorted(departments)
    finally:
        engine.dispose()
    assert spent(server) == pytest.approx(before + 2.0)  # each query once; nothing else
