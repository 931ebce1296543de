"""Attempts whose write outcome is unknown, and how their records are settled.

A charge whose commit outcome is unknown (a PostgreSQL state store lost, or stopped
answering, after COMMIT was sent) raises WriteOutcomeUnknown and the store remembers the
attempt (:class:`InDoubt`): recording that attempt's refusal later (once the store answers
again) settles it (:func:`settle`), with exactly one audit record. A charge that was
committed is recorded as failed (the query never ran; the charge stands), else the
refusal is recorded. A refusal whose own commit was in doubt is not written twice either.
(A store closed before that leaves such a charge to the recovery of the next start, like
any open reservation.)

Apart from ``accountant.store`` because it is one concern of its own, which only
``StateStore.reserve`` and ``StateStore.record_refusal`` take part in.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from accountant import audit, ledger
from accountant.connection import Connection
from accountant.outcomes import finish
from accountant.records import Attempt, AuditRecord, Decision

#: The audit reason of a charge that was committed although dpproxy never learned it was
#: (the connection to the state store was lost after COMMIT was sent).
CHARGE_IN_DOUBT_REASON = (
    "the charge was recorded, but the state store stopped answering before dpproxy learned "
    "it was: the query was not run and no answer was given; the charge stands"
)
#: Attempts whose write is in doubt that a store remembers (the oldest are forgotten: a
#: refusal of theirs recorded later could then be written twice, never a charge).
MAX_IN_DOUBT = 10_000


class InDoubt:
    """The attempts whose charge or refusal may or may not have been committed."""

    def __init__(self) -> None:
        self._attempts: dict[tuple[str, str, str, datetime], Attempt] = {}

    def __contains__(self, attempt: Attempt) -> bool:
        return _attempt_key(attempt) in self._attempts

    def remember(self, attempt: Attempt) -> None:
        self._attempts[_attempt_key(attempt)] = attempt
        while len(self._attempts) > MAX_IN_DOUBT:
            del self._attempts[next(iter(self._attempts))]

    def forget(self, attempt: Attempt) -> None:
        self._attempts.pop(_attempt_key(attempt), None)


def settle(
    conn: Connection,
    attempt: Attempt,
    refusal: Decision,
    *,
    owner: str,
    clock: Callable[[], datetime],
) -> AuditRecord | None:
    """The record of an attempt whose write was in doubt, if it has one by now: its
    charge (recorded as failed here if still open: the query never ran), or its
    refusal. None: neither was committed. ``owner``: the store's."""
    charge = ledger.find_charge(conn, attempt, owner)
    if charge is not None:
        reservation_id, audit_id = charge
        still_open = ledger.find_open(conn, reservation_id) if audit_id is None else []
        if still_open:
            return finish(
                conn,
                still_open[0],
                decision=Decision.FAILED,
                reason=CHARGE_IN_DOUBT_REASON,
                rows=None,
                duration_ms=None,
                now=clock(),
            )
        if audit_id is not None:
            found = audit.select(
                conn, analyst=None, since=None, until=None, limit=None, record_id=audit_id
            )
            if found:
                return found[0]
    return audit.find_refusal(conn, attempt, refusal)


def _attempt_key(attempt: Attempt) -> tuple[str, str, str, datetime]:
    return (attempt.analyst, attempt.client_address, attempt.sql, attempt.started_at)
