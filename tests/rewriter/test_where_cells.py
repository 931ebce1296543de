"""Cells of public GROUP BY domains that WHERE rules out are not released
(``rewriter.passes.where_cells``): ``WHERE department = 'A' GROUP BY department`` gives
one row, as PostgreSQL does, not one noisy row per department.

Each query runs as written on PostgreSQL and DuckDB over a table that has rows for every
department, stay and NULL: with a WHERE over the keys alone, the groups they return (those
in the domains) are exactly the released cells; with other columns in it, they are among
them. The charge and the noise do not change."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from rewriter import PlanRequest, plan
from rewriter.passes.group_keys import domain_cells
from rewriter.plan import Plan
from tests.postgres_schema import scratch_schema
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.tables import CREATE, SETUP, catalog, duckdb_with

DEPARTMENTS = ["A", "B", "C", "Z", None]  # Z and NULL: outside the domain A, B, C
STAYS = [None, *range(1, 11)]
#: Every department with every stay, costs with and without a value, each row a person of
#: its own (100, 101 …: so no row is cut by the bounds per person), women and men.
DENSE: list[tuple[int, int, str | None, float | None, int | None]] = [
    (i, 100 + i, department, None if i % 3 == 0 else 7.5 * (i % 13), stay)
    for i, (department, stay) in enumerate(itertools.product(DEPARTMENTS, STAYS * 2))
]
PERSONS = [(100 + i, "F" if i % 2 else "M", 1980) for i in range(len(DENSE))]

BY_DEPARTMENT = "SELECT department, COUNT(*) FROM visits WHERE {} GROUP BY department"
#: WHEREs over the key alone: PostgreSQL's groups are the released cells.
DECIDED = [
    "department = 'A'",
    "'B' = department",
    "department <> 'B'",
    "NOT department = 'B'",
    "department IN ('A', 'C')",
    "department NOT IN ('A', 'B')",
    "department = ANY('{A,B}')",
    "department <> ALL('{A,B}')",
    "department LIKE 'A%'",
    "department NOT LIKE 'A%'",
    "department LIKE ANY('{A%,C_}')",
    "department ILIKE 'b'",
    "department LIKE '_'",
    "department IS DISTINCT FROM 'A'",
    "department IS NOT DISTINCT FROM 'C'",
    "department IN ('A', NULL)",
    "department NOT IN ('A', NULL)",
    "department = NULL",
    "department IS NULL",
    "(department = 'A') IS NOT TRUE",
    "(department = 'A') IS NOT FALSE",
    "NOT (department = 'A' OR department = 'B')",
    "department = 'A'::varchar",
    "department::text = 'B'",
    "department = 'A' AND department = 'B'",
    "department = 'A' OR department = 'C'",
    "false",
    "NOT true",
    "1 = 2",
    "department = 'A' AND stay > 3",
    "(department <> 'A' AND cost > 10) AND stay IS NOT NULL",
    "(department = 'A' AND cost > 4) OR department = 'B'",
]
#: WHEREs that leave every cell (or some that PostgreSQL leaves out): the released cells
#: hold PostgreSQL's groups.
UNDECIDED = [
    "department BETWEEN 'A' AND 'B'",  # texts in order follow the collation
    "department < 'B'",
    "department = 'A' OR cost > 30",
    "lower(department) = 'a'",
    "department IS NOT NULL",
    "true",
]
#: Other keys: (query, the released cells).
OTHER_KEYS = [
    (
        "SELECT v.department, p.sex, COUNT(*) FROM visits v JOIN patients p"
        " ON v.patient_id = p.patient_id WHERE p.sex = 'F' AND v.department <> 'C'"
        " GROUP BY 1, 2",
        {("A", "F"), ("B", "F")},
    ),
    (
        "SELECT v.department, p.sex, COUNT(*) FROM visits v JOIN patients p"
        " ON v.patient_id = p.patient_id WHERE (p.sex = 'F' AND v.department = 'A')"
        " OR (p.sex = 'M' AND cost > 3) GROUP BY 1, 2",
        {("A", "F"), ("A", "M"), ("B", "M"), ("C", "M")},
    ),
    (
        "SELECT v.department, p.sex, COUNT(*) FROM visits v JOIN patients p"
        " ON v.patient_id = p.patient_id WHERE v.department = 'A' OR p.sex = 'F' GROUP BY 1, 2",
        {("A", "F"), ("A", "M"), ("B", "F"), ("C", "F")},
    ),
    ("SELECT stay > 3 AS k, COUNT(*) FROM visits WHERE stay > 3 GROUP BY 1", {(True,)}),
    (
        "SELECT stay > 3 AS k, COUNT(*) FROM visits WHERE (stay > 3) IS NOT TRUE GROUP BY 1",
        {(False,), (None,)},
    ),
    (
        "SELECT CASE WHEN stay > 3 THEN 'long' END AS k, COUNT(*) FROM visits"
        " WHERE CASE WHEN stay > 3 THEN 'long' END <> 'x' GROUP BY 1",
        {("long",)},
    ),
    (
        "SELECT nullif(department, 'A') AS k, COUNT(*) FROM visits"
        " WHERE nullif(department, 'A') IS NOT NULL GROUP BY 1",
        {("B",), ("C",)},
    ),
    (  # the key is not the column: every cell stays
        "SELECT nullif(department, 'A') AS k, COUNT(*) FROM visits"
        " WHERE department = 'B' GROUP BY 1",
        {("B",), ("C",), (None,)},
    ),
    (
        "SELECT d.floor, COUNT(*) FROM visits v JOIN departments d ON v.department = d.name"
        " WHERE d.floor = 1 GROUP BY 1",
        {(1,)},
    ),
    (
        "SELECT d.floor, COUNT(*) FROM visits v JOIN departments d ON v.department = d.name"
        " WHERE d.floor IN (2, 3) AND d.floor <> 1.0 GROUP BY 1",
        {(2,)},
    ),
    (
        "SELECT d.floor, COUNT(*) FROM visits v JOIN departments d ON v.department = d.name"
        " WHERE d.floor BETWEEN 1 AND 1.5 GROUP BY 1",
        {(1,)},
    ),
    (
        "SELECT department, COUNT(*) FROM visits WHERE department = 'A'"
        " GROUP BY department HAVING COUNT(*) > -1",
        {("A",)},
    ),
]


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        for statement in (CREATE, *SETUP):
            conn.execute(statement.format(schema=f'"{schema}"').encode())
        with conn.cursor() as cur:
            cur.executemany(f'INSERT INTO "{schema}".visits VALUES (%s, %s, %s, %s, %s)', DENSE)
            cur.executemany(f'INSERT INTO "{schema}".patients VALUES (%s, %s, %s)', PERSONS)
        conn.execute(f'SET search_path TO "{schema}"')
        yield conn


@pytest.fixture(scope="module")
def dense_duckdb() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb_with([])
    conn.executemany("INSERT INTO main.visits VALUES (?, ?, ?, ?, ?)", DENSE)
    conn.executemany("INSERT INTO main.patients VALUES (?, ?, ?)", PERSONS)
    yield conn
    conn.close()


def _released(made: Plan, conn: duckdb.DuckDBPyConnection) -> set[tuple[object, ...]]:
    """The keys of the rows released from the plan's SQL run on DuckDB; those with rows
    there are among them."""
    exact = conn.execute(made.sql).fetchall()
    rows = made.release(exact, ZeroNoise()).rows
    released: set[tuple[object, ...]] = {tuple(r[: len(made.keys)]) for r in rows}
    assert {tuple(r[: len(made.keys)]) for r in exact} <= released
    return released


def _groups(
    sql: str, made: Plan, postgres: psycopg.Connection[tuple[object, ...]]
) -> set[tuple[object, ...]]:
    """The groups PostgreSQL returns for the query as written, in the keys' domains."""
    width = len(made.keys)
    found = {tuple(r[:width]) for r in postgres.execute(sql.encode()).fetchall()}
    return found & set(domain_cells(made.keys))


