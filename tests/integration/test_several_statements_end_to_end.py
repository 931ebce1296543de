"""A simple Query of several statements (``psql -c "SET …; SELECT …"``), as PostgreSQL runs it.

A real `dpproxy serve` (DuckDB; ``visits`` is a view slow enough to cancel, ``patients``
answers at once) with psql, psycopg and libpq's own results (psycopg.pq), and the real
PostgreSQL as the reference for what a client sees: one answer per statement, the first
error ends the Query, the implicit transaction block undoes its settings after an error.
Every DP statement is charged and audited on its own; nothing is refunded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import pq

from tests.integration.server import (
    RunningServer,
    demo_database,
    dpproxy_in_process,
    slow_visits_duckdb,
    start,
    write_config,
)

pytestmark = pytest.mark.integration

PATIENTS = 200
FAST = "SELECT COUNT(*) FROM patients"
SLOW = "SELECT COUNT(*) FROM visits"
#: Setup wait (not a measurement): long enough for the slow query to reach the database.
SETTLE_SECONDS = 0.5


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp("several")
    slow_visits_duckdb(demo_database(directory, PATIENTS))
    running = start(write_config(directory, backend=""))
    yield running
    log = running.stop()
    assert "Traceback" not in log, log


def audit(server: RunningServer, analyst: str = "alice") -> list[dict[str, object]]:
    result = dpproxy_in_process(
        "audit", "list", "--analyst", analyst, "--limit", "1000", "--json",
        "--config", str(server.config),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    return [r for r in records if r["decision"] != "admin"]


def spent(server: RunningServer, analyst: str = "alice") -> str:
    result = dpproxy_in_process("budget", "show", analyst, "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return str(json.loads(result.stdout)[0]["spent"])


# --- what a client sees, compared with PostgreSQL ---


@dataclass(frozen=True)
class Seen:
    """What libpq made of one Query message, and of the session afterwards."""

    results: tuple[tuple[str, ...], ...]  # per statement: status, tag, values or error
    notices: tuple[tuple[str, str, str], ...]  # severity, SQLSTATE, message (in order)
    status: str  # the transaction status of the ReadyForQuery
    # After a ROLLBACK of a block left open: application_name as last reported
    # (ParameterStatus), and as SHOW shows it.
    application_name: str
    shown: str


def seen(dsn: str, sql: str) -> Seen:
    with psycopg.connect(dsn, autocommit=True) as conn:
        pgconn = conn.pgconn
        notices: list[tuple[str, str, str]] = []

        def field(result: pq.abc.PGresult, code: pq.DiagnosticField) -> str:
            return (result.error_field(code) or b"").decode()

        def notice(result: pq.abc.PGresult) -> None:
            notices.append(
                (
                    field(result, pq.DiagnosticField.SEVERITY_NONLOCALIZED),
                    field(result, pq.DiagnosticField.SQLSTATE),
                    field(result, pq.DiagnosticField.MESSAGE_PRIMARY),
                )
            )

        pgconn.notice_handler = notice
        pgconn.send_query(sql.encode())
        results: list[tuple[str, ...]] = []
        while (result := pgconn.get_result()) is not None:
            status = pq.ExecStatus(result.status)
            tag = (result.command_status or b"").decode()
            if status is pq.ExecStatus.FATAL_ERROR:
                error = (
                    field(result, pq.DiagnosticField.SQLSTATE),
                    field(result, pq.DiagnosticField.MESSAGE_PRIMARY),
                )
                results.append((status.name, *error))
            else:
                values = [
                    (result.get_value(row, 0) or b"").decode() for row in range(result.ntuples)
                ]
                results.append((status.name, tag, *values))
        transaction = pq.TransactionStatus(pgconn.transaction_status).name
        if transaction != "IDLE":
            conn.execute("ROLLBACK")
        application_name = (pgconn.parameter_status(b"application_name") or b"").decode()
        row = conn.execute("SHOW application_name").fetchone()
        assert row is not None
        return Seen(tuple(results), tuple(notices), transaction, application_name, str(row[0]))


QUERIES_AS_IN_POSTGRESQL = [
    "SELECT 1; SELECT 2",
    # Empty statements are skipped; a Query of none is answered EmptyQueryResponse.
    "SELECT 1;;SELECT 2;",
    ";",
    "SELECT 1; -- only a comment",
    # A -- comment ends at a carriage return too.
    "-- a comment\rSET application_name = 'cr'; SHOW application_name",
    # Semicolons in strings, names, dollar quotes and comments do not end a statement.
    "SELECT 'a;b'; SELECT E'c\\';d'; SELECT $$e;f$$; SELECT $t$g;$$;h$t$; "
    'SELECT 1 AS "x;y"; SELECT 1 /* ; /* ; */ ; */ ; SELECT 2 -- ;\n',
    # The first error ends the Query.
    "SELECT 1; SHOW nope_parameter; SELECT 2",
    # In the implicit transaction block: an error undoes the Query's settings, unless a
    # COMMIT kept them; SET LOCAL lasts until the Query ends.
    "SET application_name = 'x'; SHOW nope_parameter",
    "SET application_name = 'x'; COMMIT; SET application_name = 'y'; SHOW nope_parameter",
    "SET application_name = 'x'; SET LOCAL application_name = 'z'; SHOW application_name",
    "SET application_name = 'r'; ROLLBACK",
    "SELECT 1; COMMIT",
    "COMMIT; SELECT 1",
    # BEGIN makes it an explicit block, which outlives the Query (and fails with it).
    "SELECT 1; BEGIN; SELECT 2",
    "SET application_name = 'b'; BEGIN; SHOW nope_parameter",
    "BEGIN; SET application_name = 'c'; COMMIT; SHOW nope_parameter",
    "SAVEPOINT a; SELECT 1",
    "SELECT 1; DISCARD ALL",
    "DEALLOCATE ALL; SELECT 1",
    "SELECT 1; DEALLOCATE nope",
    # statement_timeout applies to each statement; the one set before applies.
    "SET statement_timeout = 100; SELECT pg_sleep(1); SELECT 2",
    # Text that cannot be read: refused whole, nothing runs.
    "SET application_name = 'q'; SELECT 'oops",
    "SELECT 1; /* open",
    'SELECT 1; SELECT "x',
    "SELECT 1; SELECT $$x",
    # ... or escapes PostgreSQL's lexer (or parser, for U&) refuses: refused whole too.
    "SET application_name = 'q'; SELECT E'\\uD800x'",
    "SELECT 1; SELECT E'\\xff'",
    "SELECT 1; SELECT E'\\u12'",
    "SELECT 1; SELECT U&'\\0000'",
    "SELECT 1; SELECT U&'x' UESCAPE '+'",
]


@pytest.mark.parametrize("sql", QUERIES_AS_IN_POSTGRESQL)
def test_a_query_of_several_statements_is_answered_as_by_postgresql(
    server: RunningServer, pg_dsn: str, sql: str
) -> None:
    assert seen(server.dsn("alice"), sql) == seen(pg_dsn, sql)


def test_psycopg_reads_each_result_as_from_postgresql(server: RunningServer, pg_dsn: str) -> None:
    """psycopg sends a statement without parameters as a simple Query: the cursor holds
    the first result, nextset() moves to the next."""

    def results(dsn: str) -> tuple[object, ...]:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cur = conn.execute("SELECT 1 AS a; SELECT 'x;y' AS b, 2 AS c")
            first = (cur.statusmessage, [d.name for d in cur.description or ()], cur.fetchall())
            assert cur.nextset()
            second = (cur.statusmessage, [d.name for d in cur.description or ()], cur.fetchall())
            return first, second, cur.nextset()

    assert (
        results(server.dsn("alice"))
        == results(pg_dsn)
        == (
            ("SELECT 1", ["a"], [(1,)]),
            ("SELECT 1", ["b", "c"], [("x;y", 2)]),
            None,
        )
    )


@pytest.mark.parametrize("prepare", [None, True])
def test_the_extended_protocol_refuses_several_statements_as_postgresql(
    server: RunningServer, pg_dsn: str, prepare: bool | None
) -> None:
    """A Parse of several statements (psycopg with parameters, or prepared) is an error."""
    for dsn in (server.dsn("alice"), pg_dsn):
        with psycopg.connect(dsn, autocommit=True) as conn:
            before = None if dsn == pg_dsn else audit(server)
            with pytest.raises(psycopg.errors.SyntaxError) as refused:
                conn.execute(f"{FAST}; SELECT %s", [1], prepare=prepare)
            assert refused.value.diag.message_primary == (
                "cannot insert multiple commands into a prepared statement"
            )
            assert conn.execute("SELECT 3").fetchone() == (3,)
            if before is not None:
                assert audit(server) == before  # nothing ran


# --- DP statements: each charged and audited as if it came alone ---


def test_psql_set_then_select_spends_the_epsilon_set(server: RunningServer) -> None:
    before = len(audit(server))
    result = server.psql("alice", f"SET dpproxy.epsilon = 0.5; {FAST}; SHOW dpproxy.epsilon")
    assert result.returncode == 0, result.stderr
    assert "NOTICE:  dpproxy: this answer cost ε=0.5;" in result.stderr
    assert "count" in result.stdout and " 0.5\n" in result.stdout
    records = audit(server)[before:]
    assert [(r["sql"], r["decision"], r["epsilon"]) for r in records] == [(FAST, "accepted", "0.5")]


def test_a_set_after_a_comment_ended_by_a_carriage_return_is_not_lost(
    server: RunningServer,
) -> None:
    """PostgreSQL ends a -- comment at \\r as at \\n: the SET runs and the SELECT is charged
    the ε it set (the SET was taken for part of the comment, and the default ε charged)."""
    before = len(audit(server))
    result = server.psql("alice", f"-- spend little\rSET dpproxy.epsilon = 0.1; {FAST}")
    assert result.returncode == 0, result.stderr
    assert "NOTICE:  dpproxy: this answer cost ε=0.1;" in result.stderr
    records = audit(server)[before:]
    assert [(r["sql"], r["decision"], r["epsilon"]) for r in records] == [(FAST, "accepted", "0.1")]


def test_two_dp_statements_are_charged_and_audited_twice(server: RunningServer) -> None:
    before, spent_before = len(audit(server)), float(spent(server))
    notices: list[str] = []
    second = f"{FAST} WHERE birth_year >= 1950 -- the second; of two"
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        cur = conn.execute(f"SET dpproxy.epsilon = 0.25; {FAST};\n{second}")
        assert cur.statusmessage == "SET"
        assert cur.nextset() and isinstance(cur.fetchone()[0], int)  # type: ignore[index]
        assert cur.nextset() and isinstance(cur.fetchone()[0], int)  # type: ignore[index]
        assert not cur.nextset()
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("0.25",)
    assert [n.split(";")[0] for n in notices] == ["dpproxy: this answer cost ε=0.25"] * 2
    records = audit(server)[before:]
    assert [(r["sql"], r["decision"], r["epsilon"]) for r in records] == [
        (FAST, "accepted", "0.25"),
        (second, "accepted", "0.25"),
    ]
    assert float(spent(server)) == spent_before + 0.5


def test_an_error_ends_the_query_and_earlier_answers_stay_charged(
    server: RunningServer,
) -> None:
    before, spent_before = len(audit(server)), float(spent(server))
    notices: list[str] = []
    sql = f"SET dpproxy.epsilon = 0.25; {FAST}; SELECT * FROM patients; {FAST}"
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            conn.execute(sql)
        assert "individual rows" in str(refused.value)
        # As PostgreSQL: the failed Query's implicit block undid its SET.
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
        assert conn.info.transaction_status is pq.TransactionStatus.IDLE
    assert [n.split(";")[0] for n in notices] == ["dpproxy: this answer cost ε=0.25"]
    records = audit(server)[before:]
    assert [(r["sql"], r["decision"], r["epsilon"]) for r in records] == [
        (FAST, "accepted", "0.25"),
        ("SELECT * FROM patients", "rejected", "0"),
    ]
    assert float(spent(server)) == spent_before + 0.25


def test_set_local_applies_to_the_rest_of_the_query(server: RunningServer) -> None:
    before = len(audit(server))
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute(f"SET LOCAL dpproxy.epsilon = 0.125; {FAST}")
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
    assert [r["epsilon"] for r in audit(server)[before:]] == ["0.125"]


def test_text_that_cannot_be_split_runs_nothing(server: RunningServer) -> None:
    before, spent_before = len(audit(server)), spent(server)
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxError) as refused:
            conn.execute(f"SET dpproxy.epsilon = 0.5; {FAST}; {FAST} WHERE sex = 'f")
        assert refused.value.diag.message_primary == ('unterminated quoted string at or near "\'f"')
        assert refused.value.diag.message_hint == (
            "dpproxy could not tell where the statements of this query end, so it ran none"
        )
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
    assert len(audit(server)) == before and spent(server) == spent_before


def test_an_escape_postgresql_refuses_runs_nothing(server: RunningServer) -> None:
    """PostgreSQL's lexer refuses the text: dpproxy ran and charged the first statement."""
    before, spent_before = len(audit(server)), spent(server)
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxError) as refused:
            conn.execute(f"SET dpproxy.epsilon = 0.5; {FAST}; SELECT E'\\uD800x'")
        assert refused.value.diag.message_primary == (
            'invalid Unicode surrogate pair at or near "x"'
        )
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
    assert len(audit(server)) == before and spent(server) == spent_before


