"""A per-person AVG is a real number, even of integers (review finding).

``SELECT SUM(a) FROM (SELECT pid, AVG(x) AS a FROM t GROUP BY pid) s`` typed ``a`` as an
integer column when ``x`` was one, so the outer query cleaned each average to a whole
number: two persons averaging 1.5 summed to 4 instead of 3. The exact (noise-free) totals
are compared with an independent Python computation on DuckDB and PostgreSQL; COUNT, SUM,
MIN and MAX of integers stay integers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Literal

import duckdb
import psycopg
import pytest

from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.rewriter.noise import ZeroNoise

LOWER, UPPER, ROWS = 0, 10, 3
#: (pid, x): per-person averages 1.5, 1.5, 2/3, 10 (12 is clamped), 7, and a person whose
#: only x is NULL (no average).
DATA = [
    (1, 1),
    (1, 2),
    (2, 2),
    (2, 1),
    (3, 0),
    (3, 1),
    (3, 1),
    (4, 12),
    (4, 10),
    (5, 7),
    (6, None),
]


def _catalog(schema: str) -> Catalog:
    policy = TablePolicy(
        privacy_unit="pid",
        max_rows_per_unit=ROWS,
        columns={"x": ColumnPolicy(lower=LOWER, upper=UPPER)},
    )
    return build_catalog(
        {"t": {"pid": ColumnType.INTEGER, "x": ColumnType.INTEGER}}, {"t": policy}, schema=schema
    )


def _per_person(aggregate: Callable[[list[int]], Fraction]) -> list[Fraction]:
    """Each person's aggregate of its clamped non-NULL values (none has more than ROWS)."""
    values: dict[int, list[int]] = {}
    for pid, x in DATA:
        values.setdefault(pid, [])
        if x is not None:
            values[pid].append(min(max(x, LOWER), UPPER))
    return [aggregate(v) for v in values.values() if v]


def _mean(values: list[int]) -> Fraction:
    return Fraction(sum(values), len(values))


AVERAGES = _per_person(_mean)
# (query, its exact answer computed here)
QUERIES = [
    ("SELECT SUM(a) FROM (SELECT pid, AVG(x) AS a FROM t GROUP BY pid) s", sum(AVERAGES)),
    (
        "SELECT AVG(a) FROM (SELECT pid, AVG(x) AS a FROM t GROUP BY pid) s",
        sum(AVERAGES) / len(AVERAGES),
    ),
    (
        # 1.5 is not above 1.6 (as 2, it was)
        "SELECT COUNT(*) FROM (SELECT pid, AVG(x) AS a FROM t GROUP BY pid) s WHERE a > 1.6",
        Fraction(sum(1 for a in AVERAGES if a > Fraction(8, 5))),
    ),
    (
        "SELECT SUM(m) FROM (SELECT pid, MAX(x) AS m FROM t GROUP BY pid) s",
        sum(_per_person(lambda v: Fraction(max(v)))),
    ),
    (
        "SELECT SUM(m) FROM (SELECT pid, MIN(x) AS m FROM t GROUP BY pid) s",
        sum(_per_person(lambda v: Fraction(min(v)))),
    ),
    (
        "SELECT SUM(s) FROM (SELECT pid, SUM(x) AS s FROM t GROUP BY pid) q",
        sum(_per_person(lambda v: Fraction(sum(v)))),
    ),
]


def _answer(
    sql: str,
    schema: str,
    dialect: Literal["duckdb", "postgres"],
    run: Callable[[str], Sequence[Sequence[object]]],
) -> float:
    made = plan(sql, _catalog(schema), PlanRequest(1.0, dialect))
    released = made.release(run(made.sql), ZeroNoise()).rows
    (value,) = released[0]
    assert isinstance(value, (int, float))
    return float(value)


@pytest.mark.parametrize(("sql", "expected"), QUERIES)
def test_per_person_aggregates_on_duckdb(sql: str, expected: Fraction) -> None:
    duck = duckdb.connect()
    duck.execute("CREATE TABLE main.t (pid BIGINT, x INTEGER)")
    duck.executemany("INSERT INTO main.t VALUES (?, ?)", DATA)
    found = _answer(sql, "main", "duckdb", lambda q: duck.execute(q).fetchall())
    # Sums of reals are put on a fixed-point grid of 2^-20 of the bound or finer.
    assert found == pytest.approx(float(expected), abs=1e-4)


@pytest.mark.postgres
@pytest.mark.parametrize(("sql", "expected"), QUERIES)
def test_per_person_aggregates_on_postgres(
    sql: str, expected: Fraction, pg_dsn: str, pg_schema: str
) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{pg_schema}".t (pid BIGINT, x INTEGER)')
        with conn.cursor() as cur:
            cur.executemany(f'INSERT INTO "{pg_schema}".t VALUES (%s, %s)', DATA)
        found = _answer(sql, pg_schema, "postgres", lambda q: conn.execute(q.encode()).fetchall())
    assert found == pytest.approx(float(expected), abs=1e-4)


def test_the_example_of_the_finding() -> None:
    """Two persons averaging 1.5 each: 3, not 4."""
    duck = duckdb.connect()
    duck.execute("CREATE TABLE main.t (pid BIGINT, x INTEGER)")
    duck.execute("INSERT INTO main.t VALUES (1, 1), (1, 2), (2, 1), (2, 2)")
    sql = QUERIES[0][0]
    assert _answer(sql, "main", "duckdb", lambda q: duck.execute(q).fetchall()) == pytest.approx(
        3.0, abs=1e-4
    )
