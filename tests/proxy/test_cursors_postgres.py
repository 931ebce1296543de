"""Cursors compared with PostgreSQL 15: the same DECLARE / FETCH / MOVE / CLOSE statements
run on a real PostgreSQL over a VALUES list and through dpproxy's session, whose pipeline
answers the DECLARE's query with the rows PostgreSQL gives for it. Every statement's command
tag, rows (as text), SQLSTATE and message, and the transaction status after each query,
must be the same; the query is answered once per DECLARE, never for a FETCH or MOVE."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from typing import Any, cast

import psycopg
import pytest
from psycopg import pq

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.cursor_statements import read_cursor_statement
from proxy.cursors import Cursors
from proxy.seam import ColumnDescription, QueryError, StatementResult, TransactionStatus
from proxy.session import AnalystSession
from proxy.several_statements import Statement, run_statements, split_statements

pytestmark = pytest.mark.postgres

#: What one statement gave: (command tag, rows or None) or (SQLSTATE, message).
Outcome = tuple[str, object]

FIVE = "SELECT * FROM (VALUES (1), (2), (3), (4), (5)) v(x)"
STATUS = {
    pq.TransactionStatus.IDLE: TransactionStatus.IDLE,
    pq.TransactionStatus.INTRANS: TransactionStatus.IN_TRANSACTION,
    pq.TransactionStatus.INERROR: TransactionStatus.FAILED,
}


def values(rows: int) -> str:
    if rows == 0:
        return "SELECT 1 AS x WHERE false"
    return "SELECT * FROM (VALUES " + ", ".join(f"({i})" for i in range(1, rows + 1)) + ") v(x)"


def results(conn: psycopg.Connection[Any], text: str) -> list[Outcome]:
    """Each statement's outcome in a simple Query of ``text`` on PostgreSQL."""
    pgconn = conn.pgconn
    pgconn.send_query(text.encode())
    out: list[Outcome] = []
    while (result := pgconn.get_result()) is not None:
        if result.status == pq.ExecStatus.FATAL_ERROR:
            code = result.error_field(pq.DiagnosticField.SQLSTATE) or b""
            message = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b""
            out.append((code.decode(), message.decode()))
            continue
        tag = (result.command_status or b"").decode()
        if result.status != pq.ExecStatus.TUPLES_OK:
            out.append((tag, None))
            continue
        rows = [
            tuple(_text(result.get_value(r, c)) for c in range(result.nfields))
            for r in range(result.ntuples)
        ]
        out.append((tag, rows))
    return out


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


class PostgresAnswers:
    """The pipeline of these sessions: a query's answer is PostgreSQL's for it, in text."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn
        self.asked: list[str] = []

    async def answer(self, asker: object, sql: str, *args: object, **kwargs: object) -> Any:
        self.asked.append(sql)
        pgconn = self.conn.pgconn
        result = pgconn.exec_(sql.encode())
        if result.status == pq.ExecStatus.FATAL_ERROR:
            code = result.error_field(pq.DiagnosticField.SQLSTATE) or b""
            message = result.error_field(pq.DiagnosticField.MESSAGE_PRIMARY) or b""
            raise QueryError(code.decode(), message.decode())
        columns = tuple(
            ColumnDescription((result.fname(c) or b"").decode(), result.ftype(c))
            for c in range(result.nfields)
        )
        rows = tuple(
            tuple(_text(result.get_value(r, c)) for c in range(result.nfields))
            for r in range(result.ntuples)
        )
        return StatementResult(tag=f"SELECT {len(rows)}", columns=columns, rows=rows)


async def dpproxy_results(session: AnalystSession, text: str) -> list[Outcome]:
    """As proxy.server answers a simple Query of ``text``."""
    out: list[Outcome] = []

    async def run(statement: Statement) -> bool:
        try:
            result = await session.execute(statement.text)
        except QueryError as error:
            session.abort_transaction()
            out.append((error.sqlstate, error.message))
            return False
        rows = None if result.columns is None else list(result.rows)
        out.append((result.tag, rows))
        return True

    await run_statements(session, split_statements(text), run)
    return out


@pytest.fixture
def connections(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[Any], psycopg.Connection[Any]]]:
    """The session compared, and the one that answers dpproxy's queries."""
    with (
        psycopg.connect(pg_dsn, autocommit=True) as compared,
        psycopg.connect(pg_dsn, autocommit=True) as answering,
    ):
        for conn in (compared, answering):  # a GROUP BY's rows in order, its plan an Agg
            conn.execute("SET enable_hashagg = off")
        yield compared, answering


