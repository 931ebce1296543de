"""A DP query over a timestamp with time zone computes what PostgreSQL computes for a
session in the analyst's TimeZone (rewriter.zones): its keys, filters, EXTRACT,
date_trunc and comparisons with literals, on DuckDB and on PostgreSQL alike, whatever the
zone of the engines' own connections (Asia/Tokyo for DuckDB, Pacific/Auckland for
PostgreSQL here, neither the analyst's).

The bounded exact answer (one row per person: every count is exact; zero noise for the
released aggregates, tests.rewriter.noise) is compared with PostgreSQL's own answer to
the analyst's query in a session whose TimeZone is the analyst's: on every instant around
the daylight saving changes of 2024 (Europe/Paris on March 31 and October 27,
America/New_York, America/Santiago, whose clocks skip midnight), Asia/Kolkata (+05:30)
and UTC, and on random instants and literals (hypothesis).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator, Sequence
from decimal import Decimal
from zoneinfo import ZoneInfo

import duckdb
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rewriter import Plan, PlanRequest, plan
from rewriter.passes.constants import evaluation_sql, zone_probe
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.zoned_events import (
    CREATE,
    POSTGRES_ENGINE_ZONE,
    Moment,
    catalog,
    duckdb_events,
    fill_duckdb,
    fill_postgres,
)

ZONES = ("Europe/Paris", "America/New_York", "America/Santiago", "Asia/Kolkata", "UTC")
#: The daylight saving changes of 2024 (UTC instants), and two ordinary days.
CHANGES = (
    dt.datetime(2024, 3, 31, 1, 0),  # Europe/Paris: 02:00 -> 03:00
    dt.datetime(2024, 10, 27, 1, 0),  # Europe/Paris: 03:00 -> 02:00
    dt.datetime(2024, 3, 10, 7, 0),  # America/New_York: 02:00 -> 03:00
    dt.datetime(2024, 11, 3, 6, 0),  # America/New_York: 02:00 -> 01:00
    dt.datetime(2024, 4, 7, 3, 0),  # America/Santiago: 00:00 -> 23:00 the day before
    dt.datetime(2024, 9, 8, 4, 0),  # America/Santiago: 00:00 -> 01:00
    dt.datetime(2024, 1, 15, 12, 0),
    dt.datetime(2024, 7, 1, 23, 30),
)
#: Local times (and a few with offsets) at and around those changes: skipped, repeated,
#: just before and after, midnights.
LITERALS = (
    "2024-03-31",
    "2024-03-31 02:30",
    "2024-03-31 03:00:00",
    "2024-10-27",
    "2024-10-27 02:00",
    "2024-10-27 02:30:00",
    "2024-10-27 03:00",
    "2024-03-10 02:30",
    "2024-11-03 01:30",
    "2024-11-03 01:00:00",
    "2024-09-08",
    "2024-09-08 00:30",
    "2024-04-06 23:30",
    "2024-04-07",
    "2024-07-02 05:00",
    "2024-10-27 02:30:00+01",
    "2024-10-27 02:30:00+02",
    "2024-11-03T01:30:00-04:00",
    "2024-03-31 00:00:00Z",
    "2024-07-01 23:30+05:30",
)
COMPARED = (
    "SELECT COUNT(*) FROM events WHERE ts >= '{literal}'",
    "SELECT COUNT(*) FROM events WHERE ts < '{literal}'",
    "SELECT COUNT(*) FROM events WHERE ts = '{literal}'",
    "SELECT COUNT(*) FROM events WHERE '{literal}' <= ts",
    "SELECT COUNT(*) FROM events WHERE ts BETWEEN '{literal}' AND '2024-11-03 01:30'",
    "SELECT COUNT(*) FROM events WHERE ts IN ('{literal}', '2024-10-27 02:15')",
    "SELECT COUNT(*) FILTER (WHERE ts > '{literal}') FROM events",
    "SELECT COUNT(*) FROM events WHERE NOT ts <> '{literal}'",
)
#: Literals without an offset, also as DATE '…' and TIMESTAMP '…'.
TYPED = (
    "SELECT COUNT(*) FROM events WHERE ts >= TIMESTAMP '{literal}'",
    "SELECT COUNT(*) FROM events WHERE ts > DATE '{day}'",
    "SELECT COUNT(*) FROM events WHERE ts >= CAST('{literal}' AS TIMESTAMP)",
)
GROUPED = (
    "SELECT date_trunc('day', ts), COUNT(*) FROM events GROUP BY 1",
    "SELECT date_trunc('week', ts) AS w, COUNT(*) FROM events GROUP BY w",
    "SELECT date_trunc('month', ts), COUNT(*) FROM events GROUP BY 1",
    "SELECT EXTRACT(hour FROM ts), COUNT(*) FROM events GROUP BY 1",
    "SELECT EXTRACT(dow FROM ts), COUNT(*) FROM events WHERE EXTRACT(minute FROM ts) < 30 "
    "GROUP BY 1",
    "SELECT CAST(ts AS DATE), COUNT(*) FROM events GROUP BY 1",
    "SELECT date_trunc('hour', CAST(ts AS TIMESTAMP)), COUNT(*) FROM events GROUP BY 1",
    "SELECT CAST(ts AS TIMESTAMP), COUNT(*) FROM events GROUP BY 1",
    # Cast to a date or a local time, as PostgreSQL shows them (Santiago's days that
    # begin at 01:00 included).
    "SELECT CAST(date_trunc('month', ts) AS DATE) AS m, COUNT(*) FROM events GROUP BY 1",
    "SELECT date_trunc('day', ts)::date, COUNT(*) FROM events GROUP BY 1",
    "SELECT CAST(date_trunc('week', ts) AS DATE), COUNT(*) FROM events GROUP BY 1",
    "SELECT CAST(date_trunc('day', ts) AS TIMESTAMP), COUNT(*) FROM events GROUP BY 1",
    "SELECT CAST(CAST(ts AS DATE) AS TIMESTAMP), COUNT(*) FROM events GROUP BY 1",
    "SELECT CAST(date_trunc('day', CAST(ts AS TIMESTAMP)) AS DATE), COUNT(*) FROM events "
    "GROUP BY 1",
    "SELECT CASE WHEN ts < '2024-10-27 02:30' THEN 'before' ELSE 'after' END, COUNT(*) "
    "FROM events GROUP BY 1",
    # to_char formats the local time (the hour the clocks repeat is one text).
    "SELECT to_char(ts, 'YYYY-MM-DD HH24:MI') AS t, COUNT(*) FROM events GROUP BY 1",
    "SELECT to_char(ts, 'FMDay HH12 AM IYYY-IW') AS t, COUNT(*) FROM events GROUP BY 1",
)
AGGREGATES = (
    "SELECT SUM(EXTRACT(hour FROM ts)) FROM events",
    "SELECT SUM(EXTRACT(day FROM ts)) FROM events WHERE ts >= '2024-10-27'",
    "SELECT SUM(EXTRACT(year FROM ts)) FROM events",
    "SELECT COUNT(*) FROM events WHERE CAST(ts AS DATE) = DATE '2024-10-27'",
    "SELECT COUNT(*) FROM events WHERE EXTRACT(hour FROM ts) = 2",
    "SELECT COUNT(ts) FROM events",
)


def around_changes() -> list[dt.datetime | None]:
    """Every quarter of an hour from 26 hours before each change to 26 hours after, and a
    NULL."""
    found: list[dt.datetime | None] = [None]
    for change in CHANGES:
        found += [change + dt.timedelta(minutes=15 * k) for k in range(-104, 105)]
    return found


@pytest.fixture(scope="module")
def engines(pg_dsn: str) -> Iterator[Engines]:
    schema = f"dpproxy_tz_{uuid.uuid4().hex[:10]}"
    with (
        psycopg.connect(pg_dsn, autocommit=True) as engine,
        psycopg.connect(pg_dsn, autocommit=True) as direct,
    ):
        engine.execute(f'CREATE SCHEMA "{schema}"')
        engine.execute(CREATE.format(schema=f'"{schema}"'))
        engine.execute(f"SET TimeZone = '{POSTGRES_ENGINE_ZONE}'")
        direct.execute(f'SET search_path TO "{schema}"')
        direct.prepare_threshold = None  # see Engines
        try:
            yield Engines(schema, duckdb_events([]), engine, direct)
        finally:
            engine.execute(f'DROP SCHEMA "{schema}" CASCADE')


class Engines:
    """DuckDB and PostgreSQL holding the same events; ``direct`` is an analyst's own
    PostgreSQL session, whose TimeZone each check sets. It never prepares a statement:
    PostgreSQL reads a prepared statement's literal as a timestamptz once, in the zone of
    the moment (psycopg prepares a query asked five times), and would answer a query
    asked again in another zone as in the first."""

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

    def fill(self, instants: Sequence[Moment]) -> None:
        fill_duckdb(self.duck, instants)
        fill_postgres(self.engine, self.schema, instants)

    def check(self, sql: str, zone: str) -> None:
        """dpproxy's bounded exact answer on both engines is PostgreSQL's in ``zone``."""
        self.direct.execute(f"SET TimeZone = '{zone}'")
        expected = _shown(self.direct.execute(sql).fetchall(), zone)
        for dialect in ("duckdb", "postgres"):
            made = plan(
                sql,
                catalog("main" if dialect == "duckdb" else self.schema),
                PlanRequest(1.0, dialect, delta=1e-6, time_zone=zone),
            )
            assert made.time_zone == zone
            if dialect == "duckdb":
                rows = self.duck.execute(made.sql).fetchall()
            else:
                rows = self.engine.execute(made.sql).fetchall()
            assert _answer(made, rows) == expected, (dialect, zone, sql, made.sql)


def _answer(made: Plan, rows: list[tuple[object, ...]]) -> dict[object, object]:
    """The bounded exact answer: per group, its exact count; without GROUP BY, the release
    with zero noise."""
    if made.keys:
        return {row[0]: row[1] for row in rows}
    released = made.release(rows, ZeroNoise()).rows
    return {None: _number(released[0][0])}


def _shown(rows: list[tuple[object, ...]], zone: str) -> dict[object, object]:
    """PostgreSQL's answer as dpproxy releases it: a timestamp with time zone as its local
    time in ``zone``, numbers as numbers."""
    if rows and len(rows[0]) == 1:
        return {None: _number(rows[0][0] or 0)}
    found: dict[object, object] = {}
    for value, count in rows:
        key = value
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            key = value.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
        if isinstance(value, Decimal):
            key = float(value)
        found[key] = count
    return found


def _number(value: object) -> object:
    if isinstance(value, (Decimal, float)) and float(value).is_integer():
        return int(value)
    return value


@pytest.mark.parametrize("zone", ZONES)
def test_literals_compare_as_postgresql_reads_them(engines: Engines, zone: str) -> None:
    engines.fill(around_changes())
    for literal in LITERALS:
        for sql in COMPARED:
            engines.check(sql.format(literal=literal), zone)
        if literal[-1].isdigit() and "+" not in literal and literal.count("-") == 2:
            for sql in TYPED:
                engines.check(sql.format(literal=literal, day=literal[:10]), zone)


@pytest.mark.parametrize("zone", ZONES)
def test_keys_and_values_are_local_times(engines: Engines, zone: str) -> None:
    engines.fill(around_changes())
    for sql in (*GROUPED, *AGGREGATES):
        engines.check(sql, zone)


def test_the_repeated_hour_compares_as_instants(engines: Engines) -> None:
    """In the hour the clocks repeat, 02:30+02 comes before 02:20+01: compared as
    instants, as PostgreSQL does, not as local times."""
    engines.fill(around_changes())
    engines.check(
        "SELECT COUNT(*) FROM events WHERE ts > '2024-10-27 02:20+02' AND ts < "
        "'2024-10-27 02:20+01'",
        "Europe/Paris",
    )


def test_the_constants_are_evaluated_before_the_charge(engines: Engines) -> None:
    """The literals' instants and the zone itself are constants the proxy evaluates on
    their own before the charge (rewriter.passes.constants): they run on both engines,
    whose clients fetch them as text (DuckDB's would need pytz for a timestamptz)."""
    for sql in (
        COMPARED[0].format(literal="2024-10-27 02:30"),
        COMPARED[0].format(literal="2024-10-27 02:30+01"),
        GROUPED[0],
        AGGREGATES[2],
    ):
        for dialect in ("duckdb", "postgres"):
            schema = "main" if dialect == "duckdb" else engines.schema
            made = plan(
                sql,
                catalog(schema),
                PlanRequest(1.0, dialect, delta=1e-6, time_zone="Asia/Kolkata"),
            )
            assert any("AT TIME ZONE 'Asia/Kolkata'" in c.sql for c in made.constants)
            if dialect == "duckdb":
                engines.duck.execute(evaluation_sql(made.constants)).fetchall()
            else:
                engines.engine.execute(evaluation_sql(made.constants)).fetchall()
    unknown = zone_probe("Nowhere/Atlantis", "duckdb")
    with pytest.raises(duckdb.Error):
        engines.duck.execute(evaluation_sql((unknown,))).fetchall()


def test_a_quantile_query_names_local_times_and_instants_apart(engines: Engines) -> None:
    """With a quantile, the rows go through a row-level query that names the columns the
    per-person query reads: the local time of ts (the key) and its instant (compared in
    FILTER) are two of them, or the count would compare a local time with an instant, in
    the engine's own zone."""
    engines.fill(around_changes())
    counted = "COUNT(*) FILTER (WHERE ts >= '2024-10-27 02:30')"
    median = "MEDIAN(EXTRACT(minute FROM ts))"
    sql = f"SELECT EXTRACT(hour FROM ts), {median}, {counted} FROM events GROUP BY 1"
    engines.direct.execute("SET TimeZone = 'Europe/Paris'")
    truth = engines.direct.execute(
        f"SELECT EXTRACT(hour FROM ts), {counted} FROM events GROUP BY 1"
    ).fetchall()
    expected = {(None if h is None else float(h)): n for h, n in truth}
    for dialect in ("duckdb", "postgres"):
        schema = "main" if dialect == "duckdb" else engines.schema
        made = plan(
            sql, catalog(schema), PlanRequest(1.0, dialect, delta=1e-6, time_zone="Europe/Paris")
        )
        column = 1 + next(i for i, m in enumerate(made.measurements) if m.spec.kind.name == "COUNT")
        run = engines.duck if dialect == "duckdb" else engines.engine
        rows = run.execute(made.sql).fetchall()
        assert {row[0]: int(row[column]) for row in rows} == expected, dialect


@pytest.mark.parametrize("zone", ZONES)
def test_bounds_clamp_instants_in_utc(engines: Engines, zone: str) -> None:
    """The declared bounds (2020-01-01 to 2029-12-31) are instants in UTC: a value beyond
    them, ±infinity included, is clamped as an instant, then read in the session's zone
    (2020-01-01 00:00 UTC is still 2019 in New York, 2029-12-31 23:59:59.999999 UTC is
    2030 in Paris)."""
    low, high = dt.datetime(2020, 1, 1), dt.datetime(2029, 12, 31, 23, 59, 59, 999999)
    data: list[Moment] = [
        dt.datetime(2018, 6, 1),
        dt.datetime(2019, 12, 31, 23, 30),
        dt.datetime(2020, 1, 1, 3, 0),
        dt.datetime(2029, 12, 31, 20, 0),
        dt.datetime(2031, 1, 1),
        "infinity",
        "-infinity",
        None,
    ]
    engines.fill(data)
    local = ZoneInfo(zone)

    def year(moment: Moment) -> int:
        if moment is None:
            return 0
        if isinstance(moment, str):
            moment = high if moment == "infinity" else low
        clamped = min(max(moment, low), high).replace(tzinfo=dt.UTC)
        return clamped.astimezone(local).year

    expected = sum(year(moment) for moment in data)
    for dialect in ("duckdb", "postgres"):
        made = plan(
            "SELECT SUM(EXTRACT(year FROM ts)) FROM events",
            catalog("main" if dialect == "duckdb" else engines.schema),
            PlanRequest(1.0, dialect, time_zone=zone),
        )
        run = engines.duck if dialect == "duckdb" else engines.engine
        released = made.release(run.execute(made.sql).fetchall(), ZeroNoise()).rows
        assert released[0][0] == expected, (dialect, zone)


_START = dt.datetime(2020, 1, 1)
_SPAN = (dt.datetime(2029, 12, 31) - _START) // dt.timedelta(seconds=1)

instants = st.one_of(
    st.none(),
    st.builds(
        lambda change, quarter, second: change + dt.timedelta(minutes=15 * quarter, seconds=second),
        st.sampled_from(CHANGES),
        st.integers(-100, 100),
        st.sampled_from([0, 0, 0, 1, 59]),
    ),
    st.integers(0, _SPAN).map(lambda s: _START + dt.timedelta(seconds=s)),
)
literals = st.one_of(
    st.sampled_from(LITERALS),
    st.builds(
        lambda change, minutes, offset: (
            (change + dt.timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S") + offset
        ),
        st.sampled_from(CHANGES),
        st.integers(-600, 600),
        st.sampled_from(["", "", "", "+01", "-05:00", "Z", "+05:30"]),
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    data=st.lists(instants, max_size=40),
    literal=literals,
    zone=st.sampled_from(ZONES),
    query=st.sampled_from((*COMPARED, *GROUPED, *AGGREGATES)),
)
def test_random_instants_and_literals(
    pg_dsn: str, data: list[dt.datetime | None], literal: str, zone: str, query: str
) -> None:
    with _ENGINES.open(pg_dsn) as engines:
        engines.fill(data)
        engines.check(query.format(literal=literal), zone)


class _Shared:
    """One pair of engines for all of hypothesis's examples (a fixture is set up once per
    test, not per example)."""

    def __init__(self) -> None:
        self.found: Engines | None = None
        self.schema = f"dpproxy_tzh_{uuid.uuid4().hex[:10]}"

    def open(self, dsn: str) -> _Use:
        if self.found is None:
            engine = psycopg.connect(dsn, autocommit=True)
            direct = psycopg.connect(dsn, autocommit=True)
            engine.execute(f'CREATE SCHEMA "{self.schema}"')
            engine.execute(CREATE.format(schema=f'"{self.schema}"'))
            engine.execute(f"SET TimeZone = '{POSTGRES_ENGINE_ZONE}'")
            direct.execute(f'SET search_path TO "{self.schema}"')
            direct.prepare_threshold = None  # see Engines
            self.found = Engines(self.schema, duckdb_events([]), engine, direct)
        return _Use(self.found)

    def close(self) -> None:
        if self.found is not None:
            self.found.engine.execute(f'DROP SCHEMA "{self.schema}" CASCADE')
            self.found.engine.close()
            self.found.direct.close()
            self.found = None


class _Use:
    def __init__(self, engines: Engines) -> None:
        self.engines = engines

    def __enter__(self) -> Engines:
        return self.engines

    def __exit__(self, *exc: object) -> None:
        return None


_ENGINES = _Shared()


@pytest.fixture(scope="module", autouse=True)
def _drop_shared() -> Iterator[None]:
    yield
    _ENGINES.close()
