"""The path of one query: plan, reserve, execute, release, commit (see DESIGN.md).

Fail closed: any error before the release means no rows. Only SQL produced by the
rewriter reaches the database. The charge is durable before the database is touched and
stands whatever happens after.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass

from accountant import (
    AnalystBudget,
    Attempt,
    BudgetExhausted,
    Decision,
    Epsilon,
    PerQueryCapExceeded,
)
from proxy.backends import Backend, BackendError, CancelToken, QueryCanceled
from proxy.ledger import AsyncLedger
from proxy.seam import ColumnDescription, Notice, QueryError, StatementResult
from proxy.sqlstate import (
    CONFIGURATION_LIMIT_EXCEEDED,
    INTERNAL_ERROR,
    QUERY_CANCELED,
    sqlstate_for,
)
from rewriter import (
    Catalog,
    NoiseSource,
    OutputType,
    Plan,
    PlanRequest,
    Rejected,
    Release,
    ReleaseError,
    plan,
)

logger = logging.getLogger("dpproxy.pipeline")

TYPE_OIDS = {OutputType.BIGINT: (20, 8), OutputType.DOUBLE: (701, 8)}


@dataclass(frozen=True)
class Asker:
    """Who is asking: the analyst, their budget, and where they connect from."""

    analyst: str
    budget: AnalystBudget
    address: str


@dataclass
class Pipeline:
    catalog: Catalog
    backend: Backend
    ledger: AsyncLedger
    noise: NoiseSource

    async def describe(
        self, asker: Asker, sql: str, epsilon: Epsilon
    ) -> tuple[ColumnDescription, ...]:
        """The columns the query would return; plans it but runs and charges nothing."""
        query_plan = await self._plan(asker, sql, epsilon)
        return tuple(
            ColumnDescription(o.name, *TYPE_OIDS[t])
            for o, t in zip(query_plan.outputs, query_plan.output_types, strict=True)
        )

    async def _plan(self, asker: Asker, sql: str, epsilon: Epsilon) -> Plan:
        try:
            return plan(sql, self.catalog, PlanRequest(float(epsilon), self.backend.dialect))
        except Rejected as rejection:
            attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
            await self.ledger.refuse(attempt, Decision.REJECTED, rejection.message, asker.budget)
            raise QueryError(rejection.sqlstate, rejection.message, hint=rejection.hint) from None

    async def answer(
        self, asker: Asker, sql: str, epsilon: Epsilon, token: CancelToken
    ) -> StatementResult:
        started = time.perf_counter()
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        query_plan = await self._plan(asker, sql, epsilon)
        loss = query_plan.privacy_loss()
        if not (math.isfinite(loss) and loss <= float(epsilon)):
            # Fail closed: the plan's own privacy map must fit what will be charged.
            raise QueryError(INTERNAL_ERROR, "internal error: the plan exceeds its privacy cost")
        try:
            reservation = await self.ledger.reserve(attempt, epsilon, asker.budget)
        except (BudgetExhausted, PerQueryCapExceeded) as refusal:
            await self.ledger.refuse(attempt, Decision.OVER_BUDGET, str(refusal), asker.budget)
            raise QueryError(
                CONFIGURATION_LIMIT_EXCEEDED,
                str(refusal),
                hint="SHOW dpproxy.epsilon shows the ε a query spends in this session",
            ) from None
        try:
            exact = await self.backend.fetch_one(query_plan.sql, token)
            released = query_plan.release(exact, self.noise)
        except (BackendError, ReleaseError) as failure:
            await self.ledger.complete(
                reservation,
                decision=Decision.FAILED,
                reason=f"{type(failure).__name__}: {failure}",
                rows=None,
                duration_ms=_ms_since(started),
            )
            logger.warning("query of %s failed after charge: %s", asker.analyst, failure)
            code = sqlstate_for(failure)
            if isinstance(failure, QueryCanceled):
                message = f"canceling statement due to user request; the charge of {epsilon} stands"
                raise QueryError(QUERY_CANCELED, message) from None
            raise QueryError(
                code,
                f"the query failed in the database; the charge of {epsilon} stands",
                hint="if it keeps failing, ask an admin to look at the dpproxy log",
            ) from None
        except BaseException:
            # Anything else (cancellation of the task, a bug): the attempt is still audited.
            await self.ledger.complete(
                reservation,
                decision=Decision.FAILED,
                reason="internal error in dpproxy",
                rows=None,
                duration_ms=_ms_since(started),
            )
            raise
        record = await self.ledger.complete(
            reservation,
            decision=Decision.ACCEPTED,
            reason=None,
            rows=1,
            duration_ms=_ms_since(started),
        )
        remaining = (
            record.remaining if record.remaining is not None else reservation.remaining_after
        )
        return _result(query_plan, released, asker, epsilon, remaining)


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _result(
    query_plan: Plan, released: Release, asker: Asker, epsilon: Epsilon, remaining: Epsilon
) -> StatementResult:
    columns = tuple(ColumnDescription(v.name, *TYPE_OIDS[v.type]) for v in released.values)
    row = tuple(format_value(v.value) for v in released.values)
    intervals = []
    for value in released.values:
        if value.half_width_95 is not None:
            intervals.append(f"{value.name} ±{format_width(value.half_width_95)}")
        elif value.note:
            intervals.append(f"{value.name}: {value.note}")
    notice = Notice(
        message=(
            f"dpproxy: this answer cost {epsilon}; {asker.analyst} has "
            f"{remaining} left of {asker.budget.total}"
        ),
        detail=(
            "95% confidence of the noise: " + "; ".join(intervals) + ". "
            f"Each person counts for at most {query_plan.max_rows_per_unit} row(s) of "
            f"{query_plan.table}; values are clamped to their declared bounds."
        ),
    )
    return StatementResult(tag="SELECT 1", columns=columns, rows=(row,), notices=(notice,))


def format_width(width: float) -> str:
    if width >= 100:
        return f"{width:,.0f}"
    return f"{width:.3g}"


def format_value(value: int | float | None) -> str | None:
    if value is None:
        return None
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(value)
