"""Which plans the SQL text alone shows to have no rows (rewriter.no_rows): only the
outermost query's LIMIT 0, a HAVING never true, and a WHERE never true where no row in
means no row out (a query around a DP query, a row-level probe)."""

from __future__ import annotations

import pytest

from rewriter import PlanRequest, Rejected, plan
from rewriter.no_rows import HAVING_NEVER_TRUE, LIMIT_ZERO, WHERE_NEVER_TRUE, ProbeColumn
from tests.rewriter.tables import catalog

INNER = "SELECT department, COUNT(*) AS n FROM visits GROUP BY department"
REQUEST = PlanRequest(1.0)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT COUNT(*) FROM visits LIMIT 0", LIMIT_ZERO),
        ("SELECT COUNT(*) FROM visits LIMIT 0::integer", LIMIT_ZERO),
        ("SELECT COUNT(*) FROM visits LIMIT CAST(0 AS BIGINT) OFFSET 3", LIMIT_ZERO),
        ("SELECT department, COUNT(*) FROM visits GROUP BY 1 LIMIT 0", LIMIT_ZERO),
        ("SELECT COUNT(*) FROM visits HAVING FALSE", HAVING_NEVER_TRUE),
        ("SELECT department, COUNT(*) FROM visits GROUP BY 1 HAVING 1 <> 1", HAVING_NEVER_TRUE),
        ("SELECT department, COUNT(*) FROM visits GROUP BY 1 HAVING NULL", HAVING_NEVER_TRUE),
        (f"SELECT * FROM ({INNER}) s LIMIT 0", LIMIT_ZERO),
        (f"SELECT * FROM ({INNER}) q WHERE 1 = 0", WHERE_NEVER_TRUE),
        (f"SELECT n FROM ({INNER}) q WHERE FALSE AND n > 3 ORDER BY n", WHERE_NEVER_TRUE),
        (f"WITH t AS ({INNER}) SELECT * FROM t WHERE NULL", WHERE_NEVER_TRUE),
        (f"SELECT * FROM (SELECT * FROM ({INNER}) a) b LIMIT 0", LIMIT_ZERO),
    ],
)
def test_dp_queries_without_rows(sql: str, reason: str) -> None:
    made = plan(sql, catalog("main"), REQUEST)
    assert made.no_rows is not None
    assert made.no_rows.reason == reason
    assert made.no_rows.columns is None


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT COUNT(*) FROM visits",
        "SELECT COUNT(*) FROM visits LIMIT 1",
        "SELECT COUNT(*) FROM visits LIMIT ALL",
        "SELECT COUNT(*) FROM visits LIMIT NULL",
        "SELECT COUNT(*) FROM visits WHERE 1 = 0",  # a noisy count of no row: one row
        "SELECT department, COUNT(*) FROM visits WHERE FALSE GROUP BY 1",  # public cells
        "SELECT COUNT(*) FROM visits HAVING COUNT(*) > 0 OR TRUE",
        "SELECT COUNT(*) FROM visits HAVING COUNT(*) < 0",  # decided by the noise
        f"SELECT COUNT(*) FROM ({INNER}) q WHERE 1 = 0",  # a count of no row: one row
        f"SELECT * FROM ({INNER}) q WHERE n = 0 AND n = 1",  # columns are never evaluated
        f"SELECT * FROM (SELECT * FROM ({INNER}) a LIMIT 0) b",  # not the outermost query
    ],
)
def test_queries_that_may_have_rows(sql: str) -> None:
    try:
        made = plan(sql, catalog("main"), REQUEST)
    except Rejected:
        return  # refused as before: it is no probe either
    assert made.no_rows is None


def test_a_row_level_probe_is_planned_as_its_count() -> None:
    made = plan(
        "SELECT v.*, cost AS c, V.Stay FROM public.visits v WHERE 1 = 0 AND cost > 3",
        catalog("main"),
        REQUEST,
    )
    assert made.no_rows is not None
    assert made.no_rows.reason == WHERE_NEVER_TRUE
    names = ["visit_id", "patient_id", "department", "cost", "stay"]
    assert made.no_rows.columns == (
        *(ProbeColumn(name, "visits", name) for name in names),
        ProbeColumn("c", "visits", "cost"),
        ProbeColumn("stay", "visits", "stay"),
    )
    assert "COUNT" in made.sql.upper()  # what would run, were it run: a count


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        ("SELECT nope FROM visits WHERE 1 = 0", 'column "nope" does not exist'),
        ("SELECT * FROM nowhere LIMIT 0", 'relation "nowhere" does not exist'),
        ("SELECT * FROM visits WHERE nope > 1 AND FALSE", 'column "nope" does not exist'),
        ("SELECT w.cost FROM visits v LIMIT 0", 'missing FROM-clause entry for table "w"'),
        ("SELECT * FROM visits LIMIT 0 OFFSET -1", "OFFSET must not be negative"),
        ("SELECT * FROM departments LIMIT 0", "only public lookup tables"),
        # not probes: refused as rows, as before
        ("SELECT * FROM visits WHERE 1 = 1", "individual rows"),
        ("SELECT * FROM visits WHERE 1 = 0 OR cost > 1", "individual rows"),
        ("SELECT cost + 1 FROM visits LIMIT 0", "must appear in the GROUP BY"),
        ("SELECT * FROM visits ORDER BY cost LIMIT 0", "individual rows"),
        ("SELECT w.* FROM visits v LIMIT 0", "individual rows"),
    ],
)
def test_a_row_level_probe_is_checked(sql: str, message: str) -> None:
    with pytest.raises(Rejected, match=message):
        plan(sql, catalog("main"), REQUEST)
