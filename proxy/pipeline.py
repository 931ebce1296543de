"""The path of one query: plan, reserve, execute, release, commit (see DESIGN.md).

Fail closed: any error before the release means no rows. Only SQL produced by the
rewriter reaches the database. The charge is durable before the database is touched and
stands whatever happens after.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Hashable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Any, Generic, Literal, TypeVar

from accountant import (
    AnalystBudget,
    Attempt,
    AuditRecord,
    BudgetExhausted,
    Cost,
    Decision,
    Epsilon,
    GlobalBudgetExhausted,
    Mechanism,
    PerQueryCapExceeded,
    Reservation,
    ReservationError,
    Rho,
    StateStoreError,
    ZcdpNeedsDelta,
)
from accountant.budget import format_delta
from accountant.connection import store_is_busy
from accountant.zcdp import laplace_rho_nano
from proxy.answers import AnswerCache, CachedAnswer, CacheKey
from proxy.backends import Backend, BackendError, CancelToken, QueryCanceled
from proxy.ledger import AsyncLedger
from proxy.postprocess import (
    Answer,
    PostProcessError,
    PostProcessor,
    ReportColumn,
    interval_columns,
    with_intervals,
)
from proxy.seam import ColumnDescription, Notice, QueryError, StatementResult
from proxy.sqlstate import (
    CONFIGURATION_LIMIT_EXCEEDED,
    CONNECTION_FAILURE,
    INTERNAL_ERROR,
    INVALID_PARAMETER_VALUE,
    IO_ERROR,
    OBJECT_NOT_IN_PREREQUISITE_STATE,
    QUERY_CANCELED,
    sqlstate_for,
)
from proxy.unrecorded import UnrecordedOutcomes
from proxy.workers import Workers
from rewriter import (
    Catalog,
    NoiseSource,
    Plan,
    PlanRequest,
    Rejected,
    Release,
    ReleaseError,
    plan,
)
from rewriter.bias import CHECK_SHARE
from rewriter.passes.constants import Constant, evaluation_sql

logger = logging.getLogger("dpproxy.pipeline")

PLAN_CACHE_SIZE = 1024
#: Threads that plan queries (parsing and rewriting: CPU work, off the event loop).
PLANNING_THREADS = 4
#: PostgreSQL's lock_not_available: the state store stayed locked by another writer.
LOCK_NOT_AVAILABLE = "55P03"
#: ``SET dpproxy.report``: intervals (and bias flags) in a NOTICE only, or also as
#: ``<name>_ci95`` and ``<name>_bias`` columns.
Report = Literal["notice", "columns"]


class PlanCache:
    """Recently made plans. A plan is a pure value of (SQL, request) over a fixed catalog,
    so it can be reused; rejections are never cached (each one is audited). Kept for each
    analyst apart: a remembered plan answers a Describe in a fraction of the time a new
    one takes, and that time, free of charge, would tell one analyst which queries (and
    which constants in them) another has asked."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._plans: OrderedDict[tuple[str, str, PlanRequest], Plan] = OrderedDict()

    def get(self, analyst: str, sql: str, request: PlanRequest) -> Plan | None:
        found = self._plans.get((analyst, sql, request))
        if found is not None:
            self._plans.move_to_end((analyst, sql, request))
        return found

    def put(self, analyst: str, sql: str, request: PlanRequest, made: Plan) -> None:
        self._plans[(analyst, sql, request)] = made
        if len(self._plans) > self._size:
            self._plans.popitem(last=False)


T = TypeVar("T")


class PerPlan(Generic[T]):
    """Values that depend only on a plan (and a small extra key), computed once per plan
    object while it is among the ``size`` most recently computed. Plans from the PlanCache
    come back as the same object, so a repeated query skips the work (describing its
    columns in DuckDB, recomputing its privacy loss)."""

    def __init__(self, size: int) -> None:
        self._size = size
        # id(plan) -> (the plan itself, which keeps the id from being reused; extra; value)
        self._values: OrderedDict[int, tuple[Plan, Hashable, T]] = OrderedDict()

    def get(self, query_plan: Plan, extra: Hashable, compute: Callable[[], T]) -> T:
        found = self._values.get(id(query_plan))
        if found is not None and found[0] is query_plan and found[1] == extra:
            return found[2]
        value = compute()
        self._values[id(query_plan)] = (query_plan, extra, value)
        if len(self._values) > self._size:
            self._values.popitem(last=False)
        return value


