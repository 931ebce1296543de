"""Window functions over the released rows (rewriter.passes.post_windows): post-processing
of noisy values, free. ``SUM(COUNT(*)) OVER ()`` releases COUNT(*) as any query does and
sums the released counts; the bounded query and the measurements are those of the query
without the window. Forms PostgreSQL refuses are refused with its SQLSTATE."""

from __future__ import annotations

import psycopg
import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.post import post_processed
from tests.rewriter.tables import catalog

CATALOG = catalog("main")
REQUEST = PlanRequest(1.0, delta=1e-6)


@pytest.mark.parametrize(
    ("windowed", "plain"),
    [
        (
            "SELECT department, COUNT(*) AS n, 100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS pct "
            "FROM visits GROUP BY department ORDER BY pct DESC",
            "SELECT department, COUNT(*) AS n FROM visits GROUP BY department",
        ),
        (
            "SELECT department, RANK() OVER (ORDER BY SUM(cost) DESC) FROM visits "
            "GROUP BY department",
            "SELECT department, SUM(cost) FROM visits GROUP BY department",
        ),
        (
            "SELECT stay, SUM(COUNT(*)) OVER (ORDER BY stay) FROM visits GROUP BY stay",
            "SELECT stay, COUNT(*) FROM visits GROUP BY stay",
        ),
    ],
)
def test_a_window_adds_nothing_to_the_measured_query(windowed: str, plain: str) -> None:
    made, without = plan(windowed, CATALOG, REQUEST), plan(plain, CATALOG, REQUEST)
    assert made.sql == without.sql
    assert made.measurements == without.measurements
    assert made.selection == without.selection
    assert made.privacy_loss() == without.privacy_loss()
    assert " OVER (" in made.post_sql


def test_shares_ranks_running_totals_and_differences_of_released_values() -> None:
    made = plan(
        "SELECT department AS d, COUNT(*) AS n, 100.0 * COUNT(*) / SUM(COUNT(*)) OVER () AS pct, "
        "RANK() OVER (ORDER BY COUNT(*) DESC) AS r, "
        "SUM(COUNT(*)) OVER (ORDER BY department ROWS BETWEEN UNBOUNDED PRECEDING "
        "AND CURRENT ROW) AS running, "
        "COUNT(*) - LAG(COUNT(*), 1, 0) OVER (ORDER BY department) AS change, "
        "COUNT(*) OVER () AS groups "
        "FROM visits GROUP BY department ORDER BY d",
        CATALOG,
        REQUEST,
    )
    rows = post_processed(made, [("A", 50), ("B", 30), ("C", 20)])
    assert rows == [
        ("A", 50, 50.0, 1, 50, 50, 3),
        ("B", 30, 30.0, 2, 80, -20, 3),
        ("C", 20, 20.0, 3, 100, -10, 3),
    ]


#: Window expressions over a group's COUNT(*), compared with PostgreSQL on the same groups.
WINDOWS = [
    "FIRST_VALUE(stay) OVER (ORDER BY stay NULLS FIRST)",
    "FIRST_VALUE(stay) OVER (ORDER BY stay DESC NULLS LAST)",
    "RANK() OVER (ORDER BY stay DESC)",
    "RANK() OVER (ORDER BY stay)",
    "DENSE_RANK() OVER (ORDER BY COUNT(*) DESC, stay NULLS FIRST)",
    "SUM(COUNT(*)) OVER (ORDER BY stay NULLS FIRST ROWS BETWEEN UNBOUNDED PRECEDING AND "
    "CURRENT ROW)",
    "LAG(COUNT(*), 2, -1) OVER (ORDER BY stay)",
    "LEAD(stay) OVER (ORDER BY COUNT(*), stay)",
    "NTILE(2) OVER (ORDER BY stay DESC NULLS LAST)",
    "ROW_NUMBER() OVER (PARTITION BY stay IS NULL ORDER BY COUNT(*) DESC)",
    "COUNT(*) - MIN(COUNT(*)) OVER ()",
    "NTH_VALUE(COUNT(*), 2) OVER (ORDER BY stay ROWS BETWEEN UNBOUNDED PRECEDING AND "
    "UNBOUNDED FOLLOWING)",
]
GROUPS = [(None, 5), (1, 3), (2, 7), (3, 3), (7, 1)]


@pytest.mark.postgres
def test_windows_over_released_groups_answer_as_postgresql(pg_dsn: str) -> None:
    """Each window, run by post-processing over released groups (stay, COUNT(*)), equals
    PostgreSQL's over the same groups, NULL key included (a reviewer found NULLS FIRST
    dropped from a window's sort item)."""
    with psycopg.connect(pg_dsn, autocommit=True) as pg:
        pg.execute("CREATE TEMP TABLE g (stay bigint, n bigint)")
        with pg.cursor() as cursor:
            cursor.executemany("INSERT INTO g VALUES (%s, %s)", GROUPS)
        for window in WINDOWS:
            made = plan(
                f"SELECT stay, COUNT(*) AS n, {window} AS w FROM visits GROUP BY stay",
                CATALOG,
                REQUEST,
            )
            ours = sorted(post_processed(made, GROUPS), key=repr)
            expected = pg.execute(
                f"SELECT stay, n, {window.replace('COUNT(*)', 'n')} AS w FROM g".encode()
            ).fetchall()
            assert ours == sorted(expected, key=repr), window


