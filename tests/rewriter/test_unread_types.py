"""Columns of types dpproxy does not read as a number, text, date, timestamp or boolean:
every query that names one is answered, or refused before it is charged.

A DuckDB TIMESTAMP_NS (pandas' and Arrow's datetime64[ns]) was read as a timestamp, and
DuckDB converted every timestamp compared with it to nanoseconds, which fails outside the
years 1677 to 2262 (dpproxy's own bounds, years 1 to 9999, included): every query on it
failed after the charge (helper-131). Text functions of a TIME, UUID, BLOB, LIST… failed on
every row, after the charge; two such values of different types compared
(``interval_col = json_col``) failed on DuckDB on the values that do not convert, which
reveals them (helper-136). PostgreSQL's daterange was read as a date (its name's prefix).
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from proxy.backends import (
    SCHEMA_QUERY,
    column_digits,
    column_type,
    column_types,
    group_declared,
)
from rewriter import (
    Catalog,
    ColumnPolicy,
    ColumnType,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.planner import Dialect
from tests.postgres_schema import scratch_schema

BOUNDS = ColumnPolicy(lower="2020-01-01", upper="2024-12-31")
POLICY = TablePolicy(
    privacy_unit="pid",
    max_rows_per_unit=5,
    max_groups_per_unit=2,
    columns={"tns": BOUNDS, "tsec": BOUNDS, "tms": BOUNDS, "x": ColumnPolicy(lower=0, upper=9)},
)
TABLE = """CREATE TYPE mood AS ENUM ('sad', 'ok', 'true');
  CREATE TABLE obs(pid BIGINT, tns TIMESTAMP_NS, tsec TIMESTAMP_S, tms TIMESTAMP_MS,
    tm TIME, iv INTERVAL, u UUID, bl BLOB, li INTEGER[], st STRUCT(a INT), js JSON,
    en mood, x DOUBLE);
  INSERT INTO obs SELECT k % 50, TIMESTAMP '2020-01-01' + to_seconds(k * 3607),
    TIMESTAMP '2020-01-01' + to_seconds(k * 3607), TIMESTAMP '2020-01-01' +
    to_seconds(k * 3607), TIME '10:00:00', to_seconds(k), uuid(), 'ab'::BLOB, [k, 2],
    {'a': k}, '"1 day"', 'true', k / 7 FROM range(500) t(k);
  INSERT INTO obs (pid, tns, tsec, tms, js, en) VALUES
    (7, '2262-04-11 23:47:16.854775', '294247-01-10 04:00:54'::TIMESTAMP,
     '294247-01-10 04:00:54'::TIMESTAMP, '{"a": 1}', 'ok'),
    (8, '1677-09-22 00:12:44', '-290308-12-22'::TIMESTAMP, '-290308-12-22'::TIMESTAMP,
     NULL, NULL)"""
NS_FORMS = [
    "SELECT COUNT(*) FROM obs WHERE {c} > '1000-01-01'",
    "SELECT COUNT(*) FROM obs WHERE {c} BETWEEN '2021-01-01' AND '2022-01-01'",
    "SELECT COUNT(*) FROM obs WHERE {c} IS NULL",
    "SELECT {c} AS k, COUNT(*) FROM obs GROUP BY 1",
    "SELECT CAST({c} AS DATE) AS k, COUNT(*) FROM obs GROUP BY 1",
    "SELECT date_trunc('month', {c}) AS k, COUNT(*) FROM obs GROUP BY 1",
    "SELECT to_char({c}, 'IYYY-IW') AS k, COUNT(*) FROM obs GROUP BY 1",
    "SELECT EXTRACT(hour FROM {c}) AS k, COUNT(*) FROM obs GROUP BY 1",
    "SELECT floor(extract(epoch from {c}) / 60) * 60 AS k, COUNT(*) FROM obs GROUP BY 1",
    "SELECT {c} + INTERVAL '1 day' AS k, COUNT(*) FROM obs GROUP BY 1",
    "SELECT AVG(EXTRACT(year FROM {c})), COUNT({c}) FROM obs",
    "SELECT DISTINCT CAST({c} AS DATE) FROM obs",
    "SELECT AVG(m) FROM (SELECT pid, COUNT({c}) AS m FROM obs GROUP BY pid) s",
    "WITH s AS (SELECT * FROM obs) SELECT COUNT(*) FROM s WHERE {c} > '1000-01-01'",
]


def _catalog(conn: duckdb.DuckDBPyConnection) -> Catalog:
    declared = group_declared(
        conn.execute(SCHEMA_QUERY.format(placeholder="?"), ["main"]).fetchall()
    )
    return build_catalog(
        column_types(declared),
        {"obs": POLICY},
        schema="main",
        digits=column_digits(declared),
        finite_decimals=True,
    )


@pytest.fixture(scope="module")
def duck() -> Iterator[tuple[duckdb.DuckDBPyConnection, Catalog]]:
    conn = duckdb.connect(":memory:")
    conn.execute(TABLE)
    yield conn, _catalog(conn)
    conn.close()


def _planned(sql: str, catalog: Catalog, dialect: Dialect = "duckdb") -> str:
    return plan(sql, catalog, PlanRequest(1.0, dialect, delta=1e-6)).sql


@pytest.mark.parametrize("form", NS_FORMS)
def test_a_nanosecond_timestamp_is_refused_before_the_charge(
    form: str, duck: tuple[duckdb.DuckDBPyConnection, Catalog]
) -> None:
    """Refused, saying what to do, where every query on it failed after the charge."""
    _, catalog = duck
    with pytest.raises(Rejected) as caught:
        _planned(form.format(c="tns"), catalog)
    assert "TIMESTAMP_NS" in caught.value.message
    assert "CAST" in (caught.value.hint or "")


@pytest.mark.parametrize("column", ["tsec", "tms"])
@pytest.mark.parametrize("form", NS_FORMS)
def test_second_and_millisecond_timestamps_are_answered(
    form: str, column: str, duck: tuple[duckdb.DuckDBPyConnection, Catalog]
) -> None:
    """Held at DuckDB's extreme timestamps (they convert to microseconds exactly)."""
    conn, catalog = duck
    conn.execute(_planned(form.format(c=column), catalog)).fetchall()


