"""The checks a query passes before it is charged; each one that fails refuses the query free
of charge and audits the refusal (``refuse``: ``Pipeline._refuse``).

While it is planned: constants the database cannot compute (:func:`evaluate_constants`) and
post-processing that fails whatever the values (:func:`check_post_processing`). Just before
the charge: an engine that cannot run it now (:func:`check_ready`) and a cancel request or
statement timeout that came first (:func:`stop_if_canceled`).

Apart from ``proxy.pipeline`` because each is a self-contained step whose only link to the
rest is the refusal it records; the pipeline decides when each runs. Logged under the
pipeline's logger (``dpproxy.pipeline``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from accountant import AnalystBudget, Attempt, Decision
from proxy.asker import Asker
from proxy.backends import Backend, BackendError, CancelToken, NotReady
from proxy.plan_cache import PerPlan
from proxy.postprocess import PostProcessError, PostProcessor
from proxy.seam import ColumnDescription, QueryError
from proxy.sqlstate import CONNECTION_FAILURE, INVALID_PARAMETER_VALUE, QUERY_CANCELED
from rewriter import Plan
from rewriter.passes.constants import Constant, evaluation_sql

logger = logging.getLogger("dpproxy.pipeline")

#: Audits an attempt refused before its charge (nothing charged), or refuses the statement
#: with ledger_failure if the state store cannot record it.
Refuse = Callable[[Attempt, Decision, str, AnalystBudget], Awaitable[None]]


async def check_post_processing(
    made: Plan,
    asker: Asker,
    sql: str,
    *,
    post: PostProcessor,
    described: PerPlan[tuple[ColumnDescription, ...]],
    refuse: Refuse,
) -> None:
    """Post-processing (the select list's arithmetic, HAVING, ORDER BY, LIMIT) that
    fails whatever the values (a cast to a type the values cannot take, a number beyond
    DuckDB's range) would fail after the charge: it is tried now on a row of zeros and
    on a row of ones (``PostProcessor.check``), and such a query is refused, free."""

    def columns() -> tuple[ColumnDescription, ...]:
        return post.check(made.released_columns, made.post_sql)

    try:
        described.get(made, None, columns)
    except PostProcessError as error:
        logger.info("post-processing of a query of %s fails: %s", asker.analyst, error)
        message = (
            "the select list, HAVING or ORDER BY cannot be computed over the noisy "
            "answers (a cast to a type they cannot take, or a number out of range)"
        )
        attempt = Attempt(analyst=asker.analyst, client_address=asker.address, sql=sql)
        await refuse(attempt, Decision.REJECTED, message, asker.budget)
        raise QueryError(
            "22000",
            message + "; nothing was charged",
            hint="check the arithmetic and casts of the select list, HAVING and ORDER BY",
        ) from None


async def evaluate_constants(
    found: tuple[Constant, ...], asker: Asker, sql: str, *, backend: Backend, refuse: Refuse
) -> None:
    """Compute the query's constant expressions on their own (they read no table):
    DuckDB fails on a constant it cannot compute only on the rows that evaluate it, which
    would reveal whether such rows exist. A constant that fails refuses the query, free,
    before anything is charged (``rewriter.passes.constants``)."""
    try:
        await backend.fetch_all(evaluation_sql(found), CancelToken())
        return
    except BackendError as error:
        logger.info("a constant of a query of %s cannot be computed: %s", asker.analyst, error)
    failing = None
    for constant in found:
        try:
            await backend.fetch_all(evaluation_sql((constant,)), CancelToken())
        except BackendError:
            failing = constant
            break
    try:
        await backend.fetch_all("SELECT 1", CancelToken())
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
    await refuse(attempt, Decision.REJECTED, message, asker.budget)
    raise QueryError(
        INVALID_PARAMETER_VALUE,
        message,
        hint="fix or remove it: a value out of its type's range, a text that is not a "
        "number or a date, or arithmetic that overflows",
    )


async def stop_if_canceled(
    asker: Asker, attempt: Attempt, token: CancelToken, *, refuse: Refuse
) -> None:
    """57014 if ``token`` fired (a cancel request, or the session's statement timeout)
    before the charge: nothing is charged; the attempt is audited as an error."""
    if not token.canceled:
        return
    reason = f"canceled due to {token.reason} before the charge"
    await refuse(attempt, Decision.ERROR, reason, asker.budget)
    raise QueryError(
        QUERY_CANCELED,
        f"canceling statement due to {token.reason}",
        detail="the query was stopped before it was charged: nothing was charged",
    )


async def check_ready(
    asker: Asker, attempt: Attempt, token: CancelToken, *, backend: Backend, refuse: Refuse
) -> None:
    """Backend.ready, just before the charge: an engine that cannot run the query now
    refuses it, free (08006, audited as an error; the engine's own words go to the
    server log only). A cancel that stopped the check is left to stop_if_canceled."""
    try:
        await backend.ready(token)
        return
    except BackendError as error:
        if token.canceled:
            return
        logger.warning("a query of %s was refused before its charge: %s", asker.analyst, error)
        restart = isinstance(error, NotReady) and error.needs_restart
    message = (
        "the database changed since dpproxy started (its tables, columns or keys differ)"
        if restart
        else "the database cannot be used now"
    )
    await refuse(attempt, Decision.ERROR, f"{message}; nothing was charged", asker.budget)
    raise QueryError(
        CONNECTION_FAILURE,
        f"{message}; nothing was charged",
        hint="ask an admin to restart dpproxy"
        if restart
        else "try again; if it keeps failing, ask an admin to look at the dpproxy log",
    )
