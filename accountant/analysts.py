"""Analysts and their budgets in the state file (functions over an open connection).

The ``analysts`` table is the source of truth for who may log in (the SCRAM verifier) and
how much each analyst may spend: the server reads it at every login and inside the
transaction of every reservation, so admin changes apply at once, without a restart.
A removed analyst stays as a tombstone (``removed = 1``): the configuration's seed never
brings them back, and their charges still count if they are added again.
Spending counts the reservations after ``reset_after`` (set by a budget reset); charges
themselves are never deleted. Callers run these inside a transaction from
``accountant.sqlite``; every change appends an audit record in the same transaction.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from accountant import audit
from accountant.budget import (
    DEFAULT_DELTA,
    AnalystBudget,
    Cost,
    Epsilon,
    Mechanism,
    Period,
    format_delta,
)
from accountant.connection import Connection
from accountant.errors import AccountantError, AnalystExists, AnalystRemoved, UnknownAnalyst
from accountant.ledger import period_spending, spent
from accountant.records import AuditRecord, Decision, iso

#: ``client_address`` of audit records written by admin commands.
ADMIN_ADDRESS = "local admin"

#: The ``analyst`` of audit records about all analysts (the global budget, the answer
#: cache): never an analyst's name.
GLOBAL_NAME = "*"
#: The longest user name a PostgreSQL client logs in with: NAMEDATALEN - 1 bytes (a
#: PostgreSQL server truncates longer ones; dpproxy reports max_identifier_length 63).
MAX_NAME_BYTES = 63
NAME_RULE = (
    f"an analyst name is 1 to {MAX_NAME_BYTES} bytes of UTF-8, without control characters "
    f'or spaces at either end, and not "{GLOBAL_NAME}" (the audit log\'s name for records '
    "about all analysts)"
)


class InvalidAnalystName(AccountantError, ValueError):
    """A name no analyst can have (see :func:`name_problem`)."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be an analyst's user name (ending in the rule), or None."""
    shown = repr(name if len(name) <= 40 else name[:40] + "…")
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return f"{shown} is not valid text; {NAME_RULE}"
    if not name:
        return f"the name is empty; {NAME_RULE}"
    if size > MAX_NAME_BYTES:
        return f"{shown} is {size} bytes long; {NAME_RULE}"
    if any(unicodedata.category(c) in ("Cc", "Zl", "Zp") for c in name):
        return f"{shown} contains a control character; {NAME_RULE}"
    if name != name.strip():
        return f"{shown} starts or ends with a space; {NAME_RULE}"
    if name == GLOBAL_NAME:
        return f"{shown} is reserved; {NAME_RULE}"
    return None


def check_name(name: str) -> None:
    """Raise InvalidAnalystName unless ``name`` can be an analyst's user name."""
    problem = name_problem(name)
    if problem is not None:
        raise InvalidAnalystName(problem)


_SELECT = (
    "SELECT name, verifier, total_nano, default_nano, cap_nano, reset_after, removed,"
    " created_at, updated_at, delta, mechanism, period FROM analysts"
)


@dataclass(frozen=True)
class AdminChange:
    """Who is making a change (``actor``: the OS user) and with which command."""

    actor: str
    command: str


