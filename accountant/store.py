"""The durable state store: the ledger of charges and the audit log, in one SQLite file.

Thread-safe (one lock per store); several processes may open the same file, and writers
wait for each other for up to ``timeout`` seconds. Every method commits (fsynced) before it
returns. Typical use by the query pipeline::

    reservation = store.reserve(attempt, cost, budget)      # before touching data
    ...run the query and release the answer...
    store.complete(reservation, decision="accepted", reason=None, rows=n, duration_ms=t)

and for attempts that cost nothing, ``store.record_refusal(attempt, ...)``.
"""

from __future__ import annotations

import math
import sqlite3
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

from accountant import audit, ledger
from accountant.budget import AnalystBudget, Epsilon
from accountant.errors import InvalidAmount, ReservationError, StateStoreError
from accountant.owners import OwnerLock, owner_is_alive, sweep_dead_owners
from accountant.records import (
    CHARGED_DECISIONS,
    REFUSAL_DECISIONS,
    Attempt,
    AuditRecord,
    AuditVerification,
    Decision,
    Reservation,
    parse_decision,
    require_utc,
    utc_now,
)
from accountant.sqlite import connect, errors_named, transaction

T = TypeVar("T")

RECOVERED_REASON = "dpproxy stopped before the answer was released; the charge stands"


