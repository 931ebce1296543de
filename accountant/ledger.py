"""The ledger of charges (functions over an open connection, inside a transaction).

Every reservation is a charge that stands forever; an analyst's spending is what their
reservations add up to (``accountant.zcdp``: pure ε exactly, ρ converted to ε at the
analyst's δ). A reservation is 'reserved' until its query finishes, then 'finished' with
the id of its audit record.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from accountant.budget import DEFAULT_DELTA, AnalystBudget, Cost, Epsilon, Period, Rho
from accountant.errors import (
    BudgetExhausted,
    GlobalBudgetExhausted,
    PerQueryCapExceeded,
    ZcdpNeedsDelta,
)
from accountant.records import Attempt, Reservation, iso, utc_now
from accountant.zcdp import (
    LAPLACE_RHO_LIMIT,
    as_epsilon,
    epsilon_nano_of,
    laplace_rho_nano,
    rho_for_epsilon,
)


@dataclass(frozen=True)
class OpenReservation:
    """A 'reserved' row as stored: what the audit record of its outcome needs."""

    id: int
    attempt: Attempt
    cost: Cost
    remaining_after: Epsilon
    owner: str


@dataclass(frozen=True)
class Spending:
    """The exact sums of an analyst's charges since their last reset (nano-units)."""

    pure_nano: int
    laplace_rho_nano: int  # Σ εᵢ²/2 (at least LAPLACE_RHO_LIMIT means "too large to use")
    rho_nano: int

    def plus(self, cost: Cost) -> Spending:
        return Spending(
            self.pure_nano + cost.epsilon.nano,
            min(self.laplace_rho_nano + laplace_rho_nano(cost.epsilon), LAPLACE_RHO_LIMIT),
            self.rho_nano + cost.rho.nano,
        )

    def epsilon_nano(self, delta: Decimal) -> int:
        return epsilon_nano_of(self.pure_nano, self.laplace_rho_nano, self.rho_nano, delta)

    def epsilon(self, delta: Decimal) -> Epsilon:
        """The ε spent at ``delta`` (rounded up)."""
        return as_epsilon(self.epsilon_nano(delta))

    @property
    def rho(self) -> Rho:
        return Rho.from_nano(self.rho_nano)


_SUMS = (
    "SELECT coalesce(sum(epsilon_nano), 0), coalesce(total(laplace_rho_nano), 0),"
    " coalesce(sum(rho_nano), 0) FROM reservations"
)


def spending(conn: sqlite3.Connection, analyst: str, since: datetime | None = None) -> Spending:
    """What ``analyst`` spent since their last budget reset (see ``accountant.analysts``)
    and, if given, since the start of their budget period ``since``."""
    sql = (
        _SUMS + " WHERE analyst = ? AND id > "
        "coalesce((SELECT reset_after FROM analysts WHERE name = ?), 0)"
    )
    params: tuple[str, ...] = (analyst, analyst)
    if since is not None:
        sql += " AND reserved_at >= ?"
        params += (iso(since),)
    return _spending(conn.execute(sql, params).fetchone())


def spending_all(conn: sqlite3.Connection) -> Spending:
    """Every charge of every analyst, ever (for the global cap: never reset)."""
    return _spending(conn.execute(_SUMS).fetchone())


def _spending(row: tuple[int, float, int]) -> Spending:
    laplace = LAPLACE_RHO_LIMIT if row[1] >= LAPLACE_RHO_LIMIT else int(row[1])
    return Spending(int(row[0]), laplace, int(row[2]))


def spent(
    conn: sqlite3.Connection,
    analyst: str,
    delta: Decimal | None = None,
    *,
    period: Period = Period.NEVER,
    now: datetime | None = None,
) -> Epsilon:
    """The ε ``analyst`` spent since their last reset and in their current ``period``, at
    ``delta`` (their stored δ and period if ``delta`` is None)."""
    if delta is None:
        found = conn.execute(
            "SELECT delta, period FROM analysts WHERE name = ?", (analyst,)
        ).fetchone()
        delta = DEFAULT_DELTA if found is None else Decimal(found[0])
        period = Period.NEVER if found is None else Period(found[1])
    since = period.start(now if now is not None else utc_now())
    return spending(conn, analyst, since).epsilon(delta)


@dataclass(frozen=True)
class GlobalBudget:
    """A cap on all analysts' charges together (never refreshed), as ε at ``delta``."""

    total: Epsilon
    delta: Decimal


def global_budget(conn: sqlite3.Connection) -> GlobalBudget | None:
    row = conn.execute("SELECT total_nano, delta FROM global_budget").fetchone()
    return None if row is None else GlobalBudget(Epsilon.from_nano(row[0]), Decimal(row[1]))


