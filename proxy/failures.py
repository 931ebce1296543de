"""What the client is told (and the log says) about a query the pipeline could not answer for
a reason that is not the query's: a state store that cannot record it (:func:`ledger_failure`),
a reservation another server already finished (:func:`already_recorded`), a charged query
that failed in the database, the release or post-processing (:func:`failed_after_charge`),
a client that went away before its answer was sent (:func:`client_left`), and the admin's
warning about an answer recorded as given that did not reach its client
(:func:`answer_not_written`).

Apart from ``proxy.pipeline`` because this is wording: each says whether the charge stands,
with its SQLSTATE and hint, and the pipeline only decides which applies. Logged under the
pipeline's logger (``dpproxy.pipeline``).
"""

from __future__ import annotations

import logging

from accountant import (
    Attempt,
    AuditRecord,
    Cost,
    Reservation,
    StateStoreError,
    WriteOutcomeUnknown,
)
from accountant.connection import store_is_busy
from proxy.backends import BackendError, CancelToken, QueryCanceled
from proxy.postprocess import PostProcessError
from proxy.protocol.delivery import CLIENT_DISCONNECT
from proxy.seam import QueryError
from proxy.sqlstate import (
    CONNECTION_FAILURE,
    IO_ERROR,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    QUERY_CANCELED,
    sqlstate_for,
)
from rewriter import ReleaseError

logger = logging.getLogger("dpproxy.pipeline")

#: PostgreSQL's lock_not_available: the state store stayed locked by another writer.
LOCK_NOT_AVAILABLE = "55P03"
#: The audit reason of a charged query whose client went away before its answer was sent
#: (recorded as failed, with 0 rows): stopped in the database, or its answer held back.
CLIENT_LEFT_REASON = (
    "the client disconnected before the answer was sent: no answer was given; the charge stands"
)


#: How the audit reason of a query whose post-processing failed ends: the database's
#: text quotes the noisy value that did not fit (a noisy answer, which the audit log never
#: holds: docs/privacy.md); it is in the server log.
IN_THE_LOG = "the database's message is in the server log"


def audit_reason(failure: BackendError | ReleaseError | PostProcessError) -> str:
    """The audit reason of a charged query that failed after its charge. For the admin, a
    failure in the database keeps the database's message (a table gone, a lost connection:
    dpproxy's queries are written not to fail on any row's value); a failed post-processing
    says what failed in dpproxy's words only, as its message quotes the noisy value."""
    name = type(failure).__name__
    if isinstance(failure, PostProcessError):
        return f"{name}: {failure.reason}; {IN_THE_LOG}"
    return f"{name}: {failure}"


def ledger_failure(error: StateStoreError, *, charged: Cost | None = None) -> QueryError:
    """The client's error for a state store that could not record a query: busy (locked
    by another process past the store's timeout), or unusable. Logged in one line."""
    stands = (
        f"the charge of {charged} stands (it was recorded before the query ran), but its "
        "outcome could not be recorded, so no answer is given (dpproxy records the query as "
        "failed as soon as the ledger can be written again)"
        if charged is not None
        else "the query did not run; its charge may have been recorded just before the "
        "ledger stopped answering: if so it stands, and the query is recorded as failed"
        if isinstance(error, WriteOutcomeUnknown) and error.attempt is not None
        else "nothing was charged"
    )
    if store_is_busy(error):
        logger.warning("the state store is busy; a statement was not answered: %s", error)
        return QueryError(
            LOCK_NOT_AVAILABLE,
            f"the budget ledger is busy (locked by another process); {stands}",
            hint="try again in a moment; if it stays busy, ask an admin to look at the dpproxy log",
        )
    logger.error("the state store failed; a statement was not answered: %s", error)
    return QueryError(
        IO_ERROR,
        f"the budget ledger cannot be used; {stands}",
        hint="ask an admin to look at the dpproxy log",
    )


