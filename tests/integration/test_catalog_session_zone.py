"""Every operation on a timestamp with time zone in a catalog query is computed in the
session's TimeZone, as PostgreSQL 15 computes it: casts to text, date, time and
timestamp, EXTRACT and date_part(), date_trunc(), to_char(), AT TIME ZONE, comparisons
with timestamps, dates and text, and intervals added across a change to summer time.
The answers (column names, types, text) of the same statements in the same TimeZone are
compared with the real PostgreSQL's, in zones with summer time (Paris, New York, Lord
Howe's half hour), offsets of half hours (Kolkata, St John's) and fixed offsets
(SET TimeZone = 2, UTC+3). Before, dpproxy computed them in UTC: now()::text was
'...05:57:04+00' in a Tokyo session, extract(hour from now()) 5, to_char(now(), 'HH24 TZ')
'05 Etc/UTC' in a column called time_to_str.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Iterator
from decimal import Decimal

import psycopg
import pytest
from psycopg.pq import ExecStatus

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

DIRECTORY_PREFIX = "session-zone-"
Connection = psycopg.Connection[tuple[object, ...]]
# (TimeZone as SET writes it)
ZONES = [
    "'Europe/Paris'",
    "'America/New_York'",
    "'Asia/Tokyo'",
    "'Asia/Kolkata'",
    "'America/St_Johns'",
    "'Australia/Lord_Howe'",
    "2",  # <+02>-02
    "'UTC+3'",  # POSIX: three hours west of UTC
    "UTC",
]
# Moments around the changes to and from summer time in Paris and New York (2024).
SPRING = "TIMESTAMPTZ '2024-03-31 00:30:00+00'"
STATEMENTS = [
    # Casts: a timestamptz's text, date and time of day in the zone.
    f"SELECT {SPRING}::text, {SPRING}::date, {SPRING}::time, {SPRING}::timestamp, "
    f"{SPRING}::timetz, date({SPRING})",
    "SELECT CAST(TIMESTAMPTZ '2024-10-27 00:30:00.123456+00' AS text), "
    "TIMESTAMPTZ '2024-10-27 01:30:00+00'::varchar::text, TIMESTAMPTZ '1800-01-01 00:00+00'::text",
    # To a timestamptz: local times in the zone (a skipped or repeated hour as PostgreSQL
    # reads it).
    "SELECT '2024-03-31 02:30'::timestamptz, '2024-10-27 02:30'::timestamptz::text, "
    "TIMESTAMPTZ '2024-03-10 02:30', TIMESTAMPTZ '2024-11-03 01:30', "
    "TIMESTAMP '2024-03-31 02:30'::timestamptz, DATE '2024-03-31'::timestamptz",
    # EXTRACT (numeric) and date_part (double precision).
    f"SELECT extract(hour from {SPRING}), extract(day from {SPRING}), "
    f"extract(dow from {SPRING}), extract(epoch from {SPRING}), extract(timezone from {SPRING}), "
    f"extract(timezone_hour from {SPRING}), extract(timezone_minute from {SPRING})",
    "SELECT extract(second from TIMESTAMPTZ '2024-12-31 23:30:30.5+00'), "
    "extract(week from TIMESTAMPTZ '2024-12-31 23:30:30.5+00'), "
    "extract(isoyear from TIMESTAMPTZ '2024-12-31 23:30:30.5+00'), "
    "extract(year from TIMESTAMPTZ '2024-12-31 23:30:30.5+00'), "
    "extract(century from TIMESTAMPTZ '2000-12-31 23:30:00+00')",
    f"SELECT date_part('hour', {SPRING}), date_part('epoch', {SPRING}), "
    "date_part('second', TIMESTAMPTZ '2024-03-31 00:30:30.123457+00'), "
    f"date_part('julian', {SPRING}), date_part('timezone', {SPRING}), "
    "date_part('day', DATE '2024-03-31')",
    # date_trunc: local midnight, the hour Paris repeats keeps its offset.
    "SELECT date_trunc('day', TIMESTAMPTZ '2024-03-31 12:00:00+00'), "
    "date_trunc('hour', TIMESTAMPTZ '2024-10-27 00:40:00+00'), "
    "date_trunc('hour', TIMESTAMPTZ '2024-10-27 01:40:00+00'), "
    "date_trunc('month', TIMESTAMPTZ '2024-03-31 23:30:00+00'), "
    "date_trunc('century', TIMESTAMPTZ '2024-03-31 23:30:00+00'), "
    "date_trunc('day', DATE '2024-03-31'), "
    "date_trunc('day', TIMESTAMPTZ '2024-03-31 12:00:00+00', 'Asia/Tokyo')",
    # to_char, with the zone's abbreviation.
    f"SELECT to_char({SPRING}, 'YYYY-MM-DD HH24:MI:SS TZ OF'), to_char({SPRING}, 'tz TZH:TZM'), "
    "to_char(TIMESTAMPTZ '2024-03-31 13:05:09.123456+00', "
    "'FMDay Month DDth HH12 am MS US J IW \"at\" Dy, Mon YYYY'), "
    "to_char(DATE '2024-07-31', 'YYYY-MM-DD HH24 TZ'), "
    "to_char(TIMESTAMP '2024-03-31 13:05', 'HH24 TZ|OF')",
    # AT TIME ZONE: PostgreSQL's reading of the zone (CET is always +01, '+02' west).
    f"SELECT {SPRING} AT TIME ZONE 'UTC', {SPRING} AT TIME ZONE 'America/New_York', "
    "TIMESTAMP '2024-03-31 00:30:00' AT TIME ZONE 'Asia/Tokyo', "
    "TIMESTAMPTZ '2024-07-01 00:00+00' AT TIME ZONE 'CET', "
    "TIMESTAMPTZ '2024-07-01 00:00+00' AT TIME ZONE '+02', "
    "timezone('europe/paris', TIMESTAMPTZ '2024-07-01 00:00+00'), "
    "DATE '2024-03-31' AT TIME ZONE 'UTC'",
    # Comparisons with timestamps, dates and text: local times in the zone.
    f"SELECT {SPRING} = TIMESTAMP '2024-03-31 01:30:00', {SPRING} < TIMESTAMP '2024-03-31 01:30', "
    f"{SPRING} = '2024-03-31 09:30', {SPRING} > '2024-03-31', "
    f"{SPRING} BETWEEN '2024-03-31' AND '2024-03-31 23:59', "
    f"{SPRING} IN ('2024-03-31 01:30', '2024-03-30 20:30'), {SPRING} >= DATE '2024-03-31'",
    # Intervals: a day is 23 hours on the day Paris changes to summer time.
    "SELECT TIMESTAMPTZ '2024-03-30 12:00:00+00' + INTERVAL '1 day', "
    "TIMESTAMPTZ '2024-03-30 12:00:00+00' + INTERVAL '24 hours', "
    "TIMESTAMPTZ '2024-10-26 12:00:00+00' + INTERVAL '1 day', "
    "INTERVAL '1 month' + TIMESTAMPTZ '2024-02-29 23:30:00+00', "
    "TIMESTAMPTZ '2024-03-10 12:00:00+00' - INTERVAL '1 mon 1 day 1 hour', "
    "TIMESTAMPTZ '2024-03-31 12:00:00+00' - TIMESTAMP '2024-03-30 12:00:00', "
    "(TIMESTAMPTZ '2024-03-30 12:00:00+00' + INTERVAL '1 day')::text",
    "SELECT age(TIMESTAMPTZ '2024-11-03 12:00:00+00', TIMESTAMPTZ '2024-03-10 03:00:00+00'), "
    "make_timestamptz(2024, 3, 31, 2, 30, 0), "
    "to_timestamp('2024-03-31 02:30', 'YYYY-MM-DD HH24:MI'), to_timestamp(1711845000)",
    # Text made of a timestamptz.
    f"SELECT 'at ' || {SPRING}, concat('a', {SPRING}), format('%s', {SPRING}), "
    f"to_json({SPRING})::text",
    # Values whose type only DuckDB knows (a subquery's column, an aggregate's).
    f"SELECT x::text, x::date, extract(hour from x), to_char(x, 'HH24 TZ'), "
    "x + INTERVAL '1 day', date_trunc('day', x), x = TIMESTAMP '2024-03-31 01:30', "
    f"max(x)::text FROM (SELECT {SPRING} AS x) t GROUP BY x",
    f"SELECT CASE WHEN true THEN {SPRING} END::text, "
    f"greatest({SPRING}, TIMESTAMP '2024-03-31 02:00'), "
    f"CASE WHEN false THEN {SPRING} ELSE TIMESTAMP '2024-03-31 02:00' END",
    f"SELECT TIMESTAMP '2024-03-31 02:00' AS t UNION SELECT {SPRING} ORDER BY 1",
    "SELECT TIMESTAMPTZ 'infinity'::text, extract(hour from TIMESTAMPTZ 'infinity'), "
    "date_part('year', TIMESTAMPTZ '-infinity'), to_char(TIMESTAMPTZ 'infinity', 'YYYY')",
]
# What dpproxy refuses (0A000, with what to write instead) rather than answer otherwise.
REFUSED = [
    f"SELECT extract(julian from {SPRING})",
    "SELECT TIMESTAMPTZ '2024-07-01 00:00+00' AT TIME ZONE 'MSK'",
    "SELECT TIMESTAMPTZ '2024-01-01 00:00 Europe/Paris'",
    "SELECT now()::timestamptz(3)",
    "SELECT to_char(now(), 'TMMonth')",
    "SELECT ARRAY[now()]::text",
    "SELECT to_json(ARRAY[now()])",
    "SELECT * FROM generate_series(now(), now() + interval '2 days', interval '1 day')",
    "SELECT date_trunc('day', max(x)) FROM (SELECT now() AS x) t",
]


@pytest.fixture(scope="module")
def server(duckdb_server: RunningServer) -> RunningServer:
    # Catalog queries never reach the backend: one server, on DuckDB, the shared one.
    return duckdb_server


@pytest.fixture(scope="module")
def proxy(server: RunningServer) -> Iterator[Connection]:
    with psycopg.connect(server.dsn("alice"), autocommit=True, connect_timeout=10) as conn:
        yield conn


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def answer(conn: Connection, sql: str) -> list[tuple[str, int, str | None]] | str:
    """(name, type OID, text) of each column of the first row, or the error's SQLSTATE."""
    result = conn.pgconn.exec_params(sql.encode(), [], result_format=0)
    if result.status != ExecStatus.TUPLES_OK:
        return f"error {(result.error_field(psycopg.pq.DiagnosticField.SQLSTATE) or b'').decode()}"
    columns: list[tuple[str, int, str | None]] = []
    for i in range(result.nfields):
        name, value = result.fname(i) or b"", result.get_value(0, i)
        columns.append((name.decode(), result.ftype(i), None if value is None else value.decode()))
    return columns