def ledger_failure(error: StateStoreError, *, charged: Cost | None = None) -> QueryError:
    """The client's error for a state store that could not record a query: busy (locked
    by another process past the store's timeout), or unusable. Logged in one line."""
    stands = (
        f"the charge of {charged} stands (it was recorded before the query ran), but its "
        "outcome could not be recorded, so no answer is given (dpproxy records the query as "
        "failed as soon as the ledger can be written again)"
        if charged is not None
        else "nothing was charged"
    )
    if store_is_busy(error):
        logger.warning("the state store is busy; a statement was not answered: %s", error)
        return QueryError(
            LOCK_NOT_AVAILABLE,
            f"the budget ledger is busy (locked by another process); {stands}",
            hint="try again in a moment; if it stays busy, ask an admin to look at the dpproxy log",
        )
    logger.error("the state store failed; a statement was not answered: %s", error)
    return QueryError(
        IO_ERROR,
        f"the budget ledger cannot be used; {stands}",
        hint="ask an admin to look at the dpproxy log",
    )


def already_recorded(cost: Cost, reservation: Reservation) -> QueryError:
    """The client's error for a charged query whose reservation another dpproxy server
    sharing the ledger already finished: it took this server for stopped (its connection
    to the state database was lost for a moment) and recorded the query as failed."""
    logger.warning(
        "reservation %d was already recorded as failed by another server sharing the state "
        "store (this server's connection to it was lost); no answer was given",
        reservation.id,
    )
    return QueryError(
        OBJECT_NOT_IN_PREREQUISITE_STATE,
        f"the charge of {cost} stands, but no answer is given: another dpproxy server "
        "sharing the budget ledger already recorded this query as failed (this server's "
        "connection to the ledger was lost while the query ran)",
        hint="run the query again (it is charged again); if this happens often, ask an admin "
        "to look at the dpproxy log",
    )


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
    post: PostProcessor
    plans: PlanCache = field(default_factory=lambda: PlanCache(PLAN_CACHE_SIZE))
    answers: AnswerCache | None = None
    costs: PerPlan[Cost] = field(default_factory=lambda: PerPlan(PLAN_CACHE_SIZE))
    described: PerPlan[tuple[ColumnDescription, ...]] = field(
        default_factory=lambda: PerPlan(PLAN_CACHE_SIZE)
    )
    #: Planning's own threads, one job at a time per analyst (see Workers).
    planner: Workers = field(default_factory=lambda: Workers(PLANNING_THREADS, "dpproxy-plan"))
    #: Charged queries whose outcome is not recorded yet (see proxy.unrecorded).
    unrecorded: UnrecordedOutcomes = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.unrecorded = UnrecordedOutcomes(self.ledger)

    async def describe(
        self,
        asker: Asker,
        sql: str,
        epsilon: Epsilon,
        *,
        mechanism: Mechanism = Mechanism.LAPLACE,
        report: Report = "notice",
        delta: Decimal = Decimal(0),
        bias_check: bool = False,
    ) -> tuple[ColumnDescription, ...]:
        """The columns the query would return; plans it but runs and charges nothing."""
        try:
            query_plan = await self._plan(
                asker, sql, epsilon, mechanism, delta, bias_check=bias_check
            )
        except StateStoreError as error:  # recording a refusal failed
            raise ledger_failure(error) from None

        def columns() -> tuple[ColumnDescription, ...]:
            try:
                described = self.post.describe(query_plan.released_columns, query_plan.post_sql)
            except PostProcessError as error:
                raise QueryError(INTERNAL_ERROR, f"cannot describe the query: {error}") from None
            return described.columns

        described = Answer(self.described.get(query_plan, None, columns), ())
        intervals = _intervals(query_plan, report)
        # The _bias columns' values come with a release; their names and type do not.
        return with_intervals(described, intervals or (), ()).columns

    async def _plan(
        self,
        asker: Asker,
        sql: str,
        epsilon: Epsilon,
        mechanism: Mechanism,
        delta: Decimal,
        *,
        bias_check: bool,
    ) -> Plan:
        # ``delta``: what partition selection may spend (GROUP BY keys found in the data);
        # ``bias_check``: spend CHECK_SHARE of the query's ε (or ρ) on bias checks.
        request = PlanRequest(
            float(epsilon),
            self.backend.dialect,
            mechanism.value,
            float(delta),
            bias_check=bias_check,
        )
        cached = self.plans.get(asker.analyst, sql, request)
        if cached is not None:
            return cached
        try:
            # In a worker thread, so that the event loop keeps serving other sessions while
            # a long statement (thousands of terms) is planned; planning has threads of its
            # own, one at a time per analyst, so that one analyst's slow plans cannot hold
            # up the others'. Planning has no deadline of its own: the rewriter keeps its
            # work linear in the statement's size.
            made = await self.planner.run(asker.analyst, lambda: plan(sql, self.catalog, request))
        except Rejected as rejection:
            attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
            await self.ledger.refuse(attempt, Decision.REJECTED, rejection.message, asker.budget)
            raise QueryError(rejection.sqlstate, rejection.message, hint=rejection.hint) from None
        if made.constants:
            await self._evaluate_constants(asker, sql, made.constants)
        await self._check_post_processing(asker, sql, made)
        self.plans.put(asker.analyst, sql, request, made)
        return made

    async def _check_post_processing(self, asker: Asker, sql: str, made: Plan) -> None:
        """Post-processing (the select list's arithmetic, HAVING, ORDER BY, LIMIT) that
        fails whatever the values (a cast to a type the values cannot take, a number beyond
        DuckDB's range) would fail after the charge: it is tried now on a row of zeros and
        on a row of ones (``PostProcessor.check``), and such a query is refused, free."""

        def columns() -> tuple[ColumnDescription, ...]:
            return self.post.check(made.released_columns, made.post_sql)

        try:
            self.described.get(made, None, columns)
        except PostProcessError as error:
            logger.info("post-processing of a query of %s fails: %s", asker.analyst, error)
            message = (
                "the select list, HAVING or ORDER BY cannot be computed over the noisy "
                "answers (a cast to a type they cannot take, or a number out of range)"
            )
            attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
            await self.ledger.refuse(attempt, Decision.REJECTED, message, asker.budget)
            raise QueryError(
                "22000",
                message + "; nothing was charged",
                hint="check the arithmetic and casts of the select list, HAVING and ORDER BY",
            ) from None

    async def _evaluate_constants(
        self, asker: Asker, sql: str, found: tuple[Constant, ...]
    ) -> None:
        """Compute the query's constant expressions on their own (they read no table):
        DuckDB fails on a constant it cannot compute only on the rows that evaluate it, which
        would reveal whether such rows exist. A constant that fails refuses the query, free,
        before anything is charged (``rewriter.passes.constants``)."""
        try:
            await self.backend.fetch_all(evaluation_sql(found), CancelToken())
            return
        except BackendError as error:
            logger.info("a constant of a query of %s cannot be computed: %s", asker.analyst, error)
        failing = None
        for constant in found:
            try:
                await self.backend.fetch_all(evaluation_sql((constant,)), CancelToken())
            except BackendError:
                failing = constant
                break
        try:
            await self.backend.fetch_all("SELECT 1", CancelToken())
        except BackendError:
            failing = None
        if failing is None:
            raise QueryError(
                CONNECTION_FAILURE,
                "the database could not evaluate the query's constants; nothing was charged",
                hint="try again; if it keeps failing, ask an admin to look at the dpproxy log",
            )
        message = f"the constant {failing.written} cannot be computed by the database"
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        await self.ledger.refuse(attempt, Decision.REJECTED, message, asker.budget)
        raise QueryError(
            INVALID_PARAMETER_VALUE,
            message,
            hint="fix or remove it: a value out of its type's range, a text that is not a "
            "number or a date, or arithmetic that overflows",
        )

    async def answer(
        self,
        asker: Asker,
        sql: str,
        epsilon: Epsilon,
        token: CancelToken,
        *,
        mechanism: Mechanism = Mechanism.LAPLACE,
        report: Report = "notice",
        delta: Decimal = Decimal(0),
        bias_check: bool = False,
    ) -> StatementResult:
        """The noisy answer, charged. A state store that cannot record the query (locked
        by another process, or failing) refuses it with a clear error (ledger_failure)."""
        self.unrecorded.retry()
        try:
            return await self._answer(
                asker,
                sql,
                epsilon,
                token,
                mechanism=mechanism,
                report=report,
                delta=delta,
                bias_check=bias_check,
            )
        except StateStoreError as error:  # before the charge: nothing was charged
            raise ledger_failure(error) from None

    async def _answer(
        self,
        asker: Asker,
        sql: str,
        epsilon: Epsilon,
        token: CancelToken,
        *,
        mechanism: Mechanism,
        report: Report,
        delta: Decimal,
        bias_check: bool,
    ) -> StatementResult:
        started = time.perf_counter()
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        query_plan = await self._plan(asker, sql, epsilon, mechanism, delta, bias_check=bias_check)
        cost = self.costs.get(
            query_plan, (epsilon, delta), lambda: charge_for(query_plan, epsilon, delta)
        )
        key = CacheKey.of(asker.analyst, query_plan)
        version = None
        if self.answers is not None and self.answers.enabled:
            version = self.answers.version(await self.ledger.answer_cache_epoch())
            await self._stop_if_canceled(asker, attempt, token)
            hit = self.answers.get(key, version)
            if hit is not None:
                return await self._cached(
                    asker=asker,
                    attempt=attempt,
                    query_plan=query_plan,
                    hit=hit,
                    report=report,
                    bias_check=bias_check,
                    started=started,
                )
        # A cancel request or the statement timeout that came while the query was planned
        # stops it here, free: after the reservation, the charge would stand.
        await self._stop_if_canceled(asker, attempt, token)
        try:
            reservation = await self.ledger.reserve(attempt, cost, asker.budget)
        except (BudgetExhausted, PerQueryCapExceeded, ZcdpNeedsDelta) as refusal:
            if isinstance(refusal, GlobalBudgetExhausted):  # the figures: for the admin only
                logger.info(
                    "a query of %s was refused by the global budget: %s",
                    asker.analyst,
                    refusal.admin_detail,
                )
            await self.ledger.refuse(attempt, Decision.OVER_BUDGET, str(refusal), asker.budget)
            raise QueryError(
                CONFIGURATION_LIMIT_EXCEEDED,
                str(refusal),
                hint="SHOW dpproxy.epsilon shows the ε a query spends in this session",
            ) from None
        try:
            exact = await self.backend.fetch_all(query_plan.sql, token)
            released = query_plan.release(exact, self.noise)
            answer = self.post.run(released, query_plan.post_sql)
        except (BackendError, ReleaseError, PostProcessError) as failure:
            reason, error = _failed_after_charge(failure, cost, token)
            await self._complete(
                cost,
                reservation,
                decision=Decision.FAILED,
                reason=reason,
                rows=None,
                duration_ms=_ms_since(started),
            )
            logger.warning("query of %s failed after charge: %s", asker.analyst, failure)
            raise error from None
        except BaseException as failure:
            # Anything else (cancellation of the task, a bug): the attempt is still audited.
            # Only a shutdown cancels a statement (the server's grace period ran out).
            reason = (
                "interrupted: dpproxy was stopped before the query finished"
                if isinstance(failure, asyncio.CancelledError)
                else "internal error in dpproxy"
            )
            with contextlib.suppress(QueryError):  # logged; the original error goes on
                await self._complete(
                    cost,
                    reservation,
                    decision=Decision.FAILED,
                    reason=reason,
                    rows=None,
                    duration_ms=_ms_since(started),
                )
            raise
        # Not interrupted by a shutdown's cancellation: a query recorded as accepted is
        # answered (the server sends the answer, then ends the session).
        record = await _uninterrupted(
            self._complete(
                cost,
                reservation,
                decision=Decision.ACCEPTED,
                reason=None,
                rows=len(answer.rows),
                duration_ms=_ms_since(started),
            )
        )
        # Only an answer whose release is on record is given again for free.
        if self.answers is not None and version is not None:
            self.answers.put(key, released, cost, attempt.started_at, version)
        remaining = (
            record.remaining if record.remaining is not None else reservation.remaining_after
        )
        total = reservation.total if reservation.total is not None else asker.budget.total
        intervals = _intervals(query_plan, report)
        notes: tuple[Notice, ...] = ()
        if intervals is not None:
            answer = with_intervals(answer, intervals, released.bias)
        elif report == "columns":
            notes = (
                Notice(
                    message="dpproxy.report = columns: no _ci95 or _bias columns for this query",
                    detail="they are added when the select list names aggregates and "
                    "GROUP BY keys directly (no arithmetic on them); "
                    "see the other notice for the intervals of the aggregates and any bias",
                ),
            )
        result = _result(
            query_plan,
            released,
            answer,
            asker=asker,
            cost=cost,
            remaining=remaining,
            total=total,
            delta_left=reservation.delta_remaining if cost.delta else None,
            bias_check=bias_check,
        )
        return replace(result, notices=result.notices + notes)

    async def _stop_if_canceled(self, asker: Asker, attempt: Attempt, token: CancelToken) -> None:
        """57014 if ``token`` fired (a cancel request, or the session's statement timeout)
        before the charge: nothing is charged; the attempt is audited as an error."""
        if not token.canceled:
            return
        reason = f"canceled due to {token.reason} before the charge"
        await self.ledger.refuse(attempt, Decision.ERROR, reason, asker.budget)
        raise QueryError(
            QUERY_CANCELED,
            f"canceling statement due to {token.reason}",
            detail="the query was stopped before it was charged: nothing was charged",
        )

    async def audit_canceled(self, asker: Asker, sql: str, reason: str) -> None:
        """Audit a statement stopped by a cancel request or the statement timeout
        (``reason``, CancelToken.reason) before it reached the pipeline (while it was
        classified, or at Describe): as _stop_if_canceled, an error, nothing charged. A
        state store that cannot record it: ledger_failure."""
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        message = f"canceled due to {reason} before the charge"
        try:
            await self.ledger.refuse(attempt, Decision.ERROR, message, asker.budget)
        except StateStoreError as error:
            raise ledger_failure(error) from None

    async def _complete(
        self,
        cost: Cost,
        reservation: Reservation,
        *,
        decision: Decision,
        reason: str | None,
        rows: int | None,
        duration_ms: float,
    ) -> AuditRecord:
        """Record the outcome of a charged query. If the state store cannot (busy past its
        timeout, or failing), the charge recorded by the reservation stands and no answer
        is given: an answer is released only once its record is written. The query is then
        recorded as failed as soon as the store can be written (proxy.unrecorded). A
        reservation another server already finished: ``already_recorded``."""
        try:
            return await self.ledger.complete(
                reservation, decision=decision, reason=reason, rows=rows, duration_ms=duration_ms
            )
        except StateStoreError as error:
            self.unrecorded.add(reservation, decision, reason, duration_ms)
            raise ledger_failure(error, charged=cost) from None
        except ReservationError:
            raise already_recorded(cost, reservation) from None

    async def close(self) -> None:
        """Try once more to record the outcomes not recorded yet (proxy.unrecorded)."""
        await self.unrecorded.close()

    async def _cached(
        self,
        *,
        asker: Asker,
        attempt: Attempt,
        query_plan: Plan,
        hit: CachedAnswer,
        report: Report,
        bias_check: bool,
        started: float,
    ) -> StatementResult:
        """The noisy answer released before, again: post-processing, so no charge."""
        try:
            answer = self.post.run(hit.release, query_plan.post_sql)
        except PostProcessError as failure:
            await self.ledger.refuse(
                attempt,
                Decision.ERROR,
                f"post-processing a cached answer failed: {failure}",
                asker.budget,
            )
            raise QueryError(
                "22000",
                f"the noisy answer could not be post-processed: {failure.reason}",
                hint="check the casts and arithmetic of the select list, HAVING and ORDER BY",
            ) from None
        intervals = _intervals(query_plan, report)
        if intervals is not None:  # the flags of the first answer: they come with its release
            answer = with_intervals(answer, intervals, hit.release.bias)
        first = hit.released_at.isoformat(timespec="seconds")
        try:
            record = await self.ledger.cached(
                attempt,
                f"the same noisy answer as released at {first} (cost {hit.cost} then)",
                len(answer.rows),
                _ms_since(started),
                asker.budget,
            )
        except BudgetExhausted as refusal:  # the analyst was removed meanwhile
            await self.ledger.refuse(attempt, Decision.OVER_BUDGET, str(refusal), asker.budget)
            raise QueryError(CONFIGURATION_LIMIT_EXCEEDED, str(refusal)) from None
        remaining = record.remaining if record.remaining is not None else Epsilon.zero()
        notice = Notice(
            message=(
                f"dpproxy: this answer was cached: the same noisy answer as first released at "
                f"{first} UTC, at no new cost; {asker.analyst} has {remaining} left"
            ),
            detail=_detail(query_plan, hit.release, bias_check),
        )
        return StatementResult(
            tag=f"SELECT {len(answer.rows)}",
            columns=answer.columns,
            rows=answer.rows,
            notices=(notice,),
        )


