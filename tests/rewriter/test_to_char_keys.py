"""GROUP BY to_char(c, 'format') of a date or timestamp column (rewriter.passes.to_char_keys):
the monthly reports analysts write, ``to_char(visit_date, 'YYYY-MM')``, and every keyword
of a date or a time of day that dpproxy groups by.

Every day from 1999-12-20 to 2026-01-10, one person each, with a timestamp at a different
time of each day: dpproxy's bounded exact answer (one row per person: each count is
exact) on DuckDB and on PostgreSQL must be PostgreSQL's own answer to the analyst's query,
the same texts in the same groups.
"""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import psycopg
import pytest

from rewriter import (
    Catalog,
    PlanRequest,
    Rejected,
    build_catalog,
    plan,
)
from tests.postgres_schema import scratch_schema
from tests.rewriter.scratch import insert
from tests.rewriter.test_date_cast_keys import COLUMNS, CREATE, POLICY
from tests.rewriter.test_date_cast_keys import rows as calendar_rows

#: Rows outside the years 1 to 9999 and NULLs, whose keys are NULL (documented).
OUTSIDE = [
    ("0044-03-15 BC", "0044-03-15 12:00:00 BC"),
    ("10000-01-01", "10000-01-01 00:00:00"),
    ("infinity", "infinity"),
    ("-infinity", "-infinity"),
    (None, None),
]


def rows() -> list[tuple[int, str | None, str | None]]:
    found: list[tuple[int, str | None, str | None]] = list(calendar_rows())
    # The first and last days a key computes, at the first and last instants of a day.
    found += [
        (len(found) + 1, "0001-01-01", "0001-01-01 00:00:00"),
        (len(found) + 2, "9999-12-31", "9999-12-31 23:59:59.999999"),
    ]
    return found


def outside_rows() -> list[tuple[int, str | None, str | None]]:
    start = len(rows()) + 1
    return [(start + i, d, ts) for i, (d, ts) in enumerate(OUTSIDE)]


def catalog(schema: str) -> Catalog:
    return build_catalog({"calendar": COLUMNS}, {"calendar": POLICY}, schema=schema)


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    insert(conn, "main.calendar", rows())
    # DuckDB writes a date BC as '0044-03-15 (BC)' and has no year 0: its -43 is 44 BC.
    conn.execute(
        "INSERT INTO main.calendar VALUES "
        f"({len(rows()) + 1}, make_date(-43, 3, 15), make_timestamp(-43, 3, 15, 12, 0, 0))"
    )
    insert(conn, "main.calendar", outside_rows()[1:])
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """The engine's connection and the schema of the table (with the rows outside the
    years 1 to 9999 in a second table, calendar_all)."""
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with (
            conn.cursor() as cur,
            cur.copy(f'COPY "{schema}".calendar FROM STDIN') as copy,
        ):
            for row in rows():
                copy.write_row(row)
        conn.execute(f'CREATE TABLE "{schema}".calendar_all AS TABLE "{schema}".calendar')
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".calendar_all VALUES (%s, %s::date, %s::timestamp)',
                outside_rows(),
            )
        yield conn, schema


#: Formats of a date's fields, keyed by a date column and by a timestamp column.
DATE_FORMATS = [
    "YYYY-MM",
    "YYYY-MM-DD",
    "FMMonth YYYY",
    "Mon YY",
    "MONTH",
    "month",
    "FMMONTH",
    "Day",
    "FMDay",
    "DY dy Dy",
    'YYYY"Q"Q',
    "IYYY-IW",
    'IYYY-"W"IW-ID',
    "IYY IY I",
    "WW",
    "W",
    "DDD",
    "IDDD",
    "D",
    "J",
    "CC",
    "Y,YYY",
    "YYY Y",
    "RM",
    "FMrm",
    "DDth",
    "FMDDth",
    "DDTH MMth",
    "FMDth FMWth FMQth",
    "AD YYYY ad",
    "B.C. b.c.",
    "FX YYYY",
    'YYYY\\"MM',
    '"quarter" Q "of" YYYY',
    "FMMM/FMDD",
    "no keywords here",
    # sqlglot reads it as strftime's %Y, the tree of 'YYYY': PostgreSQL's keyword is Y.
    "%Y-%m",
]
#: Formats of a timestamp's time of day.
TIME_FORMATS = [
    "HH24:MI",
    "HH12 AM",
    "FMHH12 p.m.",
    "HH a.m. A.M. pm",
    "SS",
    "SSSS",
    "SSSSS",
    "YYYY-MM-DD HH24:MI:SS",
    "FMHH24th",
]
CASES = [("d", f) for f in DATE_FORMATS] + [("ts", f) for f in DATE_FORMATS + TIME_FORMATS]


