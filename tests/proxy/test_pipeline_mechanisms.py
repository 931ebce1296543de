"""SET dpproxy.mechanism: Gaussian answers through the real pipeline (DuckDB, OpenDP, the
state store), charged in ρ, shown in ε at the analyst's δ, and audited with their ρ."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from accountant import AdminChange, AnalystBudget, Decision, Epsilon, Mechanism, Rho, StateStore
from accountant.zcdp import cks_epsilon
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError
from proxy.session import AnalystSession
from rewriter import OpenDPNoise, PlanRequest, plan
from tests.rewriter.tables import catalog, duckdb_file


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    database = duckdb_file(tmp_path / "data.duckdb")
    ledger = AsyncLedger(tmp_path / "state.db")
    backend = DuckDBBackend(database, timeout_seconds=10)
    yield Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    ledger.close()


def session(pipeline: Pipeline, delta: str = "0.000001") -> AnalystSession:
    budget = AnalystBudget(
        total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal(delta)
    )
    return AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")


def run(s: AnalystSession, *statements: str) -> list:
    async def go() -> list:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def test_gaussian_answer_is_charged_in_rho(pipeline: Pipeline) -> None:
    s = session(pipeline)
    results = run(
        s,
        "SHOW dpproxy.mechanism",
        "SET dpproxy.mechanism = gaussian",
        "SHOW dpproxy.mechanism",
        "SELECT COUNT(*) AS n FROM visits",
    )
    assert results[0].rows == (("laplace",),) and results[2].rows == (("gaussian",),)
    notice = results[3].notices[0]
    assert "this answer cost ρ=0.125 (zCDP)" in notice.message
    assert "(at δ=1e-6)" in notice.message
    assert "COUNT(*) ±" in (notice.detail or "")
    (record,) = asyncio.run(pipeline.ledger.records("alice", (Decision.ACCEPTED,)))
    assert record.rho == Rho("0.125") and record.epsilon.is_zero()
    # ρ = 0.125 at δ = 1e-6 is ε ≈ 2.419 by CKS20 (the simple bound says 2.75).
    spent = Epsilon(10) - (record.remaining or Epsilon(0))
    assert float(spent) == pytest.approx(cks_epsilon(0.125, 1e-6), abs=1e-8)
    assert float(spent) >= cks_epsilon(0.125, 1e-6)


def test_reset_and_bad_values(pipeline: Pipeline) -> None:
    s = session(pipeline)
    run(s, "SET dpproxy.mechanism = 'GAUSSIAN'", "RESET dpproxy.mechanism")
    assert run(s, "SHOW dpproxy.mechanism")[0].rows == (("laplace",),)
    with pytest.raises(QueryError, match="invalid value for dpproxy.mechanism"):
        run(s, "SET dpproxy.mechanism = exponential")
    laplace = run(s, "SELECT COUNT(*) FROM visits")[0]
    assert "this answer cost ε=0.5;" in laplace.notices[0].message


def test_pure_epsilon_analyst_cannot_choose_gaussian(pipeline: Pipeline) -> None:
    s = session(pipeline, delta="0")
    with pytest.raises(QueryError, match="δ above 0"):
        run(s, "SET dpproxy.mechanism = gaussian")
    assert Mechanism.LAPLACE.value == run(s, "SHOW dpproxy.mechanism")[0].rows[0][0]


def test_report_columns_adds_intervals(pipeline: Pipeline) -> None:
    s = session(pipeline)
    set_, plain, grouped, arithmetic, ordered = run(
        s,
        "SET dpproxy.report = columns",
        "SELECT COUNT(*) AS n, SUM(stay) FROM visits",
        "SELECT department, COUNT(*) AS n FROM visits GROUP BY department",
        "SELECT COUNT(*) * 2 AS twice FROM visits",
        "SELECT department, SUM(stay) AS s FROM visits GROUP BY department "
        "HAVING COUNT(*) > -1000 ORDER BY s DESC LIMIT 2",
    )
    assert [c.name for c in plain.columns] == [
        "n",
        "sum",
        "n_ci95",
        "n_bias",
        "sum_ci95",
        "sum_bias",
    ]
    assert [c.type_oid for c in plain.columns[2:]] == [701, 16, 701, 16]
    query_plan = plan(
        "SELECT COUNT(*) AS n, SUM(stay) FROM visits", catalog("main"), PlanRequest(0.5)
    )
    widths = [a.half_width_95 for a in query_plan.accuracy()]
    assert plain.rows[0][2::2] == tuple(str(int(w)) for w in widths)
    assert plain.rows[0][3::2] == (None, None)  # no bias check, no hint: not checked
    assert [c.name for c in grouped.columns] == ["department", "n", "n_ci95", "n_bias"]
    assert len({row[2] for row in grouped.rows}) == 1 and len(grouped.rows) == 3
    assert [c.name for c in arithmetic.columns] == ["twice"]
    assert "no _ci95 or _bias columns" in arithmetic.notices[-1].message
    # HAVING, ORDER BY and LIMIT keep or reorder whole rows: each column's interval holds.
    assert [c.name for c in ordered.columns] == ["department", "s", "s_ci95", "s_bias"]
    assert len(ordered.rows) == 2 and ordered.rows[0][2] == ordered.rows[1][2] is not None
    assert float(ordered.rows[0][1] or 0) >= float(ordered.rows[1][1] or 0)
    described = asyncio.run(
        pipeline.describe(
            s._asker, "SELECT COUNT(*) AS n FROM visits", Epsilon("0.5"), report="columns"
        )
    )
    assert [c.name for c in described] == ["n", "n_ci95", "n_bias"]
    assert run(s, "SHOW dpproxy.report")[0].rows == (("columns",),)
    with pytest.raises(QueryError, match="invalid value for dpproxy.report"):
        run(s, "SET dpproxy.report = everything")


def test_show_budget_names_the_gaussian_cost(pipeline: Pipeline) -> None:
    with StateStore.open(pipeline.ledger._store.path) as store:
        store.add_analyst(
            "alice", "v", session(pipeline)._asker.budget, AdminChange("root", "test")
        )
    s = session(pipeline)
    shown = run(s, "SET dpproxy.mechanism = gaussian", "SHOW dpproxy.budget")[1].rows[0][0]
    assert shown == (
        "10 left of 10 (0 spent; next query costs ρ=0.125, Gaussian; amounts are ε at δ=1e-6); "
        "δ: 0 spent by partition selection, 1e-6 left of 1e-6 (a query grouping by keys "
        "found in the data spends δ=1e-9)"
    )


def test_post_processing_that_fails_after_the_charge_says_why_in_words(
    pipeline: Pipeline,
) -> None:
    """x * x * 20000 fits a smallint at x = 0 and 1 (the check before the charge) but not
    at a noisy count near 8: the analyst learns what failed, without DuckDB's text or the
    internal SQL, and the audit log says what failed in the same words (DuckDB's text,
    which quotes the noisy value, goes to the server log only)."""
    s = session(pipeline)
    run(s, "SET dpproxy.epsilon = 5")
    sql = "SELECT CAST(COUNT(*) * COUNT(*) * 20000 AS SMALLINT) AS n FROM visits"
    with pytest.raises(QueryError) as failed:
        run(s, sql)
    message = failed.value.message
    assert "a noisy value did not fit its type" in message and "the charge of ε=5 stands" in message
    assert "released" not in message and "Error" not in message and "LINE" not in message
    (record,) = asyncio.run(pipeline.ledger.records("alice", (Decision.FAILED,)))
    assert "a noisy value did not fit its type" in (record.reason or "")
    assert "Conversion Error" not in (record.reason or "")
