"""Privacy accounting for dpproxy: exact budgets, the durable ledger and the audit log.

Pure-ε accounting. The ledger and the hash-chained audit log live in one SQLite file
(:class:`StateStore`); amounts are exact (:class:`Epsilon`, nano-ε integers inside).
"""

from accountant.budget import AnalystBudget, Epsilon, NanoAmount
from accountant.errors import (
    EPSILON_SETTING,
    AccountantError,
    BudgetExhausted,
    InvalidAmount,
    PerQueryCapExceeded,
    ReservationError,
    StateStoreError,
)
from accountant.records import (
    Attempt,
    AuditRecord,
    AuditVerification,
    Decision,
    Reservation,
)
from accountant.store import RECOVERED_REASON, StateStore

__all__ = [
    "EPSILON_SETTING",
    "RECOVERED_REASON",
    "AccountantError",
    "AnalystBudget",
    "Attempt",
    "AuditRecord",
    "AuditVerification",
    "BudgetExhausted",
    "Decision",
    "Epsilon",
    "InvalidAmount",
    "NanoAmount",
    "PerQueryCapExceeded",
    "Reservation",
    "ReservationError",
    "StateStore",
    "StateStoreError",
]
