"""Refusals name what the analyst wrote, not sqlglot's classes (``GROUPINGSETS``,
``group_concat()``, ``PARAMETER``, ``j_s_o_n_array_agg``) nor what a pass computed in
its place (``CAST('2026-11-24' AS DATE)`` for CURRENT_DATE)."""

from __future__ import annotations

import datetime as dt

import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter import test_date_cast_keys
from tests.rewriter.tables import catalog

CATALOG = catalog("main")
WRAPPED = "(SELECT department, COUNT(*) AS n FROM visits GROUP BY department) s"
NOW = dt.datetime(2026, 11, 24, 12, tzinfo=dt.UTC)


def _refused(sql: str, *, delta: float = 0.0) -> Rejected:
    with pytest.raises(Rejected) as refused:
        plan(sql, CATALOG, PlanRequest(1.0, delta=delta))
    return refused.value


@pytest.mark.parametrize(
    ("group", "written"),
    [
        ("GROUPING SETS ((department), ())", "GROUPING SETS"),
        ("ROLLUP (department)", "ROLLUP"),
        ("CUBE (department)", "CUBE"),
        ("department, ROLLUP (stay)", "ROLLUP"),
    ],
)
def test_grouping_sets_are_named_as_written(group: str, written: str) -> None:
    refused = _refused(f"SELECT department, COUNT(*) FROM visits GROUP BY {group}")
    assert refused.message == f"{written} is not supported in GROUP BY"
    assert "GROUPINGSETS" not in str(refused.hint)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        ("string_agg(department, ',')", "string_agg"),
        ("json_agg(department)", "json_agg"),
        ("STRING_AGG(department, ', ')", "string_agg"),
    ],
)
def test_aggregates_are_named_as_written(call: str, name: str) -> None:
    refused = _refused(f"SELECT {call} FROM visits")
    assert refused.message == f"the aggregate {name}() is not supported yet"


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) + $1 FROM visits",
        "SELECT COUNT(*) FROM visits HAVING COUNT(*) > $1",
        "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY $1",
        f"SELECT n + $1 FROM {WRAPPED}",
        f"SELECT n FROM {WRAPPED} WHERE n > $1",
    ],
)
def test_a_parameter_without_a_value_is_refused_as_postgresql_refuses_it(sql: str) -> None:
    """PostgreSQL's words for a $1 sent by the simple query protocol (was: PARAMETER is
    not allowed in the select list)."""
    refused = _refused(sql)
    assert (refused.sqlstate, refused.message) == ("42P02", "there is no parameter $1")


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT SUM(ceiling(cost, 2)) FROM visits",
            "ceiling() with 2 arguments in SUM: only ceiling(x) is supported",
        ),
        ("SELECT COUNT(*) FROM visits WHERE cost[1] > 3", "cost[1] is not allowed in WHERE"),
    ],
)
def test_other_forms_are_quoted(sql: str, message: str) -> None:
    assert _refused(sql).message == message


def test_current_date_is_quoted_not_the_date_it_stands_for() -> None:
    with pytest.raises(Rejected) as refused:
        plan(
            "SELECT AVG(CURRENT_DATE - d) FROM calendar",
            test_date_cast_keys.catalog("main"),
            PlanRequest(1.0, now=NOW),
        )
    assert refused.value.message == "cannot bound CURRENT_DATE - d inside an aggregate"
