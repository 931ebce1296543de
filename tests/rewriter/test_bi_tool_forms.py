"""SQL that BI tools send, answered as PostgreSQL answers it (found by a tester reproducing
Grafana, Metabase, Tableau and Looker against the demo):

- Grafana's ``$__timeGroup`` of an interval of a million seconds or more, written by Go's
  ``%v`` with an exponent, ``floor(extract(epoch from c)/2.592e+06)*2.592e+06``
  (``rewriter.passes.epoch_keys``);
- Metabase's day of the week from Monday, a CASE whose condition computes on an EXTRACT
  key, and Tableau's year, ``CAST(TRUNC(EXTRACT(YEAR FROM d)) AS INTEGER)``
  (``rewriter.passes.numeric_keys``);
- Metabase's pivot tables, a constant key ``ABS(0) AS "pivot-grouping"``
  (``rewriter.passes.group_keys``);
- Tableau's and Looker's filters: ``date_trunc`` of a constant date
  (``current_time.constant_truncations``), CONTAINS as ``strpos`` (``check_types``), and a
  constant text cast to an interval (``cast_constants``).

Each was refused before. The answers are dpproxy's bounded exact answers on DuckDB and on
PostgreSQL, which must be PostgreSQL's own answer to the analyst's SQL; keys are computed
on rows outside the years 1 to 9999 too (DuckDB's calendar holds them) without failing.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator

import duckdb
import psycopg
import pytest
from sqlglot import exp

from rewriter import PlanRequest, Rejected, plan
from rewriter.parse import parse_statement
from rewriter.passes.cast_constants import cast_constants
from tests.rewriter import test_adversarial_values as adversarial
from tests.rewriter.coupling import in_key_order
from tests.rewriter.driver_sql import Engines, engines
from tests.rewriter.driver_sql import catalog as notes_catalog
from tests.rewriter.test_to_char_keys import OUTSIDE, catalog, duck, postgres, rows

__all__ = ["duck", "postgres"]  # the fixtures, used by name

Postgres = tuple[psycopg.Connection[tuple[object, ...]], str]

METABASE_MONDAY = (
    "CASE WHEN ((CAST(EXTRACT(dow FROM {c}) AS integer) + 1) + 6) % 7 = 0 THEN 7 "
    "ELSE ((CAST(EXTRACT(dow FROM {c}) AS integer) + 1) + 6) % 7 END"
)
KEYS = [
    # Grafana: 30 days, 1 year, 2 weeks, 12 days; 1e+06 seconds as the bucket's number.
    "floor(extract(epoch from d)/2.592e+06)*2.592e+06",
    "floor(extract(epoch from ts)/3.1536e+07)*3.1536e+07",
    "floor(extract(epoch from ts)/1.2096e+06)*1.2096e+06",
    "floor(extract(epoch from d)/1.0368e+06)*1.0368e+06",
    "floor(extract(epoch from ts)/1e+06)",
    METABASE_MONDAY.format(c="d"),
    METABASE_MONDAY.format(c="ts"),
    "CASE WHEN CAST(EXTRACT(dow FROM d) AS integer) + 1 > 3 AND NOT "
    "CAST(EXTRACT(month FROM d) AS integer) * 2 = 4 THEN CAST(EXTRACT(dow FROM d) AS int) * 10 "
    "ELSE 0 END",
    "CAST(TRUNC(EXTRACT(YEAR FROM d)) AS INTEGER)",
    "CAST(EXTRACT(YEAR FROM ts) + 1 AS INTEGER)",
    "CAST(FLOOR(EXTRACT(MONTH FROM ts) / 4) AS SMALLINT)",
]


def _own(sql: str, postgres: Postgres) -> dict[object, object]:
    conn, schema = postgres
    found = conn.execute(sql.replace("calendar", f'"{schema}".calendar')).fetchall()
    return {None if k is None else int(str(k)): n for k, n in found}


@pytest.mark.parametrize("key", KEYS)
def test_keys_are_postgresql_s_own(
    key: str, duck: duckdb.DuckDBPyConnection, postgres: Postgres
) -> None:
    conn, schema = postgres
    sql = f"SELECT {key} AS k, COUNT(*) FROM calendar WHERE person <= {len(rows())} GROUP BY 1"
    answers: dict[str, dict[object, object]] = {}
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),  # type: ignore[arg-type]
        )
        assert made.released_columns[0] == ("k0", "BIGINT")
        answers[dialect] = {row[0]: row[1] for row in engine.execute(made.sql).fetchall()}
    assert answers["duckdb"] == answers["postgres"] == _own(sql, postgres)
    assert sum(int(str(n)) for n in answers["postgres"].values()) == len(rows())
    # DuckDB's table holds rows outside the years 1 to 9999 too: computed without failing.
    everything = f"SELECT {key} AS k, COUNT(*) FROM calendar GROUP BY 1"
    made = plan(everything, catalog("main"), PlanRequest(1.0, delta=1e-6))
    found = duck.execute(made.sql).fetchall()
    assert sum(row[1] for row in found) == len(rows()) + len(OUTSIDE)


@pytest.mark.parametrize(
    ("key", "words"),
    [
        # 2.5920e+03 is 2592.0 in PostgreSQL: the key would be written 1675209600.0.
        ("floor(extract(epoch from ts)/2.5920e+03)*2.5920e+03", "whole number of seconds"),
        ("floor(extract(epoch from ts)/2.5e-1)", "whole number of seconds"),
        ("floor(extract(epoch from ts)/1e13)", "whole number of seconds"),
        ("CAST(EXTRACT(YEAR FROM d) / 2 AS INTEGER)", "needs a whole number"),
        ("CAST(TRUNC(EXTRACT(YEAR FROM d) * 1000000) AS INTEGER)", "outside its range"),
        ("CAST(TRUNC(EXTRACT(YEAR FROM d) * 10) AS SMALLINT)", "outside its range"),
    ],
)
def test_other_forms_are_refused(key: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(
            f"SELECT COUNT(*) FROM calendar GROUP BY {key}",
            catalog("main"),
            PlanRequest(1.0, delta=1e-6),
        )


# A CASE condition on a bounded column computes on its clamped values, every step bounded:
# never failing on extreme values (NaN, ±infinity, 1.8e308, subnormals), on either engine.
CLAMPED = (
    "SELECT CASE WHEN value * 2 > 1 THEN floor(value) WHEN floor(value * 1000) = 0 OR "
    "value < -1 THEN 0 ELSE -1 END AS k, COUNT(*) FROM readings GROUP BY 1"
)


@pytest.mark.parametrize("bounds", adversarial.BOUNDS)
def test_a_computed_condition_never_fails_on_extreme_values(
    bounds: tuple[float, float], pg_dsn: str, pg_schema: str
) -> None:
    lower, upper = bounds
    data = adversarial.rows(lower, upper)
    without = [r for r in data if r[1] != adversarial.ADVERSARY]
    totals = []
    for dialect, schema in (("duckdb", "main"), ("postgres", pg_schema)):
        made = plan(
            CLAMPED,
            adversarial.catalog_for(lower, upper, schema),
            PlanRequest(1.0, dialect, delta=1e-6),  # type: ignore[arg-type]
        )
        sql = in_key_order(made)  # the same groups kept on both engines
        if dialect == "duckdb":
            found = [adversarial.duckdb_totals(rows, sql, 1) for rows in (data, without)]
        else:
            found = [
                adversarial.postgres_totals(pg_dsn, schema, rows, sql, 1)
                for rows in (data, without)
            ]
        adversarial.check_neighbours(made, *found)
        totals.append(found[0])
    assert totals[0] == totals[1]


# ---------------------------------------------------------------------------------------
# The notes of tests.rewriter.driver_sql: WHERE filters and constant keys


@pytest.fixture(scope="module")
def notes(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn) as found:
        yield found


PREDICATES = [
    # Tableau's CONTAINS.
    "STRPOS(CAST(LOWER(CAST(name AS TEXT)) AS TEXT), CAST('an' AS TEXT)) > 0",
    "strpos(name, 'rg') = 3",  # characters, not bytes: Jörg
    "strpos(name, 'é') = 1",
    "position('' in name) = 1",  # an empty text is found at 1; a NULL name is NULL
    "strpos(name, code) > 0",
    "position('%' IN name) = 0",
    # date_trunc of a constant.
    "day >= DATE_TRUNC('year', DATE '2024-06-01')",
    "day >= CAST(DATE_TRUNC('year', DATE '2024-06-01') AS date)",
    "day < DATE_TRUNC('month', DATE '2024-01-20') + INTERVAL '1 month'",
    "day >= date_trunc('month', TIMESTAMP '2024-01-31 10:00')",
    "day BETWEEN date_trunc('quarter', DATE '2024-02-10') AND DATE '2024-02-01'",
    # A constant text cast to an interval, added.
    "day >= DATE '2024-02-29' + CAST(-1 || ' YEAR' AS INTERVAL)",
    "day >= DATE '2024-03-01' + (-30 || ' day')::INTERVAL",
    "day < DATE '2024-01-31' - CAST('1' || 5 || ' days' AS INTERVAL)",
]


@pytest.mark.parametrize("predicate", PREDICATES)
def test_where_is_what_postgresql_computes(predicate: str, notes: Engines) -> None:
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)


@pytest.mark.parametrize(
    "zone", ["UTC", "America/Santiago", "Asia/Kolkata", "Pacific/Kiritimati", "America/Adak"]
)
@pytest.mark.parametrize(
    "predicate",
    [
        "day >= date_trunc('month', DATE '2024-01-15')",
        "day <= date_trunc('year', DATE '2024-06-01') + INTERVAL '31 days'",
        "day = CAST(date_trunc('week', DATE '2024-01-03') AS date)",
    ],
)
def test_a_truncated_date_is_an_instant_of_the_session_s_zone(
    zone: str, predicate: str, notes: Engines
) -> None:
    """PostgreSQL truncates a date as a timestamp with time zone, local midnight in the
    session's TimeZone; the date column compared with it is read in that zone too."""
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    notes.postgres.execute(f"SET TimeZone = '{zone}'".encode())
    try:
        native = notes.native(sql)
        answers = []
        for dialect, schema, engine in (
            ("duckdb", "main", notes.duck),
            ("postgres", notes.schema, notes.postgres),
        ):
            made = plan(
                sql,
                notes_catalog(schema),
                PlanRequest(10.0, dialect, time_zone=zone),  # type: ignore[arg-type]
            )
            if isinstance(engine, duckdb.DuckDBPyConnection):
                found = engine.execute(made.sql).fetchall()
            else:
                found = engine.execute(made.sql.encode()).fetchall()
            answers.append([tuple(r) for r in found])
    finally:
        notes.postgres.execute(b"SET TimeZone = 'UTC'")
    assert answers[0] == answers[1] == native


