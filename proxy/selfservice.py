"""Analysts see their own budget and history in SQL, without being charged.

    SELECT * FROM dpproxy.my_budget;      -- one row: ε total, spent, left, per-query
                                          -- limits; δ total, spent, left
    SELECT * FROM dpproxy.my_queries;     -- every attempt of this analyst, oldest first
    SELECT * FROM dpproxy.my_queries LIMIT 20;   -- the newest 20

Answered from the state store, never from the data; only the asking analyst's own rows.
Amounts are the ledger's exact values, as PostgreSQL writes a numeric (``0.0000000015``,
never ``1.5e-9``): the δ columns are what partition selection spent (``accountant.ledger``).
Failed logins (which anyone can cause under any name) and admin changes are not shown.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal

from accountant import AuditRecord, Decision, Epsilon
from proxy.failures import CLIENT_LEFT_REASON, IN_THE_LOG
from proxy.responders import SessionContext
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import FEATURE_NOT_SUPPORTED

TEXT, NUMERIC, BIGINT, FLOAT8, TIMESTAMPTZ = 25, 1700, 20, 701, 1184

_QUERY = re.compile(
    r"""^\s*select\s+\*\s+from\s+"?dpproxy"?\s*\.\s*"?(my_budget|my_queries)"?
        (?:\s+limit\s+(\d{1,9}))?\s*;?\s*$""",
    re.IGNORECASE | re.VERBOSE,
)
_MENTIONS = re.compile(r"\bdpproxy\s*\.\s*\"?(my_budget|my_queries)\b", re.IGNORECASE)

#: What an analyst sees of their history: their own query attempts.
SHOWN_DECISIONS = (
    Decision.ACCEPTED,
    Decision.CACHED,  # a released answer sent again, at no cost
    Decision.FAILED,
    Decision.REJECTED,
    Decision.OVER_BUDGET,
    Decision.ERROR,
)

BUDGET_COLUMNS = (
    ColumnDescription("analyst", TEXT),
    ColumnDescription("epsilon_total", NUMERIC),
    ColumnDescription("epsilon_spent", NUMERIC),
    ColumnDescription("epsilon_remaining", NUMERIC),
    ColumnDescription("epsilon_default", NUMERIC),
    ColumnDescription("epsilon_per_query_max", NUMERIC),
    ColumnDescription("delta_total", NUMERIC),
    ColumnDescription("delta_spent", NUMERIC),
    ColumnDescription("delta_remaining", NUMERIC),
)
QUERY_COLUMNS = (
    ColumnDescription("id", BIGINT, 8),
    ColumnDescription("time", TIMESTAMPTZ, 8),
    ColumnDescription("client_address", TEXT),
    ColumnDescription("sql", TEXT),
    ColumnDescription("decision", TEXT),
    ColumnDescription("reason", TEXT),
    ColumnDescription("epsilon", NUMERIC),
    ColumnDescription("epsilon_remaining", NUMERIC),
    ColumnDescription("rows", BIGINT, 8),
    ColumnDescription("duration_ms", FLOAT8, 8),
    ColumnDescription("delta", NUMERIC),
)


class SelfServiceResponder:
    """Answers ``dpproxy.my_budget`` and ``dpproxy.my_queries``."""

    async def answer(self, sql: str, context: SessionContext) -> StatementResult | None:
        match = _QUERY.match(sql)
        if match is None:
            if _MENTIONS.search(sql):
                raise QueryError(
                    FEATURE_NOT_SUPPORTED,
                    "dpproxy.my_budget and dpproxy.my_queries can only be read whole",
                    hint="SELECT * FROM dpproxy.my_queries LIMIT 20",
                )
            return None
        view, limit = match.group(1).lower(), match.group(2)
        if view == "my_budget":
            return await _my_budget(context)
        return await _my_queries(context, None if limit is None else int(limit))


async def _my_budget(context: SessionContext) -> StatementResult:
    analyst = context.asker.analyst
    stored = await context.ledger.analyst(analyst)
    if stored is None:
        row: tuple[str | None, ...] = (analyst, "0", None, "0", None, None, "0", None, "0")
    else:
        budget = stored.budget
        row = (
            analyst,
            budget.total.plain,
            stored.spent.plain,
            stored.remaining.plain,
            budget.default_per_query.plain,
            budget.effective_cap.plain,
            plain_delta(budget.delta),
            plain_delta(stored.delta_spent),
            plain_delta(stored.delta_remaining),
        )
    return StatementResult(tag="SELECT 1", columns=BUDGET_COLUMNS, rows=(row,))


async def _my_queries(context: SessionContext, limit: int | None) -> StatementResult:
    records = await context.ledger.records(context.asker.analyst, SHOWN_DECISIONS)
    if limit is not None:
        records = records[-limit:] if limit else []
    rows = tuple(_query_row(r) for r in records)
    return StatementResult(tag=f"SELECT {len(rows)}", columns=QUERY_COLUMNS, rows=rows)


#: What an analyst reads for a query that failed after its charge in the database: a
#: reason stored by an older dpproxy held the database's text, which can quote stored values.
FAILED_REASON = "the query failed in the database; the charge stands (details: your admin)"
_POST_PROCESSED = re.compile(rf"PostProcessError: (.+); {re.escape(IN_THE_LOG)}")
_CANCELED = re.compile(r"QueryCanceled: (canceled due to .+)")


def failed_reason(stored: str | None) -> str:
    """What an analyst reads of a failed query's audit reason: what failed in dpproxy's
    words (post-processing, a cancel, a client gone), else FAILED_REASON."""
    if stored == CLIENT_LEFT_REASON:
        return stored
    post = _POST_PROCESSED.fullmatch(stored or "")
    if post is not None:
        return f"the noisy answer could not be post-processed: {post.group(1)}; the charge stands"
    canceled = _CANCELED.fullmatch(stored or "")
    if canceled is not None:
        return f"{canceled.group(1)}; the charge stands"
    return FAILED_REASON


def _query_row(record: AuditRecord) -> tuple[str | None, ...]:
    reason = failed_reason(record.reason) if record.decision is Decision.FAILED else record.reason
    return (
        str(record.id),
        _timestamp(record.started_at),
        record.client_address,
        record.sql,
        record.decision.value,
        reason,
        record.epsilon.plain,
        _amount(record.remaining),
        None if record.rows is None else str(record.rows),
        None if record.duration_ms is None else repr(round(record.duration_ms, 3)),
        plain_delta(record.delta or Decimal(0)),  # None: nothing spent (or before schema v4)
    )


def _timestamp(value: datetime) -> str:
    """PostgreSQL's text form of a timestamptz in UTC."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f+00")


def _amount(value: Epsilon | None) -> str | None:
    return None if value is None else value.plain


def plain_delta(value: Decimal) -> str:
    """δ exactly, in PostgreSQL's text form of a numeric: ``0.0000000015``, ``0``."""
    return format(value.normalize(), "f")
