"""Binary results of dates, times, timestamps, intervals and uuids.

Each text value dpproxy can produce is encoded by ``proxy.protocol.values.encode_binary``
and compared with the bytes the real PostgreSQL sends for the same value in binary
(``exec_params(..., result_format=1)``), and read back with psycopg's binary loaders. The
texts come from where dpproxy's results come from: Python's isoformat of the values
DuckDB and psycopg return, DuckDB's own text for the years Python has not (after 9999,
BC), and PostgreSQL's. The end-to-end tests play pgJDBC from a statement's sixth
execution (binary results without a Describe) and psycopg's prepared binary cursor.
"""

from __future__ import annotations

import datetime as dt
import struct
import uuid
from collections.abc import Iterator

import duckdb
import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st
from psycopg.adapt import Transformer
from psycopg.pq import ExecStatus, Format

from proxy.catalog.text import pg_text
from proxy.postprocess import format_value
from proxy.protocol import values
from tests.integration.server import RunningServer, fresh_demo_server
from tests.integration.test_binary_formats import (
    BINARY,
    BY_YEAR,
    SYNC,
    TEXT,
    Client,
    audit,
    bind,
    data_row,
    describe,
    execute,
    parse,
    row_description,
)

# PostgreSQL's type OIDs (pg_type.oid) and SQLSTATEs.
DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL, UUID, INT8 = 1082, 1083, 1114, 1184, 1186, 2950, 20
INVALID_TEXT_REPRESENTATION, DATETIME_FIELD_OVERFLOW = "22P02", "22008"

CASTS = {
    DATE: "date",
    TIME: "time",
    TIMESTAMP: "timestamp",
    TIMESTAMPTZ: "timestamptz",
    INTERVAL: "interval",
    UUID: "uuid",
}

