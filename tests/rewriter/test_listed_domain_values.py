"""A query of GROUP BY keys with public domains alone (rewriter.domain_values): BI tools'
lists of a filter's values. Planned as the domains' cells, with nothing to run or charge
(``Plan.domain_values``, ε 0, no SQL), post-processed as any answer; refused where a join
or a WHERE about other columns would narrow PostgreSQL's answer but not the cells."""

from __future__ import annotations

import pytest

from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.noise import ZeroNoise
from tests.rewriter.post import post_processed
from tests.rewriter.tables import catalog

CATALOG = catalog("main")
DEPARTMENTS = ["A", "B", "C"]  # visits.department's declared domain in tests.rewriter.tables


def values(sql: str, request: PlanRequest | None = None) -> list[tuple[object, ...]]:
    made = plan(sql, CATALOG, request or PlanRequest(1.0))
    assert made.domain_values
    assert made.sql == "" and made.measurements == () and made.epsilon == 0
    assert made.privacy_loss() == 0 and made.privacy_loss_rho() == 0
    return post_processed(made, list(made.release([], ZeroNoise()).rows))


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT DISTINCT department FROM visits ORDER BY 1", [(d,) for d in DEPARTMENTS]),
        # Metabase's field values
        (
            'SELECT "public"."visits"."department" AS "department" FROM "public"."visits" '
            'GROUP BY "public"."visits"."department" ORDER BY "public"."visits"."department" '
            "ASC LIMIT 1000",
            [(d,) for d in DEPARTMENTS],
        ),
        ("SELECT department FROM visits GROUP BY 1 ORDER BY 1 DESC LIMIT 2", [("C",), ("B",)]),
        ("SELECT DISTINCT department FROM visits WHERE department <> 'B' ORDER BY 1",
         [("A",), ("C",)]),
        ("SELECT department FROM visits WHERE department IS NOT NULL GROUP BY 1 ORDER BY 1",
         [(d,) for d in DEPARTMENTS]),
        # Grafana's ColumnValues: a query around it
        (
            "SELECT 'department' AS col_name, \"department\"::text AS val FROM (SELECT "
            'DISTINCT "department" FROM "public"."visits" WHERE "department" IS NOT NULL '
            'ORDER BY "department" LIMIT 100) sub_0',
            [("department", d) for d in DEPARTMENTS],
        ),
        ("SELECT lower(department) AS d FROM visits GROUP BY department ORDER BY 1",
         [(d.lower(),) for d in DEPARTMENTS]),
    ],
)  # fmt: skip
def test_the_declared_values_are_listed_free(sql: str, expected: list[tuple[object, ...]]) -> None:
    assert values(sql) == expected


def test_with_delta_and_gaussian_noise_alike() -> None:
    sql = "SELECT DISTINCT department FROM visits ORDER BY 1"
    assert values(sql, PlanRequest(1.0, delta=1e-6, mechanism="gaussian")) == values(sql)


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT DISTINCT department FROM visits WHERE stay > 3",
        "SELECT DISTINCT department FROM visits WHERE department = 'A' OR stay > 3",
        "SELECT department FROM visits v JOIN patients p ON p.patient_id = v.patient_id "
        "GROUP BY department",
        "SELECT DISTINCT department FROM visits WHERE patient_id IN (SELECT patient_id FROM "
        "patients)",
    ],
)
def test_a_query_that_would_narrow_the_values_is_refused(sql: str) -> None:
    with pytest.raises(Rejected, match="GROUP BY keys all have a public domain") as refused:
        plan(sql, CATALOG, PlanRequest(1.0))
    assert "only for one table without a join" in refused.value.message


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT department, COUNT(*) FROM visits GROUP BY 1",
        "SELECT department FROM visits GROUP BY 1 HAVING COUNT(*) > 10",
    ],
)
def test_a_query_with_an_aggregate_is_charged_as_before(sql: str) -> None:
    made = plan(sql, CATALOG, PlanRequest(1.0))
    assert not made.domain_values
    assert made.sql and made.privacy_loss() > 0