def test_a_constant_date_trunc_is_a_literal_in_the_query() -> None:
    made = plan(
        "SELECT COUNT(*) FROM notes WHERE day >= CAST(DATE_TRUNC('year', DATE '2023-06-01') "
        "AS date)",
        notes_catalog("main"),
        PlanRequest(1.0),
    )
    assert "\"day\" >= CAST('2023-01-01' AS DATE)" in made.sql
    assert made.now is None


def test_a_constant_date_trunc_elsewhere_is_left_as_written() -> None:
    with pytest.raises(Rejected, match="date_trunc of a date"):
        plan(
            "SELECT COUNT(*) FROM notes WHERE date_trunc('year', day) >= DATE '2024-01-01'",
            notes_catalog("main"),
            PlanRequest(1.0),
        )


@pytest.mark.parametrize(
    "text",
    [
        "-3 || ' YEAR'",
        "(-999 || ' day')",
        "'1' || 2 || ' months'",
        "CAST('2 weeks' AS TEXT) || ' 3 hours'",
        "0 || ' day'",
        "-0 || ' day'",
        "'+7' || ' mins'",
    ],
)
def test_the_interval_s_text_is_postgresql_s(text: str, pg_dsn: str) -> None:
    statement = parse_statement(f"SELECT DATE '2024-01-31' + CAST({text} AS INTERVAL)")
    cast_constants(statement)
    folded = statement.find(exp.Interval)
    assert folded is not None and statement.find(exp.DPipe) is None
    with psycopg.connect(pg_dsn) as conn:
        found = conn.execute(
            f"SELECT CAST({text} AS INTERVAL)::text, ({folded.sql(dialect='postgres')})::text"
        ).fetchone()
    assert found is not None and found[0] == found[1]


