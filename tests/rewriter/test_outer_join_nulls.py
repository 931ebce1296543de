"""GROUP BY a column of a table joined with LEFT JOIN (rewriter.passes.outer_nulls): its
public domain has a NULL cell, for the rows the join matched to nothing (and those matched
to a row whose column is NULL), released always, with noise, as the domain's other cells.
Without it, every visit of a department in no building vanished from the answer, without
notice. The bounded exact answer on DuckDB and PostgreSQL must be PostgreSQL's own (but
the domain's empty cells, which PostgreSQL does not show), and the cells released must not
depend on the data."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

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
from tests.rewriter.coupling import in_key_order, sensitivity
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.post import post_processed
from tests.rewriter.scratch import fresh_duckdb, insert

STAY_COLUMNS = {
    "patient_id": ColumnType.INTEGER,
    "ward": ColumnType.TEXT,
    "code": ColumnType.TEXT,
    "stay": ColumnType.INTEGER,
}
STAY_POLICY = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=1,
    max_groups_per_unit=1,
    columns={
        "stay": ColumnPolicy(lower=0, upper=30),
        "code": ColumnPolicy(domain=["A", "B"]),  # a protected column's NULL: left out
    },
)
WARD_COLUMNS = {"ward": ColumnType.TEXT, "building": ColumnType.TEXT, "floor": ColumnType.INTEGER}
WARD_POLICY = TablePolicy(
    public=True,
    columns={
        "building": ColumnPolicy(domain=["East", "Main", "West"]),
        "floor": ColumnPolicy(domain=[1, 2, 3], lower=0, upper=9),
    },
)
SCHEMA = [
    "CREATE TABLE {schema}.stays (patient_id BIGINT, ward VARCHAR, code VARCHAR, stay INTEGER)",
    "CREATE TABLE {schema}.wards (ward VARCHAR PRIMARY KEY, building VARCHAR, floor INTEGER)",
    # w3 is in no building; no stay is in West's w4.
    "INSERT INTO {schema}.wards VALUES ('w1', 'Main', 1), ('w2', 'East', 2), "
    "('w3', NULL, 3), ('w4', 'West', 1), ('w5', 'Main', 2)",
]
#: (ward, code, stay): w9 and NULL match no ward, w3's building is NULL.
BASE = [
    ("w1", "A", 3),
    ("w2", "B", 5),
    ("w3", "A", 2),
    ("w9", "B", 7),
    (None, "A", 1),
    ("w5", None, 6),
    ("w1", "B", 8),
    ("w9", "A", 4),
]
COPIES = 3  # each base row belongs to this many persons, one row each
STAYS = [(1 + i * COPIES + j, *row) for i, row in enumerate(BASE) for j in range(COPIES)]

Rows = list[tuple[object, ...]]


def catalog(schema: str, policy: TablePolicy = STAY_POLICY) -> Catalog:
    return build_catalog(
        {"stays": STAY_COLUMNS, "wards": WARD_COLUMNS},
        {"stays": policy, "wards": WARD_POLICY},
        schema=schema,
        unique={"wards": ["ward"]},
    )


def duck_with(stays: Sequence[Sequence[object]]) -> duckdb.DuckDBPyConnection:
    conn = fresh_duckdb()
    conn.execute(";\n".join(s.format(schema="main") for s in SCHEMA))
    insert(conn, "main.stays", stays)
    return conn


@dataclass
class Engines:
    duck: duckdb.DuckDBPyConnection
    postgres: psycopg.Connection[tuple[object, ...]]
    schema: str

    def answers(self, sql: str, policy: TablePolicy = STAY_POLICY) -> tuple[Rows, Rows]:
        """dpproxy's answers (no noise, post-processed) on DuckDB and on PostgreSQL."""
        on_duck = plan(sql, catalog("main", policy), PlanRequest(10.0))
        on_pg = plan(sql, catalog(self.schema, policy), PlanRequest(10.0, "postgres"))
        duck_rows = self._duck_rows(in_key_order(on_duck))
        pg_rows = self._pg_rows(in_key_order(on_pg))
        return (
            post_processed(on_duck, list(on_duck.release(duck_rows, ZeroNoise()).rows)),
            post_processed(on_pg, list(on_pg.release(pg_rows, ZeroNoise()).rows)),
        )

    def native(self, sql: str) -> Rows:
        """What PostgreSQL answers for the analyst's SQL itself."""
        return [tuple(r) for r in self.postgres.execute(sql.encode()).fetchall()]

    def _duck_rows(self, sql: str) -> Rows:
        return [tuple(r) for r in self.duck.execute(sql).fetchall()]

    def _pg_rows(self, sql: str) -> Rows:
        return [tuple(r) for r in self.postgres.execute(sql.encode()).fetchall()]


@contextmanager
def engines(dsn: str, stays: Sequence[Sequence[object]]) -> Iterator[Engines]:
    schema = f"dpproxy_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            for statement in SCHEMA:
                conn.execute(statement.format(schema=f'"{schema}"').encode())
            with conn.cursor() as cur:
                cur.executemany(f'INSERT INTO "{schema}".stays VALUES (%s, %s, %s, %s)', stays)
            conn.execute(f'SET search_path = "{schema}"')
            yield Engines(duck_with(stays), conn, schema)
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture(scope="module")
def stays(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn, STAYS) as found:
        yield found


