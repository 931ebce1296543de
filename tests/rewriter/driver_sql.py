"""A small table of notes, the same in DuckDB and PostgreSQL, for the tests of what drivers
send (constants with casts, arrays in ANY, boolean casts): dpproxy's bounded exact answer
(one row per person, values within their bounds: the bounding changes nothing) on both
engines must be PostgreSQL's own answer to the analyst's SQL."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import duckdb
import psycopg

from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    Plan,
    PlanRequest,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.rewriter.coupling import in_key_order
from tests.rewriter.noise import ZeroNoise

COLUMNS = {
    "patient_id": ColumnType.INTEGER,
    "name": ColumnType.TEXT,
    "code": ColumnType.TEXT,
    "stay": ColumnType.INTEGER,
    "cost": ColumnType.FLOAT,
    "flag": ColumnType.BOOLEAN,
    "day": ColumnType.DATE,
}
POLICY = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=1,
    max_groups_per_unit=1,
    columns={
        "stay": ColumnPolicy(lower=-20, upper=30),
        "cost": ColumnPolicy(lower=-100, upper=100),
        "code": ColumnPolicy(domain=["A", "B", "Ü"]),
    },
)
CREATE = (
    "CREATE TABLE {schema}.notes (patient_id BIGINT, name VARCHAR, code VARCHAR, "
    "stay INTEGER, cost DOUBLE PRECISION, flag BOOLEAN, day DATE)"
)
Row = tuple[str | None, str | None, int | None, float | None, bool | None, dt.date | None]
BASE: list[Row] = [
    ("Anna", "A", 3, 2.5, True, dt.date(2024, 1, 2)),
    ("Jörg", "B", 0, 0.0, False, None),
    ("éclair", None, 2, -3.0, None, dt.date(1999, 12, 31)),
    ("ab%c", "Ü", -4, 10.0, True, dt.date(2024, 2, 29)),
    ("A_b", "A", None, None, False, dt.date(2020, 2, 29)),
    ("", "B", 2, 2.5, None, None),
    (None, None, 30, 100.0, None, dt.date(2024, 1, 31)),
    ("  Anna ", "Ü", 1, -0.5, True, dt.date(2024, 1, 15)),
]
COPIES = 3  # each base row belongs to this many persons, one row each
ROWS = [(1 + i * COPIES + j, *row) for i, row in enumerate(BASE) for j in range(COPIES)]
INSERT = "INSERT INTO {schema}.notes VALUES ({marks})"
#: A low threshold for keys from the data: groups of COPIES persons pass, without noise.
DELTA = 0.4

Rows = list[tuple[object, ...]]


def catalog(schema: str) -> Catalog:
    return build_catalog({"notes": COLUMNS}, {"notes": POLICY}, schema=schema)


@contextmanager
def duck_notes() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    try:
        conn.execute(CREATE.format(schema="main"))
        conn.executemany(INSERT.format(schema="main", marks=", ".join("?" * 7)), ROWS)
        yield conn
    finally:
        conn.close()


@dataclass
class Engines:
    duck: duckdb.DuckDBPyConnection
    postgres: psycopg.Connection[tuple[object, ...]]
    schema: str

    def plans(self, sql: str, delta: float = DELTA) -> tuple[Plan, Plan]:
        """The plans of ``sql`` for DuckDB and PostgreSQL."""
        return (
            plan(sql, catalog("main"), PlanRequest(10.0, delta=delta)),
            plan(sql, catalog(self.schema), PlanRequest(10.0, "postgres", delta=delta)),
        )

    def released(self, sql: str, delta: float = DELTA) -> tuple[Rows, Rows]:
        """The released rows (no noise) on DuckDB and on PostgreSQL."""
        on_duck, on_pg = self.plans(sql, delta)
        duck_rows = self.duck.execute(in_key_order(on_duck)).fetchall()
        pg_rows = [tuple(r) for r in self.postgres.execute(in_key_order(on_pg).encode()).fetchall()]
        return (
            list(on_duck.release(duck_rows, ZeroNoise()).rows),
            list(on_pg.release(pg_rows, ZeroNoise()).rows),
        )

    def native(self, sql: str) -> Rows:
        """What PostgreSQL answers for the analyst's SQL itself."""
        return [tuple(r) for r in self.postgres.execute(sql.encode()).fetchall()]


@contextmanager
def engines(dsn: str) -> Iterator[Engines]:
    """The notes on DuckDB and in a fresh PostgreSQL schema (on the search path)."""
    schema = f"dpproxy_test_{uuid.uuid4().hex[:10]}"
    with duck_notes() as duck, psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        try:
            conn.execute(CREATE.format(schema=f'"{schema}"'))
            with conn.cursor() as cur:
                marks = ", ".join(["%s"] * 7)
                cur.executemany(INSERT.format(schema=f'"{schema}"', marks=marks), ROWS)
            conn.execute(f'SET search_path = "{schema}"')
            yield Engines(duck, conn, schema)
        finally:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