def test_a_relative_date_is_the_interval_written_out() -> None:
    now = dt.datetime(2026, 11, 24, 10, 0, tzinfo=dt.UTC)

    def planned(interval: str) -> str:
        return plan(
            f"SELECT COUNT(*) FROM notes WHERE day >= (CURRENT_DATE + {interval})",
            notes_catalog("main"),
            PlanRequest(1.0, now=now),
        ).sql

    assert planned("CAST(-3 || ' YEAR' AS INTERVAL)") == planned("INTERVAL '-3 YEAR'")
    assert "CAST('2023-11-24' AS DATE)" in planned("CAST(-3 || ' YEAR' AS INTERVAL)")


@pytest.mark.parametrize(
    ("predicate", "words"),
    [
        ("strpos(stay, 'a') > 0", "needs two text values"),
        ("strpos(name, 'a') + 1 > 1", "raw values could overflow"),
        ("day >= DATE '2024-01-01' + CAST(3 || 4 AS INTERVAL)", "casting to INTERVAL"),
        ("day >= DATE '2024-01-01' + CAST(name AS INTERVAL)", "casting to INTERVAL"),
    ],
)
def test_other_filters_are_refused(predicate: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(
            f"SELECT COUNT(*) FROM notes WHERE {predicate}", notes_catalog("main"), PlanRequest(1.0)
        )


PIVOT = [
    # Metabase's pivot table, as it sends it.
    'SELECT "source"."code" AS "code", "source"."pivot-grouping" AS "pivot-grouping", '
    'COUNT(*) AS "count" FROM (SELECT "notes"."code" AS "code", ABS(0) AS "pivot-grouping" '
    'FROM "notes" WHERE "notes"."code" IS NOT NULL) AS "source" '
    'GROUP BY "source"."code", "source"."pivot-grouping" ORDER BY 1, 2',
    'SELECT code, ABS(0) AS "pivot-grouping", COUNT(*) FROM notes WHERE code IS NOT NULL '
    "GROUP BY code, ABS(0) ORDER BY 1",
    "SELECT code, COUNT(*) FROM notes WHERE code IS NOT NULL GROUP BY code, abs(-3) + 1",
]


@pytest.mark.parametrize("sql", PIVOT)
def test_a_constant_key_is_one_public_group(sql: str, notes: Engines) -> None:
    """Each code (a public domain: δ = 0) with its count, the constant computed after the
    release; the constant is evaluated before the charge."""
    on_duck, on_pg = notes.plans(sql, delta=0.0)
    assert [name for name, _ in on_duck.released_columns] == ["k0", "a0"]
    assert any("ABS(" in c.written for c in on_duck.constants)
    released, _ = notes.released(sql, delta=0.0)
    native = notes.native(sql)
    assert sorted(released, key=repr) == sorted(((r[0], r[-1]) for r in native), key=repr)
    if "pivot-grouping" in sql:
        assert {r[1] for r in native} == {0}
        assert '(ABS(0)) AS "pivot-grouping"' in on_pg.post_sql or (
            'ABS(0) AS "pivot-grouping"' in on_pg.post_sql
        )


def test_a_constant_key_alone_is_the_total() -> None:
    made = plan(
        "SELECT ABS(0) AS g, COUNT(*) FROM notes GROUP BY 1",
        notes_catalog("main"),
        PlanRequest(1.0),
    )
    assert [name for name, _ in made.released_columns] == ["a0"]
    assert made.keys == ()
