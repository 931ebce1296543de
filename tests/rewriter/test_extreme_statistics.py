"""Every accepted query form over tables whose columns hold their types' extreme values
must run: an error that only one person's value causes would reveal it, after the charge.

DuckDB computes some functions on a column's statistics (its smallest and largest stored
values) when it plans, whatever guard the rewriter writes, so the forms run over a table
holding both ends of every type at once (DuckDB's earliest and latest dates and
timestamps, the integers' and DOUBLE's limits, DECIMAL(38,10)'s) and over one holding
infinities, NaN and the edges of the years 1 to 9999 (an infinite date hides the earliest
date from the statistics). On PostgreSQL, over its own extremes (4713 BC to 5874897 AD,
±infinity, numeric NaN). Catalogs are built from the schemas as dpproxy builds them
(proxy.backends: declared types, digits).

Found by this sweep (helper-136): a cast to integer or smallint inside an aggregate left
the columns under it raw (``SUM(hugeint_col::int)`` failed on DuckDB on one person's
HUGEINT, ``SUM(EXTRACT(year FROM d)::int)`` on PostgreSQL on an infinite date); a text
used as a condition (``WHERE label``) failed on DuckDB on the values that do not read as a
boolean.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from proxy.backends import SCHEMA_QUERY, column_digits, column_types, group_declared
from rewriter import (
    Catalog,
    ColumnPolicy,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.planner import Dialect
from tests.postgres_schema import scratch_schema

NOW = dt.datetime(2025, 6, 15, 12, 0, tzinfo=dt.UTC)
POLICY = TablePolicy(
    privacy_unit="person",
    max_rows_per_unit=5,
    max_groups_per_unit=2,
    columns={
        "d": ColumnPolicy(lower=dt.date(2020, 1, 1), upper=dt.date(2024, 12, 31)),
        "ts": ColumnPolicy(lower=dt.date(2020, 1, 1), upper=dt.date(2024, 12, 31)),
        "tz": ColumnPolicy(lower=dt.date(2020, 1, 1), upper=dt.date(2024, 12, 31)),
        **{c: ColumnPolicy(lower=0, upper=1000) for c in ("i", "i4", "i2", "hi", "ub")},
        **{c: ColumnPolicy(lower=0, upper=100) for c in ("f", "r", "dec")},
    },
)
DUCK_TABLE = """CREATE TABLE {s}.ext(person BIGINT, d DATE, ts TIMESTAMP, tz TIMESTAMPTZ,
    i BIGINT, i4 INTEGER, i2 SMALLINT, hi HUGEINT, ub UBIGINT, f DOUBLE, r REAL,
    dec DECIMAL(38,10), t VARCHAR, b BOOLEAN);
  INSERT INTO {s}.ext SELECT k % 40, DATE '2020-01-01' + (k * 3)::int,
    TIMESTAMP '2020-01-01' + to_seconds(k * 7919), TIMESTAMPTZ '2020-01-01 00:00:00+00' +
    to_seconds(k * 7919), k, k, k, k, k, k / 7, k / 3, k / 9, 'v' || (k % 7), k % 2 = 0
    FROM range(400) t(k)"""
#: Both ends of every type at once: what DuckDB's statistics hold (ISO years and weeks of
#: its earliest dates failed to compute, helper-129).
DUCK_FINITE = """INSERT INTO {s}.ext VALUES
  (100, DATE '-5877641-06-25', TIMESTAMP '-290308-12-22 00:00:00',
   TIMESTAMPTZ '-290308-12-22 00:00:00+00', -9223372036854775808, -2147483648, -32768,
   -170141183460469231731687303715884105728, 0, -1.7976931348623157e308, -3.4028235e38,
   -9999999999999999999999999999.9999999999, '', false),
  (101, DATE '5881580-07-10', TIMESTAMP '294247-01-10 04:00:54.775806',
   TIMESTAMPTZ '294247-01-10 04:00:54.775806+00', 9223372036854775807, 2147483647, 32767,
   170141183460469231731687303715884105727, 18446744073709551615, 1.7976931348623157e308,
   3.4028235e38, 9999999999999999999999999999.9999999999, repeat('z', 10000), true)"""
DUCK_INFINITE = """INSERT INTO {s}.ext VALUES
  (100, 'infinity', 'infinity', 'infinity', 0, 0, 0, 0, 0, 'inf', 'inf', 0, 'x', NULL),
  (101, '-infinity', '-infinity', '-infinity', 0, 0, 0, 0, 0, '-inf', '-inf', 0, '%', NULL),
  (102, '0001-01-01', '0001-01-01', '0001-01-01 00:00:00+00', 1, 1, 1, 1, 1, 'nan', 'nan',
   0, NULL, NULL),
  (103, '10000-01-01', '9999-12-31 23:59:59.999999', '9999-12-31 23:59:59.999999+00',
   -1, -1, -1, -1, 1, 4.9e-324, 1.4e-45, 0.0000000001, '\\', NULL),
  (104, make_date(0, 12, 31), make_timestamp(0, 12, 31, 23, 59, 59),
   '0001-01-01 00:00:00+00'::timestamptz - INTERVAL 1 second, 0, 0, 0, 0, 0, -0.0, -0.0,
   0, NULL, NULL)"""
PG_TABLE = """CREATE TABLE {s}.ext(person bigint, d date, ts timestamp, tz timestamptz,
    i bigint, i4 integer, i2 smallint, f float8, r real, dec numeric, t text, b boolean);
  INSERT INTO {s}.ext SELECT k % 40, DATE '2020-01-01' + k * 3,
    TIMESTAMP '2020-01-01' + k * 7919 * INTERVAL '1 second', TIMESTAMPTZ '2020-01-01
    00:00:00+00' + k * 7919 * INTERVAL '1 second', k, k, k, k / 7.0, k / 3.0, k / 9.0,
    'v' || (k % 7), k % 2 = 0 FROM generate_series(0, 399) k;
  INSERT INTO {s}.ext VALUES
  (100, '4713-11-24 BC', '4713-11-24 00:00:00 BC', '4713-11-24 00:00:00+00 BC',
   -9223372036854775808, -2147483648, -32768, -1.7976931348623157e308, -3.4028235e38,
   '-1e131071', '', false),
  (101, '5874897-12-31', '294276-12-31 23:59:59.999999', '294276-12-31 23:59:59.999999+00',
   9223372036854775807, 2147483647, 32767, 1.7976931348623157e308, 3.4028235e38,
   ('9' || repeat('0', 131071))::numeric, repeat('z', 10000), true),
  (102, 'infinity', 'infinity', 'infinity', 0, 0, 0, 'Infinity', 'Infinity', 'Infinity',
   'x', NULL),
  (103, '-infinity', '-infinity', '-infinity', 0, 0, 0, '-Infinity', '-Infinity',
   '-Infinity', '%', NULL),
  (104, '0001-01-01', '0001-01-01', '0001-01-01 00:00:00+00', 1, 1, 1, 'NaN', 'NaN', 'NaN',
   NULL, NULL),
  (105, '10000-01-01', '0001-12-31 23:59:59 BC', '10000-01-01 00:00:00+00', -1, -1, -1,
   4.9e-324, 1.4e-45, 1e-16383, E'\\\\', NULL)"""

MOMENTS = ("d", "ts", "tz")
FIELDS = ("year", "quarter", "month", "day", "dow", "isodow", "doy", "decade", "century")
UNITS = ("second", "minute", "hour", "day", "week", "month", "quarter", "year")
INTEGERS = ("i", "i4", "i2", "hi", "ub")
NUMBERS = (*INTEGERS, "f", "r", "dec")


def _keys() -> list[str]:
    keys = ["d", "ts", "tz", "t", "b", *NUMBERS]
    for c in MOMENTS:
        keys += [f"EXTRACT({f} FROM {c})" for f in FIELDS]
        keys += [f"EXTRACT({f} FROM {c})::int" for f in ("year", "decade", "millennium")]
        keys += [f"date_trunc('{u}', {c})" for u in UNITS]
        keys += [f"CAST(date_trunc('{u}', {c}) AS DATE)" for u in ("week", "month", "year")]
        keys += [f"CAST({c} AS DATE)", f"CAST({c} AS TIMESTAMP)"]
        keys += [f"to_char({c}, '{f}')" for f in ("YYYY-MM", "IYYY-IW", "IDDD", "J", "CC")]
        keys += [
            f"{c} + INTERVAL '1 day'",
            f"CAST({c} - INTERVAL '100000 days' AS DATE)",
            f"DATE_TRUNC('week', {c} + INTERVAL '1 day') + INTERVAL '-1 day'",
            f"floor(extract(epoch from {c}) / 60) * 60",
            f"floor(extract(epoch from {c}) / 1000000000000)",
        ][: 5 if c != "tz" else 0]  # shifts and epochs of a timestamp with time zone: refused
        keys += [
            f"EXTRACT(year FROM {c}) * 100 + EXTRACT(month FROM {c})",
            f"CASE WHEN {c} > '2021-01-01' THEN 'late' ELSE 'early' END",
        ]
    for n in NUMBERS:
        keys += [
            f"floor({n} / 10) * 10",
            f"round({n}, 1)",
            f"ceil({n})",
            f"width_bucket({n}, 0, 100, 10)",
            f"({n} > 1000)",
            f"coalesce({n}, 0)",
        ]
    keys += ["lower(t)", "substring(t, 1, 3)", "left(t, 2)", "t || 'x'", "concat(t, '-', i)"]
    keys += ["CAST(hi AS TEXT)", "coalesce(t, 'none')", "nullif(t, 'v1')"]
    return keys


def _conditions() -> list[str]:
    found = []
    for c in MOMENTS:
        found += [
            f"{c} > '2021-01-01'",
            f"{c} BETWEEN '0001-01-01' AND '9999-12-31'",
            f"{c} IN ('2021-01-01', '2022-01-01')",
            f"EXTRACT(year FROM {c}) = 2021",
            f"CAST({c} AS DATE) = '2021-01-01'",
            f"{c} > CURRENT_DATE - INTERVAL '100 years'",
        ]
    for n in NUMBERS:
        found += [
            f"{n} > 5",
            f"{n} > 1e308",
            f"{n} BETWEEN -1e308 AND 1e308",
            f"{n} IN (1, 2.5, 3)",
            f"round({n}, 2) > 1",
            f"greatest({n}, 5) > 6",
            f"{n} > 1e300 * 1e5",
        ]
    found += ["t LIKE 'v%'", "lower(t) = 'v1'", "length(t) > 3", "b", "NOT b", "t IS NULL"]
    return found


def _aggregates() -> list[str]:
    found = ["COUNT(*)", "COUNT(d)", "COUNT(DISTINCT person)"]
    for n in NUMBERS:
        found += [
            f"SUM({n})",
            f"AVG({n} * 2)",
            f"SUM(round({n}, -2))",
            f"MEDIAN({n})",
            f"SUM(CASE WHEN {n} > 5 THEN {n} ELSE 0 END)",
        ]
    for n in INTEGERS:  # the cast's columns were left raw (helper-136)
        found += [
            f"SUM({n}::int)",
            f"AVG(({n} + 1)::smallint)",
            f"SUM(CAST(coalesce({n}, 0) AS integer))",
            f"SUM(CASE WHEN b THEN {n}::int ELSE 0 END)",
        ]
    for c in MOMENTS:
        found += [
            f"SUM(EXTRACT(year FROM {c}))",
            f"AVG(EXTRACT(hour FROM {c}))" if c != "d" else "AVG(EXTRACT(doy FROM d))",
            f"SUM(EXTRACT(year FROM {c})::int)",  # an infinite date's year (PostgreSQL)
            f"MEDIAN(EXTRACT(year FROM {c})::int)",
            f"COUNT(*) FILTER (WHERE {c} > '2021-01-01')",
        ]
    return found


FORMS = (
    [f"SELECT {k} AS k, COUNT(*) FROM ext GROUP BY 1" for k in _keys()]
    + [f"SELECT COUNT(*) FROM ext WHERE {w}" for w in _conditions()]
    + [f"SELECT {a} FROM ext" for a in _aggregates()]
    + [f"SELECT b AS k, {a} FROM ext GROUP BY 1" for a in _aggregates()]
    + [f"SELECT DISTINCT {k} FROM ext" for k in ("d", "to_char(d, 'IYYY')", "CAST(tz AS DATE)")]
)
#: Columns PostgreSQL has no type for.
DUCKDB_ONLY = ("hi", "ub")


def _catalog(declared_rows: list[tuple[object, ...]], schema: str, *, finite: bool) -> Catalog:
    declared = group_declared(declared_rows)
    policy = POLICY.model_copy(
        update={"columns": {c: p for c, p in POLICY.columns.items() if c in declared["ext"]}}
    )
    return build_catalog(
        column_types(declared),
        {"ext": policy},
        schema=schema,
        digits=column_digits(declared),
        finite_decimals=finite,
    )


@pytest.fixture(scope="module")
def duck() -> Iterator[tuple[duckdb.DuckDBPyConnection, dict[str, Catalog]]]:
    """One connection; schema ``finite`` holds both ends of every type, ``infinite`` the
    infinities, NaN and the edges of the years 1 to 9999."""
    conn = duckdb.connect(":memory:")
    catalogs = {}
    for schema, extra in (("finite", DUCK_FINITE), ("infinite", DUCK_INFINITE)):
        conn.execute(f"CREATE SCHEMA {schema}")
        conn.execute(DUCK_TABLE.format(s=schema))
        conn.execute(extra.format(s=schema))
        rows = conn.execute(SCHEMA_QUERY.format(placeholder="?"), [schema]).fetchall()
        catalogs[schema] = _catalog(rows, schema, finite=True)
    yield conn, catalogs
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], Catalog]]:
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(PG_TABLE.format(s=f'"{schema}"'))
        rows = conn.execute(SCHEMA_QUERY.format(placeholder="%s"), [schema]).fetchall()
        yield conn, _catalog(rows, schema, finite=False)


def _request(dialect: Dialect) -> PlanRequest:
    # A zone of one fixed offset (other than UTC), where GROUP BY tz is accepted.
    return PlanRequest(1.0, dialect, delta=1e-6, time_zone="Etc/GMT-3", now=NOW)


@pytest.mark.parametrize("sql", FORMS)
def test_no_form_fails_on_duckdb_s_extremes(
    sql: str, duck: tuple[duckdb.DuckDBPyConnection, dict[str, Catalog]]
) -> None:
    conn, catalogs = duck
    for schema, catalog in catalogs.items():
        made = plan(sql, catalog, _request("duckdb"))
        for constant in made.constants:  # as the pipeline checks them before the charge
            conn.execute(f"SELECT {constant.sql}").fetchall()
        try:
            conn.execute(made.sql).fetchall()
        except duckdb.Error as error:
            pytest.fail(f"{schema}: {error}")


@pytest.mark.parametrize("sql", [f for f in FORMS if not any(c in f for c in DUCKDB_ONLY)])
def test_no_form_fails_on_postgresql_s_extremes(
    sql: str, postgres: tuple[psycopg.Connection[tuple[object, ...]], Catalog]
) -> None:
    conn, catalog = postgres
    made = plan(sql, catalog, _request("postgres"))
    try:
        conn.execute(made.sql).fetchall()
    except psycopg.Error as error:
        pytest.fail(str(error))


@pytest.mark.parametrize(
    "condition",
    [
        "t",
        "NOT t",
        "t IS TRUE",
        "t AND b",
        "b OR lower(t)",
        "coalesce(t, 'true')",
        "CASE WHEN b THEN t END",
        "i",
        "d",
    ],
)
def test_a_value_that_is_not_a_boolean_is_no_condition(
    condition: str, duck: tuple[duckdb.DuckDBPyConnection, dict[str, Catalog]]
) -> None:
    """DuckDB cast each text to a boolean: ``WHERE t`` answered while every text read as
    one ('true', 'f'), and failed on a person's other text, after the charge; PostgreSQL
    refuses it whatever the data (42804)."""
    _, catalogs = duck
    for sql in (
        f"SELECT COUNT(*) FROM ext WHERE {condition}",
        f"SELECT COUNT(*) FILTER (WHERE {condition}) FROM ext",
        f"SELECT SUM(CASE WHEN {condition} THEN 1 ELSE 0 END) FROM ext",
    ):
        with pytest.raises(Rejected) as caught:
            plan(sql, catalogs["finite"], _request("duckdb"))
        assert "not a boolean" in caught.value.message
        assert caught.value.sqlstate == "42804"


@pytest.mark.parametrize(
    "condition",
    [
        "f > 1e+308 * 2",
        "f > 1e200 * 1e200",
        "f > 1e-200 * 1e-200",
        "f > -(1e308 * 10)",
        "f IN (1, 1e308 * 10)",
        "f BETWEEN 0 AND 1e308 * 10",
        "f > 1e308 * 10 / 100",  # DuckDB: infinity / 100; PostgreSQL: 1e307
        "coalesce(f, 1e308 * 10) > 5",
        "dec > 1e308 * 10",
        "i > 1e-200 * 1e-200 * 1e300",
        "CASE WHEN f > 1e308 * 10 THEN true END",
    ],
)
def test_a_computed_number_beyond_double_s_range_is_refused(
    condition: str,
    duck: tuple[duckdb.DuckDBPyConnection, dict[str, Catalog]],
    postgres: tuple[psycopg.Connection[tuple[object, ...]], Catalog],
) -> None:
    """PostgreSQL computes 1e308 * 2 as a NUMERIC, which the constant check computes,
    and converts it to double precision where it meets the column, when it plans: 22003
    whatever the data, after the charge (helper-131). DuckDB computes infinity."""
    for sql in (
        f"SELECT COUNT(*) FROM ext WHERE {condition}",
        f"SELECT COUNT(*) FILTER (WHERE {condition}) FROM ext",
        f"SELECT ({condition}) AS k, COUNT(*) FROM ext GROUP BY 1",
    ):
        with pytest.raises(Rejected) as caught:
            plan(sql, duck[1]["finite"], _request("duckdb"))
        assert "beyond the range of double precision" in caught.value.message
        with pytest.raises(Rejected) as caught:
            plan(sql, postgres[1], _request("postgres"))
        assert "beyond the range of double precision" in caught.value.message


@pytest.mark.parametrize(
    "condition",
    [
        "r IN (1, 1e39)",
        "r NOT IN (1, -1e39)",
        "r IN (1, 1e-50)",
        "r = ANY('{1,1e39}')",
        "coalesce(r, 1e39) > 1",
        "greatest(r, 1e39) > 1",
        "CASE WHEN b THEN r ELSE 1e39 END > 1",
    ],
)
def test_a_number_beyond_real_s_range_beside_a_real_is_refused(
    condition: str, postgres: tuple[psycopg.Connection[tuple[object, ...]], Catalog]
) -> None:
    """PostgreSQL converts an IN list's numbers, and a choice's, to a real column's type
    when it plans: 22003 whatever the data, after the charge."""
    conn, catalog = postgres
    sql = f"SELECT COUNT(*) FROM ext WHERE {condition}"
    with pytest.raises(Rejected) as caught:
        plan(sql, catalog, _request("postgres"))
    assert "beyond the range of real" in caught.value.message
    with pytest.raises(psycopg.errors.NumericValueOutOfRange):  # what it would have done
        conn.execute(f"SELECT COUNT(*) FROM {catalog.tables['ext'].schema}.ext WHERE {condition}")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM ext WHERE r IN (1, 2.5, 3.4e38)",
        "SELECT COUNT(*) FROM ext WHERE r = 1e39",  # compared as double precision
        "SELECT COUNT(*) FROM ext WHERE r IN (1e39)",
        "SELECT COUNT(*) FROM ext WHERE f > 1e300 * 1e5",
        "SELECT COUNT(*) FROM ext WHERE f > 1e-300 - 1e-300",
        "SELECT COUNT(*) FROM ext WHERE f > 100 / 1.1",
        "SELECT SUM(coalesce(r, 0.5)) FROM ext",
    ],
)
def test_numbers_within_range_are_answered(
    sql: str, postgres: tuple[psycopg.Connection[tuple[object, ...]], Catalog]
) -> None:
    conn, catalog = postgres
    conn.execute(plan(sql, catalog, _request("postgres")).sql).fetchall()
