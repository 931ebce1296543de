"""The ledger of charges (functions over an open connection, inside a transaction).

Every reservation is a charge that stands forever; an analyst's spending is the sum of
their reservations. A reservation is 'reserved' until its query finishes, then 'finished'
with the id of its audit record.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from datetime import datetime

from accountant.budget import AnalystBudget, Epsilon
from accountant.errors import BudgetExhausted, PerQueryCapExceeded
from accountant.records import Attempt, Reservation, iso


@dataclass(frozen=True)
class OpenReservation:
    """A 'reserved' row as stored: what the audit record of its outcome needs."""

    id: int
    attempt: Attempt
    cost: Epsilon
    remaining_after: Epsilon
    owner: str


def spent(conn: sqlite3.Connection, analyst: str) -> Epsilon:
    """What ``analyst`` spent since their last budget reset (see ``accountant.analysts``)."""
    row = conn.execute(
        "SELECT coalesce(sum(epsilon_nano), 0) FROM reservations WHERE analyst = ? AND id > "
        "coalesce((SELECT reset_after FROM analysts WHERE name = ?), 0)",
        (analyst, analyst),
    ).fetchone()
    return Epsilon.from_nano(row[0])


def check_cap(analyst: str, cost: Epsilon, budget: AnalystBudget) -> None:
    if budget.per_query_cap is not None and cost > budget.per_query_cap:
        raise PerQueryCapExceeded(analyst, cost, budget.per_query_cap)


def reserve(
    conn: sqlite3.Connection,
    attempt: Attempt,
    cost: Epsilon,
    budget: AnalystBudget,
    *,
    owner: str,
    now: datetime,
) -> Reservation:
    """Charge ``cost`` if it fits. Run inside a write (``BEGIN IMMEDIATE``) transaction."""
    check_cap(attempt.analyst, cost, budget)
    already = spent(conn, attempt.analyst)
    if already + cost > budget.total:
        raise BudgetExhausted(
            attempt.analyst, cost, budget.total.saturating_sub(already), budget.total
        )
    remaining = budget.total - (already + cost)
    cursor = conn.execute(
        "INSERT INTO reservations (analyst, client_address, sql, started_at, reserved_at,"
        " epsilon_nano, remaining_nano, owner, status)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'reserved')",
        (
            attempt.analyst,
            attempt.client_address,
            attempt.sql,
            iso(attempt.started_at),
            iso(now),
            cost.nano,
            remaining.nano,
            owner,
        ),
    )
    if cursor.lastrowid is None:  # pragma: no cover - sqlite always sets it after INSERT
        raise RuntimeError("SQLite did not return the new reservation's id")
    return Reservation(cursor.lastrowid, attempt.analyst, cost, remaining, budget.total)


def find_open(conn: sqlite3.Connection, reservation_id: int | None = None) -> list[OpenReservation]:
    """Reservations still 'reserved' (one by id, or all), oldest first."""
    sql = (
        "SELECT id, analyst, client_address, sql, started_at, epsilon_nano, remaining_nano,"
        " owner FROM reservations WHERE status = 'reserved'"
    )
    params: tuple[int, ...] = ()
    if reservation_id is not None:
        sql += " AND id = ?"
        params = (reservation_id,)
    return [
        OpenReservation(
            id=row[0],
            attempt=Attempt(row[1], row[2], row[3], datetime.fromisoformat(row[4])),
            cost=Epsilon.from_nano(row[5]),
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