def set_global_budget(conn: sqlite3.Connection, budget: GlobalBudget | None) -> None:
    conn.execute("DELETE FROM global_budget")
    if budget is not None:
        conn.execute(
            "INSERT INTO global_budget (singleton, total_nano, delta) VALUES (1, ?, ?)",
            (budget.total.nano, str(budget.delta)),
        )


def _check_global(conn: sqlite3.Connection, analyst: str, cost: Cost) -> None:
    cap = global_budget(conn)
    if cap is None:
        return
    if not cost.rho.is_zero() and cap.delta == 0:
        raise ZcdpNeedsDelta(analyst)
    if spending_all(conn).plus(cost).epsilon_nano(cap.delta) > cap.total.nano:
        raise GlobalBudgetExhausted(analyst, cost.epsilon if cost.rho.is_zero() else cost)


def check_cap(analyst: str, cost: Cost, budget: AnalystBudget) -> None:
    """The per-query cap bounds a query's ε setting: pure ε ≤ cap, and ρ ≤ cap²/2."""
    cap = budget.per_query_cap
    if cap is None:
        return
    if cost.epsilon > cap:
        raise PerQueryCapExceeded(analyst, cost.epsilon, cap)
    if cost.rho.nano > laplace_rho_nano(cap):
        cap_rho = Rho(str(rho_for_epsilon(float(cap))))
        raise PerQueryCapExceeded(analyst, cost.rho, cap_rho)


def reserve(
    conn: sqlite3.Connection,
    attempt: Attempt,
    cost: Cost,
    budget: AnalystBudget,
    *,
    owner: str,
    now: datetime,
) -> Reservation:
    """Charge ``cost`` if it fits. Run inside a write (``BEGIN IMMEDIATE``) transaction."""
    check_cap(attempt.analyst, cost, budget)
    if not cost.rho.is_zero() and budget.delta == 0:
        raise ZcdpNeedsDelta(attempt.analyst)
    before = spending(conn, attempt.analyst, budget.period.start(now))
    after = before.plus(cost)
    after_nano = after.epsilon_nano(budget.delta)
    if after_nano > budget.total.nano:
        already = before.epsilon(budget.delta)
        requested = cost.epsilon if cost.rho.is_zero() else cost
        raise BudgetExhausted(
            attempt.analyst, requested, budget.total.saturating_sub(already), budget.total
        )
    _check_global(conn, attempt.analyst, cost)
    remaining = Epsilon.from_nano(budget.total.nano - after_nano)
    cursor = conn.execute(
        "INSERT INTO reservations (analyst, client_address, sql, started_at, reserved_at,"
        " epsilon_nano, rho_nano, laplace_rho_nano, remaining_nano, owner, status)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'reserved')",
        (
            attempt.analyst,
            attempt.client_address,
            attempt.sql,
            iso(attempt.started_at),
            iso(now),
            cost.epsilon.nano,
            cost.rho.nano,
            laplace_rho_nano(cost.epsilon),
            remaining.nano,
            owner,
        ),
    )
    if cursor.lastrowid is None:  # pragma: no cover - sqlite always sets it after INSERT
        raise RuntimeError("SQLite did not return the new reservation's id")
    return Reservation(
        cursor.lastrowid, attempt.analyst, cost.epsilon, remaining, budget.total, cost.rho
    )


def find_open(conn: sqlite3.Connection, reservation_id: int | None = None) -> list[OpenReservation]:
    """Reservations still 'reserved' (one by id, or all), oldest first."""
    sql = (
        "SELECT id, analyst, client_address, sql, started_at, epsilon_nano, remaining_nano,"
        " owner, rho_nano FROM reservations WHERE status = 'reserved'"
    )
    params: tuple[int, ...] = ()
    if reservation_id is not None:
        sql += " AND id = ?"
        params = (reservation_id,)
    return [
        OpenReservation(
            id=row[0],
            attempt=Attempt(row[1], row[2], row[3], datetime.fromisoformat(row[4])),
            cost=Cost(Epsilon.from_nano(row[5]), Rho.from_nano(row[8])),
            remaining_after=Epsilon.from_nano(row[6]),
            owner=row[7],
        )
        for row in conn.execute(sql + " ORDER BY id", params)
    ]


def finish(conn: sqlite3.Connection, reservation_id: int, audit_id: int) -> None:
    conn.execute(
        "UPDATE reservations SET status = 'finished', audit_id = ? WHERE id = ?",
        (audit_id, reservation_id),
    )
