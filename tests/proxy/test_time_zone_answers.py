"""The session's TimeZone reaches the plan of a query over a timestamp with time zone, and
the caches tell zones apart: an answer released for a UTC session is never served to a
Paris session (which pays for its own), and comes back to UTC sessions for free; a query
that reads no such column shares its answer across zones. A zone the engines read
differently is refused, free."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from accountant import AnalystBudget, Decision, Epsilon
from proxy.answers import AnswerCache, CacheKey, duckdb_file_version
from proxy.asker import Asker
from proxy.backends import column_types
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.plan_cache import PlanCache
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError, StatementResult
from proxy.session import AnalystSession
from rewriter import OpenDPNoise, PlanRequest, build_catalog, plan
from tests.rewriter.zoned_events import CREATE, POLICY, catalog, utc_text

GROUPED = "SELECT date_trunc('day', ts) AS d, COUNT(*) AS n FROM events GROUP BY 1 ORDER BY 1"
PLAIN = "SELECT COUNT(*) AS n FROM events"
#: Late evening in UTC, the next day in Paris.
INSTANTS = [dt.datetime(2024, 3, 30, 23, 30) + dt.timedelta(minutes=k) for k in range(200)]


@pytest.fixture
def pipeline(tmp_path: Path) -> Iterator[Pipeline]:
    path = tmp_path / "events.duckdb"
    with duckdb.connect(str(path)) as conn:
        conn.execute(CREATE.format(schema="main"))
        conn.executemany(
            "INSERT INTO events VALUES (?, ?, CAST(? AS TIMESTAMPTZ))",
            [[i, i, utc_text(moment)] for i, moment in enumerate(INSTANTS)],
        )
    backend = DuckDBBackend(path, timeout_seconds=10)
    declared = asyncio.run(backend.schema_declared("main"))
    found = build_catalog(column_types(declared), {"events": POLICY}, schema="main")
    ledger = AsyncLedger(tmp_path / "state.db")
    cache = AnswerCache(duckdb_file_version(path), ttl_seconds=600)
    yield Pipeline(found, backend, ledger, OpenDPNoise(), PostProcessor(), answers=cache)
    ledger.close()


def ask(pipeline: Pipeline, *statements: str) -> list[StatementResult]:
    budget = AnalystBudget(total=Epsilon(100), default_per_query=Epsilon(1))
    session = AnalystSession(pipeline, Asker("alice", budget, "127.0.0.1"), "test")

    async def go() -> list[StatementResult]:
        return [await session.execute(sql) for sql in statements]

    return asyncio.run(go())


def decisions(pipeline: Pipeline) -> list[Decision]:
    return [r.decision for r in asyncio.run(pipeline.ledger.records("alice", ()))]


def test_the_catalog_knows_the_columns_with_a_time_zone(pipeline: Pipeline) -> None:
    column = pipeline.catalog.table("events").column("ts")
    assert column.zoned and column.zone is None


def test_each_zone_pays_for_its_own_answer(pipeline: Pipeline) -> None:
    _, utc, _, paris, _, utc_again = ask(
        pipeline,
        "SET dpproxy.delta = 1e-9",
        GROUPED,
        "SET TimeZone = 'Europe/Paris'",
        GROUPED,
        "SET TimeZone = 'UTC'",
        GROUPED,
    )
    assert decisions(pipeline) == [Decision.ACCEPTED, Decision.ACCEPTED, Decision.CACHED]
    assert utc_again.rows == utc.rows
    # All of them on March 31 in Paris; in UTC, 30 on March 30 (which partition selection
    # may drop) and 170 on March 31.
    assert [row[0] for row in paris.rows] == ["2024-03-31 00:00:00"]
    assert "2024-03-31 00:00:00" in [row[0] for row in utc.rows]
    assert {row[0] for row in utc.rows} <= {"2024-03-30 00:00:00", "2024-03-31 00:00:00"}


def test_a_query_without_such_a_column_shares_its_answer(pipeline: Pipeline) -> None:
    first, _, again = ask(pipeline, PLAIN, "SET TimeZone = 'Europe/Paris'", PLAIN)
    assert decisions(pipeline) == [Decision.ACCEPTED, Decision.CACHED]
    assert again.rows == first.rows


def test_a_zone_the_engines_read_differently_is_refused_free(pipeline: Pipeline) -> None:
    with pytest.raises(QueryError) as refused:
        ask(pipeline, "SET TimeZone = 'UTC+3'", "SET dpproxy.delta = 1e-9", GROUPED)
    assert refused.value.sqlstate == "22023"
    assert refused.value.hint is not None and "Etc/GMT-3" in refused.value.hint
    answered = ask(pipeline, "SET TimeZone = 'Etc/GMT-3'", "SET dpproxy.delta = 1e-9", GROUPED)[2]
    assert decisions(pipeline) == [Decision.REJECTED, Decision.ACCEPTED]
    assert answered.rows


def test_cache_keys_name_the_zone() -> None:
    found = catalog("main")
    paris = plan(GROUPED, found, PlanRequest(1.0, delta=1e-6, time_zone="Europe/Paris"))
    utc = plan(GROUPED, found, PlanRequest(1.0, delta=1e-6, time_zone="UTC"))
    assert (paris.time_zone, utc.time_zone) == ("Europe/Paris", "UTC")
    assert CacheKey.of("alice", paris) != CacheKey.of("alice", utc)
    assert CacheKey.of("alice", paris).time_zone == "Europe/Paris"
    plans = PlanCache(8)
    plans.put("alice", GROUPED, PlanRequest(1.0, delta=1e-6, time_zone="UTC"), utc)
    assert (
        plans.get("alice", GROUPED, PlanRequest(1.0, delta=1e-6, time_zone="Europe/Paris")) is None
    )
    plain = [plan(PLAIN, found, PlanRequest(1.0, time_zone=z)) for z in ("UTC", "Europe/Paris")]
    assert CacheKey.of("alice", plain[0]) == CacheKey.of("alice", plain[1])
