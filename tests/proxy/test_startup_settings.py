"""Client settings as PostgreSQL takes them.

Every startup-packet parameter is applied as SET would apply it (a bad one refused
before the session opens); SET values are read as PostgreSQL's lexer reads them (E'...'
strings, continued strings, numbers, lists, SET TIME ZONE's forms), checked and shown as
PostgreSQL shows them (compared with the PostgreSQL test server); the settings dpproxy
cannot honour are refused, not reported and ignored; and a Query message holding a NUL
byte gets an ERROR that keeps the session, as in PostgreSQL. Real components throughout:
DuckDB, the state store, the PostgreSQL server and the wire codec.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from accountant import AnalystBudget, Epsilon
from proxy.asker import Asker
from proxy.parameter_table import REPORTED_PARAMETERS
from proxy.pipeline import Pipeline
from proxy.protocol.codec import FrontendDecoder
from proxy.protocol.messages import InvalidEncoding, MalformedQuery, Query, Sync
from proxy.seam import QueryError, StatementResult
from proxy.session import AnalystSession
from tests.proxy.local_pipeline import local_pipeline
from tests.proxy.test_session_statements import changes


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path)
    yield made
    made.ledger.close()


def session(pipeline: Pipeline) -> AnalystSession:
    budget = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")


def run(s: AnalystSession, *statements: str) -> list[StatementResult]:
    async def go() -> list[StatementResult]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def shown(s: AnalystSession, name: str) -> str | None:
    return run(s, f"SHOW {name}")[0].rows[0][0]


def refusal(s: AnalystSession, sql: str) -> QueryError:
    with pytest.raises(QueryError) as caught:
        run(s, sql)
    return caught.value


# --- startup parameters ----------------------------------------------------------------


def test_startup_parameters_set_the_session_and_are_what_reset_returns_to(
    pipeline: Pipeline,
) -> None:
    s = session(pipeline)
    s.apply_startup_parameters(
        {
            "user": "alice",
            "database": "demo",
            # options first, then the other parameters (which win), as in PostgreSQL
            "options": "-c dpproxy.epsilon=0.3 -c dpproxy.report=columns",
            "dpproxy.epsilon": "0.2",
            "TimeZone": "europe/berlin",
            "DateStyle": "ISO, DMY",
            "application_name": "rapport é",
            "extra_float_digits": "3",
            "client_encoding": "UTF8",
            "replication": "off",
        }
    )
    assert shown(s, "dpproxy.epsilon") == "0.2"
    assert shown(s, "dpproxy.report") == "columns"
    assert shown(s, "timezone") == "Europe/Berlin"
    assert shown(s, "datestyle") == "ISO, DMY"
    assert shown(s, "application_name") == "rapport ??"
    assert shown(s, "extra_float_digits") == "3"
    [answer] = run(s, "SELECT COUNT(*) FROM visits")
    assert any("cost ε=0.2" in notice.message for notice in answer.notices), answer.notices
    # RESET goes back to the startup value, not to the analyst's default.
    run(s, "SET dpproxy.epsilon = 0.5", "SET TIME ZONE 'UTC'", "RESET dpproxy.epsilon")
    assert shown(s, "dpproxy.epsilon") == "0.2"
    before = s.reported_parameters()
    run(s, "RESET ALL")
    assert ("TimeZone", "Europe/Berlin") in changes(before, s.reported_parameters()).items()
    assert shown(s, "dpproxy.report") == "columns"
    run(s, "SET application_name = 'other'")
    before = s.reported_parameters()
    run(s, "DISCARD ALL")
    assert changes(before, s.reported_parameters()) == {"application_name": "rapport ??"}


@pytest.mark.parametrize(
    ("parameters", "sqlstate", "words"),
    [
        ({"dpproxy.epsilon": "lots"}, "22023", "invalid value for dpproxy.epsilon"),
        ({"DateStyle": "German"}, "0A000", "ISO style only"),
        ({"TimeZone": "Mars/Olympus"}, "22023", '"TimeZone": "Mars/Olympus"'),
        ({"client_encoding": "LATIN1"}, "0A000", 'client_encoding "LATIN1"'),
        ({"IntervalStyle": "iso_8601"}, "0A000", "IntervalStyle = postgres"),
        ({"statement_timeout": "5 seconds"}, "22023", "statement_timeout"),
        ({"no_such_setting": "1"}, "42704", '"no_such_setting"'),
        ({"transaction": "x"}, "42704", '"transaction"'),
        ({"server_version": "9.0"}, "55P02", "cannot be changed"),
        ({"options": "-c transaction_isolation=serializable"}, "25001", "before any query"),
        ({"options": "-c transaction_deferrable=off"}, "25001", "before any query"),
        ({"options": "-c transaction_read_only=maybe"}, "22023", "Boolean"),
        ({"options": "-c dpproxy.epsilon=0.2", "dpproxy.epsilon": "-1"}, "22023", "epsilon"),
        ({"replication": "database"}, "0A000", "replication connections"),
        ({"replication": "true"}, "0A000", "replication connections"),
        ({"replication": "maybe"}, "22023", '"replication": "maybe"'),
    ],
)
def test_a_bad_startup_parameter_is_refused(
    pipeline: Pipeline, parameters: dict[str, str], sqlstate: str, words: str
) -> None:
    with pytest.raises(QueryError) as caught:
        session(pipeline).apply_startup_parameters({"user": "alice", **parameters})
    assert caught.value.sqlstate == sqlstate
    assert words in caught.value.message


@pytest.mark.parametrize(
    "options",
    [
        "-c transaction_read_only=off",
        "-c default_transaction_read_only=on -c transaction_read_only=off",
        "--transaction-read-only=on",
        "-c transaction_isolation=read\\ committed",
    ],
)
def test_transaction_modes_postgresql_takes_at_connect_are_taken(
    pipeline: Pipeline, options: str
) -> None:
    """As in PostgreSQL, whose startup transaction begins read write: before, READ WRITE
    ended the connection (25001). The session's transactions stay read only."""
    s = session(pipeline)
    s.apply_startup_parameters({"user": "alice", "options": options})
    assert shown(s, "transaction_read_only") == "on"
    assert shown(s, "transaction_isolation") == "read committed"