async def _uninterrupted(work: Coroutine[Any, Any, T]) -> T:
    """``work``'s result, awaited to the end even if this task is cancelled meanwhile (the
    cancellation is then withdrawn: it came from a shutdown's grace period running out,
    and the server ends the session once this statement is answered)."""
    job = asyncio.ensure_future(work)
    withdrawn = False
    while True:
        try:
            result = await asyncio.shield(job)
        except asyncio.CancelledError:
            if job.cancelled():
                raise
            withdrawn = True
            continue
        break
    task = asyncio.current_task()
    if withdrawn and task is not None:
        task.uncancel()
    return result


def _failed_after_charge(
    failure: BackendError | ReleaseError | PostProcessError, cost: Cost, token: CancelToken
) -> tuple[str, QueryError]:
    """A charged query that failed: the reason its audit record gives, and the client's
    error (a cancel request's or the statement timeout's 57014, ``token.reason``)."""
    if isinstance(failure, QueryCanceled):
        return (
            f"{type(failure).__name__}: canceled due to {token.reason}",
            QueryError(
                QUERY_CANCELED,
                f"canceling statement due to {token.reason}; the charge of {cost} stands",
            ),
        )
    reason = f"{type(failure).__name__}: {failure}"
    if isinstance(failure, PostProcessError):
        return reason, QueryError(
            "22000",
            f"the noisy answer could not be post-processed: {failure.reason}; the "
            f"charge of {cost} stands",
            hint="check the casts and arithmetic of the select list, HAVING and "
            "ORDER BY (e.g. cast a count to bigint, not smallint)",
        )
    return reason, QueryError(
        sqlstate_for(failure),
        f"the query failed in the database; the charge of {cost} stands",
        hint="if it keeps failing, ask an admin to look at the dpproxy log",
    )


