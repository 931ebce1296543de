"""SELECT DISTINCT and GROUP BY keys without aggregates (rewriter.passes.distinct).

A DISTINCT of keys alone is the GROUP BY of its select list: its groups come from the data
through partition selection, which then spends all of the query's ε (and its δ); keys of
public domains alone are refused, as they would release the domain whatever the data.
A DISTINCT over aggregates removes repeated released rows. ORDER BY follows PostgreSQL's
rule for DISTINCT (42P10)."""

from __future__ import annotations

import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.post import post_processed
from tests.rewriter.tables import SELECTION_ROWS, catalog, duckdb_with

CATALOG = catalog("main")
WITH_DELTA = PlanRequest(1.0, delta=1e-6)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT DISTINCT stay FROM visits",
        "SELECT stay FROM visits GROUP BY stay",
        "SELECT DISTINCT stay AS s FROM visits ORDER BY s",
    ],
)
def test_keys_alone_spend_the_whole_query_on_partition_selection(sql: str) -> None:
    made = plan(sql, CATALOG, WITH_DELTA)
    assert made.measurements == ()
    assert made.selection is not None
    assert made.selection.epsilon() == pytest.approx(1.0, rel=1e-9)  # one share: all of ε
    assert made.privacy_loss() <= 1.0
    assert made.privacy_loss_delta() <= 1e-6
    shared = plan("SELECT stay, COUNT(*) FROM visits GROUP BY stay", CATALOG, WITH_DELTA)
    assert shared.selection is not None
    assert made.selection.threshold < shared.selection.threshold  # more ε, a lower bar


def test_distinct_releases_the_keys_that_pass_the_threshold() -> None:
    made = plan("SELECT DISTINCT stay FROM visits", CATALOG, PlanRequest(10.0, delta=0.4))
    assert made.selection is not None and 1 < made.selection.threshold <= 3
    exact = duckdb_with(SELECTION_ROWS).execute(made.sql).fetchall()
    released = made.release(exact, ZeroNoise())
    # Stay 1 has 3 persons; stay 2 and NULL one each: only stay 1 is released.
    assert released.rows == ((1,),)
    two = plan(
        "SELECT DISTINCT lower(department) AS d, stay FROM visits ORDER BY 1",
        CATALOG,
        PlanRequest(10.0, delta=0.4),
    )
    rows = two.release(duckdb_with(SELECTION_ROWS).execute(two.sql).fetchall(), ZeroNoise()).rows
    assert rows == (("a", 1),)  # persons 1, 2 (and 4's NULL stay elsewhere); b: 3 and 4 apart
    assert post_processed(two, [("b", 1), ("a", 1)]) == [("a", 1), ("b", 1)]


def test_constants_and_repeated_items_are_not_grouped() -> None:
    """As PostgreSQL answers them: a constant is written by post-processing, an item
    repeated is one key (a reviewer's "GROUP BY 1 has no public domain" and "GROUP BY lists
    the same key twice" for queries the analyst wrote without GROUP BY)."""
    made = plan("SELECT DISTINCT 'x' AS c, stay, stay AS again FROM visits", CATALOG, WITH_DELTA)
    assert len(made.keys) == 1
    assert post_processed(made, [(1,), (2,)]) == [("x", 1, 1), ("x", 2, 2)]


def test_distinct_over_aggregates_removes_repeated_released_rows() -> None:
    made = plan(
        "SELECT DISTINCT COUNT(*) > 1 AS several FROM visits GROUP BY department ORDER BY 1",
        CATALOG,
        PlanRequest(1.0),
    )
    assert len(made.measurements) == 1 and made.selection is None
    assert made.post_sql.startswith("SELECT DISTINCT ")
    assert post_processed(made, [("A", 5), ("B", 4), ("C", 0)]) == [(False,), (True,)]
    # Without DISTINCT, every group is a row.
    plain = plan(
        "SELECT COUNT(*) > 1 AS several FROM visits GROUP BY department ORDER BY 1",
        CATALOG,
        PlanRequest(1.0),
    )
    assert post_processed(plain, [("A", 5), ("B", 4), ("C", 0)]) == [(False,), (True,), (True,)]


