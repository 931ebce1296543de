"""The path of one query: plan, reserve, execute, release, commit (see DESIGN.md).

Fail closed: any error before the release means no rows. Only SQL produced by the
rewriter reaches the database. The charge is durable before the database is touched and
stands whatever happens after.

The steps around that path live apart: the checks that refuse a query free before its
charge (``proxy.pre_charge``), an answer from the answer cache (``proxy.cached_answers``),
an answer the SQL text shows to have no rows, free (``proxy.empty_answers``: LIMIT 0 …),
the wording of failures (``proxy.failures``), the NOTICE and interval columns of an answer
(``proxy.reporting``), the plan caches (``proxy.plan_cache``).

A client that goes away (``proxy.protocol.delivery``) stops its query: before the charge
for free, as a cancel request; after it, the charge stands and the query is recorded as
failed (CLIENT_LEFT_REASON, 0 rows), never as accepted. An answer is recorded as accepted
(or cached) only while its client is there, just before it is written to the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import math
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from functools import partial
from typing import Any, NoReturn, TypeVar

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
    StateStoreError,
    WriteOutcomeUnknown,
    ZcdpNeedsDelta,
)
from accountant.ledger import session_cost
from proxy import reporting
from proxy.answers import AnswerCache, CacheKey
from proxy.asker import Asker
from proxy.backends import Backend, BackendError, CancelToken
from proxy.cached_answers import answer_from_cache
from proxy.catalog.contents import Declared
from proxy.domain_values import answer_domain_values
from proxy.empty_answers import TableColumns, answer_without_rows, probe_columns, table_columns
from proxy.failures import (
    CLIENT_LEFT_REASON,
    already_recorded,
    answer_not_written,
    cached_answer_not_written,
    client_left,
    failed_after_charge,
    ledger_failure,
    stopped_by_disconnect,
)
from proxy.ledger import AsyncLedger
from proxy.plan_cache import PLAN_CACHE_SIZE, PerPlan, PlanCache
from proxy.postprocess import Answer, PostProcessError, PostProcessor, with_intervals
from proxy.pre_charge import (
    check_post_processing,
    check_ready,
    evaluate_constants,
    stop_if_canceled,
)
from proxy.protocol import delivery
from proxy.protocol.delivery import CLIENT_DISCONNECT, ClientLink
from proxy.reporting import Report
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import CONFIGURATION_LIMIT_EXCEEDED, INTERNAL_ERROR
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

logger = logging.getLogger("dpproxy.pipeline")

T = TypeVar("T")
#: Threads that plan queries (parsing and rewriting: CPU work, off the event loop).
PLANNING_THREADS = 4


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
    #: The time a statement arrives at (aware), which CURRENT_DATE, now() … read.
    wall_clock: Callable[[], datetime.datetime] = field(
        default=lambda: datetime.datetime.now(datetime.UTC)
    )
    #: table -> column -> the type the database declares (the catalog's types, which a
    #: row-level probe's answer takes: proxy.empty_answers); None: the rewriter's.
    declared: Declared | None = None
    #: Charged queries whose outcome is not recorded yet (see proxy.unrecorded).
    unrecorded: UnrecordedOutcomes = field(init=False, repr=False)
    #: The analyst's tables' columns as the catalog shows them, once a probe needs them.
    _shown: TableColumns | None = field(default=None, init=False, repr=False)

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
        time_zone: str = "UTC",
    ) -> tuple[ColumnDescription, ...]:
        """The columns the query would return; plans it but runs and charges nothing."""
        try:
            query_plan = await self._plan(
                asker, sql, epsilon, mechanism, delta, bias_check=bias_check, time_zone=time_zone
            )
        except StateStoreError as error:  # recording a refusal failed
            raise ledger_failure(error) from None
        return self._columns(query_plan, report)

    def _columns(self, query_plan: Plan, report: Report) -> tuple[ColumnDescription, ...]:
        """The columns of the plan's answer: a row-level probe's (proxy.empty_answers), or
        those of its post-processing, with their interval columns (``report``)."""
        no_rows = query_plan.no_rows
        if no_rows is not None and no_rows.columns is not None:
            if self._shown is None:
                self._shown = table_columns(self.catalog, self.declared)
            return probe_columns(no_rows.columns, self._shown)

        def columns() -> tuple[ColumnDescription, ...]:
            try:
                described = self.post.describe(query_plan.released_columns, query_plan.post_sql)
            except PostProcessError as error:
                raise QueryError(INTERNAL_ERROR, f"cannot describe the query: {error}") from None
            return described.columns

        described = Answer(self.described.get(query_plan, None, columns), ())
        intervals = reporting.intervals(query_plan, report)
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
        time_zone: str,
    ) -> Plan:
        # ``delta``: what partition selection may spend (GROUP BY keys found in the data);
        # ``bias_check``: spend CHECK_SHARE of the query's ε (or ρ) on bias checks;
        # ``time_zone``: the session's TimeZone, in which timestamps with time zone are read
        # (part of the request: plans, and answers, for other zones are others).
        request = PlanRequest(
            float(epsilon),
            self.backend.dialect,
            mechanism.value,
            float(delta),
            bias_check=bias_check,
            time_zone=time_zone,
        )
        cached = self.plans.get(asker.analyst, sql, request)
        if cached is not None:
            return cached  # a plan that reads no clock (below)
        # CURRENT_DATE, now() …: the time the statement arrived (rewriter.passes.current_time).
        clocked = replace(request, now=self.wall_clock())
        try:
            # In a worker thread, so that the event loop keeps serving other sessions while
            # a long statement (thousands of terms) is planned; planning has threads of its
            # own, one at a time per analyst, so that one analyst's slow plans cannot hold
            # up the others'. Planning has no deadline of its own: the rewriter keeps its
            # work linear in the statement's size.
            made = await self.planner.run(asker.analyst, lambda: plan(sql, self.catalog, clocked))
        except Rejected as rejection:
            attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
            await self._refuse(attempt, Decision.REJECTED, rejection.message, asker.budget)
            raise QueryError(rejection.sqlstate, rejection.message, hint=rejection.hint) from None
        if made.constants:
            await evaluate_constants(
                made.constants, asker, sql, backend=self.backend, refuse=self._refuse
            )
        await check_post_processing(
            made, asker, sql, post=self.post, described=self.described, refuse=self._refuse
        )
        if made.now is None:  # one that reads the clock is planned again each time
            self.plans.put(asker.analyst, sql, request, made)
        return made

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
        time_zone: str = "UTC",
    ) -> StatementResult:
        """The noisy answer, charged. A state store that cannot record the query (locked
        by another process, or failing) refuses it with a clear error (ledger_failure);
        the attempt is audited once the store can be written (proxy.unrecorded)."""
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        self.unrecorded.retry()
        # The client that asks (None outside a server's connection): its going away stops
        # the query as a cancel request would (token.reason: CLIENT_DISCONNECT).
        link = delivery.current()
        unwatch = link.when_gone(partial(token.cancel, CLIENT_DISCONNECT)) if link else None
        try:
            return await self._answer(
                asker,
                sql,
                epsilon,
                token,
                link,
                mechanism=mechanism,
                report=report,
                delta=delta,
                bias_check=bias_check,
                time_zone=time_zone,
            )
        except StateStoreError as error:  # before the charge (or a charge in doubt)
            if isinstance(error, WriteOutcomeUnknown) and error.attempt is not None:
                attempt = error.attempt  # its record settles the charge (StateStore)
            reason = f"the budget ledger could not be used ({error.problem}); nothing was charged"
            self.unrecorded.refused(attempt, Decision.ERROR, reason, asker.budget)
            raise ledger_failure(error) from None
        finally:
            if unwatch is not None:
                unwatch()

    async def _answer(
        self,
        asker: Asker,
        sql: str,
        epsilon: Epsilon,
        token: CancelToken,
        link: ClientLink | None,
        *,
        mechanism: Mechanism,
        report: Report,
        delta: Decimal,
        bias_check: bool,
        time_zone: str,
    ) -> StatementResult:
        started = time.perf_counter()
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        query_plan = await self._plan(
            asker, sql, epsilon, mechanism, delta, bias_check=bias_check, time_zone=time_zone
        )
        if query_plan.no_rows is not None:  # LIMIT 0, WHERE 1 = 0 …: free, nothing runs
            return await self._without_rows(
                query_plan, asker, attempt, token, link=link, report=report, started=started
            )
        if query_plan.domain_values:  # SELECT DISTINCT of public keys: free, nothing runs
            return await self._domain_values(
                query_plan, asker, attempt, token, link=link, started=started
            )
        cost = self.costs.get(
            query_plan, (epsilon, delta), lambda: charge_for(query_plan, epsilon, delta)
        )
        key = CacheKey.of(asker.analyst, query_plan)
        version = None
        if self.answers is not None and self.answers.enabled:
            version = self.answers.version(await self.ledger.answer_cache_epoch())
            if link is not None and link.gone:  # looked at again: one gone is neither recorded
                token.cancel(CLIENT_DISCONNECT)  # as cached nor charged (stop_if_canceled)
            await stop_if_canceled(asker, attempt, token, refuse=self._refuse)
            hit = self.answers.get(key, version)
            if hit is not None:
                cached = await answer_from_cache(
                    hit,
                    query_plan,
                    asker=asker,
                    attempt=attempt,
                    report=report,
                    bias_check=bias_check,
                    elapsed_ms=lambda: _ms_since(started),
                    post=self.post,
                    ledger=self.ledger,
                    refuse=self._refuse,
                )
                if link is not None:  # the server writes it at once, and says if it could
                    link.expect_answer(partial(cached_answer_not_written, attempt))
                return cached
        # The engine must be able to run it (a DuckDB file replaced since it was opened is
        # opened again, a live PostgreSQL connection is at hand), else it is refused, free.
        await check_ready(asker, attempt, token, backend=self.backend, refuse=self._refuse)
        # A cancel request or the statement timeout that came while the query was planned
        # stops it here, free: after the reservation, the charge would stand.
        await stop_if_canceled(asker, attempt, token, refuse=self._refuse)
        try:
            reservation = await self.ledger.reserve(attempt, cost, asker.budget)
        except (BudgetExhausted, PerQueryCapExceeded, ZcdpNeedsDelta) as refusal:
            if isinstance(refusal, GlobalBudgetExhausted):  # the figures: for the admin only
                logger.info(
                    "a query of %s was refused by the global budget: %s",
                    asker.analyst,
                    refusal.admin_detail,
                )
            await self._refuse(attempt, Decision.OVER_BUDGET, str(refusal), asker.budget)
            raise QueryError(
                CONFIGURATION_LIMIT_EXCEEDED,
                str(refusal),
                hint="SHOW dpproxy.epsilon shows the ε a query spends in this session",
            ) from None
        released, answer = await self._run_charged(
            query_plan,
            asker,
            attempt,
            token,
            charge=(cost, reservation),
            kept_as=(key, version),
            started=started,
        )
        if link is not None and link.gone:  # it went while the answer was made: not released
            await self._not_sent(asker, cost, reservation, started)
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
        # The server writes the answer at once and says whether it could (a client that
        # went while the record was written: the admin is warned, see answer_not_written).
        if link is not None:
            link.expect_answer(partial(answer_not_written, record))
        # Only an answer whose release is on record is given again for free.
        if self.answers is not None and version is not None:
            self.answers.put(key, released, cost, attempt.started_at, version)
        return reporting.charged_answer(
            query_plan,
            released,
            answer,
            asker=asker,
            cost=cost,
            reservation=reservation,
            record=record,
            report=report,
            bias_check=bias_check,
        )

    async def _without_rows(
        self,
        query_plan: Plan,
        asker: Asker,
        attempt: Attempt,
        token: CancelToken,
        *,
        link: ClientLink | None,
        report: Report,
        started: float,
    ) -> StatementResult:
        """A query whose SQL text alone shows that its answer has no rows, planned and
        checked: its columns, free (proxy.empty_answers). Stopped (free) as a cached
        answer is by a cancel request or a client gone first."""
        no_rows = query_plan.no_rows
        if no_rows is None:
            raise QueryError(INTERNAL_ERROR, "internal error: the query may have rows")
        columns = self._columns(query_plan, report)
        return await self._free(
            asker,
            attempt,
            token,
            link,
            lambda: answer_without_rows(
                no_rows,
                columns,
                asker=asker,
                attempt=attempt,
                elapsed_ms=lambda: _ms_since(started),
                ledger=self.ledger,
                refuse=self._refuse,
            ),
        )

    async def _domain_values(
        self,
        query_plan: Plan,
        asker: Asker,
        attempt: Attempt,
        token: CancelToken,
        *,
        link: ClientLink | None,
        started: float,
    ) -> StatementResult:
        """A query of public GROUP BY keys alone: their declared values, post-processed,
        free (proxy.domain_values). Stopped (free) as a cached answer is by a cancel
        request or a client gone first; a post-processing error is the query's, free."""

        async def answer() -> StatementResult:
            _, outcome = await self.planner.run(
                asker.analyst, partial(self._release, query_plan, [])
            )
            if isinstance(outcome, PostProcessError):  # of the declared values: not charged
                await self._refuse(attempt, Decision.REJECTED, outcome.reason, asker.budget)
                raise QueryError(
                    "22000",
                    f"the declared values could not be post-processed: {outcome.reason}; "
                    "nothing was charged",
                    hint="check the casts and arithmetic of the select list, HAVING and ORDER BY",
                )
            return await answer_domain_values(
                query_plan,
                outcome,
                asker=asker,
                attempt=attempt,
                elapsed_ms=lambda: _ms_since(started),
                ledger=self.ledger,
                refuse=self._refuse,
            )

        return await self._free(asker, attempt, token, link, answer)

    async def _free(
        self,
        asker: Asker,
        attempt: Attempt,
        token: CancelToken,
        link: ClientLink | None,
        answer: Callable[[], Awaitable[StatementResult]],
    ) -> StatementResult:
        """A free answer (nothing charged or reserved): stopped first, free, by a cancel
        request or a client gone, as a cached answer is; then ``answer()``, which the
        server writes at once, saying if it could."""
        if link is not None and link.gone:
            token.cancel(CLIENT_DISCONNECT)
        await stop_if_canceled(asker, attempt, token, refuse=self._refuse)
        result = await answer()
        if link is not None:
            link.expect_answer(partial(cached_answer_not_written, attempt))
        return result

    async def _run_charged(
        self,
        query_plan: Plan,
        asker: Asker,
        attempt: Attempt,
        token: CancelToken,
        *,
        charge: tuple[Cost, Reservation],
        kept_as: tuple[CacheKey, Hashable | None],
        started: float,
    ) -> tuple[Release, Answer]:
        """Run the charged query and release it, post-processed. A failure is recorded
        (the charge stands) and raised as the client's error. ``kept_as``: the answer
        cache's key and data version (None: the cache is off)."""
        cost, reservation = charge
        key, version = kept_as
        drawn: Release | None = None  # the noisy release, once drawn
        try:
            exact = await self.backend.fetch_all(query_plan.sql, token)
            # Off the event loop: thousands of groups take a second of noise draws, during
            # which every other session (and a cancel request) would wait.
            released, outcome = await self.planner.run(
                asker.analyst, partial(self._release, query_plan, exact)
            )
            if isinstance(outcome, PostProcessError):
                drawn = released
                raise outcome
            return released, outcome
        except (BackendError, ReleaseError, PostProcessError) as failure:
            if stopped_by_disconnect(failure, token):
                await self._not_sent(asker, cost, reservation, started)
            # A release drawn and charged whose post-processing failed (a cast too narrow
            # for a noisy value) is kept: the query asked again with its select list,
            # HAVING or ORDER BY corrected is answered from it at no new cost. Never a new
            # draw for free: only this release is kept, once its charge is on record.
            keep = self.answers if drawn is not None and version is not None else None
            reason, error = failed_after_charge(failure, cost, token, kept=keep is not None)
            await self._complete(
                cost,
                reservation,
                decision=Decision.FAILED,
                reason=reason,
                rows=None,
                duration_ms=_ms_since(started),
            )
            if keep is not None and drawn is not None:
                keep.put(key, drawn, cost, attempt.started_at, version)
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

    def _release(
        self, query_plan: Plan, exact: list[tuple[object, ...]]
    ) -> tuple[Release, Answer | PostProcessError]:
        """In a worker thread: the noisy release of ``exact`` and its post-processed answer,
        or why post-processing failed (the release is kept: see _answer)."""
        released = query_plan.release(exact, self.noise)
        try:
            return released, self.post.run(released, query_plan.post_sql)
        except PostProcessError as failure:
            return released, failure

    async def _not_sent(
        self, asker: Asker, cost: Cost, reservation: Reservation, started: float
    ) -> NoReturn:
        """The client went away before its charged answer was sent: recorded as failed
        with 0 rows (the charge stands), and the connection ends (client_left)."""
        await self._complete(
            cost,
            reservation,
            decision=Decision.FAILED,
            reason=CLIENT_LEFT_REASON,
            rows=0,
            duration_ms=_ms_since(started),
        )
        raise client_left(asker.analyst, reservation)

    async def audit_canceled(self, asker: Asker, sql: str, reason: str) -> None:
        """Audit a statement stopped by a cancel request or the statement timeout
        (``reason``, CancelToken.reason) before it reached the pipeline (while it was
        classified, or at Describe): as stop_if_canceled, an error, nothing charged. A
        state store that cannot record it: ledger_failure."""
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        message = f"canceled due to {reason} before the charge"
        await self._refuse(attempt, Decision.ERROR, message, asker.budget)

    async def audit_rejected(self, asker: Asker, sql: str, reason: str) -> None:
        """Audit a statement the session refused before it reached the pipeline (a COPY
        that dpproxy does not run: proxy.copy_statement) as the pipeline audits a query
        the rewriter rejects: nothing charged. A state store that cannot record it:
        ledger_failure."""
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        await self._refuse(attempt, Decision.REJECTED, reason, asker.budget)

    async def _refuse(
        self, attempt: Attempt, decision: Decision, reason: str, budget: AnalystBudget
    ) -> None:
        """Audit an attempt refused before its charge (nothing charged). A state store that
        cannot record it (busy, failing): the statement is refused with ledger_failure,
        and the record is written once the store can be written (proxy.unrecorded)."""
        try:
            await self.ledger.refuse(attempt, decision, reason, budget)
        except StateStoreError as error:
            self.unrecorded.refused(attempt, decision, reason, budget)
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


def charge_for(query_plan: Plan, epsilon: Epsilon, delta: Decimal = Decimal(0)) -> Cost:
    """What the query is charged: its pure ε (Laplace) or ρ = ε²/2 rounded up (Gaussian),
    and ``delta`` when it releases GROUP BY keys found in the data (partition selection).
    Fails closed if the plan's own privacy maps exceed the charge."""
    cost = session_cost(epsilon, gaussian=query_plan.gaussian)  # as the ledger's advice
    if query_plan.gaussian:
        loss, limit = query_plan.privacy_loss_rho(), float(cost.rho)
    else:
        loss, limit = query_plan.privacy_loss(), float(epsilon)
    if not (math.isfinite(loss) and loss <= limit):
        raise QueryError(INTERNAL_ERROR, "internal error: the plan exceeds its privacy cost")
    if query_plan.selection is not None:
        spent = query_plan.privacy_loss_delta()
        # 0 where the selection's δ is below the smallest double (ε of hundreds).
        if not (math.isfinite(spent) and 0 <= spent <= float(delta)):
            raise QueryError(INTERNAL_ERROR, "internal error: the plan exceeds its δ")
        cost = cost.with_delta(delta)
    return cost


def _ms_since(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