@dataclass(frozen=True)
class StoredAnalyst:
    """One analyst as stored: credentials, budget, and what they spent since the last reset."""

    name: str
    verifier: str
    budget: AnalystBudget
    spent: Epsilon  # as ε at the budget's δ (pure ε exactly; ρ converted, rounded up)
    removed: bool
    created_at: datetime
    updated_at: datetime
    #: The δ spent by partition selection (GROUP BY keys found in the data), exact.
    delta_spent: Decimal = Decimal(0)

    @property
    def remaining(self) -> Epsilon:
        return self.budget.total.saturating_sub(self.spent)

    @property
    def delta_remaining(self) -> Decimal:
        """The δ partition selection may still spend (never negative)."""
        return max(self.budget.delta - self.delta_spent, Decimal(0))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready; amounts as exact decimal strings. Never includes the verifier."""
        return {
            "analyst": self.name,
            "total": self.budget.total.plain,
            "spent": self.spent.plain,
            "remaining": self.remaining.plain,
            "per_query_default": self.budget.default_per_query.plain,
            "per_query_max": self.budget.effective_cap.plain,
            "per_query_cap_set": self.budget.per_query_cap is not None,
            "delta": format_delta(self.budget.delta),
            "delta_spent": format_delta(self.delta_spent),
            "delta_remaining": format_delta(self.delta_remaining),
            "mechanism": self.budget.mechanism.value,
            "period": self.budget.period.value,
            "created_at": iso(self.created_at),
            "updated_at": iso(self.updated_at),
        }


def find(conn: Connection, name: str, now: datetime | None = None) -> StoredAnalyst | None:
    """The analyst called ``name`` (removed ones included), or None. ``spent`` counts the
    budget period containing ``now`` (default: the current time)."""
    row = conn.execute(_SELECT + " WHERE name = ?", (name,)).fetchone()
    return None if row is None else _to_analyst(conn, row, now)


def every(
    conn: Connection, *, include_removed: bool = False, now: datetime | None = None
) -> list[StoredAnalyst]:
    where = "" if include_removed else " WHERE removed = 0"
    rows = conn.execute(_SELECT + where + " ORDER BY name").fetchall()
    return [_to_analyst(conn, row, now) for row in rows]


def active(conn: Connection, name: str) -> StoredAnalyst:
    """The analyst called ``name``; UnknownAnalyst if absent or removed."""
    found = find(conn, name)
    if found is None or found.removed:
        raise UnknownAnalyst(name, [a.name for a in every(conn)])
    return found


def budget_for(
    conn: Connection,
    analyst: str,
    fallback: AnalystBudget | None,
    cost: Epsilon | Cost,
) -> AnalystBudget | None:
    """The budget that applies now: the stored one; ``fallback`` only for an analyst the
    store has never known (stores used without admin commands). A removed analyst raises
    AnalystRemoved."""
    found = find(conn, analyst)
    if found is None:
        return fallback
    if found.removed:
        raise AnalystRemoved(analyst, cost)
    return found.budget


def seed(
    conn: Connection,
    analysts: dict[str, tuple[str, AnalystBudget]],
    change: AdminChange,
    now: datetime,
) -> list[str]:
    """Add each configured analyst the store has never known (removed ones stay removed)."""
    added = []
    for name in analysts:
        check_name(name)
    for name, (verifier, budget) in sorted(analysts.items()):
        if find(conn, name) is not None:
            continue
        _insert(conn, name, verifier, budget, now)
        _audit(conn, name, change, f"added from the configuration file: {describe(budget)}", now)
        added.append(name)
    return added


def add(
    conn: Connection,
    name: str,
    *,
    verifier: str,
    budget: AnalystBudget,
    change: AdminChange,
    now: datetime,
) -> AuditRecord:
    check_name(name)
    found = find(conn, name)
    if found is not None and not found.removed:
        raise AnalystExists(name)
    if found is None:
        _insert(conn, name, verifier, budget, now)
        what = f"analyst added: {describe(budget)}"
    else:
        conn.execute(
            "UPDATE analysts SET verifier = ?, total_nano = ?, default_nano = ?, cap_nano = ?,"
            " delta = ?, mechanism = ?, period = ?, removed = 0, updated_at = ? WHERE name = ?",
            (verifier, *_amounts(budget), iso(now), name),
        )
        what = f"analyst added again (earlier charges still count): {describe(budget)}"
    return _audit(conn, name, change, what, now)


def remove(conn: Connection, name: str, change: AdminChange, now: datetime) -> AuditRecord:
    active(conn, name)
    conn.execute(
        "UPDATE analysts SET removed = 1, verifier = '', updated_at = ? WHERE name = ?",
        (iso(now), name),
    )
    return _audit(conn, name, change, "analyst removed: can no longer log in or query", now)


def set_verifier(
    conn: Connection, name: str, verifier: str, change: AdminChange, now: datetime
) -> AuditRecord:
    active(conn, name)
    conn.execute(
        "UPDATE analysts SET verifier = ?, updated_at = ? WHERE name = ?",
        (verifier, iso(now), name),
    )
    return _audit(conn, name, change, "password changed", now)


def update_budget(
    conn: Connection,
    name: str,
    update: Callable[[AnalystBudget], AnalystBudget],
    change: AdminChange,
    now: datetime,
) -> AuditRecord:
    """Replace the budget by ``update(current)``; the current one is read in this
    transaction, so concurrent changes and charges are serialized with it."""
    before = active(conn, name).budget
    after = update(before)
    conn.execute(
        "UPDATE analysts SET total_nano = ?, default_nano = ?, cap_nano = ?, delta = ?,"
        " mechanism = ?, period = ?, updated_at = ? WHERE name = ?",
        (*_amounts(after), iso(now), name),
    )
    what = f"budget changed from {describe(before)} to {describe(after)}"
    return _audit(conn, name, change, what, now)


def reset(conn: Connection, name: str, change: AdminChange, now: datetime) -> AuditRecord:
    """Start counting spending afresh: earlier charges stay in the ledger and the audit log."""
    before = spent(conn, name)
    active(conn, name)
    last = conn.execute("SELECT coalesce(max(id), 0) FROM reservations").fetchone()[0]
    conn.execute(
        "UPDATE analysts SET reset_after = ?, updated_at = ? WHERE name = ?",
        (last, iso(now), name),
    )
    return _audit(conn, name, change, f"spending reset to 0 (was {before.plain})", now)


def describe(budget: AnalystBudget) -> str:
    # The cap in force, as `analyst list` shows it: without a cap of its own, the total.
    cap = budget.effective_cap.plain + (" (the total)" if budget.per_query_cap is None else "")
    extra = ""
    if budget.delta != DEFAULT_DELTA or budget.mechanism is not Mechanism.LAPLACE:
        extra = f", delta {format_delta(budget.delta)}, {budget.mechanism.value}"
    if budget.period is not Period.NEVER:
        extra += f", refreshed {budget.period.value}"
    return (
        f"total {budget.total.plain}, default per query {budget.default_per_query.plain}, "
        f"max per query {cap}{extra}"
    )


def _amounts(budget: AnalystBudget) -> tuple[int, int, int | None, str, str, str]:
    cap = None if budget.per_query_cap is None else budget.per_query_cap.nano
    return (
        budget.total.nano,
        budget.default_per_query.nano,
        cap,
        str(budget.delta),
        budget.mechanism.value,
        budget.period.value,
    )


def _insert(
    conn: Connection, name: str, verifier: str, budget: AnalystBudget, now: datetime
) -> None:
    conn.execute(
        "INSERT INTO analysts (name, verifier, total_nano, default_nano, cap_nano, delta,"
        " mechanism, period, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (name, verifier, *_amounts(budget), iso(now), iso(now)),
    )


def audit_global(conn: Connection, change: AdminChange, what: str, now: datetime) -> AuditRecord:
    """Audit an admin change of the global budget (analyst ``*``)."""
    return _audit(conn, GLOBAL_NAME, change, what, now)


def _audit(
    conn: Connection, name: str, change: AdminChange, what: str, now: datetime
) -> AuditRecord:
    found = find(conn, name, now)
    remaining = None if found is None or found.removed else found.remaining
    new = audit.NewRecord(
        now,
        name,
        ADMIN_ADDRESS,
        change.command,
        Decision.ADMIN,
        what,
        Epsilon.zero(),
        remaining,
        None,
        None,
        None,
        change.actor,
    )
    return audit.append(conn, new, now)


def _to_analyst(conn: Connection, row: tuple[Any, ...], now: datetime | None) -> StoredAnalyst:
    name, verifier, total, default, cap, _reset_after, removed, created, updated = row[:9]
    budget = AnalystBudget(
        total=Epsilon.from_nano(total),
        default_per_query=Epsilon.from_nano(default),
        per_query_cap=None if cap is None else Epsilon.from_nano(cap),
        delta=Decimal(row[9]),
        mechanism=Mechanism(row[10]),
        period=Period(row[11]),
    )
    spending = period_spending(conn, name, period=budget.period, now=now)
    return StoredAnalyst(
        name=name,
        verifier=verifier,
        budget=budget,
        spent=spending.epsilon(budget.delta),
        delta_spent=spending.delta,
        removed=bool(removed),
        created_at=datetime.fromisoformat(created),
        updated_at=datetime.fromisoformat(updated),
    )
