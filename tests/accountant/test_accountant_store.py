"""The state store: reservations, completion, refusals, durability, recovery, errors."""

from __future__ import annotations

import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accountant import (
    RECOVERED_REASON,
    AccountantError,
    AnalystBudget,
    Attempt,
    BudgetExhausted,
    Decision,
    Epsilon,
    InvalidAmount,
    PerQueryCapExceeded,
    ReservationError,
    StateLocation,
    StateStore,
    StateStoreError,
)
from accountant.sqlite import SCHEMA_VERSION
from tests.accountant.backends import BACKENDS, fresh_location, raw, write_lock_held

BUDGET = AnalystBudget(total=Epsilon(1), per_query_cap=Epsilon("0.5"), default_per_query=0.1)


def attempt(analyst: str = "alice", sql: str = "SELECT count(*) FROM visits") -> Attempt:
    return Attempt(analyst=analyst, client_address="10.0.0.7:51234", sql=sql)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def store(location: StateLocation) -> Iterator[StateStore]:
    with StateStore.open(location) as opened:
        yield opened


def test_new_file_is_durable_wal(path: Path) -> None:
    with StateStore.open(path) as store:
        conn = sqlite3.connect(path)
        try:
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            version = conn.execute("SELECT version FROM schema_version").fetchone()[0]
            assert version == SCHEMA_VERSION
        finally:
            conn.close()
        with store._db.transaction(write=False) as internal:
            assert internal.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL


def test_reserve_then_complete(store: StateStore) -> None:
    reservation = store.reserve(attempt(), Epsilon("0.3"), BUDGET)
    assert reservation.analyst == "alice"
    assert reservation.cost == Epsilon("0.3")
    assert reservation.remaining_after == Epsilon("0.7")
    assert store.spent("alice") == Epsilon("0.3")
    assert store.remaining("alice", BUDGET) == Epsilon("0.7")
    assert store.audit_records() == []  # nothing audited until the outcome is known

    record = store.complete(
        reservation, decision="accepted", reason=None, rows=12, duration_ms=3.25
    )
    assert record.id == 1
    assert record.decision is Decision.ACCEPTED
    assert record.epsilon == Epsilon("0.3")
    assert record.remaining == Epsilon("0.7")
    assert (record.rows, record.duration_ms) == (12, 3.25)
    assert record.reservation_id == reservation.id
    assert record.sql == "SELECT count(*) FROM visits"
    assert record.client_address == "10.0.0.7:51234"
    assert store.audit_records() == [record]

    with pytest.raises(ReservationError, match="already finished"):
        store.complete(reservation, decision="accepted", reason=None, rows=1, duration_ms=1)


def test_failed_query_keeps_its_charge(store: StateStore) -> None:
    reservation = store.reserve(attempt(), Epsilon("0.5"), BUDGET)
    record = store.complete(
        reservation, decision=Decision.FAILED, reason="backend error", rows=None, duration_ms=8
    )
    assert record.decision == "failed"
    assert record.duration_ms == 8.0
    assert store.spent("alice") == Epsilon("0.5")


def test_exhaustion_carries_requested_and_remaining(store: StateStore) -> None:
    store.reserve(attempt(), Epsilon("0.5"), BUDGET)
    store.reserve(attempt(), Epsilon("0.3"), BUDGET)
    with pytest.raises(BudgetExhausted) as info:
        store.reserve(attempt(), Epsilon("0.3"), BUDGET)
    error = info.value
    assert isinstance(error, AccountantError)
    assert (error.analyst, error.requested, error.remaining, error.total) == (
        "alice",
        Epsilon("0.3"),
        Epsilon("0.2"),
        Epsilon(1),
    )
    assert str(error) == (
        'privacy budget exhausted for analyst "alice": this query needs ε=0.3 but ε=0.2 '
        "remains of 1; lower the query's ε with SET dpproxy.epsilon = 0.2, "
        "or ask an admin for more budget"
    )
    assert store.spent("alice") == Epsilon("0.8")  # the refusal charged nothing

    store.reserve(attempt(), Epsilon("0.2"), BUDGET)  # exactly the rest still fits
    with pytest.raises(BudgetExhausted, match="ε=0 remains of 1; ask an admin"):
        store.reserve(attempt(), Epsilon("0.000000001"), BUDGET)
    assert store.remaining("alice", BUDGET) == Epsilon.zero()


