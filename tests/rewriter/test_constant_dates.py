"""Date and timestamp literals with days or an interval added (rewriter.passes.current_time
.constant_dates): a BI tool's ``visit_date >= DATE '2024-01-31' + INTERVAL '1 month'``,
computed as PostgreSQL computes it and compared with the date column as a literal, on both
engines. They were refused (a date compared with a timestamp)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.driver_sql import Engines, catalog, engines


@pytest.fixture(scope="module")
def notes(pg_dsn: str) -> Iterator[Engines]:
    with engines(pg_dsn) as found:
        yield found


PREDICATES = [
    "day >= DATE '2024-01-01' + INTERVAL '1 month'",
    "day >= DATE '2024-01-31' + INTERVAL '1 month'",  # the last day of February
    "day < DATE '2024-03-01' - INTERVAL '36 hours'",
    "day > DATE '2024-01-02' - INTERVAL '1 day 12 hours'",
    "day >= (DATE '2024-01-01' + 14)",
    "day BETWEEN DATE '2024-01-01' AND DATE '2024-01-01' + INTERVAL '1 month' - INTERVAL '1 day'",
    "day >= TIMESTAMP '2024-01-30 12:00' + INTERVAL '1 hour'",
    "day = TIMESTAMP '2024-01-31 00:00:00' - INTERVAL '2 years' + INTERVAL '2 years'",
    "day <> '2024-02-28'::date + INTERVAL '1 day'",
    "day IN (DATE '2024-01-01' + 1, DATE '2024-02-01' - 2)",
    "day >= date_trunc('month', DATE '2024-01-15')",  # constant_truncations
]


@pytest.mark.parametrize("predicate", PREDICATES)
def test_where_is_what_postgresql_computes(predicate: str, notes: Engines) -> None:
    sql = f"SELECT COUNT(*) FROM notes WHERE {predicate}"
    on_duck, on_pg = notes.released(sql, delta=0.0)
    assert on_duck == on_pg == notes.native(sql)


def test_the_value_is_a_literal_in_the_query() -> None:
    made = plan(
        "SELECT COUNT(*) FROM notes WHERE day >= DATE '2024-01-31' + INTERVAL '1 month'",
        catalog("main"),
        PlanRequest(1.0),
    )
    assert "\"day\" >= CAST('2024-02-29' AS DATE)" in made.sql
    assert made.now is None  # no clock read: the same plan on any day


@pytest.mark.parametrize(
    ("predicate", "words"),
    [
        # Not computed here, and still refused as before.
        ("day >= DATE '2024-01-01' + INTERVAL '1.5 day'", "compares values of different types"),
        ("date_trunc('month', day) >= DATE '2024-01-15'", "date_trunc of a date"),
        ("day >= DATE '9999-12-31' + INTERVAL '1 day'", "compares values of different types"),
    ],
)
def test_what_is_not_computed_is_left_as_written(predicate: str, words: str) -> None:
    with pytest.raises(Rejected, match=words):
        plan(f"SELECT COUNT(*) FROM notes WHERE {predicate}", catalog("main"), PlanRequest(1.0))


def test_the_same_query_as_the_date_written_out() -> None:
    """The same plan, so the same cached answer, as the date computed by hand."""
    computed = plan(
        "SELECT COUNT(*) FROM notes WHERE day < DATE '2024-03-01' - INTERVAL '36 hours'",
        catalog("main"),
        PlanRequest(1.0),
    )
    written = plan(
        "SELECT COUNT(*) FROM notes WHERE day < DATE '2024-02-29'",
        catalog("main"),
        PlanRequest(1.0),
    )
    assert computed == written
