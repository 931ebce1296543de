"""CURRENT_DATE, now() … as constants (rewriter.passes.current_time), and dates compared
with timestamp literals (value_types.dated): each computed as PostgreSQL computes it."""

from __future__ import annotations

import datetime as dt
import itertools
from collections.abc import Callable

import psycopg
import pytest
import sqlglot
from sqlglot import exp

from rewriter import PlanRequest, plan
from rewriter.errors import Rejected
from rewriter.passes.current_time import current_time
from rewriter.passes.value_types.dated import dated
from rewriter.passes.value_types.kinds import DATE, TIME
from tests.rewriter.tables import catalog

#: Month ends, a leap day, both sides of midnight, and the hours the clocks change in 2024.
INSTANTS = [
    dt.datetime(2024, 1, 31, 12, 0, 0, 123456, tzinfo=dt.UTC),
    dt.datetime(2024, 2, 29, 23, 59, 59, tzinfo=dt.UTC),
    dt.datetime(2024, 3, 10, 7, 30, tzinfo=dt.UTC),  # New York: 02:30 does not exist
    dt.datetime(2024, 3, 31, 0, 30, tzinfo=dt.UTC),  # Paris: just before the change
    dt.datetime(2024, 11, 3, 5, 30, tzinfo=dt.UTC),  # New York: 01:30 happens twice
    dt.datetime(2024, 9, 8, 3, 30, tzinfo=dt.UTC),  # Santiago: midnight is skipped
    dt.datetime(2026, 12, 31, 22, 0, tzinfo=dt.UTC),
    # A second reader's: a month, then a day, over a change of the clocks (Santiago, New
    # York), and an hour truncated within the hour New York repeats.
    dt.datetime(2024, 8, 8, 4, 30, tzinfo=dt.UTC),
    dt.datetime(2024, 2, 10, 7, 30, tzinfo=dt.UTC),
    dt.datetime(2024, 11, 3, 5, 10, tzinfo=dt.UTC),
]
ZONES = ["UTC", "Asia/Tokyo", "America/New_York", "Europe/Paris", "America/Santiago"]
EXPRESSIONS = [
    "CURRENT_DATE",
    "CURRENT_DATE - 30",
    "30 + CURRENT_DATE",
    "LOCALTIMESTAMP",
    "CURRENT_DATE - INTERVAL '1 month'",
    "CURRENT_DATE + INTERVAL '1 year 2 months 3 days'",
    "LOCALTIMESTAMP - INTERVAL '1 month 2 days 3 hours'",
    "LOCALTIMESTAMP + INTERVAL '90 minutes'",
    "CAST((CAST(now() AS timestamp) + (INTERVAL '-30 day')) AS date)",
    "CAST(CAST(now() AS timestamp) AS date)",
    "CAST(now() AS date)",
    "CAST(now() - INTERVAL '1 day' AS timestamp)",
    "CAST(now() + INTERVAL '1 month' AS date)",
    "CAST(CURRENT_TIMESTAMP - INTERVAL '2 hours' AS timestamp)",
    "CAST(transaction_timestamp() AS date)",
    "date_trunc('month', CURRENT_DATE)::date",
    "date_trunc('quarter', CURRENT_DATE - INTERVAL '3 months')::date",
    "date_trunc('week', LOCALTIMESTAMP)",
    "date_trunc('hour', now())::timestamp",
    "date_trunc('year', CURRENT_DATE)::date - 1",
    "CAST(CAST(CURRENT_DATE AS timestamp with time zone) AS timestamp)",
    "CAST(now() + INTERVAL '1 month 1 day -1 hour' AS date)",
    "CAST(now() + INTERVAL '1 month 1 day' AS timestamp)",
    "CAST(date_trunc('hour', now()) + INTERVAL '1 hour' AS timestamp)",
    "CAST(date_trunc('minute', now()) - INTERVAL '1 day 30 minutes' AS timestamp)",
    "CURRENT_DATE - INTERVAL '1 YEAR 2 MONS 3 WEEKS'",
    "LOCALTIMESTAMP + INTERVAL '2' HOUR",
]


def _folded(expression: str, now: dt.datetime, zone: str) -> object:
    tree = sqlglot.parse_one(f"SELECT {expression}", read="postgres")
    assert current_time(tree, now, zone)
    (item,) = tree.expressions
    assert isinstance(item, exp.Cast) and isinstance(item.this, exp.Literal)
    text = item.this.name
    if item.to.is_type(exp.DataType.Type.DATE):
        return dt.date.fromisoformat(text)
    return dt.datetime.fromisoformat(text)