def test_replication_off_in_any_spelling_is_a_plain_session(pipeline: Pipeline) -> None:
    for value in ("false", "off", "no", "0", "f"):
        s = session(pipeline)
        s.apply_startup_parameters({"user": "alice", "replication": value})
        assert shown(s, "dpproxy.epsilon") == "1"


# --- SET as PostgreSQL reads, checks and shows it --------------------------------------

# (statement, parameter): both PostgreSQL and dpproxy accept it, and must show (SHOW and
# ParameterStatus) the same value afterwards.
ACCEPTED = [
    ("SET application_name = E'a\\nb'", "application_name"),
    ("SET application_name = 'a'\n  'b'", "application_name"),
    ("SET application_name = e'\\x41\\101\\u00e9'", "application_name"),
    ("SET application_name = E'\\uD83D\\uDE00'", "application_name"),
    ("SET application_name = E'it''s \\\\ \\t'", "application_name"),
    ("SET application_name = 'é€'", "application_name"),
    ("SET application_name = 12.50", "application_name"),
    ("SET application_name = 007", "application_name"),
    ('SET application_name = "Mixed Case"', "application_name"),
    ("SET application_name = Mixed", "application_name"),
    ("SET SESSION application_name = /* why */ 'b'", "application_name"),
    ("SET application_name = '" + "x" * 70 + "'", "application_name"),
    ("SET application_name TO DEFAULT", "application_name"),
    ("SET TIME ZONE INTERVAL '+02:00' HOUR TO MINUTE", "timezone"),
    ("SET TIME ZONE INTERVAL '-03:30' HOUR TO MINUTE", "timezone"),
    ("SET TIME ZONE INTERVAL '+02:30' HOUR", "timezone"),
    ("SET TIME ZONE INTERVAL '90' MINUTE", "timezone"),
    ("SET TIME ZONE INTERVAL '2 hours'", "timezone"),
    ("SET TIME ZONE INTERVAL '-1 hour 30 minutes'", "timezone"),
    ("SET TIME ZONE INTERVAL '@ 1 hour ago'", "timezone"),
    ("SET TIME ZONE INTERVAL '0.5 day'", "timezone"),
    ("SET TIME ZONE -7", "timezone"),
    ("SET TIME ZONE 5.5", "timezone"),
    ("SET TIME ZONE 'europe/berlin'", "timezone"),
    ("SET TIME ZONE utc", "timezone"),
    ("SET TIME ZONE LOCAL", "timezone"),
    ("SET timezone = 'Etc/GMT+5'", "timezone"),
    ("SET timezone = 'zulu'", "timezone"),
    ("SET timezone = 'EST5EDT'", "timezone"),
    ("SET timezone = '<+02>-02'", "timezone"),
    ("SET timezone = '+02:00'", "timezone"),
    ("SET timezone = 'gmt-05:00'", "timezone"),  # pgJDBC sends such names
    ("SET timezone = 'abc5'", "timezone"),
    ("SET timezone = 'EST5EDT,M3.2.0/2,M11.1.0/2:00'", "timezone"),
    ("SET timezone = 'EST5EDT,J60,300'", "timezone"),
    ("SET timezone = 'EST-5EDT,0/0,J365/25'", "timezone"),
    ("SET timezone = '-167.99'", "timezone"),
    ("SET timezone = 'interval ''1 hour 30 minutes'''", "timezone"),
    ("SET datestyle = 'DMY'", "datestyle"),
    ("SET datestyle = iso, ymd", "datestyle"),
    ("SET datestyle = 'euro'", "datestyle"),
    ("SET datestyle = 'nonEuro'", "datestyle"),
    ("SET datestyle = ' iso  ,  dmy '", "datestyle"),
    ("SET datestyle = 'ymd, default'", "datestyle"),
    ("SET datestyle = ''", "datestyle"),
    ("SET extra_float_digits = '3.4'", "extra_float_digits"),
    ("SET extra_float_digits = ' 2 '", "extra_float_digits"),
    ("SET extra_float_digits = -15", "extra_float_digits"),
    ("SET statement_timeout = 5000", "statement_timeout"),
    ("SET statement_timeout = '1.5s'", "statement_timeout"),
    ("SET statement_timeout = '90 min'", "statement_timeout"),
    ("SET statement_timeout = '1500us'", "statement_timeout"),
    ("SET statement_timeout = 3.7", "statement_timeout"),
    ("SET lock_timeout = '1d'", "lock_timeout"),
    ("SET client_min_messages = 'INFO'", "client_min_messages"),
    ("SET client_min_messages = debug", "client_min_messages"),
    ("SET default_transaction_read_only = 'of'", "default_transaction_read_only"),
    ("SET default_transaction_isolation = 'SERIALIZABLE'", "default_transaction_isolation"),
    ("SET intervalstyle = 'POSTGRES'", "intervalstyle"),
    ("SET standard_conforming_strings = yes", "standard_conforming_strings"),
    ("SET client_encoding = 'utf-8'", "client_encoding"),
    ("SET client_encoding = 'Unicode'", "client_encoding"),
    ("SET client_encoding = 'sql_ascii'", "client_encoding"),
    ("SET search_path = 'My Schema', public, \"$user\"", "search_path"),
    ("SET search_path = ''", "search_path"),
]

