"""CURRENT_DATE, now() … through a real `dpproxy serve` and psycopg / psql, on both engines:
the date of the session's TimeZone, charged once per day for the same query (the date is
part of the query), and a timestamp with time zone refused before the charge."""

from __future__ import annotations

import datetime as dt
import json
import zoneinfo
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer, dpproxy_in_process

pytestmark = pytest.mark.integration

PATIENTS = 400
DIRECTORY_PREFIX = "clock-"
#: The demo's visits run from 2020 to 2024.
RECENT = "SELECT COUNT(*) FROM visits WHERE visit_date >= CURRENT_DATE - {days}"


def _spent(server: RunningServer) -> float:
    result = dpproxy_in_process("budget", "show", "alice", "--json", "--config", str(server.config))
    assert result.returncode == 0, result.stderr
    return float(json.loads(result.stdout)[0]["spent"])


def _truth(demo_dir: Path, since: dt.date) -> int:
    """Visits since ``since``, at most 30 per patient (the demo's max_rows_per_unit)."""
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        row = conn.execute(
            "SELECT SUM(LEAST(n, 30)) FROM (SELECT patient_id, COUNT(*) AS n FROM visits "
            "WHERE visit_date >= ? GROUP BY patient_id)",
            [since],
        ).fetchone()
    return int(row[0] or 0) if row else 0


def test_current_date_is_today(server: RunningServer, demo_dir: Path) -> None:
    """Four years back from today (UTC): the visits since then, within the noise. (The
    answer cache, off in these servers, is tested in tests/proxy/test_answer_cache.py.)"""
    today = dt.datetime.now(dt.UTC).date()
    since = today.replace(year=today.year - 4, day=min(today.day, 28))
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        alice.execute("SET TimeZone = 'UTC'")
        before = _spent(server)
        (answer,) = alice.execute(RECENT.format(days=(today - since).days)).fetchone() or (None,)
        after = _spent(server)
    assert after - before == pytest.approx(1.0)
    assert isinstance(answer, int) and abs(answer - _truth(demo_dir, since)) < 200


def test_the_local_time_and_intervals(server: RunningServer, demo_dir: Path) -> None:
    """A timestamp compared with a date column (LOCALTIMESTAMP - INTERVAL …: the date that
    compares alike, value_types.dated), and Metabase's 'previous N days' filter."""
    today = dt.datetime.now(dt.UTC).date()
    days = (today - dt.date(2023, 1, 1)).days
    metabase = (
        "SELECT COUNT(*) FROM visits WHERE visit_date >= "
        f"CAST((CAST(now() AS timestamp) + (INTERVAL '-{days} day')) AS date) "
        "AND visit_date < CAST(CAST(now() AS timestamp) AS date)"
    )
    local = (
        "SELECT COUNT(*) FROM visits "
        f"WHERE visit_date >= LOCALTIMESTAMP - INTERVAL '{days} days 1 hour'"
    )
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        alice.execute("SET TimeZone = 'UTC'")
        answers = [alice.execute(q).fetchone() for q in (metabase, local)]
    truth = _truth(demo_dir, dt.date(2023, 1, 1))
    for answer in answers:
        assert answer is not None and abs(answer[0] - truth) < 200, (answer, truth)


def test_an_instant_is_refused_before_the_charge(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        before = _spent(server)
        with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
            alice.execute(
                "SELECT COUNT(*) FROM visits WHERE visit_date > now() - INTERVAL '5 years'"
            )
        assert "timestamp with time zone" in (refused.value.diag.message_primary or "")
        assert "CAST(now() AS date)" in (refused.value.diag.message_hint or "")
        assert _spent(server) == before


def test_psql_reads_the_date_in_the_session_time_zone(server: RunningServer) -> None:
    """Kiritimati is 14 hours ahead of UTC: its date is often not UTC's."""
    zone = "Pacific/Kiritimati"
    shown = server.psql(
        "alice",
        f"SET TimeZone = '{zone}'",
        "SELECT CURRENT_DATE AS today, COUNT(*) AS n FROM visits "
        "WHERE visit_date >= CURRENT_DATE - 3000",
    )
    assert shown.returncode == 0, shown.stderr
    expected = {
        dt.datetime.now(zoneinfo.ZoneInfo(zone)).date().isoformat(),
        (dt.datetime.now(zoneinfo.ZoneInfo(zone)) - dt.timedelta(minutes=1)).date().isoformat(),
    }
    assert any(day in shown.stdout for day in expected), shown.stdout
