"""A charged query whose outcome the state store cannot record (locked by another process
past [state] lock_timeout_seconds) is recorded as failed by the running server as soon as
the store can be written again, not only at the next start; the charge counts throughout.
On a shared PostgreSQL ledger, a reservation another server already recovered is a clear
error. The real pipeline (DuckDB, OpenDP, the state store in SQLite or PostgreSQL); the
lock is taken by a real second connection while the query runs, after its charge."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import psycopg
import pytest

from accountant import (
    AnalystBudget,
    Decision,
    Epsilon,
    PostgresState,
    StateLocation,
    StateStore,
    StateStoreError,
)
from proxy.asker import Asker
from proxy.backends import CancelToken
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError
from proxy.unrecorded import UNRECORDED_REASON
from rewriter import OpenDPNoise
from tests.accountant.backends import BACKENDS, fresh_location, query, write_lock_held
from tests.rewriter.tables import catalog, duckdb_file

COUNT = "SELECT COUNT(*) FROM visits"
BUDGET = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal("1e-6"))
ALICE = Asker("alice", BUDGET, "127.0.0.1")


class HookedBackend(DuckDBBackend):
    """The real DuckDB backend; ``after_query`` runs once, after the next query ran (so
    after its charge, before its outcome is recorded)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, timeout_seconds=10)
        self.after_query: Callable[[], Awaitable[None]] | None = None

    async def fetch_all(self, sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        rows = await super().fetch_all(sql, token)
        hook, self.after_query = self.after_query, None
        if hook is not None:
            await hook()
        return rows


@dataclass
class Setup:
    location: StateLocation
    backend: HookedBackend
    ledger: AsyncLedger
    pipeline: Pipeline


@pytest.fixture(params=BACKENDS)
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    with fresh_location(request.param, tmp_path) as location:
        backend = HookedBackend(duckdb_file(tmp_path / "data.duckdb"))
        ledger = AsyncLedger(location, lock_timeout=1.0)
        pipeline = Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
        try:
            yield Setup(location, backend, ledger, pipeline)
        finally:
            ledger.close()


def statuses(location: StateLocation) -> list[tuple[str, int]]:
    return [(r[0], r[1]) for r in query(location, "SELECT status, epsilon_nano FROM reservations")]


async def eventually(done: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("not done in time")
        await asyncio.sleep(0.1)


def test_an_outcome_the_locked_store_could_not_record_is_recorded_once_it_can(
    setup: Setup,
) -> None:
    locks = contextlib.ExitStack()

    async def lock_the_store() -> None:  # as another process writing for too long
        locks.enter_context(write_lock_held(setup.location))

    async def scenario() -> None:
        setup.backend.after_query = lock_the_store
        with pytest.raises(QueryError) as refused:
            await setup.pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
        assert refused.value.sqlstate == "55P03"
        assert "the charge of ε=0.5 stands" in refused.value.message
        assert "records the query as failed as soon as" in refused.value.message
        # While the store stays locked (retries keep failing): no record, the charge counts.
        await asyncio.sleep(2.5)
        assert statuses(setup.location) == [("reserved", 500_000_000)]
        assert list(setup.pipeline.unrecorded.pending) != []
        locks.close()  # the other process lets go
        # Recorded in the store first, then dropped from those pending (once the retry
        # resumes after its write): both, in time.
        await eventually(lambda: statuses(setup.location) == [("finished", 500_000_000)])
        await eventually(lambda: setup.pipeline.unrecorded.pending == {})
        (record,) = await setup.ledger.records("alice", (Decision.FAILED,))
        assert record.reason == UNRECORDED_REASON and record.epsilon == Epsilon("0.5")
        assert record.rows is None and record.remaining == Epsilon("9.5")
        assert await setup.ledger.records("alice", (Decision.ACCEPTED,)) == []
        assert await setup.ledger.remaining("alice", BUDGET) == Epsilon("9.5")
        # The next query is answered and charged as usual.
        answered = await setup.pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
        assert "ε=9 left" in answered.notices[0].message
        await setup.pipeline.close()

    try:
        asyncio.run(scenario())
    finally:
        locks.close()
    with StateStore.open(setup.location) as store:
        assert store.verify_audit().intact
        assert store.recover_interrupted() == 0  # nothing left for the next start


def test_outcomes_still_unrecorded_at_shutdown_are_tried_once_more(setup: Setup) -> None:
    locks = contextlib.ExitStack()

    async def lock_the_store() -> None:
        locks.enter_context(write_lock_held(setup.location))

    async def scenario() -> None:
        setup.backend.after_query = lock_the_store
        with pytest.raises(QueryError, match="the charge of ε=0.5 stands"):
            await setup.pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
        locks.close()
        await setup.pipeline.close()  # at once: before the background retry's first try
        assert setup.pipeline.unrecorded.pending == {}

    try:
        asyncio.run(scenario())
    finally:
        locks.close()
    assert statuses(setup.location) == [("finished", 500_000_000)]


def test_a_reservation_another_server_recovered_is_a_clear_error(
    tmp_path: Path, pg_dsn: str
) -> None:
    with fresh_location("postgres", tmp_path) as location:
        if not isinstance(location, PostgresState):
            raise TypeError("a PostgreSQL state store is needed")
        backend = HookedBackend(duckdb_file(tmp_path / "data.duckdb"))
        ledger = AsyncLedger(location, lock_timeout=2.0)
        pipeline = Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())

        async def lose_connection_and_get_recovered() -> None:
            # This server's connection to the state database is lost while the query runs:
            # its owner lock goes with it, so another server's recovery takes the query.
            ((owner,),) = query(location, "SELECT owner FROM reservations")
            key = int(owner)
            with psycopg.connect(pg_dsn, autocommit=True) as admin:
                admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory'"
                    " AND objsubid = 1 AND classid::bigint = %s AND objid::bigint = %s",
                    (key >> 32, key & 0xFFFFFFFF),
                )
            with StateStore.open(location) as other:
                deadline = time.monotonic() + 10
                while other.recover_interrupted() != 1:
                    if time.monotonic() > deadline:
                        raise AssertionError("the other server did not recover the query")
                    await asyncio.sleep(0.1)
            # Another session's call notices the lost connection; the next one reconnects.
            with contextlib.suppress(StateStoreError):
                await ledger.analyst("alice")
            await ledger.analyst("alice")

        async def scenario() -> None:
            backend.after_query = lose_connection_and_get_recovered
            with pytest.raises(QueryError) as refused:
                await pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
            assert refused.value.sqlstate == "55000"
            message = refused.value.message
            assert "the charge of ε=0.5 stands, but no answer is given" in message
            assert "another dpproxy server sharing the budget ledger already recorded" in message
            assert pipeline.unrecorded.pending == {}
            await pipeline.close()

        try:
            asyncio.run(scenario())
        finally:
            ledger.close()
        assert statuses(location) == [("finished", 500_000_000)]
        with StateStore.open(location) as store:
            (record,) = store.audit_records(analyst="alice")
            assert record.decision is Decision.FAILED and store.verify_audit().intact
