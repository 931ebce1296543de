"""Group commit of cached-answer audit records: concurrent sessions share transactions,
every session gets its own record, in order, and the hash chain stays intact."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from accountant import AdminChange, AnalystBudget, Attempt, Decision, Epsilon, StateStore
from accountant.errors import AnalystRemoved
from accountant.outcomes import CachedAttempt
from accountant.sqlite import connect, transaction
from proxy.ledger import AsyncLedger

BUDGET = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.1"))
SESSIONS = 16
PER_SESSION = 12


def attempt(analyst: str, sql: str) -> Attempt:
    return Attempt(analyst=analyst, client_address="127.0.0.1", sql=sql)


def test_concurrent_sessions_share_commits_and_keep_their_order(tmp_path: Path) -> None:
    ledger = AsyncLedger(tmp_path / "state.db")

    async def session(number: int) -> list[int]:
        ids = []
        for i in range(PER_SESSION):
            record = await ledger.cached(
                attempt("alice", f"SELECT {number}, {i}"), f"reuse {number}.{i}", 1, 0.5, BUDGET
            )
            assert record.sql == f"SELECT {number}, {i}"
            ids.append(record.id)
        return ids

    async def run() -> list[list[int]]:
        return await asyncio.gather(*(session(n) for n in range(SESSIONS)))

    try:
        per_session = asyncio.run(run())
        writer = ledger._cached
        batches, largest = writer.batches, writer.largest_batch
    finally:
        ledger.close()
    total = SESSIONS * PER_SESSION
    assert sorted(i for ids in per_session for i in ids) == list(range(1, total + 1))
    assert all(ids == sorted(ids) for ids in per_session)  # each session's records in order
    assert largest > 1 and batches < total  # records were grouped
    with StateStore.open(tmp_path / "state.db") as store:
        records = store.audit_records(analyst="alice")
        assert len(records) == total
        assert {r.decision for r in records} == {Decision.CACHED}
        assert all(r.epsilon.is_zero() and r.remaining == Epsilon(10) for r in records)
        assert store.verify_audit().intact


def test_a_removed_analyst_fails_alone_in_a_batch(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "state.db") as store:
        for name in ("alice", "bob"):
            store.add_analyst(name, "v", BUDGET, AdminChange("root", "add"))
        store.remove_analyst("alice", AdminChange("root", "remove"))
        entries = [
            CachedAttempt(attempt(name, "SELECT 1"), "reuse", 1, 0.5, BUDGET)
            for name in ("bob", "alice", "bob")
        ]
        results = store.record_cached_many(entries)
        assert isinstance(results[1], AnalystRemoved)
        first, third = results[0], results[2]
        assert not isinstance(first, AnalystRemoved) and not isinstance(third, AnalystRemoved)
        assert third.id == first.id + 1 and first.analyst == third.analyst == "bob"
        assert store.audit_records(analyst="alice", decisions=[Decision.CACHED]) == []
        assert store.verify_audit().intact


def test_a_failed_batch_fails_its_sessions_and_the_writer_goes_on(tmp_path: Path) -> None:
    ledger = AsyncLedger(tmp_path / "state.db")

    async def run() -> tuple[list[object], object]:
        bad = [ledger.cached(attempt("alice", "SELECT 1"), "reuse", -1, 0.5, BUDGET)]
        good = [ledger.cached(attempt("alice", "SELECT 2"), "reuse", 1, 0.5, BUDGET)]
        together = await asyncio.gather(*bad, *good, return_exceptions=True)
        after = await ledger.cached(attempt("alice", "SELECT 3"), "reuse", 1, 0.5, BUDGET)
        return together, after

    try:
        together, after = asyncio.run(run())
    finally:
        ledger.close()
    assert isinstance(together[0], ValueError)
    assert not isinstance(after, BaseException)
    with StateStore.open(tmp_path / "state.db") as store:
        sqls = [r.sql for r in store.audit_records(analyst="alice")]
        assert sqls[-1] == "SELECT 3" and "SELECT 1" not in sqls
        assert store.verify_audit().intact


def test_only_the_records_that_ask_for_it_skip_the_fsync(tmp_path: Path) -> None:
    conn = connect(tmp_path / "state.db", 5.0)
    try:
        full = conn.execute("PRAGMA synchronous").fetchone()[0]
        with transaction(conn, write=True, durable=False):
            inside = conn.execute("PRAGMA synchronous").fetchone()[0]
        after = conn.execute("PRAGMA synchronous").fetchone()[0]
        with pytest.raises(RuntimeError), transaction(conn, write=True, durable=False):
            raise RuntimeError("rolled back")
        after_error = conn.execute("PRAGMA synchronous").fetchone()[0]
    finally:
        conn.close()
    assert (full, inside, after, after_error) == (2, 1, 2, 2)  # FULL, NORMAL, FULL, FULL


@pytest.mark.parametrize("durable", [True, False])
def test_cached_records_survive_reopening(tmp_path: Path, durable: bool) -> None:
    """Without fsync of their own (durable=False), committed records are still there for
    the next process; a durable commit after them does not disturb the chain."""
    with StateStore.open(tmp_path / "state.db") as store:
        store.record_cached(
            attempt("alice", "SELECT 1"), reason="reuse", rows=1, duration_ms=0.5, budget=BUDGET
        )
        if durable:
            store.record_refusal(
                attempt("alice", "SELECT x"), decision="rejected", reason="no", budget=BUDGET
            )
            reservation = store.reserve(attempt("alice", "SELECT 2"), Epsilon("0.1"), BUDGET)
            store.complete(reservation, decision="accepted", reason=None, rows=1, duration_ms=1.0)
    with StateStore.open(tmp_path / "state.db") as store:
        decisions = [r.decision for r in store.audit_records(analyst="alice")]
        expected = [Decision.CACHED]
        if durable:
            expected += [Decision.REJECTED, Decision.ACCEPTED]
        assert decisions == expected
        assert store.verify_audit().intact