def _held(rows: Rows, count: int) -> Rows:
    """The rows of cells that hold rows: PostgreSQL shows no other."""
    return [r for r in rows if r[count] != 0]


JOINED = "FROM stays s LEFT JOIN wards d ON d.ward = s.ward"


@pytest.mark.parametrize(
    "sql",
    [
        # The tester's shape: Main's stays, and a NULL row for all the others.
        f"SELECT d.building, count(*) {JOINED} AND d.building = 'Main' GROUP BY 1",
        f"SELECT d.building, count(*), sum(s.stay) {JOINED} GROUP BY 1 ORDER BY 1",
        f"SELECT d.building, count(*), sum(s.stay) {JOINED} GROUP BY 1 ORDER BY 1 DESC",
        f"SELECT d.building, count(*) {JOINED} GROUP BY 1 ORDER BY d.building NULLS FIRST",
        f"SELECT d.building AS b, count(*) {JOINED} GROUP BY b ORDER BY b DESC NULLS LAST",
        f"SELECT d.floor, count(*) {JOINED} GROUP BY 1 ORDER BY 1",
        f"SELECT s.code, d.building, count(*) {JOINED} WHERE s.code IS NOT NULL "
        "GROUP BY 1, 2 ORDER BY 1, 2",
        f"SELECT d.building, d.floor, count(*) {JOINED} GROUP BY 1, 2 ORDER BY 1, 2",
        # Expressions over it, as before: COALESCE takes the NULLs in, nullif adds more.
        f"SELECT coalesce(d.building, 'none'), count(*) {JOINED} GROUP BY 1 ORDER BY 1",
        f"SELECT nullif(d.building, 'East'), count(*) {JOINED} GROUP BY 1 ORDER BY 1",
        f"SELECT d.building = 'Main' AS main, count(*) {JOINED} GROUP BY 1 ORDER BY 1",
        f"SELECT d.building IS NULL AS nowhere, count(*) {JOINED} GROUP BY 1 ORDER BY 1",
        # WHERE rules the NULL cell out, or keeps it alone.
        f"SELECT d.building, count(*) {JOINED} WHERE d.building IS NOT NULL GROUP BY 1 ORDER BY 1",
        f"SELECT d.building, count(*) {JOINED} WHERE d.building IS NULL GROUP BY 1",
        f"SELECT d.building, count(*) {JOINED} WHERE d.building <> 'East' GROUP BY 1 ORDER BY 1",
        f"SELECT d.building, count(*) {JOINED} WHERE d.building IS DISTINCT FROM 'East' "
        "GROUP BY 1 ORDER BY 1",
        # Two LEFT JOINs: the second's columns are NULL where the first matched nothing.
        f"SELECT d2.building, count(*) {JOINED} LEFT JOIN wards d2 ON d2.ward = d.ward "
        "GROUP BY 1 ORDER BY 1",
        # A row-level subquery joined with LEFT JOIN.
        "SELECT w.b, count(*) FROM stays s LEFT JOIN (SELECT ward AS k, building AS b "
        "FROM wards) w ON w.k = s.ward GROUP BY 1 ORDER BY 1",
        f"SELECT DISTINCT d.building, count(*) {JOINED} GROUP BY 1 ORDER BY 1",
    ],
)
def test_the_null_cell_matches_postgresql(sql: str, stays: Engines) -> None:
    on_duck, on_pg = stays.answers(sql)
    assert on_duck == on_pg
    count = len(plan(sql, catalog("main"), PlanRequest(1.0)).keys)  # count(*) follows the keys
    native = stays.native(sql)
    if "ORDER BY" in sql:
        assert _held(on_duck, count) == native
    else:
        assert sorted(_held(on_duck, count), key=repr) == sorted(native, key=repr)


def test_the_tester_query_keeps_the_rows_without_a_match(stays: Engines) -> None:
    sql = f"SELECT d.building, count(*) {JOINED} AND d.building = 'Main' GROUP BY 1"
    on_duck, _ = stays.answers(sql)
    # Main: w1 and w5 (3 rows each base row); NULL: the 5 other base rows. The empty cells
    # East and West are released as noisy zeros (0 without noise).
    assert sorted(on_duck, key=repr) == sorted(
        [("East", 0), ("Main", 9), ("West", 0), (None, 15)], key=repr
    )


