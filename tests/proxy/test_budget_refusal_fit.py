"""A query refused for its budget names the largest ε that fits, computed as the charge is.

An analyst whose budget is ε=1 with Gaussian noise: the default query (ε=1, so ρ=0.5,
about ε=5.2 at δ=1e-6) can never be answered, even with nothing spent. The refusal says
so (not "exhausted", with ε=1 of 1 left) and names an ε that fits; a query at that ε is
answered, one a step above it is refused. Through the real pipeline (DuckDB, OpenDP, the
SQLite ledger), so the suggestion is checked against what the pipeline really charges."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from accountant import AnalystBudget, Epsilon, Mechanism
from proxy.asker import Asker
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError
from proxy.session import AnalystSession
from rewriter import OpenDPNoise
from tests.rewriter.tables import catalog, duckdb_file

QUERY = "SELECT COUNT(*) FROM visits"
SUGGESTED = re.compile(r"SET dpproxy\.epsilon = ([0-9.]+)")


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    ledger = AsyncLedger(tmp_path / "state.db")
    backend = DuckDBBackend(duckdb_file(tmp_path / "data.duckdb"), timeout_seconds=10)
    yield Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    ledger.close()


def session(pipeline: Pipeline, mechanism: Mechanism) -> AnalystSession:
    budget = AnalystBudget(
        total=Epsilon(1), default_per_query=Epsilon(1), mechanism=mechanism, delta=Decimal("1e-6")
    )
    return AnalystSession(pipeline, Asker("gus", budget, "127.0.0.1"), "test")


def run(s: AnalystSession, *statements: str) -> list[Any]:
    async def go() -> list[Any]:
        return [await s.execute(sql) for sql in statements]

    return asyncio.run(go())


def refusal(s: AnalystSession, *statements: str) -> str:
    with pytest.raises(QueryError) as refused:
        run(s, *statements)
    return refused.value.message


def test_a_query_that_can_never_fit_says_so_and_names_the_epsilon_that_fits(
    pipeline: Pipeline,
) -> None:
    s = session(pipeline, Mechanism.GAUSSIAN)
    message = refusal(s, QUERY)
    assert "exhausted" not in message  # before: "privacy budget exhausted … ε=1 remains of 1"
    assert "this query needs ρ=0.5 (zCDP), that is ε=5.2" in message
    assert 'at δ=1e-6, more than the whole privacy budget of analyst "gus" (ε=1)' in message
    assert "cannot be answered even with nothing spent; nothing was charged" in message
    found = SUGGESTED.search(message)
    assert found, message
    fits = Decimal(found.group(1))
    assert fits == Decimal("0.22")  # two significant digits, rounded down
    # One step above it does not fit; it does, as the pipeline charges it.
    above = refusal(s, f"SET dpproxy.epsilon = {fits + Decimal('0.01')}", QUERY)
    assert "this query needs ρ=0.02645, that is ε=1.0" in above.replace(" (zCDP)", "")
    assert f"SET dpproxy.epsilon = {fits}," in above
    answered = run(s, f"SET dpproxy.epsilon = {fits}", QUERY)[1]
    assert answered.rows and "this answer cost ρ=" in answered.notices[0].message


def test_once_some_is_spent_the_refusal_says_exhausted_and_what_still_fits(
    pipeline: Pipeline,
) -> None:
    s = session(pipeline, Mechanism.GAUSSIAN)
    run(s, "SET dpproxy.epsilon = 0.2", QUERY)
    message = refusal(s, QUERY.replace("COUNT(*)", "COUNT(*) AS n"))
    assert message.startswith('privacy budget exhausted for analyst "gus"')
    found = SUGGESTED.search(message)
    assert found, message  # before: no ε was named for a Gaussian query
    run(s, f"SET dpproxy.epsilon = {found.group(1)}", QUERY.replace("*)", "*) AS m"))


def test_a_laplace_query_over_the_whole_budget_names_the_budget(pipeline: Pipeline) -> None:
    s = session(pipeline, Mechanism.LAPLACE)
    message = refusal(s, "SET dpproxy.epsilon = 1.5", QUERY)
    assert "more than the whole privacy budget" not in message  # the per-query cap refuses
    run(s, "SET dpproxy.epsilon = 0.75", QUERY)
    message = refusal(s, "SET dpproxy.epsilon = 1", QUERY.replace("*)", "*) AS n"))
    assert "ε=0.25 remains of 1; lower the query's ε with SET dpproxy.epsilon = 0.25" in message
