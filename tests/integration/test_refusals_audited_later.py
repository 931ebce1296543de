"""An attempt refused because the state store could not be written (locked by another
process past [state] lock_timeout_seconds) is still audited: the analyst gets 55P03 at
once, and the running server writes the attempt's record (once) as soon as the store can
be written again, like the outcomes of proxy.unrecorded. Both a query refused at its
charge ('error', nothing charged) and a query the rewriter rejected ('rejected').

The real pipeline (DuckDB, OpenDP, the state store in SQLite or PostgreSQL); the lock is
held by a real second connection, as another process's long write transaction would."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from accountant import AnalystBudget, Decision, Epsilon, StateLocation, StateStore
from proxy.app import DpproxyApp
from proxy.asker import Asker
from proxy.backends import CancelToken
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import ClientInfo, QueryError
from proxy.settings import Settings
from rewriter import OpenDPNoise
from tests.accountant.backends import BACKENDS, fresh_location, query, write_lock_held
from tests.rewriter.tables import catalog, duckdb_file

COUNT = "SELECT COUNT(*) FROM visits"
ROWS = "SELECT patient_id FROM visits"  # rows of people: rejected by the rewriter
BUDGET = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal("1e-6"))
ALICE = Asker("alice", BUDGET, "127.0.0.1")


@pytest.fixture(params=BACKENDS)
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateLocation]:
    with fresh_location(request.param, tmp_path) as place:
        yield place


def audit_rows(location: StateLocation) -> list[tuple[str, str, str, int]]:
    rows = query(location, "SELECT decision, sql, reason, epsilon_nano FROM audit_log ORDER BY id")
    return [(r[0], r[1], r[2], r[3]) for r in rows]


async def eventually(done: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("not done in time")
        await asyncio.sleep(0.1)


def test_attempts_refused_by_a_locked_store_are_audited_once_it_can_be_written(
    location: StateLocation, tmp_path: Path
) -> None:
    backend = DuckDBBackend(duckdb_file(tmp_path / "data.duckdb"), timeout_seconds=10)
    ledger = AsyncLedger(location, lock_timeout=1.0)
    pipeline = Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    locks = contextlib.ExitStack()

    async def scenario() -> None:
        locks.enter_context(write_lock_held(location))  # another process, writing too long
        for sql in (COUNT, ROWS):
            with pytest.raises(QueryError) as refused:
                await pipeline.answer(ALICE, sql, Epsilon("0.5"), CancelToken())
            assert refused.value.sqlstate == "55P03"
            assert "the budget ledger is busy" in refused.value.message
            assert "nothing was charged" in refused.value.message
        await asyncio.sleep(2.5)  # retries keep failing while it stays locked
        assert audit_rows(location) == []
        locks.close()  # the other process lets go
        await eventually(lambda: len(audit_rows(location)) == 2)
        await eventually(lambda: not pipeline.unrecorded.refusals)
        (count, rows) = audit_rows(location)
        assert count[:2] == ("error", COUNT) and count[3] == 0
        assert "could not be used" in count[2] and "stayed locked" in count[2]
        assert "nothing was charged" in count[2]
        assert rows[:2] == ("rejected", ROWS) and rows[3] == 0
        # The next query is answered and charged as usual; nothing else was charged.
        answered = await pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
        assert "ε=9.5 left" in answered.notices[0].message
        await pipeline.close()

    try:
        asyncio.run(scenario())
    finally:
        locks.close()
        ledger.close()
    assert [row[0] for row in audit_rows(location)] == ["error", "rejected", "accepted"]
    with StateStore.open(location) as store:
        assert store.verify_audit().intact
        assert store.remaining("alice", BUDGET) == Epsilon("9.5")
        assert [r.decision for r in store.audit_records()] == [
            Decision.ERROR,
            Decision.REJECTED,
            Decision.ACCEPTED,
        ]


def test_a_failed_login_while_the_store_is_locked_is_audited_once_it_can_be_written(
    location: StateLocation, tmp_path: Path
) -> None:
    backend = DuckDBBackend(duckdb_file(tmp_path / "data.duckdb"), timeout_seconds=10)
    ledger = AsyncLedger(location, lock_timeout=1.0)
    pipeline = Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
    app = DpproxyApp(Settings.model_construct(), pipeline)  # settings: unused by logins
    locks = contextlib.ExitStack()

    async def scenario() -> None:
        locks.enter_context(write_lock_held(location))
        app.log_authentication_failure(
            ClientInfo(user="mallory", database="demo", address="10.0.0.9"), "wrong password"
        )
        await asyncio.sleep(2.5)  # its write waited past the lock timeout, and retries
        assert audit_rows(location) == []
        locks.close()
        await eventually(lambda: len(audit_rows(location)) == 1)
        await eventually(lambda: not pipeline.unrecorded.refusals)
        await pipeline.close()

    try:
        asyncio.run(scenario())
    finally:
        locks.close()
        ledger.close()
    assert audit_rows(location) == [("auth_failed", "", "wrong password", 0)]
