"""Timestamps with time zone in catalog queries, computed in the session's TimeZone: the
pieces (how AT TIME ZONE's zone is read, the zone's abbreviations, to_char's formats, the
columns' names), queries that hold no such value keeping their translation, and many
moments around changes of summer time compared with the real PostgreSQL 15, in one
query per zone (values only DuckDB knows the type of, read when the query runs).
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.pq import ExecStatus

from proxy.catalog.classify import catalog_tree
from proxy.catalog.database import CatalogDatabase, CatalogQueryFailed
from proxy.catalog.datetimes import session_zone
from proxy.catalog.engine_errors import postgres_error
from proxy.catalog.respell import respelled
from proxy.catalog.text import pg_text
from proxy.catalog.time_kinds import unknowns_may_be_zoned
from proxy.catalog.to_char import parse_format
from proxy.catalog.translate import CatalogRefused, SessionValues, translate
from proxy.catalog.zone_abbreviations import _eras, _fixed_abbreviation
from proxy.catalog.zone_arguments import duck_zone
from tests.proxy.test_catalog_translate import demo_catalog

Connection = psycopg.Connection[tuple[object, ...]]
PSQL_DESCRIBE = (
    "SELECT c.oid, n.nspname, c.relname FROM pg_catalog.pg_class c "
    "LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
    "WHERE c.relname OPERATOR(pg_catalog.~) '^(patients)$' COLLATE pg_catalog.default "
    "AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 2, 3"
)


@pytest.fixture(scope="module")
def database() -> Iterator[CatalogDatabase]:
    database = CatalogDatabase(demo_catalog())
    yield database
    database.close()


@pytest.fixture(scope="module")
def postgres(pg_dsn: str) -> Iterator[Connection]:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        yield conn


def session(zone: str) -> SessionValues:
    return SessionValues("alice", "demo", "PostgreSQL 15.0 (dpproxy test)", {"timezone": zone})


def rows(database: CatalogDatabase, sql: str, zone: str) -> list[tuple[str | None, ...]]:
    translation = translate(sql, session(zone))
    assert translation is not None
    output = database.run_blocking(translation.sql, zone=session_zone(zone))
    return [tuple(pg_text(value) for value in row) for row in output.rows]


def postgres_rows(postgres: Connection, sql: str, zone: str) -> list[tuple[str | None, ...]]:
    postgres.execute("SELECT set_config('TimeZone', %s, false)", (zone,))
    result = postgres.pgconn.exec_params(sql.encode(), [], result_format=0)
    assert result.status == ExecStatus.TUPLES_OK, result.error_message
    found: list[tuple[str | None, ...]] = []
    for row in range(result.ntuples):
        values = (result.get_value(row, column) for column in range(result.nfields))
        found.append(tuple(None if value is None else value.decode() for value in values))
    return found


# ---------------------------------------------------------------------------------------
# Moments around changes of summer time, whose type DuckDB learns when the query runs

EXPRESSIONS = [
    "x::text",
    "x::date",
    "x::time",
    "x::timestamp",
    "x::timetz",
    "extract(hour from x)",
    "extract(timezone from x)",
    "date_part('epoch', x)",
    "date_trunc('day', x)",
    "date_trunc('hour', x)",
    "date_trunc('week', x)",
    "to_char(x, 'YYYY-MM-DD HH24:MI:SS.US TZ OF Dy IW')",
    "x + i",
    "x - i",
    "age(x + i, x)",
    "x = x::timestamp",
    "x - x::date",
]
INTERVALS = ["1 day", "24 hours", "1 mon", "1 mon -1 day", "-1 day 2 hours", "1 year 1 day 1 hour"]


def moments(seed: int, count: int) -> list[tuple[str, str]]:
    chosen = random.Random(seed)
    found = []
    for _ in range(count):
        year = chosen.choice([1944, 1996, 2007, 2024, 2025, 2038, 2090])
        month = chosen.choice([3, 4, 10, 11, chosen.randint(1, 12)])
        moment = (
            f"{year}-{month:02d}-{chosen.randint(1, 28):02d} {chosen.randint(0, 23):02d}:"
            f"{chosen.choice([0, 30, 59]):02d}:{chosen.randint(0, 59):02d}."
            f"{chosen.randint(0, 999_999):06d}+00"
        )
        found.append((moment, chosen.choice(INTERVALS)))
    return found


@pytest.mark.parametrize(
    "zone", ["Europe/Paris", "America/New_York", "Australia/Lord_Howe", "America/St_Johns"]
)
def test_moments_around_summer_time_are_postgresqls(
    database: CatalogDatabase, postgres: Connection, zone: str
) -> None:
    values = ", ".join(
        f"(TIMESTAMPTZ '{moment}', INTERVAL '{interval}')" for moment, interval in moments(7, 40)
    )
    sql = f"SELECT {', '.join(EXPRESSIONS)} FROM (VALUES {values}) v(x, i) ORDER BY v.x"
    assert rows(database, sql, zone) == postgres_rows(postgres, sql, zone)


# ---------------------------------------------------------------------------------------
# The pieces


def test_at_time_zone_reads_the_zone_as_postgresql() -> None:
    assert duck_zone("CET") == duck_zone("cet") == "GMT+01:00"  # an abbreviation: no summer
    assert duck_zone("NPT") == "GMT+05:45"
    assert duck_zone("Z") == duck_zone("UTC") == "GMT+00:00"
    assert duck_zone("+02") == duck_zone("2") == "GMT-02:00"  # POSIX: hours west of UTC
    assert duck_zone("UTC+3") == "GMT-03:00"
    assert duck_zone("europe/paris") == "Europe/Paris"
    with pytest.raises(CatalogRefused) as dynamic:
        duck_zone("MSK")  # its offset comes from Moscow's history
    assert dynamic.value.sqlstate == "0A000" and dynamic.value.hint
    with pytest.raises(CatalogRefused) as unknown:
        duck_zone("Mars/Olympus")
    assert unknown.value.sqlstate == "22023"


def test_abbreviations_by_era() -> None:
    paris = dict(_eras("Europe/Paris")[0][1])
    assert paris == {3600: "CET", 7200: "CEST"}
    new_york = dict(_eras("America/New_York")[0][1])
    assert new_york == {-18000: "EST", -14400: "EDT"}
    assert dict(_eras("Asia/Tokyo")[0][1])[32400] == "JST"
    assert _fixed_abbreviation(session_zone("<+02>-02")) == "+02"
    assert _fixed_abbreviation(session_zone("UTC+3")) == "UTC"
    assert _fixed_abbreviation(session_zone("UTC")) == "UTC"


def test_formats_are_read_as_postgresql_reads_them() -> None:
    pieces = parse_format('FMDDth "HH24 in quotes" HH24\\"TZ')
    keywords = [p.name for p in pieces if not isinstance(p, str)]
    assert keywords == ["DD", "HH24", "TZ"]
    assert "".join(p for p in pieces if isinstance(p, str)) == ' HH24 in quotes "'
    with pytest.raises(CatalogRefused, match="TM"):
        parse_format("TMMonth")


def test_typed_constants_before_a_cast_are_read_as_postgresql_reads_them() -> None:
    # sqlglot cast the text first: TIMESTAMPTZ ('...'::text), a timestamptz.
    sql = respelled("SELECT TIMESTAMPTZ '2024-03-31 00:30+00'::text, date_part('hour', x)")
    assert sql.startswith("SELECT CAST('2024-03-31 00:30+00' AS TIMESTAMPTZ)::text")
    assert "pg_catalog.date_part(" in sql


@pytest.mark.parametrize(
    ("sql", "names"),
    [
        ("SELECT date_part('hour', now()), extract(hour from now())", ["date_part", "extract"]),
        ("SELECT to_char(now(), 'HH24'), now() AT TIME ZONE 'UTC'", ["to_char", "timezone"]),
        ("SELECT to_timestamp(0), to_timestamp('2024', 'YYYY')", ["to_timestamp"] * 2),
        ("SELECT TIMESTAMPTZ '2024-01-01 00:00+00'::text, now()::text", ["text", "now"]),
        ("SELECT CASE WHEN true THEN 1 END::text, ARRAY[1]::text", ["text", "array"]),
    ],
)
def test_columns_are_named_as_postgresql_names_them(sql: str, names: list[str]) -> None:
    translation = translate(sql, session("Asia/Tokyo"))
    assert translation is not None and list(translation.column_names or ()) == names


def test_queries_without_zoned_values_keep_their_translation() -> None:
    # psql's \d: no timestamptz anywhere, its columns are left as they were.
    tree = catalog_tree(PSQL_DESCRIBE, "alice")
    assert tree is not None and not unknowns_may_be_zoned(tree)
    translation = translate(PSQL_DESCRIBE, session("Europe/Paris"))
    assert translation is not None and "typeof" not in translation.sql.lower()
    # A relation with timestamptz columns: its values are looked at when the query runs.
    reads = catalog_tree("SELECT state::text FROM pg_stat_activity", "alice")
    assert reads is not None and unknowns_may_be_zoned(reads)


def test_text_dpproxy_cannot_read_is_refused_when_the_query_runs(
    database: CatalogDatabase,
) -> None:
    sql = "SELECT s::timestamptz FROM (SELECT '2024-03-31 02:30 Europe/Paris' AS s) t"
    with pytest.raises(CatalogQueryFailed) as failed:
        rows(database, sql, "Europe/Paris")
    error = postgres_error(str(failed.value))
    assert error is not None and error.sqlstate == "0A000"
    assert error.hint is not None and "+02:00" in error.hint  # advice is a HINT
    assert error.detail is None
    assert rows(database, sql.replace(" Europe/Paris", "+02"), "Europe/Paris") == [
        ("2024-03-31 01:30:00+01",)  # 00:30 UTC: Paris is still at +01
    ]