def _on_duckdb(made: Plan, conn: duckdb.DuckDBPyConnection) -> set[tuple[object, ...]]:
    """The groups with rows on DuckDB, from the plan's SQL (no row is cut: a person each)."""
    return {tuple(r[: len(made.keys)]) for r in conn.execute(made.sql).fetchall()}


@pytest.mark.parametrize("where", DECIDED)
def test_the_released_cells_are_postgresqls_groups(
    where: str,
    postgres: psycopg.Connection[tuple[object, ...]],
    dense_duckdb: duckdb.DuckDBPyConnection,
) -> None:
    sql = BY_DEPARTMENT.format(where)
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    expected = _groups(sql, made, postgres)
    assert expected == _on_duckdb(made, dense_duckdb)
    assert _released(made, dense_duckdb) == expected


@pytest.mark.parametrize("where", UNDECIDED)
def test_an_undecided_where_keeps_the_cells(
    where: str,
    postgres: psycopg.Connection[tuple[object, ...]],
    dense_duckdb: duckdb.DuckDBPyConnection,
) -> None:
    sql = BY_DEPARTMENT.format(where)
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert _groups(sql, made, postgres) <= _released(made, dense_duckdb)
    assert made.cells is None


@pytest.mark.parametrize(("sql", "cells"), OTHER_KEYS)
def test_other_keys(
    sql: str,
    cells: set[tuple[object, ...]],
    postgres: psycopg.Connection[tuple[object, ...]],
    dense_duckdb: duckdb.DuckDBPyConnection,
) -> None:
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert _released(made, dense_duckdb) == cells
    assert _groups(sql, made, postgres) == _on_duckdb(made, dense_duckdb) <= cells


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_where_false_releases_no_group_but_one_total(dialect: str) -> None:
    """As PostgreSQL: no row with GROUP BY, one row (a noisy 0) without."""
    request = PlanRequest(1.0, dialect="duckdb" if dialect == "duckdb" else "postgres")
    grouped = plan(BY_DEPARTMENT.format("false"), catalog("main"), request)
    assert grouped.release([], ZeroNoise()).rows == ()
    total = plan("SELECT COUNT(*), SUM(cost) FROM visits WHERE false", catalog("main"), request)
    assert total.release([], ZeroNoise()).rows == ((0, 0.0),)