# (type, text, PostgreSQL's spelling of the same value where it differs: DuckDB's "(BC)").
EDGE_VALUES = [
    (TIMESTAMP, "2000-01-01 00:00:00", None),
    (TIMESTAMP, "1999-12-31 23:59:59.999999", None),
    (TIMESTAMP, "1970-01-01 00:00:00", None),
    (TIMESTAMP, "1900-03-01 12:34:56.000001", None),
    (TIMESTAMP, "1900-02-28 23:59:59.5", None),
    (TIMESTAMP, "2024-02-29 07:08:09.123456", None),
    (TIMESTAMP, "0001-01-01 00:00:00", None),
    (TIMESTAMP, "9999-12-31 23:59:59.999999", None),
    (TIMESTAMP, "12000-01-01 00:00:00.5", None),  # DuckDB's text after 9999
    (TIMESTAMP, "0044-03-15 (BC) 12:00:00", "0044-03-15 12:00:00 BC"),  # DuckDB's BC
    (TIMESTAMP, "0044-03-15 12:00:00 BC", None),
    (TIMESTAMP, "0001-12-31 23:59:59.999999 BC", None),
    (TIMESTAMP, "4714-11-24 00:00:00 BC", None),  # PostgreSQL's first
    (TIMESTAMP, "294276-12-31 23:59:59.999999", None),  # and last
    (TIMESTAMP, "infinity", None),
    (TIMESTAMP, "-infinity", None),
    (TIMESTAMP, "2024-01-01 00:00:00+05:30", None),  # the offset is ignored
    (TIMESTAMP, "2024-01-01T10:00:00", None),
    (TIMESTAMP, "2024-01-01 24:00:00", None),
    (TIMESTAMP, "2024-01-01 00:00:00.1234565", None),  # rounded half to even
    (TIMESTAMP, "2024-01-01 00:00:00.1234575", None),
    (TIMESTAMP, "2024-12-31 23:59:59.9999995", None),
    (TIMESTAMPTZ, "2024-01-01 00:00:00+00", None),
    (TIMESTAMPTZ, "2024-01-01 00:00:00+05:30", None),
    (TIMESTAMPTZ, "2024-01-01 00:00:00.000001-03:00", None),
    (TIMESTAMPTZ, "1900-01-01 00:00:00+00:53:28", None),
    (TIMESTAMPTZ, "2024-01-01 00:00:00", None),  # in UTC, dpproxy's TimeZone
    (TIMESTAMPTZ, "2024-06-01 12:00:00Z", None),
    (TIMESTAMPTZ, "0001-01-01 00:00:00+00", None),
    (TIMESTAMPTZ, "0001-01-01 00:00:00+01", None),  # in UTC, before year 1
    (TIMESTAMPTZ, "9999-12-31 23:59:59.999999+00", None),
    (TIMESTAMPTZ, "9999-12-31 23:59:59.999999-01", None),  # in UTC, after 9999
    (TIMESTAMPTZ, "0044-03-15 12:00:00+00 BC", None),
    (TIMESTAMPTZ, "infinity", None),
    (TIMESTAMPTZ, "-infinity", None),
    (TIME, "00:00:00", None),
    (TIME, "00:00:00.000001", None),
    (TIME, "12:34:56.123456", None),
    (TIME, "23:59:59.999999", None),
    (TIME, "24:00:00", None),  # DuckDB returns it as this text
    (TIME, "12:00", None),
    (TIME, "12:00:00.0000015", None),
    (DATE, "12000-01-01", None),
    (DATE, "0044-03-15 (BC)", "0044-03-15 BC"),
    (DATE, "4714-11-24 BC", None),
    (DATE, "0005-02-29 BC", None),  # 5 BC is year -4: a leap year
    (DATE, "5874897-12-31", None),
    (DATE, "infinity", None),
    (DATE, "-infinity", None),
    (INTERVAL, "0:00:00", None),  # Python's str(timedelta), as the catalog sends
    (INTERVAL, "1 day, 2:00:00", None),
    (INTERVAL, "-1 day, 23:59:59", "-00:00:01"),  # timedelta(seconds=-1)
    (INTERVAL, "-2 days, 23:59:59.999999", "-1 days -00:00:00.000001"),
    (INTERVAL, "-1 day, 0:00:00", None),
    (INTERVAL, "423 days, 4:05:06.700000", None),
    (INTERVAL, "-999999999 days, 0:00:00", None),
    (INTERVAL, "1 year 2 mons 3 days 04:05:06.7", None),  # PostgreSQL's output
    (INTERVAL, "-00:00:01", None),
    (INTERVAL, "-1 days +23:59:59", None),
    (INTERVAL, "-1 years -2 mons", None),
    (INTERVAL, "3 mons -1 days", None),
    (INTERVAL, "-3 days -04:00:00.000001", None),
    (INTERVAL, "100:00:00", None),
    (UUID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", None),
    (UUID, "00000000-0000-0000-0000-000000000000", None),
    (UUID, "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF", None),
]

LOADERS = Transformer()  # psycopg's loaders, timestamptz read in UTC


def load(oid: int, data: bytes) -> object:
    return LOADERS.get_loader(oid, Format.BINARY).load(data)


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[psycopg.Connection[tuple[object, ...]]]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC'")
        conn.execute("SET IntervalStyle = 'postgres'")
        yield conn


def postgres_binary(conn: psycopg.Connection[tuple[object, ...]], oid: int, text: str) -> bytes:
    """What PostgreSQL sends in binary for ``text`` read as the type ``oid``."""
    sql = f"SELECT $1::text::{CASTS[oid]}".encode()
    result = conn.pgconn.exec_params(sql, [text.encode()], result_format=1)
    assert result.status == ExecStatus.TUPLES_OK, result.error_message
    data = result.get_value(0, 0)
    assert data is not None
    return data


def postgres_sql_binary(conn: psycopg.Connection[tuple[object, ...]], sql: str) -> bytes:
    result = conn.pgconn.exec_params(sql.encode(), [], result_format=1)
    assert result.status == ExecStatus.TUPLES_OK, result.error_message
    data = result.get_value(0, 0)
    assert data is not None
    return data


def test_the_new_types_are_sent_in_binary() -> None:
    # The per-column decision, made before the statement runs and is charged.
    for oid in CASTS:
        assert oid in values.BINARY_RESULT_TYPES


@pytest.mark.parametrize(("oid", "text", "spelled"), EDGE_VALUES)
def test_edge_values_as_postgresql_sends_them(
    postgres: psycopg.Connection[tuple[object, ...]], oid: int, text: str, spelled: str | None
) -> None:
    assert values.encode_binary(oid, text) == postgres_binary(postgres, oid, spelled or text)


def test_infinities_are_postgresql_sentinels() -> None:
    assert values.encode_binary(TIMESTAMP, "infinity") == struct.pack("!q", 2**63 - 1)
    assert values.encode_binary(TIMESTAMPTZ, "-infinity") == struct.pack("!q", -(2**63))
    assert values.encode_binary(DATE, "infinity") == struct.pack("!i", 2**31 - 1)
    assert values.encode_binary(DATE, "-infinity") == struct.pack("!i", -(2**31))


@pytest.mark.parametrize(
    ("oid", "text", "expected"),
    [
        (TIMESTAMP, "1900-03-01 12:34:56.000001", dt.datetime(1900, 3, 1, 12, 34, 56, 1)),  # noqa: DTZ001
        (TIMESTAMP, "0001-01-01 00:00:00", dt.datetime.min),
        (TIMESTAMP, "9999-12-31 23:59:59.999999", dt.datetime.max),
        (
            TIMESTAMPTZ,
            "2024-01-01 00:00:00+05:30",
            dt.datetime(2023, 12, 31, 18, 30, tzinfo=dt.UTC),
        ),
        (TIME, "23:59:59.999999", dt.time.max),
        (INTERVAL, "-1 day, 23:59:59", dt.timedelta(seconds=-1)),
        (
            INTERVAL,
            "1 year 2 mons 3 days",
            dt.timedelta(days=428),
        ),  # psycopg: 365 + 2 * 30 + 3
        (
            UUID,
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            uuid.UUID(int=0xA0EEBC999C0B4EF8BB6D6BB9BD380A11),
        ),
    ],
)
def test_psycopg_reads_them_back(oid: int, text: str, expected: object) -> None:
    assert load(oid, values.encode_binary(oid, text)) == expected


DATETIMES = st.datetimes(min_value=dt.datetime.min, max_value=dt.datetime.max)
OFFSETS = st.integers(min_value=-(24 * 60 - 1), max_value=24 * 60 - 1).map(
    lambda minutes: dt.timezone(dt.timedelta(minutes=minutes))
)


@given(DATETIMES)
def test_timestamps_round_trip(value: dt.datetime) -> None:
    for text in (format_value(value), pg_text(value)):
        assert text is not None
        assert load(TIMESTAMP, values.encode_binary(TIMESTAMP, text)) == value


@given(DATETIMES, OFFSETS)
def test_timestamptz_round_trip(local: dt.datetime, zone: dt.timezone) -> None:
    value = local.replace(tzinfo=zone)
    expected = (value - dt.datetime(2000, 1, 1, tzinfo=dt.UTC)) // dt.timedelta(microseconds=1)
    for text in (format_value(value), pg_text(value)):
        assert text is not None
        encoded = values.encode_binary(TIMESTAMPTZ, text)
        assert struct.unpack("!q", encoded) == (expected,)
        try:
            moment = value.astimezone(dt.UTC)
        except OverflowError:
            continue  # before year 1 or after 9999 in UTC: psycopg cannot read it
        assert load(TIMESTAMPTZ, encoded) == moment


@given(st.times())
def test_times_round_trip(value: dt.time) -> None:
    for text in (format_value(value), pg_text(value)):
        assert text is not None
        assert load(TIME, values.encode_binary(TIME, text)) == value


@given(st.timedeltas())
def test_intervals_round_trip(value: dt.timedelta) -> None:
    for text in (format_value(value), pg_text(value)):
        assert text is not None
        assert load(INTERVAL, values.encode_binary(INTERVAL, text)) == value


@given(st.dates())
def test_dates_and_their_years_bc(value: dt.date) -> None:
    # The same day of the year BC (DuckDB's text: "0044-03-15 (BC)" is year -43), moved
    # 400k years on (146097k days) into the years Python has.
    text = format_value(value)
    assert text is not None
    assert load(DATE, values.encode_binary(DATE, text)) == value
    year = 1 - value.year
    if (value.month, value.day) == (2, 29):  # year is 1 - a multiple of 4: never leap
        with pytest.raises(values.ValueFormatError):
            values.encode_binary(DATE, f"{text} (BC)")
        return
    (bc,) = struct.unpack("!i", values.encode_binary(DATE, f"{text} (BC)"))
    cycles = 25 if year + 10_000 <= 9999 else 24
    later = value.replace(year=year + 400 * cycles)
    assert bc == (later - dt.date(2000, 1, 1)).days - 146_097 * cycles
    assert values.encode_binary(DATE, f"{text} BC") == struct.pack("!i", bc)  # PostgreSQL's


@given(st.uuids())
def test_uuids_round_trip(value: uuid.UUID) -> None:
    for text in (format_value(value), pg_text(value)):
        assert text is not None
        assert load(UUID, values.encode_binary(UUID, text)) == value


# SQL that means the same value on DuckDB and on PostgreSQL.
SAME_SQL = [
    (TIMESTAMP, "date_trunc('month', TIMESTAMP '2024-05-06 07:08:09.123456')"),
    (TIMESTAMP, "TIMESTAMP '1900-02-28 23:59:59.000001'"),
    (TIMESTAMP, "TIMESTAMP '0001-01-01 00:00:00'"),
    (TIMESTAMP, "TIMESTAMP '9999-12-31 23:59:59.999999'"),
    (TIMESTAMP, "TIMESTAMP '12000-01-01 00:00:00'"),
    (TIMESTAMP, "TIMESTAMP '2024-01-01' - INTERVAL '2100 years'"),
    (TIME, "TIME '12:34:56.789'"),
    (TIME, "TIME '24:00:00'"),
    (DATE, "DATE '12000-01-01'"),
    (DATE, "DATE '2024-01-01' - INTERVAL '2100 years'"),
    (INTERVAL, "INTERVAL '3 days 04:05:06.789'"),
    (INTERVAL, "INTERVAL '-1 second'"),
    (INTERVAL, "INTERVAL '-3 days'"),
    (UUID, "CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS UUID)"),
]


@pytest.mark.parametrize(("oid", "sql"), SAME_SQL)
def test_values_from_duckdb(
    postgres: psycopg.Connection[tuple[object, ...]], oid: int, sql: str
) -> None:
    # DuckDB returns Python values (datetime, time, timedelta, UUID) or, for years Python
    # has not and 24:00:00, its own text; dpproxy formats them (post-processing and
    # catalog) and the binary form must be the value PostgreSQL sends.
    with duckdb.connect() as engine:
        (value,) = engine.execute(f"SELECT CAST({sql} AS {CASTS[oid].upper()})").fetchall()[0]
    expected = postgres_sql_binary(postgres, f"SELECT CAST({sql} AS {CASTS[oid]})")
    for text in (format_value(value), pg_text(value)):
        assert text is not None
        assert values.encode_binary(oid, text) == expected


def test_duckdb_infinities_arrive_as_the_largest_and_smallest_values() -> None:
    # DuckDB's Python client returns ±infinity as datetime.max and datetime.min, so the
    # text answer shows those; the binary one is the same value, not PostgreSQL's infinity.
    with duckdb.connect() as engine:
        sql = "SELECT 'infinity'::TIMESTAMP, '-infinity'::TIMESTAMP"
        (high, low), *_ = engine.execute(sql).fetchall()
    for value in (high, low):
        text = format_value(value)
        assert text is not None
        assert load(TIMESTAMP, values.encode_binary(TIMESTAMP, text)) == value


@pytest.mark.parametrize(
    ("oid", "sql"),
    [
        *SAME_SQL[:2],
        (TIMESTAMPTZ, "TIMESTAMPTZ '2024-06-01 12:00:00.5+02'"),
        (TIMESTAMPTZ, "TIMESTAMPTZ '0001-01-02 00:00:00+00'"),
        (TIME, "TIME '12:34:56.789'"),
        (INTERVAL, "INTERVAL '-3 days -00:00:01.5'"),
        (UUID, "CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS UUID)"),
    ],
)
@pytest.mark.parametrize("zone", ["UTC", "Asia/Kolkata", "America/St_Johns"])
def test_values_from_postgresql(
    postgres: psycopg.Connection[tuple[object, ...]], oid: int, sql: str, zone: str
) -> None:
    # psycopg returns timestamptz aware in the session's time zone, timestamp naive.
    postgres.execute(f"SET TimeZone = '{zone}'")
    try:
        row = postgres.execute(f"SELECT CAST({sql} AS {CASTS[oid]})").fetchone()
        assert row is not None
        expected = postgres_sql_binary(postgres, f"SELECT CAST({sql} AS {CASTS[oid]})")
    finally:
        postgres.execute("SET TimeZone = 'UTC'")
    for text in (format_value(row[0]), pg_text(row[0])):
        assert text is not None
        assert values.encode_binary(oid, text) == expected


@pytest.mark.parametrize(
    ("oid", "text"),
    [
        (TIMESTAMP, "290309-12-22 (BC) 00:00:00"),  # DuckDB's first: not an int64
        (TIMESTAMPTZ, "294277-01-09 04:00:54.775807+00"),  # PostgreSQL's infinity
        (DATE, "5877642-06-25 (BC)"),  # DuckDB's first date: not an int32
    ],
)
def test_values_beyond_the_binary_format_are_refused_cleanly(oid: int, text: str) -> None:
    with pytest.raises(values.ValueFormatError) as raised:
        values.encode_binary(oid, text)
    assert raised.value.sqlstate == DATETIME_FIELD_OVERFLOW
    assert "ask for text results" in raised.value.message


@pytest.mark.parametrize(
    ("oid", "text"),
    [
        (TIMESTAMP, "2023-02-29 00:00:00"),
        (TIMESTAMP, "2024-13-01 00:00:00"),
        (TIMESTAMP, "0000-01-01 00:00:00 BC"),
        (TIMESTAMP, "2024-01-01 (BC) 00:00:00 BC"),
        (TIMESTAMP, "2024-01-01 24:00:01"),
        (TIMESTAMPTZ, "2024-01-01 00:00:00+24"),
        (TIME, "24:00:00.000001"),
        (TIME, "12:60:00"),
        (DATE, "20240101"),
        (INTERVAL, "1 fortnight"),
        (INTERVAL, ""),
        (UUID, "not-a-uuid"),
    ],
)
def test_malformed_text_is_refused_cleanly(oid: int, text: str) -> None:
    with pytest.raises(values.ValueFormatError) as raised:
        values.encode_binary(oid, text)
    assert raised.value.sqlstate == INVALID_TEXT_REPRESENTATION


# --- End to end: the real server -----------------------------------------------------

PATIENTS = 500  # as tests/integration/test_binary_formats.py: enough for every year


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RunningServer]:
    dsn = request.getfixturevalue("pg_dsn") if request.param == "postgres" else None
    with fresh_demo_server(
        tmp_path_factory,
        f"binary-values-{request.param}",
        request.param,
        patients=PATIENTS,
        pg_dsn=dsn,
    ) as running:
        yield running


