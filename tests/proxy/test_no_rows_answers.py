"""A query whose SQL text alone shows that it has no rows is answered without the database
(proxy.empty_answers): the backend is never asked for data (only, as for every query, to
compute the query's constants before the charge: SELECT (1 = 0)), nothing is reserved."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from accountant import Decision, Epsilon
from proxy.backends import CancelToken
from proxy.pipeline import Pipeline
from tests.proxy.local_pipeline import alice_session, local_pipeline

PROBES = (
    "SELECT COUNT(*) FROM visits LIMIT 0",
    "SELECT department, COUNT(*) AS n FROM visits GROUP BY 1 HAVING FALSE",
    "SELECT * FROM (SELECT department, COUNT(*) FROM visits GROUP BY 1) s WHERE 1 = 0",
    "SELECT * FROM visits WHERE 1 = 0",
    "SELECT cost AS c FROM visits LIMIT 0",
)


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    made = local_pipeline(tmp_path)

    run = made.backend.fetch_all

    async def untouched(sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        if "FROM" in sql.upper():
            raise AssertionError(f"the backend was asked for data: {sql}")
        return await run(sql, token)  # a constant (rewriter.passes.constants)

    async def not_ready(token: CancelToken) -> None:
        raise AssertionError("the backend was made ready")

    monkeypatch.setattr(made.backend, "fetch_all", untouched)
    monkeypatch.setattr(made.backend, "ready", not_ready)
    yield made
    made.ledger.close()


@pytest.mark.parametrize("sql", PROBES)
def test_no_rows_without_the_database(pipeline: Pipeline, sql: str) -> None:
    session = alice_session(pipeline)

    async def run() -> None:
        result = await session.execute(sql)
        assert result.rows == ()
        assert result.tag == "SELECT 0"
        assert result.columns
        assert result.columns == await session.describe(sql)
        records = await pipeline.ledger.records("alice", (Decision.CACHED,))
        assert [r.sql for r in records] == [sql]
        assert records[0].epsilon == Epsilon.zero()
        assert (records[0].reason or "").startswith("free: no rows to answer")
        stored = await pipeline.ledger.analyst("alice")
        assert stored is None or stored.spent == Epsilon.zero()

    asyncio.run(run())