def test_more_than_a_hundred_statements_run_nothing(server: RunningServer) -> None:
    before, spent_before = len(audit(server)), spent(server)
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        cur = conn.execute("SELECT 1;" * 100)
        count = 1
        while cur.nextset():
            count += 1
        assert count == 100
        with pytest.raises(psycopg.errors.ProgramLimitExceeded) as refused:
            conn.execute(f"{FAST};" * 101)
        assert refused.value.diag.message_primary == (
            "this query holds 101 statements; dpproxy runs at most 100 in one query, "
            "and ran none of these"
        )
    assert len(audit(server)) == before and spent(server) == spent_before


# --- cancel requests and statement_timeout: per statement, and the rest is not run ---


def test_a_cancel_stops_the_statement_and_the_rest(server: RunningServer) -> None:
    before = len(audit(server))
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        timer = threading.Timer(SETTLE_SECONDS, conn.cancel_safe)
        timer.start()
        started = time.monotonic()
        try:
            with pytest.raises(psycopg.errors.QueryCanceled) as stopped:
                conn.execute(f"SET dpproxy.epsilon = 0.25; {FAST}; {SLOW}; {FAST}")
        finally:
            timer.cancel()
        assert time.monotonic() - started < 30
        assert "canceling statement due to user request" in str(stopped.value)
        assert conn.execute("SHOW dpproxy.epsilon").fetchone() == ("1",)
    records = audit(server)[before:]
    assert [(r["sql"], r["decision"], r["epsilon"]) for r in records] == [
        (FAST, "accepted", "0.25"),
        (SLOW, "failed", "0.25"),  # stopped in the database: the charge stands
    ]


def test_statement_timeout_stops_one_statement_and_the_rest(server: RunningServer) -> None:
    before = len(audit(server))
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        with pytest.raises(psycopg.errors.QueryCanceled) as stopped:
            conn.execute(f"SET statement_timeout = 300; {FAST}; {SLOW}; {FAST}")
        assert "canceling statement due to statement timeout" in str(stopped.value)
        # The first FAST ran within its own 300 ms; the SET went with the failed Query.
        assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
    records = audit(server)[before:]
    assert [(r["sql"], r["decision"]) for r in records] == [
        (FAST, "accepted"),
        (SLOW, "failed"),
    ]
