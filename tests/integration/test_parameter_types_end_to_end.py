"""Undeclared parameters typed by their context through a real `dpproxy serve` on both
engines: asyncpg (Parse/Describe before Bind, values encoded in binary by the
ParameterDescription) and psycopg's prepared statements get answers where dpproxy used to
describe every parameter as text and check the statement with NULL in its place; the
types are PostgreSQL's own for the same statements over the demo's tables."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Sequence

import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, load_postgres
from tests.integration.server import RunningServer

asyncpg = pytest.importorskip("asyncpg")

pytestmark = pytest.mark.integration

PATIENTS = 300
DIRECTORY_PREFIX = "parameter-types-"

#: Statements, the values asyncpg binds, and the parameter types PostgreSQL gives them.
STATEMENTS: list[tuple[str, tuple[object, ...], list[str]]] = [
    ("SELECT COUNT(*) FROM visits WHERE visit_date >= $1", (datetime.date(2024, 1, 1),),
     ["date"]),
    ("SELECT COUNT(*) FROM visits WHERE cost BETWEEN $1 AND $2", (10.0, 5000.5),
     ["float8", "float8"]),
    ("SELECT COUNT(*) FROM visits WHERE length_of_stay > $1", (2,), ["int4"]),
    ("SELECT COUNT(*) FROM visits WHERE department = $1", ("Cardiology",), ["text"]),
    ("SELECT COUNT(*) FROM visits WHERE diagnosis LIKE $1", ("I%",), ["text"]),
    ("SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY 2 DESC LIMIT $1",
     (3,), ["int8"]),
    ("SELECT percentile_cont($1) WITHIN GROUP (ORDER BY cost) FROM visits", (0.25,),
     ["float8"]),
    ("SELECT COUNT(*) FROM patients WHERE birth_year BETWEEN $1 AND $2 AND sex = $3",
     (1950, 1980, "F"), ["int4", "int4", "text"]),
    ("SELECT COUNT(*) FROM visits WHERE EXTRACT(YEAR FROM visit_date) = $1",
     (2024,), ["numeric"]),
]  # fmt: skip


async def described(dsn: str, statements: Sequence[str], **settings: str) -> list[list[str]]:
    """The parameter types of each statement, as asyncpg reads its ParameterDescription."""
    conn = await asyncpg.connect(dsn, server_settings=settings or None)
    try:
        return [[t.name for t in (await conn.prepare(s)).get_parameters()] for s in statements]
    finally:
        await conn.close()


def spent(server: RunningServer) -> str:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        row = conn.execute("SELECT * FROM dpproxy.my_budget").fetchone()
    assert row is not None
    return str(row[2])  # epsilon_spent


def decisions(server: RunningServer, sql: str) -> list[tuple[str, str]]:
    """(decision, ε) of alice's audit records of ``sql`` as bound."""
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        rows = conn.execute("SELECT * FROM dpproxy.my_queries").fetchall()
    return [(str(row[4]), str(row[6])) for row in rows if row[3] == sql]  # decision, ε


def test_asyncpg_binds_dates_floats_ints_and_patterns(server: RunningServer) -> None:
    async def ask() -> tuple[list[list[str]], list[object]]:
        conn = await asyncpg.connect(server.dsn("alice"))
        try:
            await conn.execute("SET dpproxy.epsilon = 0.05")
            types, answers = [], []
            for sql, values, _ in STATEMENTS:
                statement = await conn.prepare(sql)
                types.append([t.name for t in statement.get_parameters()])
                answers.append(await conn.fetch(sql, *values))  # was: expected str, got date
            return types, answers
        finally:
            await conn.close()

    types, answers = asyncio.run(ask())
    assert types == [expected for _, _, expected in STATEMENTS]
    assert all(answers), answers
    assert len(answers[5]) <= 3  # LIMIT $1
    audited = {s for s, _ in _records(server)}
    assert "SELECT COUNT(*) FROM visits WHERE visit_date >= CAST('2024-01-01' AS DATE)" in audited
    assert "SELECT COUNT(*) FROM visits WHERE cost BETWEEN 10.0 AND 5000.5" in audited
    assert "SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'I%'" in audited


def _records(server: RunningServer) -> list[tuple[str, str]]:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        rows = conn.execute("SELECT * FROM dpproxy.my_queries").fetchall()
    return [(str(row[3]), str(row[4])) for row in rows]  # sql, decision