@pytest.mark.integration
def test_binary_timestamp_without_describe_is_answered(server: RunningServer) -> None:
    # As pgJDBC from a statement's sixth execution: Bind asks for binary results and
    # Executes without a Describe. Every execution is answered, the timestamp in binary.
    client = Client(server)
    try:
        described = client.exchange(parse(BY_YEAR, "S_1") + describe(b"S", "S_1") + SYNC)
        assert row_description(described[2][1]) == [
            ("y", TIMESTAMP, TEXT),
            ("count", INT8, TEXT),
        ]
        before = audit(server)
        for _ in range(7):
            answer = client.exchange(bind("S_1", (BINARY, BINARY)) + execute() + SYNC)
            kinds = [kind for kind, _ in answer]
            assert kinds[0] == b"2" and kinds[-2:] == [b"C", b"Z"], answer
            rows = [data_row(body) for kind, body in answer if kind == b"D"]
            assert rows
            for year, count in rows:
                assert year is not None and count is not None
                start = load(TIMESTAMP, year)
                assert isinstance(start, dt.datetime)
                assert start == dt.datetime(start.year, 1, 1)  # noqa: DTZ001
                assert 1990 <= start.year <= 2100
                assert len(count) == 8
        assert audit(server) == [*before, *["accepted"] * 7]
    finally:
        client.close()


