"""What dpproxy refuses over a timestamp with time zone, and why (rewriter.zones): zones
the engines read differently (checked on both engines here), keys finer than a day in a
zone whose clocks go back, and values PostgreSQL computes otherwise than on a local time.
Each refusal says what to write instead."""

from __future__ import annotations

import duckdb
import psycopg
import pytest

from rewriter import (
    ColumnPolicy,
    ColumnType,
    ColumnTypes,
    PlanRequest,
    Rejected,
    TablePolicy,
    build_catalog,
    plan,
)
from rewriter.zones import fixed_offset, sql_zone
from tests.rewriter.zoned_events import catalog, duckdb_events

ZONED = "SELECT date_trunc('day', ts), COUNT(*) FROM events GROUP BY 1"


def _plan(sql: str, zone: str, *, delta: float = 1e-6) -> object:
    return plan(sql, catalog("main"), PlanRequest(1.0, "duckdb", delta=delta, time_zone=zone))


def _refusal(sql: str, zone: str = "Europe/Paris") -> Rejected:
    with pytest.raises(Rejected) as refused:
        _plan(sql, zone)
    return refused.value


@pytest.mark.parametrize(
    "zone", ["UTC+3", "<+02>-02", "<-05:30>+05:30", "EST5EDT", "CET", "GMT", "Japan", "Z"]
)
def test_zones_the_engines_read_differently_are_refused(zone: str) -> None:
    refused = _refusal(ZONED, zone)
    assert refused.sqlstate == "22023"
    assert f'"{zone}"' in refused.message and "IANA" in refused.message
    assert refused.hint is not None and "Etc/GMT-3" in refused.hint


@pytest.mark.parametrize(
    "zone", ["UTC", "Etc/UTC", "Etc/GMT-3", "Europe/Paris", "America/Argentina/Buenos_Aires"]
)
def test_iana_names_are_read(zone: str) -> None:
    assert sql_zone(zone) == zone
    made = plan(ZONED, catalog("main"), PlanRequest(1.0, "duckdb", delta=1e-6, time_zone=zone))
    assert f"AT TIME ZONE '{zone}'" in made.sql


def test_a_query_that_reads_no_such_column_takes_any_zone() -> None:
    for sql in ("SELECT COUNT(*) FROM events", "SELECT COUNT(pid) FROM events"):
        made = plan(sql, catalog("main"), PlanRequest(1.0, "duckdb", time_zone="UTC+3"))
        assert made.time_zone is None
        utc = plan(sql, catalog("main"), PlanRequest(1.0, "duckdb", time_zone="UTC"))
        assert made.sql == utc.sql


def test_the_zone_is_a_quoted_literal_of_a_known_name() -> None:
    for name in ("Europe/Paris'; DROP TABLE events; --", "Europe/Nowhere", "../etc/passwd"):
        with pytest.raises(Rejected):
            sql_zone(name)
    made = plan(ZONED, catalog("main"), PlanRequest(1.0, "duckdb", delta=1e-6, time_zone="UTC"))
    assert "AT TIME ZONE 'UTC'" in made.sql


def test_zones_of_one_offset() -> None:
    assert fixed_offset("UTC") and fixed_offset("Etc/GMT-14") and fixed_offset("Etc/GMT+12")
    assert not fixed_offset("Europe/Paris") and not fixed_offset("Asia/Kolkata")


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT ts, COUNT(*) FROM events GROUP BY 1",
        "SELECT date_trunc('hour', ts), COUNT(*) FROM events GROUP BY 1",
        "SELECT date_trunc('minute', ts), COUNT(*) FROM events GROUP BY 1",
        "SELECT COALESCE(ts, ts), COUNT(*) FROM events GROUP BY 1",
    ],
)
def test_keys_finer_than_a_day_need_a_zone_of_one_offset(sql: str) -> None:
    for zone in ("Europe/Paris", "America/New_York", "Asia/Kolkata"):
        refused = _refusal(sql, zone)
        assert "clocks go back" in refused.message and zone in refused.message
        assert refused.hint is not None and "CAST(ts AS TIMESTAMP)" in refused.hint
    for zone in ("UTC", "Etc/GMT-3"):
        _plan(sql, zone)
    # The local time, in which the repeated hour is one group in PostgreSQL too.
    _plan(
        "SELECT date_trunc('hour', CAST(ts AS TIMESTAMP)), COUNT(*) FROM events GROUP BY 1",
        "Europe/Paris",
    )