def test_budgets_are_per_analyst(store: StateStore) -> None:
    store.reserve(attempt("alice"), Epsilon("0.5"), BUDGET)
    store.reserve(attempt("alice"), Epsilon("0.5"), BUDGET)
    store.reserve(attempt("bob"), Epsilon("0.5"), BUDGET)
    assert store.spent("alice") == Epsilon(1)
    assert store.spent("bob") == Epsilon("0.5")
    assert store.spent("carol") == Epsilon.zero()


def test_per_query_cap(store: StateStore) -> None:
    with pytest.raises(PerQueryCapExceeded) as info:
        store.reserve(attempt(), Epsilon("0.6"), BUDGET)
    assert info.value.requested == Epsilon("0.6")
    assert info.value.cap == Epsilon("0.5")
    assert "SET dpproxy.epsilon = 0.5" in str(info.value)
    assert store.spent("alice") == Epsilon.zero()
    store.reserve(attempt(), Epsilon("0.5"), BUDGET)  # the cap itself is allowed


def test_zero_cost_reservation_is_refused(store: StateStore) -> None:
    with pytest.raises(InvalidAmount):
        store.reserve(attempt(), Epsilon.zero(), BUDGET)


def test_refusals_cost_nothing(store: StateStore) -> None:
    store.reserve(attempt(), Epsilon("0.4"), BUDGET)
    rejected = store.record_refusal(
        attempt(sql="DELETE FROM visits"),
        decision="rejected",
        reason="only SELECT is supported",
        budget=BUDGET,
    )
    assert rejected.decision is Decision.REJECTED
    assert rejected.epsilon == Epsilon.zero()
    assert rejected.remaining == Epsilon("0.6")
    assert rejected.reservation_id is None
    login = store.record_refusal(
        Attempt("mallory", "203.0.113.9:4000", ""),
        decision=Decision.AUTH_FAILED,
        reason="wrong password",
        budget=None,
        duration_ms=0.5,
    )
    assert login.remaining is None
    assert login.duration_ms == 0.5
    assert store.spent("alice") == Epsilon("0.4")
    assert [r.id for r in store.audit_records()] == [1, 2]


@pytest.mark.parametrize("decision", ["accepted", "failed", "bogus"])
def test_refusal_decisions_are_checked(store: StateStore, decision: str) -> None:
    with pytest.raises(ValueError, match="decision must be one of"):
        store.record_refusal(attempt(), decision=decision, reason="x", budget=None)


@pytest.mark.parametrize("decision", ["rejected", "over_budget", "nope"])
def test_completion_decisions_are_checked(store: StateStore, decision: str) -> None:
    reservation = store.reserve(attempt(), Epsilon("0.1"), BUDGET)
    with pytest.raises(ValueError, match="decision must be one of"):
        store.complete(reservation, decision=decision, reason=None, rows=None, duration_ms=1)


def test_bad_rows_and_duration(store: StateStore) -> None:
    reservation = store.reserve(attempt(), Epsilon("0.1"), BUDGET)
    with pytest.raises(ValueError, match="rows"):
        store.complete(reservation, decision="accepted", reason=None, rows=-1, duration_ms=1)
    with pytest.raises(ValueError, match="duration_ms"):
        store.complete(
            reservation, decision="accepted", reason=None, rows=1, duration_ms=float("nan")
        )


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        Attempt("alice", "x", "SELECT 1", datetime(2024, 1, 1))


def test_charges_survive_reopen(location: StateLocation) -> None:
    with StateStore.open(location) as first:
        first.reserve(attempt(), Epsilon("0.5"), BUDGET)  # never completed
        reservation = first.reserve(attempt(), Epsilon("0.2"), BUDGET)
        first.complete(reservation, decision="accepted", reason=None, rows=1, duration_ms=1)
    with StateStore.open(location) as second:
        assert second.spent("alice") == Epsilon("0.7")
        with pytest.raises(BudgetExhausted):
            second.reserve(attempt(), Epsilon("0.4"), BUDGET)
        assert len(second.audit_records()) == 1
        assert second.verify_audit().intact