class StateStore:
    """The ledger and audit log in the SQLite file at :attr:`path`. Create with :meth:`open`."""

    def __init__(
        self,
        path: Path,
        conn: sqlite3.Connection,
        owner: OwnerLock,
        clock: Callable[[], datetime],
    ) -> None:
        self._path = path
        self._conn: sqlite3.Connection | None = conn
        self._owner = owner
        self._clock = clock
        self._lock = threading.Lock()

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        timeout: float = 30.0,
        clock: Callable[[], datetime] = utc_now,
    ) -> StateStore:
        """Open the state file at ``path``, creating it (and its schema) if absent.

        ``timeout``: seconds a writer waits for other writers before giving up with
        StateStoreError. ``clock``: the source of record times (tests inject one).
        """
        path = Path(path)
        require_utc(clock(), "the store's clock")
        owner = OwnerLock(path)
        try:
            conn = connect(path, timeout)
        except BaseException:
            owner.release()
            raise
        return cls(path, conn, owner, clock)

    @property
    def path(self) -> Path:
        return self._path

    def close(self) -> None:
        """Close the file. Reservations still open are finished by a later recovery."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None
            self._owner.release()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- charges -------------------------------------------------------------------------

    def reserve(self, attempt: Attempt, cost: Epsilon, budget: AnalystBudget) -> Reservation:
        """Charge ``cost`` to ``attempt.analyst`` atomically and durably, or refuse.

        Raises PerQueryCapExceeded or BudgetExhausted (and records nothing: log the refusal
        with :meth:`record_refusal`). The charge is never refunded.
        """
        if cost.is_zero():
            raise InvalidAmount("a reservation needs a cost greater than 0")
        ledger.check_cap(attempt.analyst, cost, budget)
        return self._run(
            lambda conn: ledger.reserve(
                conn, attempt, cost, budget, owner=self._owner.id, now=self._now()
            )
        )

    def complete(
        self,
        reservation: Reservation,
        *,
        decision: Decision | str,
        reason: str | None,
        rows: int | None,
        duration_ms: float,
    ) -> AuditRecord:
        """Finish ``reservation`` with its outcome ('accepted' or 'failed') and audit it."""
        outcome = parse_decision(decision, CHARGED_DECISIONS, "a reservation's")
        _check_rows_and_duration(rows, duration_ms)

        def work(conn: sqlite3.Connection) -> AuditRecord:
            found = ledger.find_open(conn, reservation.id)
            if not found:
                raise ReservationError(
                    f"reservation {reservation.id} is unknown or already finished; "
                    "complete each reservation exactly once"
                )
            return self._finish(
                conn, found[0], decision=outcome, reason=reason, rows=rows, duration_ms=duration_ms
            )

        return self._run(work)

    def record_refusal(
        self,
        attempt: Attempt,
        *,
        decision: Decision | str,
        reason: str,
        budget: AnalystBudget | None,
        duration_ms: float | None = None,
    ) -> AuditRecord:
        """Audit an attempt that cost nothing ('rejected', 'over_budget', 'error', 'auth_failed').

        ``budget``: the analyst's budget, to record what remains (None: nothing recorded).
        """
        outcome = parse_decision(decision, REFUSAL_DECISIONS, "a refusal's")
        _check_rows_and_duration(None, duration_ms)

        def work(conn: sqlite3.Connection) -> AuditRecord:
            remaining = None
            if budget is not None:
                remaining = budget.total.saturating_sub(ledger.spent(conn, attempt.analyst))
            new = audit.NewRecord(
                attempt.started_at,
                attempt.analyst,
                attempt.client_address,
                attempt.sql,
                outcome,
                reason,
                Epsilon.zero(),
                remaining,
                None,
                duration_ms,
                None,
            )
            return audit.append(conn, new, self._now())

        return self._run(work)

    def recover_interrupted(self) -> int:
        """Finish reservations left open by stores that are closed or whose process died.

        Each gets a 'failed' audit record (the charge stands). Reservations of stores still
        open (in this or another live process) are left alone. Returns how many were
        recovered. Call at server start.
        """

        def work(conn: sqlite3.Connection) -> int:
            dead: set[str] = set()
            recovered = 0
            for stale in ledger.find_open(conn):
                if stale.owner == self._owner.id:
                    continue
                if stale.owner not in dead and owner_is_alive(self._path, stale.owner):
                    continue
                dead.add(stale.owner)
                self._finish(
                    conn,
                    stale,
                    decision=Decision.FAILED,
                    reason=RECOVERED_REASON,
                    rows=None,
                    duration_ms=None,
                )
                recovered += 1
            return recovered

        recovered = self._run(work)
        sweep_dead_owners(self._path)
        return recovered

    def spent(self, analyst: str) -> Epsilon:
        """Everything ever charged to ``analyst``."""
        return self._run(lambda conn: ledger.spent(conn, analyst), write=False)

    def remaining(self, analyst: str, budget: AnalystBudget) -> Epsilon:
        """What ``analyst`` may still spend under ``budget`` (never negative)."""
        return budget.total.saturating_sub(self.spent(analyst))

    # -- audit ---------------------------------------------------------------------------

    def audit_records(
        self,
        *,
        analyst: str | None = None,
        limit: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[AuditRecord]:
        """Audit records, oldest first. ``since`` ≤ time < ``until`` (timezone-aware);
        with ``limit``, only the newest ``limit`` records that match."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        since = None if since is None else require_utc(since, "since")
        until = None if until is None else require_utc(until, "until")
        return self._run(
            lambda conn: audit.select(conn, analyst=analyst, since=since, until=until, limit=limit),
            write=False,
        )

    def verify_audit(self) -> AuditVerification:
        """Recompute the hash chain: detects edited, deleted and truncated records."""
        return self._run(audit.verify, write=False)

    # -- internals -----------------------------------------------------------------------

    def _now(self) -> datetime:
        return require_utc(self._clock(), "the store's clock")

    def _finish(
        self,
        conn: sqlite3.Connection,
        stored: ledger.OpenReservation,
        *,
        decision: Decision,
        reason: str | None,
        rows: int | None,
        duration_ms: float | None,
    ) -> AuditRecord:
        attempt = stored.attempt
        new = audit.NewRecord(
            attempt.started_at,
            attempt.analyst,
            attempt.client_address,
            attempt.sql,
            decision,
            reason,
            stored.cost,
            stored.remaining_after,
            rows,
            duration_ms,
            stored.id,
        )
        record = audit.append(conn, new, self._now())
        ledger.finish(conn, stored.id, record.id)
        return record

    def _run(self, work: Callable[[sqlite3.Connection], T], *, write: bool = True) -> T:
        with self._lock:
            if self._conn is None:
                raise StateStoreError(self._path, "this store was closed", "open it again")
            with errors_named(self._path), transaction(self._conn, write=write):
                try:
                    return work(self._conn)
                except (ValueError, TypeError, KeyError) as exc:
                    if isinstance(exc, InvalidAmount | ReservationError):
                        raise
                    raise StateStoreError(
                        self._path,
                        f"it holds a value dpproxy cannot read ({exc})",
                        "run `dpproxy audit verify`; restore the file from a backup if damaged",
                    ) from exc


def _check_rows_and_duration(rows: int | None, duration_ms: float | None) -> None:
    if rows is not None and (isinstance(rows, bool) or not isinstance(rows, int) or rows < 0):
        raise ValueError(f"rows must be a count of 0 or more, not {rows!r}")
    if duration_ms is not None and not (math.isfinite(duration_ms) and duration_ms >= 0):
        raise ValueError(f"duration_ms must be a finite number of 0 or more, not {duration_ms!r}")