def compare(
    connections: tuple[psycopg.Connection[Any], psycopg.Connection[Any]], *queries: str
) -> PostgresAnswers:
    """Run ``queries`` (simple Query texts) on PostgreSQL and through a session; each gives
    the same outcomes and leaves the same transaction status."""
    compared, answering = connections
    pipeline = PostgresAnswers(answering)
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    session = AnalystSession(cast(Any, pipeline), Asker("alice", budget, "127.0.0.1"), "test")

    async def go() -> None:
        for text in queries:
            expected = results(compared, text)
            got = await dpproxy_results(session, text)
            assert got == expected, text
            status = STATUS[compared.info.transaction_status]
            assert session.transaction_status is status, text

    try:
        asyncio.run(go())
    finally:
        if compared.info.transaction_status != pq.TransactionStatus.IDLE:
            compared.execute("ROLLBACK")
        compared.execute("CLOSE ALL")
    return pipeline


# --- every FETCH and MOVE form, from several positions ---------------------------------

COUNTS = (-6, -5, -2, -1, 0, 1, 2, 5, 6)
FORMS = (
    "",
    "NEXT",
    "PRIOR",
    "FIRST",
    "LAST",
    "ALL",
    "FORWARD",
    "FORWARD ALL",
    "BACKWARD",
    "BACKWARD ALL",
    *(f"ABSOLUTE {n}" for n in COUNTS),
    *(f"RELATIVE {n}" for n in COUNTS),
    *(f"{n}" for n in COUNTS),
    *(f"FORWARD {n}" for n in COUNTS),
    *(f"BACKWARD {n}" for n in COUNTS),
)
#: Moves that put the cursor at the start, on a row, on the last row, past the end, and
#: back from the end.
PREFIXES = ((), ("FETCH 2 c",), ("FETCH 5 c",), ("FETCH ALL c",), ("MOVE ALL c", "MOVE PRIOR c"))


def postgres_sequence(
    conn: psycopg.Connection[Any], declare: str, moves: list[str]
) -> list[Outcome]:
    """``moves`` on a new cursor on PostgreSQL, up to the first error (which aborts)."""
    conn.execute("BEGIN")
    try:
        conn.execute(declare)
        out: list[Outcome] = []
        for move in moves:
            outcome = results(conn, move)[0]
            out.append(outcome)
            if outcome[1] is not None and not isinstance(outcome[1], list):
                break
        return out
    finally:
        conn.execute("ROLLBACK")


def dpproxy_sequence(declare: str, rows: int, moves: list[str]) -> list[Outcome]:
    """``moves`` on a cursor of dpproxy's (proxy.cursors) over the same rows."""
    cursors = Cursors()
    answer = StatementResult(
        tag=f"SELECT {rows}",
        columns=(ColumnDescription("x", 23),),
        rows=tuple((str(i),) for i in range(1, rows + 1)),
    )
    cursors.open(cast(Any, read_cursor_statement(declare)), answer, depth=0)
    out: list[Outcome] = []
    for move in moves:
        try:
            result = cursors.fetch(cast(Any, read_cursor_statement(move)))
        except QueryError as error:
            out.append((error.sqlstate, error.message))
            break
        out.append((result.tag, None if result.columns is None else list(result.rows)))
    return out


