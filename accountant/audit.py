"""The append-only, hash-chained audit log (functions over an open connection).

Record ``n`` stores ``prev_hash`` = hash of record ``n-1`` (64 zeros for record 1) and
``hash = sha256(prev_hash + canonical_json(fields))`` in hex, where ``fields`` are the
stored column values below (times as ISO text, amounts as integer nano-units) and the JSON
has sorted keys, no spaces and UTF-8 text. ``actor`` (the admin behind a change, schema
version 2), ``rho_nano`` (the ρ of a Gaussian charge, version 3) and ``delta_femto`` (the δ
of partition selection in 10⁻¹⁵ units, version 4) are covered too when set, so records
written before they existed keep their hashes. ``audit_head`` holds the
last id and hash, updated in the same transaction, so a deleted tail is noticed too. Ids
are consecutive. Callers run these functions inside a transaction from ``accountant.sqlite``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from accountant.budget import Epsilon, Rho, delta_of_units, delta_units
from accountant.connection import Connection
from accountant.records import Attempt, AuditRecord, AuditVerification, Decision, iso
from accountant.sqlite import GENESIS_HASH

#: The columns covered by the hash, in table order.
HASHED_COLUMNS = (
    "id",
    "time",
    "started_at",
    "analyst",
    "client_address",
    "sql",
    "decision",
    "reason",
    "epsilon_nano",
    "remaining_nano",
    "row_count",
    "duration_ms",
    "reservation_id",
)
#: Covered by the hash only when not NULL.
OPTIONAL_HASHED_COLUMNS = ("actor", "rho_nano", "delta_femto")
_COLUMNS = (*HASHED_COLUMNS, *OPTIONAL_HASHED_COLUMNS, "prev_hash", "hash")
_SELECT = f"SELECT {', '.join(_COLUMNS)} FROM audit_log"


@dataclass(frozen=True)
class NewRecord:
    """The fields of an audit record before it gets its id, time and place in the chain."""

    started_at: datetime
    analyst: str
    client_address: str
    sql: str
    decision: Decision
    reason: str | None
    epsilon: Epsilon
    remaining: Epsilon | None
    rows: int | None
    duration_ms: float | None
    reservation_id: int | None
    actor: str | None = None
    rho: Rho | None = None  # the zCDP part of a charge; None (not hashed) when zero
    delta: Decimal | None = None  # the δ of partition selection; None (not hashed) when zero


def record_hash(prev_hash: str, fields: Mapping[str, Any]) -> str:
    payload = {name: fields[name] for name in HASHED_COLUMNS}
    for name in OPTIONAL_HASHED_COLUMNS:
        if fields.get(name) is not None:
            payload[name] = fields[name]
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + canonical).encode("utf-8")).hexdigest()


def append(conn: Connection, new: NewRecord, now: datetime) -> AuditRecord:
    """Append ``new`` as the next record of the chain. Run inside a write transaction."""
    last_id, last_hash = conn.execute("SELECT last_id, last_hash FROM audit_head").fetchone()
    fields: dict[str, Any] = {
        "id": last_id + 1,
        "time": iso(now),
        "started_at": iso(new.started_at),
        "analyst": new.analyst,
        "client_address": new.client_address,
        "sql": new.sql,
        "decision": new.decision.value,
        "reason": new.reason,
        "epsilon_nano": new.epsilon.nano,
        "remaining_nano": None if new.remaining is None else new.remaining.nano,
        "row_count": new.rows,
        "duration_ms": None if new.duration_ms is None else float(new.duration_ms),
        "reservation_id": new.reservation_id,
        "actor": new.actor,
        "rho_nano": None if new.rho is None or new.rho.is_zero() else new.rho.nano,
        "delta_femto": None if not new.delta else delta_units(new.delta),
        "prev_hash": last_hash,
    }
    fields["hash"] = record_hash(last_hash, fields)
    placeholders = ", ".join("?" for _ in _COLUMNS)
    conn.execute(
        f"INSERT INTO audit_log ({', '.join(_COLUMNS)}) VALUES ({placeholders})",
        [fields[name] for name in _COLUMNS],
    )
    conn.execute("UPDATE audit_head SET last_id = ?, last_hash = ?", (fields["id"], fields["hash"]))
    return _to_record(fields)


def select(
    conn: Connection,
    *,
    analyst: str | None,
    since: datetime | None,
    until: datetime | None,
    limit: int | None,
    decisions: Collection[Decision] = (),
    record_id: int | None = None,
) -> list[AuditRecord]:
    """Records matching all filters, oldest first; with ``limit``, the newest ``limit``."""
    where: list[str] = []
    params: list[Any] = []
    if record_id is not None:
        where.append("id = ?")
        params.append(record_id)
    if decisions:
        where.append(f"decision IN ({', '.join('?' for _ in decisions)})")
        params.extend(d.value for d in decisions)
    if analyst is not None:
        where.append("analyst = ?")
        params.append(analyst)
    if since is not None:
        where.append("time >= ?")
        params.append(iso(since))
    if until is not None:
        where.append("time < ?")
        params.append(iso(until))
    sql = _SELECT + (f" WHERE {' AND '.join(where)}" if where else "") + " ORDER BY id DESC"
    if limit is not None:
        sql += " LIMIT ?"
        params.append(limit)
    rows = conn.execute(sql, params).fetchall()
    return [_to_record(dict(zip(_COLUMNS, row, strict=True))) for row in reversed(rows)]


def find_refusal(conn: Connection, attempt: Attempt, decision: Decision) -> AuditRecord | None:
    """The record of ``attempt`` refused with ``decision`` (nothing charged), if written."""
    row = conn.execute(
        _SELECT + " WHERE analyst = ? AND started_at = ? AND client_address = ? AND sql = ?"
        " AND decision = ? AND reservation_id IS NULL ORDER BY id LIMIT 1",
        (
            attempt.analyst,
            iso(attempt.started_at),
            attempt.client_address,
            attempt.sql,
            decision.value,
        ),
    ).fetchone()
    return None if row is None else _to_record(dict(zip(_COLUMNS, row, strict=True)))


def verify(conn: Connection) -> AuditVerification:
    """Recompute the chain. Run inside a read transaction (one consistent snapshot)."""
    head_id, head_hash = conn.execute("SELECT last_id, last_hash FROM audit_head").fetchone()

    def broken(count: int, bad_id: int, problem: str) -> AuditVerification:
        return AuditVerification(False, count, head_id, bad_id, problem)

    expected_id, prev_hash, count = 1, GENESIS_HASH, 0
    for row in conn.execute(_SELECT + " ORDER BY id"):
        fields = dict(zip(_COLUMNS, row, strict=True))
        record_id = fields["id"]
        if record_id != expected_id:
            return broken(
                count,
                expected_id,
                f"record {expected_id} is missing (the next record present is {record_id})",
            )
        if fields["prev_hash"] != prev_hash:
            return broken(count, record_id, f"record {record_id} does not link to the one before")
        if record_hash(prev_hash, fields) != fields["hash"]:
            return broken(count, record_id, f"record {record_id} was changed after it was written")
        prev_hash, expected_id, count = fields["hash"], expected_id + 1, count + 1
    if head_id > count:
        lost = f"record {head_id} was" if head_id == count + 1 else f"records {count + 1}"
        lost += "" if head_id == count + 1 else f" to {head_id} were"
        return broken(
            count,
            count + 1,
            f"the log ends at record {count} but {head_id} were written: "
            f"{lost} removed from the end",
        )
    if head_id < count:
        return broken(
            count,
            head_id + 1,
            f"the chain's recorded head says {head_id} records were written, {count} are present",
        )
    if head_hash != prev_hash:
        return broken(count, count, f"record {count} does not match the chain's recorded head")
    return AuditVerification(True, count, head_id)


def _to_record(fields: Mapping[str, Any]) -> AuditRecord:
    remaining = fields["remaining_nano"]
    return AuditRecord(
        id=fields["id"],
        time=datetime.fromisoformat(fields["time"]),
        started_at=datetime.fromisoformat(fields["started_at"]),
        analyst=fields["analyst"],
        client_address=fields["client_address"],
        sql=fields["sql"],
        decision=Decision(fields["decision"]),
        reason=fields["reason"],
        epsilon=Epsilon.from_nano(fields["epsilon_nano"]),
        remaining=None if remaining is None else Epsilon.from_nano(remaining),
        rows=fields["row_count"],
        duration_ms=fields["duration_ms"],
        reservation_id=fields["reservation_id"],
        actor=fields["actor"],
        rho=None if fields["rho_nano"] is None else Rho.from_nano(fields["rho_nano"]),
        delta=None if fields["delta_femto"] is None else delta_of_units(fields["delta_femto"]),
        prev_hash=fields["prev_hash"],
        hash=fields["hash"],
    )