@pytest.mark.postgres
@pytest.mark.parametrize("zone", ZONES)
def test_the_same_values_as_postgres(pg_dsn: str, zone: str) -> None:
    """PostgreSQL computes each expression with its clock replaced by the instant."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"SET TimeZone = '{zone}'")
        for now, expression in itertools.product(INSTANTS, EXPRESSIONS):
            instant = f"'{now.isoformat()}'::timestamptz"
            theirs_sql = (
                expression.replace("CURRENT_DATE", f"CAST({instant} AS date)")
                .replace("LOCALTIMESTAMP", f"CAST({instant} AS timestamp)")
                .replace("now()", instant)
                .replace("CURRENT_TIMESTAMP", instant)
                .replace("transaction_timestamp()", instant)
            )
            row = conn.execute(f"SELECT {theirs_sql}").fetchone()
            assert row is not None
            assert _folded(expression, now, zone) == row[0], (expression, now, zone)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("now()", "is a timestamp with time zone"),
        ("date_trunc('month', CURRENT_DATE)", "is a timestamp with time zone"),
        ("CURRENT_TIME", "is supported as CURRENT_DATE"),
        ("LOCALTIME", "is supported as CURRENT_DATE"),
        ("CURRENT_TIMESTAMP(0)", "is supported as CURRENT_DATE"),
        ("clock_timestamp() > now()", "is a timestamp with time zone"),
        ("date_trunc('day', now(), 'Asia/Tokyo')::date", "is a timestamp with time zone"),
    ],
)
def test_what_is_not_computed_is_refused_before_the_charge(expression: str, message: str) -> None:
    tree = sqlglot.parse_one(f"SELECT {expression}", read="postgres")
    with pytest.raises(Rejected, match=message):
        current_time(tree, INSTANTS[0], "UTC")


@pytest.mark.parametrize(
    ("expression", "left"),
    [
        ("CURRENT_DATE - INTERVAL '1:00'", "CAST('2024-01-31' AS DATE) - INTERVAL '1:00'"),
        ("LOCALTIMESTAMP + 1", "CAST('2024-01-31 12:00:00.123456' AS TIMESTAMP) + 1"),
        (
            "CURRENT_DATE + INTERVAL '8000 years'",
            "CAST('2024-01-31' AS DATE) + INTERVAL '8000 YEARS'",
        ),
        # A second reader's: PostgreSQL reads these otherwise, or refuses them.
        (
            "CURRENT_DATE - INTERVAL '1' YEAR TO MONTH",
            "CAST('2024-01-31' AS DATE) - INTERVAL '1' YEAR TO MONTH",
        ),
        (
            "CURRENT_DATE - INTERVAL '1 day 1 day'",
            "CAST('2024-01-31' AS DATE) - INTERVAL '1 day 1 day'",
        ),
        ("CURRENT_DATE + 3000000", "CAST('2024-01-31' AS DATE) + 3000000"),
    ],
)
def test_what_is_not_computed_here_is_left_to_the_other_passes(expression: str, left: str) -> None:
    """The clock is replaced by its value, the rest kept as written: the passes after this
    one check it as for a literal (the constants pass computes it before the charge)."""
    tree = sqlglot.parse_one(f"SELECT {expression}", read="postgres")
    assert current_time(tree, INSTANTS[0], "UTC")
    assert tree.expressions[0].sql(dialect="postgres") == left


def test_without_a_clock_or_in_a_zone_read_otherwise_it_is_refused() -> None:
    tree = sqlglot.parse_one("SELECT CURRENT_DATE", read="postgres")
    with pytest.raises(Rejected, match="reads the current date"):
        current_time(tree, None, "UTC")
    with pytest.raises(Rejected, match="IANA"):
        current_time(tree, INSTANTS[0], "UTC+3")


def test_a_plan_keeps_the_time_it_read() -> None:
    """Plan.now: the proxy does not keep a plan that read the clock (proxy.pipeline)."""
    request = PlanRequest(1.0, now=INSTANTS[0], time_zone="Asia/Tokyo")
    clocked = plan(
        "SELECT COUNT(*) FROM visits WHERE stay > 0 OR CURRENT_DATE > DATE '2024-01-01'",
        catalog("main"),
        request,
    )
    assert clocked.now == INSTANTS[0]
    assert "CAST('2024-01-31' AS DATE)" in clocked.sql  # 21:00 in Tokyo
    assert plan("SELECT COUNT(*) FROM visits", catalog("main"), request).now is None


MOMENTS = ["2024-03-01 00:00:00", "2024-03-01 10:00:00", "2024-03-01 23:59:59.999999"]
DATES = [dt.date(2024, 2, 29), dt.date(2024, 3, 1), dt.date(2024, 3, 2)]
OPERATORS = [">=", ">", "<=", "<", "=", "<>"]


@pytest.mark.postgres
def test_a_date_meets_a_timestamp_literal_as_postgres_compares_them(pg_dsn: str) -> None:
    """d op TIMESTAMP '…' (either side, BETWEEN too) rewritten as d op DATE '…' gives what
    PostgreSQL gives, for dates before, on and after the literal's day; = and <> of a time
    other than midnight stay refused."""
    forms = [f"d {op} TIMESTAMP '{m}'" for op, m in itertools.product(OPERATORS, MOMENTS)]
    forms += [f"TIMESTAMP '{m}' {op} d" for op, m in itertools.product(OPERATORS, MOMENTS)]
    forms += [f"d BETWEEN TIMESTAMP '{a}' AND TIMESTAMP '{b}'" for a in MOMENTS for b in MOMENTS]
    with psycopg.connect(pg_dsn) as conn:
        for form in forms:
            node = sqlglot.parse_one(form, read="postgres")
            operands = (
                [node.this, node.args["low"], node.args["high"]]
                if isinstance(node, exp.Between)
                else [node.this, node.expression]
            )
            each = [DATE if isinstance(o, exp.Column) else TIME for o in operands]
            if not dated(node, operands, each):
                equality = any(f" {op} " in form for op in ("=", "<>"))
                assert equality and "00:00:00'" not in form, form
                continue
            assert "TIMESTAMP" not in node.sql(dialect="postgres"), form
            for day in DATES:
                ours, theirs = (
                    tree.transform(_on(day)).sql(dialect="postgres")
                    for tree in (node, sqlglot.parse_one(form, read="postgres"))
                )
                got = conn.execute(f"SELECT {ours}, {theirs}").fetchone()
                assert got is not None and got[0] == got[1], (form, day)


def _on(day: dt.date) -> Callable[[exp.Expr], exp.Expr]:
    """Replace the column d by the date ``day``."""

    def replace(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column):
            return exp.cast(exp.Literal.string(day.isoformat()), exp.DataType.Type.DATE)
        return node

    return replace