@pytest.mark.parametrize("rows", [0, 1, 5])
@pytest.mark.parametrize("scroll", ["SCROLL", "NO SCROLL"])
def test_every_form_from_every_position(pg_dsn: str, rows: int, scroll: str) -> None:
    """Each FETCH and MOVE form after each prefix, then FETCH NEXT to show where the
    cursor is: tags, rows and errors (55000 for a move backward without SCROLL) as
    PostgreSQL's, including after an error (the cursor cannot be run)."""
    declare = f"DECLARE c {scroll} CURSOR FOR {values(rows)}"
    compared = 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for prefix in PREFIXES:
            for verb in ("FETCH", "MOVE"):
                for form in FORMS:
                    for where in ("FROM ", "IN ", "") if form in ("", "2") else ("FROM ",):
                        moves = [*prefix, f"{verb} {form} {where}c", "FETCH NEXT FROM c"]
                        expected = postgres_sequence(conn, declare, moves)
                        assert dpproxy_sequence(declare, rows, moves) == expected, moves
                        compared += 1
    assert compared > 500


def test_random_sequences(pg_dsn: str) -> None:
    """Longer random sequences (seeded), each statement after a SAVEPOINT so that the
    cursor goes on after an error as in PostgreSQL (failed: it cannot be run again)."""
    chooser = random.Random(20240601)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for _ in range(300):
            rows = chooser.choice([0, 1, 2, 5, 5])
            scroll = chooser.choice(["SCROLL", "NO SCROLL"])
            moves = [
                f"{chooser.choice(['FETCH', 'FETCH', 'MOVE'])} {chooser.choice(FORMS)} FROM c"
                for _ in range(chooser.randint(1, 8))
            ]
            declare = f"DECLARE c {scroll} CURSOR FOR {values(rows)}"
            conn.execute("BEGIN")
            conn.execute(declare)
            expected: list[Outcome] = []
            for move in moves:
                conn.execute("SAVEPOINT s")
                outcome = results(conn, move)[0]
                if outcome[1] is not None and not isinstance(outcome[1], list):
                    conn.execute("ROLLBACK TO s")
                expected.append(outcome)
            conn.execute("ROLLBACK")
            cursors = Cursors()
            answer = StatementResult(
                tag="SELECT",
                columns=(ColumnDescription("x", 23),),
                rows=tuple((str(i),) for i in range(1, rows + 1)),
            )
            cursors.open(cast(Any, read_cursor_statement(declare)), answer, depth=0)
            got: list[Outcome] = []
            for move in moves:
                try:
                    result = cursors.fetch(cast(Any, read_cursor_statement(move)))
                    got.append((result.tag, None if result.columns is None else list(result.rows)))
                except QueryError as error:
                    got.append((error.sqlstate, error.message))
            assert got == expected, (declare, moves)


# --- statements in sessions -------------------------------------------------------------


def test_psql_sequence(connections: Any) -> None:
    pipeline = compare(
        connections,
        "BEGIN",
        f"DECLARE c SCROLL CURSOR FOR {FIVE}",
        "FETCH 2 FROM c",
        "FETCH PRIOR c",
        "MOVE LAST IN c",
        "FETCH BACKWARD 2 c",
        "FETCH FIRST c",
        "FETCH ABSOLUTE -1 c",
        "MOVE ABSOLUTE 0 c",
        "FETCH ALL c",
        "CLOSE c",
        "COMMIT",
    )
    assert pipeline.asked == [FIVE]  # once, for the DECLARE


def test_without_hold_needs_a_block_and_ends_with_it(connections: Any) -> None:
    pipeline = compare(
        connections,
        f"DECLARE c CURSOR FOR {FIVE}",
        f"DECLARE c INSENSITIVE SCROLL CURSOR WITHOUT HOLD FOR {FIVE}",
        "FETCH c",
        "BEGIN",
        f"DECLARE c NO SCROLL CURSOR FOR {FIVE}",
        "FETCH 2 c",
        "COMMIT",
        "FETCH c",
        "BEGIN",
        f"DECLARE c NO SCROLL CURSOR FOR {FIVE}",
        "ROLLBACK",
        "CLOSE c",
    )
    assert len(pipeline.asked) == 2  # refused before its query was answered: not asked


