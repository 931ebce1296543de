"""Date keys as BI tools and analysts write them, through a real `dpproxy serve` and
psycopg / psql, on DuckDB and PostgreSQL: ``CAST(date_trunc('month', visit_date) AS
date)`` (Metabase, Superset) and ``visit_date::date`` are keys from the data, released
through partition selection as dates, the output columns named and typed as PostgreSQL
names and types them (date, timestamp)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import duckdb
import psycopg
import pytest

from tests.integration.server import RunningServer

pytestmark = pytest.mark.integration

PATIENTS = 1_500
DIRECTORY_PREFIX = "date-keys-"
DATE_OID = 1082
TIMESTAMP_OID = 1114
#: As Metabase writes "group by month" of a date column (without the schema).
METABASE = (
    'SELECT CAST(date_trunc(\'{unit}\', "visits"."visit_date") AS date) AS "visit_date", '
    'COUNT(*) AS "count" FROM "visits" '
    'GROUP BY CAST(date_trunc(\'{unit}\', "visits"."visit_date") AS date) '
    'ORDER BY CAST(date_trunc(\'{unit}\', "visits"."visit_date") AS date) ASC'
)


def _years(demo_dir: Path) -> set[int]:
    with duckdb.connect(str(demo_dir / "demo.duckdb"), read_only=True) as conn:
        found = conn.execute("SELECT DISTINCT EXTRACT(year FROM visit_date) FROM visits")
        return {int(row[0]) for row in found.fetchall()}


def test_bi_tools_month_and_year_keys_are_dates(server: RunningServer, demo_dir: Path) -> None:
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        by_year = alice.execute(METABASE.format(unit="year"))
        years = by_year.fetchall()
        year_columns = by_year.description or []
        by_month = alice.execute(
            "SELECT date_trunc('month', visit_date)::date AS m, COUNT(*) FROM visits "
            "GROUP BY 1 ORDER BY 1"
        )
        months = by_month.fetchall()
        month_columns = by_month.description or []
        by_day = alice.execute(
            "SELECT CAST(visit_date AS date) AS d, CAST(visit_date AS timestamp) AS t, "
            "COUNT(*) FROM visits GROUP BY 1, 2"
        )
        days = by_day.fetchall()
        day_columns = by_day.description or []
    assert [(c.name, c.type_code) for c in year_columns][0] == ("visit_date", DATE_OID)
    assert [c.name for c in year_columns] == ["visit_date", "count"]
    # About 700 patients visit each year: every year passes the threshold (129).
    assert [r[0] for r in years] == [dt.date(y, 1, 1) for y in sorted(_years(demo_dir))]
    assert all(isinstance(r[1], int) and r[1] > 0 for r in years)
    assert [(c.name, c.type_code) for c in month_columns] == [("m", DATE_OID), ("count", 20)]
    assert [r[0] for r in months] == sorted(r[0] for r in months)
    assert all(type(r[0]) is dt.date and r[0].day == 1 for r in months)
    assert [(c.name, c.type_code) for c in day_columns[:2]] == [
        ("d", DATE_OID),
        ("t", TIMESTAMP_OID),
    ]
    assert all(type(d) is dt.date and t == dt.datetime.combine(d, dt.time()) for d, t, _ in days)


def test_psql_shows_the_dates(server: RunningServer) -> None:
    shown = server.psql("alice", METABASE.format(unit="year"))
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines() if line.strip()]
    assert lines[0].replace(" ", "") == "visit_date|count"
    assert any(line.startswith("2022-01-01 |") for line in lines), shown.stdout


TEXT_OID = 25


def test_to_char_keys_are_postgresql_s_text(server: RunningServer, demo_dir: Path) -> None:
    """``to_char(visit_date, 'YYYY')`` as a report's key: text, named to_char, one group per
    year present (about 700 patients a year pass the threshold); month names as
    PostgreSQL writes them."""
    with psycopg.connect(server.dsn("alice"), autocommit=True) as alice:
        by_year = alice.execute(
            "SELECT to_char(visit_date, 'YYYY'), COUNT(*) AS n FROM visits "
            "GROUP BY to_char(visit_date, 'YYYY') ORDER BY to_char(visit_date, 'YYYY')"
        )
        years = by_year.fetchall()
        year_columns = by_year.description or []
        by_name = alice.execute(
            "SELECT to_char(visit_date, 'FMMonth') AS month, COUNT(*) FROM visits GROUP BY 1"
        )
        names = {row[0] for row in by_name.fetchall()}
    assert [(c.name, c.type_code) for c in year_columns] == [("to_char", TEXT_OID), ("n", 20)]
    assert [r[0] for r in years] == [str(y) for y in sorted(_years(demo_dir))]
    assert names == {dt.date(2024, m, 1).strftime("%B") for m in range(1, 13)}
