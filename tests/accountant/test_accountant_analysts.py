"""Analysts and budgets in the state store: admin changes, audit, precedence, concurrency."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

import pytest

from accountant import (
    AdminChange,
    AnalystBudget,
    AnalystExists,
    AnalystRemoved,
    Attempt,
    BudgetExhausted,
    Decision,
    Epsilon,
    PerQueryCapExceeded,
    StateLocation,
    StateReader,
    StateStore,
    UnknownAnalyst,
)
from accountant import sqlite as state_sqlite
from tests.accountant.backends import query

CHANGE = AdminChange(actor="root@host", command="dpproxy analyst add bob")
BUDGET = AnalystBudget(total=Epsilon(2), default_per_query=Epsilon("0.5"))


def attempt(analyst: str = "bob") -> Attempt:
    return Attempt(analyst=analyst, client_address="10.0.0.1", sql="SELECT COUNT(*) FROM t")


def budget(total: str, cap: str | None = None) -> AnalystBudget:
    return AnalystBudget(
        total=Epsilon(total),
        default_per_query=Epsilon("0.1"),
        per_query_cap=None if cap is None else Epsilon(cap),
    )


@pytest.fixture
def store(location: StateLocation) -> StateStore:
    opened = StateStore.open(location)
    opened.add_analyst("bob", "verifier-1", BUDGET, CHANGE)
    return opened


def test_admin_changes_are_stored_and_audited(store: StateStore) -> None:
    store.update_budget("bob", lambda b: budget("5", "1"), CHANGE)
    store.set_verifier("bob", "verifier-2", CHANGE)
    bob = store.analyst("bob")
    assert bob is not None and bob.verifier == "verifier-2"
    assert bob.budget.total == Epsilon(5) and bob.budget.per_query_cap == Epsilon(1)
    records = store.audit_records(decisions=(Decision.ADMIN,))
    assert [r.actor for r in records] == ["root@host"] * 3
    assert records[1].reason is not None and "to total 5" in records[1].reason
    assert records[1].remaining == Epsilon(5) and records[1].epsilon.is_zero()
    assert "verifier" not in str([r.to_dict() for r in records])
    assert store.verify_audit().intact
    store.close()


def test_reservation_uses_the_stored_budget(store: StateStore) -> None:
    stale = budget("100")
    store.reserve(attempt(), Epsilon("1.5"), stale)
    with pytest.raises(BudgetExhausted) as info:
        store.reserve(attempt(), Epsilon(1), stale)  # stored total 2, not 100
    assert info.value.remaining == Epsilon("0.5")
    store.update_budget("bob", lambda b: budget("3", "0.2"), CHANGE)
    with pytest.raises(PerQueryCapExceeded):
        store.reserve(attempt(), Epsilon("0.5"), stale)
    reservation = store.reserve(attempt(), Epsilon("0.2"), stale)
    assert reservation.total == Epsilon(3) and reservation.remaining_after == Epsilon("1.3")
    store.close()


def test_grant_and_reset(store: StateStore) -> None:
    store.reserve(attempt(), Epsilon(2))
    assert store.remaining("bob").is_zero()
    store.update_budget("bob", lambda b: budget(str(b.total.plain) + "0"), CHANGE)  # 20
    assert store.remaining("bob") == Epsilon(18)
    store.reset_spending("bob", CHANGE)
    assert store.spent("bob").is_zero() and store.remaining("bob") == Epsilon(20)
    assert store.audit_records(decisions=(Decision.ADMIN,))[-1].reason == (
        "spending reset to 0 (was 2)"
    )
    store.close()


def test_add_twice_remove_and_add_again(store: StateStore) -> None:
    with pytest.raises(AnalystExists, match="dpproxy budget set bob"):
        store.add_analyst("bob", "v", BUDGET, CHANGE)
    store.reserve(attempt(), Epsilon(1))
    store.remove_analyst("bob", CHANGE)
    assert store.analyst("bob") is None
    with pytest.raises(AnalystRemoved, match="removed by an admin"):
        store.reserve(attempt(), Epsilon("0.1"), BUDGET)
    refusal = store.record_refusal(
        attempt(), decision=Decision.OVER_BUDGET, reason="removed", budget=BUDGET
    )
    assert refusal.remaining is None
    with pytest.raises(UnknownAnalyst, match="dpproxy analyst add bob"):
        store.remove_analyst("bob", CHANGE)
    record = store.add_analyst("bob", "v2", BUDGET, CHANGE)
    assert record.reason is not None and "earlier charges still count" in record.reason
    assert store.remaining("bob") == Epsilon(1)
    store.close()


def test_seed_adds_only_unknown_analysts(store: StateStore) -> None:
    store.remove_analyst("bob", CHANGE)
    seeds = {"bob": ("vb", budget("9")), "carol": ("vc", budget("4"))}
    assert store.seed_analysts(seeds, CHANGE) == ["carol"]
    assert store.seed_analysts(seeds, CHANGE) == []
    assert store.analyst("bob") is None  # removed stays removed
    carol = store.analyst("carol")
    assert carol is not None and carol.budget.total == Epsilon(4) and carol.verifier == "vc"
    store.close()


def test_reader_sees_changes_at_once(store: StateStore) -> None:
    reader = StateReader(store.location)
    try:
        found = reader.analyst("bob")
        assert found is not None and found.verifier == "verifier-1"
        store.set_verifier("bob", "verifier-2", CHANGE)
        found = reader.analyst("bob")
        assert found is not None and found.verifier == "verifier-2"
        store.remove_analyst("bob", CHANGE)
        assert reader.analyst("bob") is None
    finally:
        reader.close()
        store.close()


def test_concurrent_budget_cut_never_lets_spending_exceed_it(location: StateLocation) -> None:
    """Charges from three stores (as from three server processes) race a budget cut from
    100 to 5. Each charge must be checked against the budget stored at that moment: once
    the cut is in, no charge may take the spending above 5 (or above what it already was)."""
    with StateStore.open(location) as admin:
        admin.add_analyst("bob", "v", budget("100"), CHANGE)

    def charge() -> None:
        with StateStore.open(location) as store:
            for _ in range(30):
                with contextlib.suppress(BudgetExhausted):
                    store.reserve(attempt(), Epsilon("0.5"), budget("100"))

    threads = [threading.Thread(target=charge) for _ in range(3)]
    for thread in threads:
        thread.start()
    with StateStore.open(location) as admin:
        admin.update_budget("bob", lambda b: budget("5"), CHANGE)
    for thread in threads:
        thread.join()
    rows = query(location, "SELECT epsilon_nano, remaining_nano FROM reservations ORDER BY id")
    totals, cumulative, before_cut = [], 0, 0
    for nano, remaining in rows:
        cumulative += nano
        totals.append(Epsilon.from_nano(cumulative + remaining))
        if totals[-1] == Epsilon(100):
            before_cut = cumulative
    assert set(totals) <= {Epsilon(100), Epsilon(5)}
    assert totals == sorted(totals, reverse=True)  # never the old budget after the cut
    assert Epsilon.from_nano(cumulative) <= max(Epsilon(5), Epsilon.from_nano(before_cut))


def old_state_file(path: Path, version: int) -> None:
    """A state file as dpproxy ``version`` made it, with one charge of ε=1 to alice."""
    conn = sqlite3.connect(path)
    for statement in state_sqlite._statements(state_sqlite._SCHEMA):
        conn.execute(statement)
    for target in range(2, version + 1):
        for statement in state_sqlite._statements(state_sqlite._MIGRATIONS[target]):
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id={state_sqlite.APPLICATION_ID}")
    conn.execute(
        "INSERT INTO reservations (analyst, client_address, sql, started_at, reserved_at,"
        " epsilon_nano, remaining_nano, owner, status) VALUES ('alice', 'a', 'SELECT 1',"
        " '2026-01-01T00:00:00.000000+00:00', '2026-01-01T00:00:00.000000+00:00',"
        " 1000000000, 2000000000, 'gone', 'finished')"
    )
    conn.commit()
    conn.close()


@pytest.mark.parametrize("version", [1, 2])
def test_older_files_are_upgraded(tmp_path: Path, version: int) -> None:
    path = tmp_path / "old.db"
    old_state_file(path, version)
    with StateStore.open(path) as store:
        assert store.spent("alice") == Epsilon(1)
        store.add_analyst("alice", "v", budget("3"), CHANGE)
        assert store.remaining("alice") == Epsilon(2)
        assert store.verify_audit().intact
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT laplace_rho_nano FROM reservations").fetchone() == (500000000,)
    conn.close()
