"""Times, time zones and intervals in catalog answers through the real server, on both
backends: psycopg's text and binary results of ``SELECT now()``, timestamptz values in
the session's TimeZone and intervals, compared with what the real PostgreSQL 15 sends.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

import pytest
from psycopg.pq import ExecStatus

from tests.integration.server import Connection

pytestmark = pytest.mark.integration

PATIENTS = 200
# (TimeZone, as SET writes it)
ZONES = ["UTC", "'Europe/Paris'", "'<+02>-02'", "'America/St_Johns'"]
STATEMENT = (
    "SELECT TIMESTAMPTZ '2020-01-01 00:00+02', TIMESTAMPTZ '2020-01-01 00:00', "
    "TIMESTAMPTZ '1800-01-01 00:00+00', INTERVAL '1 month 2 days', "
    "INTERVAL '1 year 3 months', INTERVAL '-1 day 02:00', '1 day'::interval * 2, "
    "INTERVAL '-1 year -5 months -3 days -04:05:06.789', TIMESTAMP '2020-01-01 00:00:00.5', "
    "TIMETZ '12:00:00.5+05:30'"
)


def sent(conn: Connection, sql: str, result_format: int) -> list[tuple[str, int, bytes | None]]:
    """(name, type OID, bytes) of each column of the first row, as the server sends them."""
    result = conn.pgconn.exec_params(sql.encode(), [], result_format=result_format)
    assert result.status == ExecStatus.TUPLES_OK, result.error_message
    return [
        (str(result.fname(i).decode()), result.ftype(i), result.get_value(0, i))
        for i in range(result.nfields)
    ]


@pytest.mark.parametrize("zone", ZONES)
def test_values_are_sent_as_postgresql_sends_them(
    proxy: Connection, postgres: Connection, zone: str
) -> None:
    for conn in (proxy, postgres):
        conn.execute(f"SET TimeZone = {zone}")
    for result_format in (0, 1):  # text, binary
        assert sent(proxy, STATEMENT, result_format) == sent(postgres, STATEMENT, result_format)
    for binary in (False, True):  # psycopg's loaders read the same values
        ours = proxy.cursor(binary=binary).execute(STATEMENT).fetchall()
        theirs = postgres.cursor(binary=binary).execute(STATEMENT).fetchall()
        assert ours == theirs


def test_now_is_answered_in_the_sessions_time_zone(proxy: Connection) -> None:
    # A client's ping: before, a Binder Error (and pytz missing for its timestamptz).
    for zone in ("UTC", "Europe/Paris"):
        proxy.execute(f"SET TimeZone = '{zone}'")
        for binary in (False, True):
            cursor = proxy.cursor(binary=binary)
            row = cursor.execute("SELECT now(), current_timestamp, current_date").fetchone()
            assert cursor.description is not None
            names = [column.name for column in cursor.description]
            assert names == ["now", "current_timestamp", "current_date"]
            assert [column.type_code for column in cursor.description] == [1184, 1184, 1082]
            assert row is not None
            now, current, date = row
            assert isinstance(now, dt.datetime) and isinstance(current, dt.datetime)
            assert abs(now - dt.datetime.now(dt.UTC)) < dt.timedelta(minutes=1)
            local = now.astimezone(zoneinfo.ZoneInfo(zone))
            assert now.utcoffset() == local.utcoffset()  # psycopg reads the session's zone
            assert date == local.date()


def test_answers_are_remembered_for_their_time_zone(proxy: Connection) -> None:
    # A timestamptz whose translation names nothing that changes (now, timestamp...):
    # its answer is remembered, for the session's TimeZone only.
    sql = "SELECT strptime('2020-01-01 00:00 +0000', '%Y-%m-%d %H:%M %z') AS moment"
    shown = []
    for zone in ("UTC", "'Europe/Paris'", "UTC"):
        proxy.execute(f"SET TimeZone = {zone}")
        shown.append(sent(proxy, sql, 0)[0][2])
    assert shown == [b"2020-01-01 00:00:00+00", b"2020-01-01 01:00:00+01", shown[0]]
