"""Plain values passed to and returned by the state store: attempts, reservations, audit records."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

from accountant.budget import Epsilon, Rho, format_delta


def utc_now() -> datetime:
    return datetime.now(UTC)


def require_utc(value: datetime, what: str) -> datetime:
    """``value`` converted to UTC; naive datetimes are refused (their zone is unknown)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{what} must be timezone-aware (e.g. datetime.now(UTC)), got {value!r}")
    return value.astimezone(UTC)


def iso(value: datetime) -> str:
    """The one text form of times in the state file: UTC, microseconds, ``+00:00``.

    All stored times share this fixed width, so they sort and compare as text.
    """
    return value.astimezone(UTC).isoformat(timespec="microseconds")


class Decision(StrEnum):
    """What became of an attempt, as written in the audit log."""

    ACCEPTED = "accepted"  # charged and answered
    FAILED = "failed"  # charged, but the engine or the release failed (or dpproxy stopped)
    REJECTED = "rejected"  # not charged: unsupported SQL or policy
    OVER_BUDGET = "over_budget"  # not charged: budget or per-query cap exceeded
    ERROR = "error"  # not charged: e.g. a bad SET
    AUTH_FAILED = "auth_failed"  # not charged: login refused
    ADMIN = "admin"  # an admin changed an analyst or a budget (``actor`` says who)
    CACHED = "cached"  # not charged: the same noisy answer as before, reused


#: Decisions for a reservation (the charge stands) and for refusals (nothing charged).
CHARGED_DECISIONS = frozenset({Decision.ACCEPTED, Decision.FAILED})
REFUSAL_DECISIONS = frozenset(
    {Decision.REJECTED, Decision.OVER_BUDGET, Decision.ERROR, Decision.AUTH_FAILED}
)


def parse_decision(value: Decision | str, allowed: frozenset[Decision], what: str) -> Decision:
    try:
        decision = Decision(value)
    except ValueError:
        decision = None
    if decision is None or decision not in allowed:
        names = ", ".join(sorted(d.value for d in allowed))
        raise ValueError(f"{what} decision must be one of {names}, not {value!r}")
    return decision


@dataclass(frozen=True)
class Attempt:
    """One statement an analyst sent: who, from where, what (exactly as sent), and when."""

    analyst: str
    client_address: str
    sql: str
    started_at: datetime = field(default_factory=utc_now)

    def __post_init__(self) -> None:
        object.__setattr__(self, "started_at", require_utc(self.started_at, "started_at"))


@dataclass(frozen=True)
class Reservation:
    """A charge recorded durably before the query touches data. It is never refunded."""

    id: int
    analyst: str
    cost: Epsilon
    remaining_after: Epsilon
    #: The analyst's total budget when the charge was made (as stored at that moment).
    total: Epsilon | None = None
    #: The zCDP part of the charge (Gaussian answers); ``cost`` is the pure ε part.
    rho: Rho = field(default_factory=Rho.zero)
    #: The δ of the charge (partition selection), and the analyst's δ left after it.
    delta: Decimal = Decimal(0)
    delta_remaining: Decimal | None = None


@dataclass(frozen=True)
class AuditRecord:
    """One line of the hash-chained audit log.

    ``time`` is when the record was written, ``started_at`` when the statement arrived.
    ``epsilon`` is the pure ε charge (zero for refusals), ``rho`` the zCDP one (None if
    none); ``remaining`` the analyst's budget left (as ε at their δ) after it (None when
    no budget applies, e.g. a failed login). For an admin change (decision 'admin'),
    ``sql`` is the command and ``reason`` what changed. ``hash`` is
    sha256(prev_hash + canonical JSON of the other fields); see ``accountant.audit``.
    """

    id: int
    time: datetime
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
    prev_hash: str
    hash: str
    #: Who made an admin change (the OS user running `dpproxy`); None for queries.
    actor: str | None = None
    #: The zCDP ρ charged (Gaussian answers; None before schema version 3 or when zero).
    rho: Rho | None = None
    #: The δ charged by partition selection (None before schema version 4 or when zero).
    delta: Decimal | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: times as ISO text, amounts as exact decimal strings ("0.5")."""
        found: dict[str, Any] = {
            "id": self.id,
            "time": iso(self.time),
            "started_at": iso(self.started_at),
            "analyst": self.analyst,
            "client_address": self.client_address,
            "sql": self.sql,
            "decision": self.decision.value,
            "reason": self.reason,
            "epsilon": self.epsilon.plain,
            "remaining": None if self.remaining is None else self.remaining.plain,
            "rows": self.rows,
            "duration_ms": self.duration_ms,
            "reservation_id": self.reservation_id,
            "actor": self.actor,
            "prev_hash": self.prev_hash,
            "hash": self.hash,
        }
        if self.rho is not None:
            found["rho"] = self.rho.plain
        if self.delta is not None:
            found["delta"] = format_delta(self.delta)
        return found


@dataclass(frozen=True)
class AuditVerification:
    """The result of re-checking the audit chain.

    ``intact``: every record is present and unchanged. ``records``: how many records
    were checked (and found sound) before the first problem, or in all. ``first_bad_id``:
    the id of the first changed, missing or unlinked record; ``problem`` says what is wrong.
    ``expected_records`` is what the chain's head says the count should be.
    """

    intact: bool
    records: int
    expected_records: int
    first_bad_id: int | None = None
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "intact": self.intact,
            "records": self.records,
            "expected_records": self.expected_records,
            "first_bad_id": self.first_bad_id,
            "problem": self.problem,
        }
