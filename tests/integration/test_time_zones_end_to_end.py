"""A DP GROUP BY date_trunc('day', ts) over a timestamp with time zone through the real
server, with psycopg, on DuckDB and on PostgreSQL: after SET TimeZone = 'Europe/Paris'
the days are Paris's, as PostgreSQL gives them to a Paris session directly, whatever the
zone of dpproxy's own connection to the engine (DuckDB's local zone Asia/Tokyo, from TZ;
PostgreSQL's Pacific/Auckland, from the DSN's options). The noise is small (ε = 5, counts
of hundreds): each released count is within 5 of PostgreSQL's."""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterator
from zoneinfo import ZoneInfo

import duckdb
import psycopg
import pytest

from proxy.demo_data import DemoSize, generate, load_postgres
from tests.integration.server import RunningServer, demo_database, start, write_config
from tests.rewriter.zoned_events import CREATE, rows_of

pytestmark = pytest.mark.integration

PATIENTS = 50
PARIS = "Europe/Paris"
#: Every 5 minutes from Saturday 2024-10-26 00:00 to Monday 2024-10-28 23:55 in Paris,
#: across the night the clocks go back: 864 persons, one event each.
START = dt.datetime(2024, 10, 25, 22, 0)  # UTC: 2024-10-26 00:00 in Paris
INSTANTS = [START + dt.timedelta(minutes=5 * k) for k in range(865)]
POLICY = '\n[tables.events]\nprivacy_unit = "pid"\nmax_rows_per_unit = 1\n'
BY_DAY = "SELECT date_trunc('day', ts) AS day, COUNT(*) AS n FROM events GROUP BY 1 ORDER BY 1"
LATE = "SELECT COUNT(*) AS n FROM events WHERE ts >= '2024-10-27 02:30'"
TOLERANCE = 5  # Laplace noise of scale 0.4 (ε = 5 shared with partition selection)


@pytest.fixture(scope="module")
def reference(pg_dsn: str) -> Iterator[str]:
    """The events in a PostgreSQL schema of their own: the engine of the postgres server,
    and what a Paris session asks PostgreSQL directly for either engine."""
    schema = f"dpproxy_tz_e2e_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        load_postgres(generate(DemoSize(patients=PATIENTS)), pg_dsn, schema=schema)
        conn.execute(CREATE.format(schema=f'"{schema}"'))
        with conn.cursor() as cur:
            cur.executemany(
                f'INSERT INTO "{schema}".events VALUES (%s, %s, %s::timestamptz)',
                rows_of(INSTANTS),
            )
    try:
        yield schema
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(scope="module", params=["duckdb", "postgres"])
def server(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    pg_dsn: str,
    reference: str,
) -> Iterator[RunningServer]:
    directory = tmp_path_factory.mktemp(f"tz-{request.param}")
    database = demo_database(directory, PATIENTS)
    with duckdb.connect(str(database)) as conn:
        conn.execute(CREATE.format(schema="main"))
        conn.executemany(
            "INSERT INTO events VALUES (?, ?, CAST(? AS TIMESTAMPTZ))",
            [list(row) for row in rows_of(INSTANTS)],
        )
    backend = ""
    if request.param == "postgres":
        separator = "&" if "?" in pg_dsn else "?"
        dsn = f"{pg_dsn}{separator}options=-c%20TimeZone%3DPacific%2FAuckland"
        backend = f'engine = "postgres"\ndsn = "{dsn}"\nschema = "{reference}"\n#'
    config = write_config(directory, backend=backend)
    config.write_text(config.read_text() + POLICY)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TZ", "Asia/Tokyo")  # DuckDB's own TimeZone in the server process
        running = start(config)
    try:
        yield running
    finally:
        log = running.stop()
    assert "Traceback" not in log, log


def direct(pg_dsn: str, schema: str, sql: str, zone: str) -> list[tuple[object, ...]]:
    """PostgreSQL's own answer to a session in ``zone``, keys as local times."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"SET TimeZone = '{zone}'")
        conn.execute(f'SET search_path TO "{schema}"')
        rows = conn.execute(sql).fetchall()
    return [
        tuple(
            v.astimezone(ZoneInfo(zone)).replace(tzinfo=None)
            if isinstance(v, dt.datetime) and v.tzinfo is not None
            else v
            for v in row
        )
        for row in rows
    ]


def through(server: RunningServer, sql: str, zone: str) -> list[tuple[object, ...]]:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute(f"SET TimeZone = '{zone}'")
        conn.execute("SET dpproxy.epsilon = 5")
        return conn.execute(sql).fetchall()


def close(answer: list[tuple[object, ...]], truth: list[tuple[object, ...]]) -> None:
    assert [row[:-1] for row in answer] == [row[:-1] for row in truth], (answer, truth)
    for got, exact in zip(answer, truth, strict=True):
        assert isinstance(got[-1], int) and isinstance(exact[-1], int)
        assert abs(got[-1] - exact[-1]) <= TOLERANCE, (answer, truth)


@pytest.mark.parametrize("zone", [PARIS, "UTC", "America/New_York"])
def test_days_are_the_sessions(
    server: RunningServer, pg_dsn: str, reference: str, zone: str
) -> None:
    truth = direct(pg_dsn, reference, BY_DAY, zone)
    answer = through(server, BY_DAY, zone)
    close(answer, truth)
    if zone == PARIS:  # 288 events a day, 300 on the Sunday of 25 hours
        days = [dt.datetime(2024, 10, day) for day in (26, 27, 28)]
        assert truth == list(zip(days, [288, 300, 277], strict=True))


def test_literals_are_read_in_the_sessions_zone(
    server: RunningServer, pg_dsn: str, reference: str
) -> None:
    for zone in (PARIS, "UTC", "Asia/Kolkata"):
        close(through(server, LATE, zone), direct(pg_dsn, reference, LATE, zone))


def test_a_posix_zone_is_refused_with_a_hint(server: RunningServer) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as conn:
        conn.execute("SET TimeZone = 'UTC+3'")
        with pytest.raises(psycopg.errors.InvalidParameterValue) as refused:
            conn.execute(BY_DAY)
        assert refused.value.diag.message_hint is not None
        assert "Etc/GMT-3" in refused.value.diag.message_hint
        conn.execute("SET TimeZone = 'Etc/GMT-3'")
        assert conn.execute(BY_DAY).fetchall()
