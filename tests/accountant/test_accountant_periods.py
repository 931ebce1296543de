"""Budget periods (spending starts again each day, week or month) and the global cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from accountant import (
    AdminChange,
    AnalystBudget,
    Attempt,
    BudgetExhausted,
    Cost,
    Decision,
    Epsilon,
    GlobalBudget,
    GlobalBudgetExhausted,
    Period,
    Rho,
    StateLocation,
    StateStore,
)

CHANGE = AdminChange(actor="root@host", command="dpproxy budget set")


class Clock:
    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now


@pytest.mark.parametrize(
    ("period", "start"),
    [
        (Period.NEVER, None),
        (Period.DAILY, datetime(2026, 11, 18, tzinfo=UTC)),
        (Period.WEEKLY, datetime(2026, 11, 16, tzinfo=UTC)),  # a Monday
        (Period.MONTHLY, datetime(2026, 11, 1, tzinfo=UTC)),
    ],
)
def test_period_starts(period: Period, start: datetime | None) -> None:
    assert period.start(datetime(2026, 11, 18, 15, 30, tzinfo=UTC)) == start


def attempt(analyst: str = "alice") -> Attempt:
    return Attempt(analyst, "127.0.0.1", "SELECT COUNT(*) FROM visits", clock_now)


clock_now = datetime(2026, 11, 18, 23, 0, tzinfo=UTC)


def test_daily_budget_refreshes_at_midnight_utc(location: StateLocation) -> None:
    clock = Clock(clock_now)
    budget = AnalystBudget(total=Epsilon(1), default_per_query=Epsilon("0.5"), period=Period.DAILY)
    with StateStore.open(location, clock=clock) as store:
        store.add_analyst("alice", "v", budget, CHANGE)
        for _ in range(2):
            store.reserve(attempt(), Epsilon("0.5"))
        with pytest.raises(BudgetExhausted):
            store.reserve(attempt(), Epsilon("0.5"))
        assert store.remaining("alice") == Epsilon(0)
        clock.now += timedelta(hours=1, minutes=1)  # 00:01 the next day
        assert store.remaining("alice") == Epsilon(1)
        reservation = store.reserve(attempt(), Epsilon("0.5"))
        assert reservation.remaining_after == Epsilon("0.5")
        # Earlier charges stay in the ledger and the audit log.
        assert len(store.audit_records(analyst="alice", decisions=[Decision.ADMIN])) == 1
        assert store.verify_audit().intact


def test_global_cap_bounds_all_analysts_together(location: StateLocation) -> None:
    budget = AnalystBudget(total=Epsilon(5), default_per_query=Epsilon("0.5"))
    with StateStore.open(location) as store:
        for name in ("alice", "bob"):
            store.add_analyst(name, "v", budget, CHANGE)
        record = store.set_global_budget(GlobalBudget(Epsilon(1), Decimal("1e-6")), CHANGE)
        assert record.analyst == "*" and "global budget set to ε=1" in (record.reason or "")
        store.reserve(attempt("alice"), Epsilon("0.6"))
        with pytest.raises(GlobalBudgetExhausted, match="global privacy budget"):
            store.reserve(attempt("bob"), Epsilon("0.6"))
        store.reserve(attempt("bob"), Epsilon("0.4"))
        assert store.global_spent(Decimal("1e-6")) == Epsilon(1)
        # Gaussian charges count against it too, converted at the global δ.
        with pytest.raises(GlobalBudgetExhausted):
            store.reserve(attempt("alice"), Cost.zcdp(Rho("0.000001")))
        store.set_global_budget(None, CHANGE)
        assert store.global_budget() is None
        store.reserve(attempt("alice"), Cost.zcdp(Rho("0.000001")))
        assert store.verify_audit().intact
