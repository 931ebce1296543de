"""Dates and timestamps written as text, and to_date / to_timestamp of a text and a
format, read exactly as PostgreSQL 15 reads them (rewriter.datetime_input,
rewriter.to_timestamp_format), compared with PostgreSQL itself on many texts: the value,
or PostgreSQL's SQLSTATE and message where it refuses one. Texts and formats dpproxy does
not read are refused with 0A000, saying which forms it reads."""

from __future__ import annotations

import datetime as dt
import itertools
import random
import zoneinfo
from collections.abc import Iterator

import psycopg
import pytest

from rewriter import (
    ColumnType,
    ColumnTypes,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.datetime_input import moment_instant, read_moment
from rewriter.to_timestamp_format import read_date, read_timestamp

ZONES = ("America/New_York", "Asia/Kolkata", "Europe/Paris")
DATES: tuple[str, ...] = (
    "2023-01-01",
    "2023-1-1",
    "2024-02-29",
    "2023-02-29",
    "2023-13-01",
    "2023-00-10",
)
DATES += ("2023-01-32", "0000-01-01", "9999-12-31", "0001-01-01", "2024-03-31", "2024-11-03")
TIMES: tuple[str, ...] = (
    "",
    "T00:00:00",
    " 23:59:59",
    "T24:00:00",
    " 24:00:01",
    "T23:59:60",
    "t00:00:60.000001",
)
TIMES += (" 23:59:60.5", "T1:2", "T01:02:03.9999995", "T23:59:59.9999995", "  02:30")
TIMES += ("T12:30:45.123456789", "T00:60:00", "T25:00", "T00:00:00.0000025", " 01:30:00")
OFFSETS: tuple[str, ...] = (
    "",
    "Z",
    "z",
    " Z",
    "+03",
    "-08:00",
    "+0530",
    "+5:3",
    "+123",
    "+15:59:59",
    "+16",
)
OFFSETS += ("+01:60", " +05:30", "-00", "+9999", "+160", "-1")


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.prepare_threshold = None
        yield conn


def _postgres(conn: psycopg.Connection[tuple[object, ...]], sql: str, *args: str) -> object:
    try:
        (row,) = conn.execute(sql, args).fetchall()
    except psycopg.Error as error:
        if error.sqlstate is None:  # a value before the year 1, which Python cannot hold
            return None
        return ("error", error.sqlstate, error.diag.message_primary)
    return row[0]


@pytest.mark.parametrize("zone", ZONES)
def test_texts_read_as_postgresql_reads_them(
    postgres: psycopg.Connection[tuple[object, ...]], zone: str
) -> None:
    """A date, a timestamp and a timestamp with time zone (its instant, in UTC) of each
    text: PostgreSQL's value, or its refusal; texts not read here are None."""
    postgres.execute(f"SET TimeZone = '{zone}'")
    texts = ["".join(p) for p in itertools.product(DATES, TIMES, OFFSETS)]
    texts = random.Random(zone).sample(texts, 700) + [" epoch ", "EPOCH", " 2023-01-01 "]
    read = 0
    for text in texts:
        try:
            moment = read_moment(text)
        except Rejected as rejection:
            found: list[object] = [("error", rejection.sqlstate, rejection.message)] * 3
        else:
            if moment is None:
                continue
            instant = moment_instant(moment, zoneinfo.ZoneInfo(zone))
            found = [moment.date, moment.local, instant]
        read += 1
        expected = [
            _postgres(postgres, "SELECT CAST(%s AS text)::date", text),
            _postgres(postgres, "SELECT CAST(%s AS text)::timestamp", text),
            _postgres(postgres, "SELECT CAST(%s AS text)::timestamptz AT TIME ZONE 'UTC'", text),
        ]
        # None: a value beyond the year 9999 (24:00:00 of its last day), not read here.
        kept = [(f, e) for f, e in zip(found, expected, strict=True) if f is not None]
        assert kept == [(e, e) for _, e in kept], text
    assert read > 600


@pytest.mark.parametrize("zone", ZONES)
def test_local_times_at_the_changes_of_the_clocks(
    postgres: psycopg.Connection[tuple[object, ...]], zone: str
) -> None:
    """A timestamp with time zone without an offset: the local time in the session's
    zone, skipped times at the offset before the change, repeated ones at the later."""
    postgres.execute(f"SET TimeZone = '{zone}'")
    for day in ("2024-03-10", "2024-03-31", "2024-10-27", "2024-11-03"):
        for minutes in range(0, 24 * 60, 15):
            text = f"{day} {minutes // 60:02}:{minutes % 60:02}:00.5"
            moment = read_moment(text)
            assert moment is not None
            expected = _postgres(
                postgres, "SELECT CAST(%s AS text)::timestamptz AT TIME ZONE 'UTC'", text
            )
            assert moment_instant(moment, zoneinfo.ZoneInfo(zone)) == expected, text


FORMAT_PARTS = ["YYYY", "MM", "DD", "HH24", "HH12", "HH", "MI", "SS", "MS", "US", "AM", "pm"]
FORMAT_PARTS += ["A.M.", "FMMM", "FMDD", "yyyy", "mm", "dd", "hh24", "mi", "ss", "us", "-", "/"]
FORMAT_PARTS += [" ", "  ", ":", ".", "T", '"T"', "x", ",", "2"]
TEXT_PARTS = ["2023", "2024", "0000", "20230", "1", "01", "12", "13", "00", "0", "-", "/", " "]
TEXT_PARTS += ["  ", ":", ".", "T", "x", "AM", "pm", "a.m.", "P.M.", "30", "31", "29", "59", "60"]
TEXT_PARTS += ["24", "123", "123456", "1234567", "-1", "+5", "9", "99999999999"]
FORMATS = [
    "YYYY-MM-DD",
    "YYYY-MM-DD HH24:MI:SS",
    "YYYY-MM-DD HH24:MI:SS.US",
    "YYYY-MM-DD HH24:MI:SS.MS",
    "YYYYMMDD",
    "YYYY-MM-DD HH12:MI:SS AM",
    'YYYY-MM-DD"T"HH24:MI:SS',
    "YYYY/MM/DD HH:MI PM",
    "FMYYYY-FMMM-FMDD",
]
STRFTIME = ["%Y-%m-%d", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y%m%d"]
STRFTIME += ["%Y-%m-%d %I:%M:%S %p", "%Y-%m-%dT%H:%M:%S", "%Y/%m/%d %I:%M %p", "%Y-%-m-%-d"]


def _cases(seed: int, count: int) -> list[tuple[str, str]]:
    """Texts and formats: those BI tools send, of random dates, with a part changed now
    and then, and random mixtures of the formats' and texts' parts."""
    chosen = random.Random(seed)
    found = []
    for _ in range(count):
        if chosen.random() < 0.5:
            fmt = chosen.choice(FORMATS)
        else:
            fmt = "".join(chosen.choice(FORMAT_PARTS) for _ in range(chosen.randint(1, 8)))
        if chosen.random() < 0.5:
            moment = dt.datetime(2000, 1, 1) + dt.timedelta(
                seconds=chosen.randint(0, 40 * 365 * 86400),
                microseconds=chosen.randint(0, 10**6 - 1),
            )
            text = moment.strftime(chosen.choice(STRFTIME))
            if chosen.random() < 0.3:
                at = chosen.randrange(len(text))
                text = text[:at] + chosen.choice(TEXT_PARTS) + text[at + 1 :]
        else:
            text = "".join(chosen.choice(TEXT_PARTS) for _ in range(chosen.randint(1, 8)))
        found.append((text, fmt))
    return found


@pytest.mark.parametrize("zone", ZONES)
def test_to_date_and_to_timestamp_read_as_postgresql_reads_them(
    postgres: psycopg.Connection[tuple[object, ...]], zone: str
) -> None:
    """The value (to_timestamp's instant in UTC), or PostgreSQL's SQLSTATE and message
    (22007 where the text does not fit the format, 22008 where a field is out of range);
    formats and years not read here are refused with 0A000 instead."""
    postgres.execute(f"SET TimeZone = '{zone}'")
    local = zoneinfo.ZoneInfo(zone)
    compared = 0
    for text, fmt in _cases(sum(map(ord, zone)), 500):
        for function in ("to_date", "to_timestamp"):
            try:
                if function == "to_date":
                    found: object = read_date(text, fmt)
                else:
                    found = read_timestamp(text, fmt, local)
            except Rejected as rejection:
                if rejection.sqlstate == "0A000":
                    continue
                found = ("error", rejection.sqlstate, rejection.message)
            at_utc = " AT TIME ZONE 'UTC'" if function == "to_timestamp" else ""
            expected = _postgres(postgres, f"SELECT {function}(%s, %s){at_utc}", text, fmt)
            assert found == expected, (function, text, fmt)
            compared += 1
    assert compared > 500


@pytest.mark.parametrize(
    ("fmt", "keyword"),
    [
        ("YYYY-Mon-DD", "Mon"),
        ("YYYY-DDD", "DDD"),
        ("YYYY-MM-DD TZH", "TZH"),
        ("FXYYYY-MM-DD", "FX"),
        ("YYYY-TMMonth", "TM"),
        ("YYYY-MM-DDTH", "DDTH"),
        ("YYYY-IW", "IW"),
    ],
)
def test_other_keywords_are_refused(fmt: str, keyword: str) -> None:
    with pytest.raises(Rejected) as refused:
        read_timestamp("2024-01-01", fmt, zoneinfo.ZoneInfo("UTC"))
    assert refused.value.sqlstate == "0A000"
    assert f'"{keyword}"' in refused.value.message
    assert "YYYY, MM, DD, HH24" in refused.value.message


def test_a_format_without_a_year_and_years_beyond_9999_are_refused() -> None:
    for text, fmt in (("10", "MM"), ("20230-01-01", "YYYY-MM-DD"), ("0000-01-01", "YYYY-MM-DD")):
        with pytest.raises(Rejected) as refused:
            read_date(text, fmt)
        assert refused.value.sqlstate == "0A000"


COLUMNS = ColumnTypes(
    {"t": {"pid": ColumnType.INTEGER, "d": ColumnType.DATE, "tz": ColumnType.TIMESTAMP}},
    {"t": frozenset({"tz"})},
)
CATALOG = build_catalog(
    COLUMNS, {"t": TablePolicy(privacy_unit="pid", max_rows_per_unit=1)}, schema="main"
)


def _refusal(sql: str, zone: str = "UTC") -> Rejected:
    with pytest.raises(Rejected) as refused:
        plan(sql, CATALOG, PlanRequest(1.0, "duckdb", time_zone=zone))
    return refused.value


@pytest.mark.parametrize(
    ("sql", "sqlstate", "words"),
    [
        ("SELECT COUNT(*) FROM t WHERE d > to_date('2024-01-01')", "42883", "to_date(unknown)"),
        ("SELECT COUNT(*) FROM t WHERE tz > to_timestamp('a', 'b', 'c')", "42883", "unknown, "),
        ("SELECT COUNT(*) FROM t WHERE d > to_date(CAST(d AS TEXT), 'YYYY')", "0A000", "constant"),
        ("SELECT COUNT(*) FROM t WHERE d > to_date('2024', 'YY' || 'YY')", "0A000", "constant"),
        ("SELECT COUNT(*) FROM t WHERE tz > to_timestamp(pid)", "0A000", "number of seconds"),
        ("SELECT COUNT(*) FROM t WHERE tz > to_timestamp('NaN')", "0A000", "number of seconds"),
        ("SELECT COUNT(*) FROM t WHERE tz > to_timestamp(1e20)", "22008", "out of range"),
        (  # the sign as written (found by helper-138)
            "SELECT COUNT(*) FROM t WHERE tz > to_timestamp(-210866803200)",
            "0A000",
            "to_timestamp(-210866803200) is outside the years 1 to 9999",
        ),
        ("SELECT COUNT(*) FROM t WHERE tz > TIMESTAMPTZ 'now'", "0A000", "'now'"),
        ("SELECT COUNT(*) FROM t WHERE tz > TIMESTAMPTZ 'infinity'", "0A000", "'infinity'"),
        ("SELECT COUNT(*) FROM t WHERE tz > CAST(d AS TIMESTAMPTZ)", "0A000", "written as a"),
        ("SELECT to_timestamp(1), COUNT(*) FROM t", "0A000", "compared with a value only"),
        (
            "SELECT COUNT(*) FROM t WHERE tz > to_timestamp(1) + INTERVAL '1 day'",
            "0A000",
            "compared",
        ),
        ("SELECT COUNT(*) FROM t WHERE d > TIMESTAMPTZ '2024-01-01' - 1", "0A000", "compared"),
        ("SELECT COUNT(*) FROM t WHERE 'x' < TIMESTAMPTZ '2024-01-01Z'", "0A000", "text literal"),
    ],
)
def test_calls_and_constants_not_computed_are_refused(sql: str, sqlstate: str, words: str) -> None:
    refused = _refusal(sql, "Europe/Paris")
    assert refused.sqlstate == sqlstate, refused.message
    assert words in refused.message
    assert refused.hint


def test_a_constant_needs_a_zone_both_engines_read_alike() -> None:
    refused = _refusal(
        "SELECT COUNT(*) FROM t WHERE d > to_timestamp('2024-01-01', 'YYYY-MM-DD')", "UTC+3"
    )
    assert refused.sqlstate == "22023"
    # An instant with an offset needs no zone when compared with one, as an instant.
    plan(
        "SELECT COUNT(*) FROM t WHERE tz > TIMESTAMPTZ '2024-01-01 00:00+00'",
        CATALOG,
        PlanRequest(1.0, "duckdb", time_zone="Europe/Paris"),
    )


def test_the_plan_differs_by_zone_where_the_answer_does() -> None:
    """The constants are written into the SQL as the session's zone reads them, so an
    answer cached for one zone (proxy.answers keys answers by the SQL) is another zone's
    only where the dates compared are the same."""
    sql = "SELECT COUNT(*) FROM t WHERE d >= TIMESTAMPTZ '2024-01-01 20:00:00+00'"
    made = {
        zone: plan(sql, CATALOG, PlanRequest(1.0, "duckdb", time_zone=zone)).sql
        for zone in ("UTC", "Asia/Kolkata", "America/New_York")
    }
    assert "'2024-01-02' AS DATE" in made["UTC"]
    assert "'2024-01-03' AS DATE" in made["Asia/Kolkata"]  # 01:30 on Jan 2 in Kolkata
    assert made["America/New_York"] == made["UTC"]  # 15:00 on Jan 1 in New York
