"""BI tools' time filters compute what PostgreSQL 15 computes in the analyst's TimeZone,
on DuckDB and on PostgreSQL alike (rewriter.datetime_input, rewriter.passes.time_constants,
value_types.instants): Grafana's ``$__timeFilter`` (RFC 3339 texts, ``…Z``) on date and
timestamp columns, Superset's ``TO_DATE`` and ``TO_TIMESTAMP`` (a timestamp with time zone
in the session's zone) on date, timestamp and timestamptz columns, typed ``timestamptz
'…'`` constants and ``to_timestamp(epoch)``.

Each query's bounded exact answer (one row per person: every count is exact, zero noise)
is compared with PostgreSQL's own answer to the analyst's query in a session of the
analyst's zone, on values every quarter of an hour around the daylight saving changes of
2024 (Europe/Paris, America/New_York, America/Santiago, whose clocks skip midnight),
Asia/Kolkata (+05:30) and UTC, and on constants at and around those changes. The engines'
own connections compute in other zones (Asia/Tokyo, Pacific/Auckland). Every query is
answered as PostgreSQL answers it, or refused with PostgreSQL's SQLSTATE where PostgreSQL
fails.
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal

import duckdb
import psycopg
import pytest

from rewriter import (
    Catalog,
    ColumnType,
    ColumnTypes,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.scratch import insert

ZONES = ("Europe/Paris", "America/New_York", "America/Santiago", "Asia/Kolkata", "UTC")
COLUMNS = ColumnTypes(
    {
        "moments": {
            "id": ColumnType.INTEGER,
            "pid": ColumnType.INTEGER,
            "d": ColumnType.DATE,
            "ts": ColumnType.TIMESTAMP,
            "tz": ColumnType.TIMESTAMP,
        }
    },
    {"moments": frozenset({"tz"})},
)
POLICY = TablePolicy(privacy_unit="pid", max_rows_per_unit=1, max_groups_per_unit=1)
CREATE = (
    "CREATE TABLE {schema}.moments (id BIGINT, pid BIGINT, d DATE, ts TIMESTAMP, tz TIMESTAMPTZ)"
)
#: The daylight saving changes of 2024 (UTC instants), and an ordinary day.
CHANGES = (
    dt.datetime(2024, 3, 31, 1, 0),  # Europe/Paris: 02:00 -> 03:00
    dt.datetime(2024, 10, 27, 1, 0),  # Europe/Paris: 03:00 -> 02:00
    dt.datetime(2024, 3, 10, 7, 0),  # America/New_York: 02:00 -> 03:00
    dt.datetime(2024, 11, 3, 6, 0),  # America/New_York: 02:00 -> 01:00
    dt.datetime(2024, 4, 7, 3, 0),  # America/Santiago: 00:00 -> 23:00 the day before
    dt.datetime(2024, 9, 8, 4, 0),  # America/Santiago: 00:00 -> 01:00
    dt.datetime(2024, 1, 15, 12, 0),
)
#: Local times written as text, at and around those changes (skipped, repeated, midnights).
LOCAL = (
    "2024-01-15 00:00:00",
    "2024-01-15 12:00:00",
    "2024-03-31 00:00:00",
    "2024-03-31 02:30:00",
    "2024-03-31 03:15:00",
    "2024-10-27 02:30:00",
    "2024-10-27 03:00:00",
    "2024-03-10 02:30:00",
    "2024-03-10 03:30:00",
    "2024-11-03 00:00:00",
    "2024-11-03 01:30:00",
    "2024-09-08 00:00:00",
    "2024-09-08 00:30:00",
    "2024-09-08 01:00:00",
    "2024-04-06 23:30:00",
    "2024-04-07 00:00:00",
)
#: The values of each row: ``tz`` every quarter of an hour around each change; ``ts`` its
#: digits in UTC (local times at the changes of every zone here); ``d`` its UTC date.
INSTANTS = [change + dt.timedelta(minutes=15 * k) for change in CHANGES for k in range(-100, 101)]


def catalog(schema: str) -> Catalog:
    return build_catalog(COLUMNS, {"moments": POLICY}, schema=schema)


def rows() -> list[tuple[object, ...]]:
    made: list[tuple[object, ...]] = [(0, 0, None, None, None)]
    for i, instant in enumerate(INSTANTS, start=1):
        text = instant.isoformat(sep=" ")
        made.append((i, i, instant.date().isoformat(), text, text + "+00"))
    return made


class Engines:
    """DuckDB and PostgreSQL holding the same rows; ``direct`` is the analyst's own
    PostgreSQL session (never preparing a statement: PostgreSQL would read its constants
    once, in the zone of the moment)."""

    def __init__(
        self,
        schema: str,
        duck: duckdb.DuckDBPyConnection,
        engine: psycopg.Connection[tuple[object, ...]],
        direct: psycopg.Connection[tuple[object, ...]],
    ) -> None:
        self.schema = schema
        self.duck = duck
        self.engine = engine
        self.direct = direct

    def postgres_answer(self, sql: str, zone: str) -> object:
        self.direct.execute(f"SET TimeZone = '{zone}'")
        try:
            (row,) = self.direct.execute(sql).fetchall()
        except psycopg.Error as error:
            return ("error", error.sqlstate)
        value = row[0]
        return int(value) if isinstance(value, (int, Decimal)) else value

    def answers(self, sql: str, zone: str) -> list[object]:
        """dpproxy's bounded exact answer on each engine (a count), or its refusal."""
        found: list[object] = []
        for dialect in ("duckdb", "postgres"):
            try:
                made = plan(
                    sql,
                    catalog("main" if dialect == "duckdb" else self.schema),
                    PlanRequest(1.0, dialect, time_zone=zone),
                )
            except Rejected as rejection:
                found.append(("error", rejection.sqlstate, rejection.message))
                continue
            if dialect == "duckdb":
                result = self.duck.execute(made.sql).fetchall()
            else:
                result = self.engine.execute(made.sql).fetchall()
            released = made.release(result, ZeroNoise()).rows
            value = released[0][0]
            found.append(int(value) if isinstance(value, (int, float, Decimal)) else value)
        return found

    def check(self, sql: str, zone: str) -> bool:
        """dpproxy answers as PostgreSQL does, or refuses as PostgreSQL does (its SQLSTATE);
        True if answered."""
        expected = self.postgres_answer(sql, zone)
        duck, postgres = self.answers(sql, zone)
        assert duck == postgres or (_refused(duck) and _refused(postgres)), (sql, zone)
        if isinstance(expected, tuple):
            assert isinstance(duck, tuple) and duck[1] == expected[1], (sql, zone, duck)
            return False
        assert duck == expected, (sql, zone, duck)
        return True