def already_recorded(cost: Cost, reservation: Reservation) -> QueryError:
    """The client's error for a charged query whose reservation another dpproxy server
    sharing the ledger already finished: it took this server for stopped (its connection
    to the state database was lost for a moment) and recorded the query as failed."""
    logger.warning(
        "reservation %d was already recorded as failed by another server sharing the state "
        "store (this server's connection to it was lost); no answer was given",
        reservation.id,
    )
    return QueryError(
        OBJECT_NOT_IN_PREREQUISITE_STATE,
        f"the charge of {cost} stands, but no answer is given: another dpproxy server "
        "sharing the budget ledger already recorded this query as failed (this server's "
        "connection to the ledger was lost while the query ran)",
        hint="run the query again (it is charged again); if this happens often, ask an admin "
        "to look at the dpproxy log",
    )


def failed_after_charge(
    failure: BackendError | ReleaseError | PostProcessError,
    cost: Cost,
    token: CancelToken,
    *,
    kept: bool = False,
) -> tuple[str, QueryError]:
    """A charged query that failed: the reason its audit record gives, and the client's
    error (a cancel request's or the statement timeout's 57014, ``token.reason``).
    ``kept``: the noisy release is kept in the answer cache (its post-processing failed),
    so the query corrected is answered at no new cost; the error says so."""
    if isinstance(failure, QueryCanceled):
        return (
            f"{type(failure).__name__}: canceled due to {token.reason}",
            QueryError(
                QUERY_CANCELED,
                f"canceling statement due to {token.reason}; the charge of {cost} stands",
            ),
        )
    reason = audit_reason(failure)
    if isinstance(failure, PostProcessError):
        hint = (
            "check the casts and arithmetic of the select list, HAVING and ORDER BY (e.g. "
            "cast a count to bigint, not smallint)"
        )
        if kept:
            hint += (
                "; the noisy answer is kept: the same query with only those corrected is "
                "answered from it at no new cost"
            )
        return reason, QueryError(
            "22000",
            f"the noisy answer could not be post-processed: {failure.reason}; the "
            f"charge of {cost} stands",
            hint=hint,
        )
    return reason, QueryError(
        sqlstate_for(failure),
        f"the query failed in the database; the charge of {cost} stands",
        hint="if it keeps failing, ask an admin to look at the dpproxy log",
    )


def stopped_by_disconnect(
    failure: BackendError | ReleaseError | PostProcessError, token: CancelToken
) -> bool:
    """Whether ``failure`` is the database's query stopped because its client went away."""
    return (
        isinstance(failure, QueryCanceled) and token.canceled and token.reason == CLIENT_DISCONNECT
    )


def client_left(analyst: str, reservation: Reservation) -> QueryError:
    """The error for a charged query whose client went away before its answer was sent
    (recorded with CLIENT_LEFT_REASON): as PostgreSQL's, though no one reads it now."""
    logger.info(
        "the client of %s disconnected before its answer was sent; reservation %d is "
        "recorded as failed (the charge stands)",
        analyst,
        reservation.id,
    )
    return QueryError(CONNECTION_FAILURE, "connection to client lost", severity="FATAL")


def answer_not_written(record: AuditRecord, written: bool) -> None:
    """Warn the admin when the answer of ``record`` (accepted, written before the answer
    is sent) did not reach its client: it went away while the record was being written,
    or sending failed. The audit log is append-only, so the record keeps saying accepted."""
    if written:
        return
    logger.warning(
        "audit record %d says accepted (%s rows, for %s), but its answer did not reach the "
        "client: it disconnected while the record was being written, or sending failed; "
        "the audit log cannot be amended, so the record stays; the charge stands",
        record.id,
        record.rows,
        record.analyst,
    )


def cached_answer_not_written(attempt: Attempt, written: bool) -> None:
    """The same for an answer from the answer cache (nothing was charged for it)."""
    if written:
        return
    logger.warning(
        "the audit record of a cached answer to %s's query started at %s says cached, but "
        "the answer did not reach the client: it disconnected while the record was being "
        "written, or sending failed (nothing was charged): %r",
        attempt.analyst,
        attempt.started_at.isoformat(),
        attempt.sql,
    )
