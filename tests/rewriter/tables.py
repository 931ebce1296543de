"""A small table of visits, the same in DuckDB and PostgreSQL, for rewriter tests."""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import psycopg

from rewriter import Catalog, ColumnPolicy, ColumnType, TablePolicy, build_catalog

Row = tuple[int, int, str, float | None, int | None]

COLUMNS = {
    "visit_id": ColumnType.INTEGER,
    "patient_id": ColumnType.INTEGER,
    "department": ColumnType.TEXT,
    "cost": ColumnType.FLOAT,
    "stay": ColumnType.INTEGER,
}
POLICY = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=3,
    columns={"cost": ColumnPolicy(lower=0, upper=100), "stay": ColumnPolicy(lower=0, upper=10)},
)
CREATE = (
    "CREATE TABLE {schema}.visits (visit_id BIGINT, patient_id BIGINT, department VARCHAR, "
    "cost DOUBLE PRECISION, stay INTEGER)"
)

SAMPLE_ROWS: list[Row] = [
    (1, 1, "A", 10.0, 1),
    (2, 1, "A", 250.0, 0),  # clamped to 100
    (3, 1, "B", -5.0, 12),  # clamped to 0 and 10
    (4, 1, "B", 1.0, 1),  # patient 1 has 4 rows: bounded to 3 rows' worth
    (5, 2, "A", float("nan"), 2),  # NaN becomes NULL
    (6, 2, "A", float("inf"), None),  # infinity becomes NULL
    (7, 3, "B", 33.25, 4),
    (8, 4, "A", None, 3),
]


def catalog(schema: str) -> Catalog:
    return build_catalog({"visits": COLUMNS}, {"visits": POLICY}, schema=schema)


def duckdb_with(rows: Sequence[Row]) -> duckdb.DuckDBPyConnection:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    if rows:
        conn.executemany("INSERT INTO main.visits VALUES (?, ?, ?, ?, ?)", list(rows))
    return conn


def load_postgres(dsn: str, schema: str, rows: Sequence[Row]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".visits VALUES (%s, %s, %s, %s, %s)', list(rows)
            )