def _intervals(query_plan: Plan, report: Report) -> tuple[ReportColumn, ...] | None:
    if report != "columns":
        return None
    return interval_columns(query_plan.released_columns, query_plan.accuracy(), query_plan.post_sql)


def charge_for(query_plan: Plan, epsilon: Epsilon, delta: Decimal = Decimal(0)) -> Cost:
    """What the query is charged: its pure ε (Laplace) or ρ = ε²/2 rounded up (Gaussian),
    and ``delta`` when it releases GROUP BY keys found in the data (partition selection).
    Fails closed if the plan's own privacy maps exceed the charge."""
    if query_plan.gaussian:
        rho = Rho.from_nano(laplace_rho_nano(epsilon))
        loss, limit = query_plan.privacy_loss_rho(), float(rho)
        cost = Cost.zcdp(rho)
    else:
        loss, limit = query_plan.privacy_loss(), float(epsilon)
        cost = Cost.pure(epsilon)
    if not (math.isfinite(loss) and loss <= limit):
        raise QueryError(INTERNAL_ERROR, "internal error: the plan exceeds its privacy cost")
    if query_plan.selection is not None:
        spent = query_plan.privacy_loss_delta()
        if not (math.isfinite(spent) and 0 < spent <= float(delta)):
            raise QueryError(INTERNAL_ERROR, "internal error: the plan exceeds its δ")
        cost = cost.with_delta(delta)
    return cost


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0


