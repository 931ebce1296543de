"""System responders: queries dpproxy answers from metadata, never from data.

Catalog browsing (psql's \\dt, JDBC's DatabaseMetaData, ...) and the analyst's own budget
views are answered here, before the DP pipeline, without touching the database's data and
without charging any budget. A responder returns None for a query that is not its own; the
session then tries the next responder and finally the DP pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from proxy.asker import Asker
from proxy.backends import USER_REQUEST, CancelToken
from proxy.catalog.session_values import NO_CURSORS, SessionCursors
from proxy.ledger import AsyncLedger
from proxy.parameter_table import spelling
from proxy.seam import ColumnDescription, QueryError, StatementResult
from proxy.sqlstate import QUERY_CANCELED
from rewriter import Catalog

TEXT_OID = 25


@dataclass(frozen=True)
class SessionContext:
    """What a responder may know about the session asking."""

    asker: Asker
    database: str
    parameters: Mapping[str, str]
    catalog: Catalog
    ledger: AsyncLedger
    #: Fired by a cancel request for the statement being answered (AnalystSession.cancel)
    #: or by the session's statement_timeout.
    cancel: CancelToken = field(default_factory=CancelToken)
    #: pg_settings.parameters_key(parameters), which the session computes once per change
    #: of its parameters; "" if not given (the responder computes it).
    parameters_key: str = ""
    #: The cursors open in this session (the rows of its pg_cursors), made again only
    #: when they change.
    cursors: SessionCursors = NO_CURSORS


class Responder(Protocol):
    async def answer(self, sql: str, context: SessionContext) -> StatementResult | None:
        """The full result if this responder owns ``sql``, else None. Raise QueryError to
        refuse, and ``canceled(context.cancel.reason)`` once ``context.cancel`` fires
        while it waits (``owned_canceled`` once it knows ``sql`` is its own: the session
        audits the others, which may have been DP queries). Must not read data nor charge
        budget: Describe calls it too."""
        ...


def canceled(reason: str = USER_REQUEST) -> QueryError:
    """PostgreSQL's error for a statement stopped before it was charged (system answers
    never are) by a cancel request or by the session's statement_timeout (``reason``,
    CancelToken.reason)."""
    return QueryError(QUERY_CANCELED, f"canceling statement due to {reason}")


class OwnedStatementCanceled(QueryError):
    """canceled() of a statement a responder owns (a catalog query stopped while it ran):
    not a DP query, so not audited."""


def owned_canceled(reason: str = USER_REQUEST) -> QueryError:
    """As canceled(), for a statement the responder knows is its own."""
    return OwnedStatementCanceled(QUERY_CANCELED, f"canceling statement due to {reason}")


SHOW_ALL_COLUMNS = (
    ColumnDescription("name", TEXT_OID),
    ColumnDescription("setting", TEXT_OID),
    ColumnDescription("description", TEXT_OID),
)
_DESCRIPTIONS = {
    "dpproxy.epsilon": "ε that each query of this session spends (SET dpproxy.epsilon = 0.5)",
    "dpproxy.mechanism": "noise of the next answers: laplace (pure ε) or gaussian (zCDP)",
    "dpproxy.delta": "δ a query may spend on partition selection (GROUP BY keys from the data)",
    "dpproxy.report": "notice: 95% intervals in a NOTICE; columns: also <name>_ci95, <name>_bias",
    "dpproxy.bias_check": "on: 10% of each query's ε (or ρ) counts persons clamped or cut",
    "search_path": "kept for clients; dpproxy tables are in schema public",
    "application_name": "the name the client application gave",
}


def show_all(settings: Mapping[str, str]) -> StatementResult:
    """SHOW ALL: every session parameter (name as PostgreSQL spells it: TimeZone, setting,
    description), sorted by name."""
    rows = tuple(
        (spelling(name), settings[name], _DESCRIPTIONS.get(name, "")) for name in sorted(settings)
    )
    return StatementResult(tag="SHOW", columns=SHOW_ALL_COLUMNS, rows=rows)