@pytest.mark.integration
def test_psycopg_prepared_binary_cursor_gets_binary_timestamps(server: RunningServer) -> None:
    before = audit(server)
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        cur = conn.cursor(binary=True)
        for _ in range(7):  # prepared (named) from the sixth execution on
            rows = cur.execute(BY_YEAR, prepare=True).fetchall()
            assert rows
            assert cur.pgresult is not None
            assert cur.pgresult.fformat(0) == BINARY  # sent in binary, not text
            for year, count in rows:
                assert isinstance(year, dt.datetime) and year.month == year.day == 1
                assert isinstance(count, int)
    assert audit(server) == [*before, *["accepted"] * 7]


@pytest.mark.integration
def test_catalog_times_intervals_and_uuids_come_in_binary(server: RunningServer) -> None:
    # The catalog answers these (DuckDB's time, timedelta and UUID, formatted as text).
    sql = (
        "SELECT TIME '12:34:56.5' t, INTERVAL '-1 second' i, "
        "CAST('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' AS UUID) u"
    )
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        cur = conn.cursor(binary=True)
        for _ in range(7):
            row = cur.execute(sql, prepare=True).fetchone()
            assert cur.pgresult is not None
            assert [cur.pgresult.fformat(i) for i in range(3)] == [BINARY] * 3
            assert row == (
                dt.time(12, 34, 56, 500000),
                dt.timedelta(seconds=-1),
                uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            )
            assert cur.pgresult.get_value(0, 1) == struct.pack("!qii", -1_000_000, 0, 0)
