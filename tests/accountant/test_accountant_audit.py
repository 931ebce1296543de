"""The hash-chained audit log: contents, filters, JSON, and tamper detection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from accountant import AnalystBudget, Attempt, Epsilon, StateLocation, StateStore, StateStoreError
from tests.accountant.backends import raw
from tests.accountant.backends import tamper as tamper_with

BUDGET = AnalystBudget(total=Epsilon(10), default_per_query=Epsilon(1))
T0 = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)


class FakeClock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def fill(location: StateLocation, clock: Callable[[], datetime] | None = None) -> None:
    """Five records: alice accepted, bob rejected, alice failed, bob accepted, mallory auth."""
    fake = clock if isinstance(clock, FakeClock) else None
    with StateStore.open(location, clock=clock or FakeClock()) as store:
        for analyst, sql, outcome in [
            ("alice", "SELECT count(*) FROM visits", "accepted"),
            ("bob", "DROP TABLE visits", "rejected"),
            ("alice", "SELECT sum(cost) FROM visits", "failed"),
            ("bob", "SELECT 'ünïcode ✓', count(*) FROM visits", "accepted"),
            ("mallory", "", "auth_failed"),
        ]:
            att = Attempt(analyst, "192.0.2.1:5000", sql, started_at=T0)
            if outcome in {"accepted", "failed"}:
                reservation = store.reserve(att, Epsilon("0.5"), BUDGET)
                store.complete(reservation, decision=outcome, reason=None, rows=1, duration_ms=2.5)
            else:
                store.record_refusal(att, decision=outcome, reason="no", budget=None)
            if fake is not None:
                fake.advance(hours=1)


def tamper(location: StateLocation, *statements: str) -> None:
    """Edit the state store behind dpproxy's back, as an intruder with access could."""
    tamper_with(location, *statements)


def verify(location: StateLocation) -> tuple[bool, int, int | None, str | None]:
    with StateStore.open(location) as store:
        result = store.verify_audit()
    return result.intact, result.records, result.first_bad_id, result.problem


def test_chain_links_and_verifies(location: StateLocation) -> None:
    fill(location)
    with StateStore.open(location) as store:
        records = store.audit_records()
        assert [r.id for r in records] == [1, 2, 3, 4, 5]
        assert records[0].prev_hash == "0" * 64
        for before, after in zip(records, records[1:], strict=False):
            assert after.prev_hash == before.hash
        result = store.verify_audit()
        assert result.intact and result.records == 5 and result.expected_records == 5
        assert result.first_bad_id is None and result.problem is None


def test_empty_log_verifies(location: StateLocation) -> None:
    assert verify(location) == (True, 0, None, None)


def test_the_log_cannot_be_changed_through_sql_casually(location: StateLocation) -> None:
    fill(location)
    refused = sqlite3.IntegrityError if isinstance(location, Path) else psycopg.IntegrityError
    statements = [
        ("UPDATE audit_log SET sql = 'x'", "append-only"),
        ("DELETE FROM audit_log", "append-only"),
        ("DELETE FROM reservations", "never deleted"),
    ]
    if not isinstance(location, Path):  # SQLite has no TRUNCATE
        statements += [
            ("TRUNCATE audit_log", "append-only"),
            ("TRUNCATE reservations", "never deleted"),
        ]
    with raw(location) as conn:
        for statement, message in statements:
            with pytest.raises(refused, match=message):
                conn.execute(statement)
    assert verify(location) == (True, 5, None, None)


def test_edited_sql_is_detected(location: StateLocation) -> None:
    fill(location)
    tamper(location, "UPDATE audit_log SET sql = 'SELECT 1' WHERE id = 3")
    intact, records, bad, problem = verify(location)
    assert not intact
    assert (records, bad) == (2, 3)
    assert problem == "record 3 was changed after it was written"


@pytest.mark.parametrize(
    "edit",
    [
        "UPDATE audit_log SET epsilon_nano = 1 WHERE id = 2",
        "UPDATE audit_log SET decision = 'accepted' WHERE id = 2",
        "UPDATE audit_log SET time = '2020-01-01T00:00:00.000000+00:00' WHERE id = 2",
        "UPDATE audit_log SET reason = NULL WHERE id = 2",
        "UPDATE audit_log SET duration_ms = 2.6 WHERE id = 2",
    ],
)
def test_any_edited_field_is_detected(location: StateLocation, edit: str) -> None:
    fill(location)
    tamper(location, edit)
    assert verify(location)[:3] == (False, 1, 2)


