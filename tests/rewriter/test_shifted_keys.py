"""GROUP BY a date or timestamp shifted by a constant interval (rewriter.passes.shifted_keys)
at the edges of the years 1 to 9999: a shifted value outside them is NULL on both engines,
as every date key (PostgreSQL would release 0001-12-31 BC, which psycopg cannot fetch), and
nothing fails on the rows beyond them (BC, the year 10000, ±infinity).

The calendar of test_to_char_keys: every day from 1999-12-20 to 2026-01-10, plus
0001-01-01 and 9999-12-31 23:59:59.999999, one person each, and the rows outside.
"""

from __future__ import annotations

import duckdb
import psycopg
import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.test_to_char_keys import OUTSIDE, catalog, duck, postgres, rows
from tests.rewriter.zoned_events import catalog as zoned_catalog

__all__ = ["duck", "postgres"]  # the fixtures, used by name

#: (key, how many of the two rows at the edges it shifts beyond them)
SHIFTS = [
    ("d - INTERVAL '1 day'", 1),
    ("d + INTERVAL '1 day'", 1),
    ("ts + INTERVAL '1 second'", 1),
    ("ts - INTERVAL '1 hour'", 1),
    ("d + INTERVAL '0 days'", 0),
    # 9999-12-31 + 1 day is beyond; 0001-01-01 is a Monday: its Sunday is 0001-12-31 BC.
    ("date_trunc('week', d + INTERVAL '1 day') + INTERVAL '-1 day'", 2),
]


@pytest.mark.parametrize(("key", "beyond"), SHIFTS, ids=[k for k, _ in SHIFTS])
def test_a_shift_beyond_the_years_1_to_9999_is_null_on_both_engines(
    key: str,
    beyond: int,
    duck: duckdb.DuckDBPyConnection,
    postgres: tuple[psycopg.Connection[tuple[object, ...]], str],
) -> None:
    conn, schema = postgres
    sql = f"SELECT {key} AS k, COUNT(*) FROM calendar GROUP BY 1"
    answers: dict[str, dict[object, object]] = {}
    for dialect, engine in (("duckdb", duck), ("postgres", conn)):
        made = plan(
            sql,
            catalog("main" if dialect == "duckdb" else schema),
            PlanRequest(1.0, dialect, delta=1e-6),
        )
        run = made.sql.replace(f'"{schema}"."calendar"', f'"{schema}"."calendar_all"')
        answers[dialect] = {row[0]: row[1] for row in engine.execute(run).fetchall()}
    assert answers["duckdb"] == answers["postgres"]
    found = answers["duckdb"]
    # The rows outside, and the rows at the edges shifted beyond them, are NULL.
    assert found.pop(None) == len(OUTSIDE) + beyond
    assert sum(n for n in found.values() if isinstance(n, int)) == len(rows()) - beyond


@pytest.mark.parametrize(
    "key", ["ts + INTERVAL '1 day'", "date_trunc('week', ts + INTERVAL '1 day')"]
)
def test_a_timestamp_with_time_zone_shifted_is_refused_saying_what_works(key: str) -> None:
    """PostgreSQL adds a day to a timestamptz in the session's zone (23 or 25 hours where
    the clocks change): refused, with its local time as the way out."""
    with pytest.raises(Rejected, match="time zone shifted") as caught:
        plan(
            f"SELECT COUNT(*) FROM events GROUP BY {key}",
            zoned_catalog("main"),
            PlanRequest(1.0, delta=1e-6),
        )
    assert caught.value.hint is not None and "CAST(ts AS TIMESTAMP)" in caught.value.hint
