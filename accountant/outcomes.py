"""The audit records of attempts' outcomes (functions over an open connection, inside a
write transaction of ``accountant.store``): a charge finished, a refusal, answers from the
answer cache.

Apart from ``accountant.store`` (the methods callers use) and ``accountant.store_base``
(opening, locking, transactions) because these are what the transactions write; the
charges themselves are ``accountant.ledger``'s, the hash chain ``accountant.audit``'s.
``clock`` arguments are the store's clock, read at each record as the store always did.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from accountant import analysts, audit, ledger
from accountant.analysts import StoredAnalyst
from accountant.budget import AnalystBudget, Epsilon
from accountant.connection import Connection
from accountant.errors import AnalystRemoved
from accountant.records import Attempt, AuditRecord, Decision


@dataclass(frozen=True)
class CachedAttempt:
    """An attempt answered from the answer cache, to audit with
    :meth:`StateStore.record_cached_many`: ``reason`` says which earlier answer was reused;
    ``budget`` is used only for an analyst the store does not know."""

    attempt: Attempt
    reason: str
    rows: int
    duration_ms: float
    budget: AnalystBudget | None


def check_rows_and_duration(rows: int | None, duration_ms: float | None) -> None:
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise ValueError(f"rows must be a count of 0 or more, not {rows!r}")
    if duration_ms is not None and not (math.isfinite(duration_ms) and duration_ms >= 0):
        raise ValueError(f"duration_ms must be a finite number of 0 or more, not {duration_ms!r}")


def remaining(
    conn: Connection, analyst: str, budget: AnalystBudget | None, now: datetime
) -> Epsilon | None:
    """What ``analyst`` has left in the current period: as stored, else from ``budget``
    (an analyst the store does not know); None for a removed analyst or no budget."""
    stored = analysts.find(conn, analyst, now)
    if stored is not None:
        return None if stored.removed else stored.remaining
    if budget is None:
        return None
    used = ledger.spent(conn, analyst, budget.delta, period=budget.period, now=now)
    return budget.total.saturating_sub(used)


def finish(
    conn: Connection,
    stored: ledger.OpenReservation,
    *,
    decision: Decision,
    reason: str | None,
    rows: int | None,
    duration_ms: float | None,
    now: datetime,
) -> AuditRecord:
    """Finish the open reservation ``stored`` with its audit record (the charge stands)."""
    attempt = stored.attempt
    new = audit.NewRecord(
        attempt.started_at,
        attempt.analyst,
        attempt.client_address,
        attempt.sql,
        decision,
        reason,
        stored.cost.epsilon,
        stored.remaining_after,
        rows,
        duration_ms,
        stored.id,
        rho=stored.cost.rho,
        delta=stored.cost.delta,
    )
    record = audit.append(conn, new, now)
    ledger.finish(conn, stored.id, record.id)
    return record


def refusal(
    conn: Connection,
    attempt: Attempt,
    *,
    decision: Decision,
    reason: str,
    budget: AnalystBudget | None,
    duration_ms: float | None,
    clock: Callable[[], datetime],
) -> AuditRecord:
    """The audit record of an attempt that cost nothing (what the analyst has left, from
    ``budget`` for an analyst the store does not know)."""
    left = remaining(conn, attempt.analyst, budget, clock())
    new = audit.NewRecord(
        attempt.started_at,
        attempt.analyst,
        attempt.client_address,
        attempt.sql,
        decision,
        reason,
        Epsilon.zero(),
        left,
        None,
        duration_ms,
        None,
    )
    return audit.append(conn, new, clock())


def cached(
    conn: Connection, entries: Sequence[CachedAttempt], clock: Callable[[], datetime]
) -> list[AuditRecord | AnalystRemoved]:
    """The audit records of answers from the answer cache, in order: each entry gets its
    record, or AnalystRemoved (and no record) if an admin removed its analyst."""
    now = clock()
    known: dict[str, StoredAnalyst | None] = {}
    results: list[AuditRecord | AnalystRemoved] = []
    for entry in entries:
        attempt = entry.attempt
        if attempt.analyst not in known:  # cached answers change no spending
            known[attempt.analyst] = analysts.find(conn, attempt.analyst, now)
        stored = known[attempt.analyst]
        if stored is not None and stored.removed:
            results.append(AnalystRemoved(attempt.analyst, Epsilon.zero()))
            continue
        left = (
            stored.remaining
            if stored is not None
            else remaining(conn, attempt.analyst, entry.budget, clock())
        )
        new = audit.NewRecord(
            attempt.started_at,
            attempt.analyst,
            attempt.client_address,
            attempt.sql,
            Decision.CACHED,
            entry.reason,
            Epsilon.zero(),
            left,
            entry.rows,
            entry.duration_ms,
            None,
        )
        results.append(audit.append(conn, new, clock()))
    return results