def _result(
    query_plan: Plan,
    released: Release,
    answer: Answer,
    *,
    asker: Asker,
    cost: Cost,
    remaining: Epsilon,
    total: Epsilon,
    delta_left: Decimal | None = None,
    bias_check: bool = False,
) -> StatementResult:
    notice = Notice(
        message=(
            f"dpproxy: this answer cost {cost}; {asker.analyst} has {remaining} left of {total}"
            + (f" (at δ={_delta(asker.budget)})" if query_plan.gaussian else "")
            + (
                f"; δ={format_delta(delta_left)} left for partition selection"
                if delta_left is not None
                else ""
            )
        ),
        detail=_detail(query_plan, released, bias_check),
    )
    return StatementResult(
        tag=f"SELECT {len(answer.rows)}",
        columns=answer.columns,
        rows=answer.rows,
        notices=(notice,),
    )


def _detail(query_plan: Plan, released: Release, bias_check: bool = False) -> str:
    """The NOTICE's detail: the 95% interval of each aggregate's noise, the bounds, what
    the bias checks found (``SET dpproxy.bias_check = on``) and the free bias hints."""
    intervals = []
    for accuracy in released.accuracy:
        if accuracy.half_width_95 is not None:
            intervals.append(f"{accuracy.label} ±{format_width(accuracy.half_width_95)}")
        elif accuracy.note:
            intervals.append(f"{accuracy.label}: {accuracy.note}")
    groups = ""
    if query_plan.keys and query_plan.selection is not None:
        groups = (
            f" Each person counts in at most {query_plan.max_groups_per_unit} group(s). "
            "The groups are keys found in the data: a group is released only if its noisy "
            f"count of persons reaches {query_plan.selection.threshold} (partition selection); "
            f"{len(released.rows)} group(s) are released."
        )
    elif query_plan.keys:
        groups = (
            f" Each person counts in at most {query_plan.max_groups_per_unit} group(s); "
            f"{len(released.rows)} group(s) from the public domain are released."
        )
    warnings = "".join(f" Possible bias: {warning}." for warning in released.warnings)
    return (
        "95% confidence of the noise: " + "; ".join(intervals) + ". "
        f"Each person counts for at most {query_plan.max_rows_per_unit} row(s) of "
        f"{query_plan.table}; values are clamped to their declared bounds."
        + groups
        + _bias_checks(query_plan, released, bias_check)
        + warnings
    )


def _bias_checks(query_plan: Plan, released: Release, bias_check: bool) -> str:
    """What the bias checks found, or (checks asked for) that none applies."""
    budget = "ρ" if query_plan.gaussian else "ε"
    blind = "".join(f" Not checked: {note}." for note in query_plan.unchecked)
    if released.checks:
        return (
            f" Bias check ({CHECK_SHARE:.0%} of this query's {budget}): "
            + "; ".join(released.checks)
            + "."
            + blind
        )
    if bias_check:
        return (
            f" Bias check: none applies to this query, so none of its {budget} went to checks."
            + blind
        )
    return ""


def _delta(budget: AnalystBudget) -> str:
    return format_delta(budget.delta)


def format_width(width: float) -> str:
    if width >= 100:
        return f"{width:,.0f}"
    return f"{width:.3g}"
