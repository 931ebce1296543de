"""A small table of visits, the same in DuckDB and PostgreSQL, for rewriter tests."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import psycopg

from rewriter import Catalog, ColumnPolicy, ColumnType, TablePolicy, build_catalog
from tests.rewriter.scratch import fresh_duckdb, insert

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
    max_groups_per_unit=2,
    columns={
        "cost": ColumnPolicy(lower=0, upper=100),
        "stay": ColumnPolicy(lower=1, upper=10),
        "department": ColumnPolicy(domain=["A", "B", "C"]),
    },
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

#: Four persons for partition selection: stay 1 has persons 1, 2 and 3; stay 2 and NULL
#: one each (person 4); department A has persons 1, 2 and 4, B persons 3 and 4.
SELECTION_ROWS: list[Row] = [
    (1, 1, "A", 10.0, 1),
    (2, 2, "A", 20.0, 1),
    (3, 3, "B", 30.0, 1),
    (4, 4, "B", 40.0, 2),
    (5, 4, "A", 50.0, None),
]


PATIENT_COLUMNS = {
    "patient_id": ColumnType.INTEGER,
    "sex": ColumnType.TEXT,
    "birth_year": ColumnType.INTEGER,
}
PATIENT_POLICY = TablePolicy(
    privacy_unit="patient_id",
    max_rows_per_unit=1,
    columns={
        "sex": ColumnPolicy(domain=["F", "M"]),
        "birth_year": ColumnPolicy(lower=1900, upper=2025),
    },
)
DEPARTMENT_COLUMNS = {"name": ColumnType.TEXT, "floor": ColumnType.INTEGER}
DEPARTMENT_POLICY = TablePolicy(
    public=True, columns={"floor": ColumnPolicy(domain=[1, 2], lower=0, upper=9)}
)
RX_COLUMNS = {
    "rx_id": ColumnType.INTEGER,
    "visit_id": ColumnType.INTEGER,
    "dose": ColumnType.INTEGER,
}
RX_POLICY = TablePolicy(
    privacy_unit="visit_id -> visits.visit_id",  # prescriptions reach patients via visits
    max_rows_per_unit=2,
    max_groups_per_unit=2,
    columns={"dose": ColumnPolicy(lower=0, upper=8)},
)
# visit 1, 2, 3 are patient 1's; visit 7 is patient 3's; visit 99 does not exist.
PRESCRIPTIONS = [(1, 1, 5), (2, 1, 10), (3, 2, 1), (4, 3, 7), (5, 7, 2), (6, 7, 3), (7, 99, 1)]
PATIENTS = [(1, "F", 1950), (2, "M", 1990), (3, "F", 2001), (5, "M", 1970)]
DEPARTMENTS = [("A", 1), ("B", 2), ("B", 2)]  # B listed twice: a join can multiply rows
#: The columns a public table may be joined on (rewriter.catalog.TableInfo.unique_columns).
#: departments.name is declared unique although B is listed twice: a join on it then
#: multiplies rows, which the bounding must survive (a server finds keys from the
#: database, proxy.public_keys, and would not take this one).
UNIQUE = {"departments": ["name"]}
SETUP = [
    "CREATE TABLE {schema}.patients (patient_id BIGINT, sex VARCHAR, birth_year INTEGER)",
    "CREATE TABLE {schema}.departments (name VARCHAR, floor INTEGER)",
    "CREATE TABLE {schema}.prescriptions (rx_id BIGINT, visit_id BIGINT, dose INTEGER)",
    "INSERT INTO {schema}.prescriptions VALUES "
    + ", ".join(f"({r}, {v}, {d})" for r, v, d in PRESCRIPTIONS),
    "INSERT INTO {schema}.patients VALUES "
    + ", ".join(f"({p}, '{s}', {y})" for p, s, y in PATIENTS),
    "INSERT INTO {schema}.departments VALUES " + ", ".join(f"('{n}', {f})" for n, f in DEPARTMENTS),
]


def catalog(schema: str) -> Catalog:
    return build_catalog(
        {
            "visits": COLUMNS,
            "patients": PATIENT_COLUMNS,
            "departments": DEPARTMENT_COLUMNS,
            "prescriptions": RX_COLUMNS,
        },
        {
            "visits": POLICY,
            "patients": PATIENT_POLICY,
            "departments": DEPARTMENT_POLICY,
            "prescriptions": RX_POLICY,
        },
        schema=schema,
        unique=UNIQUE,
    )


def duckdb_with(rows: Sequence[Row]) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB database with the test tables and ``rows`` of visits."""
    return _filled(duckdb.connect(":memory:"), rows)


def scratch_with(rows: Sequence[Row]) -> duckdb.DuckDBPyConnection:
    """As ``duckdb_with``, made cheaply (tests.rewriter.scratch): for tests that make many."""
    conn = fresh_duckdb()
    conn.execute(";\n".join(s.format(schema="main") for s in (CREATE, *SETUP)))
    insert(conn, "main.visits", rows)
    return conn


def _filled(conn: duckdb.DuckDBPyConnection, rows: Sequence[Row]) -> duckdb.DuckDBPyConnection:
    conn.execute(CREATE.format(schema="main"))
    for statement in SETUP:
        conn.execute(statement.format(schema="main"))
    if rows:
        conn.executemany("INSERT INTO main.visits VALUES (?, ?, ?, ?, ?)", list(rows))
    return conn


def load_postgres(dsn: str, schema: str, rows: Sequence[Row]) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        for statement in SETUP:
            conn.execute(statement.format(schema=f'"{schema}"'))
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".visits VALUES (%s, %s, %s, %s, %s)', list(rows)
            )


def duckdb_file(path: Path, rows: Sequence[Row] = SAMPLE_ROWS) -> Path:
    """A DuckDB database file at ``path`` with the test tables and ``rows`` of visits."""
    _filled(duckdb.connect(str(path)), rows).close()
    return path