def test_keys_of_local_times_are_accepted_in_every_zone() -> None:
    for sql in (
        "SELECT date_trunc('hour', CAST(ts AS TIMESTAMP)), COUNT(*) FROM events GROUP BY 1",
        "SELECT CAST(ts AS TIMESTAMP), COUNT(*) FROM events GROUP BY 1",
        "SELECT CAST(ts AS DATE), COUNT(*) FROM events GROUP BY 1",
        "SELECT EXTRACT(hour FROM ts), COUNT(*) FROM events GROUP BY 1",
        "SELECT date_trunc('day', ts), COUNT(*) FROM events GROUP BY 1",
    ):
        _plan(sql, "Europe/Paris")


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT COUNT(*) FROM events WHERE CAST(ts AS TEXT) LIKE '2024%'", "with its offset"),
        ("SELECT COUNT(*) FROM events WHERE GREATEST(ts, ts) > '2024-01-01'", "by their order"),
        ("SELECT COUNT(*) FROM events WHERE ts IN (SELECT ts FROM events)", "IN (SELECT"),
        ("SELECT COUNT(*) FROM events WHERE ts > 'today'", "is not a date or time"),
        # Refused as PostgreSQL refuses them (22008, 22009).
        ("SELECT COUNT(*) FROM events WHERE ts > '2024-02-30'", "field value out of range"),
        (
            "SELECT COUNT(*) FROM events WHERE ts > '2024-01-01 08:00+16'",
            "time zone displacement out of range",
        ),
        ("SELECT COUNT(*) FROM events WHERE COALESCE(ts, ts) > '2024-01-01'", "computed"),
        (
            "SELECT AVG(n) FROM (SELECT pid, COUNT(DISTINCT COALESCE(ts, ts)) AS n FROM events "
            "GROUP BY pid) s",
            "as instants",
        ),
        (
            "SELECT date_trunc('day', ts), COUNT(*) FROM events GROUP BY 1 "
            "HAVING date_trunc('day', ts) > '2024-01-01'",
            "GROUP BY key",
        ),
        (
            "SELECT EXTRACT(year FROM date_trunc('day', ts)), COUNT(*) FROM events "
            "GROUP BY date_trunc('day', ts)",
            "GROUP BY key",
        ),
        (
            "SELECT date_trunc('day', ts) + INTERVAL '1 hour', COUNT(*) FROM events "
            "GROUP BY date_trunc('day', ts)",
            "GROUP BY key",
        ),
    ],
)
def test_values_postgresql_computes_otherwise_are_refused(sql: str, words: str) -> None:
    refused = _refusal(sql)
    assert words in refused.message, refused.message
    assert refused.hint


def test_a_zoned_key_is_selected_and_ordered_by_as_itself() -> None:
    _plan(
        "SELECT date_trunc('day', ts) AS d, COUNT(*) FROM events GROUP BY 1 "
        "ORDER BY date_trunc('day', ts) DESC",
        "Europe/Paris",
    )
    # A local time's key computes as PostgreSQL computes on ts::timestamp.
    _plan(
        "SELECT EXTRACT(year FROM CAST(ts AS TIMESTAMP)), COUNT(*) FROM events "
        "GROUP BY CAST(ts AS TIMESTAMP)",
        "Europe/Paris",
    )


