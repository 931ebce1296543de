"""The accountant's exceptions. Every message says what went wrong and what to do about it.

All derive from :class:`AccountantError`, so the proxy can map the whole family to
SQLSTATE codes in one table.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from decimal import Decimal

    from accountant.budget import Cost, Epsilon, NanoAmount
    from accountant.records import Attempt

#: The session setting an analyst uses to choose a query's ε (named in hints).
EPSILON_SETTING = "dpproxy.epsilon"
#: The session setting for the δ of partition selection (named in hints).
DELTA_SETTING = "dpproxy.delta"


class AccountantError(Exception):
    """Root of every error raised by the ``accountant`` package."""


class InvalidAmount(AccountantError, ValueError):
    """A privacy amount (ε, ...) or budget is malformed: negative, NaN, infinite, too large."""


class BudgetExhausted(AccountantError):
    """The analyst's remaining budget is smaller than the query's cost. Nothing was charged.

    ``fits``: the largest ε the query could ask for (SET dpproxy.epsilon) and be answered
    now, as the ledger would charge it (None: not computed; zero: nothing fits).
    ``whole``: set when the query's cost alone exceeds the analyst's whole budget (so it
    could never be answered, even with nothing spent): that cost as ε at ``delta``.
    ``shared_refuses_fit``: the global cap on all analysts' charges could not pay for a
    query at ``fits`` either; the advice then names no ε, since the largest one the global
    cap pays for would tell one analyst what the others spent (see GlobalBudgetExhausted)."""

    def __init__(
        self,
        analyst: str,
        requested: Epsilon | Cost,
        remaining: Epsilon,
        total: Epsilon,
        *,
        fits: Epsilon | None = None,
        whole: Epsilon | None = None,
        delta: Decimal | None = None,
        shared_refuses_fit: bool = False,
    ):
        self.analyst = analyst
        self.requested = requested
        self.remaining = remaining
        self.total = total
        self.fits = fits
        self.whole = whole
        self.shared_refuses_fit = shared_refuses_fit
        from accountant.budget import Epsilon, format_delta  # noqa: PLC0415 - budget imports us

        if shared_refuses_fit:
            advice = (
                "the global privacy budget shared by all analysts could not pay for the "
                "largest ε left in your own budget either; ask an admin about the global "
                "budget (`dpproxy budget global`) or for more budget"
            )
        elif fits is not None and not fits.is_zero():
            advice = (
                f"lower the query's ε with SET {EPSILON_SETTING} = {fits.plain}, "
                "or ask an admin for more budget"
            )
        elif remaining.is_zero() or fits is not None:
            advice = "ask an admin for more budget"
        elif not isinstance(requested, Epsilon):  # a Gaussian cost: no simple ε to suggest
            advice = (
                f"lower the query's ε with SET {EPSILON_SETTING}, or ask an admin for more budget"
            )
        else:
            advice = (
                f"lower the query's ε with SET {EPSILON_SETTING} = {remaining.plain}, "
                "or ask an admin for more budget"
            )
        if whole is not None:
            as_epsilon = ""
            if not isinstance(requested, Epsilon) and delta is not None:
                as_epsilon = f", that is {whole} at δ={format_delta(delta)}"
            message = (
                f"this query needs {requested}{as_epsilon}, more than the whole privacy "
                f'budget of analyst "{analyst}" ({total}), so it cannot be answered even '
                f"with nothing spent; nothing was charged; {advice}"
            )
        else:
            message = (
                f'privacy budget exhausted for analyst "{analyst}": this query needs '
                f"{requested} but {remaining} remains of {total.plain}; {advice}"
            )
        super().__init__(message)


class GlobalBudgetExhausted(BudgetExhausted):
    """The global cap on all analysts' charges together cannot pay for this query (its ε,
    its δ of partition selection, or its ρ when the cap's δ is 0). Nothing was charged.

    The message, which the analyst reads (and which their ``dpproxy.my_queries`` shows),
    states no amount of the global budget: neither what is left nor its total, since that
    would tell one analyst what the others spent. ``admin_detail`` has the figures, for the
    log; admins also see them with ``dpproxy budget global``."""

    def __init__(self, analyst: str, requested: Epsilon | Cost, admin_detail: str = ""):
        from accountant.budget import Epsilon  # noqa: PLC0415 - budget imports this module

        super().__init__(analyst, requested, Epsilon.zero(), Epsilon.zero())
        self.admin_detail = admin_detail
        self.args = (
            f"this query needs {requested}, but the global privacy budget shared by all "
            "analysts cannot pay for it; nothing was charged; ask an admin about the "
            "global budget (`dpproxy budget global`)",
        )


class PerQueryCapExceeded(AccountantError):
    """The query asks for more ε than one query may spend. Nothing was charged."""

    def __init__(self, analyst: str, requested: NanoAmount, cap: NanoAmount):
        self.analyst = analyst
        self.requested = requested
        self.cap = cap
        super().__init__(
            f'this query needs {requested} but analyst "{analyst}" may spend at most {cap} '
            f"per query; lower the query's ε with SET {EPSILON_SETTING}"
            + (f" = {cap.plain}" if cap.SYMBOL == "ε" else "")
        )


class ZcdpNeedsDelta(AccountantError):
    """A Gaussian (ρ) charge for an analyst whose δ is 0 (pure ε only). Nothing was charged."""

    def __init__(self, analyst: str):
        self.analyst = analyst
        super().__init__(
            f'analyst "{analyst}" has a pure-ε budget (δ = 0), which cannot pay for Gaussian '
            "answers; SET dpproxy.mechanism = laplace, or ask an admin for a δ above 0"
        )


class DeltaExhausted(BudgetExhausted):
    """Partition selection needs more δ than the analyst has left. Nothing was charged.
    ``requested_delta`` and ``remaining_delta`` are exact Decimals. (The global cap's
    refusals are GlobalBudgetExhausted: they state no amounts.)"""

    def __init__(
        self,
        analyst: str,
        requested: Epsilon | Cost,
        requested_delta: Decimal,
        remaining_delta: Decimal,
        total_delta: Decimal,
    ):
        from accountant.budget import Epsilon, format_delta  # noqa: PLC0415 - budget imports us

        super().__init__(analyst, requested, Epsilon.zero(), Epsilon.zero())
        self.requested_delta = requested_delta
        self.remaining_delta = remaining_delta
        self.total_delta = total_delta
        whose = f'analyst "{analyst}"'
        if total_delta == 0:
            problem = f"{whose} has a pure-ε budget (δ = 0), which cannot pay for it"
        else:
            problem = (
                f"{whose} has δ={format_delta(remaining_delta)} left of {format_delta(total_delta)}"
            )
        fix = (
            "declare a public domain for the GROUP BY keys (then no δ is needed)"
            + (
                f", lower {DELTA_SETTING} (at most {format_delta(remaining_delta)})"
                if remaining_delta > 0
                else ""
            )
            + ", or ask an admin for more δ"
        )
        self.args = (
            f"this query releases GROUP BY keys found in the data (partition selection), "
            f"which spends δ={format_delta(requested_delta)}, but {problem}; {fix}",
        )


class DeltaLeavesNoRoomForRho(BudgetExhausted):
    """Partition selection's δ fits in what the analyst has left, but spending it would
    leave too little δ to state their Gaussian (ρ) spending as ε within their budget (ρ is
    converted to ε at the δ left after partition selection; with none left, it cannot be
    at all). Nothing was charged. ``largest_delta``: the most δ this query could spend and
    still fit (0: none)."""

    def __init__(
        self,
        analyst: str,
        requested: Epsilon | Cost,
        requested_delta: Decimal,
        left_after: Decimal,
        largest_delta: Decimal,
    ):
        from accountant.budget import Epsilon, format_delta  # noqa: PLC0415 - budget imports us

        super().__init__(analyst, requested, Epsilon.zero(), Epsilon.zero())
        self.requested_delta = requested_delta
        self.left_after = left_after
        self.largest_delta = largest_delta
        if left_after == 0:
            problem = (
                f'that is all the δ analyst "{analyst}" has left, and their Gaussian (ρ) '
                "spending is stated as ε at the δ left after partition selection: with no δ "
                "left it cannot be stated at all"
            )
        else:
            problem = (
                f'that would leave analyst "{analyst}" δ={format_delta(left_after)}, and their '
                "Gaussian (ρ) spending, stated as ε at the δ left after partition selection, "
                "would then come to more than their ε budget"
            )
        lower = (
            f"lower {DELTA_SETTING} (at most {format_delta(largest_delta)} fits), "
            if largest_delta > 0
            else ""
        )
        self.args = (
            "this query releases GROUP BY keys found in the data (partition selection), "
            f"which spends δ={format_delta(requested_delta)}, but {problem}; {lower}"
            "declare a public domain for the GROUP BY keys (then no δ is needed), or ask an "
            "admin for more δ",
        )


class ReservationError(AccountantError):
    """A reservation cannot be completed: it is unknown or already finished (a caller bug)."""


class StateStoreError(AccountantError):
    """The state store (ledger and audit log) cannot be opened, read or written.

    ``path``: the SQLite file, or (text) the PostgreSQL server and schema, never a password.
    """

    def __init__(self, path: Path | str, problem: str, fix: str, *, later: str = ""):
        self.path = path
        self.problem = problem
        self.fix = fix
        self.later = later
        message = self.describe()
        super().__init__(f"{message}; {later}" if later else message)

    def describe(self) -> str:
        """The message without ``later``, what a running server does about it next (which
        a command that ends, or a server that did not start, does not do)."""
        what = "state file" if isinstance(self.path, Path) else "state database"
        return f"dpproxy {what} {self.path}: {self.problem}; {self.fix}"


class WriteOutcomeUnknown(StateStoreError):
    """The state store failed while a write was being committed: the connection to a
    PostgreSQL state store was lost (or cut because the server stopped answering) after
    COMMIT was sent, so the write may or may not stand.

    ``attempt``: the attempt whose charge it was (set by ``StateStore.reserve``), else None.
    Recording a refusal of that attempt later (``StateStore.record_refusal``) settles it:
    a charge that stands is recorded as failed, else the refusal is recorded; one audit
    record either way."""

    def __init__(
        self,
        path: Path | str,
        problem: str,
        fix: str,
        attempt: Attempt | None = None,
        *,
        later: str = "",
    ) -> None:
        super().__init__(path, problem, fix, later=later)
        self.attempt = attempt


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

    def __init__(self, analyst: str, requested: Epsilon | Cost):
        from accountant.budget import Epsilon  # noqa: PLC0415 - budget imports this module

        zero = Epsilon.zero()
        super().__init__(analyst, requested, zero, zero)
        self.args = (
            f'analyst "{analyst}" was removed by an admin and may not query any more; '
            "ask an admin to add the analyst again",
        )