# Refused by both, with the same SQLSTATE.
REFUSED = [
    "SET timezone = 'Mars/Olympus'",
    "SET TIME ZONE INTERVAL '1 day'",
    "SET TIME ZONE INTERVAL '1 month'",
    "SET TIME ZONE INTERVAL '+02:00' SECOND",
    "SET TIME ZONE 'a', 'b'",
    "SET timezone = 'a', 'b'",
    "SET timezone = '200'",
    "SET timezone = 'nan'",
    "SET timezone = 'EST5EDT,M13.2.0,M11.1.0'",
    "SET timezone = 'EST5EDT,M3.2.0'",
    "SET timezone = 'UTC '",
    "SET timezone = 'EST167:59:59'",
    "SET timezone = ''",
    "SET datestyle = 'ISO, DMY, YMD'",
    "SET datestyle = 'foo'",
    "SET datestyle = 'ISO,,DMY'",
    "SET datestyle = 'ISO DMY'",
    "SET application_name = 'a', 'b'",
    "SET application_name = 'a' 'b'",
    "SET application_name = E'\\xff'",
    "SET application_name = E'\\0'",
    "SET application_name = E'\\u0000'",
    "SET application_name = E'\\uzzzz'",
    "SET extra_float_digits = 4",
    "SET extra_float_digits = abc",
    "SET statement_timeout = '-1'",
    "SET statement_timeout = '5 seconds'",
    "SET statement_timeout = '3000000000'",
    "SET client_min_messages = fatal",
    "SET default_transaction_isolation = bogus",
    "SET intervalstyle = bogus",
    "SET bytea_output = bogus",
    "SET default_transaction_read_only = maybe",
]

# Accepted by PostgreSQL, which then writes answers differently: dpproxy writes them one
# way only, so it refuses these (0A000) rather than report a setting it ignores.
UNSUPPORTED = [
    ("SET datestyle = 'German'", "datestyle"),
    ("SET datestyle = 'SQL, DMY'", "datestyle"),
    ("SET datestyle = 'Postgres'", "datestyle"),
    ("SET datestyle = 'Postgres, YMD'", "datestyle"),
    ("SET intervalstyle = 'iso_8601'", "intervalstyle"),
    ("SET bytea_output = 'escape'", "bytea_output"),
    ("SET standard_conforming_strings = off", "standard_conforming_strings"),
    ("SET client_encoding = 'latin1'", "client_encoding"),
]


