"""A query of GROUP BY keys with public domains alone (``Plan.domain_values``, see
``rewriter.domain_values``: ``SELECT DISTINCT department FROM visits``, BI tools' lists of
a filter's values): answered with the domains' declared values, post-processed, free
(:func:`answer_domain_values`).

Apart from ``proxy.pipeline`` because it is a path of its own, as ``proxy.empty_answers``
is: nothing is reserved, no noise is drawn and the database is not touched (the cells come
from the configuration), so neither the answer, nor an error, nor the time it takes
depends on the data. It is audited as the answer cache's answers are, ``cached`` with ε 0,
its reason saying it was free and why.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from accountant import Attempt
from proxy.asker import Asker
from proxy.cached_answers import record_free
from proxy.ledger import AsyncLedger
from proxy.postprocess import Answer
from proxy.pre_charge import Refuse
from proxy.seam import Notice, StatementResult
from rewriter import Plan

#: What the audit record says.
AUDIT_REASON = (
    "free: the declared values of public GROUP BY domains, listed from the configuration; "
    "nothing was run or charged"
)


def key_names(query_plan: Plan) -> str:
    """The keys as the NOTICE names them: as written, their columns unqualified."""
    return ", ".join(
        k.written.transform(_unqualified).sql(dialect="postgres") for k in query_plan.keys
    )


def _unqualified(node: exp.Expr) -> exp.Expr:
    if isinstance(node, exp.Column) and node.table:
        return exp.column(node.this.copy())
    return node


async def answer_domain_values(
    query_plan: Plan,
    answer: Answer,
    *,
    asker: Asker,
    attempt: Attempt,
    elapsed_ms: Callable[[], float],
    ledger: AsyncLedger,
    refuse: Refuse,
) -> StatementResult:
    """``answer`` (the domains' cells, post-processed), audited (``cached``, ε 0)."""
    remaining = await record_free(
        AUDIT_REASON,
        len(answer.rows),
        asker=asker,
        attempt=attempt,
        elapsed_ms=elapsed_ms,
        ledger=ledger,
        refuse=refuse,
    )
    notice = Notice(
        message=(
            f"dpproxy: the declared values of {key_names(query_plan)} (a public domain), "
            f"answered from the configuration without reading the data, at no cost; "
            f"{asker.analyst} has {remaining} left"
        ),
        detail="a query of GROUP BY keys with a public domain alone lists every declared "
        "value, whether or not the data holds it (as a count grouped by them releases a row "
        "for each); ask for COUNT(*) beside them to see how many rows each has",
    )
    return StatementResult(
        tag=f"SELECT {len(answer.rows)}",
        columns=answer.columns,
        rows=answer.rows,
        notices=(notice,),
    )