def test_recover_interrupted_after_close(location: StateLocation) -> None:
    first = StateStore.open(location)
    finished = first.reserve(attempt(), Epsilon("0.1"), BUDGET)
    first.complete(finished, decision="accepted", reason=None, rows=1, duration_ms=1)
    first.reserve(attempt(sql="SELECT avg(age) FROM patients"), Epsilon("0.2"), BUDGET)
    first.close()  # dpproxy "died" between reserve and complete

    with StateStore.open(location) as second:
        assert second.recover_interrupted() == 1
        records = second.audit_records()
        assert [r.decision for r in records] == [Decision.ACCEPTED, Decision.FAILED]
        lost = records[-1]
        assert lost.reason == RECOVERED_REASON
        assert lost.sql == "SELECT avg(age) FROM patients"
        assert lost.epsilon == Epsilon("0.2")
        assert lost.remaining == Epsilon("0.7")
        assert second.spent("alice") == Epsilon("0.3")  # the charge stands
        assert second.recover_interrupted() == 0
        assert second.verify_audit().intact
    if isinstance(location, Path):
        assert list((location.parent / "state.db.owners").iterdir()) == []


def test_recovery_leaves_live_stores_alone(location: StateLocation) -> None:
    with StateStore.open(location) as busy, StateStore.open(location) as starting:
        in_flight = busy.reserve(attempt(), Epsilon("0.1"), BUDGET)
        own = starting.reserve(attempt("bob"), Epsilon("0.1"), BUDGET)
        assert starting.recover_interrupted() == 0
        busy.complete(in_flight, decision="accepted", reason=None, rows=1, duration_ms=1)
        starting.complete(own, decision="accepted", reason=None, rows=1, duration_ms=1)


def test_threads_share_one_store(store: StateStore) -> None:
    budget = AnalystBudget(total=Epsilon(3), default_per_query=Epsilon("0.1"))
    outcomes: list[bool] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(10):
            try:
                reservation = store.reserve(attempt(), Epsilon("0.1"), budget)
            except BudgetExhausted:
                ok = False
            else:
                store.complete(reservation, decision="accepted", reason=None, rows=0, duration_ms=0)
                ok = True
            with lock:
                outcomes.append(ok)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count(True) == 30
    assert store.spent("alice") == Epsilon(3)
    assert store.verify_audit().records == 30


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@pytest.mark.parametrize("backend", BACKENDS)
@given(
    total=st.decimals(min_value=Decimal("0.001"), max_value=Decimal(3), places=3),
    charges=st.lists(
        st.decimals(min_value=Decimal("0.001"), max_value=Decimal(1), places=3), max_size=15
    ),
)
def test_ledger_never_overspends(backend: str, total: Decimal, charges: list[Decimal]) -> None:
    budget = AnalystBudget(total=Epsilon(total), default_per_query=Epsilon(min(total, Decimal(1))))
    with (
        tempfile.TemporaryDirectory() as tmp,
        fresh_location(backend, Path(tmp)) as location,
        StateStore.open(location) as store,
    ):
        expected = Decimal(0)
        for c in charges:
            try:
                reservation = store.reserve(attempt(), Epsilon(c), budget)
            except BudgetExhausted as exc:
                assert expected + c > total
                assert exc.remaining.as_decimal() == total - expected
            else:
                expected += c
                assert reservation.remaining_after.as_decimal() == total - expected
            assert store.spent("alice").as_decimal() == expected <= total
            assert store.remaining("alice", budget) >= Epsilon.zero()


# -- errors --------------------------------------------------------------------------


def test_corrupt_file_is_named_with_a_fix(path: Path) -> None:
    path.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(StateStoreError) as info:
        StateStore.open(path)
    assert str(path) in str(info.value)
    assert "restore it from a backup" in str(info.value)


def test_foreign_sqlite_file_is_refused(path: Path) -> None:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StateStoreError, match="not a dpproxy state file"):
        StateStore.open(path)


def test_missing_directory(tmp_path: Path) -> None:
    with pytest.raises(StateStoreError, match="directory") as info:
        StateStore.open(tmp_path / "no" / "such" / "state.db")
    assert "state.db" in str(info.value)


def test_newer_schema_is_refused(location: StateLocation) -> None:
    StateStore.open(location).close()
    with raw(location) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(StateStoreError, match="upgrade dpproxy"):
        StateStore.open(location)


def test_closed_store(location: StateLocation) -> None:
    store = StateStore.open(location)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StateStoreError, match="closed"):
        store.spent("alice")


def test_lock_timeout_is_reported(location: StateLocation) -> None:
    with StateStore.open(location, timeout=0.05) as store:
        with write_lock_held(location), pytest.raises(StateStoreError, match="locked"):
            store.reserve(attempt(), Epsilon("0.1"), BUDGET)
        store.reserve(attempt(), Epsilon("0.1"), BUDGET)
        assert store.spent("alice") == Epsilon("0.1")  # the timed-out charge left nothing