def test_with_hold(connections: Any) -> None:
    compare(
        connections,
        f"DECLARE h SCROLL CURSOR WITH HOLD FOR {FIVE}",
        "FETCH 1 h",
        "BEGIN",
        "FETCH 2 h",
        "ROLLBACK",  # moves are not undone
        "FETCH 1 h",
        "BEGIN",
        "CLOSE h",
        "ROLLBACK",  # nor is a CLOSE
        "FETCH 1 h",
        "BEGIN",
        f"DECLARE h NO SCROLL CURSOR WITH HOLD FOR {FIVE}",
        "ROLLBACK",  # a held cursor's block rolled back: gone
        "FETCH h",
        "BEGIN",
        f"DECLARE h NO SCROLL CURSOR WITH HOLD FOR {FIVE}",
        "FETCH h",
        "COMMIT",
        "FETCH h",
        "FETCH PRIOR h",  # fails, outside a block: the cursor stays, failed
        "FETCH h",
        "CLOSE h",
        "CLOSE h",
    )


def test_savepoints(connections: Any) -> None:
    compare(
        connections,
        "BEGIN",
        "SAVEPOINT a",
        f"DECLARE c SCROLL CURSOR FOR {FIVE}",
        "RELEASE a",  # c now belongs to the block
        "FETCH c",
        "SAVEPOINT b",
        "ROLLBACK TO b",
        "FETCH c",
        "SAVEPOINT a",
        f"DECLARE d SCROLL CURSOR FOR {FIVE}",
        "SAVEPOINT b",
        f"DECLARE e SCROLL CURSOR WITH HOLD FOR {FIVE}",
        "RELEASE b",
        "FETCH e",
        "ROLLBACK TO a",  # d and e were declared after a
        "FETCH d",
        "ROLLBACK TO a",
        "FETCH e",
        "ROLLBACK TO a",
        "FETCH c",
        "SAVEPOINT s",
        "CLOSE c",
        "ROLLBACK TO s",
        "FETCH c",
        "ROLLBACK",
        "BEGIN",
        f"DECLARE c NO SCROLL CURSOR FOR {FIVE}",
        "FETCH 2 c",
        "SAVEPOINT s",
        "FETCH BACKWARD 1 c",
        "ROLLBACK TO s",
        "FETCH c",  # failed in the savepoint rolled back: it cannot be run
        "ROLLBACK TO s",
        "CLOSE c",
        "COMMIT",
    )


def test_several_statements_in_one_query(connections: Any) -> None:
    """A Query of several statements is an implicit transaction block: a cursor without
    HOLD lives until its end; a WITH HOLD one is kept if the Query succeeds."""
    compare(
        connections,
        f"DECLARE i NO SCROLL CURSOR FOR {FIVE}; FETCH 2 i",
        "FETCH i",
        f"DECLARE i NO SCROLL CURSOR WITH HOLD FOR {FIVE}; FETCH 2 i; SELECT 1/0",
        "FETCH i",
        f"DECLARE i NO SCROLL CURSOR WITH HOLD FOR {FIVE}; FETCH 2 i",
        "FETCH i; CLOSE i",
        f"BEGIN; DECLARE c NO SCROLL CURSOR FOR {FIVE}; FETCH 2 FROM c",
        "FETCH c; CLOSE c; COMMIT",
    )


