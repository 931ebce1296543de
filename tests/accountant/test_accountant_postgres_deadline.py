"""A PostgreSQL state store that stops answering (the connection stays open, nothing comes
back) is given up on the client side after the lock timeout plus a grace period
(``operation_seconds``): the call fails with StateStoreError, the connection is dropped,
and once the server answers again the store works on a new connection. A charge whose
COMMIT went out but whose answer never came back (WriteOutcomeUnknown) is settled with
exactly one audit record: recorded as failed if it was committed, else the refusal.

Real PostgreSQL behind a real TCP forwarder (tests/accountant/forwarder.py). Each blocking
call runs on a thread with a limit of its own, so that a call that never returns fails
the test instead of hanging it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import TypeVar

import pytest

from accountant import (
    AnalystBudget,
    Attempt,
    Decision,
    Epsilon,
    PostgresState,
    StateReader,
    StateStore,
    StateStoreError,
    WriteOutcomeUnknown,
)
from accountant.deadline import FAIL_FAST_SECONDS, operation_seconds
from accountant.in_doubt import CHARGE_IN_DOUBT_REASON
from tests.accountant.backends import query
from tests.accountant.forwarder import Forwarder

T = TypeVar("T")

TIMEOUT = 1.0  # [state] lock_timeout_seconds
BOUND = operation_seconds(TIMEOUT)  # 2 s
#: What the measured time to a refusal may exceed the bound by (thread and socket wake-ups).
SLACK = 1.0
#: How long a call may take before the test gives up on it (the old code hung for good).
GIVE_UP = 20.0
BUDGET = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal("1e-6"))
COST = Epsilon("0.5")


def within(seconds: float, call: Callable[[], T]) -> tuple[T | BaseException, float]:
    """``call()``'s result (or what it raised) and how long it took, on a thread of its own;
    fails the test if it takes more than ``seconds``."""
    outcome: list[T | BaseException] = []

    def run() -> None:
        try:
            outcome.append(call())
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome.append(error)

    started = time.monotonic()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the state store call was still waiting after {seconds} s")
    return outcome[0], time.monotonic() - started


def refused_in_time(outcome: object, elapsed: float) -> StateStoreError:
    assert isinstance(outcome, StateStoreError), outcome
    assert elapsed < BOUND + SLACK, f"refused after {elapsed:.2f} s, bound {BOUND} s"
    return outcome


@pytest.fixture
def forwarder(pg_dsn: str) -> Iterator[Forwarder]:
    with Forwarder(pg_dsn) as forwarder:
        yield forwarder


@pytest.fixture
def state(forwarder: Forwarder, pg_schema: str) -> PostgresState:
    return PostgresState(forwarder.dsn, pg_schema)


@pytest.fixture
def store(state: PostgresState, forwarder: Forwarder) -> Iterator[StateStore]:
    opened = StateStore.open(state, timeout=TIMEOUT)
    try:
        yield opened
    finally:
        forwarder.close()  # first: frees a call left waiting on it (the old code's)
        opened.close()


def attempt() -> Attempt:
    return Attempt(analyst="alice", client_address="127.0.0.1", sql="SELECT COUNT(*) FROM visits")


def ledger(state: PostgresState, direct_dsn: str) -> list[tuple[str, int]]:
    """(status, ε in nano) of every reservation, read past the forwarder."""
    direct = PostgresState(direct_dsn, state.schema)
    return [(r[0], r[1]) for r in query(direct, "SELECT status, epsilon_nano FROM reservations")]


def audit_rows(state: PostgresState, direct_dsn: str) -> list[tuple[str, str | None, int]]:
    direct = PostgresState(direct_dsn, state.schema)
    rows = query(direct, "SELECT decision, reason, epsilon_nano FROM audit_log ORDER BY id")
    return [(r[0], r[1], r[2]) for r in rows]


def test_a_store_that_stops_answering_is_refused_in_time_and_works_again(
    store: StateStore, forwarder: Forwarder, state: PostgresState, pg_dsn: str
) -> None:
    forwarder.pause()
    outcome, elapsed = within(GIVE_UP, lambda: store.reserve(attempt(), COST, BUDGET))
    error = refused_in_time(outcome, elapsed)
    assert elapsed > TIMEOUT  # it did wait for the server first
    assert not isinstance(error, WriteOutcomeUnknown)  # it hung before COMMIT: known
    assert f"PostgreSQL did not answer within {BOUND:g} s" in str(error)
    # A call right after it (one queued behind it) is refused at once, without waiting
    # as long again; a later one tries again (it must connect again) and is refused in time.
    outcome, elapsed = within(GIVE_UP, lambda: store.remaining("alice", BUDGET))
    assert "a moment ago" in str(outcome) and elapsed < 0.5
    time.sleep(FAIL_FAST_SECONDS)
    outcome, elapsed = within(GIVE_UP, lambda: store.remaining("alice", BUDGET))
    assert "a moment ago" not in str(refused_in_time(outcome, elapsed))

    forwarder.resume()  # the server answers again: a new connection, the same ledger
    time.sleep(FAIL_FAST_SECONDS)
    reservation = store.reserve(attempt(), COST, BUDGET)
    store.complete(reservation, decision="accepted", reason=None, rows=1, duration_ms=1.0)
    assert ledger(state, pg_dsn) == [("finished", 500_000_000)]
    assert store.remaining("alice", BUDGET) == Epsilon("9.5")
    assert [row[0] for row in audit_rows(state, pg_dsn)] == ["accepted"]


def test_a_charge_committed_while_its_answer_was_lost_is_recorded_once(
    store: StateStore, forwarder: Forwarder, state: PostgresState, pg_dsn: str
) -> None:
    asked = attempt()
    forwarder.stall_at_commit(deliver=True)  # PostgreSQL commits; the reply never comes
    outcome, elapsed = within(GIVE_UP, lambda: store.reserve(asked, COST, BUDGET))
    assert forwarder.stalled.is_set()
    error = refused_in_time(outcome, elapsed)
    assert isinstance(error, WriteOutcomeUnknown) and error.attempt == asked
    assert ledger(state, pg_dsn) == [("reserved", 500_000_000)]  # it stands, and counts

    # Recording the refusal settles it: the charge, found, is recorded as failed.
    time.sleep(FAIL_FAST_SECONDS)  # (right after the cut, calls fail at once)
    record = store.record_refusal(asked, decision="error", reason="ledger failed", budget=BUDGET)
    assert record.decision is Decision.FAILED and record.reason == CHARGE_IN_DOUBT_REASON
    assert record.epsilon == COST and record.remaining == Epsilon("9.5")
    assert ledger(state, pg_dsn) == [("finished", 500_000_000)]
    assert audit_rows(state, pg_dsn) == [("failed", CHARGE_IN_DOUBT_REASON, 500_000_000)]

    # No lost charge, no double charge: the next query is charged on top of it.
    store.reserve(attempt(), COST, BUDGET)
    assert store.remaining("alice", BUDGET) == Epsilon(9)


def test_a_charge_whose_commit_never_arrived_costs_nothing_and_is_audited_once(
    store: StateStore, forwarder: Forwarder, state: PostgresState, pg_dsn: str
) -> None:
    asked = attempt()
    forwarder.stall_at_commit(deliver=False)  # COMMIT lost on the way: rolled back
    outcome, elapsed = within(GIVE_UP, lambda: store.reserve(asked, COST, BUDGET))
    error = refused_in_time(outcome, elapsed)
    assert isinstance(error, WriteOutcomeUnknown) and error.attempt == asked

    time.sleep(FAIL_FAST_SECONDS)
    record = store.record_refusal(asked, decision="error", reason="ledger failed", budget=BUDGET)
    assert record.decision is Decision.ERROR and record.reason == "ledger failed"
    assert record.epsilon == Epsilon.zero() and record.remaining == Epsilon(10)
    assert ledger(state, pg_dsn) == []
    assert audit_rows(state, pg_dsn) == [("error", "ledger failed", 0)]


def test_a_refusal_whose_commit_was_in_doubt_is_not_written_twice(
    store: StateStore, forwarder: Forwarder, state: PostgresState, pg_dsn: str
) -> None:
    asked = attempt()
    forwarder.stall_at_commit(deliver=True)
    outcome, elapsed = within(
        GIVE_UP,
        lambda: store.record_refusal(asked, decision="rejected", reason="no", budget=BUDGET),
    )
    assert isinstance(refused_in_time(outcome, elapsed), WriteOutcomeUnknown)
    time.sleep(FAIL_FAST_SECONDS)
    record = store.record_refusal(asked, decision="rejected", reason="no", budget=BUDGET)
    assert record.decision is Decision.REJECTED
    assert audit_rows(state, pg_dsn) == [("rejected", "no", 0)]


def test_a_reader_that_stops_answering_is_refused_in_time(
    store: StateStore, forwarder: Forwarder, state: PostgresState
) -> None:
    reader = StateReader(state, timeout=TIMEOUT)  # (the store exists: it was opened)
    try:
        assert reader.analyst("alice") is None
        forwarder.pause()
        outcome, elapsed = within(GIVE_UP, lambda: reader.analyst("alice"))
        refused_in_time(outcome, elapsed)
        forwarder.resume()
        time.sleep(FAIL_FAST_SECONDS)
        assert reader.analyst("alice") is None
    finally:
        forwarder.close()
        reader.close()
