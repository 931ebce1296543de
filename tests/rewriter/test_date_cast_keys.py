"""GROUP BY keys from the data that cast a date or a timestamp (rewriter.passes.data_keys,
``moment_cast``): what BI tools send, ``CAST(date_trunc('month', d) AS DATE)``, and the
casts of a date or timestamp column to a date or a timestamp.

Every day from 1999-12-20 to 2026-01-10, one person each, with a timestamp at a different
time of each day: dpproxy's bounded exact answer (one row per person: each count is
exact) on DuckDB and on PostgreSQL (whose own connection is in America/Santiago) must be
PostgreSQL's own answer to the analyst's query, keys of the same Python types, in a
session in each of several zones, among them zones whose clocks skip midnight (Santiago,
Azores, Beirut: PostgreSQL's date_trunc of a date starts such a day at 01:00).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import duckdb
import psycopg
import pytest

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
from tests.postgres_schema import scratch_schema
from tests.rewriter.scratch import insert

COLUMNS = {"person": ColumnType.INTEGER, "d": ColumnType.DATE, "ts": ColumnType.TIMESTAMP}
POLICY = TablePolicy(privacy_unit="person", max_rows_per_unit=1, max_groups_per_unit=1)
CREATE = "CREATE TABLE {schema}.calendar (person BIGINT, d DATE, ts TIMESTAMP)"
FIRST, LAST = dt.date(1999, 12, 20), dt.date(2026, 1, 10)
ENGINE_ZONE = "America/Santiago"
ZONES = ("UTC", "Pacific/Kiritimati", "America/Santiago", "Atlantic/Azores", "Asia/Beirut")
#: Zones whose clocks skip midnight on some day of the range.
SKIPPING_MIDNIGHT = frozenset({"America/Santiago", "Atlantic/Azores", "Asia/Beirut"})


def rows() -> list[tuple[int, str, str]]:
    found = []
    for i in range((LAST - FIRST).days + 1):
        day = FIRST + dt.timedelta(days=i)
        at = dt.datetime.combine(day, dt.time()) + dt.timedelta(
            seconds=(i * 7919) % 86400, microseconds=(i * 337) % 1_000_000
        )
        found.append((i + 1, day.isoformat(), at.isoformat(sep=" ")))
    return found


def catalog(schema: str) -> Catalog:
    return build_catalog({"calendar": COLUMNS}, {"calendar": POLICY}, schema=schema)


@pytest.fixture(scope="module")
def duck() -> Iterator[duckdb.DuckDBPyConnection]:
    conn = duckdb.connect(":memory:")
    conn.execute(CREATE.format(schema="main"))
    insert(conn, "main.calendar", rows())
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[tuple[psycopg.Connection[tuple[object, ...]], str]]:
    """The engine's connection (its TimeZone America/Santiago, none of the analyst's
    choosing) and the schema of the table."""
    with scratch_schema(pg_dsn) as (conn, schema):
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with (
            conn.cursor() as cur,
            cur.copy(f'COPY "{schema}".calendar FROM STDIN') as copy,
        ):
            for row in rows():
                copy.write_row(row)
        conn.execute(f"SET TimeZone = '{ENGINE_ZONE}'")
        yield conn, schema


#: (key, released type, whether PostgreSQL shows the same value in every zone)
FORMS: list[tuple[str, str, bool]] = [
    ("CAST(d AS DATE)", "DATE", True),
    ("d::date", "DATE", True),
    *[(f"CAST(date_trunc('{u}', d) AS DATE)", "DATE", True) for u in ("day", "week", "month")],
    *[(f"date_trunc('{u}', d)::date", "DATE", True) for u in ("quarter", "year")],
    *[(f"CAST(date_trunc('{u}', ts) AS DATE)", "DATE", True) for u in ("day", "week", "month")],
    ("CAST(ts AS DATE)", "DATE", True),
    ("CAST(d AS TIMESTAMP)", "TIMESTAMP", True),
    ("CAST(ts AS TIMESTAMP)", "TIMESTAMP", True),
    *[(f"CAST(date_trunc('{u}', ts) AS TIMESTAMP)", "TIMESTAMP", True) for u in ("hour", "week")],
    ("CAST(CAST(ts AS DATE) AS TIMESTAMP)", "TIMESTAMP", True),
    ("CAST(CAST(d AS TIMESTAMP) AS DATE)", "DATE", True),
    # The column of date_trunc cast: Tableau's CAST(DATE_TRUNC('MONTH', CAST(d AS DATE))
    # AS DATE), and a date made a timestamp first (no time zone involved).
    ("CAST(date_trunc('month', CAST(d AS DATE)) AS DATE)", "DATE", True),
    ("date_trunc('week', CAST(d AS TIMESTAMP))", "TIMESTAMP", True),
    ("EXTRACT(doy FROM CAST(d AS TIMESTAMP))", "DOUBLE", True),
    # PostgreSQL truncates a date as a timestamp with time zone: where the clocks skip
    # midnight its day starts at 01:00; the key is midnight, as date_trunc's of a date.
    *[(f"CAST(date_trunc('{u}', d) AS TIMESTAMP)", "TIMESTAMP", False) for u in ("day", "month")],
    (
        "coalesce(CAST(date_trunc('month', d) AS DATE), CAST('1900-01-01' AS DATE))",
        "DATE",
        True,
    ),
    # EXTRACT cast to an integer (an integer year, as analysts and Tableau write it).
    ("EXTRACT(year FROM d)::int", "BIGINT", True),
    ("CAST(EXTRACT(month FROM ts) AS BIGINT)", "BIGINT", True),
    ("date_part('dow', d)::smallint", "BIGINT", True),
    ("CAST(EXTRACT(hour FROM ts) AS INTEGER)", "BIGINT", True),
    ("CAST(EXTRACT(isodow FROM CAST(d AS TIMESTAMP)) AS INT)", "BIGINT", True),
    # date(x), PostgreSQL's cast written as a call (Looker, Tableau).
    ("date(ts)", "DATE", True),
    ("DATE(d)", "DATE", True),
    ("date(date_trunc('month', ts))", "DATE", True),
    # Shifted by a constant interval: Metabase's weeks from Sunday (shifted_keys).
    ("date_trunc('week', d + INTERVAL '1 day') + INTERVAL '-1 day'", "TIMESTAMP", True),
    ("(DATE_TRUNC('week', (ts + INTERVAL '1 day')) + INTERVAL '-1 day')", "TIMESTAMP", True),
    (
        "CAST((DATE_TRUNC('week', (d + INTERVAL '1 day')) + INTERVAL '-1 day') AS date)",
        "DATE",
        True,
    ),
    ("d + INTERVAL '2 hours'", "TIMESTAMP", True),
    ("INTERVAL '3 days' + d", "TIMESTAMP", True),
    ("ts - INTERVAL '1 week 3 hours 5 seconds'", "TIMESTAMP", True),
    ("date_trunc('month', ts - interval '6 hours')", "TIMESTAMP", True),
    ("CAST(ts + INTERVAL '12 hours' AS DATE)", "DATE", True),
    # to_char of date_trunc (Looker's month and week dimensions).
    ("to_char(date_trunc('month', d), 'YYYY-MM')", "VARCHAR", True),
    ("TO_CHAR(DATE_TRUNC('week', d), 'YYYY-MM-DD')", "VARCHAR", True),
    ("to_char(date_trunc('quarter', ts), 'YYYY\"Q\"Q')", "VARCHAR", True),
    ("to_char(date_trunc('week', CAST(d AS TIMESTAMP)), 'IYYY-IW')", "VARCHAR", True),
    ("to_char(date_trunc('hour', ts), 'YYYY-MM-DD HH24:MI')", "VARCHAR", True),
]


@pytest.mark.parametrize("zone", ZONES)
@pytest.mark.parametrize(("key", "sql_type", "everywhere"), FORMS, ids=[f[0] for f in FORMS])
def test_keys_are_postgresql_s_own(
    key: str,
    sql_type: str,
    everywhere: bool,
    zone: str,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
    pg_dsn: str,
) -> None:
    sql = f"SELECT {key} AS k, COUNT(*) FROM calendar GROUP BY 1"
    conn, schema = postgres
    answers: dict[str, dict[object, object]] = {}
    for dialect in ("duckdb", "postgres"):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6, time_zone=zone),
        )
        assert made.released_columns[0] == ("k0", sql_type)
        assert '"k0" AS "k"' in made.post_sql
        found = (duck if dialect == "duckdb" else conn).execute(made.sql).fetchall()
        answers[dialect] = {row[0]: row[1] for row in found}
    assert answers["duckdb"] == answers["postgres"]
    types = {type(v) for answer in answers.values() for v in answer}
    assert types == {_TYPES[sql_type]}
    counts = [n for n in answers["duckdb"].values() if isinstance(n, int)]
    assert sum(counts) == (LAST - FIRST).days + 1
    if not everywhere and zone in SKIPPING_MIDNIGHT:
        return
    with psycopg.connect(pg_dsn, autocommit=True) as direct:
        direct.execute(f'SET search_path TO "{schema}"')
        direct.execute(f"SET TimeZone = '{zone}'")
        own = {row[0]: row[1] for row in direct.execute(sql.encode()).fetchall()}
    if sql_type == "DOUBLE":
        own = {float(k): n for k, n in own.items()}
    assert answers["duckdb"] == own


_TYPES = {
    "DATE": dt.date,
    "TIMESTAMP": dt.datetime,
    "DOUBLE": float,
    "BIGINT": int,
    "VARCHAR": str,
}


def test_where_the_clocks_skip_midnight_a_truncated_date_is_its_midnight(
    duck: duckdb.DuckDBPyConnection,
) -> None:
    """In Santiago PostgreSQL starts 2024-09-08 at 01:00 (-03): CAST(date_trunc('day',
    d) AS TIMESTAMP) is released as midnight, the value of date_trunc('day', d) and of
    date_trunc('day', CAST(d AS TIMESTAMP)) (documented in docs/sql.md)."""
    sql = (
        "SELECT CAST(date_trunc('day', d) AS TIMESTAMP), COUNT(*) FROM calendar "
        "WHERE d = DATE '2024-09-08' GROUP BY 1"
    )
    made = plan(sql, catalog("main"), PlanRequest(1.0, delta=1e-6, time_zone=ENGINE_ZONE))
    assert [row[0] for row in duck.execute(made.sql).fetchall()] == [dt.datetime(2024, 9, 8)]


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("CAST(date_trunc('hour', ts) AS DATE)", "only for a unit of a day or longer"),
        ("CAST(date_trunc('minute', d) AS DATE)", "only for a unit of a day or longer"),
        ("CAST(date_trunc('decade', d) AS DATE)", "date_trunc needs a constant unit"),
        ("CAST(person AS TIMESTAMP)", "could fail on some values"),
        ("CAST(ts AS TIMESTAMP(0))", "precision or length"),
        ("CAST(CAST(d AS TEXT) AS DATE)", "could fail on some values"),
        ("CAST(EXTRACT(epoch FROM ts) AS INT)", "a whole number of seconds"),
        ("CAST(EXTRACT(hour FROM d) AS INT)", "a date has no hour"),
        ("date_trunc('month', CAST(ts AS DATE))", "a date or timestamp column"),
        ("to_char(date_trunc('month', d), 'HH24')", "a date has no time of day"),
        ("to_char(date_trunc('decade', ts), 'YYYY')", "date_trunc needs a constant unit"),
        ("date(person)", "could fail on some values"),
        ("d + INTERVAL '1 month'", "months or years is not supported"),
        ("d + INTERVAL '0.5 seconds'", "a constant of days"),
        ("d - INTERVAL '200000 days'", "more than 100,000 days"),
        ("person + INTERVAL '1 day'", "the privacy unit"),
        # A condition sees raw values: a date of the year 300000 is no timestamp.
        (
            "CASE WHEN CAST(d AS TIMESTAMP) > TIMESTAMP '2020-01-01 12:00' THEN d END",
            "could fail on some values",
        ),
    ],
)
def test_casts_that_could_fail_or_lose_the_key_are_refused(key: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(f"SELECT COUNT(*) FROM calendar GROUP BY {key}", catalog("main"), REQUEST)


REQUEST = PlanRequest(1.0, delta=1e-6)


@pytest.mark.parametrize(
    "key",
    [
        "CAST(d AS TIMESTAMP)",
        "CAST(date_trunc('month', d) AS DATE)",
        "CAST(ts AS DATE)",
        "EXTRACT(year FROM d)::int",
    ],
)
def test_without_delta_a_cast_key_names_the_ways_out(key: str) -> None:
    with pytest.raises(Rejected) as caught:
        plan(f"SELECT COUNT(*) FROM calendar GROUP BY {key}", catalog("main"), PlanRequest(1.0))
    message = caught.value.message + " " + (caught.value.hint or "")
    assert "has no public domain" in message and "SET dpproxy.delta" in message
    assert "width_bucket" not in caught.value.message  # the hint for numbers only


@pytest.mark.parametrize("delta", [0.0, 1e-6])
def test_a_cast_of_another_column_says_it_could_fail_with_or_without_delta(delta: float) -> None:
    """Not "no public domain … SET dpproxy.delta", which would send the analyst to a δ
    that cannot help: a text cast to a date can fail, with any δ."""
    with pytest.raises(Rejected, match="could fail on some values"):
        plan(
            "SELECT COUNT(*) FROM calendar GROUP BY CAST(CAST(person AS TEXT) AS DATE)",
            catalog("main"),
            PlanRequest(1.0, delta=delta),
        )


def test_a_date_column_cast_to_a_date_keeps_its_domain() -> None:
    """A declared domain of a date (or timestamp) column is the domain of its cast to its
    own type: released without δ, and only its values."""
    policy = TablePolicy(
        privacy_unit="person",
        max_rows_per_unit=1,
        columns={
            "d": ColumnPolicy(domain=["2024-01-01", "2024-01-02"]),
            "ts": ColumnPolicy(domain=["2024-01-01T08:00:00"]),
        },
    )
    with_domains = build_catalog({"calendar": COLUMNS}, {"calendar": policy}, schema="main")
    for key, domain, sql_type in [
        ("CAST(d AS DATE)", ("2024-01-01", "2024-01-02"), "DATE"),
        ("ts::timestamp", ("2024-01-01T08:00:00",), "TIMESTAMP"),
    ]:
        made = plan(
            f"SELECT {key} AS k, COUNT(*) FROM calendar GROUP BY 1", with_domains, PlanRequest(1.0)
        )
        assert made.selection is None
        assert made.keys[0].domain == domain and made.released_columns[0] == ("k0", sql_type)
    # Not a date cast to a timestamp (its values are not the domain's).
    with pytest.raises(Rejected, match="has no public domain"):
        plan(
            "SELECT COUNT(*) FROM calendar GROUP BY CAST(d AS TIMESTAMP)",
            with_domains,
            PlanRequest(1.0),
        )


def test_date_and_to_char_of_date_trunc_are_named_as_postgresql_names_them() -> None:
    """PostgreSQL names ``date(ts)`` "date" (a call), where ``CAST(ts AS DATE)`` is "ts",
    and ``to_char(date_trunc(…))`` "to_char"."""
    for items, name in (
        ("date(ts)", "date"),
        ("CAST(ts AS DATE)", "ts"),
        ("to_char(date_trunc('month', d), 'YYYY-MM')", "to_char"),
    ):
        made = plan(f"SELECT {items}, COUNT(*) FROM calendar GROUP BY 1", catalog("main"), REQUEST)
        assert f'"k0" AS "{name}"' in made.post_sql


def test_date_of_a_timestamp_filters_as_in_postgresql(
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    """``WHERE date(ts) >= '2024-01-01'`` (Looker's date filter) is the cast's."""
    conn, schema = postgres
    sql = "SELECT COUNT(*) FROM calendar WHERE date(ts) >= '2024-01-01' AND DATE(d) < '2025-02-03'"
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            sql, catalog("main" if dialect == "duckdb" else schema), PlanRequest(1.0, dialect)
        )
        found = engine.execute(made.sql).fetchall()
        own = conn.execute(sql.replace("calendar", f'"{schema}".calendar')).fetchall()
        assert found[0][0] == own[0][0] == 399, dialect