def set_zone(zone: str, *connections: Connection) -> None:
    for conn in connections:
        conn.execute(f"SET TimeZone = {zone}")


@pytest.mark.parametrize("zone", ZONES)
def test_operations_on_timestamptz_are_postgresqls(
    proxy: Connection, postgres: Connection, zone: str
) -> None:
    set_zone(zone, proxy, postgres)
    differences = [
        (sql, ours, theirs)
        for sql in STATEMENTS
        if (ours := answer(proxy, sql)) != (theirs := answer(postgres, sql))
    ]
    assert differences == []


def test_now_in_the_sessions_time_zone(proxy: Connection, postgres: Connection) -> None:
    # The report: SELECT now()::text... in a Tokyo session answered in UTC.
    sql = (
        "SELECT now()::text, now(), current_timestamp::text, localtimestamp::text, "
        "now()::date, extract(hour from now()), to_char(now(), 'HH24 TZ')"
    )
    for name in ("Asia/Tokyo", "America/New_York", "Europe/Paris"):
        set_zone(f"'{name}'", proxy, postgres)
        cursor = proxy.execute(sql)
        row = cursor.fetchone()
        theirs = postgres.execute(sql)
        assert cursor.description is not None and theirs.description is not None
        assert [(c.name, c.type_code) for c in cursor.description] == [
            (c.name, c.type_code) for c in theirs.description
        ]
        assert row is not None
        text, moment, current, local, date, hour, formatted = row
        assert isinstance(moment, dt.datetime)
        here = moment.astimezone(zoneinfo.ZoneInfo(name))
        offset = here.utcoffset()
        assert offset is not None
        hours = int(offset.total_seconds()) // 3600
        clock = here.strftime("%Y-%m-%d %H:%M:%S")
        assert isinstance(text, str) and text.startswith(clock)
        assert text.endswith(f"{'+' if hours >= 0 else '-'}{abs(hours):02d}")
        assert current == text
        assert isinstance(local, str) and local.startswith(clock) and "+" not in local
        assert (date, hour) == (here.date(), Decimal(here.hour))
        assert formatted == f"{here.hour:02d} {here.tzname()}"


def test_what_dpproxy_cannot_compute_as_postgresql_is_refused(proxy: Connection) -> None:
    proxy.execute("SET TimeZone = 'Europe/Paris'")
    for sql in REFUSED:
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            proxy.execute(sql)
        assert refused.value.diag.message_primary, sql
        assert refused.value.diag.message_hint, sql
    assert proxy.execute("SELECT 1").fetchone() == (1,)  # the session goes on
