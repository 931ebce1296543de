"""A PostgreSQL state store that stops answering (the connection stays open, nothing comes
back: a hung server, a stalled proxy, a partition) holds a query up for at most
[state] lock_timeout_seconds plus a grace period (``operation_seconds``), and a login for
at most the reader's; then they are refused, nothing runs on the data, and the connection
is dropped. Once the server answers again the same server works on, each attempt gets its
audit record, and the ledger is exact: a charge committed although its answer was lost is
recorded as failed (not lost, not charged twice).

The real pipeline (DuckDB, OpenDP) and the real AsyncLedger, with the state store in the
test PostgreSQL behind a real TCP forwarder that can stop answering."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TypeVar

import pytest

from accountant import (
    AccountantError,
    AnalystBudget,
    Decision,
    Epsilon,
    PostgresState,
    StateStore,
)
from accountant.deadline import operation_seconds
from accountant.in_doubt import CHARGE_IN_DOUBT_REASON
from proxy.asker import Asker
from proxy.backends import CancelToken
from proxy.backends.duckdb import DuckDBBackend
from proxy.ledger import AsyncLedger
from proxy.pipeline import Pipeline
from proxy.postprocess import PostProcessor
from proxy.seam import QueryError
from rewriter import OpenDPNoise
from tests.accountant.backends import query
from tests.accountant.forwarder import Forwarder
from tests.rewriter.tables import catalog, duckdb_file

T = TypeVar("T")

COUNT = "SELECT COUNT(*) FROM visits"
BUDGET = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal("1e-6"))
ALICE = Asker("alice", BUDGET, "127.0.0.1")
LOCK_TIMEOUT = 1.0
BOUND = operation_seconds(LOCK_TIMEOUT)  # 2 s
#: The login reader's timeout (AsyncLedger's StateReader) and its bound.
LOGIN_BOUND = operation_seconds(5.0)
SLACK = 1.0
GIVE_UP = 20.0  # the old code waited for as long as the forwarder did


class CountingBackend(DuckDBBackend):
    """The real DuckDB backend, noting every statement it runs."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, timeout_seconds=10)
        self.ran: list[str] = []

    async def fetch_all(self, sql: str, token: CancelToken) -> list[tuple[object, ...]]:
        self.ran.append(sql)
        return await super().fetch_all(sql, token)


@dataclass
class Setup:
    state: PostgresState
    direct: PostgresState  # the same schema, past the forwarder
    forwarder: Forwarder
    backend: CountingBackend
    ledger: AsyncLedger
    pipeline: Pipeline


@pytest.fixture
def setup(tmp_path: Path, pg_dsn: str, pg_schema: str) -> Iterator[Setup]:
    forwarder = Forwarder(pg_dsn)
    state = PostgresState(forwarder.dsn, pg_schema)
    try:
        backend = CountingBackend(duckdb_file(tmp_path / "data.duckdb"))
        ledger = AsyncLedger(state, lock_timeout=LOCK_TIMEOUT)
        pipeline = Pipeline(catalog("main"), backend, ledger, OpenDPNoise(), PostProcessor())
        try:
            yield Setup(
                state, PostgresState(pg_dsn, pg_schema), forwarder, backend, ledger, pipeline
            )
        finally:
            forwarder.close()  # (frees a call the old code left waiting on it)
            ledger.close()
    finally:
        forwarder.close()


async def timed(work: Awaitable[T]) -> tuple[T | BaseException, float]:
    """What ``work`` returned or raised, and how long it took (the test fails if it is
    still waiting after GIVE_UP seconds)."""
    started = time.monotonic()
    try:
        result: T | BaseException = await asyncio.wait_for(work, GIVE_UP)
    except TimeoutError:
        pytest.fail(f"still waiting for the state store after {GIVE_UP} s")
    except Exception as error:  # noqa: BLE001 - handed to the test
        result = error
    return result, time.monotonic() - started


