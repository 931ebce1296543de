"""A query answered from the answer cache: the noisy answer released before, post-processed
again and audited, at no new cost (:func:`answer_from_cache`).

Apart from ``proxy.pipeline`` because it is a path of its own: nothing is reserved, no
noise is drawn and the engine is not touched; it ends with its own record and NOTICE.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from accountant import Attempt, BudgetExhausted, Decision, Epsilon
from proxy import reporting
from proxy.answers import CachedAnswer
from proxy.asker import Asker
from proxy.failures import audit_reason
from proxy.ledger import AsyncLedger
from proxy.postprocess import PostProcessError, PostProcessor, with_intervals
from proxy.pre_charge import Refuse
from proxy.reporting import Report
from proxy.seam import Notice, QueryError, StatementResult
from proxy.sqlstate import CONFIGURATION_LIMIT_EXCEEDED
from rewriter import Plan

logger = logging.getLogger(__name__)


async def answer_from_cache(
    hit: CachedAnswer,
    query_plan: Plan,
    *,
    asker: Asker,
    attempt: Attempt,
    report: Report,
    bias_check: bool,
    elapsed_ms: Callable[[], float],
    post: PostProcessor,
    ledger: AsyncLedger,
    refuse: Refuse,
) -> StatementResult:
    """The noisy answer released before, again: post-processing, so no charge.
    ``elapsed_ms``: the statement's duration so far, for its audit record."""
    try:
        answer = post.run(hit.release, query_plan.post_sql)
    except PostProcessError as failure:
        # The engine's message may quote the noisy value: the server log has it, the audit
        # record dpproxy's words only (docs/privacy.md), as for a charged answer.
        logger.warning("post-processing a cached answer for %s failed: %s", asker.analyst, failure)
        await refuse(
            attempt,
            Decision.ERROR,
            f"post-processing a cached answer failed: {audit_reason(failure)}",
            asker.budget,
        )
        raise QueryError(
            "22000",
            f"the noisy answer could not be post-processed: {failure.reason}; nothing was "
            "charged (the answer is the one charged before)",
            hint="check the casts and arithmetic of the select list, HAVING and ORDER BY",
        ) from None
    intervals = reporting.intervals(query_plan, report)
    if intervals is not None:  # the flags of the first answer: they come with its release
        answer = with_intervals(answer, intervals, hit.release.bias)
    first = hit.released_at.isoformat(timespec="seconds")
    remaining = await record_free(
        f"the same noisy answer as released at {first} (cost {hit.cost} then)",
        len(answer.rows),
        asker=asker,
        attempt=attempt,
        elapsed_ms=elapsed_ms,
        ledger=ledger,
        refuse=refuse,
    )
    notice = Notice(
        message=(
            f"dpproxy: this answer was cached: the same noisy answer as first released at "
            f"{first} UTC, at no new cost; {asker.analyst} has {remaining} left"
        ),
        detail=reporting.detail(query_plan, hit.release, bias_check),
    )
    return StatementResult(
        tag=f"SELECT {len(answer.rows)}",
        columns=answer.columns,
        rows=answer.rows,
        notices=(notice,),
    )


async def record_free(
    reason: str,
    rows: int,
    *,
    asker: Asker,
    attempt: Attempt,
    elapsed_ms: Callable[[], float],
    ledger: AsyncLedger,
    refuse: Refuse,
) -> Epsilon:
    """Audit an answer given at no cost (``cached``, with ``reason``) and return what the
    analyst has left; refused (over budget) if the analyst was removed meanwhile."""
    try:
        record = await ledger.cached(attempt, reason, rows, elapsed_ms(), asker.budget)
    except BudgetExhausted as refusal:
        await refuse(attempt, Decision.OVER_BUDGET, str(refusal), asker.budget)
        raise QueryError(CONFIGURATION_LIMIT_EXCEEDED, str(refusal)) from None
    return record.remaining if record.remaining is not None else Epsilon.zero()