def test_a_view_casting_to_timestamp_is_answered() -> None:
    """The way out the refusal names."""
    conn = duckdb.connect(":memory:")
    conn.execute(TABLE)
    conn.execute("ALTER TABLE obs RENAME TO obs_ns")
    conn.execute("CREATE VIEW obs AS SELECT * REPLACE (CAST(tns AS TIMESTAMP) AS tns) FROM obs_ns")
    catalog = _catalog(conn)
    for form in NS_FORMS:
        conn.execute(_planned(form.format(c="tns"), catalog)).fetchall()
    conn.close()


@pytest.mark.parametrize(
    "condition",
    [
        "lower(tm) = 'x'",
        "upper(u) = 'x'",
        "trim(iv) = 'x'",
        "substring(bl, 1, 2) = 'x'",
        "length(tm) > 3",
        "length(st) > 3",
        "li || 'a' = 'x'",
        "iv = js",  # DuckDB casts each JSON value to an INTERVAL: '"1 day"' does, '{"a": 1}' not
        "iv < js",
        "iv IS DISTINCT FROM js",
        "en = u",
        "iv IN (js, u)",
        "nullif(iv, js) IS NULL",
        "CASE iv WHEN js THEN true END",
        "coalesce(iv, js) IS NULL",
        "js = NULL",
        "en",  # a label that reads as a boolean ('true') passed, another failed
        "NOT js",
    ],
)
def test_values_of_unread_types_that_could_fail_are_refused(
    condition: str, duck: tuple[duckdb.DuckDBPyConnection, Catalog]
) -> None:
    _, catalog = duck
    with pytest.raises(Rejected):
        _planned(f"SELECT COUNT(*) FROM obs WHERE {condition}", catalog)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(u), COUNT(js) FROM obs",
        "SELECT COUNT(*) FROM obs WHERE tm IS NULL OR iv IS NOT NULL",
        "SELECT CASE WHEN en IS NULL THEN 'n' ELSE 'y' END AS k, COUNT(*) FROM obs GROUP BY 1",
        "SELECT COUNT(*) FILTER (WHERE li IS NULL) FROM obs",
    ],
)
def test_values_of_unread_types_are_counted(
    sql: str, duck: tuple[duckdb.DuckDBPyConnection, Catalog]
) -> None:
    conn, catalog = duck
    conn.execute(_planned(sql, catalog)).fetchall()


def test_a_uuid_key_joins_a_public_table() -> None:
    """Two columns of one type dpproxy does not read compare: nothing is converted."""
    conn = duckdb.connect(":memory:")
    conn.execute(
        "CREATE TABLE v(pid BIGINT, dep UUID, js JSON); "
        "CREATE TABLE deps(id UUID PRIMARY KEY, name VARCHAR); "
        "INSERT INTO deps SELECT uuid(), 'n' || k FROM range(5) t(k); "
        "INSERT INTO v SELECT k, (SELECT min(id) FROM deps), '{}' FROM range(100) t(k)"
    )
    declared = group_declared(
        conn.execute(SCHEMA_QUERY.format(placeholder="?"), ["main"]).fetchall()
    )
    catalog = build_catalog(
        column_types(declared),
        {
            "v": TablePolicy(privacy_unit="pid", max_rows_per_unit=3),
            "deps": TablePolicy(public=True),
        },
        schema="main",
        unique={"deps": ["id"]},
    )
    sql = "SELECT name, COUNT(*) FROM v JOIN deps ON v.dep = deps.id GROUP BY name"
    conn.execute(_planned(sql, catalog)).fetchall()
    with pytest.raises(Rejected):  # a JSON and a UUID: DuckDB would cast each JSON value
        _planned("SELECT COUNT(*) FROM v JOIN deps ON v.js = deps.id", catalog)
    conn.close()


def test_postgresql_ranges_are_not_dates(pg_dsn: str) -> None:
    """daterange and datemultirange begin as "date": read as dates, ``dr > '2021-01-01'``
    failed on every row (a range literal), after the charge."""
    assert column_type("date") is column_type("DATE") is ColumnType.DATE
    assert column_type("daterange") is column_type("datemultirange") is ColumnType.OTHER
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(
            f'CREATE TABLE "{schema}".r (pid bigint, dr daterange, js json);'
            f"INSERT INTO \"{schema}\".r VALUES (1, '[2020-01-01,2020-02-01)', '{{}}')"
        )
        declared = group_declared(
            conn.execute(SCHEMA_QUERY.format(placeholder="%s"), [schema]).fetchall()
        )
        catalog = build_catalog(
            column_types(declared),
            {"r": TablePolicy(privacy_unit="pid", max_rows_per_unit=1)},
            schema=schema,
        )
        for condition in ("dr > '2021-01-01'", "dr = DATE '2021-01-01'", "js = NULL", "js = js"):
            sql = f"SELECT COUNT(*) FROM r WHERE {condition}"
            with pytest.raises(Rejected):
                _planned(sql, catalog, "postgres")
            with pytest.raises(psycopg.Error):  # as PostgreSQL would have failed
                conn.execute(sql.replace("FROM r", f'FROM "{schema}".r'))
        conn.execute(_planned("SELECT COUNT(dr) FROM r WHERE js IS NULL", catalog, "postgres"))
