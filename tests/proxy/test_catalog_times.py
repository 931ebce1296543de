"""Times, time zones and intervals in catalog answers, as PostgreSQL shows them.

``SELECT now()`` (a client's ping), ``current_timestamp``, ``current_date`` and
``localtimestamp`` are answered, with PostgreSQL's column names; timestamptz values are
shown in the session's TimeZone (DuckDB's Python client needed pytz for them); intervals
keep their months, days and microseconds apart (the client made a timedelta of them, a
month 30 days). Each value is compared with what the real PostgreSQL 15 shows and sends
in binary, in several time zones.
"""

from __future__ import annotations

import datetime as dt
import re
import struct
import zoneinfo
from collections.abc import Iterator

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.pq import ExecStatus

from proxy.catalog.database import CatalogDatabase, CatalogQueryFailed
from proxy.catalog.datetimes import (
    INFINITY,
    MINUS_INFINITY,
    interval_text,
    session_zone,
    timestamptz_text,
)
from proxy.catalog.pgtypes import result_type
from proxy.catalog.text import pg_text
from proxy.catalog.translate import CatalogRefused, SessionValues, translate
from proxy.protocol import values
from tests.proxy.test_catalog_translate import demo_catalog

TIMESTAMPTZ, TIMESTAMP, DATE, TIME, TIMETZ, INTERVAL = 1184, 1114, 1082, 1083, 1266, 1186
ZONES = [
    "UTC",
    "Europe/Paris",
    "America/St_Johns",  # -03:30, and -02:30 in summer
    "Asia/Kolkata",
    "<+02>-02",  # SET TimeZone = 2
    "UTC+3",  # POSIX: three hours west of UTC
    "<+05:30>-05:30",
]
# Values that do not change between two runs, on DuckDB as on PostgreSQL.
EXPRESSIONS = [
    "INTERVAL '1 month 2 days'",
    "INTERVAL '1 year 3 months'",
    "INTERVAL '-1 day 02:00'",
    "'1 day'::interval * 2",
    "INTERVAL '-1 year -5 months -3 days -04:05:06.789'",
    "INTERVAL '-1 year 2 mons'",
    "INTERVAL '1 year -2 mons'",
    "INTERVAL '-1 mon -2 days 3 hours'",
    "INTERVAL '0'",
    "INTERVAL '-1 day'",
    "INTERVAL '1 day -00:00:01'",
    "INTERVAL '100000 hours 1 second'",
    "INTERVAL '-7 months 3 days'",
    "INTERVAL '1 mon -1 day'",
    "INTERVAL '1' DAY",
    "INTERVAL '-0.5 seconds'",
    "INTERVAL '1 day 2 hours 3 minutes 4.5 seconds'",
    "INTERVAL '-13 mons'",
    "INTERVAL '2147483647 days'",
    "INTERVAL '-178956970 years'",
    "TIMESTAMPTZ '2020-01-01 00:00+02'",
    "TIMESTAMPTZ '2020-01-01 00:00'",  # no offset: in the session's TimeZone
    "TIMESTAMP WITH TIME ZONE '2020-07-01 12:34:56.5'",
    "'2021-03-28 01:30:00+00'::timestamptz",
    "TIMESTAMPTZ '1800-01-01 00:00+00'",  # local mean time: +00:09:21 in Paris
    "TIMESTAMPTZ '20000-07-01 00:00+00'",  # the zone's last rule: summer time
    "TIMESTAMPTZ '0001-01-01 00:00+00' - INTERVAL '44 years'",  # BC
    "TIMESTAMPTZ '2020-01-01 00:00:00.000001+00'",
    "TIMESTAMPTZ 'infinity'",
    "TIMESTAMPTZ '-infinity'",
    "NULL::timestamptz",
    "TIMESTAMP '2020-01-01 12:34:56.5'",
    "TIME '12:34:56.25'",
    "TIMETZ '12:00:00.5+05:30'",
    "date_trunc('day', TIMESTAMPTZ '2020-07-01 23:30+00')",
    "array[TIMESTAMPTZ '2020-01-01 00:00+02']",
    "array[INTERVAL '1 mon', NULL]",
]

Connection = psycopg.Connection[tuple[object, ...]]


@pytest.fixture(scope="module")
def database() -> CatalogDatabase:
    return CatalogDatabase(demo_catalog())


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SET IntervalStyle = 'postgres'")
        yield conn


def session(zone: str) -> SessionValues:
    return SessionValues("alice", "demo", "PostgreSQL 15.0 (dpproxy test)", {"timezone": zone})