def test_the_types_are_postgresql_s(server: RunningServer, pg_dsn: str, pg_schema: str) -> None:
    load_postgres(generate(DemoSize(patients=20)), pg_dsn, schema=pg_schema)
    statements = [sql for sql, _, _ in STATEMENTS]
    ours = asyncio.run(described(server.dsn("alice"), statements))
    theirs = asyncio.run(described(pg_dsn, statements, search_path=pg_schema))
    assert ours == theirs


def test_describe_is_not_refused_for_what_a_value_makes_acceptable(
    server: RunningServer,
) -> None:
    """LIKE $1, LIMIT $1::int, percentile_cont($1::float8), width_bucket(…, $1::int) were
    described with NULL for the parameter, and refused ("diagnosis LIKE NULL …")."""
    statements = [
        "SELECT COUNT(*) FROM visits WHERE diagnosis LIKE $1",
        "SELECT COUNT(*) FROM visits LIMIT $1::int",
        "SELECT percentile_cont($1::float8) WITHIN GROUP (ORDER BY cost) FROM visits",
        "SELECT width_bucket(cost, 0, 1000, $1::int) AS b, COUNT(*) FROM visits GROUP BY b",
        "SELECT date_trunc($1, visit_date) AS m, COUNT(*) FROM visits GROUP BY m",
    ]
    before = spent(server)

    async def describe_all() -> list[list[tuple[str, str]]]:
        conn = await asyncpg.connect(server.dsn("alice"))
        try:
            found = []
            for sql in statements:
                statement = await conn.prepare(sql)
                found.append([(a.name, a.type.name) for a in statement.get_attributes()])
            return found
        finally:
            await conn.close()

    columns = asyncio.run(describe_all())
    assert columns[0] == [("count", "int8")]
    assert columns[2] == [("percentile_cont", "float8")]
    assert columns[3] == [("b", "int8"), ("count", "int8")]
    assert spent(server) == before  # a Describe is never charged
    stand_ins = ("LIKE 'a'", "LIMIT CAST(1 AS INT)", "CAST(0.5 AS DOUBLE", "DATE_TRUNC('day'")
    assert not [sql for sql, _ in _records(server) if any(s in sql for s in stand_ins)]


def test_a_value_refused_at_execute_is_refused_free(server: RunningServer) -> None:
    sql = "SELECT percentile_cont($1) WITHIN GROUP (ORDER BY cost) FROM visits"
    bound = "SELECT PERCENTILE_CONT(1.5) WITHIN GROUP (ORDER BY cost) FROM visits"
    before = spent(server)

    async def ask() -> str:
        conn = await asyncpg.connect(server.dsn("alice"))
        try:
            statement = await conn.prepare(sql)  # described with a fraction: accepted
            assert [a.type.name for a in statement.get_attributes()] == ["float8"]
            with pytest.raises(asyncpg.PostgresError) as refused:
                await statement.fetch(1.5)
            return str(refused.value.sqlstate)
        finally:
            await conn.close()

    assert asyncio.run(ask()) == "22003"  # percentile value 1.5 is not between 0 and 1
    assert spent(server) == before
    assert decisions(server, bound) == [("rejected", "0")]


def test_psycopg_prepared_statements(server: RunningServer) -> None:
    """psycopg sends strings as unknown (OID 0) and prepares a statement once asked to."""
    queries = [
        ("SELECT COUNT(*) FROM visits WHERE diagnosis LIKE %s AND cost > %s", ["I%", "100"]),
        ("SELECT COUNT(*) FROM visits WHERE visit_date >= %s", ["2024-01-01"]),
        ("SELECT COUNT(*) FROM visits WHERE visit_date >= %s", [datetime.date(2024, 1, 1)]),
        ("SELECT COUNT(*) FROM visits LIMIT %s", [1]),
        ("SELECT percentile_cont(%s) WITHIN GROUP (ORDER BY cost) FROM visits", [0.5]),
    ]
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("SET dpproxy.epsilon = 0.05")
        for sql, values in queries:
            for _ in range(2):
                row = conn.execute(sql, values, prepare=True).fetchone()
                assert row is not None and row[0] is not None, sql
    audited = {s for s, _ in _records(server)}
    assert "SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'I%' AND cost > 100.0" in audited
