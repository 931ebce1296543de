"""GROUP BY a condition (``cost IS NULL``, ``stay > 3``): its public domain is true, false
and NULL, each released with a noisy count, empty groups included; NULL only where the
condition can be NULL on some row, as PostgreSQL shows it (no NULL group for ``x IS NULL``
or ``COALESCE(x, 0) > 5``, whatever the data)."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from rewriter import PlanRequest, plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.tables import CREATE, SAMPLE_ROWS, SETUP, catalog

NEVER_NULL = [
    "cost IS NULL",
    "stay IS NOT NULL",
    "NOT (stay IS NULL)",
    "coalesce(cost, 0) > 5",
    "coalesce(department, 'x') LIKE 'A%'",
    "stay IS NOT NULL AND cost IS NULL",
    "coalesce(stay, 0) BETWEEN 1 AND 3",
    "coalesce(stay, -1) IN (1, 2)",
]
MAYBE_NULL = [
    "stay > 3",
    "cost IS NULL OR stay > 3",
    "stay IN (1, NULL)",
    "coalesce(stay, NULL) > 1",
    "department LIKE 'A%'",
    "coalesce(stay, 0) BETWEEN stay AND 3",
]


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        for statement in (CREATE, *SETUP):
            conn.execute(statement.format(schema=f'"{schema}"').encode())
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".visits VALUES (%s, %s, %s, %s, %s)', SAMPLE_ROWS
            )
            # A row of NULLs wherever the table allows them.
            cur.execute(f'INSERT INTO "{schema}".visits VALUES (9, 5, NULL, NULL, NULL)')
        conn.execute(f'SET search_path TO "{schema}"')
        yield conn


@pytest.mark.parametrize("condition", NEVER_NULL)
def test_a_condition_never_null_has_no_null_group(
    condition: str, postgres: psycopg.Connection[tuple[object, ...]]
) -> None:
    sql = f"SELECT {condition} AS k, COUNT(*) FROM visits GROUP BY 1"
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert made.keys[0].domain == (True, False)
    found = {row[0] for row in postgres.execute(sql.encode()).fetchall()}
    assert None not in found  # PostgreSQL's groups, over rows of NULLs too


@pytest.mark.parametrize("condition", MAYBE_NULL)
def test_a_condition_that_can_be_null_keeps_its_null_group(
    condition: str, postgres: psycopg.Connection[tuple[object, ...]]
) -> None:
    sql = f"SELECT {condition} AS k, COUNT(*) FROM visits GROUP BY 1"
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert made.keys[0].domain == (True, False, None)
    found = {row[0] for row in postgres.execute(sql.encode()).fetchall()}
    assert None in found  # the row of NULLs makes it NULL


@pytest.mark.parametrize(
    ("key", "domain"),
    [
        ("(cost IS NULL)::int", (1, 0)),
        (
            "CASE WHEN cost IS NULL THEN 'none' WHEN NOT cost IS NULL THEN 'some' END",
            ("none", "some"),
        ),
        ("(stay > 3)::int", (1, 0, None)),
        ("CASE WHEN cost IS NULL THEN 1 WHEN stay > 1 THEN 0 END", (1, 0, None)),
    ],
)
def test_a_case_that_always_matches_has_no_null_group(
    key: str, domain: tuple[object, ...], postgres: psycopg.Connection[tuple[object, ...]]
) -> None:
    """A condition cast to an integer is CASE WHEN c THEN 1 WHEN NOT c THEN 0 END: no
    NULL when c is never NULL, as PostgreSQL's groups show."""
    sql = f"SELECT {key} AS k, COUNT(*) FROM visits GROUP BY 1"
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert made.keys[0].domain == domain
    found = {row[0] for row in postgres.execute(sql.encode()).fetchall()}
    assert (None in found) == (None in domain)