def _refused(answer: object) -> bool:
    return isinstance(answer, tuple)


@pytest.fixture(scope="module")
def engines(pg_dsn: str) -> Iterator[Engines]:
    schema = f"dpproxy_tf_{uuid.uuid4().hex[:10]}"
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'Asia/Tokyo'")
    duck.execute(CREATE.format(schema="main"))
    insert(duck, "main.moments", rows())
    with (
        psycopg.connect(pg_dsn, autocommit=True) as engine,
        psycopg.connect(pg_dsn, autocommit=True) as direct,
    ):
        engine.execute(f'CREATE SCHEMA "{schema}"')
        engine.execute(CREATE.format(schema=f'"{schema}"'))
        engine.execute("SET TimeZone = 'Pacific/Auckland'")
        with engine.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".moments VALUES (%s, %s, %s::date, %s::timestamp, '
                "%s::timestamptz)",
                rows(),
            )
        direct.execute(f'SET search_path TO "{schema}"')
        direct.prepare_threshold = None
        try:
            yield Engines(schema, duck, engine, direct)
        finally:
            engine.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _check_all(engines: Engines, queries: Sequence[str], zone: str) -> int:
    return sum(engines.check(sql, zone) for sql in queries)


@pytest.mark.parametrize("zone", ZONES)
def test_grafana_rfc3339_filters_on_dates_and_timestamps(engines: Engines, zone: str) -> None:
    """Grafana's $__timeFilter: a date reads the date of the text, a timestamp its local
    time, ignoring the offset (PostgreSQL's date and timestamp input)."""
    queries = []
    for local in LOCAL:
        day, clock = local.split(" ")
        for written in (f"{day}T{clock}Z", f"{day}T{clock}.123456789+05:30", f"{day} {clock}-08"):
            for column in ("d", "ts", "tz"):
                queries += [
                    f"SELECT COUNT(*) FROM moments WHERE {column} BETWEEN '{written}' AND "
                    "'2024-12-31T23:59:59Z'",
                    f"SELECT COUNT(*) FROM moments WHERE {column} < '{written}'",
                    f"SELECT COUNT(*) FILTER (WHERE {column} >= '{written}') FROM moments",
                ]
    assert _check_all(engines, queries, zone) == len(queries)


