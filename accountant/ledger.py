"""The ledger of charges (functions over an open connection, inside a transaction).

Every reservation is a charge that stands forever; an analyst's spending is what their
reservations add up to (``accountant.zcdp``: pure ε exactly, ρ converted to ε at the
analyst's δ). A reservation is 'reserved' until its query finishes, then 'finished' with
the id of its audit record.

Partition selection (releasing GROUP BY keys found in the data) also spends δ
(``delta_femto``, exact). The δ an analyst's queries spent that way is taken off their δ
before ρ is converted: the total guarantee is (ε(ρ, δ − Σδᵢ), δ) (``Spending.epsilon``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from accountant.budget import (
    DEFAULT_DELTA,
    MAX_UNITS,
    NANO_PER_UNIT,
    AnalystBudget,
    Cost,
    Epsilon,
    Period,
    Rho,
    delta_of_units,
    format_delta,
)
from accountant.connection import Connection
from accountant.errors import (
    BudgetExhausted,
    DeltaExhausted,
    DeltaLeavesNoRoomForRho,
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
    delta_femto: int = 0  # Σ δ of partition selection, in 10⁻¹⁵ units

    def plus(self, cost: Cost) -> Spending:
        return Spending(
            self.pure_nano + cost.epsilon.nano,
            min(self.laplace_rho_nano + laplace_rho_nano(cost.epsilon), LAPLACE_RHO_LIMIT),
            self.rho_nano + cost.rho.nano,
            self.delta_femto + cost.delta_units,
        )

    @property
    def delta(self) -> Decimal:
        """The δ spent by partition selection (exact)."""
        return delta_of_units(self.delta_femto)

    def epsilon_nano(self, delta: Decimal) -> int:
        """The ε spent, at what is left of ``delta`` after partition selection's δ.

        More δ spent than ``delta`` (an admin lowered it), or ρ with no δ left to convert
        it at, counts as everything spent (OVERSPENT_NANO): fail closed."""
        left = delta - self.delta
        if left < 0 or (left == 0 and self.rho_nano > 0):
            return OVERSPENT_NANO
        return epsilon_nano_of(self.pure_nano, self.laplace_rho_nano, self.rho_nano, left)

    def epsilon(self, delta: Decimal) -> Epsilon:
        """The ε spent at ``delta`` (rounded up)."""
        return as_epsilon(self.epsilon_nano(delta))

    @property
    def rho(self) -> Rho:
        return Rho.from_nano(self.rho_nano)


#: More than any budget: what "spent" is when no ε can be stated (see Spending.epsilon_nano).
OVERSPENT_NANO = MAX_UNITS * NANO_PER_UNIT + 1

_SUMS = (
    # Σ εᵢ²/2 as a float sum, which cannot overflow (same SQL in SQLite and PostgreSQL).
    "SELECT coalesce(sum(epsilon_nano), 0),"
    " coalesce(sum(CAST(laplace_rho_nano AS DOUBLE PRECISION)), 0),"
    " coalesce(sum(rho_nano), 0), coalesce(sum(delta_femto), 0) FROM reservations"
)


def spending(conn: Connection, analyst: str, since: datetime | None = None) -> Spending:
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


def spending_all(conn: Connection) -> Spending:
    """Every charge of every analyst, ever (for the global cap: never reset)."""
    return _spending(conn.execute(_SUMS).fetchone())


def _spending(row: tuple[int, float, int, int]) -> Spending:
    laplace = LAPLACE_RHO_LIMIT if row[1] >= LAPLACE_RHO_LIMIT else int(row[1])
    return Spending(int(row[0]), laplace, int(row[2]), int(row[3]))


def spent(
    conn: Connection,
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
    return period_spending(conn, analyst, period=period, now=now).epsilon(delta)


def period_spending(
    conn: Connection, analyst: str, *, period: Period, now: datetime | None = None
) -> Spending:
    """What ``analyst`` spent since their last reset and in their current ``period``."""
    since = period.start(now if now is not None else utc_now())
    return spending(conn, analyst, since)


@dataclass(frozen=True)
class GlobalBudget:
    """A cap on all analysts' charges together (never refreshed), as ε at ``delta``."""

    total: Epsilon
    delta: Decimal


def global_budget(conn: Connection) -> GlobalBudget | None:
    row = conn.execute("SELECT total_nano, delta FROM global_budget").fetchone()
    return None if row is None else GlobalBudget(Epsilon.from_nano(row[0]), Decimal(row[1]))


def set_global_budget(conn: Connection, budget: GlobalBudget | None) -> None:
    conn.execute("DELETE FROM global_budget")
    if budget is not None:
        conn.execute(
            "INSERT INTO global_budget (singleton, total_nano, delta) VALUES (1, ?, ?)",
            (budget.total.nano, str(budget.delta)),
        )


