"""Columns keep their declared digits (``ColumnInfo.digits``) so that the rewriter can leave
number literals as written where one DECIMAL holds both sides (DuckDB compares them
exactly and pushes the filter into its scan) and spell them as DOUBLE only where a wider
decimal could overflow on extreme values: an error that would reveal them.

Every accepted comparison runs on tables holding each type's extreme values, on DuckDB and
PostgreSQL, with catalogs built from the engine's own information_schema, as the proxy
builds them."""

from __future__ import annotations

import duckdb
import psycopg
import pytest

from proxy.backends import (
    SCHEMA_QUERY,
    DeclaredType,
    column_digits,
    column_types,
    declared_digits,
    group_declared,
)
from rewriter import Catalog, PlanRequest, Rejected, TablePolicy, build_catalog, plan

_MAX38 = "9" * 38
DUCKDB_TYPES = {
    "TINYINT": ("127", "-128"),
    "INTEGER": ("2147483647", "-2147483648"),
    "BIGINT": (str(2**63 - 1), str(-(2**63))),
    "UBIGINT": (str(2**64 - 1), "0"),
    "HUGEINT": (str(2**127 - 1), str(-(2**127))),
    "DECIMAL(4,4)": ("0.9999", "-0.9999"),
    "DECIMAL(15,2)": ("9999999999999.99", "-9999999999999.99"),
    "DECIMAL(38,0)": (_MAX38, "-" + _MAX38),
    "DECIMAL(38,37)": ("9." + "9" * 37, "-9." + "9" * 37),
    "DECIMAL(38,10)": ("9" * 28 + "." + "9" * 10, "-" + "9" * 28 + "." + "9" * 10),
    "DOUBLE": ("1e308", "-1e308"),
}
POSTGRES_TYPES = {
    "smallint": ("32767", "-32768"),
    "bigint": (str(2**63 - 1), str(-(2**63))),
    "numeric(15,2)": ("9999999999999.99", "-9999999999999.99"),
    "numeric(38,37)": ("9." + "9" * 37, "-9." + "9" * 37),
    "numeric": ("1e400", "-1e400"),
    "double precision": ("1e308", "-1e308"),
}
LITERALS = ["24", "0.05", "-3.25", "10", "123456789012345678", "0.0000000001", "1234567890.5"]
PAIR_FORMS = [
    "x < y",
    "x = y",
    "coalesce(x, y) > 0",
    "x IN (y, 1)",
    "CASE WHEN x > 0 THEN x ELSE y END > 0",
]


def _catalog(rows: list[tuple[object, ...]], schema: str) -> Catalog:
    declared = group_declared(rows)
    return build_catalog(
        column_types(declared),
        {"t": TablePolicy(privacy_unit="pid")},
        schema=schema,
        digits=column_digits(declared),
    )


def _queries(types: list[str]) -> list[str]:
    single = [f"x {op} {lit}" for op in ("<", "=") for lit in LITERALS]
    single.append(f"x BETWEEN {LITERALS[1]} AND {LITERALS[6]}")
    return [f"SELECT COUNT(*) FROM t WHERE {w}" for w in single + PAIR_FORMS]


def _accepted(sql: str, catalog: Catalog, dialect: str) -> str | None:
    try:
        return plan(sql, catalog, PlanRequest(1.0, dialect=dialect)).sql
    except Rejected:
        return None


@pytest.mark.parametrize("x", list(DUCKDB_TYPES))
def test_accepted_comparisons_never_fail_on_duckdb_extremes(x: str) -> None:
    conn = duckdb.connect()
    ran = 0
    for y, y_values in DUCKDB_TYPES.items():
        conn.execute(f"CREATE OR REPLACE TABLE main.t (pid BIGINT, x {x}, y {y})")
        catalog = _catalog(
            conn.execute(SCHEMA_QUERY.format(placeholder="'main'")).fetchall(), "main"
        )
        for pid, (a, b) in enumerate((a, b) for a in DUCKDB_TYPES[x] for b in y_values):
            conn.execute(f"INSERT INTO main.t VALUES ({pid}, '{a}'::{x}, '{b}'::{y})")
        for sql in _queries(list(DUCKDB_TYPES)):
            rewritten = _accepted(sql, catalog, "duckdb")
            if rewritten is not None:
                conn.execute(rewritten).fetchall()  # raises on a data-dependent error
                ran += 1
    assert ran > 0


@pytest.mark.parametrize("x", list(POSTGRES_TYPES))
def test_accepted_comparisons_never_fail_on_postgres_extremes(
    x: str, pg_dsn: str, pg_schema: str
) -> None:
    ran = 0
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for index, (y, y_values) in enumerate(POSTGRES_TYPES.items()):
            conn.execute(f'DROP TABLE IF EXISTS "{pg_schema}".t')
            conn.execute(f'CREATE TABLE "{pg_schema}".t (pid BIGINT, x {x}, y {y})')
            rows = conn.execute(SCHEMA_QUERY.format(placeholder="%s"), (pg_schema,)).fetchall()
            catalog = _catalog(rows, pg_schema)
            for a in POSTGRES_TYPES[x]:
                for b in y_values:
                    conn.execute(
                        f"INSERT INTO \"{pg_schema}\".t VALUES ({index}, '{a}'::{x}, '{b}'::{y})"
                    )
            for sql in _queries(list(POSTGRES_TYPES)):
                rewritten = _accepted(sql, catalog, "postgres")
                if rewritten is not None:
                    conn.execute(rewritten).fetchall()
                    ran += 1
    assert ran > 0


