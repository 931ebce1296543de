"""psycopg's ``cur.execute("… GROUP BY %s", (1,))`` and ``"… ORDER BY %s", (2,)`` through a
real `dpproxy serve` on DuckDB and PostgreSQL, each statement also asked of PostgreSQL
itself (a small table of the same columns): a parameter there is a constant, never a
select-list position (proxy.parameter_positions). Each statement is answered with as many
rows as PostgreSQL's, or refused with PostgreSQL's SQLSTATE; the audit log shows the
constant as bound."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from tests.integration.server import RunningServer
from tests.postgres_schema import scratch_schema

pytestmark = pytest.mark.integration

PATIENTS = 200
DIRECTORY_PREFIX = "parameter-positions-"
COUNTS = "SELECT department, COUNT(*) FROM visits GROUP BY department"
#: The demo's departments (its public domain of visits.department).
DEPARTMENTS = [
    "Cardiology",
    "Emergency",
    "General Medicine",
    "Neurology",
    "Obstetrics",
    "Oncology",
    "Orthopedics",
    "Pediatrics",
]

#: Statements and values; before, dpproxy read each value as a position.
STATEMENTS: list[tuple[str, tuple[object, ...]]] = [
    (COUNTS + " ORDER BY %s", (2,)),  # was sorted by the count
    (COUNTS + " ORDER BY %s DESC", (1,)),
    (COUNTS + " ORDER BY %s, 2", (5,)),  # was "ORDER BY position 5 is not in select list"
    (COUNTS + " ORDER BY %s", ("department",)),  # was "non-integer constant in ORDER BY"
    (COUNTS + " ORDER BY (%s)", (2,)),
    ("SELECT COUNT(*) FROM visits GROUP BY %s", (1,)),  # was "aggregates are not allowed"
    ("SELECT department, COUNT(*) FROM visits GROUP BY department, %s", (1,)),
    ("SELECT department, COUNT(*) FROM visits GROUP BY %s", (1,)),  # was answered
]


@pytest.fixture(scope="module")
def postgres_visits(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    """PostgreSQL with a visits table of the demo's columns, every department in it."""
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(f'SET search_path = "{schema}"')
        conn.execute("CREATE TABLE visits (patient_id BIGINT, department TEXT)")
        with conn.cursor() as cur:
            rows = [(i, d) for i, d in enumerate(DEPARTMENTS * 2)]
            cur.executemany("INSERT INTO visits VALUES (%s, %s)", rows)
        yield conn


def outcome(
    conn: psycopg.Connection[tuple[object, ...]], sql: str, values: tuple[object, ...]
) -> object:
    """How many rows the statement answers, or the SQLSTATE it is refused with."""
    try:
        with conn.transaction():
            return len(conn.execute(sql, values).fetchall())
    except psycopg.Error as error:
        return error.sqlstate


def test_a_parameter_is_a_constant_as_in_postgresql(
    server: RunningServer, postgres_visits: psycopg.Connection[tuple[object, ...]]
) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        alice.execute("SET dpproxy.epsilon = 0.01")
        for sql, values in STATEMENTS:
            expected = outcome(postgres_visits, sql, values)
            assert outcome(alice, sql, values) == expected, (sql, values, expected)
        audited = [row[3] for row in alice.execute("SELECT * FROM dpproxy.my_queries")]
    # psycopg sends 2 as a smallint: bound as that constant, not as ORDER BY 2.
    assert COUNTS + " ORDER BY CAST(2 AS SMALLINT)" in audited
    assert "SELECT COUNT(*) FROM visits GROUP BY CAST(1 AS SMALLINT)" in audited
