"""The accountant's exceptions. Every message says what went wrong and what to do about it.

All derive from :class:`AccountantError`, so the proxy can map the whole family to
SQLSTATE codes in one table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from accountant.budget import Epsilon

#: The session setting an analyst uses to choose a query's ε (named in hints).
EPSILON_SETTING = "dpproxy.epsilon"


class AccountantError(Exception):
    """Root of every error raised by the ``accountant`` package."""


class InvalidAmount(AccountantError, ValueError):
    """A privacy amount (ε, ...) or budget is malformed: negative, NaN, infinite, too large."""


class BudgetExhausted(AccountantError):
    """The analyst's remaining budget is smaller than the query's cost. Nothing was charged."""

    def __init__(self, analyst: str, requested: Epsilon, remaining: Epsilon, total: Epsilon):
        self.analyst = analyst
        self.requested = requested
        self.remaining = remaining
        self.total = total
        if remaining.is_zero():
            advice = "ask an admin for more budget"
        else:
            advice = (
                f"lower the query's ε with SET {EPSILON_SETTING} = {remaining.plain}, "
                "or ask an admin for more budget"
            )
        super().__init__(
            f'privacy budget exhausted for analyst "{analyst}": this query needs {requested} '
            f"but {remaining} remains of {total.plain}; {advice}"
        )


class PerQueryCapExceeded(AccountantError):
    """The query asks for more ε than one query may spend. Nothing was charged."""

    def __init__(self, analyst: str, requested: Epsilon, cap: Epsilon):
        self.analyst = analyst
        self.requested = requested
        self.cap = cap
        super().__init__(
            f'this query needs {requested} but analyst "{analyst}" may spend at most {cap} '
            f"per query; lower the query's ε with SET {EPSILON_SETTING} = {cap.plain}"
        )


class ReservationError(AccountantError):
    """A reservation cannot be completed: it is unknown or already finished (a caller bug)."""


class StateStoreError(AccountantError):
    """The state file (ledger and audit log) cannot be opened, read or written."""

    def __init__(self, path: Path, problem: str, fix: str):
        self.path = path
        self.problem = problem
        self.fix = fix
        super().__init__(f"dpproxy state file {path}: {problem}; {fix}")


class UnknownAnalyst(AccountantError):
    """An admin command names an analyst that is not in the state store (or was removed)."""

    def __init__(self, analyst: str, known: list[str]):
        self.analyst = analyst
        names = ", ".join(known) or "none yet"
        super().__init__(
            f'no analyst "{analyst}" in the state store (analysts: {names}); '
            f"add one with `dpproxy analyst add {analyst}`"
        )


class AnalystExists(AccountantError):
    """`analyst add` names an analyst who is already there."""

    def __init__(self, analyst: str):
        self.analyst = analyst
        super().__init__(
            f'analyst "{analyst}" already exists; change the budget with `dpproxy budget set '
            f"{analyst}` or the password with `dpproxy analyst passwd {analyst}`"
        )


class AnalystRemoved(BudgetExhausted):
    """A query of an analyst an admin removed: nothing may be charged any more.

    A BudgetExhausted, so that every path refusing an exhausted budget refuses this too.
    """

    def __init__(self, analyst: str, requested: Epsilon):
        zero = type(requested).zero()
        super().__init__(analyst, requested, zero, zero)
        self.args = (
            f'analyst "{analyst}" was removed by an admin and may not query any more; '
            "ask an admin to add the analyst again",
        )
