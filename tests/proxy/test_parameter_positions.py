"""A parameter in GROUP BY, ORDER BY or DISTINCT ON is a constant of its type, as
PostgreSQL reads it, never a select-list position (proxy.parameter_positions): bound as a
cast, ``GROUP BY CAST(1 AS INT)``, where a bare ``1`` would name the first column. Planned
through the rewriter: an ORDER BY of a constant changes no order, a GROUP BY of one makes
one group (its value public), and a select list whose columns are not grouped is
refused with PostgreSQL's 42803."""

from __future__ import annotations

import pytest

from proxy import parameters
from proxy.protocol import values
from rewriter import PlanRequest, Rejected, plan
from tests.rewriter.tables import catalog

INT4 = values.INT4


def bind(sql: str, declared: list[int], params: list[bytes | None]) -> str:
    return parameters.bind(parameters.prepare(sql, declared), [], params)


@pytest.mark.parametrize(
    ("sql", "declared", "value", "bound"),
    [
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY $1",
            [INT4],
            b"2",
            "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY CAST(2 AS INT)",
        ),
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY ($1) DESC",
            [values.INT2],
            b"2",
            "SELECT department, COUNT(*) FROM visits GROUP BY department "
            "ORDER BY (CAST(2 AS SMALLINT)) DESC",
        ),
        (
            "SELECT COUNT(*) FROM visits GROUP BY $1",
            [values.INT8],
            b"1",
            "SELECT COUNT(*) FROM visits GROUP BY CAST(1 AS BIGINT)",
        ),
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department, $1",
            [0],  # undeclared: text, as PostgreSQL resolves it there
            b"1",
            "SELECT department, COUNT(*) FROM visits GROUP BY department, CAST('1' AS TEXT)",
        ),
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY $1",
            [values.BOOL],
            None,
            "SELECT department, COUNT(*) FROM visits GROUP BY department "
            "ORDER BY CAST(NULL AS BOOLEAN)",
        ),
        (
            "SELECT DISTINCT ON ($1) department FROM visits",
            [INT4],
            b"1",
            "SELECT DISTINCT ON (CAST(1 AS INT)) department FROM visits",
        ),
        (
            "SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY $1",
            [values.DATE],
            b"2024-01-02",
            "SELECT department, COUNT(*) FROM visits GROUP BY department "
            "ORDER BY CAST('2024-01-02' AS DATE)",
        ),
    ],
)
def test_a_parameter_where_a_position_could_be_is_a_constant(
    sql: str, declared: list[int], value: bytes | None, bound: str
) -> None:
    assert bind(sql, declared, [value]) == bound


def test_elsewhere_a_parameter_is_the_literal_as_before() -> None:
    sql = "SELECT $1, COUNT(*) FROM visits WHERE stay > $2 GROUP BY department LIMIT $3"
    assert bind(sql, [INT4, INT4, INT4], [b"1", b"2", b"3"]) == (
        "SELECT 1, COUNT(*) FROM visits WHERE stay > 2 GROUP BY department LIMIT 3"
    )


def test_order_by_a_parameter_sorts_by_a_constant() -> None:
    base = "SELECT department, COUNT(*) FROM visits GROUP BY department"
    without = plan(base, catalog("main"), PlanRequest(1.0))
    for value in (b"1", b"2", b"5"):  # 5: was "ORDER BY position 5 is not in select list"
        made = plan(bind(base + " ORDER BY $1", [INT4], [value]), catalog("main"), PlanRequest(1.0))
        assert made.sql == without.sql
        # Was ORDER BY 2 for the value 2: sorted by the count.
        assert made.post_sql == f"{without.post_sql} ORDER BY CAST({value.decode()} AS INT)"


def test_group_by_a_parameter_groups_by_a_constant() -> None:
    made = plan(
        bind("SELECT COUNT(*) FROM visits GROUP BY $1", [INT4], [b"1"]),
        catalog("main"),
        PlanRequest(1.0),
    )
    # One group, its key the constant (public: no partition selection, no δ spent), as
    # PostgreSQL's one group.
    assert made.selection is None
    assert "CAST(1 AS INT) AS" in made.sql
    both = plan(
        bind("SELECT department, COUNT(*) FROM visits GROUP BY department, $1", [INT4], [b"1"]),
        catalog("main"),
        PlanRequest(1.0),
    )
    assert '"t0"."department" AS "k0", CAST(1 AS INT) AS "k1"' in both.sql


def test_a_column_not_grouped_by_is_refused_as_postgresql_refuses_it() -> None:
    # Bound as a position, GROUP BY $1 = 1 grouped by department and was answered.
    with pytest.raises(Rejected) as refused:
        plan(
            bind("SELECT department, COUNT(*) FROM visits GROUP BY $1", [INT4], [b"1"]),
            catalog("main"),
            PlanRequest(1.0),
        )
    assert refused.value.sqlstate == "42803"
    assert 'column "department" must appear in the GROUP BY clause' in refused.value.message


@pytest.mark.parametrize("constant", ["'x'", "1.5", "NULL", "TRUE"])
def test_a_bare_constant_in_group_by_is_refused_as_postgresql_refuses_it(constant: str) -> None:
    with pytest.raises(Rejected) as refused:
        plan(f"SELECT COUNT(*) FROM visits GROUP BY {constant}", catalog("main"), PlanRequest(1.0))
    assert (refused.value.sqlstate, refused.value.message) == (
        "42601",
        "non-integer constant in GROUP BY",
    )
