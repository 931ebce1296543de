"""Casts of released values to numeric compute what PostgreSQL computes (post_numeric):
DuckDB's NUMERIC is DECIMAL(18, 3), so ``round(AVG(x)::numeric, 6)`` had 3 decimals."""

from __future__ import annotations

import re
from decimal import Decimal

import psycopg
import pytest

from rewriter import PlanRequest, plan
from rewriter.errors import Rejected
from tests.rewriter.post import post_processed
from tests.rewriter.tables import catalog

CATALOG = catalog("main")
AVERAGES = [1.005, -1.005, 2.675, 0.125, 2386.8669993759113, 1234567.891, 0.12345678, 1e-7]


def _one(sql: str, *released: object) -> tuple[object, ...]:
    """The post-processing of ``sql`` over one group whose aggregates are ``released``."""
    (row,) = post_processed(plan(sql, CATALOG, PlanRequest(1.0)), [released])
    return row


@pytest.mark.postgres
@pytest.mark.parametrize("average", AVERAGES)
def test_rounding_a_numeric_cast_is_postgres_s(pg_dsn: str, average: float) -> None:
    """round(x::numeric, d) rounds the decimal digits, halves away from zero:
    round(1.005::numeric, 2) is 1.01 (the double is 1.00499999…)."""
    digits = range(7)
    sql = ", ".join(f"round(AVG(cost)::numeric, {d})" for d in digits)
    ours = _one(f"SELECT {sql}, AVG(cost)::numeric(12, 3) FROM visits", average)
    with psycopg.connect(pg_dsn) as conn:
        theirs = conn.execute(
            "SELECT " + ", ".join(f"round(%(v)s::float8::numeric, {d})" for d in digits) + ", "
            "%(v)s::float8::numeric(12, 3)",
            {"v": average},
        ).fetchone()
    assert theirs is not None
    assert ours == tuple(theirs)


NESTED = [
    "AVG(cost)::numeric(10, 2)::numeric",
    "round(round(AVG(cost)::numeric, 6)::numeric, 5)",
    "(AVG(cost)::numeric + 1)::numeric(20, 6)",
    "round(AVG(cost)::numeric(20, 10), 3)",
]


@pytest.mark.postgres
@pytest.mark.parametrize("average", [1.005, 0.1234567, 0.123456, -3e-05, 0.00004999])
def test_casts_inside_casts_and_small_scales(pg_dsn: str, average: float) -> None:
    """A numeric cast inside another is read from its digits too (a second reader found the
    inner one left as DuckDB's DECIMAL(18, 3)); numeric(4, 4) of -3e-05 (DuckDB writes it
    with an exponent) is 0.0000, not an error."""
    forms = NESTED + (["AVG(cost)::numeric(4, 4)"] if abs(average) < 0.1 else [])
    ours = _one("SELECT " + ", ".join(forms) + " FROM visits", average)
    with psycopg.connect(pg_dsn) as conn:
        theirs = conn.execute(
            "SELECT " + ", ".join(n.replace("AVG(cost)", "%(v)s::float8") for n in forms),
            {"v": average},
        ).fetchone()
    assert ours == theirs


@pytest.mark.postgres
def test_integers_and_large_values(pg_dsn: str) -> None:
    ours = _one(
        "SELECT COUNT(*)::numeric, (COUNT(*) * 100000000000000000000)::numeric, "
        "SUM(stay)::decimal(20), (-COUNT(*))::numeric FROM visits",
        45256,
        45256,
    )
    with psycopg.connect(pg_dsn) as conn:
        theirs = conn.execute(
            "SELECT 45256::numeric, (45256 * 100000000000000000000)::numeric, "
            "45256::decimal(20), (-45256)::numeric"
        ).fetchone()
    assert ours == theirs
    assert str(ours[0]) == "45256"  # an integer keeps no decimals


def test_without_a_precision_twelve_decimals_are_kept() -> None:
    (kept,) = _one("SELECT AVG(cost)::numeric FROM visits", 2386.8669993759113)
    assert kept == Decimal("2386.866999375911")


def test_a_value_beyond_the_precision_fails_after_the_charge_as_on_postgres() -> None:
    """numeric(5, 2) of 1234567.891: PostgreSQL fails too (numeric field overflow); the
    proxy reports it as a post-processing failure of a noisy value (proxy.postprocess)."""
    made = plan("SELECT AVG(cost)::numeric(5, 2) FROM visits", CATALOG, PlanRequest(1.0))
    with pytest.raises(Exception, match="(?i)conversion|out of range|overflow"):
        post_processed(made, [(1234567.891,)])


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT AVG(cost)::varchar(3) FROM visits", "a cast to VARCHAR(3) (a type with"),
        ("SELECT COUNT(*)::char(2) FROM visits", "a cast to CHAR(2) is not supported"),
        ("SELECT AVG(cost)::numeric(40, 2) FROM visits", "precision p from 1 to 38"),
        ("SELECT AVG(cost)::numeric(4, 6) FROM visits", "a scale s from 0 to p"),
        ("SELECT COUNT(*) FROM visits ORDER BY AVG(cost)::numeric(0)", "precision p from 1"),
    ],
)
def test_other_precisions_are_refused_before_the_charge(sql: str, message: str) -> None:
    with pytest.raises(Rejected, match=re.escape(message)):
        plan(sql, CATALOG, PlanRequest(1.0))