def test_the_domain_has_null_only_for_a_table_left_joined() -> None:
    def domains(sql: str) -> list[object]:
        return [k.domain for k in plan(sql, catalog("main"), PlanRequest(1.0)).keys]

    with_null = ("East", "Main", "West", None)
    assert domains(f"SELECT d.building, count(*) {JOINED} GROUP BY 1") == [with_null]
    assert domains(
        "SELECT d.building, count(*) FROM stays s JOIN wards d ON d.ward = s.ward GROUP BY 1"
    ) == [("East", "Main", "West")]
    # A protected table's column keeps leaving its NULL out, even beside a LEFT JOIN.
    assert domains(f"SELECT s.code, d.building, count(*) {JOINED} GROUP BY 1, 2") == [
        ("A", "B"),
        with_null,
    ]
    # COALESCE of it ending in a constant is never NULL.
    assert domains(f"SELECT coalesce(d.building, 'none'), count(*) {JOINED} GROUP BY 1") == [
        ("East", "Main", "West", "none")
    ]


@pytest.mark.parametrize(
    ("where", "cells"),
    [
        ("d.building IS NOT NULL", [("East",), ("Main",), ("West",)]),
        ("d.building = 'Main'", [("Main",)]),
        ("d.building IN ('Main', 'West')", [("Main",), ("West",)]),
        ("NOT d.building = 'Main'", [("East",), ("West",)]),
        ("d.building IS NULL", [(None,)]),
        ("d.building IS NULL OR d.building = 'East'", [("East",), (None,)]),
        ("d.building IS DISTINCT FROM 'East'", [("Main",), ("West",), (None,)]),
    ],
)
def test_where_rules_the_null_cell_out(where: str, cells: list[tuple[object, ...]]) -> None:
    sql = f"SELECT d.building, count(*) {JOINED} WHERE {where} GROUP BY 1"
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    assert made.cells is not None
    assert sorted(made.cells, key=repr) == sorted(cells, key=repr)
    released = made.release([], ZeroNoise()).rows
    assert sorted(((r[0],) for r in released), key=repr) == sorted(cells, key=repr)


#: Several stays per person, each in another cell of d.building (and its NULL).
SEVERAL = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=4,
    max_groups_per_unit=8,
    columns={"stay": ColumnPolicy(lower=0, upper=30)},
)
SEVERAL_STAYS = [
    (person, ward, "A", stay)
    for person in range(1, 6)
    for ward, stay in (("w1", 1), ("w2", 2), ("w9", 3), (None, 4))
    if (person, ward) != (5, "w2")
]


def test_a_unit_counts_in_the_null_cell_as_one_more_group(pg_dsn: str) -> None:
    """max_groups_per_unit is at most the domain's cells, NULL's included: the noise is
    calibrated to four groups a person can be in (East, Main, West and NULL), and every
    person keeps all four."""
    sql = f"SELECT d.building, count(*), sum(s.stay) {JOINED} GROUP BY 1 ORDER BY 1"
    made = plan(sql, catalog("main", SEVERAL), PlanRequest(1.0))
    assert made.max_groups_per_unit == 4
    assert sensitivity(made, made.measurements[0]) == 4  # count(*): a row in each group
    with engines(pg_dsn, SEVERAL_STAYS) as several:
        on_duck, on_pg = several.answers(sql, SEVERAL)
        assert on_duck == on_pg
        assert _held(on_duck, 1) == several.native(sql)
        assert on_duck[-1][:2] == (None, 10)  # w9 and NULL: 5 persons' 2 rows


@pytest.mark.parametrize(
    "added",
    [
        [("w9", "A", 5)],  # a stay matched to no ward
        [(None, "B", 5), ("w1", "A", 2)],  # no ward, and Main (max_rows 1: one is kept)
        [("w3", "A", 5)],  # a ward in no building
        [("w1", "A", 5)],  # Main
    ],
)
@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT d.building, count(*), sum(s.stay) {JOINED} GROUP BY 1",
        f"SELECT d.building, count(*) {JOINED} AND d.building = 'Main' GROUP BY 1",
        f"SELECT d.building, s.code, count(*) {JOINED} GROUP BY 1, 2",
    ],
)
def test_one_person_added_releases_the_same_cells(
    sql: str, added: list[tuple[object, ...]]
) -> None:
    """Neighbouring databases (with and without one person's stays), here with no stay
    matched to nothing before: the same cells are released, NULL's among them, and the
    exact totals move within the sensitivity."""
    matched = [row for row in STAYS if row[1] in ("w1", "w2", "w5")]
    person = max(row[0] for row in STAYS) + 1
    made = plan(sql, catalog("main"), PlanRequest(1.0))
    bounded = in_key_order(made)
    released: list[Rows] = []
    totals: list[dict[tuple[object, ...], list[int]]] = []
    keys = len(made.keys)
    for rows in (matched, [*matched, *((person, *row) for row in added)]):
        found = duck_with(rows).execute(bounded).fetchall()
        totals.append({tuple(r[:keys]): [int(v) for v in r[keys:]] for r in found})
        released.append([r[:keys] for r in made.release(found, ZeroNoise()).rows])
    assert released[0] == released[1]
    assert any(None in cell for cell in released[0])
    zeros = [0] * len(made.measurements)
    for index, measurement in enumerate(made.measurements):
        change = sum(
            abs(totals[1].get(cell, zeros)[index] - totals[0].get(cell, zeros)[index])
            for cell in set(totals[0]) | set(totals[1])
        )
        assert change <= sensitivity(made, measurement)