def postgresql(pg_dsn: str) -> psycopg.Connection[tuple[object, ...]]:
    """A PostgreSQL session that starts as a dpproxy session does."""
    return psycopg.connect(
        pg_dsn,
        autocommit=True,
        application_name="test",
        options="-c DateStyle=ISO,MDY -c TimeZone=UTC -c extra_float_digits=1",
    )


def reported(name: str) -> str | None:
    return REPORTED_PARAMETERS.get(name)


def test_set_values_are_read_checked_and_shown_as_postgresql_does(
    pipeline: Pipeline, pg_dsn: str
) -> None:
    differences: list[tuple[str, object, object]] = []
    for sql, name in ACCEPTED:
        with postgresql(pg_dsn) as conn:
            conn.execute(sql)
            row = conn.execute(f"SHOW {name}").fetchone() or ()
            # (under SQL_ASCII, psycopg returns bytes)
            expected = tuple(v.decode() if isinstance(v, bytes) else v for v in row)
            status = reported(name)
            expected_status = None if status is None else conn.info.parameter_status(status)
        s = session(pipeline)
        try:
            run(s, sql)
        except QueryError as error:
            differences.append((sql, expected, f"refused: {error.sqlstate} {error.message}"))
            continue
        got = (shown(s, name),)
        # The value the client is told (ParameterStatus when it changes), as above.
        got_status = None if status is None else s.reported_parameters()[status]
        if got != expected or got_status != expected_status:
            differences.append((sql, (expected, expected_status), (got, got_status)))
    assert differences == []


def test_set_values_postgresql_refuses_are_refused_alike(pipeline: Pipeline, pg_dsn: str) -> None:
    differences: list[tuple[str, str | None, str | None]] = []
    for sql in REFUSED:
        with postgresql(pg_dsn) as conn:
            try:
                conn.execute(sql)
            except psycopg.Error as error:
                expected = error.sqlstate
            else:
                expected = "accepted"
        s = session(pipeline)
        try:
            run(s, sql)
        except QueryError as error:
            got = error.sqlstate
        else:
            got = "accepted"
        if got != expected:
            differences.append((sql, expected, got))
    assert differences == []


@pytest.mark.parametrize(("sql", "name"), UNSUPPORTED)
def test_settings_that_would_change_how_answers_are_written_are_refused(
    pipeline: Pipeline, pg_dsn: str, sql: str, name: str
) -> None:
    with postgresql(pg_dsn) as conn:
        conn.execute(sql)  # PostgreSQL takes it, and then writes its answers otherwise
    s = session(pipeline)
    before = shown(s, name)
    error = refusal(s, sql)
    assert error.sqlstate == "0A000", error.message
    assert error.hint is not None and "SET" in error.hint
    assert shown(s, name) == before
    # The session goes on, charged as before.
    [answer] = run(s, "SELECT COUNT(*) FROM visits")
    assert any("cost ε=1" in notice.message for notice in answer.notices)


def test_datestyle_order_keeps_iso_output_and_german_is_refused_whatever_the_order(
    pipeline: Pipeline,
) -> None:
    s = session(pipeline)
    before = s.reported_parameters()
    run(s, "SET DateStyle = 'DMY'")
    assert changes(before, s.reported_parameters()) == {"DateStyle": "ISO, DMY"}
    assert refusal(s, "SET DateStyle = 'German, YMD'").sqlstate == "0A000"
    assert refusal(s, "SET DateStyle TO Postgres, MDY").sqlstate == "0A000"
    assert shown(s, "DateStyle") == "ISO, DMY"


# --- a NUL byte inside a Query message -------------------------------------------------


def typed(type_byte: bytes, body: bytes) -> bytes:
    return type_byte + struct.pack("!i", len(body) + 4) + body


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"SELECT 1\x00 x\x00", MalformedQuery),  # a NUL inside the SQL
        (b"SELECT 2\x00\x00", MalformedQuery),
        (b"SELECT 3", MalformedQuery),  # no terminator
        (b"SELECT \xff\x00 x\x00", InvalidEncoding),  # PostgreSQL checks the text first
        (b"SELECT 4\x00\xff\x00", MalformedQuery),
    ],
)
def test_a_query_holding_a_nul_is_an_error_that_keeps_the_stream(
    payload: bytes, expected: type[InvalidEncoding]
) -> None:
    decoder = FrontendDecoder(startup=False)
    messages = decoder.feed(typed(b"Q", payload) + typed(b"Q", b"SELECT 1\x00") + b"S\0\0\0\4")
    assert [type(m) for m in messages] == [expected, Query, Sync]
    assert messages[1] == Query("SELECT 1")
    error = messages[0]
    assert isinstance(error, InvalidEncoding) and error.type == b"Q"
    assert error.sqlstate == ("08P01" if expected is MalformedQuery else "22021")
