"""δ charges (partition selection): exact arithmetic, refusals, the global cap, the audit
chain, and the upgrade of version-3 state files."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from accountant import (
    AdminChange,
    AnalystBudget,
    Attempt,
    Cost,
    Decision,
    Epsilon,
    GlobalBudget,
    InvalidAmount,
    Mechanism,
    Rho,
    StateLocation,
    StateStore,
)
from accountant import sqlite as state_sqlite
from accountant.audit import record_hash
from accountant.budget import delta_units
from accountant.errors import BudgetExhausted, DeltaExhausted, GlobalBudgetExhausted
from accountant.ledger import OVERSPENT_NANO, Spending
from accountant.zcdp import epsilon_nano_of
from tests.accountant.backends import query, tamper

CHANGE = AdminChange("root", "test")


def budget(delta: str = "1e-6", total: str = "10") -> AnalystBudget:
    return AnalystBudget(total=Epsilon(total), default_per_query=Epsilon("0.5"), delta=delta)


def attempt(sql: str = "SELECT stay, count(*) FROM visits GROUP BY stay") -> Attempt:
    return Attempt(analyst="alice", client_address="10.0.0.7:5000", sql=sql)


def selection(epsilon: str = "0.5", delta: str = "3e-7") -> Cost:
    return Cost.pure(Epsilon(epsilon)).with_delta(Decimal(delta))


# -- Cost and Spending ---------------------------------------------------------------------


def test_cost_delta_is_exact_and_rounded_up_to_1e_15() -> None:
    cost = selection(delta="1e-9")
    assert cost.delta == Decimal("1e-9") and cost.delta_units == 10**6
    assert Cost(Epsilon(1), Rho.zero(), Decimal("1.0000000000000001e-9")).delta_units == (10**6 + 1)
    assert str(cost) == "ε=0.5 and δ=1e-9 (partition selection)"
    assert not cost.is_zero()
    for bad in ("-1e-9", "0.01", "nan"):
        with pytest.raises(InvalidAmount):
            Cost(Epsilon(1), Rho.zero(), Decimal(bad))


@given(st.lists(st.integers(min_value=0, max_value=10**9), max_size=30))
def test_delta_sums_are_exact(units: list[int]) -> None:
    spending = Spending(0, 0, 0)
    for u in units:
        spending = spending.plus(Cost.pure(Epsilon(1)).with_delta(Decimal(u).scaleb(-15)))
    assert spending.delta == Decimal(sum(units)).scaleb(-15)
    assert spending.delta_femto == sum(units)


def test_rho_is_converted_at_the_delta_left_after_selection() -> None:
    spent = Spending(0, 0, 125_000_000, delta_units(Decimal("4e-7")))  # ρ = 0.125
    left = Decimal("1e-6") - Decimal("4e-7")
    assert spent.epsilon_nano(Decimal("1e-6")) == epsilon_nano_of(0, 0, 125_000_000, left)
    assert spent.epsilon_nano(Decimal("1e-6")) > Spending(0, 0, 125_000_000).epsilon_nano(
        Decimal("1e-6")
    )
    # Pure ε composes exactly whatever δ is left; nothing left for ρ, or δ overspent
    # (an admin lowered it), counts as everything spent.
    assert Spending(7, 0, 0, 10**9).epsilon_nano(Decimal("1e-6")) == 7
    assert Spending(0, 0, 1, 10**9).epsilon_nano(Decimal("1e-6")) == OVERSPENT_NANO
    assert Spending(7, 0, 0, 10**9 + 1).epsilon_nano(Decimal("1e-6")) == OVERSPENT_NANO


# -- the store -----------------------------------------------------------------------------


def test_delta_is_charged_until_it_runs_out(location: StateLocation) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(), CHANGE)
        for n in range(1, 4):
            reservation = store.reserve(attempt(), selection())
            assert reservation.delta == Decimal("3e-7")
            assert reservation.delta_remaining == Decimal("1e-6") - n * Decimal("3e-7")
            record = store.complete(
                reservation, decision=Decision.ACCEPTED, reason=None, rows=2, duration_ms=1.0
            )
            assert record.delta == Decimal("3e-7")
            assert record.to_dict()["delta"] == "3e-7"
        with pytest.raises(DeltaExhausted) as refused:
            store.reserve(attempt(), selection())
        error = refused.value
        assert error.requested_delta == Decimal("3e-7")
        assert error.remaining_delta == Decimal("1e-7")
        assert "δ=1e-7 left of 1e-6" in str(error) and "dpproxy.delta" in str(error)
        assert isinstance(error, BudgetExhausted)  # refused like any exhausted budget
        # What still fits, fits; plain ε answers are not affected by the δ spent.
        store.reserve(attempt(), selection(delta="1e-7"))
        store.reserve(attempt("SELECT count(*) FROM visits"), Cost.pure(Epsilon(1)))
        stored = store.analyst("alice")
        assert stored is not None
        assert stored.delta_spent == Decimal("1e-6") and stored.delta_remaining == 0
        assert stored.spent == Epsilon(3)  # pure ε: 5 x 0.5 + 1, exactly
        assert stored.to_dict()["delta_spent"] == "1e-6"
        assert store.verify_audit().intact
    assert query(location, "SELECT count(*) FROM reservations") == [(5,)]


def test_pure_epsilon_analysts_cannot_select_partitions(location: StateLocation) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(delta="0"), CHANGE)
        with pytest.raises(DeltaExhausted, match=r"pure-ε budget \(δ = 0\)"):
            store.reserve(attempt(), selection(delta="1e-15"))
        assert store.spent("alice") == Epsilon(0)


def test_gaussian_spending_is_stated_at_the_delta_left(location: StateLocation) -> None:
    with StateStore.open(location) as store:
        store.add_analyst(
            "alice", "v", budget().model_copy(update={"mechanism": Mechanism.GAUSSIAN}), CHANGE
        )
        store.reserve(attempt(), Cost.zcdp(Rho("0.125")).with_delta(Decimal("5e-7")))
        expected = epsilon_nano_of(0, 0, 125_000_000, Decimal("5e-7"))
        assert store.spent("alice") == Epsilon.from_nano(expected)
        # All δ spent on selection: a further ρ charge has no δ left to be stated at.
        with pytest.raises(BudgetExhausted):
            store.reserve(attempt(), Cost.zcdp(Rho("0.01")).with_delta(Decimal("5e-7")))


def test_lowering_delta_below_what_was_spent_exhausts_the_budget(
    location: StateLocation,
) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(), CHANGE)
        store.reserve(attempt(), selection(delta="5e-7"))
        store.update_budget(
            "alice", lambda b: b.model_copy(update={"delta": Decimal("1e-7")}), CHANGE
        )
        assert store.remaining("alice") == Epsilon(0)
        with pytest.raises(BudgetExhausted):
            store.reserve(attempt("SELECT count(*) FROM visits"), Cost.pure(Epsilon("0.1")))


def test_the_global_cap_limits_delta_too(location: StateLocation) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(), CHANGE)
        store.set_global_budget(GlobalBudget(Epsilon(100), Decimal("5e-7")), CHANGE)
        store.reserve(attempt(), selection())
        with pytest.raises(GlobalBudgetExhausted, match="global privacy budget") as refused:
            store.reserve(attempt(), selection())
        # The analyst is not told what the others left (2e-7) of the shared δ (5e-7).
        assert "2e-7" not in str(refused.value) and "5e-7" not in str(refused.value)
        assert "of the global cap's δ=5e-7" in refused.value.admin_detail
        store.reserve(attempt(), selection(delta="2e-7"))


def test_the_hash_covers_delta(location: StateLocation) -> None:
    with StateStore.open(location) as store:
        store.add_analyst("alice", "v", budget(), CHANGE)
        reservation = store.reserve(attempt(), selection())
        record = store.complete(
            reservation, decision=Decision.ACCEPTED, reason=None, rows=1, duration_ms=1.0
        )
    tamper(location, f"UPDATE audit_log SET delta_femto = 1 WHERE id = {record.id}")
    with StateStore.open(location) as store:
        check = store.verify_audit()
    assert not check.intact and check.first_bad_id == record.id


# -- upgrading a version-3 file ------------------------------------------------------------

STARTED = "2026-01-01T00:00:00.000000+00:00"


def version_3_file(path: Path) -> None:
    """A state file as dpproxy wrote it at schema version 3: analyst alice (δ = 1e-6), one
    finished charge of ε=1 and its audit record."""
    conn = sqlite3.connect(path)
    for statement in state_sqlite._statements(state_sqlite._SCHEMA):
        conn.execute(statement)
    for target in (2, 3):
        for statement in state_sqlite._statements(state_sqlite._MIGRATIONS[target]):
            conn.execute(statement)
    conn.execute(f"PRAGMA application_id={state_sqlite.APPLICATION_ID}")
    conn.execute(
        "INSERT INTO analysts (name, verifier, total_nano, default_nano, created_at,"
        " updated_at) VALUES ('alice', 'v', 10000000000, 500000000, ?, ?)",
        (STARTED, STARTED),
    )
    conn.execute(
        "INSERT INTO reservations (analyst, client_address, sql, started_at, reserved_at,"
        " epsilon_nano, laplace_rho_nano, remaining_nano, owner, status, audit_id) VALUES"
        " ('alice', 'a', 'SELECT 1', ?, ?, 1000000000, 500000000, 9000000000, 'gone',"
        " 'finished', 1)",
        (STARTED, STARTED),
    )
    fields: dict[str, object] = {
        "id": 1,
        "time": STARTED,
        "started_at": STARTED,
        "analyst": "alice",
        "client_address": "a",
        "sql": "SELECT 1",
        "decision": "accepted",
        "reason": None,
        "epsilon_nano": 1_000_000_000,
        "remaining_nano": 9_000_000_000,
        "row_count": 1,
        "duration_ms": 1.0,
        "reservation_id": 1,
    }
    digest = record_hash(state_sqlite.GENESIS_HASH, fields)
    conn.execute(
        f"INSERT INTO audit_log ({', '.join(fields)}, prev_hash, hash) VALUES"
        f" ({', '.join('?' for _ in fields)}, ?, ?)",
        (*fields.values(), state_sqlite.GENESIS_HASH, digest),
    )
    conn.execute("UPDATE audit_head SET last_id = 1, last_hash = ?", (digest,))
    conn.commit()
    conn.close()


def test_version_3_files_are_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "v3.db"
    version_3_file(path)
    with StateStore.open(path) as store:
        assert store.verify_audit().intact  # the old record's hash still verifies
        stored = store.analyst("alice")
        assert stored is not None
        assert stored.spent == Epsilon(1) and stored.delta_spent == 0
        (old,) = store.audit_records()
        assert old.delta is None and "delta" not in old.to_dict()
        reservation = store.reserve(attempt(), selection(delta="1e-9"))
        store.complete(
            reservation, decision=Decision.ACCEPTED, reason=None, rows=1, duration_ms=1.0
        )
        assert store.verify_audit().intact
        stored = store.analyst("alice")
        assert stored is not None and stored.delta_spent == Decimal("1e-9")
    assert query(path, "SELECT version FROM schema_version") == [(state_sqlite.SCHEMA_VERSION,)]
    assert query(path, "SELECT delta_femto FROM reservations ORDER BY id") == [(0,), (10**6,)]