def test_a_window_in_order_by_orders_the_released_rows() -> None:
    made = plan(
        "SELECT department, COUNT(*) FROM visits GROUP BY department "
        "ORDER BY ROW_NUMBER() OVER (ORDER BY COUNT(*) DESC)",
        CATALOG,
        REQUEST,
    )
    assert post_processed(made, [("A", 5), ("B", 9), ("C", 7)]) == [("B", 9), ("C", 7), ("A", 5)]


def test_a_share_of_a_zero_total_is_null_not_an_error() -> None:
    made = plan(
        "SELECT department, COUNT(*) / SUM(COUNT(*)) OVER () FROM visits GROUP BY department",
        CATALOG,
        REQUEST,
    )
    assert post_processed(made, [("A", 3), ("B", -3)]) == [("A", None), ("B", None)]


@pytest.mark.parametrize(
    ("sql", "sqlstate", "words"),
    [
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department "
            "HAVING RANK() OVER (ORDER BY COUNT(*)) < 2",
            "42P20",
            "window functions are not allowed in HAVING",
        ),
        (
            "SELECT department, SUM(COUNT(*) OVER ()) OVER () FROM visits GROUP BY department",
            "42P20",
            "window function calls cannot be nested",
        ),
        (
            "SELECT department, SUM(COUNT(*)) OVER w FROM visits GROUP BY department",
            "0A000",
            "a named window (OVER w) is not supported",
        ),
        (
            "SELECT department, string_agg(department, ',') OVER () FROM visits "
            "GROUP BY department",
            "0A000",
            "is not supported as a window function",
        ),
        (
            "SELECT department, SUM(COUNT(*)) OVER (ORDER BY department ROWS BETWEEN 1 "
            "PRECEDING AND CURRENT ROW EXCLUDE CURRENT ROW) FROM visits GROUP BY department",
            "0A000",
            "EXCLUDE in a window frame is not supported",
        ),
        (
            "SELECT department, SUM(cost) OVER () FROM visits GROUP BY department",
            "42803",
            'column "cost" must appear in the GROUP BY clause',
        ),
        (
            "SELECT department, ROW_NUMBER() OVER (PARTITION BY stay) , COUNT(*) FROM visits "
            "GROUP BY department",
            "42803",
            'column "stay" must appear in the GROUP BY clause',
        ),
        (
            "SELECT department, SUM(SUM(cost) OVER ()) FROM visits GROUP BY department",
            "42803",
            "aggregate function calls cannot contain window function calls",
        ),
        (
            "SELECT COUNT(*) FROM visits WHERE ROW_NUMBER() OVER () > 1",
            "42P20",
            "window functions are not allowed in WHERE",
        ),
        (
            "SELECT COUNT(*) FILTER (WHERE RANK() OVER () = 1) FROM visits",
            "42P20",
            "window functions are not allowed in FILTER",
        ),
        (
            "SELECT department, COUNT(*) OVER () FROM visits GROUP BY department",
            "0A000",
            "the query has no aggregate",
        ),
        (
            "SELECT COUNT(*) OVER () FROM visits",
            "0A000",
            "its window would run over individual rows",
        ),
        (
            "SELECT department, SUM(COUNT(*)) OVER (PARTITION BY ROW_NUMBER() OVER ()) "
            "FROM visits GROUP BY department",
            "42P20",
            "window functions are not allowed in window definitions",
        ),
        (
            "SELECT department, SUM(COUNT(*)) OVER (ORDER BY department ROWS BETWEEN "
            "(COUNT(*) OVER ()) PRECEDING AND CURRENT ROW) FROM visits GROUP BY department",
            "22023",
            "a window frame offset must be a constant number",
        ),
        (
            "SELECT stay, SUM(COUNT(*)) OVER (ORDER BY stay ROWS BETWEEN stay PRECEDING "
            "AND CURRENT ROW) FROM visits GROUP BY stay",
            "22023",
            "a window frame offset must be a constant number",
        ),
        (
            "SELECT department, SUM(COUNT(*)) OVER (ORDER BY department ROWS 1.5 PRECEDING) "
            "FROM visits GROUP BY department",
            "22023",
            "a window frame offset must be a constant number",
        ),
        (
            "SELECT department, NTILE(COUNT(*)) OVER () FROM visits GROUP BY department",
            "22023",
            "ntile(n) needs a constant whole number n of 1 or more",
        ),
        (
            "SELECT department, NTH_VALUE(COUNT(*), 0) OVER () FROM visits GROUP BY department",
            "22023",
            "nth_value(x, n) needs a constant whole number",
        ),
        (
            "SELECT department, LAG(COUNT(*), COUNT(*)) OVER () FROM visits GROUP BY department",
            "22023",
            "lag(x[, offset[, default]]) needs a constant whole-number offset",
        ),
        (
            "SELECT department, MIN(COUNT(*), 2) OVER () FROM visits GROUP BY department",
            "42883",
            "takes one argument as a window function",
        ),
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department "
            "ORDER BY SUM(COUNT(*)) OVER (PARTITION BY cost)",
            "42803",
            'column "cost" must appear',
        ),
    ],
)
def test_forms_postgresql_or_dpproxy_refuse(sql: str, sqlstate: str, words: str) -> None:
    with pytest.raises(Rejected) as refused:
        plan(sql, CATALOG, REQUEST)
    assert refused.value.sqlstate == sqlstate
    assert words in refused.value.message