def test_failed_blocks_and_transaction_modes(connections: Any) -> None:
    compare(
        connections,
        "BEGIN",
        f"DECLARE c NO SCROLL CURSOR FOR {FIVE}",
        "SELECT 1/0",
        "FETCH c",
        "CLOSE c",
        "ROLLBACK",
        "BEGIN",
        "DECLARE c NO SCROLL CURSOR FOR SELECT 1/0",  # the query fails: no cursor
        "ROLLBACK",
        "BEGIN",
        f"DECLARE c NO SCROLL CURSOR FOR {FIVE}",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",  # DECLARE ran a query
        "ROLLBACK",
        "BEGIN",
        "CLOSE ALL",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",  # CLOSE takes a snapshot too
        "ROLLBACK",
        f"DECLARE h SCROLL CURSOR WITH HOLD FOR {FIVE}",
        "BEGIN",
        "FETCH h",
        "MOVE h",
        "SET TRANSACTION ISOLATION LEVEL SERIALIZABLE",  # FETCH and MOVE take none
        "COMMIT",
        "BEGIN",
        "DISCARD ALL",
        "ROLLBACK",
        "DISCARD ALL",
        "FETCH h",
    )


def test_names_and_duplicates(connections: Any) -> None:
    compare(
        connections,
        "BEGIN",
        f'DECLARE "C" NO SCROLL CURSOR FOR {FIVE}',
        "FETCH 1 C",
        "ROLLBACK",
        "BEGIN",
        f'DECLARE "C" NO SCROLL CURSOR FOR {FIVE}',
        'FETCH 1 "C"',
        f"DECLARE next NO SCROLL CURSOR FOR {FIVE}",
        "FETCH next",
        "FETCH NEXT next",
        "FETCH next FROM next",
        "FETCH forward IN next",
        f'DECLARE "all" NO SCROLL CURSOR FOR {FIVE}',
        'FETCH "all"',
        'CLOSE "all"',
        "CLOSE ALL",
        f"DECLARE c NO SCROLL CURSOR FOR {FIVE}",
        f"DECLARE c NO SCROLL CURSOR FOR {FIVE}",
        "ROLLBACK",
        "FETCH forward",
        "CLOSE nope",
        "MOVE nope",
        "CLOSE ALL",
    )


def test_a_cursor_on_an_aggregate_is_no_scroll(connections: Any) -> None:
    """Neither SCROLL nor NO SCROLL: PostgreSQL decides by the plan, and one that ends in
    an aggregate (a DP query's) cannot move backward; neither can dpproxy's."""
    grouped = f"SELECT x, count(*) FROM ({FIVE}) v GROUP BY x"
    compare(
        connections,
        "BEGIN",
        f"DECLARE c CURSOR FOR {grouped}",
        "FETCH 2 c",
        "FETCH ABSOLUTE 4 c",
        "FETCH PRIOR c",
        "ROLLBACK",
    )


@pytest.mark.parametrize(
    "text",
    [
        "fetch",
        "fetch 1",
        "move",
        "close",
        "declare c cursor",
        "declare c cursor with hold for",
        "declare c cursor with hold for show x",
        "declare c cursor with hold for insert into t values (1)",
        "declare c sensitive cursor with hold for select 1",
        "declare c cursor with hold without hold for select 1",
        "declare c scroll no scroll cursor with hold for select 1",
        "declare c asensitive insensitive cursor with hold for select 1",
        "declare select cursor with hold for select 1",
        "declare c for cursor select 1",
        "fetch 1.5 c",
        "fetch 1e2 c",
        "fetch 2147483648 c",
        "fetch -2147483648 c",
        "fetch c c",
        "fetch all all",
        "fetch relative h",
        "fetch absolute h",
        "fetch absolute from h",
        "close all h",
        "close h h",
        "fetch from",
        "fetch forward from",
        "fetch next from",
        # Forms that read: the cursor does not exist.
        "fetch +2 c",
        "fetch forward - 1 h",
        "fetch backward -1 h",
        "fetch absolute +1 h",
        "fetch 2147483647 h",
        "move backward all from h",
        "fetch 007 h",
        "fetch forward",
        "fetch prior",
        'close "all"',
        "fetch /* a comment */ next -- and another\n from h",
        'fetch next from U&"\\0068"',
    ],
)
def test_syntax_as_postgres(connections: Any, text: str) -> None:
    compare(connections, text)