def _check_global(conn: Connection, analyst: str, cost: Cost) -> None:
    """Refuse ``cost`` if all analysts' charges together would exceed the global cap. The
    refusal states no amount of the global budget (see GlobalBudgetExhausted)."""
    problem = _global_problem(conn, cost)
    if problem is not None:
        raise GlobalBudgetExhausted(analyst, _requested(cost), problem)


def _global_problem(conn: Connection, cost: Cost) -> str | None:
    """Why the global cap cannot pay for ``cost`` (for the admin's log), or None if it can
    (or there is no global cap)."""
    cap = global_budget(conn)
    if cap is None:
        return None
    before = spending_all(conn)
    after = before.plus(cost)
    if not cost.rho.is_zero() and cap.delta == 0:
        problem = "the global cap is pure ε (δ = 0): it cannot pay for Gaussian (ρ) answers"
    elif cost.delta and after.delta > cap.delta:
        problem = (
            f"partition selection would spend δ={format_delta(after.delta)} of the global "
            f"cap's δ={format_delta(cap.delta)}"
        )
    elif after.epsilon_nano(cap.delta) > cap.total.nano:
        problem = (
            f"all analysts would have spent {as_epsilon(after.epsilon_nano(cap.delta))} of the "
            f"global cap's {cap.total} (at δ={format_delta(cap.delta)})"
        )
    else:
        return None
    return problem


def _requested(cost: Cost) -> Epsilon | Cost:
    """What a refusal says the query needs: plain ε when that is all it spends."""
    return cost.epsilon if cost.rho.is_zero() and not cost.delta else cost


def _check_delta_leaves_room(
    analyst: str, before: Spending, cost: Cost, budget: AnalystBudget
) -> None:
    """When ``cost`` does not fit only because of its δ: its partition selection would
    leave too little of the analyst's δ to state their Gaussian (ρ) spending as ε within
    their budget (none at all: OVERSPENT_NANO). Raise DeltaLeavesNoRoomForRho, which says
    so, rather than a BudgetExhausted that advises a lower ε."""
    if not cost.delta or before.plus(cost).rho_nano == 0:
        return
    if not _fits(before, cost.with_delta(Decimal(0)), budget):
        return  # too much even without its δ: the ε (or ρ) is the problem

    largest = 0  # the most δ units the query could spend and fit (binary search: monotone)
    low, high = 1, cost.delta_units - 1
    while low <= high:
        middle = (low + high) // 2
        if _fits(before, cost.with_delta(delta_of_units(middle)), budget):
            largest, low = middle, middle + 1
        else:
            high = middle - 1
    left = max(budget.delta - before.delta - cost.delta, Decimal(0))
    raise DeltaLeavesNoRoomForRho(
        analyst, _requested(cost), cost.delta, left, delta_of_units(_two_digits_down(largest))
    )


def _two_digits_down(units: int) -> int:
    """``units`` rounded down to two significant digits (a δ people can type: 9.9e-7)."""
    scale = int(10 ** max(len(str(units)) - 2, 0))
    return units // scale * scale


def _fits(before: Spending, cost: Cost, budget: AnalystBudget) -> bool:
    return before.plus(cost).epsilon_nano(budget.delta) <= budget.total.nano


#: An analyst who has spent nothing (in their period, since their last reset).
NOTHING_SPENT = Spending(0, 0, 0)


def session_cost(epsilon: Epsilon, *, gaussian: bool, delta: Decimal = Decimal(0)) -> Cost:
    """What a query that asks for ``epsilon`` (SET dpproxy.epsilon, or the default) is
    charged, as proxy.pipeline.charge_for charges it: that pure ε (Laplace), or ρ = ε²/2
    rounded up (Gaussian); with ``delta`` when it releases keys found in the data."""
    rho = Rho.from_nano(laplace_rho_nano(epsilon))
    cost = Cost.zcdp(rho) if gaussian else Cost.pure(epsilon)
    return cost.with_delta(delta) if delta else cost