@pytest.mark.parametrize("zone", ZONES)
def test_superset_to_date_and_to_timestamp(engines: Engines, zone: str) -> None:
    """Superset's convert_dttm: TO_DATE for a date column, TO_TIMESTAMP (a timestamp with
    time zone, of a local time in the session's zone) for the others, with >= and <."""
    queries = []
    for local in LOCAL:
        day = local[:10]
        micro = f"{local}.000000"
        for column in ("d", "ts", "tz"):
            queries += [
                f"SELECT COUNT(*) FROM moments WHERE {column} >= TO_DATE('{day}', 'YYYY-MM-DD')",
                f"SELECT COUNT(*) FROM moments WHERE {column} >= TO_TIMESTAMP('{micro}', "
                "'YYYY-MM-DD HH24:MI:SS.US') AND "
                f"{column} < TO_TIMESTAMP('2024-12-01 00:00:00.000000', "
                "'YYYY-MM-DD HH24:MI:SS.US')",
            ]
    assert _check_all(engines, queries, zone) == len(queries)


@pytest.mark.parametrize("zone", ZONES)
def test_instants_with_every_operator(engines: Engines, zone: str) -> None:
    """to_timestamp(text, format), timestamptz '…', CAST(… AS timestamptz) and
    to_timestamp(epoch) compared with dates, timestamps and timestamps with time zone by
    every operator, as PostgreSQL compares them (as instants, the date or timestamp read
    in the session's zone), also at the changes of the clocks (where the local times that
    compare true are two ranges, or none)."""
    constants = []
    for index, local in enumerate(LOCAL):
        if index % 2:
            constants.append(f"to_timestamp('{local}', 'YYYY-MM-DD HH24:MI:SS')")
        else:
            constants.append(f"timestamp with time zone '{local.replace(' ', 'T')}'")
    constants += [
        "'2024-03-31T01:00:00Z'::timestamptz",
        "CAST('2024-10-27 00:30:00+00' AS TIMESTAMPTZ)",
        "to_timestamp(1730597400)",  # 2024-11-03 01:30:00 UTC
        "to_timestamp(1725768000.5)",  # 2024-09-08 04:00:00.5 UTC
    ]
    queries = []
    for index, constant in enumerate(constants):
        for column in ("d", "ts", "tz"):
            for operator in ("<", "<=", ">", ">=", "=", "<>"):
                if index % 2:
                    queries.append(
                        f"SELECT COUNT(*) FROM moments WHERE {column} {operator} {constant}"
                    )
                else:  # the instant on the left, in FILTER, under NOT
                    queries.append(
                        f"SELECT COUNT(*) FILTER (WHERE NOT ({constant} {operator} {column})) "
                        "FROM moments"
                    )
            queries.append(
                f"SELECT COUNT(*) FROM moments WHERE {column} IS NOT DISTINCT FROM {constant}"
            )
            queries.append(
                f"SELECT COUNT(*) FROM moments WHERE {column} IS DISTINCT FROM {constant}"
            )
            queries.append(f"SELECT COUNT(*) FROM moments WHERE {constant} <= {column}")
            queries.append(
                f"SELECT COUNT(*) FROM moments WHERE NOT {column} BETWEEN {constant} AND "
                "TIMESTAMPTZ '2024-12-01 00:00:00+00'"
            )
            queries.append(
                f"SELECT COUNT(*) FROM moments WHERE {column} IN ({constant}, "
                "to_timestamp('2024-01-15', 'YYYY-MM-DD'))"
            )
            if column != "tz":
                queries.append(
                    f"SELECT COUNT(*) FROM moments WHERE NOT {column} IN ({constant}, "
                    f"CAST('2024-01-15' AS {'DATE' if column == 'd' else 'TIMESTAMP'}))"
                )
    assert _check_all(engines, queries, zone) == len(queries)


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Kolkata"])
def test_casts_of_constants(engines: Engines, zone: str) -> None:
    queries = [
        "SELECT COUNT(*) FROM moments WHERE d >= CAST(to_timestamp('2024-03-10 23:00', "
        "'YYYY-MM-DD HH24:MI') AS DATE)",
        "SELECT COUNT(*) FROM moments WHERE ts < to_timestamp(1710054000)::timestamp",
        "SELECT COUNT(*) FROM moments WHERE tz >= to_date('2024-11-03', 'YYYY-MM-DD')",
        "SELECT COUNT(*) FROM moments WHERE tz >= to_date('2024-11-03', 'YYYY-MM-DD')::timestamptz",
        "SELECT COUNT(*) FROM moments WHERE ts >= to_date('2024-11-03', 'YYYY-MM-DD')::timestamp",
        "SELECT COUNT(*) FROM moments WHERE d = '2024-11-03 23:59:59.9999995'",
        "SELECT COUNT(*) FROM moments WHERE ts = '2024-11-02 24:00:00'",
        "SELECT COUNT(*) FROM moments WHERE ts < 'epoch'::timestamptz",
    ]
    assert _check_all(engines, queries, zone) == len(queries)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM moments WHERE d = '2024-13-01T00:00:00Z'",
        "SELECT COUNT(*) FROM moments WHERE ts = '2024-02-30T00:00:00Z'",
        "SELECT COUNT(*) FROM moments WHERE ts = '2024-01-01T24:00:01Z'",
        "SELECT COUNT(*) FROM moments WHERE d = '2024-01-01T00:00:00+16'",
        "SELECT COUNT(*) FROM moments WHERE d >= TO_DATE('2024-13-01', 'YYYY-MM-DD')",
        "SELECT COUNT(*) FROM moments WHERE d >= TO_DATE('2024-02-30', 'YYYY-MM-DD')",
        "SELECT COUNT(*) FROM moments WHERE ts >= TO_TIMESTAMP('2024-01-01 24:00', "
        "'YYYY-MM-DD HH24:MI')",
        "SELECT COUNT(*) FROM moments WHERE ts >= TO_TIMESTAMP('2024-01-01 00:00 PM', "
        "'YYYY-MM-DD HH12:MI PM')",
        "SELECT COUNT(*) FROM moments WHERE ts >= TO_TIMESTAMP('2024/x1/01', 'YYYY-MM-DD')",
        "SELECT COUNT(*) FROM moments WHERE tz >= TO_TIMESTAMP('202413', 'YYYYMM')",
        "SELECT COUNT(*) FROM moments WHERE tz >= TIMESTAMPTZ '2024-01-01 25:00'",
        "SELECT COUNT(*) FROM moments WHERE tz >= to_timestamp(1e20)",
    ],
)
def test_refused_as_postgresql_refuses(engines: Engines, sql: str) -> None:
    """Out-of-range fields are refused with PostgreSQL's SQLSTATE, before anything runs."""
    expected = engines.postgres_answer(sql, "America/New_York")
    assert isinstance(expected, tuple)
    answers = engines.answers(sql, "America/New_York")
    assert all(isinstance(a, tuple) and a[1] == expected[1] for a in answers), answers