def answer(
    database: CatalogDatabase, sql: str, zone: str = "UTC"
) -> list[tuple[str, int, str | None]]:
    """(name, type OID, text) of each column of ``sql``'s first row, as dpproxy answers."""
    translation = translate(sql, session(zone))
    assert translation is not None and translation.column_names is not None, sql
    output = database.run_blocking(translation.sql, zone=session_zone(zone))
    return [
        (name, result_type(duck)[0], pg_text(value))
        for name, duck, value in zip(
            translation.column_names, output.column_types, output.rows[0], strict=True
        )
    ]


STAMP = r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?"
CLOCK = r"\d{2}:\d{2}:\d{2}(\.\d{1,6})?"


@pytest.mark.parametrize(
    ("sql", "columns"),
    [
        ("SELECT now()", [("now", TIMESTAMPTZ, STAMP + r"\+00")]),
        (
            "SELECT current_timestamp, current_date, localtimestamp",
            [
                ("current_timestamp", TIMESTAMPTZ, STAMP + r"\+00"),
                ("current_date", DATE, r"\d{4}-\d{2}-\d{2}"),
                ("localtimestamp", TIMESTAMP, STAMP),
            ],
        ),
        (
            "SELECT current_time, localtime, pg_catalog.now(), transaction_timestamp()",
            [
                ("current_time", TIMETZ, CLOCK + r"\+00"),
                ("localtime", TIME, CLOCK),
                ("now", TIMESTAMPTZ, STAMP + r"\+00"),
                ("transaction_timestamp", TIMESTAMPTZ, STAMP + r"\+00"),
            ],
        ),
        (
            "SELECT now()::date, NOW ( ) AS at, date_trunc('hour', now())",
            [
                ("now", DATE, r"\d{4}-\d{2}-\d{2}"),
                ("at", TIMESTAMPTZ, STAMP + r"\+00"),
                ("date_trunc", TIMESTAMPTZ, r"\d{4}-\d{2}-\d{2} \d{2}:00:00\+00"),
            ],
        ),
    ],
)
def test_now_and_its_kin_are_answered_with_postgresql_names(
    database: CatalogDatabase, sql: str, columns: list[tuple[str, int, str]]
) -> None:
    shown = answer(database, sql)
    assert [(name, oid) for name, oid, _ in shown] == [(name, oid) for name, oid, _ in columns]
    for (_, _, text), (_, _, pattern) in zip(shown, columns, strict=True):
        assert text is not None and re.fullmatch(pattern, text), text


@pytest.mark.parametrize("zone", ZONES)
def test_values_as_postgresql_shows_and_sends_them(
    database: CatalogDatabase, postgres: Connection, zone: str
) -> None:
    postgres.execute("SELECT set_config('TimeZone', %s, false)", (zone,))
    differences = []
    for expression in EXPRESSIONS:
        sql = f"SELECT {expression}"
        ((name, oid, text),) = answer(database, sql, zone)
        result = postgres.pgconn.exec_params(sql.encode(), [], result_format=0)
        assert result.status == ExecStatus.TUPLES_OK, result.error_message
        raw = result.get_value(0, 0)
        theirs = (result.fname(0).decode(), result.ftype(0), None if raw is None else raw.decode())
        if (name, oid, text) != theirs:
            differences.append((expression, (name, oid, text), theirs))
            continue
        if text is not None and oid in values.BINARY_RESULT_TYPES:
            binary = postgres.pgconn.exec_params(sql.encode(), [], result_format=1)
            if values.encode_binary(oid, text) != binary.get_value(0, 0):
                differences.append((expression, "binary", text))
    assert differences == []