async def eventually(done: Callable[[], bool], seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError("not done in time")
        await asyncio.sleep(0.1)


def ledger_rows(setup: Setup) -> list[tuple[str, int]]:
    rows = query(setup.direct, "SELECT status, epsilon_nano FROM reservations ORDER BY id")
    return [(r[0], r[1]) for r in rows]


def audit_rows(setup: Setup) -> list[tuple[str, str | None, int]]:
    rows = query(setup.direct, "SELECT decision, reason, epsilon_nano FROM audit_log ORDER BY id")
    return [(r[0], r[1], r[2]) for r in rows]


def test_a_charge_whose_answer_was_lost_is_refused_in_time_and_recorded_once(
    setup: Setup,
) -> None:
    async def scenario() -> None:
        setup.forwarder.stall_at_commit(deliver=True)  # committed; the reply never comes
        refused, elapsed = await timed(
            setup.pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
        )
        assert setup.forwarder.stalled.is_set()
        assert isinstance(refused, QueryError), refused
        assert elapsed < BOUND + SLACK, f"refused after {elapsed:.2f} s"
        assert refused.sqlstate == "58030"
        assert "may have been recorded" in refused.message
        assert setup.backend.ran == []  # nothing ran on the data
        # The charge stands (it counts all along), and the attempt is recorded once, as
        # failed, as soon as the store answers (here: on a new connection, at once).
        await eventually(lambda: [row[0] for row in audit_rows(setup)] == ["failed"])
        assert audit_rows(setup) == [("failed", CHARGE_IN_DOUBT_REASON, 500_000_000)]
        assert ledger_rows(setup) == [("finished", 500_000_000)]
        await eventually(lambda: not setup.pipeline.unrecorded.refusals)
        # The next query is answered and charged on top: no lost, no double charge.
        answered = await setup.pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
        assert "ε=9 left" in answered.notices[0].message
        await setup.pipeline.close()

    asyncio.run(scenario())
    assert ledger_rows(setup) == [("finished", 500_000_000)] * 2
    assert [row[0] for row in audit_rows(setup)] == ["failed", "accepted"]
    with StateStore.open(setup.direct) as store:
        assert store.verify_audit().intact
        assert store.recover_interrupted() == 0


def test_a_store_that_stops_answering_refuses_queries_and_logins_in_time(
    setup: Setup,
) -> None:
    async def scenario() -> None:
        setup.forwarder.pause()
        # Three sessions at once: each is refused within the bound (they share the
        # ledger's one thread: those queued behind the first do not wait as long again).
        for refused, elapsed in await asyncio.gather(
            *(
                timed(setup.pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken()))
                for _ in range(3)
            )
        ):
            assert isinstance(refused, QueryError), refused
            assert elapsed < BOUND + SLACK, f"refused after {elapsed:.2f} s"
            assert refused.sqlstate == "58030"
            assert "nothing was charged" in refused.message
        login, elapsed = await timed(setup.ledger.analyst_for_login("alice"))
        assert isinstance(login, AccountantError), login  # the login is refused
        assert elapsed < LOGIN_BOUND + SLACK, f"login refused after {elapsed:.2f} s"
        assert setup.backend.ran == []

        setup.forwarder.resume()
        await eventually(lambda: [row[0] for row in audit_rows(setup)] == ["error"] * 3, 30)
        for _, reason, epsilon in audit_rows(setup):
            assert reason is not None and "did not answer" in reason and epsilon == 0
            assert "nothing was charged" in reason
        answered = await setup.pipeline.answer(ALICE, COUNT, Epsilon("0.5"), CancelToken())
        assert "ε=9.5 left" in answered.notices[0].message
        # Logins are answered again (alice is not stored: her budget comes with the asker).
        assert await setup.ledger.analyst_for_login("alice") is None
        await setup.pipeline.close()

    asyncio.run(scenario())
    assert ledger_rows(setup) == [("finished", 500_000_000)]
    assert [row[0] for row in audit_rows(setup)] == ["error"] * 3 + ["accepted"]
    with StateStore.open(setup.direct) as store:
        (accepted,) = store.audit_records(decisions=(Decision.ACCEPTED,))
        assert accepted.remaining == Epsilon("9.5") and store.verify_audit().intact