def test_a_timestamp_with_time_zone_meets_only_literals_and_its_kind() -> None:
    columns = ColumnTypes(
        {
            "t": {
                "pid": ColumnType.INTEGER,
                "ts": ColumnType.TIMESTAMP,
                "plain": ColumnType.TIMESTAMP,
            }
        },
        {"t": frozenset({"ts"})},
    )
    policy = TablePolicy(privacy_unit="pid", columns={"plain": ColumnPolicy()})
    found = build_catalog(columns, {"t": policy}, schema="main")
    request = PlanRequest(1.0, "duckdb", time_zone="Europe/Paris")
    with pytest.raises(Rejected) as refused:
        plan("SELECT COUNT(*) FROM t WHERE ts > plain", found, request)
    assert "not a literal" in refused.value.message
    assert refused.value.hint is not None and "CAST(ts AS TIMESTAMP)" in refused.value.hint
    plan("SELECT COUNT(*) FROM t WHERE CAST(ts AS TIMESTAMP) > plain", found, request)
    plan("SELECT COUNT(*) FROM t WHERE ts > ts", found, request)


def test_bounds_are_instants_in_utc() -> None:
    made = plan(
        "SELECT SUM(EXTRACT(year FROM ts)) FROM events",
        catalog("main"),
        PlanRequest(1.0, "duckdb", time_zone="America/New_York"),
    )
    assert "CAST('2020-01-01 00:00:00.000000+00' AS TIMESTAMPTZ)" in made.sql
    assert "CAST('2029-12-31 23:59:59.999999+00' AS TIMESTAMPTZ)" in made.sql
    # 2020-01-01 00:00 UTC is 2019 in New York: the local years are within a day of UTC's.
    assert ", 2019), 2030)" in made.sql


def test_the_engines_read_the_refused_zones_differently(pg_dsn: str) -> None:
    """The claims behind the refusals, on both engines: PostgreSQL counts 'UTC+3' west of
    Greenwich and DuckDB east; DuckDB knows no '+02' nor '<+02>-02' (PostgreSQL reads
    '+02' west, a POSIX sign); PostgreSQL's AT TIME ZONE reads 'CET' as the abbreviation
    (+01 all year, DuckDB as the zone, +02 in July); the IANA names agree."""
    duck = duckdb_events([])
    moment = "TIMESTAMPTZ '2024-07-01 12:00:00+00'"

    def on_duckdb(zone: str) -> object:
        row = duck.execute(f"SELECT CAST({moment} AT TIME ZONE ? AS VARCHAR)", [zone]).fetchone()
        return None if row is None else row[0]

    with psycopg.connect(pg_dsn, autocommit=True) as conn:

        def on_postgres(zone: str) -> object:
            row = conn.execute(f"SELECT ({moment} AT TIME ZONE %s)::text", (zone,)).fetchone()
            return None if row is None else row[0]

        assert on_postgres("UTC+3") == "2024-07-01 09:00:00"
        assert on_duckdb("UTC+3") == "2024-07-01 15:00:00"
        assert on_postgres("CET") == "2024-07-01 13:00:00"
        assert on_duckdb("CET") == "2024-07-01 14:00:00"
        # '+02' is 2 hours west for PostgreSQL (a POSIX sign), '<+02>-02' 2 hours east.
        for unknown, local in (("+02", "2024-07-01 10:00:00"), ("<+02>-02", "2024-07-01 14:00:00")):
            assert on_postgres(unknown) == local
            with pytest.raises(duckdb.Error, match="Unknown TimeZone"):
                on_duckdb(unknown)
        for zone, local in (
            ("Etc/GMT-3", "2024-07-01 15:00:00"),
            ("Europe/Paris", "2024-07-01 14:00:00"),
            ("America/New_York", "2024-07-01 08:00:00"),
            ("Asia/Kolkata", "2024-07-01 17:30:00"),
            ("UTC", "2024-07-01 12:00:00"),
        ):
            assert on_postgres(zone) == on_duckdb(zone) == local