@pytest.mark.parametrize("zone", ZONES)
def test_local_times_are_the_session_zones(database: CatalogDatabase, zone: str) -> None:
    # One query, one moment: each local value is now() seen in the session's TimeZone.
    sql = (
        "SELECT now(), localtimestamp, current_date, localtime, current_time, "
        "date_trunc('day', now()), now()::date, now()::timestamp, now()::time"
    )
    texts = [text for _, _, text in answer(database, sql, zone)]
    assert all(text is not None for text in texts)
    now, local, date, clock, clock_zone, midnight, *casts = (str(t) for t in texts)
    match = re.fullmatch(r"(\S+) (\S+?)([+-][\d:]+)", now)
    assert match is not None, now
    day, time_of_day, offset = match.groups()
    assert (local, date, clock, clock_zone) == (
        f"{day} {time_of_day}",
        day,
        time_of_day,
        time_of_day + offset,
    )
    assert casts == [day, local, clock]
    zone_info = session_zone(zone).zone
    assert zone_info is not None
    start = dt.datetime.fromisoformat(day).replace(tzinfo=zone_info)
    start_offset = start.utcoffset()
    assert start_offset is not None
    micros = (start - dt.datetime(1970, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    assert midnight == timestamptz_text(micros, zone_info)
    assert midnight.startswith(f"{day} 00:00:00")


def test_interval_texts() -> None:
    # PostgreSQL's EncodeInterval: each part its own sign, "+" after a negative part.
    assert interval_text(0, 0, 0) == "00:00:00"
    assert interval_text(1, 2, 0) == "1 mon 2 days"
    assert interval_text(15, 0, 0) == "1 year 3 mons"
    assert interval_text(0, -1, 2 * 3_600_000_000) == "-1 days +02:00:00"
    assert interval_text(-1, -2, 3 * 3_600_000_000) == "-1 mons -2 days +03:00:00"
    assert interval_text(0, 1, -1_000_000) == "1 day -00:00:01"
    assert interval_text(-17, 0, -1) == "-1 years -5 mons -00:00:00.000001"
    assert interval_text(0, 0, 100_000 * 3_600_000_000 + 1_500_000) == "100000:00:01.5"


INTERVALS = st.tuples(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63) + 1, 2**63 - 1),
)


@given(INTERVALS)
def test_interval_texts_are_sent_as_their_parts(parts: tuple[int, int, int]) -> None:
    months, days, micros = parts
    encoded = values.encode_binary(INTERVAL, interval_text(months, days, micros))
    assert struct.unpack("!qii", encoded) == (micros, days, months)


# PostgreSQL's timestamptz range, in microseconds from 1970 (4714-11-24 BC to 294276).
FIRST_MICROS = -210_866_803_200_000_000
LAST_MICROS = 9_224_318_015_999_999_999
TIME_ZONES = st.sampled_from(
    [
        dt.UTC,
        dt.timezone(dt.timedelta(hours=5, minutes=30)),
        dt.timezone(dt.timedelta(hours=-3)),
        zoneinfo.ZoneInfo("Europe/Paris"),
        zoneinfo.ZoneInfo("America/St_Johns"),
        zoneinfo.ZoneInfo("Asia/Kolkata"),
    ]
)


@given(st.integers(FIRST_MICROS, LAST_MICROS), TIME_ZONES)
def test_timestamptz_texts_are_sent_as_their_moment(micros: int, zone: dt.tzinfo) -> None:
    text = timestamptz_text(micros, zone)
    encoded = values.encode_binary(TIMESTAMPTZ, text)
    assert struct.unpack("!q", encoded) == (micros - 946_684_800_000_000,)


def test_timestamptz_infinities() -> None:
    assert timestamptz_text(INFINITY, dt.UTC) == "infinity"
    assert timestamptz_text(MINUS_INFINITY, dt.UTC) == "-infinity"


def test_time_with_time_zone_is_sent_in_binary() -> None:
    # The time of day, then the offset in seconds west of UTC (PostgreSQL's timetz_send).
    assert values.TIMETZ in values.BINARY_RESULT_TYPES
    assert values.encode_binary(TIMETZ, "12:00:00.5+05:30") == struct.pack(
        "!qi", 43_200_500_000, -19_800
    )
    assert values.encode_binary(TIMETZ, "00:00:00-03") == struct.pack("!qi", 0, 10_800)


def test_what_cannot_be_shown_is_refused(database: CatalogDatabase) -> None:
    # A POSIX rule with summer time: Python and DuckDB have no such zone.
    rule = "CET-1CEST,M3.5.0,M10.5.0/3"
    with pytest.raises(CatalogRefused, match="cannot compute local times in the time zone"):
        translate("SELECT current_date", session(rule))
    translation = translate("SELECT now()", session(rule))
    assert translation is not None
    with pytest.raises(CatalogQueryFailed, match="timestamp with time zone values"):
        database.run_blocking(translation.sql, zone=session_zone(rule))
    with pytest.raises(CatalogRefused, match="precision"):
        translate("SELECT current_timestamp(3)", session("UTC"))
    translation = translate("SELECT map(['a'], [INTERVAL '1 day'])", session("UTC"))
    assert translation is not None
    with pytest.raises(CatalogQueryFailed, match="inside a map"):
        database.run_blocking(translation.sql)