@pytest.mark.parametrize(
    ("sql", "order"),
    [
        ("SELECT DISTINCT stay + 1 AS s FROM visits ORDER BY stay + 1 DESC", "ORDER BY 1 DESC"),
        ("SELECT DISTINCT visits.stay FROM visits ORDER BY stay", "ORDER BY stay"),
        ("SELECT DISTINCT stay FROM visits ORDER BY visits.stay", "ORDER BY 1"),
        ("SELECT DISTINCT stay AS s FROM visits ORDER BY s", "ORDER BY s"),
        ("SELECT DISTINCT stay, department FROM visits ORDER BY 2, 1", "ORDER BY 2, 1"),
    ],
)
def test_order_by_names_the_select_list(sql: str, order: str) -> None:
    made = plan(sql, CATALOG, WITH_DELTA)
    assert order in made.post_sql


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT DISTINCT stay FROM visits ORDER BY cost",
        "SELECT DISTINCT stay FROM visits ORDER BY stay + 1",
        "SELECT DISTINCT stay FROM visits ORDER BY COUNT(*)",
        "SELECT DISTINCT COUNT(*) FROM visits GROUP BY stay ORDER BY stay",
    ],
)
def test_order_by_outside_the_select_list_is_refused_as_in_postgresql(sql: str) -> None:
    with pytest.raises(Rejected) as refused:
        plan(sql, CATALOG, WITH_DELTA)
    assert refused.value.sqlstate == "42P10"
    assert refused.value.message == (
        "for SELECT DISTINCT, ORDER BY expressions must appear in select list"
    )


@pytest.mark.parametrize(
    "sql",
    [
        # Listed free only for one table and a WHERE on the keys (test_domain_values).
        "SELECT DISTINCT department FROM visits WHERE stay > 3",
        "SELECT department FROM visits v JOIN patients p ON p.patient_id = v.patient_id "
        "GROUP BY department",
        "SELECT DISTINCT CASE WHEN stay > 3 THEN 'long' ELSE 'short' END FROM visits "
        "WHERE cost > 1",
    ],
)
def test_public_domain_keys_alone_are_refused(sql: str) -> None:
    with pytest.raises(Rejected) as refused:
        plan(sql, CATALOG, WITH_DELTA)
    assert refused.value.sqlstate == "0A000"
    assert "GROUP BY keys all have a public domain" in refused.value.message
    assert "COUNT(*)" in (refused.value.hint or "")


@pytest.mark.parametrize(
    ("sql", "words"),
    [
        ("SELECT DISTINCT stay FROM visits", "SELECT DISTINCT releases values found in the"),
        ("SELECT DISTINCT ON (stay) stay FROM visits", "DISTINCT ON is not supported"),
        ("SELECT DISTINCT 1 FROM visits", "no aggregate"),
        ("SELECT DISTINCT stay FROM visits HAVING COUNT(*) > 1", "must appear in the GROUP BY"),
        ("SELECT DISTINCT stay FROM visits HAVING stay > 3", "must appear in the GROUP BY"),
        ("SELECT DISTINCT patient_id FROM visits", "one group per person"),
        # A window over rows, not over released groups: not made a GROUP BY.
        ("SELECT DISTINCT stay, ROW_NUMBER() OVER () FROM visits", 'column "stay" must appear'),
    ],
)
def test_other_forms_are_refused(sql: str, words: str) -> None:
    delta = 0.0 if "SELECT DISTINCT releases" in words else 1e-6
    with pytest.raises(Rejected, match=words):
        plan(sql, CATALOG, PlanRequest(1.0, delta=delta))


def test_distinct_in_a_subquery_stays_refused() -> None:
    with pytest.raises(Rejected, match="DISTINCT"):
        plan(
            "SELECT COUNT(*) FROM (SELECT DISTINCT patient_id, stay FROM visits) s",
            CATALOG,
            WITH_DELTA,
        )