def _answers(
    sql: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> dict[str, dict[object, object]]:
    conn, schema = postgres
    answers: dict[str, dict[object, object]] = {}
    for dialect in ("duckdb", "postgres"):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        assert made.released_columns[0] == ("k0", "VARCHAR")
        found = (duck if dialect == "duckdb" else conn).execute(made.sql).fetchall()
        answers[dialect] = {row[0]: row[1] for row in found}
    return answers


@pytest.mark.parametrize(("column", "text"), CASES, ids=[f"{c}:{f}" for c, f in CASES])
def test_keys_are_postgresql_s_own(
    column: str,
    text: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    quoted = text.replace("'", "''")
    sql = f"SELECT to_char({column}, '{quoted}') AS k, COUNT(*) FROM calendar GROUP BY 1"
    answers = _answers(sql, duck, postgres)
    conn, schema = postgres
    own = {
        row[0]: row[1]
        for row in conn.execute(
            f'SELECT to_char({column}, %s) AS k, COUNT(*) FROM "{schema}".calendar GROUP BY 1',
            (text,),
        ).fetchall()
    }
    # The rows outside the years 1 to 9999, and the NULLs, in one NULL group.
    assert answers["duckdb"].pop(None) == len(OUTSIDE)
    assert answers["duckdb"] == answers["postgres"] == own


def test_the_column_is_named_as_postgresql_names_it(
    duck: duckdb.DuckDBPyConnection,
) -> None:
    made = plan(
        "SELECT to_char(d, 'YYYY-MM'), COUNT(*) FROM calendar GROUP BY to_char(d, 'YYYY-MM') "
        "ORDER BY to_char(d, 'YYYY-MM')",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    assert '"k0" AS "to_char"' in made.post_sql
    months = [row[0] for row in duck.execute(made.sql).fetchall()]
    assert "2024-02" in months and "1999-12" in months


def test_rows_outside_the_years_1_to_9999_are_null_on_both_engines(
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """PostgreSQL would print 44 BC as '0044' and the year 10000 as '10000', which DuckDB
    prints otherwise: a key is computed only for the years 1 to 9999, as every date key."""
    conn, schema = postgres
    sql = "SELECT to_char(ts, 'YYYY') AS k, COUNT(*) FROM calendar WHERE person > {n} GROUP BY 1"
    n = len(rows())
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            sql.format(n=n),
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        sql_run = made.sql.replace(f'"{schema}"."calendar"', f'"{schema}"."calendar_all"')
        if dialect == "postgres":
            assert "calendar_all" in sql_run
        found = {row[0]: row[1] for row in engine.execute(sql_run).fetchall()}
        assert found == {None: len(OUTSIDE)}, dialect


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("to_char(d, 'HH24')", "a date has no time of day"),
        ("to_char(d, 'YYYY AM')", "a date has no time of day"),
        ("to_char(ts, 'YYYY TZ')", '"TZ" \\(the time zone\\)'),
        ("to_char(ts, 'OF')", "the time zone"),
        ("to_char(ts, 'HH24:MI:SS.MS')", "fractions of a second"),
        ("to_char(ts, 'FF3')", "fractions of a second"),
        ("to_char(ts, 'TMMonth')", "TM"),
        ("to_char(ts, '')", "empty format is NULL"),
        ("to_char(ts, 'MonthTH')", "only after a number"),
        ("to_char(ts, 'YY' || 'YY')", "needs a constant format"),
        ("to_char(ts, 'YYYY'::varchar(2))", "needs a constant format"),
        ("to_char(person, 'YYYY')", "the privacy unit"),
        ("to_char(d - d, '999')", "a date or timestamp column"),
        ("to_char(d + 1, 'YYYY')", "a date or timestamp column"),
    ],
)
def test_what_a_key_cannot_format_is_refused(key: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(f"SELECT COUNT(*) FROM calendar GROUP BY {key}", catalog("main"), REQUEST)


REQUEST = PlanRequest(1.0, delta=1e-6)


def test_without_delta_the_refusal_names_the_ways_out() -> None:
    with pytest.raises(Rejected) as caught:
        plan(
            "SELECT COUNT(*) FROM calendar GROUP BY to_char(d, 'YYYY-MM')",
            catalog("main"),
            PlanRequest(1.0),
        )
    message = caught.value.message + " " + (caught.value.hint or "")
    assert "has no public domain" in message and "SET dpproxy.delta" in message


def test_date_part_is_named_as_written() -> None:
    """sqlglot reads date_part('year', d) as EXTRACT; PostgreSQL names its column
    date_part (when every EXTRACT of the statement is written so: their order in the text
    need not be the tree's, so a statement mixing both keeps extract)."""
    made = plan(
        "SELECT date_part('year', d), date_part('month', d) AS m, COUNT(*) FROM calendar "
        "GROUP BY 1, 2",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    assert '"k0" AS "date_part"' in made.post_sql and '"k1" AS "m"' in made.post_sql
    mixed = plan(
        "SELECT EXTRACT(year FROM d), date_part('month', d), COUNT(*) FROM calendar GROUP BY 1, 2",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    assert '"k0" AS "extract"' in mixed.post_sql


def test_a_format_cast_to_text_is_the_format(duck: duckdb.DuckDBPyConnection) -> None:
    """A driver's to_char(d, %(p)s::VARCHAR): the format itself."""
    written = plan(
        "SELECT to_char(d, 'YYYY'::varchar), COUNT(*) FROM calendar GROUP BY 1",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    plain = plan(
        "SELECT to_char(d, 'YYYY'), COUNT(*) FROM calendar GROUP BY 1",
        catalog("main"),
        PlanRequest(1.0, delta=1e-6),
    )
    assert written.sql == plain.sql


@pytest.fixture(scope="module")
def extremes() -> Iterator[duckdb.DuckDBPyConnection]:
    """DuckDB's earliest and latest dates and timestamps beside an ordinary day."""
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    conn.execute(
        "INSERT INTO main.calendar VALUES "
        "(1, DATE '-5877641-06-25', TIMESTAMP '-290308-12-22 00:00:00'), "
        "(2, DATE '5881580-07-10', TIMESTAMP '294247-01-10 04:00:54.775806'), "
        "(3, DATE '2024-03-01', TIMESTAMP '2024-03-01 10:20:30')"
    )
    yield conn
    conn.close()


@pytest.mark.parametrize(("column", "text"), CASES, ids=[f"{c}:{f}" for c, f in CASES])
def test_one_person_s_extreme_date_makes_no_key_fail(
    column: str, text: str, extremes: duckdb.DuckDBPyConnection
) -> None:
    """DuckDB computes a date's ISO year and week on the column's smallest and largest
    values when it plans, whatever the guard: on its earliest dates it failed, so one
    person's date made IYYY and IW keys fail, after the charge (found by helper-129)."""
    quoted = text.replace("'", "''")
    sql = f"SELECT to_char({column}, '{quoted}') AS k, COUNT(*) FROM calendar GROUP BY 1"
    made = plan(sql, catalog("main"), REQUEST)
    found = {row[0]: row[1] for row in extremes.execute(made.sql).fetchall()}
    assert found.pop(None) == 2 and list(found.values()) == [1]
