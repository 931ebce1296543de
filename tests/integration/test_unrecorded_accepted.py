"""An answer held back because its ACCEPTED record reported an error, whose record was in
fact written (e.g. a shared PostgreSQL ledger's connection dropped after COMMIT): the retry
finds the reservation finished. The audit log (hash-chained, append-only, so never
amended) keeps "accepted" with its row count although the client got no answer, so the
admin is warned, with the reservation's id. A held-back FAILED record found written needs
no warning: the audit says what happened.

The real state store (SQLite or PostgreSQL) through proxy.ledger; the write that "went
through although it reported an error" is a real complete() made before the retry.
"""

from __future__ import annotations

import asyncio
import logging
from decimal import Decimal
from pathlib import Path

import pytest

from accountant import AnalystBudget, Attempt, Decision, Epsilon, StateStore
from proxy.ledger import AsyncLedger
from proxy.unrecorded import UnrecordedOutcomes
from tests.accountant.backends import BACKENDS, fresh_location

BUDGET = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon("0.5"), delta=Decimal("1e-6"))
COUNT = "SELECT COUNT(*) FROM visits"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_held_back_outcome_found_recorded_after_all(
    backend: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with fresh_location(backend, tmp_path) as location:
        ledger = AsyncLedger(location, lock_timeout=1.0)

        async def scenario() -> dict[Decision, int]:
            outcomes = UnrecordedOutcomes(ledger)
            ids = {}
            for decision in (Decision.ACCEPTED, Decision.FAILED):
                attempt = Attempt("alice", "127.0.0.1", COUNT)
                reservation = await ledger.reserve(attempt, Epsilon("0.5"), BUDGET)
                ids[decision] = reservation.id
                accepted = decision is Decision.ACCEPTED
                rows, reason = (1, None) if accepted else (None, "the database failed")
                # The record is written, though the caller was told it failed ...
                await ledger.complete(
                    reservation, decision=decision, reason=reason, rows=rows, duration_ms=1.0
                )
                # ... so the pipeline held the answer back and left the outcome to record.
                outcomes.add(reservation, decision, reason, 1.0)
            assert await outcomes.record() == 0
            assert outcomes.pending == {}
            await outcomes.close()
            return ids

        try:
            with caplog.at_level(logging.INFO, logger="dpproxy.pipeline"):
                ids = asyncio.run(scenario())
        finally:
            ledger.close()
        with StateStore.open(location) as store:
            records = store.audit_records(analyst="alice")
            assert [r.decision for r in records] == [Decision.ACCEPTED, Decision.FAILED]
            assert records[0].rows == 1 and store.verify_audit().intact
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1, warnings  # the failed one's record says what happened
    (warning,) = warnings
    assert f"reservation {ids[Decision.ACCEPTED]} of alice" in warning
    assert "the audit log may say accepted" in warning
    assert "no answer was given; the charge stands" in warning
