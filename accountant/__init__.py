"""Privacy accounting for dpproxy: exact budgets, the durable ledger and the audit log.

Pure ε (Laplace) and zCDP ρ (Gaussian) charges against (ε, δ) budgets
(``accountant.zcdp``). The ledger, the analysts with their budgets, and the hash-chained audit
log live in one SQLite file or in a PostgreSQL schema shared by several servers
(:class:`StateStore`, :class:`PostgresState`); amounts are exact (:class:`Epsilon`,
nano-ε integers inside).
"""

from accountant.analysts import ADMIN_ADDRESS, AdminChange, StoredAnalyst
from accountant.budget import (
    DEFAULT_DELTA,
    AnalystBudget,
    Cost,
    Epsilon,
    Mechanism,
    NanoAmount,
    Period,
    Rho,
    format_delta,
)
from accountant.errors import (
    EPSILON_SETTING,
    AccountantError,
    AnalystExists,
    AnalystRemoved,
    BudgetExhausted,
    GlobalBudgetExhausted,
    InvalidAmount,
    PerQueryCapExceeded,
    ReservationError,
    StateStoreError,
    UnknownAnalyst,
    WriteOutcomeUnknown,
    ZcdpNeedsDelta,
)
from accountant.ledger import GlobalBudget
from accountant.postgres_state import PostgresState
from accountant.reader import StateReader
from accountant.records import (
    Attempt,
    AuditRecord,
    AuditVerification,
    Decision,
    Reservation,
)
from accountant.store import RECOVERED_REASON, StateStore
from accountant.store_base import StateLocation

__all__ = [
    "ADMIN_ADDRESS",
    "DEFAULT_DELTA",
    "Cost",
    "GlobalBudget",
    "GlobalBudgetExhausted",
    "Mechanism",
    "Period",
    "Rho",
    "format_delta",
    "ZcdpNeedsDelta",
    "EPSILON_SETTING",
    "RECOVERED_REASON",
    "AccountantError",
    "AdminChange",
    "AnalystBudget",
    "AnalystExists",
    "AnalystRemoved",
    "Attempt",
    "AuditRecord",
    "AuditVerification",
    "BudgetExhausted",
    "Decision",
    "Epsilon",
    "InvalidAmount",
    "NanoAmount",
    "PerQueryCapExceeded",
    "PostgresState",
    "Reservation",
    "ReservationError",
    "StateLocation",
    "StateReader",
    "StateStore",
    "StateStoreError",
    "StoredAnalyst",
    "UnknownAnalyst",
    "WriteOutcomeUnknown",
]
