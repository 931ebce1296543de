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
from typing import ClassVar

import sqlglot
from sqlglot import TokenType, exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.errors import ParseError, TokenError

from accountant import AuditRecord, Decision, Epsilon
from proxy.failures import CLIENT_LEFT_REASON, IN_THE_LOG
from proxy.responders import SessionContext
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import FEATURE_NOT_SUPPORTED
from rewriter.parse import MAX_SQL_LENGTH  # also keeps sqlglot's log of statements off

TEXT, NUMERIC, BIGINT, FLOAT8, TIMESTAMPTZ = 25, 1700, 20, 701, 1184

_QUERY = re.compile(
    r"""^\s*select\s+\*\s+from\s+"?dpproxy"?\s*\.\s*"?(my_budget|my_queries)"?
        (?:\s+limit\s+(\d{1,9}))?\s*;?\s*$""",
    re.IGNORECASE | re.VERBOSE,
)
_VIEWS = frozenset({"my_budget", "my_queries"})
_NAME_TOKENS = frozenset({TokenType.VAR, TokenType.IDENTIFIER})

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
            if _names_a_view(sql):
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


def _names_a_view(sql: str) -> bool:
    """Whether ``sql`` reads dpproxy.my_budget or dpproxy.my_queries: a table, or a column's
    table, of that name in the statement sqlglot reads (as the rewriter, dialect postgres).
    The same words in a string literal or a comment name nothing (pandas' ``read_sql`` asks
    whether its query's text is a table's name). A statement sqlglot keeps as text (EXPLAIN,
    PREPARE, DECLARE), or cannot read, names a view when its words do: ``dpproxy``, a dot and
    the view's name, as tokens (not in strings or comments)."""
    words = sql.lower()
    if "dpproxy" not in words or not any(view in words for view in _VIEWS):
        return False  # most statements: not parsed here
    if len(sql) > MAX_SQL_LENGTH:
        return True  # the rewriter would refuse it unread
    try:
        statements = sqlglot.parse(sql, read="postgres")
    except (ParseError, TokenError, RecursionError):
        return _words_name_a_view(sql)
    for statement in statements:
        for node in () if statement is None else statement.walk():
            if isinstance(node, exp.Command):
                return _words_name_a_view(sql)
            if isinstance(node, exp.Table) and _is_view(node.args.get("db"), node.this):
                return True
            if isinstance(node, exp.Column) and _is_view(
                node.args.get("db"), node.args.get("table")
            ):
                return True
    return False


def _is_view(schema: object, name: object) -> bool:
    return (
        isinstance(schema, exp.Identifier)
        and isinstance(name, exp.Identifier)
        and schema.name.lower() == "dpproxy"
        and name.name.lower() in _VIEWS
    )


class _Words(Postgres.Tokenizer):
    """PostgreSQL's words, those after EXPLAIN, PREPARE or DECLARE too (which sqlglot's
    tokenizer keeps as one string, as its parser keeps the statement as a Command)."""

    COMMANDS: ClassVar[set[TokenType]] = set()


def _words_name_a_view(sql: str) -> bool:
    """Whether the statement's words (not its strings or comments) hold ``dpproxy.my_budget``
    or ``dpproxy.my_queries``; a text sqlglot cannot split into words is taken to."""
    try:
        tokens = _Words().tokenize(sql)
    except TokenError:
        return True
    names = [t.text.lower() if t.token_type in _NAME_TOKENS else "" for t in tokens]
    dots = [t.token_type == TokenType.DOT for t in tokens]
    return any(
        names[i] == "dpproxy" and dots[i + 1] and names[i + 2] in _VIEWS
        for i in range(len(tokens) - 2)
    )


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