def _duckdb_catalog(ddl: str) -> Catalog:
    conn = duckdb.connect()
    conn.execute(f"CREATE TABLE main.t (pid BIGINT, {ddl})")
    return _catalog(conn.execute(SCHEMA_QUERY.format(placeholder="'main'")).fetchall(), "main")


def test_literals_that_fit_the_columns_decimal_keep_their_spelling() -> None:
    catalog = _duckdb_catalog("x DECIMAL(15,2), y INTEGER")
    sql = plan(
        "SELECT COUNT(*) FROM t WHERE x BETWEEN 0.05 AND 0.07 AND y < 24 AND x < 24",
        catalog,
        PlanRequest(1.0),
    ).sql
    assert "BETWEEN 0.05 AND 0.07" in sql
    assert "< 24" in sql and "e+" not in sql and "e-" not in sql


def test_literals_beyond_the_columns_decimal_are_spelled_as_doubles() -> None:
    catalog = _duckdb_catalog("x DECIMAL(38,37), h HUGEINT")
    sql = plan("SELECT COUNT(*) FROM t WHERE x < 10 AND h > 0.5", catalog, PlanRequest(1.0)).sql
    assert '"x" < 1.0e+1' in sql and '"h" > 5e-1' in sql


def test_decimal_columns_compare_with_columns_of_one_decimal_only() -> None:
    catalog = _duckdb_catalog("x DECIMAL(15,2), y INTEGER, z DECIMAL(38,37), f DOUBLE")
    assert _accepted("SELECT COUNT(*) FROM t WHERE x < y", catalog, "duckdb") is not None
    for refused in ("x < z", "x < f", "coalesce(x, f) > 0"):
        with pytest.raises(Rejected, match="compares a decimal column with another column"):
            plan(f"SELECT COUNT(*) FROM t WHERE {refused}", catalog, PlanRequest(1.0))


@pytest.mark.parametrize(
    ("declared", "digits"),
    [
        (DeclaredType("INTEGER", precision=32, scale=0), (10, 0)),
        (DeclaredType("ubigint"), (20, 0)),
        (DeclaredType("HUGEINT", precision=128, scale=0), None),
        (DeclaredType("DECIMAL(15,2)", precision=15, scale=2), (13, 2)),
        (DeclaredType("numeric", precision=4, scale=4), (0, 4)),
        (DeclaredType("numeric"), None),  # PostgreSQL's unconstrained NUMERIC
        (DeclaredType("numeric", precision=3, scale=5), None),  # PostgreSQL 15 allows it
        (DeclaredType("numeric", precision=3, scale=-2), None),
        (DeclaredType("double precision", precision=53), None),
    ],
)
def test_declared_digits(declared: DeclaredType, digits: tuple[int, int] | None) -> None:
    assert declared_digits(declared) == digits


# A third review's findings: each failed on DuckDB only once the extreme row was stored.
REVIEWED = [
    "SELECT COUNT(*) FROM t WHERE COALESCE(i1, 0.5) > i4",
    "SELECT COUNT(*) FROM t WHERE i4 BETWEEN LEAST(i1, 0.5) AND 1",
    "SELECT COUNT(*) FILTER (WHERE CASE WHEN i1 > 0 THEN 0.5 ELSE 0 END > i4) FROM t",
    "SELECT COUNT(*) FROM t WHERE CASE WHEN i1 > 0 THEN 0.0000000000000000000000001 ELSE 0 END"
    " < CASE WHEN i2 > 0 THEN 1234567890123456789012345678901234567.5 ELSE 0 END",
    "SELECT COUNT(*) FROM t WHERE CASE name WHEN 5 THEN 1 ELSE 0 END = 1",
    "SELECT COUNT(*) FROM t WHERE CASE d1 WHEN i1 THEN 1 END = 1",
    "SELECT COUNT(*) FROM t WHERE CASE i4 WHEN 0.5 THEN 1 END = 1",
    "SELECT SUM(CASE d1 WHEN i1 THEN 1 ELSE 0 END) FROM t",
    "SELECT COUNT(*) FROM t WHERE i1 IN (SELECT x FROM u)",
    "SELECT COUNT(*) FROM t WHERE i4 IN (SELECT x FROM u)",
    "SELECT COUNT(*) FROM t WHERE d2 IN (SELECT h FROM u)",
]


@pytest.mark.parametrize("sql", REVIEWED)
def test_reviewed_forms_never_fail_on_duckdb_extremes(sql: str) -> None:
    conn = duckdb.connect()
    conn.execute(
        "CREATE TABLE main.t (pid BIGINT, i1 INTEGER, i2 BIGINT, i4 HUGEINT, name VARCHAR, "
        "d1 DECIMAL(38,37), d2 DECIMAL(15,2))"
    )
    conn.execute("CREATE TABLE main.u (x DECIMAL(38,37), h HUGEINT)")
    conn.execute("INSERT INTO main.u VALUES (1.5, 7)")
    declared = group_declared(conn.execute(SCHEMA_QUERY.format(placeholder="'main'")).fetchall())
    catalog = build_catalog(
        column_types(declared),
        {"t": TablePolicy(privacy_unit="pid"), "u": TablePolicy(public=True)},
        schema="main",
        digits=column_digits(declared),
    )
    rewritten = _accepted(sql, catalog, "duckdb")
    if rewritten is None:
        return
    conn.execute(rewritten).fetchall()
    conn.execute(
        f"INSERT INTO main.t VALUES (1, 10, 5, {2**127 - 1}, 'abc', 0.5, 9999999999999.99), "
        "(2, NULL, NULL, 1, 'x', NULL, NULL)"
    )
    conn.execute(rewritten).fetchall()  # raises on a data-dependent error