def test_the_charge_and_the_noise_are_unchanged() -> None:
    """The cells left out are post-processing: the same ε, noise and SQL filter."""
    request = PlanRequest(1.0)
    everything = plan(
        "SELECT department, COUNT(*), COUNT(DISTINCT patient_id), SUM(cost) FROM visits"
        " GROUP BY department",
        catalog("main"),
        request,
    )
    one = plan(
        "SELECT department, COUNT(*), COUNT(DISTINCT patient_id), SUM(cost) FROM visits"
        " WHERE department = 'A' GROUP BY department",
        catalog("main"),
        request,
    )
    assert one.release([], ZeroNoise()).rows == (("A", 0, 0, 0.0),)
    assert one.measurements == everything.measurements
    assert (one.epsilon, one.privacy_loss(), one.max_groups_per_unit) == (
        everything.epsilon,
        everything.privacy_loss(),
        everything.max_groups_per_unit,
    )


def test_keys_from_the_data_are_left_to_partition_selection() -> None:
    made = plan(
        "SELECT department, stay, COUNT(*) FROM visits WHERE department = 'A' GROUP BY 1, 2",
        catalog("main"),
        PlanRequest(1.0, delta=1e-9),
    )
    assert made.selection is not None
    assert made.cells is None


def test_a_long_in_list_and_a_long_or_are_evaluated() -> None:
    """any_arrays makes LIKE ANY of a long array a long OR: walked without recursion."""
    listed = ", ".join(f"'x{i}'" for i in range(5000))
    patterns = ",".join(f"x{i}%" for i in range(5000))
    for where in (f"department IN ('B', {listed})", f"department LIKE ANY('{{B,{patterns}}}')"):
        made = plan(BY_DEPARTMENT.format(where), catalog("main"), PlanRequest(1.0))
        assert made.release([], ZeroNoise()).rows == (("B", 0),)