def test_rehashed_record_breaks_the_next_link(location: StateLocation) -> None:
    fill(location)
    tamper(location, "UPDATE audit_log SET hash = 'f' || substr(hash, 2) WHERE id = 2")
    intact, _, bad, problem = verify(location)
    assert not intact and bad == 2


def test_deleted_row_is_detected(location: StateLocation) -> None:
    fill(location)
    tamper(location, "DELETE FROM audit_log WHERE id = 2")
    assert verify(location) == (
        False,
        1,
        2,
        "record 2 is missing (the next record present is 3)",
    )


def test_deleted_and_renumbered_row_is_detected(location: StateLocation) -> None:
    fill(location)
    tamper(
        location,
        "DELETE FROM audit_log WHERE id = 2",
        "UPDATE audit_log SET id = id - 1 WHERE id > 2",
    )
    intact, records, bad, problem = verify(location)
    assert (intact, records, bad) == (False, 1, 2)
    assert problem == "record 2 does not link to the one before"


def test_truncated_tail_is_detected(location: StateLocation) -> None:
    fill(location)
    tamper(location, "DELETE FROM audit_log WHERE id >= 4")
    assert verify(location) == (
        False,
        3,
        4,
        "the log ends at record 3 but 5 were written: records 4 to 5 were removed from the end",
    )


def test_appending_after_tampering_keeps_the_evidence(location: StateLocation) -> None:
    fill(location)
    tamper(location, "DELETE FROM audit_log WHERE id = 5")
    with StateStore.open(location) as store:
        record = store.record_refusal(
            Attempt("bob", "x", "SELECT"), decision="rejected", reason="no", budget=None
        )
        assert record.id == 6
        result = store.verify_audit()
        assert (result.intact, result.first_bad_id) == (False, 5)


def test_filters(location: StateLocation) -> None:
    clock = FakeClock()
    fill(location, clock)  # record n is written at T0 + (n-1) hours
    with StateStore.open(location) as store:

        def ids(**filters: object) -> list[int]:
            return [r.id for r in store.audit_records(**filters)]  # type: ignore[arg-type]

        assert ids() == [1, 2, 3, 4, 5]
        assert ids(analyst="alice") == [1, 3]
        assert ids(analyst="nobody") == []
        assert ids(limit=2) == [4, 5]  # the newest two, oldest first
        assert ids(limit=0) == []
        assert ids(analyst="bob", limit=1) == [4]
        assert ids(since=T0 + timedelta(hours=1)) == [2, 3, 4, 5]  # since is inclusive
        assert ids(until=T0 + timedelta(hours=2)) == [1, 2]  # until is exclusive
        assert ids(since=T0 + timedelta(hours=1), until=T0 + timedelta(hours=3)) == [2, 3]
        other_zone = datetime(2024, 5, 1, 14, 0, tzinfo=UTC).astimezone()
        assert ids(since=other_zone) == [3, 4, 5]
        with pytest.raises(ValueError, match="timezone-aware"):
            store.audit_records(since=datetime(2024, 5, 1))
        with pytest.raises(ValueError, match="limit"):
            store.audit_records(limit=-1)


def test_to_dict_is_json_ready(location: StateLocation) -> None:
    fill(location, FakeClock())
    with StateStore.open(location) as store:
        record = store.audit_records(analyst="bob")[-1]
        verification = store.verify_audit()
    data = json.loads(json.dumps(record.to_dict()))
    assert data == {
        "id": 4,
        "time": "2024-05-01T15:00:00.000000+00:00",
        "started_at": "2024-05-01T12:00:00.000000+00:00",
        "analyst": "bob",
        "client_address": "192.0.2.1:5000",
        "sql": "SELECT 'ünïcode ✓', count(*) FROM visits",
        "decision": "accepted",
        "reason": None,
        "epsilon": "0.5",
        "remaining": "9.5",
        "rows": 1,
        "duration_ms": 2.5,
        "reservation_id": 3,
        "actor": None,
        "prev_hash": record.prev_hash,
        "hash": record.hash,
    }
    assert json.loads(json.dumps(verification.to_dict()))["intact"] is True


def test_unreadable_values_are_reported(location: StateLocation) -> None:
    fill(location)
    tamper(location, "UPDATE audit_log SET decision = 'whatever' WHERE id = 1")
    with StateStore.open(location) as store:
        with pytest.raises(StateStoreError, match="audit verify"):
            store.audit_records()
        assert store.verify_audit().first_bad_id == 1
