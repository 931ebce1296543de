"""Queries whose audit record the state store could not write when they ended.

An answer is released only once its audit record is written. When the state store cannot
write it (locked by another process past its timeout, or failing), the charge recorded by
the reservation stands, no answer is given, and the query waits here to be recorded as
failed as soon as the store can be written again: retried every RETRY_SECONDS in the
background, once more when dpproxy stops, and by the next start if all that failed.

Refused attempts (nothing charged: rejected, over budget, canceled, or refused because the
store itself could not be used) whose record could not be written wait here too, and are
recorded with the same retries. Only their record is late: the analyst got the refusal at
once. They live in memory only: those still unwritten when dpproxy stops are written to
its log instead (a warning each).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

from accountant import (
    AnalystBudget,
    Attempt,
    Decision,
    Reservation,
    ReservationError,
    StateStoreError,
)
from proxy.ledger import AsyncLedger

logger = logging.getLogger("dpproxy.pipeline")

#: Seconds between tries to record the outcomes still unrecorded.
RETRY_SECONDS = 1.0
#: Refused attempts kept at most (beyond, each is written to the log instead, a warning).
MAX_REFUSALS = 10_000
#: The audit reason of an answer that was not released because its record could not be
#: written: it is recorded as failed once the state store can be written again.
UNRECORDED_REASON = (
    "the answer was not released: its outcome could not be recorded when the query "
    "finished (the state store was busy or failing); the charge stands"
)


@dataclass(frozen=True)
class Unrecorded:
    """A charged query recorded as failed (no answer was given) once the store can be
    written."""

    reservation: Reservation
    reason: str
    duration_ms: float
    #: The outcome whose record failed: ACCEPTED if the answer was held back for it.
    decision: Decision


@dataclass(frozen=True)
class UnrecordedRefusal:
    """A refused attempt (nothing charged) to audit once the store can be written."""

    attempt: Attempt
    decision: Decision
    reason: str
    budget: AnalystBudget | None


class UnrecordedOutcomes:
    """The charged queries not recorded yet, by reservation id (their charges stand and
    count all along: the reservation is in the ledger), and the refused attempts not
    audited yet, oldest first."""

    def __init__(self, ledger: AsyncLedger) -> None:
        self.pending: dict[int, Unrecorded] = {}
        self.refusals: list[UnrecordedRefusal] = []
        self._ledger = ledger
        self._retrying: asyncio.Task[None] | None = None

    def add(
        self, reservation: Reservation, decision: Decision, reason: str | None, ms: float
    ) -> None:
        """Keep ``reservation`` (whose record just failed) and retry in the background."""
        failed = reason if decision is Decision.FAILED and reason else UNRECORDED_REASON
        self.pending[reservation.id] = Unrecorded(reservation, failed, ms, decision)
        self.retry()

    def refused(
        self, attempt: Attempt, decision: Decision, reason: str, budget: AnalystBudget | None
    ) -> None:
        """Keep a refused attempt whose audit record just failed, and retry in the
        background. (The same attempt again is kept once: the state store writes one
        record per attempt.)"""
        refusal = UnrecordedRefusal(attempt, decision, reason, budget)
        if any(kept.attempt == attempt for kept in self.refusals):
            return
        if len(self.refusals) >= MAX_REFUSALS:
            _log_unwritten(refusal, "too many refused attempts are waiting for the state store")
            return
        logger.warning(
            "the audit record of a refused query of %s could not be written; it is written "
            "as soon as the state store can be written again",
            attempt.analyst,
        )
        self.refusals.append(refusal)
        self.retry()

    def retry(self) -> None:
        """Start retrying in the background, unless already."""
        if not self._waiting or (self._retrying is not None and not self._retrying.done()):
            return
        self._retrying = asyncio.get_running_loop().create_task(self._retry_until_recorded())

    @property
    def _waiting(self) -> int:
        return len(self.pending) + len(self.refusals)

    async def _retry_until_recorded(self) -> None:
        try:
            while self._waiting:
                await asyncio.sleep(RETRY_SECONDS)
                await self.record()
        except Exception:  # a bug: the reservations stay open until the next start
            logger.exception("recording the outcome of charged queries failed")

    async def record(self) -> int:
        """Try once to record each pending query as failed, then each refused attempt.
        Returns how many are still unrecorded (the store is still busy or failing). A
        reservation already finished (by another server sharing the store, or by a commit
        that went through although it reported an error) is dropped."""
        if await self._record_outcomes():
            await self._record_refusals()
        return self._waiting

    async def _record_refusals(self) -> None:
        while self.refusals:
            refusal = self.refusals[0]
            try:
                record = await self._ledger.refuse(
                    refusal.attempt, refusal.decision, refusal.reason, refusal.budget
                )
            except StateStoreError as error:
                logger.debug("the state store still cannot record refusals: %s", error)
                return
            logger.warning(
                "recorded a refused query of %s (audit record %d), now that the state store "
                "can be written again",
                refusal.attempt.analyst,
                record.id,
            )
            self.refusals.pop(0)

    async def _record_outcomes(self) -> bool:
        """Record the pending charged queries; False if the store still cannot."""
        for pending in list(self.pending.values()):
            reservation = pending.reservation
            try:
                record = await self._ledger.complete(
                    reservation,
                    decision=Decision.FAILED,
                    reason=pending.reason,
                    rows=None,
                    duration_ms=pending.duration_ms,
                )
            except StateStoreError as error:
                logger.debug("the state store still cannot record outcomes: %s", error)
                return False
            except ReservationError:
                _already_finished(pending)
            else:
                logger.warning(
                    "recorded the outcome of a charged query of %s as failed (audit record %d), "
                    "now that the state store can be written again",
                    reservation.analyst,
                    record.id,
                )
            self.pending.pop(reservation.id, None)
        return True

    async def close(self) -> None:
        """Stop retrying in the background and try once more; those still left are
        recorded as failed when dpproxy next starts."""
        task, self._retrying = self._retrying, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if not self._waiting or not await self.record():
            return
        if self.pending:
            logger.warning(
                "%d charged queries have no recorded outcome yet (the state store cannot be "
                "written); dpproxy records them as failed when it next starts (charges stand)",
                len(self.pending),
            )
        for refusal in self.refusals:
            _log_unwritten(refusal, "dpproxy stopped before the state store could be written")
        self.refusals.clear()


def _log_unwritten(refusal: UnrecordedRefusal, why: str) -> None:
    """The log's record of a refused attempt the audit log will never have."""
    attempt = refusal.attempt
    logger.warning(
        "%s: not in the audit log: a query of %s from %s at %s, %s (%s; nothing was charged): %r",
        why,
        attempt.analyst,
        attempt.client_address,
        attempt.started_at.isoformat(),
        refusal.decision.value,
        refusal.reason,
        attempt.sql,
    )


def _already_finished(pending: Unrecorded) -> None:
    """Log a pending query found finished. One held back because its ACCEPTED record
    failed was most likely recorded after all (the write reported an error but committed,
    e.g. a shared PostgreSQL ledger's connection dropped after COMMIT): the audit log then
    says accepted, with a row count, although no answer was given. The log is hash-chained
    and append-only, so that record cannot be amended: the admin is warned instead."""
    reservation = pending.reservation
    if pending.decision is Decision.ACCEPTED:
        logger.warning(
            "reservation %d of %s was already recorded, most likely as accepted (its "
            "accepted record reported an error but was written): the audit log may say "
            "accepted, with a row count, but no answer was given; the charge stands",
            reservation.id,
            reservation.analyst,
        )
    else:
        logger.info("reservation %d was already finished elsewhere", reservation.id)