def largest_fitting_epsilon(before: Spending, cost: Cost, budget: AnalystBudget) -> Epsilon:
    """The largest ε a query like ``cost`` (the same mechanism and δ) could ask for and
    still fit ``budget`` after ``before``, charged as ``reserve`` charges it; zero if none.

    The charge grows with ε, so a binary search over nano-ε finds it exactly. Pure ε after
    pure ε composes exactly, and the answer is then what remains; otherwise (a conversion
    of ρ to ε) it is rounded down to two significant digits, a number people can type
    that still fits. The per-query cap bounds it; the global cap does not (``reserve``
    checks whether it would pay for this ε, and then names none of its amounts)."""
    gaussian = not cost.rho.is_zero()
    # No ε above the query's own can fit (for a Gaussian query, the ε whose ε²/2 is its ρ).
    asked = math.isqrt(2 * NANO_PER_UNIT * cost.rho.nano) + 1 if gaussian else cost.epsilon.nano
    high = min(asked, budget.effective_cap.nano)

    def fits(nano: int) -> bool:
        return _fits(before, _like(cost, Epsilon.from_nano(nano)), budget)

    largest, low = 0, 1
    while low <= high:
        middle = (low + high) // 2
        if fits(middle):
            largest, low = middle, middle + 1
        else:
            high = middle - 1
    if gaussian or before.rho_nano:
        largest = _two_digits_down(largest)
    return Epsilon.from_nano(largest)


def _like(cost: Cost, epsilon: Epsilon) -> Cost:
    """What a query like ``cost`` (the same mechanism and δ) is charged at ``epsilon``."""
    return session_cost(epsilon, gaussian=not cost.rho.is_zero(), delta=cost.delta)


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
    conn: Connection,
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
    if cost.delta and after.delta > budget.delta:
        left = max(budget.delta - before.delta, Decimal(0))
        raise DeltaExhausted(attempt.analyst, cost, cost.delta, left, budget.delta)
    after_nano = after.epsilon_nano(budget.delta)
    if after_nano > budget.total.nano:
        _check_delta_leaves_room(attempt.analyst, before, cost, budget)
        already = before.epsilon(budget.delta)
        alone = NOTHING_SPENT.plus(cost).epsilon_nano(budget.delta)
        fits = largest_fitting_epsilon(before, cost, budget)
        raise BudgetExhausted(
            attempt.analyst,
            _requested(cost),
            budget.total.saturating_sub(already),
            budget.total,
            fits=fits,
            whole=as_epsilon(alone) if alone > budget.total.nano else None,
            delta=budget.delta,
            shared_refuses_fit=not fits.is_zero()
            and _global_problem(conn, _like(cost, fits)) is not None,
        )
    _check_global(conn, attempt.analyst, cost)
    remaining = Epsilon.from_nano(budget.total.nano - after_nano)
    cursor = conn.execute(
        "INSERT INTO reservations (analyst, client_address, sql, started_at, reserved_at,"
        " epsilon_nano, rho_nano, laplace_rho_nano, remaining_nano, owner, status,"
        " delta_femto) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'reserved', ?) RETURNING id",
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
            cost.delta_units,
        ),
    )
    (reservation_id,) = cursor.fetchone()
    return Reservation(
        reservation_id,
        attempt.analyst,
        cost.epsilon,
        remaining,
        budget.total,
        cost.rho,
        delta=cost.delta,
        delta_remaining=budget.delta - after.delta,
    )


def find_open(conn: Connection, reservation_id: int | None = None) -> list[OpenReservation]:
    """Reservations still 'reserved' (one by id, or all), oldest first."""
    sql = (
        "SELECT id, analyst, client_address, sql, started_at, epsilon_nano, remaining_nano,"
        " owner, rho_nano, delta_femto FROM reservations WHERE status = 'reserved'"
    )
    params: tuple[int, ...] = ()
    if reservation_id is not None:
        sql += " AND id = ?"
        params = (reservation_id,)
    return [
        OpenReservation(
            id=row[0],
            attempt=Attempt(row[1], row[2], row[3], datetime.fromisoformat(row[4])),
            cost=Cost(Epsilon.from_nano(row[5]), Rho.from_nano(row[8]), delta_of_units(row[9])),
            remaining_after=Epsilon.from_nano(row[6]),
            owner=row[7],
        )
        for row in conn.execute(sql + " ORDER BY id", params)
    ]


def find_charge(conn: Connection, attempt: Attempt, owner: str) -> tuple[int, int | None] | None:
    """The id of the reservation ``owner`` made for ``attempt`` and the id of its audit
    record (None while still 'reserved'), if there is one."""
    row = conn.execute(
        "SELECT id, audit_id FROM reservations WHERE analyst = ? AND owner = ?"
        " AND started_at = ? AND client_address = ? AND sql = ? ORDER BY id LIMIT 1",
        (attempt.analyst, owner, iso(attempt.started_at), attempt.client_address, attempt.sql),
    ).fetchone()
    return None if row is None else (int(row[0]), None if row[1] is None else int(row[1]))


def finish(conn: Connection, reservation_id: int, audit_id: int) -> None:
    conn.execute(
        "UPDATE reservations SET status = 'finished', audit_id = ? WHERE id = ?",
        (audit_id, reservation_id),
    )
