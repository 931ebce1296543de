"""The durable state store: the ledger of charges and the audit log, in one SQLite file
or in a PostgreSQL schema shared by several servers (``accountant.postgres``).

Thread-safe (one lock per store); several processes may open the same file, and writers
wait for each other for up to ``timeout`` seconds. Every method commits before it returns:
fsynced, except the records of attempts that charge nothing and release nothing new
(refusals and cached answers), whose commits survive the process being killed and become
power-safe with the next fsynced commit (see ``durable`` in ``accountant.connection``).
Typical use by the query pipeline::

    reservation = store.reserve(attempt, cost, budget)      # before touching data
    ...run the query and release the answer...
    store.complete(reservation, decision="accepted", reason=None, rows=n, duration_ms=t)

and for attempts that cost nothing, ``store.record_refusal(attempt, ...)``.

A charge whose commit outcome is unknown (a PostgreSQL state store lost, or stopped
answering, after COMMIT was sent) raises WriteOutcomeUnknown and the store remembers the
attempt: recording that attempt's refusal later settles it, with exactly one audit record
(``accountant.in_doubt``). What each transaction writes for an attempt's outcome is
``accountant.outcomes``'s.

Read-only users (admin commands that only look) open the store with :meth:`open_reader`:
its own read-only connection reads while another process holds the write lock. (Opening,
and the transaction each method runs in, are ``accountant.store_base``'s.)

Analysts and their budgets live here too (``accountant.analysts``): a reservation uses the
budget as stored at that moment, read inside its own write transaction, so an admin's
concurrent change can never let an analyst overspend. The budget a caller passes is used
only for analysts the store has never known.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from decimal import Decimal

from accountant import analysts, audit, ledger, outcomes
from accountant.analysts import AdminChange, StoredAnalyst
from accountant.budget import AnalystBudget, Cost, Epsilon, format_delta
from accountant.connection import Connection, Database
from accountant.errors import (
    AnalystRemoved,
    InvalidAmount,
    ReservationError,
    UnknownAnalyst,
    WriteOutcomeUnknown,
)
from accountant.in_doubt import InDoubt, settle
from accountant.outcomes import CachedAttempt, check_rows_and_duration
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
)
from accountant.store_base import StateLocation, StoreBase

RECOVERED_REASON = "dpproxy stopped before the answer was released; the charge stands"


class StateStore(StoreBase):
    """The ledger and audit log in a SQLite file or a PostgreSQL schema (:attr:`location`).
    Create with :meth:`open`."""

    def __init__(
        self,
        location: StateLocation,
        db: Database,
        clock: Callable[[], datetime],
        *,
        read_only: bool = False,
    ) -> None:
        super().__init__(location, db, clock, read_only=read_only)
        #: Attempts whose charge or refusal may or may not have been committed.
        self._in_doubt = InDoubt()

    # -- charges -------------------------------------------------------------------------

    def reserve(
        self, attempt: Attempt, cost: Epsilon | Cost, budget: AnalystBudget | None = None
    ) -> Reservation:
        """Charge ``cost`` to ``attempt.analyst`` atomically and durably, or refuse.

        ``cost``: pure ε (an Epsilon: Laplace answers) or a :class:`Cost` with a ρ part
        (Gaussian answers), composed as in ``accountant.zcdp`` at the analyst's δ.

        The analyst's stored budget applies, read in the same transaction as the charge;
        ``budget`` only when the store does not know the analyst (None then: refused).
        Raises PerQueryCapExceeded or BudgetExhausted (AnalystRemoved for a removed
        analyst) and records nothing: log the refusal with :meth:`record_refusal`.
        The charge is never refunded.
        """
        charge = cost if isinstance(cost, Cost) else Cost.pure(cost)
        if charge.is_zero():
            raise InvalidAmount("a reservation needs a cost greater than 0")

        def work(conn: Connection) -> Reservation:
            current = analysts.budget_for(conn, attempt.analyst, budget, charge)
            if current is None:
                raise UnknownAnalyst(attempt.analyst, [a.name for a in analysts.every(conn)])
            return ledger.reserve(
                conn, attempt, charge, current, owner=self._db.owner, now=self._now()
            )

        try:
            return self._run(work)
        except WriteOutcomeUnknown as error:  # settled by record_refusal of the attempt
            error.attempt = attempt
            self._in_doubt.remember(attempt)
            raise

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
        check_rows_and_duration(rows, duration_ms)

        def work(conn: Connection) -> AuditRecord:
            found = ledger.find_open(conn, reservation.id)
            if not found:
                raise ReservationError(
                    f"reservation {reservation.id} is unknown or already finished; "
                    "complete each reservation exactly once"
                )
            return outcomes.finish(
                conn,
                found[0],
                decision=outcome,
                reason=reason,
                rows=rows,
                duration_ms=duration_ms,
                now=self._now(),
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
        An attempt whose charge (or earlier refusal record) was in doubt (WriteOutcomeUnknown)
        gets one record in all: its charge, if committed, is recorded as failed
        (CHARGE_IN_DOUBT_REASON) and returned instead; a refusal already written is returned.
        """
        outcome = parse_decision(decision, REFUSAL_DECISIONS, "a refusal's")
        check_rows_and_duration(None, duration_ms)

        def work(conn: Connection) -> AuditRecord:
            if attempt in self._in_doubt:
                settled = settle(conn, attempt, outcome, owner=self._db.owner, clock=self._now)
                if settled is not None:
                    return settled
            return outcomes.refusal(
                conn,
                attempt,
                decision=outcome,
                reason=reason,
                budget=budget,
                duration_ms=duration_ms,
                clock=self._now,
            )

        try:
            record = self._run(work, durable=False)
        except WriteOutcomeUnknown:  # a retry must not write it twice
            self._in_doubt.remember(attempt)
            raise
        self._in_doubt.forget(attempt)
        return record

    def record_cached(
        self,
        attempt: Attempt,
        *,
        reason: str,
        rows: int,
        duration_ms: float,
        budget: AnalystBudget | None,
    ) -> AuditRecord:
        """Audit an attempt answered from the answer cache: nothing is charged (no new
        noise was drawn); ``reason`` says which earlier answer was reused. A removed analyst
        raises AnalystRemoved (records nothing), like a charge would."""
        entry = CachedAttempt(attempt, reason, rows, duration_ms, budget)
        result = self.record_cached_many([entry])[0]
        if isinstance(result, AnalystRemoved):
            raise result
        return result

    def record_cached_many(
        self, entries: Sequence[CachedAttempt]
    ) -> list[AuditRecord | AnalystRemoved]:
        """Audit several cached answers in order, in one transaction (one commit for all:
        the server groups the records of concurrent sessions). Each entry gets its record,
        or AnalystRemoved (and no record) if an admin removed its analyst."""
        for entry in entries:
            check_rows_and_duration(entry.rows, entry.duration_ms)
        return self._run(lambda conn: outcomes.cached(conn, entries, self._now), durable=False)

    def clear_answer_cache(self, change: AdminChange) -> AuditRecord:
        """Make every running server forget its cached answers (e.g. after the data changed
        in PostgreSQL): the next identical query is charged and draws fresh noise."""

        def work(conn: Connection) -> AuditRecord:
            conn.execute("UPDATE answer_cache_epoch SET epoch = epoch + 1")
            what = "answer cache cleared: repeated queries are charged again"
            return analysts.audit_global(conn, change, what, self._now())

        return self._run(work)

    def recover_interrupted(self) -> int:
        """Finish reservations left open by stores that are closed or whose process died.

        Each gets a 'failed' audit record (the charge stands). Reservations of stores still
        open (in this or another live process) are left alone. Returns how many were
        recovered. Call at server start.
        """

        def work(conn: Connection) -> int:
            dead: set[str] = set()
            recovered = 0
            for stale in ledger.find_open(conn):
                if stale.owner == self._db.owner:
                    continue
                if stale.owner not in dead and self._db.owner_is_alive(stale.owner):
                    continue
                dead.add(stale.owner)
                outcomes.finish(
                    conn,
                    stale,
                    decision=Decision.FAILED,
                    reason=RECOVERED_REASON,
                    rows=None,
                    duration_ms=None,
                    now=self._now(),
                )
                recovered += 1
            return recovered

        recovered = self._run(work)
        with self._lock:
            self._db.forget_dead_owners()
        return recovered

    def spent(self, analyst: str) -> Epsilon:
        """What ``analyst`` spent since their last budget reset and in their current budget
        period, as ε at their δ."""
        return self._run(lambda conn: ledger.spent(conn, analyst, now=self._now()), write=False)

    def remaining(self, analyst: str, budget: AnalystBudget | None = None) -> Epsilon:
        """What ``analyst`` may still spend (never negative): under the stored budget, else
        under ``budget``; zero for an analyst removed or unknown."""

        def work(conn: Connection) -> Epsilon:
            stored = analysts.find(conn, analyst, self._now())
            if stored is not None:
                return Epsilon.zero() if stored.removed else stored.remaining
            if budget is None:
                return Epsilon.zero()
            used = ledger.spent(conn, analyst, budget.delta, period=budget.period, now=self._now())
            return budget.total.saturating_sub(used)

        return self._run(work, write=False)

    # -- analysts and budgets (admin) ----------------------------------------------------

    def analyst(self, name: str) -> StoredAnalyst | None:
        """The analyst called ``name`` if present and not removed."""
        found = self._run(lambda conn: analysts.find(conn, name, self._now()), write=False)
        return None if found is None or found.removed else found

    def analysts(self, *, include_removed: bool = False) -> list[StoredAnalyst]:
        return self._run(
            lambda conn: analysts.every(conn, include_removed=include_removed, now=self._now()),
            write=False,
        )

    def seed_analysts(
        self, configured: dict[str, tuple[str, AnalystBudget]], change: AdminChange
    ) -> list[str]:
        """Add the configuration's analysts the store has never known; returns their names.
        Analysts already stored (or removed) are left as they are: the store wins."""
        return self._run(lambda conn: analysts.seed(conn, configured, change, self._now()))

    def add_analyst(
        self, name: str, verifier: str, budget: AnalystBudget, change: AdminChange
    ) -> AuditRecord:
        return self._run(
            lambda conn: analysts.add(
                conn, name, verifier=verifier, budget=budget, change=change, now=self._now()
            )
        )

    def remove_analyst(self, name: str, change: AdminChange) -> AuditRecord:
        return self._run(lambda conn: analysts.remove(conn, name, change, self._now()))

    def set_verifier(self, name: str, verifier: str, change: AdminChange) -> AuditRecord:
        return self._run(
            lambda conn: analysts.set_verifier(conn, name, verifier, change, self._now())
        )

    def update_budget(
        self,
        name: str,
        update: Callable[[AnalystBudget], AnalystBudget],
        change: AdminChange,
    ) -> AuditRecord:
        """Replace the budget by ``update(current budget)``, atomically with the reading."""
        return self._run(
            lambda conn: analysts.update_budget(conn, name, update, change, self._now())
        )

    def reset_spending(self, name: str, change: AdminChange) -> AuditRecord:
        return self._run(lambda conn: analysts.reset(conn, name, change, self._now()))

    def global_budget(self) -> ledger.GlobalBudget | None:
        """The cap on all analysts' charges together, if any."""
        return self._run(ledger.global_budget, write=False)

    def global_spent(self, delta: Decimal) -> Epsilon:
        """Every charge of every analyst, ever, as ε at ``delta``."""
        return self._run(lambda conn: ledger.spending_all(conn).epsilon(delta), write=False)

    def set_global_budget(
        self, budget: ledger.GlobalBudget | None, change: AdminChange
    ) -> AuditRecord:
        """Set (or remove, with None) the global cap; audited like any admin change."""

        def work(conn: Connection) -> AuditRecord:
            ledger.set_global_budget(conn, budget)
            what = (
                "global budget removed"
                if budget is None
                else f"global budget set to ε={budget.total.plain} at δ="
                f"{format_delta(budget.delta)} over all analysts"
            )
            return analysts.audit_global(conn, change, what, self._now())

        return self._run(work)

    # -- audit ---------------------------------------------------------------------------

    def audit_records(
        self,
        *,
        analyst: str | None = None,
        limit: int | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        decisions: Collection[Decision] = (),
        record_id: int | None = None,
    ) -> list[AuditRecord]:
        """Audit records, oldest first. ``since`` ≤ time < ``until`` (timezone-aware);
        ``decisions``: only these (all if empty); with ``limit``, only the newest ``limit``
        records that match."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be 0 or more, not {limit}")
        since = None if since is None else require_utc(since, "since")
        until = None if until is None else require_utc(until, "until")
        return self._run(
            lambda conn: audit.select(
                conn,
                analyst=analyst,
                since=since,
                until=until,
                limit=limit,
                decisions=decisions,
                record_id=record_id,
            ),
            write=False,
        )

    def verify_audit(self) -> AuditVerification:
        """Recompute the hash chain: detects edited, deleted and truncated records."""
        return self._run(audit.verify, write=False)
